"""Training model states: trainable parameters, LoRA adapters, gradients, master weights,
optimiser states and the first optimiser step."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from vramtui.ledger.context import LedgerContext
from vramtui.ledger.formats import FLOAT_BYTES
from vramtui.ledger.items import ESTIMATED, UNKNOWN, LedgerItem
from vramtui.ledger.placement import distribution
from vramtui.ledger.training_activations import backward_walk
from vramtui.ledger.training_mechanisms import (
    adapter_bytes,
    adapter_dtype_said,
    largest_gradient,
    no_sync_unsharded,
    paged_states_item,
    untied_head_shape,
)

# Stages at which model states exist once training runs (states appear at the first step and
# stay; forward/backward stand for every later step).
STEADY = ("forward", "backward", "optimizer_step", "validation", "export")

# bitsandbytes 8-bit optimisers quantise states in blocks of 256 values with one fp32 absmax.
BNB8_BLOCK = 256


@dataclass(frozen=True)
class Trainable:
    params: int
    matrices: tuple[tuple[int, int, int], ...]  # (rows, cols, count) of each trainable matrix
    vectors: int  # trainable 1-D params (norms, biases)
    description: str


def lora_modules(ctx: LedgerContext):
    """The nn.Linear (and GPT-2 Conv1D) modules a LoRA config adapts (PEFT's matching on leaf
    names)."""
    lora = ctx.spec.task.lora
    # A dotted target ("self_attn.q_proj") matches on its leaf name, as the spec documents.
    targets = {t.rsplit(".", 1)[-1] for t in lora.targets}
    out = []
    for m in ctx.arch.modules():
        if m.kind != "linear" or not m.lora_adaptable:
            continue
        if "all-linear" in targets:
            if m.group != "lm_head":
                out.append(m)
        elif m.name in targets:
            out.append(m)
    return out


def trainable(ctx: LedgerContext) -> Trainable | None:
    spec = ctx.spec
    if spec.task.kind == "full_finetune":
        if ctx.arch is None:
            n = int(spec.model.params)
            return Trainable(n, (), n, f"all {n:,} parameters (bare count)")
        mats = tuple(
            (m.out_features, m.in_features, m.count)
            for m in ctx.arch.modules()
            if m.kind in ("linear", "embedding") and m.in_features and m.out_features
        )
        n = ctx.arch.param_count
        in_mats = sum(r * c * k for r, c, k in mats)
        head = untied_head_shape(ctx)
        if head is not None:  # the framework's own untied LM head trains too
            mats += ((head[0], head[1], 1),)
            n += head[0] * head[1]
            return Trainable(
                n,
                mats,
                n - in_mats - head[0] * head[1],
                f"all {n:,} parameters, the untied LM head copy's {head[0] * head[1]:,} included",
            )
        return Trainable(n, mats, n - in_mats, f"all {n:,} parameters")
    if ctx.arch is None:
        return None
    lora = spec.task.lora
    mods = lora_modules(ctx)
    mats = []
    n = 0
    for m in mods:
        a = (lora.rank, m.in_features, m.count)
        b = (m.out_features, lora.rank, m.count)
        mats += [a, b]
        n += lora.rank * (m.in_features + m.out_features) * m.count
    names = sorted({m.name for m in mods})
    desc = (
        f"LoRA r={lora.rank} on {', '.join(names)}: sum of r x (d_in + d_out) over "
        f"{sum(m.count for m in mods)} modules = {n:,} parameters"
    )
    return Trainable(n, tuple(mats), 0, desc)


def _unknown(key, name, category, stages, why):
    return LedgerItem(
        key=key, name=name, category=category, status=UNKNOWN, basis=why, stages=stages
    )


def training_state_items(ctx: LedgerContext) -> list[LedgerItem]:
    spec = ctx.spec
    tr = spec.training
    t = trainable(ctx)
    if t is None:
        why = (
            "a bare parameter count cannot say which modules LoRA adapts: give the model id or "
            "path to count the adapter parameters"
        )
        return [
            _unknown("adapter", "LoRA adapter weights", "adapter", STEADY, why),
            _unknown("gradients", "Gradients", "gradients", ("backward", "optimizer_step"), why),
            _unknown("optimizer", "Optimiser states", "optimizer", STEADY[2:] + STEADY[:2], why),
        ]
    is_lora = spec.task.kind in ("lora", "qlora")
    n = t.params
    tp_share = Fraction(1, ctx.tp)
    items = []
    fw = ctx.framework
    if is_lora:
        # PEFT keeps adapter weights in fp32 (autocast_adapter_dtype) even on a 16-bit base;
        # LitGPT and torchtune keep them in the model's dtype (the framework profile says).
        a = adapter_bytes(ctx)
        adapter = n * a
        said = adapter_dtype_said(ctx)
        why = "PEFT keeps adapters in fp32" if a == 4 else f"{fw.framework}: adapters in {said}"
        sharded = ctx.zero_shards("params")
        items.append(
            LedgerItem(
                key="adapter",
                name=f"LoRA adapter weights ({'fp32' if a == 4 else '16-bit'})",
                category="adapter",
                status=ESTIMATED,
                basis=f"{t.description}; x {a} B ({why}; {fw.origin('adapter_dtype')}) = "
                f"{adapter:,} B"
                + (f"; sharded by {ctx.sharding.upper()} like every parameter" if sharded else ""),
                stages=("load",) + STEADY,
                stage_bytes={s: adapter for s in ("load",) + STEADY},
                distribution=distribution(ctx.layout, tp_share=tp_share, dp_sharded=sharded),
            )
        )
        grad_b, grad_why = a, f"{'fp32' if a == 4 else '16-bit'} like the adapters"
    else:
        grad_b = FLOAT_BYTES[tr.grad_dtype]
        grad_why = tr.grad_dtype
    grads = n * grad_b
    grad_stages = ("backward", "optimizer_step")
    if spec.batch.grad_accum > 1:
        grad_stages = ("forward",) + grad_stages
    grad_bytes = {s: grads for s in grad_stages}
    grad_basis = f"{n:,} trainable x {grad_b} B = {grads:,} B"
    if spec.batch.grad_accum > 1:
        grad_basis += (
            f"; kept across micro-batches for gradient accumulation ({spec.batch.grad_accum} steps)"
        )
    grad_basis += "; freed by zero_grad(set_to_none=True) after the step"
    # The backward stage holds what is live at its peak, one of the points the backward walk
    # passes through (training_activations.backward_walk); without accumulation or gradient buffers the
    # gradients appear during the walk, so the peak may hold none or only some of them.
    walk = backward_walk(ctx)
    in_backward = fw.optimizer_placement == "in-backward"
    if in_backward:
        one, one_why = largest_gradient(ctx, t, grad_b)
        grad_stages = ("backward",)
        grad_bytes = {"backward": one}
        grad_basis = f"{one_why} = {one:,} B ({fw.origin('optimizer_placement')})"
    elif walk is not None:
        grad_bytes["backward"] = walk.peak.gradients
        grad_basis += (
            f"; backward: {walk.peak.gradients:,} B, the gradients present at the backward's "
            f"peak - {walk.rule}: {walk.points_text}; the peak is {walk.peak.label}"
        )
    unsharded = no_sync_unsharded(ctx) and not in_backward
    if unsharded:
        grad_basis += (
            f"; FSDP no_sync on the {spec.batch.grad_accum - 1} accumulation steps "
            f"({fw.origin('no_sync')}): every rank holds the unsharded gradients until the "
            "last micro-batch's reduce-scatter"
        )
    items.append(
        LedgerItem(
            key="gradients",
            name=f"Gradients of trainable parameters ({grad_why})",
            category="gradients",
            status=ESTIMATED,
            basis=grad_basis,
            stages=grad_stages,
            stage_bytes=grad_bytes,
            distribution=distribution(
                ctx.layout,
                tp_share=tp_share,
                dp_sharded=ctx.zero_shards("gradients") and not unsharded,
            ),
        )
    )
    weight_fmt = spec.weights.format
    offload = fw.optimizer_placement == "cpu-offload"
    if not is_lora and tr.master_weights_fp32 and weight_fmt in ("bf16", "fp16"):
        master = 0 if offload else n * 4
        items.append(
            LedgerItem(
                key="master_weights",
                name="fp32 master weights",
                category="master_weights",
                status=ESTIMATED,
                basis=f"mixed precision keeps an fp32 copy of the {n:,} trainable parameters: "
                + (
                    "in host memory (optimiser CPU offload), none on the GPU"
                    if offload
                    else f"x 4 B = {master:,} B"
                ),
                stages=("load",) + STEADY,
                stage_bytes={s: master for s in ("load",) + STEADY},
                distribution=distribution(
                    ctx.layout, tp_share=tp_share, dp_sharded=ctx.zero_shards("optimizer")
                ),
            )
        )
    states, states_why = optimizer_state_bytes(ctx, t)
    opt_stages = STEADY  # from the first optimizer.step() on, through every later step
    opt_dist = distribution(ctx.layout, tp_share=tp_share, dp_sharded=ctx.zero_shards("optimizer"))
    opt_basis = (
        f"{states_why} = {states:,} B; allocated at the first optimizer.step() and kept for "
        "every later step"
    )
    paged_item = None
    if offload:
        opt_basis += f"; in host memory (optimiser CPU offload, {fw.origin('optimizer_placement')})"
        states = 0
    elif fw.optimizer_placement == "paged":
        states, paged_item = paged_states_item(ctx, states, t, opt_dist)
        if paged_item is not None:
            opt_basis += (
                f"; {states:,} B of them in PyTorch's allocator (parameters under the paging "
                "threshold), the rest in the paged item"
            )
        else:
            opt_basis += "; every parameter is under the paging threshold: none paged"
    elif in_backward:
        opt_basis += "; allocated as the first backward steps each parameter"
    items.append(
        LedgerItem(
            key="optimizer",
            name=f"Optimiser states ({tr.optimizer})",
            category="optimizer",
            status=ESTIMATED,
            basis=opt_basis,
            stages=opt_stages,
            stage_bytes={s: states for s in opt_stages},
            distribution=opt_dist,
        )
    )
    if paged_item is not None:
        items.append(paged_item)
    step_tmp, step_why = optimizer_step_transient(ctx, t)
    if fw.optimizer_placement != "standard":
        step_tmp = 0  # bitsandbytes' fused step, per-parameter steps, or a host-side step
    if step_tmp:
        items.append(
            LedgerItem(
                key="transient.optimizer_step",
                name="Optimiser step temporaries",
                category="transient",
                status=ESTIMATED,
                basis=step_why,
                stages=("optimizer_step",),
                stage_bytes={"optimizer_step": step_tmp},
                distribution=distribution(
                    ctx.layout, tp_share=tp_share, dp_sharded=ctx.zero_shards("optimizer")
                ),
            )
        )
    return items


def optimizer_state_bytes(ctx: LedgerContext, t: Trainable) -> tuple[int, str]:
    tr = ctx.spec.training
    n = t.params
    sb = FLOAT_BYTES[tr.optimizer_state_dtype or "fp32"]
    opt = tr.optimizer
    if opt == "adamw":
        return 2 * n * sb, f"AdamW: 2 states (m, v) x {n:,} x {sb} B"
    if opt == "adamw_8bit":
        blocks = -(-n // BNB8_BLOCK)
        total = 2 * n + 2 * blocks * 4
        return total, (
            f"8-bit AdamW (bitsandbytes): 2 states x {n:,} x 1 B + one fp32 absmax per "
            f"{BNB8_BLOCK} values per state"
        )
    if opt == "sgd":
        return 0, "plain SGD keeps no state"
    if opt == "sgd_momentum":
        return n * sb, f"SGD with momentum: 1 buffer x {n:,} x {sb} B"
    if opt == "adafactor":
        factored = sum((r + c) * k for r, c, k in t.matrices)
        full = t.vectors
        total = (factored + full) * sb
        return total, (
            f"Adafactor: row + column statistics per matrix ({factored:,} values) + full "
            f"second moment for 1-D parameters ({full:,}) x {sb} B, no first moment"
        )
    raise ValueError(f"unknown optimizer {opt!r}")


def optimizer_step_transient(ctx: LedgerContext, t: Trainable) -> tuple[int, str]:
    """PyTorch's foreach AdamW materialises sqrt(v) (and a scaled copy) for a whole group."""
    opt = ctx.spec.training.optimizer
    if opt != "adamw":
        return 0, ""
    sb = FLOAT_BYTES[ctx.spec.training.optimizer_state_dtype or "fp32"]
    tmp = t.params * sb
    return tmp, (
        f"torch.optim.AdamW(foreach=True) computes sqrt(v) for every parameter of a group at "
        f"once: {t.params:,} x {sb} B = {tmp:,} B (fused=True avoids most of it)"
    )


@dataclass(frozen=True)
class GradientParts:
    """A full fine-tune's gradients, split as the backward produces them."""

    grad_bytes: int  # bytes per gradient value
    total: int  # every trainable parameter's gradient
    head: int  # the LM head's weight gradient (tied: its share of the shared weight's)
    embedding: int  # the input embedding's gradient (the shared weight's when tied)
    layer: int  # one decoder layer's gradients (the average layer)
    tied: bool  # the LM head shares the embedding's weight


def gradient_parts(ctx: LedgerContext) -> GradientParts | None:
    """The gradient sizes the backward walk needs (a training task with an architecture).

    LoRA/QLoRA: only the adapters have gradients (fp32, like the adapters), spread over the
    decoder layers; the frozen LM head and embedding have none."""
    arch = ctx.arch
    if arch is None or ctx.spec.task.kind == "inference":
        return None
    if ctx.spec.task.kind in ("lora", "qlora"):
        t = trainable(ctx)
        if t is None:
            return None
        a = adapter_bytes(ctx)
        total = t.params * a
        return GradientParts(
            grad_bytes=a,
            total=total,
            head=0,
            embedding=0,
            layer=total // max(arch.num_layers, 1),
            tied=False,
        )
    g = FLOAT_BYTES[ctx.spec.training.grad_dtype]
    groups = arch.params_by_group()
    vocab_hidden = arch.vocab_size * arch.hidden_size
    tied = groups["lm_head"] == 0
    n = arch.param_count
    layer = (n - groups["embedding"] - groups["lm_head"]) // max(arch.num_layers, 1)
    return GradientParts(
        grad_bytes=g,
        total=n * g,
        head=(vocab_hidden if tied else groups["lm_head"]) * g,
        embedding=groups["embedding"] * g,
        layer=layer * g,
        tied=tied,
    )


def gradients_appear_in_backward(ctx: LedgerContext) -> tuple[bool, str]:
    """Do the gradients come into being during the backward (True), or are they held from
    before it (False)? With the reason, in words."""
    spec = ctx.spec
    if spec.batch.grad_accum > 1:
        return False, (
            f"gradient accumulation ({spec.batch.grad_accum} steps): the gradients of earlier "
            "micro-batches are held through every point"
        )
    dp = ctx.layout.data_parallel
    if dp > 1:
        return False, (
            f"data parallelism (DP={dp}, sharding {ctx.sharding}): DDP buckets and ZeRO/FSDP "
            "gradient partitions stay allocated between steps, so the gradients are counted at "
            "every point"
        )
    return True, (
        "no gradient accumulation and one data-parallel replica: zero_grad(set_to_none=True) "
        "(the Trainer's default) leaves no gradient before the backward, and each appears as "
        "the backward reaches its parameter"
    )
