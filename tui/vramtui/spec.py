"""The workload spec: what is being sized, as a frozen, validated, TOML-backed record.

A spec states the seed's "starting specification" - model and revision, task, weight format,
lengths, concurrency or micro-batch, placement, quality criteria and headroom - so the ledger can
itemise memory and the app can compare plans under the same requirements.

Rules this module enforces:

* Nothing is silently defaulted. A required key that is missing is an error naming its key path;
  every optional key has one documented default (see docs/spec-format.md), and `save_spec`
  writes the defaulted values out so the saved file states the whole workload.
* Every error is a `SpecError` whose text is ONE line: the key path, the file, the problem and
  the fix. Only the first problem is reported.
* `spec_from_dict` holds all the checks. `validate_spec` re-runs them on a `Spec` built or edited
  in code (`dataclasses.replace`), and `dumps_spec`/`save_spec` refuse a spec that would not
  load back.
* load -> save -> load gives an equal `Spec`, and a second save gives identical text.
"""

from __future__ import annotations

import datetime
import difflib
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vramtui import limits
from vramtui.errors import SpecError
from vramtui.models.architecture import GROUPS, Architecture
from vramtui.models.resolve import model_ref_too_long
from vramtui.safe_text import has_unsafe, safe_line, safe_text
from vramtui.spec_toml import dumps_spec, save_spec, spec_to_dict  # re-exported: the TOML side

__all__ = [
    "Batch",
    "Headroom",
    "Lengths",
    "LlamaCpp",
    "LoraConfig",
    "ModelRef",
    "Placement",
    "QualityCriterion",
    "Runtime",
    "Spec",
    "Task",
    "Training",
    "Weights",
    "dumps_spec",
    "load_spec",
    "loads_spec",
    "save_spec",
    "spec_from_dict",
    "spec_to_dict",
    "validate_against_architecture",
    "validate_spec",
]

SCHEMA_VERSION = 1

TASK_KINDS = ("inference", "full_finetune", "lora", "qlora")
TRAINING_KINDS = ("full_finetune", "lora", "qlora")
WEIGHT_FORMATS = ("fp32", "bf16", "fp16", "fp8", "int8", "nf4", "fp4", "gptq", "awq", "gguf")
BNB_4BIT_FORMATS = ("nf4", "fp4")  # bitsandbytes 4-bit: double_quant applies
PACKED_FORMATS = ("gptq", "awq")  # bits and group_size apply
# Formats whose weights an optimiser cannot update in place (full fine-tuning refuses them).
FROZEN_ONLY_FORMATS = ("int8", "nf4", "fp4", "gptq", "awq", "gguf")
GPTQ_BITS = (2, 3, 4, 8)
GGUF_TYPES = (
    "Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q4_0", "Q3_K", "Q2_K",
    # Less common types a GGUF file can hold (its header gives the exact mix).
    "F16", "BF16", "F32", "Q5_0", "Q5_1", "Q4_1", "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_XXS",
    "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S", "TQ1_0", "TQ2_0", "MXFP4",
)  # fmt: skip
OPTIMIZERS = ("adamw", "adamw_8bit", "sgd", "sgd_momentum", "adafactor")
# Optimisers whose state dtype is a choice; sgd has no state, adamw_8bit's state is 8-bit by design.
OPTIMIZERS_WITH_STATE_DTYPE = ("adamw", "sgd_momentum", "adafactor")
GRAD_DTYPES = ("fp32", "bf16", "fp16")
OPTIMIZER_STATE_DTYPES = ("fp32", "bf16")
GRAD_CHECKPOINTING = ("none", "full", "selective")
# The training framework and what its profile (catalog/frameworks/<name>.toml) sets; each
# setting below can be written in [training] to override the profile's default.
FRAMEWORKS = (
    "hf-trainer",
    "axolotl",
    "unsloth",
    "litgpt",
    "torchtune",
    "lightning-fabric",
    "accelerate-fsdp",
    "deepspeed",
    "megatron",
    "custom",
)
DEFAULT_FRAMEWORK = "hf-trainer"
ADAPTER_DTYPES = ("fp32", "bf16")
LOSS_IMPLS = ("full-upcast", "chunked-fp32", "chunked-bf16", "fused")
OPTIMIZER_PLACEMENTS = ("standard", "in-backward", "paged", "cpu-offload")
FSDP_FROZEN_BASE = ("sharded", "gathered")
# Libraries whose version changes memory ([training.versions]).
VERSIONED_LIBRARIES = ("bitsandbytes", "transformers", "peft", "unsloth")
MAX_VERSION_CHARS = 40
ATTENTION_IMPLS = ("flash", "sdpa", "eager")
KV_CACHE_DTYPES = ("fp32", "bf16", "fp16", "fp8")
ENGINES = ("transformers", "vllm", "tgi", "llama.cpp", "other")
# llama.cpp's KV cache types (`--cache-type-k/-v`, common/arg.cpp kv_cache_types).
LLAMA_CPP_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
# llama.cpp's defaults (common/common.h): n_batch 2048, n_ubatch 512, f16 cache.
LLAMA_CPP_DEFAULT_N_BATCH = 2048
LLAMA_CPP_DEFAULT_N_UBATCH = 512
SHARDING = ("none", "zero1", "zero2", "zero3", "fsdp")
HEADROOM_MODES = ("itemised", "manual")
ALL_LINEAR = "all-linear"

# Every key the schema knows, per table ("" is the top level; "quality" is each [[quality]] entry).
SCHEMA_KEYS: dict[str, tuple[str, ...]] = {
    "": (
        "schema_version",
        "name",
        "description",
        "model",
        "task",
        "weights",
        "lengths",
        "batch",
        "training",
        "runtime",
        "llama_cpp",
        "placement",
        "quality",
        "headroom",
        "campaign",
        "measured",
        "triage",
    ),
    "model": ("id", "path", "params", "revision"),
    "task": ("kind", "lora"),
    "task.lora": ("rank", "alpha", "targets", "dropout"),
    "weights": ("format", "double_quant", "bits", "group_size", "gguf_type", "groups"),
    "weights.groups": GROUPS,
    "lengths": ("prompt_tokens", "generated_tokens", "seq_len"),
    "batch": ("concurrency", "micro_batch", "grad_accum"),
    "training": (
        "optimizer",
        "master_weights_fp32",
        "grad_dtype",
        "optimizer_state_dtype",
        "grad_checkpointing",
        "framework",
        "adapter_dtype",
        "fused_qkv_adapter",
        "loss_impl",
        "optimizer_placement",
        "fsdp_frozen_base",
        "no_sync",
        "gqa_expand_kv",
        "fsdp_root_gathered",
        "offload_params",
        "offload_checkpoints",
        "versions",
    ),
    "training.versions": VERSIONED_LIBRARIES,
    "runtime": ("attention", "kv_cache_dtype", "kv_block_tokens", "engine"),
    "llama_cpp": (
        "n_ctx",
        "n_batch",
        "n_ubatch",
        "n_parallel",
        "n_gpu_layers",
        "cache_type_k",
        "cache_type_v",
        "flash_attn",
        "kv_unified",
    ),
    "placement": ("gpus", "tensor_parallel", "pipeline_parallel", "data_parallel_sharding"),
    "quality": ("metric", "threshold", "note"),
    "headroom": ("mode", "reserve_gib", "reason", "cuda_context_bytes", "margin_fraction"),
    "campaign": ("days", "budget", "currency", "start_by", "software"),
    "campaign.software": ("image", "driver", "cuda", "required"),
    "measured": (
        "stage",
        "quantity",
        "bytes",
        "value",
        "as_written",
        "counter",
        "item",
        "source",
        "gpu",
        "device",
        "date",
        "run",
        "error",
        "dims",
        "versions",
    ),
    "triage": (
        "time",
        "phase",
        "framework",
        "figures",
        "variable",
        "change",
        "predicted_peak_bytes",
        "outcome",
    ),
}

STAGES = (
    "load",
    "prefill",
    "decode",
    "forward",
    "backward",
    "optimizer_step",
    "validation",
    "export",
)
MEASURED_QUANTITIES = (
    "process_in_use",  # all memory of the process on the GPU (OOM message, NVML per process)
    "allocated",  # tensors (torch.cuda.memory_allocated / OOM 'allocated by PyTorch')
    "reserved",  # allocator segments (memory_reserved / OOM 'reserved in total')
    "max_memory_allocated",
    "max_memory_reserved",
    "nvml_used",  # device-wide used memory from NVML
    "item",  # one ledger item (or one category of items) measured on its own
    "kv_cache_pool",  # bytes a serving engine set aside for its KV cache (capacity, not need)
    # Counts, not bytes (`value` instead of `bytes`): what a serving engine reports it can hold.
    "kv_cache_tokens",  # vLLM "GPU KV cache size: N tokens"
    "gpu_blocks",  # vLLM "# GPU blocks: N"
    "max_concurrency",  # vLLM "Maximum concurrency for T tokens per request: Nx"
)
COUNT_QUANTITIES = ("kv_cache_tokens", "gpu_blocks", "max_concurrency")
# Dimensions a measurement can record as executed (any other name is kept and shown, unused).
MEASURED_DIMS = (
    "batch",  # sequences per forward: micro-batch (training) or concurrency (inference)
    "micro_batch",
    "concurrency",
    "seq_len",  # tokens per sequence (training), or prompt + generated (inference)
    "prompt_tokens",
    "generated_tokens",
    "tokens_per_request",
    "max_model_len",
    "grad_accum",
    "samples",
    "corpus_fraction",  # share of the corpus actually run, 0-1
    "block_size",  # tokens per paged KV block (with gpu_blocks)
)
TRIAGE_PHASES = (
    "load",
    "generate",
    "train_forward",
    "backward",
    "optimizer_step",
    "other",
    "unknown",
)
TRIAGE_VARIABLES = ("capacity", "cache", "micro_batch", "precision", "activation", "allocator")

# A TOML value to show in "add ... = VALUE" hints for required keys.
_EXAMPLES = {
    "schema_version": "1",
    "task.kind": '"inference"',
    "task.lora.rank": "16",
    "task.lora.targets": '["q_proj", "v_proj"]',
    "weights.format": '"bf16"',
    "campaign.currency": '"USD"',
    "weights.double_quant": "true",
    "weights.bits": "4",
    "weights.group_size": "128",
    "weights.gguf_type": '"Q4_K"',
    "lengths.prompt_tokens": "2048",
    "lengths.generated_tokens": "256",
    "lengths.seq_len": "4096",
    "batch.concurrency": "1",
    "batch.micro_batch": "1",
    "training.optimizer": '"adamw"',
    "training.master_weights_fp32": "true",
    "training.grad_dtype": '"bf16"',
    "training.grad_checkpointing": '"none"',
    "runtime.attention": '"sdpa"',
    "runtime.kv_cache_dtype": '"bf16"',
    "llama_cpp.n_ctx": "8192",
    "llama_cpp.cache_type_k": '"q8_0"',
    "llama_cpp.cache_type_v": '"q8_0"',
    "llama_cpp.n_gpu_layers": "-1",
    "placement.gpus": "1",
    "quality.metric": '"MMLU 5-shot"',
    "quality.threshold": '">= 0.66"',
    "headroom.mode": '"itemised"',
    "headroom.reserve_gib": "6.0",
    "headroom.reason": '"why this reserve"',
}

# --------------------------------------------------------------------------------------------
# Dataclasses
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelRef:
    """Which model: exactly one of a catalogue/Hub `id`, a local HF directory `path`, or a bare
    parameter count `params` (then only the weights can be itemised)."""

    id: str | None = None
    path: str | None = None  # as written in the spec; relative paths are left to the loader
    params: int | None = None
    revision: str | None = None

    @property
    def source_kind(self) -> str:
        """ "id", "path" or "params": which of the three the spec uses."""
        if self.id is not None:
            return "id"
        if self.path is not None:
            return "path"
        return "params"

    @property
    def label(self) -> str:
        """A short human name: the id, the path, or "7e+09 parameters"."""
        if self.id is not None:
            return self.id + (f"@{self.revision}" if self.revision else "")
        if self.path is not None:
            return self.path
        return f"{self.params:.4g} parameters"


@dataclass(frozen=True, kw_only=True)
class LoraConfig:
    rank: int
    alpha: int | float | None = None  # recorded only; it does not change memory
    targets: tuple[str, ...]  # module leaf names, or ("all-linear",)
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.targets, (list, set, frozenset)):
            object.__setattr__(self, "targets", tuple(self.targets))


@dataclass(frozen=True, kw_only=True)
class Task:
    kind: str  # one of TASK_KINDS
    lora: LoraConfig | None = None  # required for lora/qlora, None otherwise


@dataclass(frozen=True, kw_only=True)
class Weights:
    """Weight storage format: `format` for every module group unless `groups` overrides it.

    `groups` is a tuple of (group, format) pairs in GROUPS order (hashable and round-trippable);
    a dict is accepted on construction and normalised.
    """

    format: str  # one of WEIGHT_FORMATS
    double_quant: bool | None = None  # nf4/fp4 only (bnb_4bit_use_double_quant)
    bits: int | None = None  # gptq/awq only
    group_size: int | None = None  # gptq/awq only: -1 or > 0
    gguf_type: str | None = None  # gguf only
    groups: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        pairs = self.groups.items() if isinstance(self.groups, Mapping) else self.groups
        order = {g: i for i, g in enumerate(GROUPS)}
        normalised = tuple(
            sorted((tuple(p) for p in pairs), key=lambda p: (order.get(p[0], len(order)), p[0]))
        )
        object.__setattr__(self, "groups", normalised)

    @property
    def group_overrides(self) -> dict[str, str]:
        return dict(self.groups)

    def format_for(self, group: str) -> str:
        """The storage format of one module group (one of GROUPS)."""
        if group not in GROUPS:
            raise ValueError(f"unknown module group {group!r}; expected one of {', '.join(GROUPS)}")
        return self.group_overrides.get(group, self.format)

    @property
    def formats_used(self) -> frozenset[str]:
        """The default format plus every override."""
        return frozenset([self.format, *self.group_overrides.values()])


@dataclass(frozen=True, kw_only=True)
class Lengths:
    """Inference sets prompt_tokens and generated_tokens; training sets seq_len."""

    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    seq_len: int | None = None

    @property
    def context_tokens(self) -> int:
        """Tokens a sequence holds at its longest: prompt + generated (inference) or seq_len."""
        if self.prompt_tokens is not None:
            return self.prompt_tokens + (self.generated_tokens or 0)
        return self.seq_len or 0


@dataclass(frozen=True, kw_only=True)
class Batch:
    """Inference sets concurrency; training sets micro_batch and grad_accum."""

    concurrency: int | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None


@dataclass(frozen=True, kw_only=True)
class Training:
    optimizer: str  # one of OPTIMIZERS
    master_weights_fp32: bool
    grad_dtype: str  # one of GRAD_DTYPES
    # fp32 or bf16 for adamw/sgd_momentum/adafactor; None for sgd (no state) and adamw_8bit.
    optimizer_state_dtype: str | None = None
    grad_checkpointing: str  # one of GRAD_CHECKPOINTING
    # None: the default, DEFAULT_FRAMEWORK (vramtui.training_profiles resolves the settings).
    framework: str | None = None
    # Overrides of the framework profile's defaults; None: the profile's default applies.
    adapter_dtype: str | None = None  # one of ADAPTER_DTYPES
    fused_qkv_adapter: bool | None = None  # one LoRA dropout/cast for a fused q, k, v input
    loss_impl: str | None = None  # one of LOSS_IMPLS
    optimizer_placement: str | None = None  # one of OPTIMIZER_PLACEMENTS
    fsdp_frozen_base: str | None = None  # one of FSDP_FROZEN_BASE
    no_sync: bool | None = None  # FSDP accumulation steps under no_sync (unsharded gradients)
    gqa_expand_kv: bool | None = None  # K and V repeated to every query head before attention
    # The FSDP root unit (embedding, final norm, LM head) whole on every rank, forward to backward.
    fsdp_root_gathered: bool | None = None
    # FSDP/ZeRO-3 parameter offload: parameter, gradient and optimiser shards in host memory.
    offload_params: bool | None = None
    # Full checkpointing's layer inputs copied to host memory (Unsloth's "unsloth" mode).
    offload_checkpoints: bool | None = None
    versions: tuple[tuple[str, str], ...] = ()  # (library, version) from [training.versions]


@dataclass(frozen=True, kw_only=True)
class Runtime:
    attention: str  # one of ATTENTION_IMPLS
    kv_cache_dtype: str | None = None  # inference only (required there)
    kv_block_tokens: int | None = None  # inference only: paged KV block size, 0 = contiguous
    engine: str | None = None  # one of ENGINES, recorded for the sheet


@dataclass(frozen=True, kw_only=True)
class LlamaCpp:
    """llama.cpp's context settings (`[llama_cpp]`, engine "llama.cpp" only), named as its
    flags are. None: the documented default (docs/spec-format.md), worked out from the rest of
    the spec where it depends on it (`resolved_*`)."""

    n_ctx: int | None = None  # -c: KV cells for all slots together
    n_batch: int = LLAMA_CPP_DEFAULT_N_BATCH  # -b: logical batch
    n_ubatch: int = LLAMA_CPP_DEFAULT_N_UBATCH  # -ub: physical batch (the compute graph's)
    n_parallel: int | None = None  # -np: slots; default batch.concurrency
    n_gpu_layers: int = -1  # -ngl: -1 = every layer and the output layer
    cache_type_k: str | None = None  # -ctk; default from runtime.kv_cache_dtype
    cache_type_v: str | None = None  # -ctv; default from runtime.kv_cache_dtype
    flash_attn: bool = True  # -fa; llama.cpp's "auto" turns it on where the GPU supports it
    kv_unified: bool = False  # --kv-unified: one cache stream shared by every slot

    def slots(self, concurrency: int) -> int:
        """-np: the slots (sequences served at once); default the spec's concurrency."""
        return self.n_parallel if self.n_parallel is not None else concurrency

    def context(self, concurrency: int, tokens_per_sequence: int) -> int:
        """-c as given, else slots x (prompt + generated): what the spec's sequences need."""
        if self.n_ctx is not None:
            return self.n_ctx
        return self.slots(concurrency) * tokens_per_sequence

    def cache_types(self, kv_cache_dtype: str | None) -> tuple[str | None, str | None]:
        """(-ctk, -ctv): as given, else runtime.kv_cache_dtype's llama.cpp name (None: none)."""
        default = _LLAMA_CPP_CACHE_OF_DTYPE.get(kv_cache_dtype or "")
        return self.cache_type_k or default, self.cache_type_v or default


_LLAMA_CPP_CACHE_OF_DTYPE = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
# Cache types llama.cpp stores unquantised (a quantised V cache needs Flash Attention).
_LLAMA_CPP_FLOAT_CACHE = ("f32", "f16", "bf16")


@dataclass(frozen=True, kw_only=True)
class Placement:
    gpus: int
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel_sharding: str = "none"  # one of SHARDING; not "none" only for training

    @property
    def data_parallel(self) -> int:
        """Replicas (or ZeRO/FSDP shards): gpus / (tensor_parallel * pipeline_parallel)."""
        return self.gpus // (self.tensor_parallel * self.pipeline_parallel)


@dataclass(frozen=True, kw_only=True)
class QualityCriterion:
    metric: str
    threshold: str
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class Headroom:
    """ "itemised": the ledger lists every overhead; "manual": one reserve with its reason."""

    mode: str  # one of HEADROOM_MODES
    reserve_gib: float | None = None  # manual only (required there)
    reason: str | None = None  # manual only (required there, non-empty)
    cuda_context_bytes: int | None = None  # itemised only; None = the ledger's labelled assumption
    margin_fraction: float = 0.0  # safety margin on a GPU's usable memory, 0 <= x < 0.5


@dataclass(frozen=True, kw_only=True)
class SoftwareRequest:
    """The environment asked for when ordering: a preference unless `required`."""

    image: str | None = None
    driver: str | None = None  # minimum driver version, e.g. "535"
    cuda: str | None = None  # minimum CUDA version, e.g. "12.1"
    required: bool = False


@dataclass(frozen=True, kw_only=True)
class Campaign:
    """What renting is for: duration, budget, when the machine is needed, software asked for."""

    days: float | None = None  # campaign duration; `shortlist --days` overrides
    budget: float | None = None  # total package budget in `currency`
    currency: str | None = None  # ISO code, required with budget
    start_by: datetime.date | None = None  # the machine must be usable by this date
    software: SoftwareRequest | None = None


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """A measured figure kept with the spec: never added to estimates, shown beside them."""

    stage: str  # one of STAGES
    quantity: str  # one of MEASURED_QUANTITIES
    bytes: int | None = None  # byte quantities; None for COUNT_QUANTITIES
    counter: str  # which counter, as the user can re-read it
    value: float | None = None  # COUNT_QUANTITIES only: tokens, blocks, concurrency factor
    as_written: str = ""  # the figure as the counter printed it, e.g. "78.08 GiB"
    # A ledger item key ("overhead.cuda_context") or a category ("weights", "kv_cache"), when the
    # figure measures that item or category alone.
    item: str | None = None
    source: str = ""  # where it was read (a log, a probe run)
    gpu: int | None = None  # device index
    device: str = ""  # the device's name, as the driver reports it
    date: datetime.date | None = None
    run: str = ""  # the run it came from (probe run id), to group figures of one run
    error: str = ""  # the stage raised (e.g. "OutOfMemoryError: ..."): a figure at the failure
    # The dimensions actually executed, (name, number) pairs sorted by name (a Mapping is
    # accepted and sorted); empty = not recorded.
    dims: tuple[tuple[str, int | float], ...] = ()
    versions: tuple[tuple[str, str], ...] = ()  # (name, version): torch, cuda, driver, vllm...

    def __post_init__(self) -> None:
        for name in ("dims", "versions"):
            value = getattr(self, name)
            if isinstance(value, Mapping):
                object.__setattr__(self, name, tuple(sorted(value.items())))
            elif isinstance(value, list):
                object.__setattr__(self, name, tuple(sorted(tuple(p) for p in value)))
        # Imported from logs, probe files and drivers: no control character survives.
        for name in ("counter", "item", "device", "run"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, safe_line(value))
        for name in ("as_written", "source", "error"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, safe_text(value))
        if any(
            isinstance(v, str) and has_unsafe(v, multiline=False)
            for pair in self.versions
            for v in pair
        ):
            object.__setattr__(
                self,
                "versions",
                tuple(sorted((safe_line(k), safe_line(v)) for k, v in self.versions)),
            )

    @property
    def dims_map(self) -> dict[str, int | float]:
        return dict(self.dims)

    @property
    def versions_map(self) -> dict[str, str]:
        return dict(self.versions)

    @property
    def is_count(self) -> bool:
        return self.quantity in COUNT_QUANTITIES


@dataclass(frozen=True, kw_only=True)
class TriageAttempt:
    """One step of the triage log: what failed, the single change made, what was predicted."""

    time: str  # ISO 8601
    phase: str  # one of TRIAGE_PHASES
    framework: str = ""
    figures: tuple[tuple[str, int], ...] = ()  # (name, bytes) as read from the error
    variable: str  # one of TRIAGE_VARIABLES
    change: str  # what was changed, in words ("micro_batch 8 -> 4, grad_accum 1 -> 2")
    predicted_peak_bytes: int | None = None
    outcome: str = "pending"  # pending | fixed | still out of memory | free text

    def __post_init__(self) -> None:
        if isinstance(self.figures, Mapping):
            object.__setattr__(self, "figures", tuple(sorted(self.figures.items())))
        for name in ("framework", "change", "outcome"):  # read from a log: shown back
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, safe_line(value))


@dataclass(frozen=True, kw_only=True)
class Spec:
    schema_version: int = SCHEMA_VERSION
    name: str = ""
    description: str = ""
    model: ModelRef
    task: Task
    weights: Weights
    lengths: Lengths
    batch: Batch
    training: Training | None = None  # required for training tasks, None for inference
    runtime: Runtime
    placement: Placement
    llama_cpp: LlamaCpp | None = None  # engine "llama.cpp" only
    quality: tuple[QualityCriterion, ...] = ()
    headroom: Headroom
    campaign: Campaign = Campaign()
    measured: tuple[Measurement, ...] = ()
    triage: tuple[TriageAttempt, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.quality, list):
            object.__setattr__(self, "quality", tuple(self.quality))

    @property
    def is_training(self) -> bool:
        return self.task.kind in TRAINING_KINDS


# --------------------------------------------------------------------------------------------
# Message helpers
# --------------------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(safe_line(text).split())


def _fail(message: str) -> SpecError:
    return SpecError(_one_line(message))


def _toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def _show(value: Any) -> str:
    """'string '4k'', 'integer 0', 'table' ... for messages (short, single line)."""
    kind = _toml_type(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int) and value.bit_length() > 128:
        sign = "-" if value < 0 else ""
        return f"{kind} {sign}(about {int(abs(value).bit_length() * 0.30103) + 1} digits)"
    if isinstance(value, (list, tuple)):
        return f"{kind} of {len(value)} items"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}"


def _suggest(word: str, choices: Iterable[str]) -> str | None:
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered:
        return lowered[word.lower()]
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def _table_header(path: str) -> str:
    if path == "":
        return "at the top of the file"
    if path == "quality":
        return "in the [[quality]] entry"
    return f"under [{path}]"


# --------------------------------------------------------------------------------------------
# Reading one table of the raw TOML dict
# --------------------------------------------------------------------------------------------


class _Table:
    """One table of the raw dict, with its key path prefix and the source file for messages."""

    def __init__(self, data: Mapping[str, Any], path: str, source: str, schema: str | None = None):
        # TOML has no null: a None value (from a dict built in code, such as the app's form)
        # means the key is absent, so the stated default applies or "required" is reported.
        self.data = {k: v for k, v in data.items() if v is not None}
        self.path = path  # "lengths", "task.lora", "quality[0]", "" for the top level
        self.schema = path if schema is None else schema  # key into SCHEMA_KEYS / _EXAMPLES
        self.source = source

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def has(self, name: str) -> bool:
        return name in self.data

    def check_keys(self) -> None:
        allowed = SCHEMA_KEYS[self.schema]
        for name in self.data:
            if name in allowed:
                continue
            full = self.key(name)
            close = _suggest(name, allowed)
            if close is not None:
                hint = f"did you mean '{self.key(close)}'?"
            else:
                elsewhere = [
                    f"{table}.{name}" if table else name
                    for table, keys in SCHEMA_KEYS.items()
                    if name in keys and table not in ("weights.groups",)
                ]
                if elsewhere:
                    hint = f"did you mean '{elsewhere[0]}'? (it belongs in another table)"
                else:
                    known = ", ".join(allowed)
                    hint = f"remove it; known keys {_table_header(self.path)}: {known}"
            raise _fail(f"unknown key '{full}' in {self.source}; {hint}")

    # -- presence ---------------------------------------------------------------------------

    def missing(self, name: str, why: str = "") -> SpecError:
        schema_key = f"{self.schema}.{name}" if self.schema else name
        example = _EXAMPLES.get(schema_key, "...")
        why = f" {why}" if why else ""
        return _fail(
            f"{self.key(name)} is required{why} but missing in {self.source}; "
            f"add {name} = {example} {_table_header(self.path)}"
        )

    def forbid(self, name: str, why: str, fix: str = "remove it") -> None:
        if name in self.data:
            raise _fail(f"{self.key(name)} {why} ({self.source}); {fix}")

    def _get(self, name: str, required: bool, why: str) -> Any:
        if name in self.data:
            return self.data[name]
        if required:
            raise self.missing(name, why)
        return None

    def wrong_type(self, name: str, expected: str, value: Any) -> SpecError:
        schema_key = f"{self.schema}.{name}" if self.schema else name
        example = _EXAMPLES.get(schema_key)
        fix = f"; write e.g. {name} = {example}" if example else ""
        return _fail(
            f"{self.key(name)} must be {expected}, got {_show(value)} ({self.source}){fix}"
        )

    def out_of_range(self, name: str, condition: str, value: Any, fix: str) -> SpecError:
        shown = limits.show_number(value) if isinstance(value, (int, float)) else repr(value)
        return _fail(f"{self.key(name)} must be {condition}, got {shown} ({self.source}); {fix}")

    # -- typed getters: None when absent and not required -------------------------------------

    def integer(
        self,
        name: str,
        *,
        required: bool = False,
        why: str = "",
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int | None:
        value = self._get(name, required, why)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.wrong_type(name, "an integer", value)
        if minimum is not None and value < minimum:
            raise self.out_of_range(name, f">= {minimum}", value, f"set it to {minimum} or more")
        self._at_most(name, value, maximum)
        return value

    def number(
        self,
        name: str,
        *,
        required: bool = False,
        why: str = "",
        maximum: float | None = None,
    ) -> float | int | None:
        value = self._get(name, required, why)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.wrong_type(name, "a number", value)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.out_of_range(name, "a finite number", value, "write a plain number")
        self._at_most(name, value, maximum)
        return value

    def _at_most(self, name: str, value: float, maximum: float | None) -> None:
        """Refuse a value above vramtui's limit (vramtui.limits), naming the limit."""
        if maximum is not None and value > maximum:
            raise _fail(
                f"{self.key(name)} = {limits.show_number(value)} is above vramtui's limit of {maximum:,} "
                f"({self.source}); set it to {maximum:,} or less"
            )

    def boolean(self, name: str, *, required: bool = False, why: str = "") -> bool | None:
        value = self._get(name, required, why)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.wrong_type(name, "true or false", value)
        return value

    def string(
        self,
        name: str,
        *,
        required: bool = False,
        why: str = "",
        nonempty: bool = False,
        multiline: bool = False,
        raw: bool = False,
    ) -> str | None:
        """A string with its control characters made visible (`vramtui.safe_text`): one line
        unless `multiline`; `raw` (a file path) keeps it as written."""
        value = self._get(name, required, why)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.wrong_type(name, "a string", value)
        if nonempty and not value.strip():
            raise _fail(
                f"{self.key(name)} is empty ({self.source}); write a non-empty string or remove "
                "the key"
            )
        if raw:
            return value
        return safe_text(value) if multiline else safe_line(value)

    def choice(
        self, name: str, choices: Iterable[str], *, required: bool = False, why: str = ""
    ) -> str | None:
        choices = tuple(choices)
        value = self._get(name, required, why)
        if value is None:
            return None
        if not isinstance(value, str) or value not in choices:
            shown = _show(value)
            close = _suggest(value, choices) if isinstance(value, str) else None
            hint = f"did you mean '{close}'?" if close else "use one of those"
            raise _fail(
                f"{self.key(name)} must be one of {', '.join(choices)}, got {shown} "
                f"({self.source}); {hint}"
            )
        return value

    def table(
        self, name: str, *, required: bool = False, why: str = "", hint: str = ""
    ) -> _Table | None:
        value = self.data.get(name)
        if value is None:
            if required:
                why = f" {why}" if why else ""
                raise _fail(
                    f"[{self.key(name)}] table is required{why} but missing in {self.source}; add "
                    f"a [{self.key(name)}] table{hint}"
                )
            return None
        if not isinstance(value, Mapping):
            raise _fail(
                f"{self.key(name)} must be a table, got {_show(value)} ({self.source}); write it "
                f"as a [{self.key(name)}] table"
            )
        return _Table(
            value,
            self.key(name),
            self.source,
            schema=f"{self.schema}.{name}" if self.schema else name,
        )


# --------------------------------------------------------------------------------------------
# dict -> Spec
# --------------------------------------------------------------------------------------------


def spec_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Spec:
    """Build and validate a Spec from a TOML-shaped dict; the first problem raises SpecError."""
    if not isinstance(data, Mapping):
        raise _fail(
            f"a spec must be a TOML table, got {_show(data)} ({source}); start from sample_specs/"
        )
    root = _Table(data, "", source)
    root.check_keys()

    version = root.integer("schema_version", required=True)
    if version != SCHEMA_VERSION:
        raise _fail(
            f"schema_version {limits.show_number(version)} is not supported ({source}); this "
            "vramtui reads "
            f"schema_version = {SCHEMA_VERSION}: set it to {SCHEMA_VERSION} or upgrade vramtui"
        )
    name = root.string("name")
    description = root.string("description", multiline=True)

    model = _parse_model(root)
    task = _parse_task(root)
    kind = task.kind
    spec = Spec(
        schema_version=version,
        name=_or_default(name, ""),
        description=_or_default(description, ""),
        model=model,
        task=task,
        weights=_parse_weights(root, kind),
        lengths=_parse_lengths(root, kind),
        batch=_parse_batch(root, kind),
        training=_parse_training(root, kind),
        runtime=_parse_runtime(root, kind),
        placement=_parse_placement(root, kind),
        llama_cpp=_parse_llama_cpp(root, kind),
        quality=_parse_quality(root),
        headroom=_parse_headroom(root),
        campaign=_parse_campaign(root),
        measured=_parse_measured(root, kind),
        triage=_parse_triage(root),
    )
    return spec


def _parse_model(root: _Table) -> ModelRef:
    t = root.table("model", required=True, hint=" with one of id, path or params")
    t.check_keys()
    given = [k for k in ("id", "path", "params") if t.has(k)]
    if not given:
        raise _fail(
            f"[model] needs one of model.id, model.path or model.params, none given in {t.source}; "
            f'add e.g. id = "meta-llama/Llama-3.1-8B-Instruct" under [model]'
        )
    if len(given) > 1:
        both = " and ".join(f"model.{k}" for k in given)
        raise _fail(
            f"{both} are set together in {t.source}; a spec names its model one way only: keep "
            "exactly one"
        )
    model_id = t.string("id", nonempty=True)
    path = t.string("path", nonempty=True, raw=True)
    for key, value in (("id", model_id), ("path", path)):
        too_long = model_ref_too_long(value or "", t.key(key), f" ({t.source})")
        if too_long:
            raise _fail(too_long)
    params = _parse_params(t)
    revision = t.string("revision", nonempty=True)
    if revision is not None and params is not None:
        raise _fail(
            f"model.revision has no meaning with model.params ({t.source}); remove it, or name "
            "the model with model.id"
        )
    return ModelRef(id=model_id, path=path, params=params, revision=revision)


def _parse_params(t: _Table) -> int | None:
    value = t.number("params", maximum=limits.MAX_PARAMS)
    if value is None:
        return None
    if value <= 0:
        raise t.out_of_range("params", "> 0", value, "give the parameter count, e.g. params = 7e9")
    if isinstance(value, float):
        if value != int(value):
            raise t.out_of_range(
                "params", "a whole number of parameters", value, "round it, e.g. params = 7e9"
            )
        value = int(value)
    return value


def _parse_task(root: _Table) -> Task:
    t = root.table(
        "task", required=True, hint=' with kind = "inference" (or full_finetune, lora, qlora)'
    )
    t.check_keys()
    kind = t.choice("kind", TASK_KINDS, required=True)
    if kind not in ("lora", "qlora"):
        t.forbid(
            "lora",
            f"applies to task.kind 'lora' or 'qlora' only, but task.kind is '{kind}'",
            "remove the [task.lora] table or set task.kind to lora/qlora",
        )
        return Task(kind=kind, lora=None)

    lt = t.table(
        "lora", required=True, why=f"for task.kind '{kind}'", hint=" with rank and targets"
    )
    lt.check_keys()
    rank = lt.integer("rank", required=True, minimum=1, maximum=limits.MAX_LORA_RANK)
    alpha = lt.number("alpha", maximum=limits.MAX_LORA_ALPHA)
    if alpha is not None and alpha <= 0:
        raise lt.out_of_range(
            "alpha", "> 0", alpha, "set the LoRA scaling alpha, e.g. alpha = 32, or remove it"
        )
    targets = _parse_targets(lt)
    dropout = lt.number("dropout")
    if dropout is not None and not 0 <= dropout < 1:
        raise lt.out_of_range(
            "dropout", "0 <= dropout < 1", dropout, "e.g. dropout = 0.05, or 0 for none"
        )
    return Task(
        kind=kind,
        lora=LoraConfig(
            rank=rank,
            alpha=alpha,
            targets=targets,
            dropout=float(_or_default(dropout, 0.0)),
        ),
    )


def _parse_targets(lt: _Table) -> tuple[str, ...]:
    value = lt.data.get("targets")
    if value is None:
        raise lt.missing("targets")
    if not isinstance(value, list):
        raise lt.wrong_type("targets", "an array of module names", value)
    if not value:
        raise _fail(
            f'task.lora.targets is empty ({lt.source}); list module names, e.g. ["q_proj", '
            '"v_proj"], or ["all-linear"]'
        )
    seen: set[str] = set()
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise _fail(
                f"task.lora.targets[{i}] must be a non-empty string, got {_show(item)} "
                f'({lt.source}); write module names such as "q_proj"'
            )
        if item in seen:
            raise _fail(f"task.lora.targets lists '{item}' twice ({lt.source}); keep one")
        seen.add(item)
    if ALL_LINEAR in seen and len(value) > 1:
        raise _fail(
            f"task.lora.targets mixes 'all-linear' with module names ({lt.source}); use "
            '["all-linear"] alone or list the modules'
        )
    return tuple(value)


def _parse_weights(root: _Table, kind: str) -> Weights:
    t = root.table("weights", required=True, hint=' with format = "bf16" (or another format)')
    t.check_keys()
    fmt = t.choice("format", WEIGHT_FORMATS, required=True)
    groups: dict[str, str] = {}
    gt = t.table("groups")
    if gt is not None:
        gt.check_keys()
        for group in GROUPS:
            value = gt.choice(group, WEIGHT_FORMATS)
            if value is not None:
                groups[group] = value
    used = {fmt, *groups.values()}
    src = t.source

    def applies(name: str, formats: tuple[str, ...], label: str, required: bool) -> None:
        if any(f in used for f in formats):
            if required and not t.has(name):
                raise t.missing(name, f"for {label} weights")
        else:
            t.forbid(
                name, f"applies only to {label} weights, and no module group uses them", "remove it"
            )

    applies("double_quant", BNB_4BIT_FORMATS, "nf4/fp4", required=True)
    applies("bits", PACKED_FORMATS, "gptq/awq", required=True)
    applies("group_size", PACKED_FORMATS, "gptq/awq", required=True)
    applies("gguf_type", ("gguf",), "gguf", required=True)

    double_quant = t.boolean("double_quant")
    bits = t.integer("bits")
    if bits is not None and bits not in GPTQ_BITS:
        raise t.out_of_range(
            "bits",
            f"one of {', '.join(map(str, GPTQ_BITS))}",
            bits,
            "use 4 for the usual gptq/awq checkpoints",
        )
    group_size = t.integer("group_size", maximum=limits.MAX_GROUP_SIZE)
    if group_size is not None and group_size != -1 and group_size < 1:
        raise t.out_of_range(
            "group_size", "-1 (per channel) or a positive size", group_size, "e.g. group_size = 128"
        )
    gguf_type = t.choice("gguf_type", GGUF_TYPES)

    if kind == "qlora":
        for group in ("attention", "mlp"):
            g_fmt = groups.get(group, fmt)
            if g_fmt not in BNB_4BIT_FORMATS:
                key = f"weights.groups.{group}" if group in groups else "weights.format"
                raise _fail(
                    "task.kind 'qlora' needs nf4 or fp4 weights on the linear layers, but the "
                    f"{group} group is "
                    f"'{g_fmt}' (from {key}) in {src}; set {key} = \"nf4\" or use task.kind = "
                    '"lora"'
                )
    if kind in TRAINING_KINDS:
        for group in GROUPS:
            g_fmt = groups.get(group, fmt)
            if g_fmt == "gguf":
                raise _fail(
                    f"gguf weights cannot be trained ({src}: {group} group); gguf is a llama.cpp "
                    "inference format: "
                    f"size training with the format the weights are loaded in (e.g. bf16 or nf4)"
                )
    if kind == "full_finetune":
        frozen = [g for g in GROUPS if groups.get(g, fmt) in FROZEN_ONLY_FORMATS]
        if frozen:
            g_fmt = groups.get(frozen[0], fmt)
            raise _fail(
                f"task.kind 'full_finetune' cannot update {g_fmt} weights (the {frozen[0]} group) "
                f"in {src}; "
                'use fp32/bf16/fp16/fp8 weights, or task.kind = "lora" / "qlora" for a quantised '
                "base"
            )
    return Weights(
        format=fmt,
        double_quant=double_quant,
        bits=bits,
        group_size=group_size,
        gguf_type=gguf_type,
        groups=groups,
    )


def _or_default(value: Any, default: Any) -> Any:
    """The documented default of an optional key that is absent (docs/spec-format.md)."""
    return default if value is None else value


def _kind_rule(t: _Table, name: str, applies: bool, kind: str, elsewhere: str) -> None:
    """Refuse `name` when it does not apply to this task kind."""
    if not applies:
        t.forbid(name, f"does not apply to task.kind '{kind}'", f"remove it ({elsewhere})")


def _parse_lengths(root: _Table, kind: str) -> Lengths:
    inference = kind == "inference"
    keys = "prompt_tokens and generated_tokens" if inference else "seq_len"
    t = root.table("lengths", required=True, hint=f" with {keys}")
    t.check_keys()
    why = f"for task.kind '{kind}'"
    _kind_rule(
        t,
        "seq_len",
        not inference,
        kind,
        "inference uses lengths.prompt_tokens and lengths.generated_tokens",
    )
    _kind_rule(t, "prompt_tokens", inference, kind, "training tasks use lengths.seq_len")
    _kind_rule(t, "generated_tokens", inference, kind, "training tasks use lengths.seq_len")
    if inference:
        return Lengths(
            prompt_tokens=t.integer(
                "prompt_tokens", required=True, why=why, minimum=1, maximum=limits.MAX_SEQ_TOKENS
            ),
            generated_tokens=t.integer(
                "generated_tokens",
                required=True,
                why=why,
                minimum=0,
                maximum=limits.MAX_SEQ_TOKENS,
            ),
        )
    seq_len = t.integer("seq_len", required=True, why=why, minimum=1, maximum=limits.MAX_SEQ_TOKENS)
    return Lengths(seq_len=seq_len)


def _parse_batch(root: _Table, kind: str) -> Batch:
    inference = kind == "inference"
    t = root.table(
        "batch", required=True, hint=" with concurrency" if inference else " with micro_batch"
    )
    t.check_keys()
    why = f"for task.kind '{kind}'"
    _kind_rule(
        t,
        "concurrency",
        inference,
        kind,
        "training tasks use batch.micro_batch and batch.grad_accum",
    )
    _kind_rule(t, "micro_batch", not inference, kind, "inference uses batch.concurrency")
    _kind_rule(t, "grad_accum", not inference, kind, "inference uses batch.concurrency")
    if inference:
        concurrency = t.integer(
            "concurrency", required=True, why=why, minimum=1, maximum=limits.MAX_BATCH
        )
        return Batch(concurrency=concurrency)
    grad_accum = t.integer("grad_accum", minimum=1, maximum=limits.MAX_GRAD_ACCUM)
    return Batch(
        micro_batch=t.integer(
            "micro_batch", required=True, why=why, minimum=1, maximum=limits.MAX_BATCH
        ),
        grad_accum=_or_default(grad_accum, 1),
    )


def _parse_training(root: _Table, kind: str) -> Training | None:
    if kind == "inference":
        root.forbid(
            "training",
            "is a table for training tasks only, but task.kind is 'inference'",
            "remove the [training] table or change task.kind",
        )
        return None
    t = root.table(
        "training",
        required=True,
        why=f"for task.kind '{kind}'",
        hint=" with optimizer, master_weights_fp32, grad_dtype and grad_checkpointing",
    )
    t.check_keys()
    optimizer = t.choice("optimizer", OPTIMIZERS, required=True)
    master = t.boolean("master_weights_fp32", required=True)
    grad_dtype = t.choice("grad_dtype", GRAD_DTYPES, required=True)
    state_dtype = t.choice("optimizer_state_dtype", OPTIMIZER_STATE_DTYPES)
    if optimizer in OPTIMIZERS_WITH_STATE_DTYPE:
        state_dtype = _or_default(state_dtype, "fp32")
    else:
        reason = (
            "sgd keeps no optimizer state"
            if optimizer == "sgd"
            else "adamw_8bit keeps its state in 8 bits"
        )
        t.forbid(
            "optimizer_state_dtype",
            f"does not apply to optimizer '{optimizer}' ({reason})",
            "remove it",
        )
    checkpointing = t.choice("grad_checkpointing", GRAD_CHECKPOINTING, required=True)
    placement = t.choice("optimizer_placement", OPTIMIZER_PLACEMENTS)
    accum = root.data.get("batch", {}).get("grad_accum", 1)
    if placement == "in-backward" and isinstance(accum, int) and accum > 1:
        raise _fail(
            f"training.optimizer_placement = 'in-backward' steps each parameter as its gradient "
            f"appears, which cannot accumulate gradients, but batch.grad_accum is {accum} "
            f"({t.source}); set batch.grad_accum = 1 or optimizer_placement = 'standard'"
        )
    return Training(
        optimizer=optimizer,
        master_weights_fp32=master,
        grad_dtype=grad_dtype,
        optimizer_state_dtype=state_dtype,
        grad_checkpointing=checkpointing,
        framework=t.choice("framework", FRAMEWORKS),
        adapter_dtype=t.choice("adapter_dtype", ADAPTER_DTYPES),
        fused_qkv_adapter=t.boolean("fused_qkv_adapter"),
        loss_impl=t.choice("loss_impl", LOSS_IMPLS),
        optimizer_placement=placement,
        fsdp_frozen_base=t.choice("fsdp_frozen_base", FSDP_FROZEN_BASE),
        no_sync=t.boolean("no_sync"),
        gqa_expand_kv=t.boolean("gqa_expand_kv"),
        fsdp_root_gathered=t.boolean("fsdp_root_gathered"),
        offload_params=t.boolean("offload_params"),
        offload_checkpoints=t.boolean("offload_checkpoints"),
        versions=_training_versions(t),
    )


_VERSION = re.compile(r"[0-9]+(\.[0-9]+){0,3}([.+-]?[A-Za-z0-9.+-]*)?")


def _training_versions(t: _Table) -> tuple[tuple[str, str], ...]:
    """[training.versions]: library = "x.y.z" for the libraries whose version changes memory."""
    v = t.table("versions")
    if v is None:
        return ()
    v.check_keys()
    out = []
    for lib in VERSIONED_LIBRARIES:
        text = v.string(lib)
        if text is None:
            continue
        if len(text) > MAX_VERSION_CHARS or not _VERSION.fullmatch(text):
            raise _fail(
                f'training.versions.{lib} must be a version such as "0.43.1", got '
                f"{_show(text[:MAX_VERSION_CHARS])} ({t.source}); write the version pip shows "
                f"(at most {MAX_VERSION_CHARS} characters)"
            )
        out.append((lib, text))
    return tuple(out)


def _parse_runtime(root: _Table, kind: str) -> Runtime:
    t = root.table("runtime", required=True, hint=' with attention = "sdpa" (or flash, eager)')
    t.check_keys()
    attention = t.choice("attention", ATTENTION_IMPLS, required=True)
    inference = kind == "inference"
    _kind_rule(t, "kv_cache_dtype", inference, kind, "training keeps no KV cache")
    _kind_rule(t, "kv_block_tokens", inference, kind, "training keeps no KV cache")
    kv_dtype = t.choice(
        "kv_cache_dtype", KV_CACHE_DTYPES, required=inference, why="for task.kind 'inference'"
    )
    block = t.integer("kv_block_tokens", minimum=0, maximum=limits.MAX_KV_BLOCK_TOKENS)
    if inference:
        block = _or_default(block, 0)
    engine = t.choice("engine", ENGINES)
    return Runtime(
        attention=attention, kv_cache_dtype=kv_dtype, kv_block_tokens=block, engine=engine
    )


def _parse_llama_cpp(root: _Table, kind: str) -> LlamaCpp | None:
    engine = (root.data.get("runtime") or {}).get("engine")
    if engine != "llama.cpp" or kind != "inference":
        why = (
            "applies to runtime.engine 'llama.cpp' only"
            if engine != "llama.cpp"
            else f"applies to inference only, but task.kind is '{kind}'"
        )
        root.forbid(
            "llama_cpp", why, 'remove the [llama_cpp] table or set runtime.engine = "llama.cpp"'
        )
        return None
    t = root.table("llama_cpp") or _Table({}, "llama_cpp", root.source)
    t.check_keys()
    lim = limits.MAX_SEQ_TOKENS
    n_ctx = t.integer("n_ctx", minimum=1, maximum=lim)
    n_batch = _or_default(t.integer("n_batch", minimum=1, maximum=lim), LLAMA_CPP_DEFAULT_N_BATCH)
    n_ubatch = _or_default(
        t.integer("n_ubatch", minimum=1, maximum=lim), LLAMA_CPP_DEFAULT_N_UBATCH
    )
    n_parallel = t.integer("n_parallel", minimum=1, maximum=limits.MAX_BATCH)
    ngl = _or_default(t.integer("n_gpu_layers", minimum=-1, maximum=limits.MAX_LAYERS), -1)
    ctk = t.choice("cache_type_k", LLAMA_CPP_CACHE_TYPES)
    ctv = t.choice("cache_type_v", LLAMA_CPP_CACHE_TYPES)
    fa = _or_default(t.boolean("flash_attn"), True)
    unified = _or_default(t.boolean("kv_unified"), False)
    out = LlamaCpp(
        n_ctx=n_ctx,
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        n_parallel=n_parallel,
        n_gpu_layers=ngl,
        cache_type_k=ctk,
        cache_type_v=ctv,
        flash_attn=fa,
        kv_unified=unified,
    )
    runtime = root.data["runtime"]
    kv_dtype = runtime.get("kv_cache_dtype")
    k, v = out.cache_types(kv_dtype)
    for key, value in (("cache_type_k", k), ("cache_type_v", v)):
        if value is None:
            raise _fail(
                f"runtime.kv_cache_dtype '{kv_dtype}' has no llama.cpp cache type ({t.source}); "
                f"set llama_cpp.{key} (f16, q8_0, q4_0 ...) under [llama_cpp]"
            )
    if v not in _LLAMA_CPP_FLOAT_CACHE and not fa:
        raise _fail(
            f"llama_cpp.cache_type_v = '{v}' is quantised, and llama.cpp refuses a quantised V "
            f"cache without Flash Attention ({t.source}); set flash_attn = true or "
            'cache_type_v = "f16"'
        )
    batch = root.data["batch"]
    concurrency = batch["concurrency"]
    slots = out.slots(concurrency)
    if concurrency > slots:
        raise _fail(
            f"batch.concurrency = {concurrency} is more than llama_cpp.n_parallel = {slots} slots "
            f"({t.source}); llama.cpp serves at most n_parallel sequences at once: raise "
            "n_parallel or lower concurrency"
        )
    lengths = root.data["lengths"]
    need = lengths["prompt_tokens"] + lengths["generated_tokens"]
    if n_ctx is not None and n_ctx // slots < need:
        raise _fail(
            f"llama_cpp.n_ctx = {n_ctx:,} gives each of {slots} slot(s) {n_ctx // slots:,} "
            f"tokens, fewer than the {need:,} a sequence needs (prompt + generated) "
            f"({t.source}); set n_ctx to at least {slots * need:,}"
        )
    return out


def _parse_placement(root: _Table, kind: str) -> Placement:
    t = root.table("placement", required=True, hint=" with gpus = 1")
    t.check_keys()
    gpus = t.integer("gpus", required=True, minimum=1, maximum=limits.MAX_GPUS)
    tp = _or_default(t.integer("tensor_parallel", minimum=1, maximum=limits.MAX_PARALLEL), 1)
    pp = _or_default(t.integer("pipeline_parallel", minimum=1, maximum=limits.MAX_PARALLEL), 1)
    sharding = _or_default(t.choice("data_parallel_sharding", SHARDING), "none")
    if gpus % (tp * pp):
        raise _fail(
            f"placement.gpus = {gpus} is not a multiple of tensor_parallel x pipeline_parallel = "
            f"{tp} x {pp} = {tp * pp} ({t.source}); set gpus to a multiple of {tp * pp} or lower "
            "the parallel degrees"
        )
    if kind == "inference" and sharding != "none":
        raise _fail(
            f"placement.data_parallel_sharding = '{sharding}' shards training state, but "
            "task.kind is 'inference' "
            f'({t.source}); set it to "none" (use tensor_parallel or pipeline_parallel to split a '
            "model)"
        )
    return Placement(
        gpus=gpus, tensor_parallel=tp, pipeline_parallel=pp, data_parallel_sharding=sharding
    )


def _parse_quality(root: _Table) -> tuple[QualityCriterion, ...]:
    value = root.data.get("quality")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise root.wrong_type("quality", "an array of [[quality]] tables", value)
    criteria = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _fail(
                f"quality[{i}] must be a table, got {_show(item)} ({root.source}); write each "
                "criterion as a [[quality]] table"
            )
        t = _Table(item, f"quality[{i}]", root.source, schema="quality")
        t.check_keys()
        criteria.append(
            QualityCriterion(
                metric=t.string("metric", required=True, nonempty=True),
                threshold=t.string("threshold", required=True, nonempty=True),
                note=t.string("note", multiline=True) or "",
            )
        )
    return tuple(criteria)


def _parse_headroom(root: _Table) -> Headroom:
    t = root.table(
        "headroom",
        required=True,
        hint=' with mode = "itemised" (or "manual" with reserve_gib and reason)',
    )
    t.check_keys()
    mode = t.choice("mode", HEADROOM_MODES, required=True)
    manual = mode == "manual"
    if manual:
        t.forbid(
            "cuda_context_bytes",
            "is an itemised-mode override; a manual reserve already covers it",
            'remove it, or set headroom.mode = "itemised"',
        )
    else:
        for name in ("reserve_gib", "reason"):
            t.forbid(
                name,
                "applies to headroom.mode 'manual' only; itemised mode lists every overhead",
                'remove it, or set headroom.mode = "manual"',
            )
    why = "for headroom.mode 'manual' (a margin without a reason is refused)"
    reserve = t.number("reserve_gib", required=manual, why=why, maximum=limits.MAX_GIB)
    if reserve is not None and reserve < 0:
        raise t.out_of_range(
            "reserve_gib", ">= 0", reserve, "give the reserve in GiB, e.g. reserve_gib = 6.0"
        )
    reason = t.string("reason", required=manual, why=why, nonempty=True, multiline=True)
    context = t.integer("cuda_context_bytes", minimum=1, maximum=limits.MAX_BYTES)
    margin = t.number("margin_fraction")
    if margin is not None and not 0 <= margin < 0.5:
        raise t.out_of_range(
            "margin_fraction", "0 <= margin_fraction < 0.5", margin, "e.g. margin_fraction = 0.05"
        )
    return Headroom(
        mode=mode,
        reserve_gib=float(reserve) if reserve is not None else None,
        reason=reason,
        cuda_context_bytes=context,
        margin_fraction=float(_or_default(margin, 0.0)),
    )


def _array_tables(root: _Table, name: str, hint: str) -> list[_Table]:
    value = root.data.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise root.wrong_type(name, f"an array of [[{name}]] tables", value)
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _fail(f"{name}[{i}] must be a table, got {_show(item)} ({root.source}); {hint}")
        t = _Table(item, f"{name}[{i}]", root.source, schema=name)
        t.check_keys()
        out.append(t)
    return out


def _parse_measured(root: _Table, kind: str) -> tuple[Measurement, ...]:
    stages = (
        ("load", "prefill", "decode")
        if kind == "inference"
        else ("load", "forward", "backward", "optimizer_step", "validation", "export")
    )
    out = []
    for t in _array_tables(root, "measured", "write each figure as a [[measured]] table"):
        date = t.data.get("date")
        if date is not None and (
            not isinstance(date, datetime.date) or isinstance(date, datetime.datetime)
        ):
            raise t.wrong_type("date", "a TOML date such as 2026-12-02", date)
        quantity = t.choice("quantity", MEASURED_QUANTITIES, required=True)
        if quantity in COUNT_QUANTITIES:
            t.forbid(
                "bytes",
                f"does not apply: quantity '{quantity}' is a count",
                "write the count as value = N instead",
            )
            value = t.number(
                "value",
                required=True,
                why=f"(quantity '{quantity}' is a count)",
                maximum=limits.MAX_COUNT,
            )
            if value < 0:
                raise t.out_of_range("value", ">= 0", value, "write the count as printed")
            n_bytes = None
        else:
            t.forbid(
                "value",
                f"does not apply: quantity '{quantity}' is in bytes",
                "write the figure as bytes = N instead",
            )
            n_bytes = t.integer("bytes", required=True, minimum=0, maximum=limits.MAX_BYTES)
            value = None
        out.append(
            Measurement(
                stage=t.choice("stage", stages, required=True),
                quantity=quantity,
                bytes=n_bytes,
                value=value,
                counter=t.string("counter", required=True, nonempty=True),
                as_written=t.string("as_written", multiline=True) or "",
                item=t.string("item", nonempty=True),
                source=t.string("source") or "",
                gpu=t.integer("gpu", minimum=0, maximum=limits.MAX_GPUS),
                device=t.string("device") or "",
                date=date,
                run=t.string("run") or "",
                error=t.string("error", multiline=True) or "",
                dims=_measured_dims(t),
                versions=_measured_versions(t),
            )
        )
    return tuple(out)


def _measured_dims(t: _Table) -> dict[str, int | float]:
    dims = t.data.get("dims", {})
    if not isinstance(dims, Mapping) or not all(
        isinstance(v, (int, float))
        and not isinstance(v, bool)
        and math.isfinite(v)
        and 0 <= v <= limits.MAX_COUNT
        and isinstance(k, str)
        for k, v in dims.items()
    ):
        raise t.wrong_type(
            "dims",
            "a table of executed dimensions (numbers from 0 to vramtui's limit of "
            f"{limits.MAX_COUNT:,}), e.g. {{ batch = 8, seq_len = 4096 }}",
            dims,
        )
    fraction = dims.get("corpus_fraction")
    if fraction is not None and fraction > 1:
        raise t.out_of_range(
            "dims", "corpus_fraction between 0 and 1", fraction, "write the share run, e.g. 0.25"
        )
    return {safe_line(k): v for k, v in dims.items()}


def _measured_versions(t: _Table) -> dict[str, str]:
    versions = t.data.get("versions", {})
    if not isinstance(versions, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in versions.items()
    ):
        raise t.wrong_type(
            "versions", 'a table of version strings, e.g. { torch = "2.13.0" }', versions
        )
    return {safe_line(k): safe_line(v) for k, v in versions.items()}


def _parse_triage(root: _Table) -> tuple[TriageAttempt, ...]:
    out = []
    for t in _array_tables(root, "triage", "write each attempt as a [[triage]] table"):
        figures = t.data.get("figures", {})
        if not isinstance(figures, Mapping) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= limits.MAX_BYTES
            for v in figures.values()
        ):
            raise t.wrong_type(
                "figures",
                "a table of byte counts (integers from 0 to vramtui's limit of 2^60)",
                figures,
            )
        time = t.data.get("time")
        if isinstance(time, (datetime.datetime, datetime.date)):
            time = time.isoformat()
        if not isinstance(time, str) or not time.strip():
            raise t.wrong_type("time", "an ISO 8601 time", time)
        time = safe_line(time)
        out.append(
            TriageAttempt(
                time=time,
                phase=t.choice("phase", TRIAGE_PHASES, required=True),
                framework=t.string("framework") or "",
                figures={safe_line(k): v for k, v in figures.items()},
                variable=t.choice("variable", TRIAGE_VARIABLES, required=True),
                change=t.string("change", required=True, nonempty=True),
                predicted_peak_bytes=t.integer(
                    "predicted_peak_bytes", minimum=0, maximum=limits.MAX_BYTES
                ),
                outcome=t.string("outcome") or "pending",
            )
        )
    return tuple(out)


def _parse_campaign(root: _Table) -> Campaign:
    t = root.table("campaign")
    if t is None:
        return Campaign()
    t.check_keys()
    days = t.number("days", maximum=limits.MAX_DAYS)
    if days is not None and days <= 0:
        raise t.out_of_range("days", "> 0", days, "give the campaign length in days, e.g. days = 3")
    budget = t.number("budget", maximum=limits.MAX_MONEY)
    if budget is not None and budget < 0:
        raise t.out_of_range("budget", ">= 0", budget, "give the total budget, e.g. budget = 100")
    currency = t.string(
        "currency", required=budget is not None, why=" with campaign.budget", nonempty=True
    )
    if currency is not None and not re.fullmatch(r"[A-Z]{3}", currency):
        raise t.out_of_range("currency", "a 3-letter ISO code", currency, 'e.g. currency = "USD"')
    start_by = t.data.get("start_by")
    if start_by is not None and (
        not isinstance(start_by, datetime.date) or isinstance(start_by, datetime.datetime)
    ):
        raise t.wrong_type("start_by", "a TOML date such as 2026-12-10", start_by)
    software = None
    st = t.table("software")
    if st is not None:
        st.check_keys()
        software = SoftwareRequest(
            image=st.string("image", nonempty=True),
            driver=st.string("driver", nonempty=True),
            cuda=st.string("cuda", nonempty=True),
            required=bool(_or_default(st.boolean("required"), False)),
        )
    return Campaign(
        days=float(days) if days is not None else None,
        budget=float(budget) if budget is not None else None,
        currency=currency,
        start_by=start_by,
        software=software,
    )


# --------------------------------------------------------------------------------------------
# Re-checks
# --------------------------------------------------------------------------------------------


def validate_spec(spec: Spec, source: str = "<spec>") -> Spec:
    """Re-run every check on a Spec built or edited in code; return it with defaults filled in.

    Raises SpecError (one line) for the first problem, exactly as loading the saved file would.
    """
    try:
        data = spec_to_dict(spec)
    except AttributeError as exc:  # a field replaced by something that is not the right record
        raise _fail(
            f"spec from {source} is malformed: {exc}; build it from the vramtui.spec dataclasses"
        ) from exc
    return spec_from_dict(data, source)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------

MAX_SPEC_BYTES = 8 * 2**20  # a spec with thousands of [[measured]] items is under 1 MiB


def loads_spec(text: str, source: str = "<string>") -> Spec:
    """Parse TOML text into a validated Spec."""
    from vramtui.guarded_read import parse_toml

    data = parse_toml(text, error=_fail, source=source, fix="fix the spec file")
    return spec_from_dict(data, source)


def read_spec_text(path: str | os.PathLike[str]) -> str:
    """The text of a spec file, bounded by MAX_SPEC_BYTES; SpecError (one line) otherwise."""
    from vramtui.guarded_read import decode_utf8, read_bytes

    source = os.fspath(path)
    raw = read_bytes(
        path,
        error=_fail,
        what="spec file",
        cap=MAX_SPEC_BYTES,
        too_big_fix="a spec is a few KiB of TOML; check it is the right file",
        missing="not found",
        missing_fix="check the path, or start from sample_specs/seed-7b-fp16-inference.toml",
    )
    return decode_utf8(raw, error=_fail, source=f"spec file {source}")


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and validate a spec file."""
    return loads_spec(read_spec_text(path), os.fspath(path))


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
