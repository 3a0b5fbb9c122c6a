"""Every parameter-holding module of a causal LM, as `transformers` 5.x builds it.

Pure arithmetic over an `Architecture` (no torch): one `ModuleShape` per kind of module,
with its count over the whole model. Leaf names are the Hugging Face ones (`q_proj`,
`gate_up_proj`, `query_key_value`, ...) so LoRA target lists match them. The family quirks
below were checked by building each family on the meta device and reading
`named_parameters()` (tests/test_models_catalog.py keeps checking it).

Only the families in `HAND_MODELLED` are modelled here. Every other `model_type` is derived
from transformers on the meta device (`vramtui.models.derive`) and labelled so: no family is
itemised under another family's formulas.
"""

from __future__ import annotations

from vramtui.models.architecture import Architecture, ModuleShape

# The model_types whose structure this module writes out (each checked against transformers by
# tests/test_models_catalog.py and tests/test_model_families.py).
HAND_MODELLED = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "gemma2",
        "gemma3_text",
        "phi3",
        "falcon",
        "deepseek_v2",
        "deepseek_v3",
        "gpt_oss",
    }
)

_QK_NORM_FAMILIES = ("qwen3", "qwen3_moe", "gemma3_text")
_FOUR_NORM_FAMILIES = ("gemma2", "gemma3_text")


def _linear(
    name: str, group: str, in_features: int, out_features: int, count: int, bias: bool = False
) -> ModuleShape:
    return ModuleShape(
        name=name,
        kind="linear",
        group=group,
        params=in_features * out_features + (out_features if bias else 0),
        count=count,
        in_features=in_features,
        out_features=out_features,
        has_bias=bias,
        is_nn_linear=True,
    )


def _norm(name: str, width: int, count: int, bias: bool = False) -> ModuleShape:
    return ModuleShape(
        name=name,
        kind="norm",
        group="norm",
        params=width * (2 if bias else 1),
        count=count,
        in_features=width,
        out_features=width,
        has_bias=bias,
    )


def _fused_experts(
    name: str, in_features: int, out_features: int, count: int, bias: bool = False
) -> ModuleShape:
    """One expert's matrix of a fused 3-D expert parameter (not an nn.Linear)."""
    return ModuleShape(
        name=name,
        kind="linear",
        group="experts",
        params=in_features * out_features + (out_features if bias else 0),
        count=count,
        in_features=in_features,
        out_features=out_features,
        has_bias=bias,
        is_nn_linear=False,
    )


def _cfg_bool(arch: Architecture, key: str, default: bool) -> bool:
    value = arch.config.get(key, default)
    return default if value is None else bool(value)


def _attention(arch: Architecture, n: int) -> list[ModuleShape]:
    h, mt = arch.hidden_size, arch.model_type
    q_out = arch.num_attention_heads * arch.head_dim
    kv_out = arch.num_kv_heads * arch.head_dim
    if mt == "phi3":
        return [
            _linear("qkv_proj", "attention", h, q_out + 2 * kv_out, n),
            _linear("o_proj", "attention", q_out, h, n),
        ]
    if mt in ("qwen2", "qwen2_moe"):
        qkv_bias = True if mt == "qwen2" else _cfg_bool(arch, "qkv_bias", True)
        o_bias = False
    elif mt in ("mistral", "mixtral"):
        qkv_bias = o_bias = False
    elif mt == "gpt_oss":
        qkv_bias = o_bias = _cfg_bool(arch, "attention_bias", True)
    else:
        qkv_bias = o_bias = _cfg_bool(arch, "attention_bias", False)
    out = [
        _linear("q_proj", "attention", h, q_out, n, qkv_bias),
        _linear("k_proj", "attention", h, kv_out, n, qkv_bias),
        _linear("v_proj", "attention", h, kv_out, n, qkv_bias),
        _linear("o_proj", "attention", q_out, h, n, o_bias),
    ]
    if mt in _QK_NORM_FAMILIES:
        out += [_norm("q_norm", arch.head_dim, n), _norm("k_norm", arch.head_dim, n)]
    if mt == "gpt_oss":
        out.append(
            ModuleShape(
                name="sinks",
                kind="other",
                group="attention",
                params=arch.num_attention_heads,
                count=n,
            )
        )
    return out


def _mla_attention(arch: Architecture, n: int) -> list[ModuleShape]:
    mla = arch.mla
    assert mla is not None
    h, heads = arch.hidden_size, arch.num_attention_heads
    bias = _cfg_bool(arch, "attention_bias", False)
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank is None:
        out = [_linear("q_proj", "attention", h, heads * qk_head, n)]
    else:
        out = [
            _linear("q_a_proj", "attention", h, mla.q_lora_rank, n, bias),
            _norm("q_a_layernorm", mla.q_lora_rank, n),
            _linear("q_b_proj", "attention", mla.q_lora_rank, heads * qk_head, n),
        ]
    return out + [
        _linear(
            "kv_a_proj_with_mqa", "attention", h, mla.kv_lora_rank + mla.qk_rope_head_dim, n, bias
        ),
        _norm("kv_a_layernorm", mla.kv_lora_rank, n),
        _linear(
            "kv_b_proj",
            "attention",
            mla.kv_lora_rank,
            heads * (mla.qk_nope_head_dim + mla.v_head_dim),
            n,
        ),
        _linear("o_proj", "attention", heads * mla.v_head_dim, h, n, bias),
    ]


def _dense_mlp(arch: Architecture, width: int, n: int, group: str = "mlp") -> list[ModuleShape]:
    h = arch.hidden_size
    if arch.model_type == "phi3":
        return [
            _linear("gate_up_proj", group, h, 2 * width, n),
            _linear("down_proj", group, width, h, n),
        ]
    bias = arch.model_type in ("llama", "deepseek_v2") and _cfg_bool(arch, "mlp_bias", False)
    return [
        _linear("gate_proj", group, h, width, n, bias),
        _linear("up_proj", group, h, width, n, bias),
        _linear("down_proj", group, width, h, n, bias),
    ]


def _moe_mlp(arch: Architecture, n: int) -> list[ModuleShape]:
    h, e, width = arch.hidden_size, arch.num_experts, arch.moe_intermediate_size
    mt = arch.model_type
    if mt == "gpt_oss":
        return [
            ModuleShape(
                name="router",
                kind="linear",
                group="router",
                params=e * h + e,
                count=n,
                in_features=h,
                out_features=e,
                has_bias=True,
            ),
            _fused_experts("gate_up_proj", h, 2 * width, e * n, bias=True),
            _fused_experts("down_proj", width, h, e * n, bias=True),
        ]
    out = [
        # The router is its own module (…TopKRouter) holding a weight, not an nn.Linear.
        ModuleShape(
            name="gate",
            kind="linear",
            group="router",
            params=e * h,
            count=n,
            in_features=h,
            out_features=e,
        ),
        _fused_experts("gate_up_proj", h, 2 * width, e * n),
        _fused_experts("down_proj", width, h, e * n),
    ]
    if arch.shared_expert_intermediate_size:
        out += _dense_mlp(arch, arch.shared_expert_intermediate_size, n)
        if mt == "qwen2_moe":
            out.append(_linear("shared_expert_gate", "router", h, 1, n))
    return out


def _falcon(arch: Architecture) -> list[ModuleShape]:
    cfg, h, n = arch.config, arch.hidden_size, arch.num_layers
    bias = _cfg_bool(arch, "bias", False)
    new_arch = _cfg_bool(arch, "new_decoder_architecture", False)
    hd = h // arch.num_attention_heads
    if new_arch:
        qkv_out = (2 * arch.num_kv_heads + arch.num_attention_heads) * hd
    elif _cfg_bool(arch, "multi_query", True):
        qkv_out = h + 2 * hd
    else:
        qkv_out = 3 * h
    ffn = arch.intermediate_size
    out = [
        ModuleShape(
            name="word_embeddings",
            kind="embedding",
            group="embedding",
            params=arch.vocab_size * h,
            count=1,
            in_features=arch.vocab_size,
            out_features=h,
        ),
        _linear("query_key_value", "attention", h, qkv_out, n, bias),
        _linear("dense", "attention", h, h, n, bias),
        _linear("dense_h_to_4h", "mlp", h, ffn, n, bias),
        _linear("dense_4h_to_h", "mlp", ffn, h, n, bias),
    ]
    ln_parallel = cfg.get("num_ln_in_parallel_attn")
    if ln_parallel is None and new_arch:
        ln_parallel = 2
    if not _cfg_bool(arch, "parallel_attn", True):
        out += [
            _norm("input_layernorm", h, n, bias=True),
            _norm("post_attention_layernorm", h, n, bias=True),
        ]
    elif ln_parallel == 2:
        out += [_norm("ln_attn", h, n, bias=True), _norm("ln_mlp", h, n, bias=True)]
    else:
        out.append(_norm("input_layernorm", h, n, bias=True))
    out.append(_norm("ln_f", h, 1, bias=True))
    if not arch.tie_word_embeddings:
        out.append(_linear("lm_head", "lm_head", h, arch.vocab_size, 1))
    return out


def modules_of(arch: Architecture) -> list[ModuleShape]:
    """Every parameter-holding module kind of `arch`, with its count in the whole model."""
    if arch.model_type not in HAND_MODELLED:
        raise ValueError(f"model_type {arch.model_type!r} is not hand-modelled")
    if arch.model_type == "falcon":
        return _falcon(arch)
    h, n = arch.hidden_size, arch.num_layers
    out = [
        ModuleShape(
            name="embed_tokens",
            kind="embedding",
            group="embedding",
            params=arch.vocab_size * h,
            count=1,
            in_features=arch.vocab_size,
            out_features=h,
        ),
    ]
    out += _mla_attention(arch, n) if arch.mla is not None else _attention(arch, n)

    moe_layers = sum(1 for m in arch.moe_layers if m) if arch.num_experts else 0
    dense_layers = n - moe_layers
    if dense_layers:
        out += _dense_mlp(arch, arch.intermediate_size, dense_layers)
    if moe_layers:
        out += _moe_mlp(arch, moe_layers)

    out += [_norm("input_layernorm", h, n), _norm("post_attention_layernorm", h, n)]
    if arch.model_type in _FOUR_NORM_FAMILIES:
        out += [_norm("pre_feedforward_layernorm", h, n), _norm("post_feedforward_layernorm", h, n)]
    out.append(_norm("norm", h, 1))
    if not arch.tie_word_embeddings:
        out.append(_linear("lm_head", "lm_head", h, arch.vocab_size, 1))
    return out
