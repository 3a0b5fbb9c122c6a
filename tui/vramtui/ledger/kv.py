"""The KV cache of autoregressive inference (vLLM's accounting is the reference)."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from vramtui.ledger.context import LedgerContext
from vramtui.ledger.formats import FLOAT_BYTES
from vramtui.ledger.items import ESTIMATED, UNKNOWN, LedgerItem
from vramtui.ledger.placement import distribution, layer_fractions
from vramtui.unit_text import Figure, UnitText

# Engines that cache the MLA latent (kv_lora_rank + rope dims); transformers' eager
# implementation caches the decompressed per-head keys and values instead.
LATENT_CACHE_ENGINES = ("vllm", "sglang", "tgi", "llama.cpp")


def kv_layer_bytes_per_token(ctx: LedgerContext) -> tuple[list[int], str]:
    """Bytes of cache per token for each layer, and the formula in words."""
    arch = ctx.arch
    kv_bytes = FLOAT_BYTES[ctx.spec.runtime.kv_cache_dtype]
    engine = (ctx.spec.runtime.engine or "").lower()
    if arch.mla is not None:
        mla = arch.mla
        if engine in LATENT_CACHE_ENGINES:
            per = (mla.kv_lora_rank + mla.qk_rope_head_dim) * kv_bytes
            why = (
                f"MLA latent: (kv_lora_rank {mla.kv_lora_rank} + qk_rope_head_dim "
                f"{mla.qk_rope_head_dim}) x {kv_bytes} B = {per:,} B per layer per token"
            )
        else:
            k = arch.num_attention_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
            v = arch.num_attention_heads * mla.v_head_dim
            per = (k + v) * kv_bytes
            why = (
                f"MLA decompressed by the '{engine or 'transformers'}' engine: heads "
                f"{arch.num_attention_heads} x (k {mla.qk_nope_head_dim + mla.qk_rope_head_dim}"
                f" + v {mla.v_head_dim}) x {kv_bytes} B = {per:,} B per layer per token"
            )
        return [per] * arch.num_layers, why
    per = 2 * arch.num_kv_heads * arch.head_dim * kv_bytes
    why = (
        f"2 (K,V) x {arch.num_kv_heads} KV heads x head_dim {arch.head_dim} x {kv_bytes} B "
        f"= {per:,} B per layer per token"
    )
    kinds = arch.layer_attention or ("full",) * arch.num_layers
    without = sum(1 for k in kinds if k == "none")
    if without:
        why += (
            f" on the {arch.num_layers - without} attention layers only ({without} of "
            f"{arch.num_layers} layers keep no KV cache)"
        )
    return [0 if k == "none" else per for k in kinds], why


def _tokens_held(tokens: int, layer_kind: str, window: int | None, block: int) -> int:
    if layer_kind == "none":
        return 0
    held = min(tokens, window) if (layer_kind == "sliding" and window) else tokens
    if block > 0:
        held = math.ceil(held / block) * block
    return held


def kv_cache_bytes(ctx: LedgerContext, tokens: int) -> tuple[int, list[int]]:
    """Total cache bytes for `tokens` per sequence x concurrency, and the per-layer split."""
    per_layer, _ = kv_layer_bytes_per_token(ctx)
    arch = ctx.arch
    kinds = arch.layer_attention or ("full",) * arch.num_layers
    block = ctx.spec.runtime.kv_block_tokens or 0
    concurrency = ctx.spec.batch.concurrency
    layer_bytes = [
        per_layer[i] * _tokens_held(tokens, kinds[i], arch.sliding_window, block) * concurrency
        for i in range(arch.num_layers)
    ]
    return sum(layer_bytes), layer_bytes


def kv_items(ctx: LedgerContext) -> list[LedgerItem]:
    if ctx.is_training:
        return []
    spec = ctx.spec
    if ctx.arch is None:
        return [
            LedgerItem(
                key="kv_cache",
                name="KV cache",
                category="kv_cache",
                status=UNKNOWN,
                basis="a bare parameter count has no layers, KV heads or head_dim: give the "
                "model id or a local config.json to size the cache",
                stages=("prefill", "decode"),
            )
        ]
    arch = ctx.arch
    if arch.kv_unknown:
        return [
            LedgerItem(
                key="kv_cache",
                name="KV cache",
                category="kv_cache",
                status=UNKNOWN,
                basis=f"not itemised: {arch.kv_unknown}",
                stages=("prefill", "decode"),
            )
        ]
    state = _state_items(ctx)
    if arch.layer_attention and all(k == "none" for k in arch.layer_attention):
        return state  # no attention layer: no KV cache at all
    prompt = spec.lengths.prompt_tokens
    context = spec.lengths.prompt_tokens + spec.lengths.generated_tokens
    prefill_bytes, _ = kv_cache_bytes(ctx, prompt)
    decode_bytes, layer_bytes = kv_cache_bytes(ctx, context)
    _, why = kv_layer_bytes_per_token(ctx)
    block = spec.runtime.kv_block_tokens or 0
    sliding = arch.num_sliding_layers
    parts = [why]
    if sliding:
        parts.append(
            f"{sliding} of {arch.num_layers} layers are sliding-window and keep at most "
            f"{arch.sliding_window:,} tokens"
        )
    if block:
        parts.append(f"paged blocks of {block} tokens: each sequence rounded up to whole blocks")
    parts.append(
        UnitText(
            f"{spec.batch.concurrency} concurrent sequence(s) x {context:,} tokens "
            f"({prompt:,} prompt + {spec.lengths.generated_tokens:,} generated) = "
            f"{decode_bytes:,} B (",
            Figure(decode_bytes, gib_in_bytes_mode=True),
            f") at the end of decode; {prefill_bytes:,} B after prefill",
        )
    )
    engine = (spec.runtime.engine or "").lower()
    if engine == "vllm":
        parts.append(
            "vLLM pre-allocates its pool at start-up (gpu_memory_utilization x total - the rest); "
            "this is the part the spec's sequences need"
        )
    tp_share = _kv_tp_share(ctx)
    dist = distribution(
        ctx.layout,
        stage_fractions=layer_fractions(layer_bytes, ctx.pp),
        tp_share=tp_share,
    )
    if ctx.tp > 1:
        if arch.mla is not None and engine in LATENT_CACHE_ENGINES:
            note = f"the MLA latent is replicated on every TP rank, not sharded (TP={ctx.tp})"
        else:
            heads = max(arch.num_kv_heads / ctx.tp, 1)
            note = f"KV heads per TP rank = max({arch.num_kv_heads}/{ctx.tp}, 1) = {heads:g}"
        dist = replace(dist, description=f"{dist.description}; {note}")
    return [
        LedgerItem(
            key="kv_cache",
            name=f"KV cache ({spec.runtime.kv_cache_dtype})",
            category="kv_cache",
            status=ESTIMATED,
            basis=UnitText("; ").join(parts),
            stages=("prefill", "decode"),
            stage_bytes={"prefill": prefill_bytes, "decode": decode_bytes},
            distribution=dist,
        )
    ] + state


def _state_items(ctx: LedgerContext) -> list[LedgerItem]:
    """The fixed-size state of state-space / linear-attention layers (no growth with length)."""
    arch = ctx.arch
    layers_without_kv = sum(1 for k in arch.layer_attention if k == "none")
    state = arch.state
    stages = ("prefill", "decode")
    if state is None:
        if not layers_without_kv or not any(
            "state" in n or "linear-attention" in n for n in arch.ledger_notes
        ):
            return []
        return [
            LedgerItem(
                key="recurrent_state",
                name="State-space / linear-attention state",
                category="kv_cache",
                status=UNKNOWN,
                basis=f"{layers_without_kv} layers of {arch.model_type} hold a fixed-size state "
                "instead of a KV cache; vramtui does not work out its size for this family",
                stages=stages,
            )
        ]
    b = ctx.act_bytes
    conc = ctx.spec.batch.concurrency
    per_seq = state.layers * (state.conv_elems + state.ssm_elems) * b
    total = per_seq * conc
    kinds = arch.layer_attention or ("none",) * arch.num_layers
    weights = [1 if k == "none" else 0 for k in kinds]
    if not any(weights):  # state beside attention in every layer (Falcon-H1)
        weights = [1] * arch.num_layers
    dist = distribution(
        ctx.layout,
        stage_fractions=layer_fractions(weights, ctx.pp),
        tp_share=Fraction(1, ctx.tp),
    )
    return [
        LedgerItem(
            key="recurrent_state",
            name=f"State-space / linear-attention state ({ctx.compute_dtype})",
            category="kv_cache",
            status=ESTIMATED,
            basis=UnitText(
                f"{state.layers} layers x ({state.why} = "
                f"{state.conv_elems + state.ssm_elems:,} elements) x {b} B = {per_seq:,} B per "
                f"sequence x {conc} concurrent sequence(s) = {total:,} B (",
                Figure(total, gib_in_bytes_mode=True),
                "); fixed size: it does not grow with the context",
            ),
            stages=stages,
            stage_bytes={"prefill": total, "decode": total},
            distribution=dist,
        )
    ]


def _kv_tp_share(ctx: LedgerContext) -> Fraction:
    arch = ctx.arch
    tp = ctx.tp
    if tp == 1:
        return Fraction(1)
    engine = (ctx.spec.runtime.engine or "").lower()
    if arch.mla is not None:
        if engine in LATENT_CACHE_ENGINES:
            return Fraction(1)
        return Fraction(1, tp)
    heads_per_rank = max(Fraction(arch.num_kv_heads, tp), Fraction(1))
    return heads_per_rank / arch.num_kv_heads
