"""The spec as a list of editable fields: labels, groups, kinds, and text <-> value conversion.

The app renders one input per field; this module decides which fields apply to the spec being
edited and how a typed text becomes a TOML value. It knows nothing of Textual.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any, Callable

from vramtui import limits
from vramtui.errors import UnitsError, VramtuiError
from vramtui.spec import (
    ADAPTER_DTYPES,
    ATTENTION_IMPLS,
    DEFAULT_FRAMEWORK,
    ENGINES,
    FRAMEWORKS,
    FSDP_FROZEN_BASE,
    GGUF_TYPES,
    GRAD_CHECKPOINTING,
    GRAD_DTYPES,
    HEADROOM_MODES,
    KV_CACHE_DTYPES,
    LLAMA_CPP_CACHE_TYPES,
    LLAMA_CPP_DEFAULT_N_BATCH,
    LLAMA_CPP_DEFAULT_N_UBATCH,
    LOSS_IMPLS,
    OPTIMIZER_PLACEMENTS,
    OPTIMIZER_STATE_DTYPES,
    OPTIMIZERS,
    SHARDING,
    TASK_KINDS,
    WEIGHT_FORMATS,
    LlamaCpp,
)
from vramtui.units import parse_bytes


class FieldError(VramtuiError):
    """A field's text that cannot be read as its kind of value."""


GROUP_TITLES = {
    "model": "Model",
    "task": "Task",
    "formats": "Formats",
    "lengths": "Lengths",
    "batch": "Batch",
    "llama_cpp": "llama.cpp",
    "training": "Training",
    "placement": "Placement",
    "headroom": "Headroom",
    "campaign": "Campaign",
    "quality": "Quality criteria",
}


@dataclass(frozen=True)
class FieldDef:
    path: str  # dotted key path in the TOML form, e.g. "lengths.prompt_tokens"
    label: str
    group: str
    kind: str  # model | int | number | str | choice | bool | list | groups | bytes | date | quality
    choices: tuple[str, ...] = ()
    optional: bool = False  # an empty text removes the key
    help: str = ""
    applies: Callable[[dict], bool] = lambda d: True
    # What an empty optional field means for the spec being edited ("hf-trainer", "bf16"):
    # the form shows it as the default, never as a value the spec sets.
    default: Callable[[dict], str] | None = None


def _kind(d: dict) -> str:
    return d.get("task", {}).get("kind", "inference")


def _inference(d: dict) -> bool:
    return _kind(d) == "inference"


def _training(d: dict) -> bool:
    return _kind(d) != "inference"


def _lora(d: dict) -> bool:
    return _kind(d) in ("lora", "qlora")


def _fmt(d: dict) -> str:
    return d.get("weights", {}).get("format", "")


def _manual(d: dict) -> bool:
    return d.get("headroom", {}).get("mode") == "manual"


def _has_state_dtype(d: dict) -> bool:
    return _training(d) and d.get("training", {}).get("optimizer") in (
        "adamw",
        "sgd_momentum",
        "adafactor",
    )


def _framework_default(setting: str) -> Callable[[dict], str]:
    """The profile's default of `setting` for the framework the form names."""

    def default(d: dict) -> str:
        from vramtui.errors import VramtuiError
        from vramtui.training_profiles import load_profile

        name = d.get("training", {}).get("framework") or DEFAULT_FRAMEWORK
        try:
            value = load_profile(name).defaults[setting]
        except (VramtuiError, KeyError):
            return "the framework's"
        return str(value).lower() if isinstance(value, bool) else str(value)

    return default


def _llama_cpp(d: dict) -> bool:
    """[llama_cpp] applies: inference with runtime.engine "llama.cpp" (as the spec parser)."""
    return _inference(d) and d.get("runtime", {}).get("engine") == "llama.cpp"


def _whole(value: Any) -> int | None:
    """A form value that is a positive whole number, else None (half-typed, missing)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _llama_cpp_slots(d: dict) -> int | None:
    """-np as llama.cpp will get it: [llama_cpp] n_parallel, else batch.concurrency."""
    return _whole(d.get("llama_cpp", {}).get("n_parallel")) or _whole(
        d.get("batch", {}).get("concurrency")
    )


def _llama_cpp_n_ctx_default(d: dict) -> str:
    """-c when not given: slots x (prompt + generated), what LlamaCpp.context works out."""
    slots = _llama_cpp_slots(d)
    lengths = d.get("lengths", {})
    prompt, generated = lengths.get("prompt_tokens"), lengths.get("generated_tokens")
    if slots is None or _whole(prompt) is None or _whole(generated) is None:
        return "slots x (prompt + generated)"
    return f"{slots * (prompt + generated)} = {slots} slot(s) x {prompt + generated}"


def _llama_cpp_slots_default(d: dict) -> str:
    concurrency = _whole(d.get("batch", {}).get("concurrency"))
    return f"{concurrency} (batch.concurrency)" if concurrency else "batch.concurrency"


def _llama_cpp_cache_default(d: dict) -> str:
    """-ctk/-ctv when not given: runtime.kv_cache_dtype's llama.cpp name (LlamaCpp.cache_types)."""
    dtype = d.get("runtime", {}).get("kv_cache_dtype")
    name = LlamaCpp().cache_types(dtype)[0]
    return name if name else f"none for kv_cache_dtype {dtype}: choose one"


def _llama_cpp_field(
    key: str, label: str, kind: str, default: Callable[[dict], str], help: str, choices=()
) -> FieldDef:
    return FieldDef(
        f"llama_cpp.{key}",
        label,
        "llama_cpp",
        kind,
        tuple(choices),
        optional=True,
        help=help,
        applies=_llama_cpp,
        default=default,
    )


def _framework_choice(path: str, label: str, choices: tuple[str, ...]) -> FieldDef:
    setting = path.rsplit(".", 1)[-1]
    return FieldDef(
        path,
        label,
        "training",
        "choice",
        choices,
        optional=True,
        applies=_training,
        help="empty: the framework's default",
        default=_framework_default(setting),
    )


FIELDS: tuple[FieldDef, ...] = (
    FieldDef("name", "Name", "model", "str", optional=True),
    FieldDef(
        "model",
        "Model id, path or count",
        "model",
        "model",
        help="catalogue id (meta-llama/Llama-3.1-8B-Instruct), a local HF directory, or a "
        "bare parameter count (7e9)",
    ),
    FieldDef(
        "model.revision",
        "Revision",
        "model",
        "str",
        optional=True,
        applies=lambda d: "params" not in d.get("model", {}),
    ),
    FieldDef("task.kind", "Kind", "task", "choice", TASK_KINDS),
    FieldDef("task.lora.rank", "LoRA rank", "task", "int", applies=_lora),
    FieldDef("task.lora.alpha", "LoRA alpha", "task", "number", optional=True, applies=_lora),
    FieldDef(
        "task.lora.targets",
        "LoRA targets",
        "task",
        "list",
        applies=_lora,
        help="comma-separated module names, or all-linear",
    ),
    FieldDef("weights.format", "Weight format", "formats", "choice", WEIGHT_FORMATS),
    FieldDef(
        "weights.groups",
        "Per-group formats",
        "formats",
        "groups",
        optional=True,
        help="module groups kept in another format, e.g. lm_head=bf16, embedding=bf16",
    ),
    FieldDef(
        "weights.double_quant",
        "Double quant",
        "formats",
        "bool",
        applies=lambda d: _fmt(d) in ("nf4", "fp4"),
    ),
    FieldDef(
        "weights.bits", "Bits", "formats", "int", applies=lambda d: _fmt(d) in ("gptq", "awq")
    ),
    FieldDef(
        "weights.group_size",
        "Group size",
        "formats",
        "int",
        applies=lambda d: _fmt(d) in ("gptq", "awq"),
    ),
    FieldDef(
        "weights.gguf_type",
        "GGUF type",
        "formats",
        "choice",
        GGUF_TYPES,
        applies=lambda d: _fmt(d) == "gguf",
    ),
    FieldDef(
        "runtime.kv_cache_dtype",
        "KV cache dtype",
        "formats",
        "choice",
        KV_CACHE_DTYPES,
        applies=_inference,
    ),
    FieldDef(
        "runtime.kv_block_tokens",
        "KV block tokens",
        "formats",
        "int",
        optional=True,
        applies=_inference,
        help="paged KV block size (vLLM 16); 0 = contiguous",
    ),
    FieldDef("runtime.attention", "Attention kernel", "formats", "choice", ATTENTION_IMPLS),
    FieldDef("runtime.engine", "Engine", "formats", "choice", ENGINES, optional=True),
    FieldDef("lengths.prompt_tokens", "Prompt tokens", "lengths", "int", applies=_inference),
    FieldDef("lengths.generated_tokens", "Generated tokens", "lengths", "int", applies=_inference),
    FieldDef("lengths.seq_len", "Sequence length", "lengths", "int", applies=_training),
    FieldDef("batch.concurrency", "Concurrent sequences", "batch", "int", applies=_inference),
    FieldDef("batch.micro_batch", "Micro-batch", "batch", "int", applies=_training),
    FieldDef("batch.grad_accum", "Gradient accumulation", "batch", "int", applies=_training),
    _llama_cpp_field(
        "n_ctx",
        "Context (-c)",
        "int",
        _llama_cpp_n_ctx_default,
        "KV cells for all slots together; empty: slots x (prompt + generated)",
    ),
    _llama_cpp_field(
        "n_parallel",
        "Slots (-np)",
        "int",
        _llama_cpp_slots_default,
        "sequences served at once; empty: batch.concurrency",
    ),
    _llama_cpp_field(
        "n_batch",
        "Logical batch (-b)",
        "int",
        lambda d: str(LLAMA_CPP_DEFAULT_N_BATCH),
        f"empty: llama.cpp's {LLAMA_CPP_DEFAULT_N_BATCH}",
    ),
    _llama_cpp_field(
        "n_ubatch",
        "Physical batch (-ub)",
        "int",
        lambda d: str(LLAMA_CPP_DEFAULT_N_UBATCH),
        f"empty: llama.cpp's {LLAMA_CPP_DEFAULT_N_UBATCH}; sizes the compute buffer",
    ),
    _llama_cpp_field(
        "n_gpu_layers",
        "GPU layers (-ngl)",
        "int",
        lambda d: "-1 (all)",
        "-1: every layer and the output layer; fewer keeps the rest in host RAM",
    ),
    _llama_cpp_field(
        "cache_type_k",
        "K cache type (-ctk)",
        "choice",
        _llama_cpp_cache_default,
        "empty: runtime.kv_cache_dtype's llama.cpp type",
        LLAMA_CPP_CACHE_TYPES,
    ),
    _llama_cpp_field(
        "cache_type_v",
        "V cache type (-ctv)",
        "choice",
        _llama_cpp_cache_default,
        "empty: runtime.kv_cache_dtype's llama.cpp type; quantised needs Flash Attention",
        LLAMA_CPP_CACHE_TYPES,
    ),
    _llama_cpp_field("flash_attn", "Flash Attention (-fa)", "bool", lambda d: "true", "empty: on"),
    _llama_cpp_field(
        "kv_unified",
        "Unified KV (--kv-unified)",
        "bool",
        lambda d: "false",
        "one cache stream shared by every slot; empty: off",
    ),
    FieldDef(
        "training.optimizer", "Optimiser", "training", "choice", OPTIMIZERS, applies=_training
    ),
    FieldDef(
        "training.master_weights_fp32", "fp32 master weights", "training", "bool", applies=_training
    ),
    FieldDef(
        "training.grad_dtype",
        "Gradient dtype",
        "training",
        "choice",
        GRAD_DTYPES,
        applies=_training,
    ),
    FieldDef(
        "training.optimizer_state_dtype",
        "Optimiser state dtype",
        "training",
        "choice",
        OPTIMIZER_STATE_DTYPES,
        applies=_has_state_dtype,
    ),
    FieldDef(
        "training.grad_checkpointing",
        "Checkpointing",
        "training",
        "choice",
        GRAD_CHECKPOINTING,
        applies=_training,
    ),
    FieldDef(
        "training.framework",
        "Framework",
        "training",
        "choice",
        FRAMEWORKS,
        optional=True,
        applies=_training,
        help="empty: hf-trainer (HF Trainer + PEFT)",
        default=lambda d: DEFAULT_FRAMEWORK,
    ),
    _framework_choice("training.adapter_dtype", "Adapter dtype", ADAPTER_DTYPES),
    _framework_choice("training.loss_impl", "Loss", LOSS_IMPLS),
    _framework_choice("training.optimizer_placement", "Optimiser placement", OPTIMIZER_PLACEMENTS),
    _framework_choice("training.fsdp_frozen_base", "FSDP frozen base", FSDP_FROZEN_BASE),
    FieldDef("placement.gpus", "GPUs", "placement", "int"),
    FieldDef("placement.tensor_parallel", "Tensor parallel", "placement", "int"),
    FieldDef("placement.pipeline_parallel", "Pipeline parallel", "placement", "int"),
    FieldDef(
        "placement.data_parallel_sharding",
        "ZeRO / FSDP",
        "placement",
        "choice",
        SHARDING,
        applies=_training,
    ),
    FieldDef("headroom.mode", "Mode (manual or itemised)", "headroom", "choice", HEADROOM_MODES),
    FieldDef("headroom.reserve_gib", "Reserve (GiB)", "headroom", "number", applies=_manual),
    FieldDef(
        "headroom.reason",
        "Reason",
        "headroom",
        "str",
        applies=_manual,
        help="a margin without a reason is refused",
    ),
    FieldDef(
        "headroom.cuda_context_bytes",
        "CUDA context",
        "headroom",
        "bytes",
        optional=True,
        applies=lambda d: not _manual(d),
        help="measured size, e.g. 612 MiB",
    ),
    FieldDef("headroom.margin_fraction", "Margin fraction", "headroom", "number", optional=True),
    FieldDef("campaign.days", "Days", "campaign", "number", optional=True),
    FieldDef("campaign.budget", "Budget", "campaign", "number", optional=True),
    FieldDef("campaign.currency", "Currency", "campaign", "str", optional=True),
    FieldDef("campaign.start_by", "Start by", "campaign", "date", optional=True, help="YYYY-MM-DD"),
    FieldDef("campaign.software.cuda", "CUDA (min)", "campaign", "str", optional=True),
    FieldDef("campaign.software.driver", "Driver (min)", "campaign", "str", optional=True),
    FieldDef("campaign.software.image", "Image", "campaign", "str", optional=True),
    FieldDef("campaign.software.required", "Software required", "campaign", "bool", optional=True),
    FieldDef(
        "quality",
        "Criteria",
        "quality",
        "quality",
        optional=True,
        help="one per line: metric | threshold | note",
    ),
)
FIELDS_BY_PATH = {f.path: f for f in FIELDS}


def prune_inapplicable(d: dict) -> None:
    """Remove the keys of fields that no longer apply (itemised headroom has no reserve_gib;
    an fp16 spec has no double_quant), so an edit never leaves a contradiction behind."""
    for f in FIELDS:
        if f.path != "model" and not f.applies(d) and get_value(d, f.path) is not None:
            set_value(d, f.path, None)


# Settings a parsed spec holds resolved to their stated default (LlamaCpp fills them in): the
# form leaves them empty, shown as defaults, as it does for a [training] framework setting.
STATED_DEFAULTS: dict[str, Any] = {
    f"llama_cpp.{key}": getattr(LlamaCpp(), key)
    for key in ("n_batch", "n_ubatch", "n_gpu_layers", "flash_attn", "kv_unified")
}


def drop_stated_defaults(d: dict) -> None:
    """Remove from the spec form `d` the keys at their stated default (STATED_DEFAULTS): the
    same spec, with those fields shown as defaults."""
    for path, default in STATED_DEFAULTS.items():
        value = get_value(d, path)
        if value is not None and type(value) is type(default) and value == default:
            set_value(d, path, None)


def fields_for(d: dict) -> list[FieldDef]:
    """The fields that apply to the spec form `d`, in display order."""
    return [f for f in FIELDS if f.applies(d)]


# -------------------------------------------------------------------------- value access


def get_value(d: dict, path: str) -> Any:
    if path == "model":
        m = d.get("model", {})
        for key in ("id", "path", "params"):
            if key in m:
                return m[key]
        return None
    node: Any = d
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def set_value(d: dict, path: str, value: Any) -> None:
    """Set (or, with value None, remove) the key at `path` in the TOML-shaped dict `d`."""
    if path == "model":
        old = d.get("model", {})
        new = {k: v for k, v in old.items() if k == "revision"}
        if value is not None:
            new[value[0]] = value[1]
            if value[0] == "params":
                new.pop("revision", None)
        d["model"] = new
        return
    parts = path.split(".")
    node = d
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(parts[-1], None)
        _prune(d, parts[:-1])
    else:
        node[parts[-1]] = value


def _prune(d: dict, parts: list[str]) -> None:
    """Drop tables left empty by a removal (an empty [campaign] means no campaign)."""
    for depth in range(len(parts), 0, -1):
        node = d
        for part in parts[: depth - 1]:
            node = node.get(part, {})
        key = parts[depth - 1]
        if isinstance(node.get(key), dict) and not node[key]:
            node.pop(key)


def value_text(f: FieldDef, value: Any) -> str:
    """How a value is shown in its input."""
    if value is None:
        return ""
    if f.kind == "list":
        return ", ".join(value)
    if f.kind == "groups":
        return ", ".join(f"{g}={fmt}" for g, fmt in dict(value).items())
    if f.kind == "quality":
        return "\n".join(
            " | ".join(
                x for x in (q.get("metric", ""), q.get("threshold", ""), q.get("note", ""))
            ).rstrip(" |")
            for q in value
        )
    if f.kind == "bool":
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and f.kind != "number":
        return str(int(value))
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


# The largest value each numeric field takes (vramtui.limits, shared with the spec parser and the
# command line); a larger one is refused at the field, naming the limit.
FIELD_LIMITS: dict[str, int] = {
    "model": limits.MAX_PARAMS,
    "task.lora.rank": limits.MAX_LORA_RANK,
    "task.lora.alpha": limits.MAX_LORA_ALPHA,
    "weights.group_size": limits.MAX_GROUP_SIZE,
    "runtime.kv_block_tokens": limits.MAX_KV_BLOCK_TOKENS,
    "lengths.prompt_tokens": limits.MAX_SEQ_TOKENS,
    "lengths.generated_tokens": limits.MAX_SEQ_TOKENS,
    "lengths.seq_len": limits.MAX_SEQ_TOKENS,
    "batch.concurrency": limits.MAX_BATCH,
    "batch.micro_batch": limits.MAX_BATCH,
    "batch.grad_accum": limits.MAX_GRAD_ACCUM,
    "llama_cpp.n_ctx": limits.MAX_SEQ_TOKENS,
    "llama_cpp.n_batch": limits.MAX_SEQ_TOKENS,
    "llama_cpp.n_ubatch": limits.MAX_SEQ_TOKENS,
    "llama_cpp.n_parallel": limits.MAX_BATCH,
    "llama_cpp.n_gpu_layers": limits.MAX_LAYERS,
    "placement.gpus": limits.MAX_GPUS,
    "placement.tensor_parallel": limits.MAX_PARALLEL,
    "placement.pipeline_parallel": limits.MAX_PARALLEL,
    "headroom.reserve_gib": limits.MAX_GIB,
    "headroom.cuda_context_bytes": limits.MAX_BYTES,
    "campaign.days": limits.MAX_DAYS,
    "campaign.budget": limits.MAX_MONEY,
}


def parse_text(f: FieldDef, text: str) -> Any:
    """The value a typed text stands for; None (remove the key) for an empty optional field.

    Raises FieldError with one line naming the field and the expected form, or the limit of
    vramtui.limits the value is above.
    """
    value = _parse_text(f, text)
    limit = FIELD_LIMITS.get(f.path)
    number = value[1] if f.kind == "model" and isinstance(value, tuple) else value
    if (
        limit is not None
        and isinstance(number, (int, float))
        and not isinstance(number, bool)
        and number > limit
    ):
        raise FieldError(
            f"{f.label} = {limits.show_number(number)} is above vramtui's limit of {limit:,}; "
            f"write {limit:,} or less"
        )
    return value


def _parse_text(f: FieldDef, text: str) -> Any:
    t = text.strip()
    if not t:
        if f.optional:
            return None
        raise FieldError(f"{f.label} is required; {_expected(f)}")
    try:
        if f.kind == "model":
            from vramtui.models.resolve import model_ref_too_long

            too_long = model_ref_too_long(t, f.label)
            if too_long:
                raise FieldError(too_long)
            return _parse_model(t)
        if f.kind == "int":
            return _parse_int(t, f.label)
        if f.kind == "number":
            return _parse_number(t)
        if f.kind == "bool":
            if t.lower() in ("true", "yes", "on", "1"):
                return True
            if t.lower() in ("false", "no", "off", "0"):
                return False
            raise ValueError
        if f.kind == "choice":
            if t not in f.choices:
                raise ValueError
            return t
        if f.kind == "list":
            items = [x.strip() for x in t.split(",") if x.strip()]
            if not items:
                raise ValueError
            return items
        if f.kind == "groups":
            pairs = {}
            for part in t.split(","):
                if not part.strip():
                    continue
                group, sep, fmt = part.partition("=")
                if not sep or not group.strip() or not fmt.strip():
                    raise ValueError
                pairs[group.strip()] = fmt.strip()
            return pairs or None
        if f.kind == "bytes":
            return parse_bytes(t)
        if f.kind == "date":
            return datetime.date.fromisoformat(t)
        if f.kind == "quality":
            return _parse_quality(t)
        return t
    except (ValueError, OverflowError, UnitsError):
        shown = t if len(t) <= _SHOWN_CHARS else t[: _SHOWN_CHARS - 3] + "..."
        raise FieldError(f"{f.label}: cannot read {shown!r}; {_expected(f)}") from None


_SHOWN_CHARS = 60  # of a value the form cannot read, in its one-line error (it may be 100k)


def _expected(f: FieldDef) -> str:
    return {
        "model": "give a catalogue id, a directory, or a parameter count such as 7e9",
        "int": "write a whole number such as 4096",
        "number": "write a number such as 0.05",
        "bool": "write true or false",
        "choice": f"choose one of {', '.join(f.choices)}",
        "list": "write names separated by commas",
        "groups": "write group=format pairs separated by commas, e.g. lm_head=bf16",
        "bytes": "write a size with its unit, e.g. 612 MiB or 0.6 GB",
        "date": "write a date as YYYY-MM-DD",
        "quality": "write one criterion per line: metric | threshold | note",
        "str": "write some text",
    }[f.kind]


def _parse_int(t: str, label: str) -> int:
    cleaned = t.replace("_", "").replace(",", "")
    if not cleaned.lstrip("-").isdigit() or not cleaned.isascii():
        raise ValueError
    if len(cleaned) > 30:  # far above every limit; int() of 4,300+ digits would raise
        raise FieldError(
            f"{label}: a {len(cleaned)}-digit number is above every limit of vramtui; "
            "write a smaller whole number"
        )
    return int(cleaned)


def _parse_number(t: str) -> float:
    value = float(t.replace("_", "").replace(",", ""))
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError
    return value


def _parse_model(t: str) -> tuple[str, Any]:
    try:
        value = float(t.replace("_", "").replace(",", ""))
    except ValueError:
        value = None
    if value is not None:
        if not math.isfinite(value) or value != int(value) or value <= 0:
            raise ValueError
        return ("params", int(value))
    from vramtui.models.resolve import looks_like_path

    return ("path", t) if looks_like_path(t) else ("id", t)


def _parse_quality(t: str) -> list[dict]:
    out = []
    for line in t.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise ValueError
        entry = {"metric": parts[0], "threshold": parts[1]}
        if len(parts) > 2 and parts[2]:
            entry["note"] = " | ".join(parts[2:])
        out.append(entry)
    return out or None


def locate_error(message: str, fields: list[FieldDef]) -> str | None:
    """The field a spec error is about: the longest field path its message names."""
    hits = [f.path for f in fields if f.path in message and f.path != "model"]
    if hits:
        return max(hits, key=len)
    if "model." in message or "model" in message.split(" ", 1)[0]:
        return "model"
    return None
