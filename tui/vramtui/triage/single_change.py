"""One variable per triage change: which variable each spec field belongs to, the diff of two
specs, and `check_single_change`, which refuses an edit that touches two variables."""

from __future__ import annotations

from vramtui.errors import VramtuiError
from vramtui.spec import Spec, spec_from_dict, spec_to_dict

# Which variable each spec field belongs to. Fields not listed change the workload itself.
VARIABLE_OF_FIELD = {
    "placement.gpus": "capacity",
    "placement.tensor_parallel": "capacity",
    "placement.pipeline_parallel": "capacity",
    "placement.data_parallel_sharding": "capacity",
    "lengths.prompt_tokens": "cache",
    "lengths.generated_tokens": "cache",
    "batch.concurrency": "cache",
    "runtime.kv_cache_dtype": "cache",
    "runtime.kv_block_tokens": "cache",
    "batch.micro_batch": "micro_batch",
    "batch.grad_accum": "micro_batch",
    "weights.format": "precision",
    "weights.double_quant": "precision",
    "weights.bits": "precision",
    "weights.group_size": "precision",
    "weights.gguf_type": "precision",
    "weights.groups": "precision",
    "training.optimizer": "precision",
    "training.optimizer_state_dtype": "precision",
    "training.grad_dtype": "precision",
    "training.master_weights_fp32": "precision",
    "training.grad_checkpointing": "activation",
    "runtime.attention": "activation",
}
# Bookkeeping that is not a workload variable.
IGNORED_FIELDS = ("name", "description", "triage", "measured", "campaign", "quality")


def _flatten(d: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and key != "weights.groups":
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def spec_diff(before: Spec, after: Spec) -> dict[str, tuple[object, object]]:
    a, b = _flatten(spec_to_dict(before)), _flatten(spec_to_dict(after))
    out = {}
    for key in sorted(set(a) | set(b)):
        if key.split(".")[0] in IGNORED_FIELDS:
            continue
        if a.get(key) != b.get(key):
            out[key] = (a.get(key), b.get(key))
    return out


def variables_changed(before: Spec, after: Spec) -> dict[str, list[str]]:
    """Variable -> the fields of it that differ ("workload" for anything else)."""
    out: dict[str, list[str]] = {}
    for key in spec_diff(before, after):
        var = VARIABLE_OF_FIELD.get(key)
        if var is None and key.startswith("task.lora"):
            var = "workload"
        out.setdefault(var or "workload", []).append(key)
    return out


class TwoVariablesError(VramtuiError):
    """An attempt that changes more than one variable at once."""


def check_single_change(before: Spec, after: Spec) -> str:
    """The one variable `after` changes; TwoVariablesError (with the diff) otherwise."""
    changed = variables_changed(before, after)
    if len(changed) == 1 and "workload" not in changed:
        return next(iter(changed))
    diff = spec_diff(before, after)
    shown = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items()) or "no change"
    if not changed:
        raise TwoVariablesError(f"the edit changes nothing the triage can test ({shown})")
    raise TwoVariablesError(
        f"one change at a time: this edit touches {', '.join(sorted(changed))} ({shown}); "
        "make one of them, re-run, and record the outcome before the next"
    )


def edit_spec(spec: Spec, edits: dict[str, object]) -> Spec | None:
    """`spec` with the dotted fields of `edits` set (None: removed); None when the result is
    not a valid spec."""
    d = spec_to_dict(spec)
    for path, value in edits.items():
        node = d
        parts = path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    try:
        return spec_from_dict(d, "a triage change")
    except VramtuiError:
        return None
