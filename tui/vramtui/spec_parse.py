"""dict -> Spec: `spec_from_dict` and one `_parse_*` function per table of the spec.

Every check a spec's keys and values get lives here; `vramtui.spec` re-exports
`spec_from_dict`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

from vramtui import limits
from vramtui.models.architecture import GROUPS
from vramtui.models.resolve import model_ref_too_long
from vramtui.spec_parse_measured import _parse_measured, _parse_triage
from vramtui.spec_table import (
    _fail,
    _show,
    _Table,
)
from vramtui.spec_types import (
    _LLAMA_CPP_FLOAT_CACHE,
    ADAPTER_DTYPES,
    ALL_LINEAR,
    ATTENTION_IMPLS,
    BNB_4BIT_FORMATS,
    ENGINES,
    FRAMEWORKS,
    FROZEN_ONLY_FORMATS,
    FSDP_FROZEN_BASE,
    GGUF_TYPES,
    GPTQ_BITS,
    GRAD_CHECKPOINTING,
    GRAD_DTYPES,
    HEADROOM_MODES,
    KV_CACHE_DTYPES,
    LLAMA_CPP_CACHE_TYPES,
    LLAMA_CPP_DEFAULT_N_BATCH,
    LLAMA_CPP_DEFAULT_N_UBATCH,
    LOSS_IMPLS,
    MAX_VERSION_CHARS,
    OPTIMIZER_PLACEMENTS,
    OPTIMIZER_STATE_DTYPES,
    OPTIMIZERS,
    OPTIMIZERS_WITH_STATE_DTYPE,
    PACKED_FORMATS,
    SCHEMA_VERSION,
    SELECTIVE_POLICIES,
    SHARDING,
    TASK_KINDS,
    TRAINING_KINDS,
    VERSIONED_LIBRARIES,
    WEIGHT_FORMATS,
    Batch,
    Campaign,
    Headroom,
    Lengths,
    LlamaCpp,
    LoraConfig,
    ModelRef,
    Placement,
    QualityCriterion,
    Runtime,
    SoftwareRequest,
    Spec,
    Task,
    Training,
    Weights,
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
        selective_policy=t.choice("selective_policy", SELECTIVE_POLICIES),
        fp32_norms=t.boolean("fp32_norms"),
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
