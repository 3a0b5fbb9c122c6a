"""Activations and logits: inference working sets, training saved tensors (Korthikanti et al.).

Per-layer counts follow what the Hugging Face implementations keep for backward (RMSNorm
upcasts to fp32, only the rotated q and k are kept - cos and sin need no gradient, so autograd
saves neither q before rotation nor rotate_half(q) - SwiGLU keeps gate,
up, act(gate) and their product). They are estimates, checked by the dry run where available.
"""

from __future__ import annotations

from fractions import Fraction

from vramtui.ledger.context import LedgerContext
from vramtui.ledger.items import ESTIMATED, UNKNOWN, LedgerItem
from vramtui.ledger.placement import distribution, layer_fractions
from vramtui.units import format_bytes

# vLLM's default scheduler budget (max_num_batched_tokens) for one prefill step.
VLLM_DEFAULT_BATCHED_TOKENS = 8192


def _unknown(key: str, name: str, category: str, stages: tuple[str, ...], why: str) -> LedgerItem:
    return LedgerItem(
        key=key, name=name, category=category, status=UNKNOWN, basis=why, stages=stages
    )


BARE = "a bare parameter count has no hidden size, layers or vocabulary: give the model id or path"


# --------------------------------------------------------------------------- inference


def _mlp_width(arch) -> tuple[int, str]:
    """Intermediate width one token passes through in one layer's MLP."""
    if arch.is_moe:
        width = arch.num_experts_per_tok * arch.moe_intermediate_size
        width += arch.shared_expert_intermediate_size
        return width, (
            f"top-{arch.num_experts_per_tok} experts x {arch.moe_intermediate_size}"
            + (
                f" + shared {arch.shared_expert_intermediate_size}"
                if arch.shared_expert_intermediate_size
                else ""
            )
        )
    return arch.intermediate_size, f"intermediate {arch.intermediate_size}"


def eager_score_bytes(ctx: LedgerContext) -> tuple[int, str]:
    """Bytes per attention score at eager attention's softmax, and why.

    The model computes softmax(scores, dtype=float32) on scores in the compute dtype: PyTorch
    fuses the upcast into the softmax only for fp16 on CUDA; for bf16 it first makes an fp32
    copy of the scores (checked against the dry run's trace), for fp32 the cast is a no-op.
    """
    b = ctx.act_bytes
    if ctx.compute_dtype == "bf16":
        return b + 4 + 4, f"{b} B scores + 4 B fp32 copy + 4 B fp32 softmax"
    return b + 4, f"{b} B scores + 4 B fp32 softmax"


def layer_working_set_bytes(
    ctx: LedgerContext, tokens: int, seqs: int, seq_len: int, kv_len: int | None = None
) -> tuple[int, str]:
    """One layer's transient tensors during a no-grad forward over `tokens` tokens.

    `seq_len` is the query length of each sequence, `kv_len` the length it attends to (the
    cache at decode; `seq_len` when not given).
    """
    arch = ctx.arch
    kv_len = seq_len if kv_len is None else kv_len
    b = ctx.act_bytes
    h = arch.hidden_size
    q = arch.num_attention_heads * arch.head_dim
    kv = 2 * arch.num_kv_heads * arch.head_dim
    width, width_why = _mlp_width(arch)
    mlp_mult = 3 if arch.gated_mlp else 2
    engine = (ctx.spec.runtime.engine or "transformers").lower()
    # transformers keeps four copies of the hidden states alive inside a layer: the embedding
    # output (held by the model's forward), the layer's input (held by the caller), the residual
    # after attention and the normed input; fused-residual engines (vLLM...) keep two.
    copies = 4 if engine == "transformers" else 2
    hidden = copies * tokens * h * b
    attn = tokens * (q + kv + q) * b  # q, k, v, attention output
    mlp = mlp_mult * tokens * width * b
    moe_why = ""
    if arch.is_moe:
        # the top-k copies of each token: the gathered expert inputs and the experts' outputs
        mlp += 2 * tokens * arch.num_experts_per_tok * h * b
        moe_why = f" + 2 x top-{arch.num_experts_per_tok} token copies x hidden {h}"
    total = hidden + max(attn, mlp)
    why = (
        f"{tokens:,} tokens x ({copies} x hidden {h} + max(q+k+v+out {q + kv + q}, "
        f"{mlp_mult} x {width_why}{moe_why})) x {b} B"
    )
    if ctx.spec.runtime.attention == "eager":
        per_score, per_why = eager_score_bytes(ctx)
        heads = arch.num_attention_heads
        scores = seqs * heads * seq_len * kv_len * per_score
        total += scores
        why += f" + eager attention scores {seqs} x {heads} heads x {seq_len:,} x {kv_len:,} x ({per_why})"
        if arch.num_kv_heads < heads:
            rep = 2 * seqs * kv_len * heads * arch.head_dim * b
            total += rep
            why += (
                f" + repeat_kv copies of K and V to all {heads} heads over {kv_len:,} tokens "
                f"({rep:,} B)"
            )
    return total, why


def prefill_step_tokens(ctx: LedgerContext) -> tuple[int, int, str]:
    """Tokens one prefill forward processes, the attention length, and a note on chunking."""
    spec = ctx.spec
    conc, prompt = spec.batch.concurrency, spec.lengths.prompt_tokens
    tokens = conc * prompt
    if (spec.runtime.engine or "").lower() != "vllm":
        return tokens, prompt, ""
    note = ""
    if tokens > VLLM_DEFAULT_BATCHED_TOKENS:
        note = (
            f"; vLLM chunks prefill to max_num_batched_tokens (default "
            f"{VLLM_DEFAULT_BATCHED_TOKENS:,}, an engine setting to confirm)"
        )
    return (
        min(tokens, VLLM_DEFAULT_BATCHED_TOKENS),
        min(prompt, VLLM_DEFAULT_BATCHED_TOKENS),
        note,
    )


def inference_items(ctx: LedgerContext) -> list[LedgerItem]:
    if ctx.arch is None:
        return [
            _unknown(
                "activations.inference",
                "Activations (prefill/decode working set)",
                "activations",
                ("prefill", "decode"),
                BARE,
            ),
            _unknown("logits.inference", "Logits", "logits", ("prefill", "decode"), BARE),
        ]
    spec = ctx.spec
    arch = ctx.arch
    conc = spec.batch.concurrency
    prompt = spec.lengths.prompt_tokens
    engine = (spec.runtime.engine or "transformers").lower()
    prefill_tokens, attn_len, chunk_note = prefill_step_tokens(ctx)
    prefill_bytes, prefill_why = layer_working_set_bytes(ctx, prefill_tokens, conc, attn_len)
    context = prompt + (spec.lengths.generated_tokens or 0)
    decode_bytes, decode_why = layer_working_set_bytes(ctx, conc, conc, 1, context)
    b = ctx.act_bytes
    layer_dist = distribution(ctx.layout, tp_share=Fraction(1, ctx.tp))
    items = [
        LedgerItem(
            key="activations.inference",
            name="Activations (one layer's working set + hidden states)",
            category="activations",
            status=ESTIMATED,
            basis=f"prefill: {prefill_why} = {prefill_bytes:,} B{chunk_note}; "
            f"decode: {decode_why} = {decode_bytes:,} B",
            stages=("prefill", "decode"),
            stage_bytes={"prefill": prefill_bytes, "decode": decode_bytes},
            distribution=layer_dist,
        )
    ]
    # generate() and serving engines compute logits for the last position only, and
    # upcast them to fp32 for sampling.
    logit_bytes = conc * arch.vocab_size * (b + 4)
    items.append(
        LedgerItem(
            key="logits.inference",
            name="Logits (last position, fp32 for sampling)",
            category="logits",
            status=ESTIMATED,
            basis=f"{conc} sequence(s) x vocab {arch.vocab_size:,} x ({b} B + 4 B fp32 copy) "
            f"= {logit_bytes:,} B (generate() keeps only the last position's logits)",
            stages=("prefill", "decode"),
            stage_bytes={"prefill": logit_bytes, "decode": logit_bytes},
            distribution=distribution(ctx.layout, where="last", tp_share=Fraction(1)),
        )
    )
    if spec.runtime.attention in ("eager", "sdpa") and engine == "transformers":
        mask_b = b if spec.runtime.attention == "eager" else 1
        mask = conc * prompt * prompt * mask_b
        items.append(
            LedgerItem(
                key="buffers.attention_mask",
                name="4-D attention mask (prefill)",
                category="buffers",
                status=ESTIMATED,
                basis=(
                    f"{conc} x {prompt:,} x {prompt:,} x {mask_b} B = {mask:,} B: transformers "
                    f"builds a {'float' if mask_b > 1 else 'boolean'} causal mask for "
                    f"{spec.runtime.attention} attention when the batch is padded; none with flash"
                ),
                stages=("prefill",),
                stage_bytes={"prefill": mask},
                distribution=distribution(ctx.layout),
            )
        )
    return items


# --------------------------------------------------------------------------- training


def training_layer_bytes(ctx: LedgerContext, seqs: int, s: int) -> tuple[int, str]:
    """Bytes one layer saves for backward over `seqs` sequences of `s` tokens (no checkpointing)."""
    arch = ctx.arch
    b = ctx.act_bytes
    h = arch.hidden_size
    tokens = seqs * s
    q = arch.num_attention_heads * arch.head_dim
    kvd = arch.num_kv_heads * arch.head_dim
    width, width_why = _mlp_width(arch)
    norms = 2 * tokens * (4 * h + 4 + b * h + b * h)  # fp32 input, rsqrt, normalised, scaled
    # rotated q and k, and v: q * cos and rotate_half(q) * sin save only cos and sin (no grad).
    # Eager attention's matmuls save K and V repeated to every query head (repeat_kv copies)
    # instead of the grouped ones.
    kv_saved = q if ctx.spec.runtime.attention == "eager" else kvd
    qkv = tokens * b * (q + 2 * kv_saved)
    attn_out = tokens * b * q
    mlp = tokens * b * width * (4 if arch.gated_mlp else 2)
    total = norms + qkv + attn_out + mlp
    parts = [
        f"norms 2 x (fp32 input 4 B + rsqrt + normalised {b} B + scaled {b} B) x hidden {h}",
        f"rotated q and k, and v ({q + 2 * kv_saved} values/token"
        + (", K and V repeated to every head by eager's repeat_kv)" if kv_saved != kvd else ")"),
        f"attention output {q}",
        f"MLP {'gate, up, act, product' if arch.gated_mlp else 'up, act'} over {width_why}",
    ]
    kernel = ctx.spec.runtime.attention
    if kernel == "eager":
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
    return total, f"{tokens:,} tokens: " + "; ".join(parts)


def training_items(ctx: LedgerContext) -> list[LedgerItem]:
    act_stages = ("forward", "backward")
    if ctx.arch is None:
        return [
            _unknown(
                "activations.training",
                "Activations saved for backward",
                "activations",
                act_stages,
                BARE,
            ),
            _unknown(
                "logits.training",
                "Logits and loss buffers",
                "logits",
                ("forward", "backward", "validation"),
                BARE,
            ),
        ]
    spec = ctx.spec
    arch = ctx.arch
    mb = spec.batch.micro_batch
    s = spec.lengths.seq_len
    b = ctx.act_bytes
    h = arch.hidden_size
    per_layer, per_layer_why = training_layer_bytes(ctx, mb, s)
    # The final norm before the LM head saves what a layer's norm does (outside checkpointing).
    final_norm = mb * s * (4 * h + 4 + b * h + b * h)
    ckpt = spec.training.grad_checkpointing
    layers_forward = None
    if ckpt == "full":
        kept = mb * s * h * b  # one copy of each layer's input (2sbh B in 16-bit)
        layers_total = arch.num_layers * kept + per_layer + final_norm
        # In the forward, checkpointed layers save nothing: one layer's no-grad working set
        # is live at a time. The full saved set of one layer exists only in backward, when
        # that layer is recomputed (checked against the dry run's trace).
        working, _ = layer_working_set_bytes(ctx, mb * s, mb, s)
        layers_forward = arch.num_layers * kept + working + final_norm
        why = (
            f"full checkpointing: {arch.num_layers} layer inputs x ({mb} x {s:,} x {h} x {b} B) "
            f"+ in backward one layer recomputed ({per_layer:,} B: {per_layer_why}); in the "
            f"forward one layer's no-grad working set instead ({working:,} B); final norm "
            f"{final_norm:,} B"
        )
    else:
        if ckpt == "selective" and spec.runtime.attention == "eager":
            scores = mb * arch.num_attention_heads * s * s * (4 + b)
            per_layer -= scores
            per_layer_why += " (selective recomputation drops the scores)"
        layers_total = arch.num_layers * per_layer + final_norm
        why = (
            f"{arch.num_layers} layers x {per_layer:,} B ({per_layer_why}) + final norm "
            f"{final_norm:,} B"
        )
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
    stored = int(layers_total * scale)
    stored_forward = stored if layers_forward is None else int(layers_forward * scale)
    if pp > 1:
        why += f"; pipeline stages hold {in_flight} micro-batches in flight"
    if ctx.tp > 1:
        why += f"; divided by TP={ctx.tp} (assumes sequence parallelism)"
    items = [
        LedgerItem(
            key="activations.training",
            name=f"Activations saved for backward (checkpointing: {ckpt})",
            category="activations",
            status=ESTIMATED,
            basis=f"{why} = {stored:,} B ({format_bytes(stored)})"
            + (f" in backward, {stored_forward:,} B in the forward" if layers_forward else ""),
            stages=act_stages,
            stage_bytes={"forward": stored_forward, "backward": stored},
            distribution=dist,
        )
    ]
    logits = mb * s * arch.vocab_size
    fwd = logits * (b + 4 + 4)
    items.append(
        LedgerItem(
            key="logits.training",
            name="Logits and loss (fp32 upcast, log-softmax, gradient)",
            category="logits",
            status=ESTIMATED,
            basis=(
                f"{mb} x {s:,} tokens x vocab {arch.vocab_size:,} = {logits:,} logits x "
                f"({b} B + 4 B fp32 upcast + 4 B log-softmax / its gradient) = {fwd:,} B; "
                "the largest single transient of a causal-LM step"
            ),
            stages=("forward", "backward", "validation"),
            stage_bytes={"forward": fwd, "backward": fwd, "validation": fwd},
            distribution=distribution(ctx.layout, where="last", tp_share=Fraction(1, ctx.tp)),
        )
    )
    val, val_why = layer_working_set_bytes(ctx, mb * s, mb, s)
    items.append(
        LedgerItem(
            key="activations.validation",
            name="Validation forward working set (no grad)",
            category="activations",
            status=ESTIMATED,
            basis=f"evaluation at the training micro-batch, one layer at a time: {val_why} "
            f"= {val:,} B",
            stages=("validation",),
            stage_bytes={"validation": val},
            distribution=distribution(ctx.layout, tp_share=Fraction(1, ctx.tp)),
        )
    )
    return items
