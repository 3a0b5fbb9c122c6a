"""Spec checks that need the model's architecture (tensor/pipeline parallel, LoRA targets).

`vramtui.spec` re-exports `validate_against_architecture`.
"""

from __future__ import annotations

from vramtui.models.architecture import Architecture
from vramtui.spec_table import (
    _fail,
    _suggest,
)
from vramtui.spec_types import (
    ALL_LINEAR,
    Spec,
)

# --------------------------------------------------------------------------------------------
# Checks that need the model's architecture
# --------------------------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _kv_heads_split(tp: int, arch: Architecture) -> bool:
    """vLLM-style TP: KV heads are split when tp divides them, replicated when they divide tp."""
    kv = arch.num_kv_heads
    if arch.mla is not None or kv <= 0:
        return True
    return kv % tp == 0 or tp % kv == 0


def validate_against_architecture(spec: Spec, arch: Architecture, source: str = "<spec>") -> None:
    """Raise SpecError (one line) when the spec cannot run on this model's architecture."""
    model = arch.model_id or spec.model.label
    heads = arch.num_attention_heads
    tp = spec.placement.tensor_parallel
    valid = [d for d in _divisors(heads) if _kv_heads_split(d, arch)] if heads > 0 else [1]
    valid_text = ", ".join(map(str, valid))
    if heads > 0 and heads % tp:
        raise _fail(
            f"placement.tensor_parallel = {tp} does not divide the {heads} attention heads of "
            f"{model} "
            f"({source}); use one of {valid_text}"
        )
    if not _kv_heads_split(tp, arch):
        raise _fail(
            f"placement.tensor_parallel = {tp} cannot split the {arch.num_kv_heads} key/value "
            "heads of "
            f"{model} ({source}); use one of {valid_text}"
        )

    pp = spec.placement.pipeline_parallel
    if pp > arch.num_layers:
        raise _fail(
            f"placement.pipeline_parallel = {pp} exceeds the {arch.num_layers} layers of {model} "
            f"({source}); use at most {arch.num_layers} pipeline stages"
        )

    lora = spec.task.lora
    if lora is None or lora.targets == (ALL_LINEAR,):
        return
    modules = arch.modules()
    linear = sorted({m.name for m in modules if m.lora_adaptable})
    other = {m.name: m for m in modules if not m.lora_adaptable}
    for target in lora.targets:
        leaf = target.rsplit(".", 1)[-1]
        if leaf in linear:
            continue
        linear_text = ", ".join(linear) if linear else "none"
        if leaf in other:
            raise _fail(
                f"task.lora.targets entry '{target}' is a {other[leaf].kind} module of {model}, "
                "not an nn.Linear "
                f"layer LoRA can adapt ({source}); target linear layers: {linear_text}"
            )
        close = _suggest(leaf, linear)
        hint = f"did you mean '{close}'? " if close else ""
        raise _fail(
            f"task.lora.targets entry '{target}' matches no module of {model} ({source}); "
            f"{hint}linear layers: {linear_text}"
        )
