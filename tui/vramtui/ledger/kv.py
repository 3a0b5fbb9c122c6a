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
    return [per] * arch.num_layers, why


def _tokens_held(tokens: int, layer_kind: str, window: int | None, block: int) -> int:
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
