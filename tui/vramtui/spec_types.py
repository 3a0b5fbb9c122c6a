"""The spec's vocabularies and its frozen records (`Spec` and the tables it holds).

`vramtui.spec` re-exports every public name here; see that module for the rules a spec obeys.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass

from vramtui.models.architecture import GROUPS
from vramtui.safe_text import has_unsafe, safe_line, safe_text

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
LOSS_IMPLS = ("full-upcast", "chunked-fp32", "chunked-bf16", "fused", "compiled")
OPTIMIZER_PLACEMENTS = ("standard", "in-backward", "paged", "cpu-offload")
FSDP_FROZEN_BASE = ("sharded", "gathered")
# What grad_checkpointing = "selective" keeps: "attention" recomputes the attention scores only
# (every other saved tensor kept); "torchtitan-op" is torchtitan's op-level policy (each
# layer's input, the outputs of every other matmul and the SDPA kernel's outputs kept).
SELECTIVE_POLICIES = ("attention", "torchtitan-op")
# Libraries whose version changes memory ([training.versions]).
VERSIONED_LIBRARIES = ("bitsandbytes", "transformers", "peft", "unsloth", "trl")
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
        "selective_policy",
        "fp32_norms",
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
    # What selective checkpointing keeps (one of SELECTIVE_POLICIES).
    selective_policy: str | None = None
    # Norm weights upcast to fp32 in a 16-bit model (PEFT prepare_model_for_kbit_training).
    fp32_norms: bool | None = None
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
