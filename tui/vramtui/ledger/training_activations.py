"""Training activations: what autograd saves per layer, the logits and loss, and the walk of
the forward and backward peaks (Korthikanti et al.).

Per-layer counts follow what the Hugging Face implementations keep for backward (RMSNorm
upcasts to fp32, only the rotated q and k are kept - cos and sin need no gradient, so autograd
saves neither q before rotation nor rotate_half(q) - SwiGLU keeps gate,
up, act(gate) and their product). They are estimates, checked by the dry run where available.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from vramtui.ledger.activations import (
    BARE,
    _mlp_width,
    _unknown,
    layer_working_set_bytes,
)
from vramtui.ledger.context import LedgerContext
from vramtui.ledger.items import ESTIMATED, LedgerItem
from vramtui.ledger.placement import distribution, layer_fractions
from vramtui.unit_text import Figure, UnitText

# PEFT keeps LoRA adapters in fp32 (get_peft_model's autocast_adapter_dtype=True) on a 16-bit
# base, and casts each adapted layer's input to the adapter dtype.
ADAPTER_BYTES = 4

# Which tensor an adapted module reads: modules reading the same tensor could share a saved
# input (only when PEFT neither casts nor drops out - then lora_A saves the input itself).
_LORA_INPUTS = {
    "q_proj": "attention input",
    "k_proj": "attention input",
    "v_proj": "attention input",
    "qkv_proj": "attention input",
    "query_key_value": "attention input",
    "Wqkv": "attention input",
    "c_attn": "attention input",
    "gate_proj": "MLP input",
    "up_proj": "MLP input",
    "gate_up_proj": "MLP input",
    "w1": "MLP input",
    "w3": "MLP input",
    "fc1": "MLP input",
    "c_fc": "MLP input",
}


def is_lora(ctx: LedgerContext) -> bool:
    return ctx.spec.task.kind in ("lora", "qlora")


def lora_layer_bytes(
    ctx: LedgerContext, tokens: int, skip: frozenset = frozenset()
) -> tuple[int, str]:
    """What PEFT's LoRA forward saves for backward in one decoder layer, over `tokens` tokens.

    PEFT's lora.Linear.forward computes `result = base(x)`, casts x to the adapter dtype
    (`_cast_input_dtype`), then `result + lora_B(lora_A(dropout(x))) * scaling`. The frozen
    base layer saves nothing for its input (its weight needs no gradient; bitsandbytes'
    MatMul4Bit saves none either). Per adapted module, per input element (in_features):
    dropout > 0 on CUDA (the fused native_dropout): a bool mask, 1 B, and the dropout output
    in the adapter dtype, saved by lora_A (the cast copy is freed once dropout has run);
    dropout 0 (nn.Identity): the input cast to the adapter dtype, saved by lora_A. Each
    adapted module casts and drops out its own copy, so q, k and v reading the same input
    save three. Then lora_A's output, rank values in the adapter dtype, saved by lora_B; the
    scaling multiply (by a Python float) and the add save nothing. Without autocast: under
    torch.autocast the adapter matmuls run in the compute dtype and save 16-bit copies.
    Modules named in `skip` (run by a framework's own LoRA kernels) are left out.
    """
    from vramtui.ledger.training import lora_modules
    from vramtui.ledger.training_mechanisms import adapter_bytes, shares_qkv_input

    arch = ctx.arch
    lora = ctx.spec.task.lora
    b = ctx.act_bytes
    a = adapter_bytes(ctx)
    layers = max(arch.num_layers, 1)
    cast = a != b
    dropout = lora.dropout > 0
    total = 0
    shared: set[str] = set()
    names = []
    for m in lora_modules(ctx):
        if m.name in skip:
            continue
        per_layer = Fraction(m.count, layers)
        mod_tokens = Fraction(tokens)
        if m.group == "experts" and arch.num_experts:
            mod_tokens *= Fraction(arch.num_experts_per_tok, arch.num_experts)
        if shares_qkv_input(ctx, m.name) and (dropout or cast):
            # one dropout (or cast) for the fused q, k, v input (LitGPT's LoRAQKVLinear)
            per_in = 0 if "fused qkv" in shared else (a + 1 if dropout else a)
            shared.add("fused qkv")
        elif dropout:
            per_in = a + 1
        elif cast:
            per_in = a
        else:  # lora_A saves the input itself, one tensor for every module that reads it
            group = _LORA_INPUTS.get(m.name, m.name)
            per_in = 0 if group in shared else b
            shared.add(group)
        total += per_layer * mod_tokens * (per_in * m.in_features + a * lora.rank)
        names.append(m.name)
    own = (
        "one for the fused q, k, v input, each other module its own"
        if "fused qkv" in shared
        else "each module its own"
    )
    adtype = "fp32" if a == 4 else "16-bit"
    if not names:
        return 0, "no module on PEFT's path"
    if dropout:
        inp = (
            f"dropout {lora.dropout:g}: bool mask 1 B + dropout output {a} B ({adtype} adapter "
            f"dtype; CUDA's fused dropout) per input value, {own}"
        )
    elif cast:
        inp = (
            f"the input cast to the adapters' fp32, {a} B per input value, each module its own "
            "(no dropout)"
        )
    else:
        inp = f"the input itself, {b} B per value, once per distinct input (no cast, no dropout)"
    why = (
        f"LoRA r={lora.rank} on {', '.join(sorted(set(names)))} (frozen base saves no input): "
        f"{inp} x in_features + lora_A's output r x {a} B"
    )
    if a == 4:
        why += (
            "; assumes no torch.autocast (PEFT casts inputs to the fp32 adapters; under "
            "autocast the adapters save 16-bit copies)"
        )
    return int(total), why


def norm_saved_per_token(ctx: LedgerContext) -> int:
    """Bytes one RMSNorm saves per token: the fp32 input and the rsqrt; with a trainable weight
    and a trainable consumer (a full fine-tune) also the normalised and the scaled output."""
    b = ctx.act_bytes
    h = ctx.arch.hidden_size
    if is_lora(ctx) and ctx.framework.fused_lora_kernels:
        # Unsloth's Fast_RMS_Layernorm (kernels/rms_layernorm.py at 2024.5) saves its 16-bit
        # input X and the fp32 rsqrt r of each row
        return b * h + 4
    if is_lora(ctx):
        # frozen weight: `weight * x` saves no x; the frozen linears after it save no input
        return 4 * h + 4
    return 4 * h + 4 + b * h + b * h


def training_layer_bytes(ctx: LedgerContext, seqs: int, s: int) -> tuple[int, str]:
    """Bytes one layer saves for backward over `seqs` sequences of `s` tokens (no checkpointing)."""
    arch = ctx.arch
    b = ctx.act_bytes
    h = arch.hidden_size
    tokens = seqs * s
    q = arch.num_attention_heads * arch.head_dim
    kvd = arch.num_kv_heads * arch.head_dim
    width, width_why = _mlp_width(arch)
    lora = is_lora(ctx)
    # Gemma 2/3 norm the attention and MLP outputs too (post_attention_layernorm /
    # post_feedforward_layernorm in transformers, post_attention_norm / post_mlp_norm in
    # LitGPT): four norms a layer, each saving its fp32 input.
    from vramtui.models.structure import _FOUR_NORM_FAMILIES

    n_norms = 4 if arch.model_type in _FOUR_NORM_FAMILIES else 2
    norms = n_norms * tokens * norm_saved_per_token(ctx)
    # rotated q and k, and v: q * cos and rotate_half(q) * sin save only cos and sin (no grad).
    # Eager attention's matmuls save K and V repeated to every query head (repeat_kv copies)
    # instead of the grouped ones.
    from vramtui.ledger.training_mechanisms import (
        expands_kv,
        old_bnb_layer_bytes,
        old_bnb_saves_inputs,
        unsloth_kernel_groups,
    )

    kernels = unsloth_kernel_groups(ctx) if lora else {}

    expanded = expands_kv(ctx) and kvd != q
    kv_saved = q if ctx.spec.runtime.attention == "eager" or expanded else kvd
    qkv = tokens * b * (q + 2 * kv_saved)
    attn_out = tokens * b * q
    if "mlp" in kernels:
        # Unsloth's LoRA_MLP saves e (gate) and g (up); h = act(e) * g is recomputed
        mlp_saved, mlp_say = 2, "gate e, up g (Unsloth's LoRA_MLP recomputes act(e) * g)"
    elif lora:
        # frozen down projection: the activation's product with up is not saved
        mlp_saved, mlp_say = (3, "gate, up, act") if arch.gated_mlp else (1, "up")
    else:
        mlp_saved = 4 if arch.gated_mlp else 2
        mlp_say = "gate, up, act, product" if arch.gated_mlp else "up, act"
    from vramtui.ledger.training_mechanisms import fp32_norms_why, fp32_residual_stream

    mlp_b = 4 if fp32_residual_stream(ctx) else b  # fp32 norms before 4-bit linears
    mlp = tokens * mlp_b * width * mlp_saved
    if mlp_b != b:
        mlp_say += f" at 4 B (fp32 norms: the 4-bit gate and up return fp32, {fp32_norms_why(ctx)})"
    total = norms + qkv + attn_out + mlp
    parts = [
        (
            f"norms {n_norms} x ({b} B input + fp32 rsqrt, Unsloth's Fast_RMS_Layernorm) x "
            f"hidden {h}"
            if lora and ctx.framework.fused_lora_kernels
            else f"norms {n_norms} x (fp32 input 4 B + rsqrt) x hidden {h} (frozen norm weights)"
            if lora
            else f"norms {n_norms} x (fp32 input 4 B + rsqrt + normalised {b} B + scaled {b} B) x "
            f"hidden {h}"
        ),
        f"rotated q and k, and v ({q + 2 * kv_saved} values/token"
        + (
            ", K and V repeated to every head by eager's repeat_kv)"
            if kv_saved != kvd and not expanded
            else f", K and V expanded to every query head by {ctx.framework.framework})"
            if kv_saved != kvd
            else ")"
        ),
        f"attention output {q}",
        f"MLP {mlp_say} over {width_why}",
    ]
    kernel = ctx.spec.runtime.attention
    from vramtui.ledger.training_mechanisms import softcap_eager

    if softcap_eager(ctx):
        # the framework's own soft-capped attention: tanh output (b), fp32 softmax (4), its
        # 16-bit cast (b) per score
        scores = seqs * arch.num_attention_heads * s * s * (4 + 2 * b)
        total += scores
        parts.append(
            f"soft-capped eager scores ({ctx.framework.framework} cannot use SDPA with "
            f"attention logit soft-capping) {seqs} x {arch.num_attention_heads} x {s:,}^2 x "
            f"(tanh {b} B + fp32 softmax 4 B + its {b}-byte cast)"
        )
    elif kernel == "eager":
        scores = seqs * arch.num_attention_heads * s * s * (4 + b)
        total += scores
        parts.append(
            f"eager scores {seqs} x {arch.num_attention_heads} x {s:,}^2 x (4 B softmax + {b} B)"
        )
    else:
        lse = seqs * arch.num_attention_heads * s * 4
        total += lse
        parts.append(f"{kernel} log-sum-exp {seqs} x {arch.num_attention_heads} x {s:,} x 4 B")
    if arch.is_moe:
        router = tokens * arch.num_experts * 4
        permute = 2 * tokens * arch.num_experts_per_tok * h * b
        total += router + permute
        parts.append(
            f"router logits {arch.num_experts} x 4 B and top-{arch.num_experts_per_tok} token copies "
            "(perfectly balanced routing assumed)"
        )
    if kernels:
        # LoRA_QKV saves its input X once for q, k and v; LoRA_W (o) saves X, the attention
        # output already counted; LoRA_MLP saves X beside e and g. Nothing of rank r is saved.
        inputs = tokens * b * h * sum(1 for g in ("qkv", "mlp") if g in kernels)
        total += inputs
        parts.append(
            f"Unsloth's LoRA kernels ({', '.join(kernels)}): the {b}-byte input X saved once per "
            f"kernel, {', '.join(g for g in ('qkv', 'mlp') if g in kernels) or 'none'} x {h} "
            f"(o_proj's input is the attention output) = {inputs:,} B"
        )
        skip = frozenset(n for names in kernels.values() for n in names)
        rest, rest_why = lora_layer_bytes(ctx, tokens, skip)
        if rest:
            total += rest
            parts.append(f"modules outside the kernels, {rest_why} = {rest:,} B")
    elif lora:
        adapters, adapters_why = lora_layer_bytes(ctx, tokens)
        total += adapters
        parts.append(f"{adapters_why} = {adapters:,} B")
    if lora and old_bnb_saves_inputs(ctx):
        kept, kept_why = old_bnb_layer_bytes(ctx, tokens)
        total += kept
        parts.append(kept_why)
    return total, f"{tokens:,} tokens: " + "; ".join(parts)


# What a causal-LM loss holds per logit. Forward: the logits in the compute dtype, their fp32
# upcast (`logits.float()`, a no-op for fp32) and the log-softmax. The loss backward: the saved
# log-softmax, the gradient nll_loss hands it and the logits' gradient (3 x 4 B, fp32), the
# peak of the loss (checked against the dry run's trace).
LOSS_BACKWARD_BYTES_PER_LOGIT = 4 + 4 + 4


def forward_logit_bytes(ctx: LedgerContext) -> tuple[Fraction, str]:
    """Bytes per logit at the loss in the forward (the framework's loss implementation:
    vramtui.ledger.training_mechanisms.loss_bytes_per_logit)."""
    from vramtui.ledger.training_mechanisms import loss_bytes_per_logit

    b = ctx.act_bytes
    fwd, _, _, _ = loss_bytes_per_logit(ctx)
    if ctx.framework.loss_impl == "full-upcast":
        from vramtui.ledger.training_mechanisms import shifted_logits_copy

        if shifted_logits_copy(ctx):
            return fwd, "4 B fp32 logits + 4 B shifted copy + 4 B log-softmax (transformers < 4.46)"
        if b == 4:
            return fwd, "4 B fp32 logits (the upcast is a no-op) + 4 B log-softmax"
        return fwd, f"{b} B + 4 B fp32 upcast + 4 B log-softmax"
    return fwd, f"{_per(fwd)} B: {ctx.framework.loss_impl}"


def _per(x: Fraction) -> str:
    return f"{float(x):g}"


def loss_backward_bytes(ctx: LedgerContext) -> tuple[Fraction, Fraction]:
    """Bytes per logit at the loss backward and at the LM head's backward."""
    from vramtui.ledger.training_mechanisms import loss_bytes_per_logit

    _, bwd, head, _ = loss_bytes_per_logit(ctx)
    return bwd, head


@dataclass(frozen=True)
class Point:
    """One moment of a stage: what the activations, logits and gradients items hold then."""

    label: str
    activations: int
    logits: int
    gradients: int = 0

    @property
    def total(self) -> int:
        return self.activations + self.logits + self.gradients

    def text(self) -> str:
        parts = f"activations {self.activations:,} + logits {self.logits:,}"
        if self.gradients:
            parts += f" + gradients {self.gradients:,}"
        return f"{self.label} {self.total:,} B ({parts})"


@dataclass(frozen=True)
class Walk:
    """The points a stage passes through; its peak is the largest (the first of equals)."""

    rule: str
    points: tuple[Point, ...]

    @property
    def peak(self) -> Point:
        best = self.points[0]
        for p in self.points[1:]:
            if p.total > best.total:
                best = p
        return best

    @property
    def points_text(self) -> str:
        return "; ".join(p.text() for p in self.points)


@dataclass(frozen=True)
class TrainingSaved:
    """What one micro-batch's layers save and hold in a training step (whole model)."""

    tokens: int
    per_layer: int  # one layer's saved set without checkpointing (the recomputed set with it)
    per_layer_why: str
    final_norm: int  # the final norm's saved tensors (outside checkpointing)
    kept: int  # full checkpointing: one layer input kept per layer (0 otherwise)
    layers_saved: int  # the decoder layers' saved tensors at the end of the forward
    recompute: int  # full checkpointing: one layer's saved set rebuilt in backward (0 otherwise)
    working: int  # one layer's no-grad working set over the micro-batch
    working_why: str
    logits: int  # logits in the micro-batch (tokens x vocab)
    why: str


def training_saved(ctx: LedgerContext) -> TrainingSaved:
    spec = ctx.spec
    arch = ctx.arch
    mb = spec.batch.micro_batch
    s = spec.lengths.seq_len
    b = ctx.act_bytes
    h = arch.hidden_size
    per_layer, per_layer_why = training_layer_bytes(ctx, mb, s)
    # The final norm before the LM head saves what a layer's norm does (outside checkpointing).
    final_norm = mb * s * norm_saved_per_token(ctx)
    working, working_why = layer_working_set_bytes(ctx, mb * s, mb, s)
    ckpt = spec.training.grad_checkpointing
    from vramtui.ledger.training_mechanisms import (
        OFFLOADED_INPUTS_ON_GPU,
        offloads_checkpoints,
        torchtitan_op_layer_bytes,
        torchtitan_op_saves,
    )

    if torchtitan_op_saves(ctx):
        # Each layer keeps what the policy saves; in the backward one layer's saved set is
        # rebuilt beside it, less the tensors it shares with what was kept.
        kept, reused, kept_why = torchtitan_op_layer_bytes(ctx, mb * s)
        layers_saved = arch.num_layers * kept
        recompute = max(0, per_layer - reused)
        why = (
            f"{kept_why}; {arch.num_layers} layers x {kept:,} B = {layers_saved:,} B; in "
            f"backward one layer's saved set rebuilt ({per_layer:,} B: {per_layer_why}) less "
            f"the kept tensors it reuses ({reused:,} B) = {recompute:,} B; final norm "
            f"{final_norm:,} B"
        )
    elif ckpt == "full":
        kept = mb * s * h * b  # one copy of each layer's input (2sbh B in 16-bit)
        on_gpu = arch.num_layers
        where = ""
        if offloads_checkpoints(ctx):
            on_gpu = min(OFFLOADED_INPUTS_ON_GPU, arch.num_layers)
            where = (
                f" on the GPU: the layer inputs are copied to host memory "
                f"({ctx.framework.origin('offload_checkpoints')}), {on_gpu} at a time on the GPU "
                "(the one in transit or reloaded, and the current or last layer's)"
            )
        layers_saved = on_gpu * kept
        from vramtui.ledger.training_mechanisms import fp32_residual_stream

        if fp32_residual_stream(ctx):
            # every layer input but the first (the 16-bit embedding's output) is fp32
            wider = min(on_gpu, arch.num_layers - 1) * mb * s * h * (4 - b)
            layers_saved += wider
            where += (
                f"; fp32 residual stream (fp32 norms before 4-bit linears): "
                f"{min(on_gpu, arch.num_layers - 1)} of them at 4 B, + {wider:,} B"
            )
        recompute = per_layer
        why = (
            f"full checkpointing{where}: {on_gpu} layer inputs x ({mb} x {s:,} x {h} x {b} B) "
            f"= {layers_saved:,} B; in backward one layer recomputed ({per_layer:,} B: "
            f"{per_layer_why}); in the forward one layer's no-grad working set instead "
            f"({working:,} B); final norm {final_norm:,} B"
        )
    else:
        kept, recompute = 0, 0
        if ckpt == "selective" and spec.runtime.attention == "eager":
            scores = mb * arch.num_attention_heads * s * s * (4 + b)
            per_layer -= scores
            per_layer_why += " (selective recomputation drops the scores)"
        layers_saved = arch.num_layers * per_layer
        why = (
            f"{arch.num_layers} layers x {per_layer:,} B ({per_layer_why}) + final norm "
            f"{final_norm:,} B"
        )
        if is_lora(ctx):
            # The frozen embedding's output needs no gradient, so the first layer's input norm
            # records nothing (autograd starts at the first adapter).
            layers_saved -= final_norm
            why += (
                f"; less the first layer's input norm ({final_norm:,} B): the frozen "
                "embedding's output needs no gradient"
            )
    return TrainingSaved(
        tokens=mb * s,
        per_layer=per_layer,
        per_layer_why=per_layer_why,
        final_norm=final_norm,
        kept=kept,
        layers_saved=layers_saved,
        recompute=recompute,
        working=working,
        working_why=working_why,
        logits=mb * s * arch.vocab_size,
        why=why,
    )


def backward_walk(ctx: LedgerContext) -> Walk | None:
    """The points of a training backward, single pipeline stage; None where the ledger keeps the
    additive sum (pipeline parallelism, a bare parameter count).

    The backward runs the loss, the LM head, the decoder layers from the last to the first,
    then the embedding. Each layer frees its saved tensors as its gradients appear, so between
    layers the live total changes linearly and its largest value is at one of the points below.
    """
    from vramtui.ledger.training import gradient_parts, gradients_appear_in_backward

    if ctx.arch is None or ctx.pp > 1 or getattr(ctx.arch.derived, "encoder", None):
        return None  # encoder families: the gradients are counted whole at the backward
    g = gradient_parts(ctx)
    if g is None:
        return None
    sv = training_saved(ctx)
    b = ctx.act_bytes
    appear, appear_why = gradients_appear_in_backward(ctx)
    start = sv.layers_saved + sv.final_norm  # saved at the end of the forward
    first_layer = (sv.kept + sv.recompute) if sv.kept else sv.per_layer
    if sv.kept and ctx.spec.training.grad_checkpointing == "selective":
        top_say, first_say = (
            "what every layer kept + the recomputed layer",
            "what it kept + the recomputed layer",
        )
    elif sv.kept:
        top_say, first_say = (
            "every layer input + the recomputed layer",
            "its input + the recomputed layer",
        )
    else:
        top_say, first_say = "every layer's saved tensors", "its saved tensors"
    lora = is_lora(ctx)
    if ctx.framework.optimizer_placement == "in-backward":
        from vramtui.ledger.training import trainable
        from vramtui.ledger.training_mechanisms import largest_gradient

        one, _ = largest_gradient(ctx, trainable(ctx), g.grad_bytes)
        grads0 = grads_head = grads_top = grads_first = grads_end = one
        gsay = ("at most the largest parameter's gradient (optimiser in backward)",) * 5
    elif appear and lora:
        grads_head = 0
        grads_top = g.layer
        grads_first = g.total
        grads_end = g.total
        gsay = (
            "no gradient yet",
            "no gradient yet (the LM head is frozen)",
            f"that layer's adapter gradients ({g.layer:,} B, counted in full)",
            "every adapter gradient, the layer's own counted in full",
            "every adapter gradient",
        )
        grads0 = 0
    elif appear:
        grads_head = g.head
        grads_top = g.head + g.layer
        # the first layer's own gradients counted in full: they appear as its saved tensors go
        grads_first = g.total - g.embedding + (g.head if g.tied else 0)
        # tied: the LM head's share and the embedding's are summed out of place at the end
        grads_end = g.total + (2 * g.head if g.tied else 0)
        gsay = (
            "no gradient yet",
            f"the LM head's gradient {g.head:,} B",
            f"the LM head's and that layer's gradients ({g.layer:,} B, counted in full)",
            "every gradient but the embedding's"
            + (" (the LM head's share of the tied weight's is held)" if g.tied else "")
            + ", the layer's own counted in full",
            "every gradient"
            + (
                f" + the tied weight's two shares being summed (2 x {g.head:,} B)" if g.tied else ""
            ),
        )
        grads0 = 0
    else:
        grads0 = grads_head = grads_top = grads_first = grads_end = g.total
        gsay = ("every gradient",) * 5
    loss_bwd, head_bwd = loss_backward_bytes(ctx)
    lb = int(sv.logits * head_bwd)
    in_layer, in_layer_say = lora_layer_backward_temporary(ctx, sv.tokens) if lora else (0, "")
    points = (
        Point("the loss backward", start, int(sv.logits * loss_bwd), grads0),
        Point("the LM head's backward", start, lb, grads_head),
        Point(
            "the last decoder layer (first in backward)",
            sv.layers_saved + sv.recompute + in_layer,
            0,
            grads_top,
        ),
        Point("the first decoder layer (last in backward)", first_layer + in_layer, 0, grads_first),
        Point("the embedding's backward (the end)", 0, 0, grads_end),
    )
    if ctx.framework.loss_impl == "full-upcast":
        loss_say = "the saved log-softmax, its gradient and the logits' gradient, 3 x 4 B per logit"
        head_say = f"the logits' gradient, {b} B per logit"
    else:
        loss_say = f"{_per(loss_bwd)} B per logit ({ctx.framework.loss_impl})"
        head_say = f"{_per(head_bwd)} B per logit"
    rule = (
        f"the backward's peak is the largest of the points it passes through ({appear_why}): "
        f"the loss backward (every saved activation + {loss_say}; {gsay[0]}); the LM head's "
        f"backward (every saved activation + {head_say}; {gsay[1]}); the last "
        f"decoder layer, first in backward ({top_say}; {gsay[2]}); the first decoder "
        f"layer, last in backward ({first_say}; {gsay[3]}); the embedding's backward ({gsay[4]}, "
        "every activation freed). Between layers the total moves linearly (each layer frees "
        "its saved tensors as its gradients appear), so it is largest at one of these; "
        + (
            f"inside a layer's backward, {in_layer_say}"
            if in_layer
            else "backward temporaries inside a layer are not itemised"
        )
    )
    return Walk(rule=rule, points=points)


def lora_layer_backward_temporary(ctx: LedgerContext, tokens: int) -> tuple[int, str]:
    """Inside an adapted module's backward the gradient of its input exists twice at once: the
    adapter path's, in the adapter dtype (fp32: PEFT cast the input up), and the frozen base's,
    in the compute dtype, before they are summed. The widest adapted input sets the moment."""
    from vramtui.ledger.training import lora_modules

    mods = lora_modules(ctx)
    if not mods:
        return 0, ""
    from vramtui.ledger.training_mechanisms import adapter_bytes, unsloth_kernel_groups

    if "mlp" in unsloth_kernel_groups(ctx):
        width, _ = _mlp_width(ctx.arch)
        n = tokens * width * ctx.act_bytes
        return n, (
            f"Unsloth's LoRA_MLP backward holds one {ctx.act_bytes}-byte gradient of the MLP "
            f"width (DW, then act's backward in place into e and g; dX is written into the "
            f"saved X): {tokens:,} tokens x {width:,} x {ctx.act_bytes} B = {n:,} B"
        )

    widest = max(mods, key=lambda m: m.in_features)
    a = adapter_bytes(ctx)  # the adapter path's input gradient is in the adapters' dtype
    n = tokens * widest.in_features * (a + ctx.act_bytes)
    return n, (
        f"the widest adapted module ({widest.name}, {widest.in_features:,} inputs) holds its "
        f"input's gradient twice before the sum: {tokens:,} tokens x {widest.in_features:,} x "
        f"({a} B adapter path + {ctx.act_bytes} B frozen path) = {n:,} B"
    )


def forward_walk(ctx: LedgerContext, sv: TrainingSaved) -> Walk | None:
    """Full checkpointing, one pipeline stage: the forward's peak is inside the last layer or
    at the loss, never both (the layer's working set is freed before the LM head runs)."""
    if ctx.spec.training.grad_checkpointing != "full" or ctx.pp > 1:
        return None
    fwd_per, _ = forward_logit_bytes(ctx)
    return Walk(
        rule="the forward's peak is the larger of two moments that never coexist: inside the "
        "last decoder layer (every layer input + one layer's no-grad working set) and at the "
        "loss (every layer input + the final norm's saved tensors + the logits)",
        points=(
            Point("inside the last decoder layer", sv.layers_saved + sv.working, 0),
            Point("at the loss", sv.layers_saved + sv.final_norm, int(sv.logits * fwd_per)),
        ),
    )


def validation_walk(ctx: LedgerContext, sv: TrainingSaved) -> Walk | None:
    """One pipeline stage: a no-grad forward peaks inside a layer or at the loss."""
    if ctx.pp > 1:
        return None
    fwd_per, _ = forward_logit_bytes(ctx)
    hidden = sv.tokens * ctx.arch.hidden_size * ctx.act_bytes
    return Walk(
        rule="the validation forward's peak is the larger of two moments that never coexist: "
        "inside a decoder layer (its no-grad working set) and at the loss (the final hidden "
        f"states, {sv.tokens:,} tokens x {ctx.arch.hidden_size} x {ctx.act_bytes} B, + the "
        "logits); the layer's working set is freed before the LM head runs",
        points=(
            Point("inside a decoder layer", sv.working, 0),
            Point("at the loss", hidden, int(sv.logits * fwd_per)),
        ),
    )


def training_items(ctx: LedgerContext) -> list[LedgerItem]:
    act_stages = ("forward", "backward")
    if ctx.arch is None or ctx.arch.activation_unknown:
        why = BARE if ctx.arch is None else f"not itemised: {ctx.arch.activation_unknown}"
        return [
            _unknown(
                "activations.training",
                "Activations saved for backward",
                "activations",
                act_stages,
                why,
            ),
            _unknown(
                "logits.training",
                "Logits and loss buffers",
                "logits",
                ("forward", "backward", "validation"),
                why,
            ),
        ]
    spec = ctx.spec
    arch = ctx.arch
    mb = spec.batch.micro_batch
    s = spec.lengths.seq_len
    b = ctx.act_bytes
    sv = training_saved(ctx)
    ckpt = spec.training.grad_checkpointing
    # Pipeline: stage p keeps up to (pp - p) micro-batches in flight (1F1B schedule).
    pp = ctx.pp
    in_flight = [min(pp - p, spec.batch.grad_accum) for p in range(pp)]
    fractions = layer_fractions([1] * arch.num_layers, pp)
    scale = sum(f * n for f, n in zip(fractions, in_flight))  # ratio to a single micro-batch
    dist = distribution(
        ctx.layout,
        stage_fractions=tuple(f * n / scale for f, n in zip(fractions, in_flight)),
        tp_share=Fraction(1, ctx.tp),
    )
    saved_end = int((sv.layers_saved + sv.final_norm) * scale)
    why = UnitText(
        f"{sv.why}; saved at the end of the forward: {saved_end:,} B (",
        Figure(saved_end, gib_in_bytes_mode=True),
        ")",
    )
    if pp > 1:
        why += f"; pipeline stages hold {in_flight} micro-batches in flight"
    if ctx.tp > 1:
        why += f"; divided by TP={ctx.tp} (assumes sequence parallelism)"
    fwd_per, fwd_per_why = forward_logit_bytes(ctx)
    fwd_logits = int(sv.logits * fwd_per)
    loss_bwd, _ = loss_backward_bytes(ctx)
    loss_logits = int(sv.logits * loss_bwd)

    # forward
    fwalk = forward_walk(ctx, sv)
    if fwalk is not None:
        act_fwd, logits_fwd = fwalk.peak.activations, fwalk.peak.logits
        fwd_text = (
            f"; forward: {act_fwd:,} B - {fwalk.rule}: {fwalk.points_text}; the peak is "
            f"{fwalk.peak.label}"
        )
    else:
        extra = sv.working if ckpt == "full" else 0
        act_fwd = int((sv.layers_saved + extra + sv.final_norm) * scale)
        logits_fwd = fwd_logits
        fwd_text = (
            f"; forward: {act_fwd:,} B (the layer inputs, one layer's working set and the final "
            "norm added: pipeline stages peak at different moments)"
            if ckpt == "full"
            else ""
        )
    # backward
    bwalk = backward_walk(ctx)
    if bwalk is not None:
        act_bwd, logits_bwd = bwalk.peak.activations, bwalk.peak.logits
        bwd_text = (
            f"; backward: {act_bwd:,} B, the activations live at the backward's peak, "
            f"{bwalk.peak.label}, the largest of the points the backward passes through (the "
            f"rule is worked under the gradients item): {bwalk.points_text}"
        )
    else:
        act_bwd = int((sv.layers_saved + sv.recompute + sv.final_norm) * scale)
        logits_bwd = loss_logits
        reason = "pipeline stages peak at different moments"
        bwd_text = (
            f"; backward: {act_bwd:,} B, everything saved"
            + (" + the recomputed layer" if sv.recompute else "")
            + f" added to the loss backward's logits and all gradients ({reason})"
        )
    items = [
        LedgerItem(
            key="activations.training",
            name=f"Activations saved for backward (checkpointing: {ckpt})",
            category="activations",
            status=ESTIMATED,
            basis=why + fwd_text + bwd_text,
            stages=act_stages,
            stage_bytes={"forward": act_fwd, "backward": act_bwd},
            distribution=dist,
        )
    ]
    # validation
    vwalk = validation_walk(ctx, sv)
    if vwalk is not None:
        val, logits_val = vwalk.peak.activations, vwalk.peak.logits
        val_text = f"{vwalk.rule}: {vwalk.points_text}; the peak is {vwalk.peak.label}"
    else:
        val, logits_val = sv.working, fwd_logits
        val_text = (
            f"one layer at a time: {sv.working:,} B, added to the logits (pipeline stages "
            "peak at different moments)"
        )
    from vramtui.ledger.training_mechanisms import loss_bytes_per_logit, loss_label

    loss_rule = loss_bytes_per_logit(ctx)[3]
    logits_text = (
        f"{mb} x {s:,} tokens x vocab {arch.vocab_size:,} = {sv.logits:,} logits; forward: x "
        f"({fwd_per_why}) = {fwd_logits:,} B at the loss"
        + (
            f", none at the forward's peak ({fwalk.peak.label})"
            if fwalk is not None and not logits_fwd
            else ""
        )
        + (
            f"; the loss backward holds the saved log-softmax, its gradient and the logits' "
            f"gradient, x 3 x 4 B = {loss_logits:,} B, and the LM head's backward the logits' "
            f"gradient in {b} B"
            if ctx.framework.loss_impl == "full-upcast"
            else f"; {loss_rule} ({ctx.framework.origin('loss_impl')}); the loss backward "
            f"x {_per(loss_bwd)} B = {loss_logits:,} B"
        )
    )
    if bwalk is not None:
        logits_text += (
            f"; backward: {logits_bwd:,} B at the backward's peak, {bwalk.peak.label} (the "
            "points of the backward are listed under the activations)"
        )
    logits_text += (
        f"; validation: {logits_val:,} B at its peak; the largest single transient of a "
        "causal-LM step"
    )
    items.append(
        LedgerItem(
            key="logits.training",
            name=f"Logits and loss ({loss_label(ctx)})",
            category="logits",
            status=ESTIMATED,
            basis=logits_text,
            stages=("forward", "backward", "validation"),
            stage_bytes={"forward": logits_fwd, "backward": logits_bwd, "validation": logits_val},
            distribution=distribution(ctx.layout, where="last", tp_share=Fraction(1, ctx.tp)),
        )
    )
    items.append(
        LedgerItem(
            key="activations.validation",
            name="Validation forward working set (no grad)",
            category="activations",
            status=ESTIMATED,
            basis=f"evaluation at the training micro-batch; one layer's working set: "
            f"{sv.working_why} = {sv.working:,} B; {val_text}",
            stages=("validation",),
            stage_bytes={"validation": val},
            distribution=distribution(ctx.layout, tp_share=Fraction(1, ctx.tp)),
        )
    )
    return items
