"""Activations and logits at inference: the working set of one layer and of one prefill step.

What training saves for backward is in `training_activations` (Korthikanti et al.).

Per-layer counts follow what the Hugging Face implementations keep for backward (RMSNorm
upcasts to fp32, only the rotated q and k are kept - cos and sin need no gradient, so autograd
saves neither q before rotation nor rotate_half(q) - SwiGLU keeps gate,
up, act(gate) and their product). They are estimates, checked by the dry run where available.
"""

from __future__ import annotations

from fractions import Fraction

from vramtui.ledger.context import LedgerContext
from vramtui.ledger.items import ESTIMATED, UNKNOWN, LedgerItem
from vramtui.ledger.placement import distribution

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


def inference_logits_item(
    ctx: LedgerContext, conc: int, vocab: int, b: int, which: str
) -> LedgerItem:
    """generate() and serving engines compute logits for the last position only, and upcast
    them to fp32 for sampling: conc x vocab x (b + 4) bytes. `which` names the position kept
    ("the last position's", "the last decoder position's")."""
    logit_bytes = conc * vocab * (b + 4)
    return LedgerItem(
        key="logits.inference",
        name="Logits (last position, fp32 for sampling)",
        category="logits",
        status=ESTIMATED,
        basis=f"{conc} sequence(s) x vocab {vocab:,} x ({b} B + 4 B fp32 copy) "
        f"= {logit_bytes:,} B (generate() keeps only {which} logits)",
        stages=("prefill", "decode"),
        stage_bytes={"prefill": logit_bytes, "decode": logit_bytes},
        distribution=distribution(ctx.layout, where="last", tp_share=Fraction(1)),
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
    if ctx.arch.activation_unknown:
        why = f"not itemised: {ctx.arch.activation_unknown}"
        return [
            _unknown(
                "activations.inference",
                "Activations (prefill/decode working set)",
                "activations",
                ("prefill", "decode"),
                why,
            ),
            _unknown("logits.inference", "Logits", "logits", ("prefill", "decode"), why),
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
    items.append(inference_logits_item(ctx, conc, arch.vocab_size, b, "the last position's"))
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
