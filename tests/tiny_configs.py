"""Tiny configs of real models: the published config's structure keys, tiny sizes.

`tiny(config)` keeps every key that selects a structure (model_type, multi_query,
new_decoder_architecture, parallel_attn, bias flags, tied embeddings, layer types...) and
shrinks the sizes: hidden 64, 2 layers, 4 heads of 16, 2 KV heads (1 where the model has one,
4 where it has as many as query heads), vocabulary 128, 4 experts of which 2 per token.
"""

from __future__ import annotations

SIZES = {
    "hidden_size": 64,
    "n_embd": 64,
    "d_model": 64,
    "num_hidden_layers": 2,
    "n_layer": 2,
    "num_layers": 2,
    "num_attention_heads": 4,
    "n_head": 4,
    "intermediate_size": 128,
    "ffn_hidden_size": 128,
    "n_inner": 128,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "vocab_size": 128,
    "max_position_embeddings": 512,
    "n_positions": 512,
    "head_dim": 16,
    "kv_lora_rank": 32,
    "q_lora_rank": 48,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts": 4,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
    "sliding_window": 16,
    "query_pre_attn_scalar": 16,
}


def tiny(config: dict) -> dict:
    c = dict(config)
    for k, v in SIZES.items():
        if k in c and c[k] is not None:
            c[k] = v
    heads = config.get("num_attention_heads") or config.get("n_head")
    for k in ("num_key_value_heads", "num_kv_heads", "multi_query_group_num"):
        if k in c and c[k] is not None:
            c[k] = 1 if c[k] == 1 else (4 if c[k] == heads else 2)
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if isinstance(c.get(k), int):
            c[k] = 1
        elif isinstance(c.get(k), list):
            c[k] = [1]
    for k in ("num_experts_per_tok", "moe_topk", "num_experts_per_token"):
        if c.get(k):
            c[k] = 2
    if c.get("rotary_dim"):
        c["rotary_dim"] = 8
    if isinstance(c.get("layer_types"), list):
        c["layer_types"] = c["layer_types"][:2]
    c.pop("quantization_config", None)
    c.pop("rope_scaling", None)
    rope = c.get("rope_parameters")
    if isinstance(rope, dict) and "original_max_position_embeddings" in rope:
        c["rope_parameters"] = {"rope_type": "default", "rope_theta": rope.get("rope_theta", 1e4)}
    return c
