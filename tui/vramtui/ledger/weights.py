"""Weights per module group and format, quantisation metadata, and the load-time transient."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

from vramtui.ledger.context import LedgerContext
from vramtui.ledger.formats import (
    BNB4_FORMATS,
    DTYPE_FORMATS,
    dense_bytes,
    format_label,
    linear_bytes,
)
from vramtui.ledger.items import ESTIMATED, LedgerItem
from vramtui.ledger.placement import distribution, layer_fractions
from vramtui.models.architecture import ModuleShape
from vramtui.unit_text import Figure, UnitText

GROUP_LABELS = {
    "embedding": "embedding",
    "lm_head": "lm_head (output projection)",
    "attention": "attention",
    "mlp": "MLP",
    "experts": "routed experts",
    "router": "MoE router",
    "norm": "norms",
    "other": "other",
}

_CHECKPOINT_METHODS = {"gptq": "gptq", "awq": "awq", "fp8": "fp8", "bitsandbytes": None}


# transformers 5.0.0 fused each MoE block's experts into 3-D parameters
# (modeling_mixtral.py `MixtralExperts`: `gate_up_proj = nn.Parameter(torch.empty(num_experts,
# 2 * intermediate_dim, hidden_dim))`), which bitsandbytes does not quantise. Up to 4.57.1
# every expert was its own module of nn.Linear layers (`self.experts =
# nn.ModuleList([MixtralBlockSparseTop2MLP(config) ...])` with w1/w2/w3 nn.Linear; the same
# ModuleList in qwen2_moe, qwen3_moe, olmoe, deepseek_v3), so a 4-bit or 8-bit load quantised
# them. gpt_oss already held fused parameters in 4.x (`GptOssExperts.gate_up_proj =
# nn.Parameter(...)` at 4.57.1).
TRANSFORMERS_FUSED_EXPERTS = "5.0.0"
FUSED_EXPERTS_BEFORE_5 = ("gpt_oss",)


def experts_are_linears(ctx: LedgerContext, module: ModuleShape) -> bool:
    """Are the routed experts, fused in the model shapes (transformers 5), nn.Linear layers
    in the transformers version the spec states? Only with a stated version older than
    5.0.0; unstated: the current (fused) layout."""
    from vramtui.training_profiles import version_before

    return (
        module.group == "experts"
        and ctx.arch is not None
        and ctx.arch.model_type not in FUSED_EXPERTS_BEFORE_5
        and version_before(ctx.spec, "transformers", TRANSFORMERS_FUSED_EXPERTS)
    )


def module_format(ctx: LedgerContext, module: ModuleShape) -> tuple[str, str]:
    """The format a module is held in, and why (one phrase)."""
    weights = ctx.spec.weights
    explicit = weights.group_overrides.get(module.group)
    fmt = explicit or weights.format
    compute = ctx.compute_dtype
    if fmt in DTYPE_FORMATS:
        return fmt, "as the spec sets" if explicit else "the spec's weight format"
    if fmt == "gguf":
        if module.kind in ("linear", "embedding"):
            return fmt, "GGUF quantised tensor"
        return "fp32", "GGUF keeps norms and 1-D tensors in F32"
    if module.kind != "linear":
        return compute, f"{fmt} converts linear layers only; stays {compute}"
    if module.group in ("lm_head", "router") and not explicit:
        from vramtui.ledger.training_mechanisms import quantises_head

        if module.group == "lm_head" and quantises_head(ctx):
            return fmt, f"{ctx.framework.framework} quantises every nn.Linear, the head too"
        return compute, f"{module.group} is left in {compute} by {fmt} loaders"
    if fmt in BNB4_FORMATS + ("int8",) and not module.is_nn_linear:
        if experts_are_linears(ctx, module):
            return fmt, (
                f"transformers < {TRANSFORMERS_FUSED_EXPERTS} builds every expert from "
                "nn.Linear layers: quantised"
            )
        return compute, f"not an nn.Linear (fused tensor): bitsandbytes leaves it in {compute}"
    return fmt, "quantised linear layer"


def _module_bytes(ctx: LedgerContext, m: ModuleShape, fmt: str):
    """One instance of `m` in `fmt` (module_format only hands quantised formats to linears)."""
    if m.kind == "linear" and fmt not in DTYPE_FORMATS and m.in_features and m.out_features:
        return linear_bytes(fmt, m.in_features, m.out_features, m.has_bias, ctx.quant)
    return dense_bytes(fmt, m.params, ctx.quant)


def _group_distribution(ctx: LedgerContext, group: str, layer_params: list[int] | None):
    layout = ctx.layout
    dp_sharded = ctx.zero_shards("params")
    if group == "embedding":
        share = Fraction(1, ctx.tp)
        return distribution(layout, where="first", tp_share=share, dp_sharded=dp_sharded)
    if group == "lm_head":
        share = Fraction(1, ctx.tp)
        return distribution(layout, where="last", tp_share=share, dp_sharded=dp_sharded)
    tp_share = Fraction(1) if group in ("norm", "router", "other") else Fraction(1, ctx.tp)
    fractions = layer_fractions(layer_params, ctx.pp) if layer_params else None
    return distribution(layout, stage_fractions=fractions, tp_share=tp_share, dp_sharded=dp_sharded)


def _per_layer_params(ctx: LedgerContext, group: str) -> list[int]:
    """Relative weight of each layer for a group (MoE layers only hold experts)."""
    arch = ctx.arch
    if group in ("experts", "router") and arch.moe_layers:
        return [1 if moe else 0 for moe in arch.moe_layers]
    if group == "mlp" and arch.moe_layers and arch.intermediate_size:
        dense = arch.intermediate_size
        shared = arch.shared_expert_intermediate_size
        return [shared if moe else dense for moe in arch.moe_layers]
    return [1] * arch.num_layers


def _layer_group_distribution(ctx: LedgerContext, group: str):
    per_layer = None
    if group not in ("embedding", "lm_head") and ctx.arch is not None:
        per_layer = _per_layer_params(ctx, group)
    return _group_distribution(ctx, group, per_layer)


def weight_items(ctx: LedgerContext) -> list[LedgerItem]:
    if ctx.arch is None:
        return _bare_weight_items(ctx)
    if getattr(ctx.checkpoint, "is_gguf", False):
        w = ctx.spec.weights
        if w.format == "gguf" and not w.group_overrides:
            from vramtui.ledger.llama_cpp import gguf_weight_items, is_llama_cpp

            return gguf_weight_items(ctx, is_llama_cpp(ctx.spec))
        return _formula_items(ctx)  # loaded in another format: worked out from the shapes
    header_items = _checkpoint_items(ctx)
    if header_items is not None:
        return header_items
    return _formula_items(ctx)


def _formula_items(ctx: LedgerContext) -> list[LedgerItem]:
    stages = ctx.stages
    data = defaultdict(int)
    params = defaultdict(int)
    reasons: dict[tuple[str, str], str] = {}
    metadata_bytes = 0
    metadata_params = 0
    for m in ctx.arch.modules():
        fmt, why = module_format(ctx, m)
        fb = _module_bytes(ctx, m, fmt)
        key = (m.group, fmt)
        data[key] += fb.data_bytes * m.count
        params[key] += m.total_params
        reasons.setdefault(key, why)
        if fb.metadata_bytes:
            metadata_bytes += fb.metadata_bytes * m.count
            metadata_params += m.total_params
    items = []
    for (group, fmt), nbytes in data.items():
        label = format_label(fmt, ctx.quant) if fmt not in DTYPE_FORMATS else fmt
        n = params[(group, fmt)]
        per_param = nbytes / n if n else 0
        items.append(
            LedgerItem(
                key=f"weights.{group}.{fmt}",
                name=f"Weights: {GROUP_LABELS[group]} ({label})",
                category="weights",
                status=ESTIMATED,
                basis=(
                    f"{n:,} parameters x {per_param:.4g} B/param = {nbytes:,} B "
                    f"({reasons[(group, fmt)]})"
                ),
                stages=stages,
                stage_bytes={s: nbytes for s in stages},
                distribution=_layer_group_distribution(ctx, group),
            )
        )
    if metadata_bytes:
        items.append(
            LedgerItem(
                key="weights.quant_metadata",
                name="Quantisation metadata (scales, zeros, absmax)",
                category="quant_metadata",
                status=ESTIMATED,
                basis=(
                    f"{metadata_bytes:,} B for {metadata_params:,} quantised parameters "
                    f"({metadata_bytes / metadata_params:.4g} B/param): {_metadata_rule(ctx)}"
                ),
                stages=stages,
                stage_bytes={s: metadata_bytes for s in stages},
                distribution=_group_distribution(ctx, "attention", None),
            )
        )
    return items


def _metadata_rule(ctx: LedgerContext) -> str:
    fmt = ctx.spec.weights.format
    if fmt in BNB4_FORMATS:
        if ctx.spec.weights.double_quant:
            return "one 8-bit absmax per 64 values + one fp32 per 256 blocks (double quantisation)"
        return "one fp32 absmax per 64 values"
    if fmt == "int8":
        return "one fp32 scale per output row (LLM.int8)"
    if fmt == "fp8":
        return "one fp32 scale per output row (per-channel FP8)"
    if fmt in ("gptq", "awq"):
        extra = " + int32 g_idx per input column" if fmt == "gptq" else ""
        return f"fp16 scales and packed zeros per {ctx.spec.weights.group_size}-column group{extra}"
    return "per-format scales"


def _bare_weight_items(ctx: LedgerContext) -> list[LedgerItem]:
    """A bare parameter count: one format for everything, the seed's dense formula."""
    from vramtui.ledger.formats import bits_per_param

    n = int(ctx.spec.model.params)
    fmt = ctx.spec.weights.format
    bits = bits_per_param(fmt, ctx.quant)
    nbytes = round(n * bits / 8)
    stages = ctx.stages
    note = ""
    if fmt not in DTYPE_FORMATS:
        note = (
            "; quantisation metadata and modules kept in 16-bit are not in this figure "
            "(give the model id or path to itemise them)"
        )
    return [
        LedgerItem(
            key=f"weights.all.{fmt}",
            name=f"Weights: all parameters ({format_label(fmt, ctx.quant)})",
            category="weights",
            status=ESTIMATED,
            basis=UnitText(
                f"{n:,} parameters x {bits:g} bits / 8 = {nbytes:,} B (",
                Figure(nbytes, gib_in_bytes_mode=True),
                f"){note}",
            ),
            stages=stages,
            stage_bytes={s: nbytes for s in stages},
            distribution=distribution(
                ctx.layout, tp_share=Fraction(1, ctx.tp), dp_sharded=ctx.zero_shards("params")
            ),
        )
    ]


def checkpoint_storage_format(checkpoint) -> str | None:
    """The spec format a checkpoint is stored in, if it maps to one."""
    qc = checkpoint.quantization_config
    if qc:
        method = str(qc.get("quant_method", "")).lower()
        if method == "bitsandbytes":
            if qc.get("load_in_4bit"):
                return str(qc.get("bnb_4bit_quant_type", "nf4")).lower()
            return "int8" if qc.get("load_in_8bit") else None
        return _CHECKPOINT_METHODS.get(method)
    by_dtype = checkpoint.bytes_by_dtype()
    if not by_dtype:
        return None
    main = max(by_dtype, key=by_dtype.get)
    return {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}.get(main)


def _checkpoint_items(ctx: LedgerContext) -> list[LedgerItem] | None:
    """Exact bytes from safetensors headers, when the spec loads the checkpoint as stored."""
    ckpt = ctx.checkpoint
    if ckpt is None:
        return None
    stored = checkpoint_storage_format(ckpt)
    w = ctx.spec.weights
    if (
        stored is None
        or stored != w.format
        or any(v != w.format for v in w.group_overrides.values())
    ):
        return None
    stages = ctx.stages
    where = f"safetensors headers in {ckpt.directory} ({len(ckpt.files)} file(s))"
    items = []
    for group, nbytes in ckpt.bytes_by_group(include_quant_metadata=False).items():
        if nbytes:
            items.append(
                LedgerItem(
                    key=f"weights.{group}.{stored}",
                    name=f"Weights: {GROUP_LABELS.get(group, group)} ({stored}, as stored)",
                    category="weights",
                    status=ESTIMATED,
                    basis=f"exact tensor bytes from the {where}: {nbytes:,} B",
                    stages=stages,
                    stage_bytes={s: nbytes for s in stages},
                    distribution=_layer_group_distribution(ctx, group),
                )
            )
    metadata = ckpt.quant_metadata_bytes()
    if metadata:
        items.append(
            LedgerItem(
                key="weights.quant_metadata",
                name="Quantisation metadata (scales, zeros, absmax)",
                category="quant_metadata",
                status=ESTIMATED,
                basis=f"exact bytes of the scale/zero/absmax/g_idx tensors in the {where}: "
                f"{metadata:,} B",
                stages=stages,
                stage_bytes={s: metadata for s in stages},
                distribution=_group_distribution(ctx, "attention", None),
            )
        )
    return items
