"""Command-line overrides of a spec, applied to its TOML form and validated like a file."""

from __future__ import annotations

import sys

from pathlib import Path

from vramtui.errors import SpecError
from vramtui.fsutil import user_path
from vramtui.spec import Spec, load_spec, spec_from_dict, spec_to_dict

# Stated defaults when --task switches a spec to training (printed in `estimate --help`).
TRAINING_DEFAULTS = {
    "optimizer": "adamw",
    "master_weights_fp32": True,
    "grad_dtype": "bf16",
    "optimizer_state_dtype": "fp32",
    "grad_checkpointing": "none",
}
LORA_DEFAULTS = {"rank": 16, "alpha": 32, "targets": ["all-linear"]}


def load_base_spec(path: str | None) -> tuple[Spec, Path | None]:
    if path is None:
        from vramtui.builtin_specs import seed_example_spec

        return seed_example_spec(), None
    p = user_path(path)
    return load_spec(p), p.resolve().parent


def apply_overrides(spec: Spec, args) -> Spec:
    """Return `spec` with the command line's explicit choices; untouched when none are given."""
    d = spec_to_dict(spec)
    changed = False

    def put(table: str, key: str, value) -> None:
        nonlocal changed
        if value is not None:
            d.setdefault(table, {})[key] = value
            changed = True

    if args.model:
        from vramtui.models.resolve import looks_like_path, model_ref_too_long

        too_long = model_ref_too_long(args.model, "--model")
        if too_long:
            raise SpecError(too_long)

        d["model"] = {"path": args.model} if looks_like_path(args.model) else {"id": args.model}
        if d.get("headroom", {}).get("mode") == "manual" and spec.model.params is not None:
            # The seed example's reserve stands in for a missing architecture; a real model
            # gets the itemised ledger.
            leave_manual_reserve(d)
        changed = True
    if args.task and args.task != spec.task.kind:
        for note in switch_task(d, args.task):
            from vramtui.safe_text import safe_line

            print(f"vramtui: note: {safe_line(note)}", file=sys.stderr)
        changed = True
    kind = d["task"]["kind"]
    training = kind != "inference"
    if args.weight_format:
        d["weights"] = weights_for_format(args.weight_format, d.get("weights", {}))
        changed = True
    put("runtime", "kv_cache_dtype", args.kv_dtype)
    put("runtime", "attention", args.attention)
    put("runtime", "engine", args.engine)
    if ("llama_cpp" in d) and (training or d["runtime"].get("engine") != "llama.cpp"):
        d.pop("llama_cpp")  # llama.cpp's settings mean nothing to another engine or training
    if args.seq is not None:
        put("lengths", "seq_len" if training else "prompt_tokens", args.seq)
    put("lengths", "generated_tokens", args.generate)
    if args.batch is not None:
        put("batch", "micro_batch" if training else "concurrency", args.batch)
    put("batch", "grad_accum", args.grad_accum)
    put("placement", "gpus", args.gpus)
    put("placement", "tensor_parallel", args.tp)
    put("placement", "pipeline_parallel", args.pp)
    put("placement", "data_parallel_sharding", args.sharding)
    put("training", "grad_checkpointing", args.checkpointing)
    put("training", "optimizer", args.optimizer)
    if args.lora_rank is not None or args.lora_targets:
        lora = d.setdefault("task", {}).setdefault("lora", dict(LORA_DEFAULTS))
        if args.lora_rank is not None:
            lora["rank"] = args.lora_rank
        if args.lora_targets:
            lora["targets"] = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
        changed = True
    if not changed:
        return spec
    return spec_from_dict(d, source="the command line")


def weights_for_format(fmt: str, old: dict) -> dict:
    """The [weights] table for a new default format, keeping what still applies and filling
    the keys the format needs with common values (shown to the user, never hidden)."""
    w = {"format": fmt}
    if fmt in ("nf4", "fp4"):
        w["double_quant"] = old.get("double_quant", True)
    if fmt in ("gptq", "awq"):
        w["bits"] = old.get("bits", 4)
        w["group_size"] = old.get("group_size", 128)
    if fmt == "gguf":
        w["gguf_type"] = old.get("gguf_type", "Q4_K")
    if old.get("groups"):
        w["groups"] = dict(old["groups"])
    return w


def leave_manual_reserve(d: dict) -> float | None:
    """Turn the TOML-shaped spec `d`'s manual reserve into the itemised ledger in place,
    keeping its safety margin; returns the reserve it had (GiB)."""
    headroom = d.get("headroom", {})
    d["headroom"] = {"mode": "itemised"}
    if "margin_fraction" in headroom:
        d["headroom"]["margin_fraction"] = headroom["margin_fraction"]
    return headroom.get("reserve_gib")


def switch_task(d: dict, kind: str) -> list[str]:
    """Turn the TOML-shaped spec `d` into a `kind` task in place, keeping what carries over
    (length, batch, placement) and filling the tables the new task needs with stated defaults.
    Returns what else changed, in words (the caller shows it): a manual reserve chosen for one
    task says nothing about another's gradients, optimiser states, KV cache or activations, so
    a task switch turns the headroom to the itemised ledger."""
    old_kind = d.get("task", {}).get("kind")
    notes: list[str] = []
    if kind != old_kind and d.get("headroom", {}).get("mode") == "manual":
        reserve = leave_manual_reserve(d)
        notes.append(
            f"headroom switched from a manual {reserve} GiB reserve to the itemised ledger: "
            f"a reserve chosen for {old_kind} does not cover what {kind} adds"
            + (" (gradients, optimiser states, activations)" if kind != "inference" else "")
        )
    lengths, batch = d.get("lengths", {}), d.get("batch", {})
    runtime = d.setdefault("runtime", {})
    if kind == "inference":
        d["lengths"] = {"prompt_tokens": lengths.get("seq_len", 2048), "generated_tokens": 256}
        d["batch"] = {"concurrency": batch.get("micro_batch", 1)}
        d.pop("training", None)
        d["task"] = {"kind": kind}
        runtime.setdefault("kv_cache_dtype", "bf16")
        d.get("placement", {}).pop("data_parallel_sharding", None)
        return notes
    if old_kind == "inference" or "seq_len" not in lengths:
        context = lengths.get("prompt_tokens", 0) + lengths.get("generated_tokens", 0)
        d["lengths"] = {"seq_len": context or 2048}
        d["batch"] = {
            "micro_batch": batch.get("concurrency", batch.get("micro_batch", 1)),
            "grad_accum": batch.get("grad_accum", 1),
        }
    d.setdefault("training", dict(TRAINING_DEFAULTS))
    runtime.pop("kv_cache_dtype", None)
    runtime.pop("kv_block_tokens", None)
    lora = d.get("task", {}).get("lora")
    d["task"] = {"kind": kind}
    if kind in ("lora", "qlora"):
        d["task"]["lora"] = lora or dict(LORA_DEFAULTS)
    if kind == "qlora":
        d["weights"] = {"format": "nf4", "double_quant": True}
    elif d.get("weights", {}).get("format") not in ("fp32", "bf16", "fp16"):
        d["weights"] = {"format": "bf16"}
    return notes


def use_model_dtype(
    spec: Spec,
    arch,
    keep_weight_format: bool = False,
    keep_kv_dtype: bool = False,
    keep_engine: bool = False,
) -> Spec:
    """The built-in example is fp16; a real model given on the command line keeps its dtype,
    or the format its quantization_config declares (for the weights unless --format chose one,
    and its dtype for the KV cache). A GGUF model is sized as stored (format gguf, its main
    type) and, unless --engine chose one, for llama.cpp."""
    from vramtui.models.gguf_file import gguf_main_type
    from vramtui.models.quantization import weights_from_quantization_config

    model_dtype = arch.default_dtype if arch.default_dtype in ("bf16", "fp16") else "bf16"
    d = spec_to_dict(spec)
    gguf_type = gguf_main_type(arch)
    if gguf_type is not None:
        if not keep_weight_format:
            d["weights"] = {"format": "gguf", "gguf_type": gguf_type}
        if not keep_engine and spec.task.kind == "inference":
            d.setdefault("runtime", {})["engine"] = "llama.cpp"
    elif not keep_weight_format and spec.weights.format in ("bf16", "fp16"):
        stored = weights_from_quantization_config(arch.quantization_config)
        d["weights"] = stored or {"format": model_dtype}
    runtime = d.get("runtime", {})
    if (
        not keep_kv_dtype
        and "kv_cache_dtype" in runtime
        and spec.runtime.kv_cache_dtype
        in (
            "bf16",
            "fp16",
        )
    ):
        d["runtime"]["kv_cache_dtype"] = model_dtype
    new = spec_from_dict(d, source="the command line")
    return spec if new == spec else new


def gguf_form_defaults(form: dict, arch) -> list[str]:
    """A GGUF model named in the form is sized as stored and, for inference, for llama.cpp
    (as `--model file.gguf` on the command line): set those in the TOML-shaped `form`.
    Returns what was changed, in words (nothing for a model that is not a GGUF file)."""
    from vramtui.models.gguf_file import gguf_main_type

    gguf_type = gguf_main_type(arch) if arch is not None else None
    if gguf_type is None:
        return []
    notes = []
    weights = form.get("weights", {})
    if weights.get("format") != "gguf" or weights.get("gguf_type") != gguf_type:
        form["weights"] = {"format": "gguf", "gguf_type": gguf_type}
        notes.append(f"weights set to gguf {gguf_type}, as the GGUF file stores them")
    runtime = form.setdefault("runtime", {})
    if form.get("task", {}).get("kind") == "inference" and runtime.get("engine") != "llama.cpp":
        runtime["engine"] = "llama.cpp"
        notes.append("engine set to llama.cpp, which runs GGUF files (its settings: llama.cpp)")
    return notes
