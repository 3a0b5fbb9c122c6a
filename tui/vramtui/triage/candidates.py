"""The single spec changes worth trying after an out-of-memory error at a given stage: each
a (variable, change in words, field edits, what to re-check) tuple; `advice` predicts them."""

from __future__ import annotations

from vramtui.spec import Spec


def _quality_recheck(spec: Spec, what: str) -> str:
    if spec.quality:
        crit = "; ".join(f"{q.metric} {q.threshold}" for q in spec.quality)
        return f"{what}: re-check the quality criteria ({crit})"
    return f"{what}: re-check output quality (the spec states no quality criterion yet)"


def candidate_edits(
    spec: Spec, phase: str, kv_cache_event: bool = False
) -> list[tuple[str, str, dict, str]]:
    """(variable, change in words, field edits, recheck) for the phase. `kv_cache_event`: the
    error is a serving engine's KV cache too small for one sequence at max_model_len (raised at
    start-up, so the phase reads `load`): the cache's dtype and the context are the levers,
    the concurrency is not (the engine checks one sequence)."""
    out = []
    b, le, rt, tr = spec.batch, spec.lengths, spec.runtime, spec.training
    fmt = spec.weights.format
    serving = phase in ("generate", "unknown") or kv_cache_event
    if serving and not spec.is_training:
        if b.concurrency and b.concurrency > 1 and not kv_cache_event:
            new = max(1, b.concurrency // 2)
            out.append(
                (
                    "cache",
                    f"concurrency {b.concurrency} -> {new}",
                    {"batch.concurrency": new},
                    f"coverage: the spec requires {b.concurrency} concurrent sequences; "
                    f"{new} is acceptable only if that requirement changes (or add replicas)",
                )
            )
        if rt.kv_cache_dtype in ("bf16", "fp16", "fp32"):
            out.append(
                (
                    "cache",
                    f"KV cache dtype {rt.kv_cache_dtype} -> fp8",
                    {"runtime.kv_cache_dtype": "fp8"},
                    _quality_recheck(spec, "an fp8 KV cache can change outputs"),
                )
            )
        ctx = le.prompt_tokens + le.generated_tokens
        if le.prompt_tokens > 1:
            new_prompt = max(1, le.prompt_tokens // 2)
            out.append(
                (
                    "cache",
                    f"prompt tokens {le.prompt_tokens:,} -> {new_prompt:,}",
                    {"lengths.prompt_tokens": new_prompt},
                    f"coverage: the required length is {ctx:,} tokens; a shorter window does "
                    "not validate the announced workload",
                )
            )
    if phase in ("load", "generate", "unknown") and not spec.is_training:
        for new_fmt, extra in (("fp8", {}), ("int8", {}), ("nf4", {"weights.double_quant": True})):
            if fmt in ("bf16", "fp16", "fp32") and new_fmt != fmt:
                edits = {"weights.format": new_fmt, **extra}
                if spec.weights.groups:
                    edits["weights.groups"] = None
                out.append(
                    (
                        "precision",
                        f"weights {fmt} -> {new_fmt}",
                        edits,
                        _quality_recheck(spec, f"{new_fmt} weights change the model's outputs"),
                    )
                )
    if spec.is_training and phase in ("train_forward", "backward", "unknown"):
        if b.micro_batch and b.micro_batch > 1:
            new = max(1, b.micro_batch // 2)
            acc = b.grad_accum * b.micro_batch // new
            out.append(
                (
                    "micro_batch",
                    f"micro_batch {b.micro_batch} -> {new}, grad_accum {b.grad_accum} -> {acc}"
                    " (effective batch kept)",
                    {"batch.micro_batch": new, "batch.grad_accum": acc},
                    "none for quality (same effective batch); steps take longer",
                )
            )
        if tr.grad_checkpointing != "full":
            out.append(
                (
                    "activation",
                    f"gradient checkpointing {tr.grad_checkpointing} -> full",
                    {"training.grad_checkpointing": "full"},
                    "none for quality; about a third more compute per step",
                )
            )
        if rt.attention == "eager":
            out.append(
                (
                    "activation",
                    "attention eager -> flash",
                    {"runtime.attention": "flash"},
                    "none for quality; needs an Ampere or newer card",
                )
            )
    if spec.is_training and phase in ("optimizer_step", "unknown"):
        if tr.optimizer == "adamw":
            out.append(
                (
                    "precision",
                    "optimizer adamw -> adamw_8bit",
                    {"training.optimizer": "adamw_8bit", "training.optimizer_state_dtype": None},
                    _quality_recheck(spec, "8-bit optimiser states can change convergence"),
                )
            )
    # Switching LoRA to QLoRA changes the task itself, so it is never proposed here.
    return out
