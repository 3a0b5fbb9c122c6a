"""Activations and caches of encoder-only and encoder-decoder families (BERT, T5, Whisper).

Worked from the layers transformers runs (BertLayer, T5Block, WhisperEncoderLayer /
WhisperDecoderLayer) and checked on CPU against the live tensors of a real forward
(bench/encoder_activations_vs_torch.py). A no-grad layer peaks at one of three moments:

- in attention: q, k and v (3 x tokens x heads*head_dim), then, with eager attention, the
  scores (seqs x heads x query x key length) beside either the copies of q and k that
  torch.matmul makes of the transposed heads (2 x q) or a second copy of the scores (the
  scaling and the softmax each write a new tensor); with SDPA/flash no scores, the kernel's
  output and its contiguous copy (2 x q);
- in the MLP: the attention block's output, the intermediate activation before and after its
  nonlinearity (gated: the gate, the up projection and the product) and, with eager, the
  attention probabilities the layer keeps until it returns;
- BERT only (post-norm): after the MLP, the activation, the output projection, the residual
  sum and the LayerNorm output.

Beside it the model's forward holds the embedding output and the layer's input (2 x hidden);
T5 also holds its relative position bias (seqs x heads x query x key, for every kernel: T5
adds it to the scores) for the whole stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from vramtui.ledger.activations import inference_logits_item
from vramtui.ledger.context import LedgerContext
from vramtui.ledger.formats import FLOAT_BYTES
from vramtui.ledger.items import ESTIMATED, UNKNOWN, LedgerItem
from vramtui.ledger.placement import distribution, layer_fractions
from vramtui.unit_text import Figure, UnitText

LAYER_CLASSES = {
    "bert": "BertLayer",
    "t5": "T5Block",
    "whisper": "WhisperEncoderLayer/WhisperDecoderLayer",
}


def shape_of(arch):
    """The EncoderShape of an architecture the encoder formulas follow, or None."""
    derived = getattr(arch, "derived", None) if arch is not None else None
    return getattr(derived, "encoder", None)


def family_note(model_type: str, shape) -> str:
    """The label shown with every estimate of such a family."""
    what = "encoder-only" if shape.kind == "encoder" else "encoder-decoder"
    return (
        f"an {what} model: its activations and caches follow vramtui's "
        f"{shape.style} encoder formulas (worked from {LAYER_CLASSES[shape.style]}), not the "
        "decoder-only ones"
    )


# ------------------------------------------------------------------------------ lengths


@dataclass(frozen=True)
class Lengths:
    """How the spec's lengths map onto the encoder and the decoder."""

    encoder: int  # encoder input tokens (frames) per sequence
    decoder_prompt: int  # decoder tokens in its first forward (0: encoder-only)
    decoder_context: int  # decoder self-attention cache length at the end (0: encoder-only)
    why: str


def inference_lengths(ctx: LedgerContext, shape) -> Lengths:
    lg = ctx.spec.lengths
    prompt, generated = lg.prompt_tokens or 0, lg.generated_tokens or 0
    if shape.kind == "encoder":
        return Lengths(
            prompt,
            0,
            0,
            f"one forward over lengths.prompt_tokens = {prompt:,} tokens per sequence "
            "(an encoder-only model generates nothing: generated_tokens does not apply)",
        )
    if shape.style == "whisper":
        return Lengths(
            shape.max_input,
            max(prompt, 1),
            max(prompt + generated, 1),
            f"the encoder always reads 30 s of audio: {shape.audio_frames:,} mel frames, "
            f"{shape.max_input:,} after the stride-2 conv stem (max_source_positions); the "
            f"spec's lengths map onto the decoder: prompt_tokens {prompt:,} (the start-of-"
            f"transcript tokens and any prompt) + generated_tokens {generated:,} = "
            f"{prompt + generated:,} decoder positions",
        )
    # T5: the prompt is the encoder input; the decoder starts from one start token.
    return Lengths(
        prompt,
        1,
        max(generated, 1),
        f"lengths.prompt_tokens {prompt:,} is the encoder input; the decoder starts from one "
        f"start token and caches one position per token it is fed: generated_tokens "
        f"{generated:,} positions at the end",
    )


def length_warnings(ctx: LedgerContext) -> list[str]:
    """One line per spec length the family cannot run (the estimate still follows the spec)."""
    shape = shape_of(ctx.arch)
    if shape is None:
        return []
    model = ctx.arch.model_type
    out = []
    if ctx.is_training:
        s = ctx.spec.lengths.seq_len or 0
        if shape.style == "bert" and shape.max_input and s > shape.max_input:
            out.append(_too_long(model, "lengths.seq_len", s, "max_position_embeddings", shape))
        if shape.style == "whisper" and s > shape.max_target:
            out.append(_too_long(model, "lengths.seq_len", s, "max_target_positions", shape))
        return out
    lg = ctx.spec.lengths
    prompt, total = lg.prompt_tokens or 0, (lg.prompt_tokens or 0) + (lg.generated_tokens or 0)
    if shape.style == "bert" and shape.max_input and prompt > shape.max_input:
        out.append(
            _too_long(model, "lengths.prompt_tokens", prompt, "max_position_embeddings", shape)
        )
    if shape.style == "whisper" and total > shape.max_target:
        out.append(
            _too_long(
                model, "prompt_tokens + generated_tokens", total, "max_target_positions", shape
            )
        )
    return out


def _too_long(model: str, field: str, value: int, limit_name: str, shape) -> str:
    limit = shape.max_target if limit_name == "max_target_positions" else shape.max_input
    where = "its decoder's" if limit_name == "max_target_positions" else "its"
    return (
        f"warning: {field} = {value:,} is beyond {model}'s {limit_name} {limit:,} ({where} learned "
        f"position table): transformers cannot run it; the estimate follows the spec, set "
        f"{field} to at most {limit:,}"
    )


# ------------------------------------------------------------------------- KV caches


def kv_items(ctx: LedgerContext) -> list[LedgerItem]:
    shape = shape_of(ctx.arch)
    stages = ("prefill", "decode")
    if shape.kind == "encoder":
        return [
            LedgerItem(
                key="kv_cache",
                name="KV cache (none: encoder-only)",
                category="kv_cache",
                status=ESTIMATED,
                basis=f"encoder-only: no KV cache ({ctx.arch.model_type} reads the whole input "
                "in one forward and keeps nothing between tokens)",
                stages=stages,
                stage_bytes={"prefill": 0, "decode": 0},
                distribution=distribution(ctx.layout),
            )
        ]
    spec = ctx.spec
    kvb = FLOAT_BYTES[spec.runtime.kv_cache_dtype]
    conc = spec.batch.concurrency
    lengths = inference_lengths(ctx, shape)
    layers, heads, d = shape.decoder_layers, shape.decoder_heads, shape.head_dim
    per_token = 2 * layers * heads * d * kvb
    self_prefill = per_token * conc * lengths.decoder_prompt
    self_decode = per_token * conc * lengths.decoder_context
    cross = per_token * conc * lengths.encoder
    inner = (
        f"heads {heads} x d_kv {d} = {heads * d} (d_model is {shape.hidden})"
        if heads * d != shape.hidden
        else f"heads {heads} x head_dim {d}"
    )
    dist = distribution(ctx.layout, tp_share=Fraction(1, ctx.tp))
    self_item = LedgerItem(
        key="kv_cache",
        name=f"Decoder self-attention KV cache ({spec.runtime.kv_cache_dtype})",
        category="kv_cache",
        status=ESTIMATED,
        basis=UnitText(
            f"2 (K,V) x {layers} decoder layers x {inner} x {kvb} B = {per_token:,} B per token "
            f"x {conc} sequence(s) x {lengths.decoder_context:,} decoder positions = "
            f"{self_decode:,} B (",
            Figure(self_decode, gib_in_bytes_mode=True),
            f") at the end of decode; {self_prefill:,} B after the first decoder forward "
            f"({lengths.decoder_prompt:,} position(s)); {lengths.why}",
        ),
        stages=stages,
        stage_bytes={"prefill": self_prefill, "decode": self_decode},
        distribution=dist,
    )
    cross_item = LedgerItem(
        key="kv_cache.cross",
        name=f"Cross-attention KV cache ({spec.runtime.kv_cache_dtype})",
        category="kv_cache",
        status=ESTIMATED,
        basis=UnitText(
            f"computed once from the encoder output and cached: 2 (K,V) x {layers} decoder "
            f"layers x {conc} sequence(s) x {lengths.encoder:,} encoder "
            f"{'frames' if shape.style == 'whisper' else 'tokens'} x {inner} x {kvb} B = "
            f"{cross:,} B (",
            Figure(cross, gib_in_bytes_mode=True),
            "); fixed: it does not grow with the output",
        ),
        stages=stages,
        stage_bytes={"prefill": cross, "decode": cross},
        distribution=dist,
    )
    return [self_item, cross_item]


# ------------------------------------------------------------------ no-grad working set


@dataclass(frozen=True)
class Stack:
    """One stack's (encoder or decoder) layer dimensions."""

    name: str
    heads: int
    inner: int  # heads x head_dim
    ffn: int


def _stacks(shape) -> tuple[Stack, Stack | None]:
    enc = Stack("encoder", shape.encoder_heads, shape.encoder_inner, shape.encoder_ffn)
    if shape.kind == "encoder":
        return enc, None
    return enc, Stack("decoder", shape.decoder_heads, shape.decoder_inner, shape.decoder_ffn)


def layer_peak_bytes(
    ctx: LedgerContext,
    shape,
    stack: Stack,
    seqs: int,
    s: int,
    kv_len: int,
    cross_len: int = 0,
) -> tuple[int, str]:
    """One layer's no-grad peak over `seqs` x `s` tokens attending to `kv_len` (and, in a
    decoder layer, cross-attending to `cross_len` cached encoder positions), with the hidden
    states the model's forward holds beside it."""
    b = ctx.act_bytes
    h = shape.hidden
    t = seqs * s
    eager = ctx.spec.runtime.attention == "eager"
    th, tq, tf = t * h * b, t * stack.inner * b, t * stack.ffn * b
    p = seqs * stack.heads * s * kv_len * b if eager else 0
    px = seqs * stack.heads * s * cross_len * b if (eager and cross_len) else 0
    held = 2 * th
    bias = seqs * stack.heads * s * kv_len * b if shape.style == "t5" else 0
    if eager:
        attn = 3 * tq + p + max(2 * tq, p)
        attn_say = (
            f"q, k, v 3 x {stack.inner} + scores {seqs} x {stack.heads} heads x {s:,} x "
            f"{kv_len:,} + max(matmul's copies of q and k, a second copy of the scores)"
        )
    else:
        attn = 5 * tq
        attn_say = f"q, k, v + the kernel's output and its contiguous copy, 5 x {stack.inner}"
    cross, cross_say = 0, ""
    if cross_len:
        # q over the decoder tokens; K and V come from the cross-attention cache
        cross = tq + (px + max(2 * tq, px) if eager else 2 * tq)
        cross_say = (
            f"; cross-attention: q {stack.inner} + "
            + (
                f"scores {seqs} x {stack.heads} x {s:,} x {cross_len:,} + max(2 q, scores)"
                if eager
                else "the kernel's output and its copy"
            )
            + " (K, V read from the cross cache)"
        )
    kept = max(p, px)  # eager: the layer keeps the last attention's probabilities
    act = 3 if shape.gated else 2
    if shape.style == "bert":
        mlp = th + kept + tf + max(tf, 3 * th)
        mlp_say = (
            f"attention output {h} + intermediate {stack.ffn} + max(its GELU {stack.ffn}, "
            f"output + residual sum + LayerNorm 3 x {h})"
        )
    else:
        mlp = 2 * th + kept + act * tf
        what = "gate, up and product" if shape.gated else "before and after the nonlinearity"
        mlp_say = f"residual + normed input 2 x {h} + {act} x ffn {stack.ffn} ({what})"
    if eager:
        mlp_say += " + the attention probabilities the layer keeps until it returns"
    peak = held + bias + max(attn, cross, mlp)
    why = (
        f"{t:,} tokens x {b} B: embedding output + layer input 2 x {h} held"
        + (f" + T5's position bias {seqs} x {stack.heads} x {s:,} x {kv_len:,}" if bias else "")
        + f" + max(attention: {attn_say}{cross_say}; MLP: {mlp_say})"
    )
    return peak, why


def head_bytes(ctx: LedgerContext, shape, seqs: int, s: int) -> tuple[int, str]:
    """BERT's masked-LM head: logits at every position (no-grad)."""
    if shape.head != "mlm":
        return 0, ""
    b = ctx.act_bytes
    t = seqs * s
    # the encoder's output, the head's transform (dense + GELU, then LayerNorm) and the logits
    n = 3 * t * shape.hidden * b + t * shape.vocab * b
    return n, (
        f"the masked-LM head: {t:,} tokens x (encoder output + transform + its LayerNorm 3 x "
        f"{shape.hidden} + logits at every position, vocab {shape.vocab:,}) x {b} B = {n:,} B"
    )


def inference_items(ctx: LedgerContext) -> list[LedgerItem]:
    shape = shape_of(ctx.arch)
    spec = ctx.spec
    conc = spec.batch.concurrency
    b = ctx.act_bytes
    lengths = inference_lengths(ctx, shape)
    enc, dec = _stacks(shape)
    enc_peak, enc_why = layer_peak_bytes(ctx, shape, enc, conc, lengths.encoder, lengths.encoder)
    layer_dist = distribution(ctx.layout, tp_share=Fraction(1, ctx.tp))
    mask_say = (
        "no padding mask assumed (eager with a padded batch adds one more copy of the scores)"
    )
    if dec is None:
        head, head_why = head_bytes(ctx, shape, conc, lengths.encoder)
        peak = max(enc_peak, head)
        where = "inside an encoder layer" if enc_peak >= head else "at the masked-LM head"
        basis = UnitText(
            f"{lengths.why}; {conc} sequence(s); inside a layer: {enc_why} = {enc_peak:,} B"
            + (f"; at the head: {head_why}" if head else "; no LM head (hidden states out)")
            + f"; the peak is {where}: {peak:,} B (",
            Figure(peak, gib_in_bytes_mode=True),
            f"); {mask_say}",
        )
        return [
            LedgerItem(
                key="activations.inference",
                name="Activations (one encoder forward)",
                category="activations",
                status=ESTIMATED,
                basis=basis,
                stages=("prefill",),
                stage_bytes={"prefill": peak},
                distribution=layer_dist,
            )
        ]
    # encoder-decoder: generate() keeps the encoder output for the whole generation
    enc_out = conc * lengths.encoder * shape.hidden * b
    stem, stem_why = 0, ""
    if shape.style == "whisper":
        frames = shape.audio_frames
        stem = conc * frames * (shape.mel_bins + 2 * shape.hidden) * b
        stem_why = (
            f"; the conv stem: {conc} x {frames:,} frames x (mel {shape.mel_bins} + conv1 output "
            f"and its GELU 2 x {shape.hidden}) x {b} B = {stem:,} B"
        )
    dec_prefill, dec_prefill_why = layer_peak_bytes(
        ctx, shape, dec, conc, lengths.decoder_prompt, lengths.decoder_prompt, lengths.encoder
    )
    dec_step, dec_step_why = layer_peak_bytes(
        ctx, shape, dec, conc, 1, lengths.decoder_context, lengths.encoder
    )
    prefill = max(enc_peak, stem, enc_out + dec_prefill)
    decode = enc_out + dec_step
    items = [
        LedgerItem(
            key="activations.inference",
            name="Activations (encoder forward, then one decoder layer's working set)",
            category="activations",
            status=ESTIMATED,
            basis=UnitText(
                f"{lengths.why}; prefill is the largest of: inside an encoder layer {enc_why} "
                f"= {enc_peak:,} B{stem_why}; the first decoder forward, the encoder output "
                f"({enc_out:,} B, kept by generate()) + {dec_prefill_why} = "
                f"{enc_out + dec_prefill:,} B; prefill {prefill:,} B (",
                Figure(prefill, gib_in_bytes_mode=True),
                f"); decode: the encoder output + one decoder step {dec_step_why} = "
                f"{decode:,} B; {mask_say}",
            ),
            stages=("prefill", "decode"),
            stage_bytes={"prefill": prefill, "decode": decode},
            distribution=layer_dist,
        )
    ]
    items.append(inference_logits_item(ctx, conc, shape.vocab, b, "the last decoder position's"))
    return items


# ------------------------------------------------------------------------------ training


def training_lengths(ctx: LedgerContext, shape) -> tuple[int, int, str]:
    """(encoder tokens, decoder tokens) per sequence of a training step, and the mapping."""
    s = ctx.spec.lengths.seq_len or 0
    if shape.kind == "encoder":
        return s, 0, f"lengths.seq_len {s:,} tokens per sequence"
    if shape.style == "whisper":
        return (
            shape.max_input,
            s,
            (
                f"the encoder reads 30 s of audio ({shape.max_input:,} frames after the conv "
                f"stem); lengths.seq_len {s:,} is the decoder's target length"
            ),
        )
    return s, s, f"lengths.seq_len {s:,} for both the encoder input and the decoder target"


def layer_saved_bytes(
    ctx: LedgerContext, shape, stack: Stack, seqs: int, s: int, cross_len: int = 0
) -> tuple[int, str]:
    """What one layer saves for backward (full fine-tune, no checkpointing)."""
    b = ctx.act_bytes
    h = shape.hidden
    t = seqs * s
    th, tq, tf = t * h * b, t * stack.inner * b, t * stack.ffn * b
    eager = ctx.spec.runtime.attention == "eager"
    pa, ph = shape.attention_dropout > 0, shape.hidden_dropout > 0

    def attention(kv_len: int) -> tuple[int, str]:
        scores = seqs * stack.heads * s * kv_len
        kv = seqs * kv_len * stack.inner * b
        if eager:
            n = tq + 2 * kv + scores * b  # matmul's copies of q, k, v; the softmax output
            say = "matmul's copies of q, k and v + softmax output"
            if pa:
                n += scores * (b + 1)
                say += " + dropout output and its 1 B mask"
        else:
            n = tq + 2 * kv + tq + scores // kv_len * 4  # q, k, v, output, fp32 log-sum-exp
            say = "q, k, v, the kernel's output and its fp32 log-sum-exp"
        n += tq  # the output projection's input (the heads made contiguous)
        return n, say + f" over {kv_len:,} keys + the output projection's input"

    mask = t * h if ph else 0  # native_dropout keeps a 1 B mask per element
    self_attn, self_say = attention(s)
    if shape.style == "bert":
        # query/key/value input; the two LayerNorms' inputs, the first one's output (the MLP's
        # input) and their mean/rstd; GELU's input and output; two hidden dropout masks
        norms = 3 * th + 2 * t * 8
        mlp = 2 * tf
        total = th + self_attn + norms + mlp + 2 * mask
        why = (
            f"the attention input {h}; {self_say}; LayerNorm inputs, the first one's output "
            f"3 x {h} + fp32 mean/rstd; GELU input and output 2 x {stack.ffn}"
        )
        drops = 2
    else:
        # pre-norm: every block norms its input, saving the input, its statistics and the
        # normed output the projections read; T5's RMSNorm also keeps x * rsqrt before the
        # weight, and in 16-bit the fp32 copy it squares
        if shape.style == "t5":
            fp32 = 4 * t * h if b != 4 else 0
            per_norm = 3 * th + t * 4 + fp32
            norm_say = (
                "input, x*rsqrt and the scaled output 3 x "
                + str(h)
                + " + rsqrt"
                + (" + the fp32 copy it squares" if fp32 else "")
            )
        else:
            per_norm = 2 * th + t * 8
            norm_say = f"input and output 2 x {h} + fp32 mean/rstd"
        blocks = 3 if cross_len else 2
        norms = blocks * per_norm
        drop_ff = t * stack.ffn * (b + 1) if ph else 0  # T5's dropout inside the MLP
        if shape.gated:
            mlp = 4 * tf + drop_ff
            mlp_say = f"gate, its GELU, up, product 4 x {stack.ffn}"
        elif shape.style == "t5":
            mlp = tf + drop_ff
            mlp_say = f"ReLU output {stack.ffn} (the input of wo too)"
        else:
            mlp = 2 * tf
            mlp_say = f"GELU input and output 2 x {stack.ffn}"
        if drop_ff:
            mlp_say += " + dropout output and mask"
        total = norms + self_attn + mlp + blocks * mask
        why = f"{blocks} norms x ({norm_say}); self-attention {self_say}; MLP {mlp_say}"
        if cross_len:
            cross, cross_say = attention(cross_len)
            # K and V over the encoder output are computed in every decoder layer in training
            total += cross
            why += f"; cross-attention {cross_say}"
        drops = blocks
    if mask:
        why += f"; {drops} dropout masks x {h} x 1 B"
    return total, f"{t:,} tokens x {b} B: " + why


def stack_saved_bytes(
    ctx: LedgerContext, shape, seqs: int, enc_len: int, dec_len: int
) -> tuple[int, str]:
    """What the model saves outside its layers: the embeddings (or Whisper's conv stem), the
    final norms and, in an encoder-decoder, the encoder output the decoder's cross-attention
    projections read (one tensor for every decoder layer)."""
    b = ctx.act_bytes
    h = shape.hidden
    te, td = seqs * enc_len, seqs * dec_len
    if shape.style == "bert":
        n = te * h * b + te * 8 + (te * h if shape.hidden_dropout > 0 else 0)
        return n, (
            "the embeddings' LayerNorm input + statistics"
            + (" + dropout mask" if shape.hidden_dropout > 0 else "")
            + f" ({te:,} x {h})"
        )
    if shape.style == "whisper":
        frames = shape.audio_frames
        stem = seqs * frames * (shape.mel_bins + 2 * h) * b + te * h * b
        final = (te + td) * (2 * h * b + 8)
        return stem + final + te * h * b, (
            f"the conv stem: {seqs} x {frames:,} frames x (mel {shape.mel_bins} + conv1 output "
            f"and its GELU 2 x {h}) + conv2 output {enc_len:,} x {h}; both final LayerNorms; "
            f"the encoder output read by the cross-attention ({enc_len:,} x {h})"
        )
    fp32 = 4 * h if b != 4 else 0
    final = (te + td) * (3 * h * b + 4 + fp32)
    buckets = (enc_len * enc_len + dec_len * dec_len) * 8
    return final + te * h * b + buckets, (
        f"both final RMSNorms; the encoder output read by the cross-attention ({enc_len:,} x "
        f"{h}); the relative position buckets (int64, {enc_len:,}^2 + {dec_len:,}^2 x 8 B)"
    )


def training_items(ctx: LedgerContext) -> list[LedgerItem]:
    shape = shape_of(ctx.arch)
    spec = ctx.spec
    act_stages = ("forward", "backward")
    if spec.task.kind in ("lora", "qlora"):
        why = (
            f"not itemised: LoRA on {ctx.arch.model_type} ({shape.kind}); vramtui's encoder "
            "formulas cover a full fine-tune only (a frozen layer saves less)"
        )
        return [
            LedgerItem(
                "activations.training",
                "Activations saved for backward",
                "activations",
                UNKNOWN,
                why,
                act_stages,
            ),
            LedgerItem(
                "logits.training",
                "Logits and loss buffers",
                "logits",
                UNKNOWN,
                why,
                ("forward", "backward", "validation"),
            ),
        ]
    mb = spec.batch.micro_batch
    b = ctx.act_bytes
    h = shape.hidden
    enc_len, dec_len, len_why = training_lengths(ctx, shape)
    enc, dec = _stacks(shape)
    e_saved, e_why = layer_saved_bytes(ctx, shape, enc, mb, enc_len)
    e_work, _ = layer_peak_bytes(ctx, shape, enc, mb, enc_len, enc_len)
    extra, extra_why = stack_saved_bytes(ctx, shape, mb, enc_len, dec_len)
    saved = shape.encoder_layers * e_saved + extra
    why = (
        f"{len_why}; {extra_why} = {extra:,} B; {shape.encoder_layers} encoder layers x "
        f"{e_saved:,} B ({e_why})"
    )
    layer_inputs = shape.encoder_layers * mb * enc_len * h * b
    recompute, work = e_saved, e_work
    if dec is not None:
        d_saved, d_why = layer_saved_bytes(ctx, shape, dec, mb, dec_len, enc_len)
        d_work, _ = layer_peak_bytes(ctx, shape, dec, mb, dec_len, dec_len, enc_len)
        saved += shape.decoder_layers * d_saved
        why += f"; {shape.decoder_layers} decoder layers x {d_saved:,} B ({d_why})"
        layer_inputs += shape.decoder_layers * mb * dec_len * h * b
        recompute, work = max(e_saved, d_saved), max(e_work, d_work)
    ckpt = spec.training.grad_checkpointing
    if ckpt == "full":
        fwd = layer_inputs + work
        bwd = layer_inputs + recompute
        why = UnitText(
            f"full checkpointing: every layer's input kept ({layer_inputs:,} B); forward: + one "
            f"layer's no-grad working set = {fwd:,} B; backward: + one layer's saved tensors "
            f"recomputed = {bwd:,} B; without checkpointing the layers would save: " + why
        )
    else:
        fwd = bwd = saved
        why = UnitText(
            why + f" = {saved:,} B (",
            Figure(saved, gib_in_bytes_mode=True),
            ") saved at the end of the forward, held into the backward",
        )
        if ckpt == "selective":
            why += "; selective recomputation is not modelled for this family: counted as none"
    pp = ctx.pp
    dist = distribution(
        ctx.layout,
        stage_fractions=layer_fractions([1] * ctx.arch.num_layers, pp),
        tp_share=Fraction(1, ctx.tp),
    )
    items = [
        LedgerItem(
            key="activations.training",
            name=f"Activations saved for backward (checkpointing: {ckpt})",
            category="activations",
            status=ESTIMATED,
            basis=why,
            stages=act_stages,
            stage_bytes={"forward": fwd, "backward": bwd},
            distribution=dist,
        )
    ]
    # the loss: CrossEntropyLoss on the logits in the compute dtype (no fp32 upcast)
    if shape.head == "none":
        logits_say = "no LM head (the model class returns hidden states): no vocabulary logits"
        lf = lb = 0
    else:
        positions = mb * (enc_len if shape.kind == "encoder" else dec_len)
        n = positions * shape.vocab
        lf, lb = 2 * n * b, 3 * n * b
        logits_say = (
            f"{positions:,} positions x vocab {shape.vocab:,} = {n:,} logits"
            + (" (the masked-LM head scores every position)" if shape.head == "mlm" else "")
            + f"; forward: logits + log-softmax 2 x {b} B = {lf:,} B; backward: saved "
            f"log-softmax, its gradient and the logits' gradient 3 x {b} B = {lb:,} B "
            "(transformers' CrossEntropyLoss in the compute dtype)"
        )
    items.append(
        LedgerItem(
            key="logits.training",
            name="Logits and loss",
            category="logits",
            status=ESTIMATED,
            basis=logits_say,
            stages=("forward", "backward", "validation"),
            stage_bytes={"forward": lf, "backward": lb, "validation": lf},
            distribution=distribution(ctx.layout, where="last", tp_share=Fraction(1, ctx.tp)),
        )
    )
    items.append(
        LedgerItem(
            key="activations.validation",
            name="Validation forward working set (no grad)",
            category="activations",
            status=ESTIMATED,
            basis=f"evaluation at the training micro-batch: the largest layer's no-grad working "
            f"set = {work:,} B",
            stages=("validation",),
            stage_bytes={"validation": work},
            distribution=distribution(ctx.layout, tp_share=Fraction(1, ctx.tp)),
        )
    )
    return items
