"""Build the spec's model with `transformers` on the meta device (or a real device for checks).

The config is the catalogue's copy of the model's config.json (or a local config.json); no
weights are read. The model is built in the spec's compute dtype, with the trace's attention
implementation, quantised linears replaced by stand-ins of the format's packed size
(quantized.py), and LoRA adapters added by PEFT for lora/qlora tasks.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from vramtui.dryrun.errors import INSTALL_HINT, DryRunError, missing_extra
from vramtui.ledger.formats import BNB4_FORMATS, DTYPE_FORMATS, FLOAT_BYTES, QuantParams

TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass
class BuiltModel:
    model: object  # torch.nn.Module (a PeftModel for lora/qlora)
    hf_config: object
    dtype: object  # torch.dtype of compute
    compute_dtype: str  # "bf16" | "fp16" | "fp32"
    attn_implementation: str
    lm_head: object  # the output projection module (logits are tagged from its forward on)
    trainable: list = field(default_factory=list)  # parameters that get gradients
    adapter_params: set = field(default_factory=set)  # ids of LoRA adapter parameters
    notes: list[str] = field(default_factory=list)
    quantized_linears: int = 0
    param_count: int = 0  # elements of the built model's parameters (stand-ins: packed bytes)
    attention_used: str | None = None  # set when the family's attention is routed (attention.py)
    patch_sdpa: bool = False  # trace the model's direct SDPA calls as the fused kernel
    weights_gap: str = ""  # why the weights built cannot match the ledger's (stored.py)


def import_torch():
    """torch and transformers, or the one-line DryRunError saying how to install them."""
    try:
        import torch
        import transformers
    except ImportError:
        raise missing_extra() from None
    return torch, transformers


def load_config(arch, local_config_dir: str | Path | None) -> dict:
    """The text model's config dict: from DIR/config.json when given, else the catalogue's."""
    if local_config_dir is None:
        return dict(arch.config)
    from vramtui.guarded_read import MAX_JSON_BYTES, read_json
    from vramtui.models.hf_config import text_config_of

    path = Path(local_config_dir) / "config.json"
    raw = read_json(
        path,
        error=DryRunError,
        what="config.json",
        source=f"{path} (for the dry run)",
        cap=MAX_JSON_BYTES,
        fix="re-download it",
    )
    return text_config_of(raw, str(path))


def compute_dtype_of(spec, arch) -> str:
    """The ledger's compute dtype (LedgerContext.compute_dtype), repeated to avoid a cycle."""
    fmt = spec.weights.format
    if fmt in DTYPE_FORMATS:
        return fmt
    if arch is not None and arch.default_dtype in ("bf16", "fp16"):
        return arch.default_dtype
    return "bf16"


def group_of(name: str) -> str:
    """The ledger's module group of a transformers module name."""
    name = name.replace(".base_layer", "")
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "lm_head" or name.endswith("lm_head"):
        return "lm_head"
    if "embed_tokens" in name or "word_embeddings" in name or leaf == "wte":
        return "embedding"
    if ".experts." in name:
        return "experts"
    if re.search(r"\.mlp\.(gate|router)$", name) or leaf in ("router", "shared_expert_gate"):
        return "router"
    if re.search(r"\.(self_attn|self_attention|attn|attention)\.", name + "."):
        return "attention"
    if ".mlp." in name + "." or ".feed_forward." in name + ".":
        return "mlp"
    return "other"


def _hf_config(transformers, config: dict, source: str):
    model_type = config.get("model_type")
    kwargs = {
        k: v
        for k, v in config.items()
        if k not in ("quantization_config", "model_type", "architectures", "auto_map")
    }
    try:
        return transformers.AutoConfig.for_model(model_type, **kwargs)
    except (ValueError, KeyError, TypeError) as exc:
        raise DryRunError(
            f"transformers {transformers.__version__} cannot build model_type '{model_type}' "
            f"from {source} ({_short(exc)}); the analytic ledger still stands"
        ) from None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."


def _attention_route(transformers, spec, hf_config, training: bool, ckpt: str):
    """None when the family dispatches attention through AttentionInterface (the trace's own
    functions run), else how it is built instead (attention.builtin_route)."""
    from vramtui.dryrun import attention

    try:
        cls = transformers.AutoModelForCausalLM._model_mapping[type(hf_config)]
    except (KeyError, ValueError, AttributeError):
        return None  # from_config says why it cannot build this family
    if attention.uses_attention_interface(cls):
        return None
    return attention.builtin_route(
        hf_config.model_type,
        spec.runtime.attention,
        training,
        ckpt,
        bool(getattr(cls, "_supports_sdpa", False)),
    )


def build_model(spec, arch, config: dict, *, device: str = "meta") -> BuiltModel:
    torch, transformers = import_torch()
    from vramtui.dryrun import attention

    training = spec.task.kind != "inference"
    ckpt = spec.training.grad_checkpointing if training else "none"
    source = arch.source if arch is not None else "config.json"
    hf_config = _hf_config(transformers, config, source)
    compute = compute_dtype_of(spec, arch)
    dtype = getattr(torch, TORCH_DTYPES[compute])
    attention.register()
    impl = attention.implementation_for(spec.runtime.attention, training, ckpt)
    route = _attention_route(transformers, spec, hf_config, training, ckpt)
    if route is not None:
        impl = route.implementation
    kwargs = {"dtype": dtype, "attn_implementation": impl}
    is_moe = arch is not None and arch.is_moe
    if is_moe:
        # grouped GEMM over tokens sorted by expert: shapes do not depend on the routing,
        # like the fused MoE kernels of vLLM/SGLang (the eager loop calls nonzero()).
        kwargs["experts_implementation"] = "grouped_mm"
    try:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(hf_config, **kwargs)
    except (ValueError, KeyError, TypeError, NotImplementedError, RuntimeError) as exc:
        raise DryRunError(
            f"transformers {transformers.__version__} cannot build {source} on the {device} "
            f"device ({_short(exc)}); the analytic ledger still stands"
        ) from None
    built = BuiltModel(
        model=model,
        hf_config=hf_config,
        dtype=dtype,
        compute_dtype=compute,
        attn_implementation=impl,
        lm_head=model.get_output_embeddings(),
    )
    if route is not None:
        built.attention_used = route.used
        built.patch_sdpa = route.patch_sdpa
        built.notes.append(route.note)
    if is_moe:
        built.notes.append(
            "MoE experts run as transformers' grouped_mm (tokens sorted by expert, shapes "
            "independent of routing); every token's top-k copies are materialised"
        )
    _apply_group_dtypes(spec, built)
    if training:
        model.train()
        if ckpt == "full":
            kw = {"use_reentrant": False}
            enable = getattr(model, "activation_checkpointing_enable", None)
            if enable is not None:
                enable(activation_checkpointing_kwargs=kw)
            else:  # transformers < 5.x
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
            built.notes.append(
                "full checkpointing: transformers' activation checkpointing "
                "(non-reentrant torch.utils.checkpoint around each decoder layer)"
            )
    else:
        model.eval()
    if spec.task.kind in ("lora", "qlora"):
        _add_lora(spec, built)
    _build_stored_format(spec, arch, config, built)
    if training and spec.task.kind == "full_finetune":
        for p in built.model.parameters():
            p.requires_grad_(p.is_floating_point())
    elif not training:
        for p in built.model.parameters():
            p.requires_grad_(False)
    built.trainable = [p for p in built.model.parameters() if p.requires_grad]
    built.param_count = sum(p.numel() for p in built.model.parameters())
    built.lm_head = built.model.get_output_embeddings()
    return built


def _apply_group_dtypes(spec, built: BuiltModel) -> None:
    """Per-group 16/32-bit overrides of a different width than the compute dtype."""
    torch = __import__("torch")
    overrides = spec.weights.group_overrides
    wide = {
        g: f
        for g, f in overrides.items()
        if f in DTYPE_FORMATS and FLOAT_BYTES[f] != FLOAT_BYTES[built.compute_dtype]
    }
    same = sorted(
        g
        for g, f in overrides.items()
        if f in DTYPE_FORMATS and f != built.compute_dtype and g not in wide
    )
    if same:
        built.notes.append(
            f"{', '.join(same)} traced in {built.compute_dtype}: the spec's "
            f"{'/'.join(sorted({overrides[g] for g in same}))} has the same bytes per value"
        )
    if not wide:
        return
    for name, module in built.model.named_modules():
        if not name or any(True for _ in module.children()):
            continue
        fmt = wide.get(group_of(name))
        if fmt is not None:
            module.to(getattr(torch, TORCH_DTYPES[fmt]))
    built.notes.append(
        "held in a different dtype as the spec sets: "
        + ", ".join(f"{g} {f}" for g, f in sorted(wide.items()))
    )


def _build_stored_format(spec, arch, config: dict, built: BuiltModel) -> None:
    """The checkpoint's stored format (stored.py), or the spec's format (stand-ins)."""
    from vramtui.dryrun import stored

    qc = arch.quantization_config if arch is not None else config.get("quantization_config")
    plan = stored.plan_for(spec, qc)
    if plan is not None and plan.method not in stored.LEDGER_FORMAT_METHODS:
        stored.apply(plan, built, spec)
        return
    _quantize_linears(spec, built, plan)
    if plan is not None and built.quantized_linears:
        built.notes.append(
            f"pre-quantised checkpoint ({plan.label}): built at its stored sizes by the "
            f"{spec.weights.format} rule"
            + (f"; left unconverted: {', '.join(plan.skip)}" if plan.skip else "")
        )


def _quantize_linears(spec, built: BuiltModel, plan=None) -> None:
    """Replace the linears a quantised format converts by stand-ins (quantized.py); with the
    checkpoint's plan, the modules it leaves unconverted stay in the compute dtype."""
    torch = __import__("torch")
    from vramtui.dryrun.quantized import FORMAT_NOTES, make_quantized_linear
    from vramtui.dryrun.stored import skipped

    weights = spec.weights
    if weights.formats_used <= set(DTYPE_FORMATS):
        return
    quant = QuantParams(weights.double_quant, weights.bits, weights.group_size, weights.gguf_type)
    replace = []
    for name, module in built.model.named_modules():
        if type(module) is not torch.nn.Linear or "lora_" in name:
            continue
        if plan is not None and skipped(name, plan):
            continue
        group = group_of(name)
        explicit = weights.group_overrides.get(group)
        fmt = explicit or weights.format
        if fmt in DTYPE_FORMATS:
            continue
        if group in ("lm_head", "router") and not explicit:
            continue
        replace.append((name, module, fmt))
    fmts = set()
    for name, module, fmt in replace:
        parent_name, _, leaf = name.rpartition(".")
        parent = built.model.get_submodule(parent_name) if parent_name else built.model
        setattr(parent, leaf, make_quantized_linear(module, fmt, quant, built.dtype))
        fmts.add(fmt)
    built.quantized_linears = len(replace)
    for fmt in sorted(fmts):
        extra = ""
        if fmt in BNB4_FORMATS:
            extra = " (double quant)" if weights.double_quant else " (no double quant)"
        built.notes.append(
            f"{fmt}{extra}: no quantisation kernel runs on the meta device; {len(replace)} "
            "linear layers replaced by stand-ins holding packed data and metadata of the "
            f"format's size (the ledger's format rule), {FORMAT_NOTES[fmt]}"
        )


def _add_lora(spec, built: BuiltModel) -> None:
    try:
        import peft
    except ImportError:
        raise DryRunError(f"the dry run of a LoRA/QLoRA spec needs peft; {INSTALL_HINT}") from None
    lora = spec.task.lora
    targets = [t.rsplit(".", 1)[-1] for t in lora.targets]
    target_modules = "all-linear" if "all-linear" in targets else targets
    config = peft.LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha or lora.rank,
        lora_dropout=lora.dropout,
        target_modules=target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # peft calls deprecated names
            built.model = peft.get_peft_model(built.model, config)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise DryRunError(
            f"peft {peft.__version__} cannot add LoRA adapters to this model ({_short(exc)}); "
            "the analytic ledger still stands"
        ) from None
    built.adapter_params = {
        id(p) for n, p in built.model.named_parameters() if "lora_" in n and p.requires_grad
    }
    built.notes.append(
        f"LoRA r={lora.rank} via peft {peft.__version__} on {target_modules}; adapters in "
        f"{_adapter_dtype(built)} (peft's autocast_adapter_dtype)"
        + (f", dropout {lora.dropout:g} on the adapter input" if lora.dropout else "")
    )


def _adapter_dtype(built: BuiltModel) -> str:
    for n, p in built.model.named_parameters():
        if "lora_" in n:
            return str(p.dtype).removeprefix("torch.")
    return "?"
