"""Memory outside the model's tensors: CUDA context, library workspaces, NCCL, allocator
fragmentation, load-time transients, ZeRO-3 gathers, export, and a manual reserve."""

from __future__ import annotations

from fractions import Fraction

from vramtui.ledger.activations import prefill_step_tokens
from vramtui.ledger.context import LedgerContext
from vramtui.ledger.formats import FLOAT_BYTES
from vramtui.ledger.items import ESTIMATED, UNKNOWN, LedgerItem
from vramtui.ledger.placement import distribution
from vramtui.unit_text import Figure, SmallUnit, UnitText
from vramtui.units import GIB_BYTES, MIB_BYTES, gib_to_bytes

# An assumption, labelled as one: a CUDA 12 context with lazy module loading plus cuBLAS and
# cuDNN workspaces on a current data-centre GPU is typically 0.4-1 GiB per process per GPU.
# The live feed or a probe replaces it with a measurement (spec: headroom.cuda_context_bytes).
ASSUMED_CUDA_CONTEXT_BYTES = 512 * MIB_BYTES


def _load_transient(ctx: LedgerContext) -> tuple[int, str]:
    """What loading holds on the GPU beyond the final weights, with the reason."""
    arch = ctx.arch
    src_b = FLOAT_BYTES.get(arch.default_dtype, 2)
    fmt = ctx.spec.weights.format
    prequantised = fmt in ("gptq", "awq", "gguf") or (
        fmt == "fp8" and bool(arch.quantization_config)
    )
    if prequantised:
        return 0, (
            f"{fmt} checkpoints are quantised ahead of time and loaded as stored: no "
            "conversion copy expected"
        )
    if fmt not in ("fp32", "bf16", "fp16"):
        linears = [m for m in arch.modules() if m.kind == "linear" and m.group != "lm_head"]
        big = max(linears, key=lambda m: m.params)
        n = big.params * src_b
        return n, (
            f"quantising at load moves each {arch.default_dtype} linear layer to the GPU before "
            f"converting it to {fmt}: the largest, {big.name} ({big.params:,} values x {src_b} B)"
            f" = {n:,} B, held once more"
        )
    if fmt != arch.default_dtype:
        big = max(arch.modules(), key=lambda m: m.params)
        n = big.params * src_b
        return n, (
            f"the checkpoint is {arch.default_dtype} and the spec loads {fmt}: a cast can hold "
            f"the largest tensor, {big.name} ({big.params:,} values x {src_b} B) = {n:,} B, twice"
        )
    return 0, (
        f"the checkpoint dtype ({arch.default_dtype}) is the spec's: tensors are copied straight "
        "into place, no conversion copy expected"
    )


def overhead_items(ctx: LedgerContext) -> list[LedgerItem]:
    spec = ctx.spec
    stages = ctx.stages
    items: list[LedgerItem] = []
    given = spec.headroom.cuda_context_bytes
    if given is not None:
        ctx_bytes, ctx_why = (
            given,
            f"{given:,} B as given in the spec (headroom.cuda_context_bytes)",
        )
    else:
        ctx_bytes = ASSUMED_CUDA_CONTEXT_BYTES
        ctx_why = UnitText(
            "assumption: ",
            Figure(ctx_bytes, decimals=0, small=True),
            " per process per GPU for the CUDA context and cuBLAS/cuDNN workspaces (typically ",
            Figure(gib_to_bytes(0.4), high=GIB_BYTES, trim=True, gib_in_bytes_mode=True),
            "); measure it with the live feed and set headroom.cuda_context_bytes",
        )
    items.append(
        LedgerItem(
            key="overhead.cuda_context",
            name="CUDA context and library workspaces",
            category="overhead",
            status=ESTIMATED,
            basis=ctx_why,
            stages=stages,
            stage_bytes={s: ctx_bytes for s in stages},
            distribution=distribution(ctx.layout),  # one per process per GPU
        )
    )
    communicates = ctx.layout.gpus > 1 and (
        ctx.tp > 1 or ctx.pp > 1 or ctx.is_training or ctx.sharding != "none"
    )
    if communicates:
        items.append(
            LedgerItem(
                key="overhead.nccl",
                name="NCCL communication buffers",
                category="overhead",
                status=UNKNOWN,
                basis=UnitText(
                    "depends on NCCL_BUFFSIZE, channels and peers (commonly 100s of ",
                    SmallUnit(),
                    " per GPU); measure it on the node with the live feed",
                ),
                stages=stages,
            )
        )
    if ctx.arch is not None:
        load_bytes, load_why = _load_transient(ctx)
        items.append(
            LedgerItem(
                key="transient.load",
                name="Load-time transient (conversion copy)",
                category="transient",
                status=ESTIMATED,
                basis=load_why,
                stages=("load",),
                stage_bytes={"load": load_bytes},
                distribution=distribution(ctx.layout, tp_share=Fraction(1, ctx.tp)),
            )
        )
        frag = _fragmentation(ctx, items)
        if frag is not None:
            items.append(frag)
    else:
        items.append(
            LedgerItem(
                key="transient.load",
                name="Load-time transient",
                category="transient",
                status=UNKNOWN,
                basis="the largest module is unknown for a bare parameter count",
                stages=("load",),
            )
        )
    if ctx.is_training and ctx.arch is not None:
        items += _training_overheads(ctx)
    return items


def _fragmentation(ctx: LedgerContext, items) -> LedgerItem | None:
    """Heuristic: the caching allocator can hold one freed block of the largest transient."""
    width = ctx.arch.intermediate_size or ctx.arch.moe_intermediate_size  # an MLP intermediate
    if ctx.is_training:
        from vramtui.ledger.training_mechanisms import logit_block_bytes, no_logits_block

        mb, s = ctx.spec.batch.micro_batch, ctx.spec.lengths.seq_len
        if no_logits_block(ctx):
            # A fused linear cross-entropy (Cut Cross-Entropy) never allocates a logits-sized
            # block for the allocator to keep: the largest transient left is an MLP
            # intermediate, the block the inference heuristic below keeps.
            biggest = mb * s * width * ctx.act_bytes
            what = (
                f"one MLP-intermediate block ({mb} x {s:,} tokens x {width} x "
                f"{ctx.act_bytes} B; the fused loss allocates no logits)"
            )
        else:
            per, per_say = logit_block_bytes(ctx)
            biggest = mb * s * ctx.arch.vocab_size * per
            what = (
                f"one block of the {per_say} ({mb} x {s:,} x {ctx.arch.vocab_size:,} x {per} B)"
                if per != 4
                else f"one fp32 logits-sized block ({mb} x {s:,} x {ctx.arch.vocab_size:,} x 4 B)"
            )
        stages = ("forward", "backward", "optimizer_step", "validation")
    else:
        tokens, _, _ = prefill_step_tokens(ctx)
        biggest = tokens * width * ctx.act_bytes
        what = f"one MLP-intermediate block ({tokens:,} tokens x {width} x {ctx.act_bytes} B)"
        stages = ("prefill", "decode")
    return LedgerItem(
        key="overhead.fragmentation",
        name="Allocator fragmentation (reserved, unallocated)",
        category="overhead",
        status=ESTIMATED,
        basis=f"heuristic: the PyTorch caching allocator may keep {what} = {biggest:,} B cached "
        "but unusable; measure memory_reserved() - memory_allocated(); "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces it",
        stages=stages,
        stage_bytes={s: biggest for s in stages},
        distribution=distribution(ctx.layout, where="last", tp_share=Fraction(1, ctx.tp)),
    )


def _training_overheads(ctx: LedgerContext) -> list[LedgerItem]:
    spec = ctx.spec
    arch = ctx.arch
    out = []
    b = FLOAT_BYTES.get(ctx.compute_dtype, 2)
    if ctx.zero_shards("params"):
        from vramtui.ledger.training_mechanisms import frozen_layer_gather

        layer_params = (ctx.arch.param_count - _embed_and_head(arch)) // arch.num_layers
        gather = 2 * layer_params * b * 2
        gather_why = (
            f"the current and the prefetched layer gathered in full: 2 x {layer_params:,} "
            f"params x {b} B, and their gradients before reduce-scatter (x 2) = {gather:,} B"
        )
        frozen = frozen_layer_gather(ctx)
        if frozen is not None:  # a frozen base: the unit is the stored layer, no gradient
            gather, gather_why = frozen
        out.append(
            LedgerItem(
                key="transient.zero3_gather",
                name=f"{spec.placement.data_parallel_sharding.upper()} all-gathered layers",
                category="transient",
                status=ESTIMATED,
                basis=gather_why,
                stages=("forward", "backward", "validation", "export"),
                stage_bytes={s: gather for s in ("forward", "backward", "validation", "export")},
                distribution=distribution(ctx.layout),
            )
        )
    if spec.task.kind == "qlora":
        n_linear = sum(
            m.total_params for m in arch.modules() if m.kind == "linear" and m.group != "lm_head"
        )
        merge = n_linear * b
        out.append(
            LedgerItem(
                key="transient.export",
                name="Export: saving the LoRA adapter",
                category="transient",
                status=ESTIMATED,
                basis=(
                    "saving the adapter copies only its own tensors to the host: no GPU transient "
                    f"expected. Merging into the base on this GPU (merge_and_unload) would "
                    f"dequantise the linears: {n_linear:,} x {b} B = {merge:,} B more; merge in "
                    "a separate process if this card has no room for it"
                ),
                stages=("export",),
                stage_bytes={"export": 0},
                distribution=distribution(ctx.layout, tp_share=Fraction(1, ctx.tp)),
            )
        )
    return out


def _embed_and_head(arch) -> int:
    groups = arch.params_by_group()
    return groups["embedding"] + groups["lm_head"]


def reserve_item(ctx: LedgerContext) -> LedgerItem:
    h = ctx.spec.headroom
    reserve = gib_to_bytes(h.reserve_gib)
    return LedgerItem(
        key="reserve.manual",
        name=UnitText("Manual reserve (", Figure(reserve, trim=True), ")"),
        category="reserve",
        status=ESTIMATED,
        basis=f"assumption stated in the spec, not derived: {h.reason}",
        stages=ctx.stages,
        stage_bytes={s: reserve for s in ctx.stages},
        distribution=distribution(ctx.layout),
    )
