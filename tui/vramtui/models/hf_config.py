"""Read an `Architecture` from a Hugging Face `config.json` dictionary.

The rules follow what `transformers` does with the same config when it builds the model:
key names, per-family defaults (taken from the `transformers` configuration classes, listed
in `FAMILY_DEFAULTS`), which layers use sliding-window attention and which MLPs are MoE.
A key that is required and has neither a value nor a documented family default raises
`ModelError` naming the key and the file: a missing key is never silently guessed.
"""

from __future__ import annotations

from typing import Any

from vramtui import limits
from vramtui.errors import ModelError
from vramtui.models.architecture import MLA, Architecture

# Keys of the top-level (multimodal) config that apply to its text model when the nested
# `text_config` does not repeat them.
_INHERITED_KEYS = ("tie_word_embeddings", "torch_dtype", "dtype", "quantization_config")

_DTYPES = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
}

# Defaults of the `transformers` configuration classes that published config.json files rely on
# (a key absent from the file takes this value when `transformers` loads it). Only families
# whose structure `vramtui.models.structure` knows are listed.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False},
    "mistral": {"tie_word_embeddings": False, "sliding_window": 4096},
    "mixtral": {"tie_word_embeddings": False, "sliding_window": None},
    "qwen2": {"tie_word_embeddings": False, "use_sliding_window": False, "max_window_layers": 28},
    "qwen2_moe": {
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "max_window_layers": 28,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "qkv_bias": True,
        "shared_expert_intermediate_size": 5632,
    },
    "qwen3": {
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "max_window_layers": 28,
        "attention_bias": False,
    },
    "qwen3_moe": {
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "max_window_layers": 28,
        "attention_bias": False,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    },
    "gemma2": {
        "tie_word_embeddings": True,
        "attention_bias": False,
        "head_dim": 256,
        "sliding_window": 4096,
    },
    "gemma3_text": {
        "tie_word_embeddings": True,
        "attention_bias": False,
        "vocab_size": 262_208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
    "phi3": {"tie_word_embeddings": False, "sliding_window": None},
    "falcon": {
        "tie_word_embeddings": True,
        "multi_query": True,
        "new_decoder_architecture": False,
        "parallel_attn": True,
        "bias": False,
        "alibi": False,
        "max_position_embeddings": 2048,
    },
    "deepseek_v2": {
        "tie_word_embeddings": False,
        "first_k_dense_replace": 0,
        "moe_layer_freq": 1,
        "n_routed_experts": 64,
        "n_shared_experts": 2,
        "q_lora_rank": 1536,
        "attention_bias": False,
        "mlp_bias": False,
    },
    "deepseek_v3": {
        "tie_word_embeddings": False,
        "first_k_dense_replace": 3,
        "moe_layer_freq": 1,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "q_lora_rank": 1536,
        "attention_bias": False,
    },
    "gpt_oss": {"tie_word_embeddings": False, "attention_bias": True, "sliding_window": 128},
}

# The range vramtui accepts for every integer key it reads (vramtui.limits): a wrong type, a
# negative or an absurd value is one clear ModelError naming the key, never a traceback or a hang.
_LIMITS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, limits.MAX_LAYERS),
    "hidden_size": (1, limits.MAX_HIDDEN),
    "num_attention_heads": (1, limits.MAX_HEADS),
    "num_key_value_heads": (1, limits.MAX_HEADS),
    "num_kv_heads": (1, limits.MAX_HEADS),
    "n_head_kv": (1, limits.MAX_HEADS),
    "vocab_size": (0, limits.MAX_VOCAB),
    "head_dim": (1, limits.MAX_HIDDEN),
    "intermediate_size": (0, limits.MAX_HIDDEN),
    "ffn_hidden_size": (0, limits.MAX_HIDDEN),
    "moe_intermediate_size": (0, limits.MAX_HIDDEN),
    "shared_expert_intermediate_size": (0, limits.MAX_HIDDEN),
    "max_position_embeddings": (0, limits.MAX_POSITIONS),
    "sliding_window": (1, limits.MAX_POSITIONS),
    "sliding_window_pattern": (1, limits.MAX_LAYERS),
    "max_window_layers": (0, limits.MAX_LAYERS),
    "first_k_dense_replace": (0, limits.MAX_LAYERS),
    "moe_layer_freq": (0, limits.MAX_LAYERS),
    "decoder_sparse_step": (0, limits.MAX_LAYERS),
    "n_routed_experts": (0, limits.MAX_EXPERTS),
    "num_experts": (0, limits.MAX_EXPERTS),
    "num_local_experts": (0, limits.MAX_EXPERTS),
    "num_experts_per_tok": (0, limits.MAX_EXPERTS),
    "experts_per_token": (0, limits.MAX_EXPERTS),
    "n_shared_experts": (0, limits.MAX_EXPERTS),
    "kv_lora_rank": (0, limits.MAX_HIDDEN),
    "q_lora_rank": (0, limits.MAX_HIDDEN),
    "qk_rope_head_dim": (0, limits.MAX_HIDDEN),
    "qk_nope_head_dim": (0, limits.MAX_HIDDEN),
    "v_head_dim": (0, limits.MAX_HIDDEN),
}

# Sizes that define the model: a config lacking one is refused rather than given the default
# of transformers' configuration class (the shape of a different, reference model).
_SHAPE_KEYS = frozenset(
    {
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "intermediate_size",
        "vocab_size",
        "moe_intermediate_size",
        "num_experts",
        "num_local_experts",
        "num_experts_per_tok",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
    }
)

# Alternative key names used by some families' config.json files (old Falcon checkpoints).
_KEY_ALIASES = {
    "num_hidden_layers": ("n_layer", "num_layers"),
    "num_attention_heads": ("n_head",),
    "hidden_size": ("n_embed", "d_model"),
}


class _Reader:
    """Looks keys up in one text config, with the family's defaults and a clear error."""

    def __init__(self, config: dict, model_type: str, source: str) -> None:
        self.config = config
        self.model_type = model_type
        self.source = source
        self.defaults = FAMILY_DEFAULTS.get(model_type, {})
        self.applied: list[str] = []  # transformers defaults taken for absent keys

    def has(self, key: str) -> bool:
        return key in self.config or key in self.defaults

    def get(self, key: str, default: Any = None) -> Any:
        """Optional key: the file's value, else the family default, else `default`."""
        if key in self.config:
            return self.config[key]
        return self.defaults.get(key, default)

    def require(self, key: str) -> Any:
        if key in self.config and self.config[key] is not None:
            return self.config[key]
        for alias in _KEY_ALIASES.get(key, ()):
            if self.config.get(alias) is not None:
                return self.config[alias]
        if self.defaults.get(key) is not None:
            return self.defaults[key]
        fallback = None if key in _SHAPE_KEYS else transformers_default(self.model_type, key)
        if fallback is not None:
            self.applied.append(
                f"the config lacks '{key}': transformers' default {fallback!r} for "
                f"model_type '{self.model_type}' is applied"
            )
            return fallback
        raise ModelError(
            f"config of {self.source} lacks required key '{key}' "
            f"(model_type '{self.model_type}'); add it to the config or pass --params N"
        )

    def require_int(self, key: str) -> int:
        return self.checked_int(key, self.require(key))

    def get_int(self, key: str, default: int | None = None) -> int | None:
        """Optional integer key (None or absent: `default`), checked like a required one."""
        value = self.get(key)
        return default if value is None else self.checked_int(key, value)

    def checked_int(self, key: str, value: Any) -> int:
        """`value` of `key` as an integer within vramtui's limit for it, else one ModelError."""
        low, high = _LIMITS.get(key, (0, limits.MAX_HIDDEN))
        fix = "fix the config.json, or pass --params N to size by parameter count"
        if isinstance(value, float) and value.is_integer() and low <= value <= high:
            return int(value)  # 4096.0: a whole number written as a float
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelError(
                f"config of {self.source}: key '{key}' must be an integer from {low} to "
                f"{high:,}, got {_shown(value)}; {fix}"
            )
        if value < low:
            raise ModelError(
                f"config of {self.source}: key '{key}' must be at least {low}, got {value}; {fix}"
            )
        if value > high:
            raise ModelError(
                f"config of {self.source}: key '{key}' = {limits.show_number(value)} is above "
                f"vramtui's limit of {high:,}; {fix}"
            )
        return value

    def require_bool(self, key: str) -> bool:
        value = self.require(key)
        if not isinstance(value, bool):
            raise ModelError(
                f"config of {self.source}: key '{key}' must be true or false, got {value!r}"
            )
        return value


def transformers_default(model_type: str, key: str) -> Any:
    """The default transformers' configuration class of `model_type` gives `key`, or None.

    Asked only when a config lacks a key vramtui has no documented default for, so a complete
    config (every catalogue entry) never imports transformers.
    """
    try:
        import transformers

        cls = transformers.CONFIG_MAPPING[model_type]
        value = getattr(cls(), key, None)
    except Exception:  # noqa: BLE001 - not installed, unknown family, a class that will not build
        return None
    return value if isinstance(value, (bool, int, float, str)) else None


def _shown(value: Any) -> str:
    """A config value for a message: short, one line, its JSON type visible."""
    if isinstance(value, float):
        return f"{value:.6g}"
    text = repr(value)
    if isinstance(value, int):
        text = limits.show_number(value)
    return text if len(text) <= 40 else text[:37] + "..."


def text_config_of(config: dict, source: str = "config") -> dict:
    """The text model's config: `text_config` when nested, with the top-level keys it inherits."""
    if not isinstance(config, dict):
        raise ModelError(f"config of {source} is not a JSON object")
    nested = config.get("text_config")
    if nested is None:
        return dict(config)
    if not isinstance(nested, dict):
        raise ModelError(f"config of {source}: 'text_config' is not an object")
    text = dict(nested)
    for key in _INHERITED_KEYS:
        if key not in text and key in config:
            text[key] = config[key]
    if "model_type" not in text:
        raise ModelError(f"config of {source} lacks required key 'text_config.model_type'")
    return text


def _dtype_of(text: dict, source: str) -> str:
    raw = text.get("torch_dtype", text.get("dtype"))
    if raw is None:
        # transformers' own default when a config names no dtype.
        return "fp32"
    name = str(raw).removeprefix("torch.")
    if name not in _DTYPES:
        raise ModelError(
            f"config of {source}: unsupported torch_dtype {raw!r} (expected bfloat16, float16 or float32)"
        )
    return _DTYPES[name]


def _layer_attention(r: _Reader, num_layers: int) -> tuple[tuple[str, ...], int | None]:
    """Per-layer "full"/"sliding" and the sliding window (None when no layer slides)."""
    mt = r.model_type
    layer_types = r.config.get("layer_types")
    window = r.get_int("sliding_window")
    if layer_types is not None:
        mapping = {"full_attention": "full", "sliding_attention": "sliding"}
        if (
            not isinstance(layer_types, list)
            or len(layer_types) != num_layers
            or any(not isinstance(t, str) or t not in mapping for t in layer_types)
        ):
            raise ModelError(
                f"config of {r.source}: 'layer_types' must list full_attention/sliding_attention "
                f"for each of the {num_layers} layers"
            )
        kinds = tuple(mapping[t] for t in layer_types)
    elif mt in ("gemma2", "gpt_oss"):
        # transformers: sliding on layers 0, 2, 4, ... ((i + 1) % 2 != 0).
        kinds = tuple("sliding" if (i + 1) % 2 else "full" for i in range(num_layers))
    elif mt == "gemma3_text":
        pattern = r.get_int("sliding_window_pattern", 6)
        kinds = tuple("sliding" if (i + 1) % pattern else "full" for i in range(num_layers))
    elif mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        use = bool(r.get("use_sliding_window", False)) and window is not None
        first = r.get_int("max_window_layers", num_layers)
        kinds = tuple("sliding" if use and i >= first else "full" for i in range(num_layers))
    else:
        # Mistral, Mixtral, Phi-3 and llama-like families: one window for every layer, if any.
        kinds = tuple("sliding" if window else "full" for _ in range(num_layers))
    if "sliding" not in kinds:
        return kinds, None
    if not isinstance(window, int) or window <= 0:
        raise ModelError(
            f"config of {r.source}: sliding-window layers but no positive 'sliding_window'"
        )
    return kinds, window


def _moe(r: _Reader, num_layers: int) -> tuple[int, int, int, int, tuple[bool, ...]]:
    """(num_experts, per_tok, moe_intermediate, shared_intermediate, moe_layers)."""
    mt = r.model_type
    if mt in ("deepseek_v2", "deepseek_v3"):
        experts = r.get_int("n_routed_experts")
        if not experts:
            return 0, 0, 0, 0, tuple(False for _ in range(num_layers))
        first_dense = r.get_int("first_k_dense_replace", 0)
        freq = r.get_int("moe_layer_freq", 1) or 1
        layers = tuple(i >= first_dense and i % freq == 0 for i in range(num_layers))
        moe_i = r.require_int("moe_intermediate_size")
        shared = (r.get_int("n_shared_experts") or 0) * moe_i
        return experts, r.require_int("num_experts_per_tok"), moe_i, shared, layers
    if mt in ("qwen2_moe", "qwen3_moe"):
        experts = r.require_int("num_experts")
        step = r.get_int("decoder_sparse_step", 1) or 1
        mlp_only_raw = r.get("mlp_only_layers") or []
        if not isinstance(mlp_only_raw, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in mlp_only_raw
        ):
            raise ModelError(
                f"config of {r.source}: key 'mlp_only_layers' must be a list of layer numbers, "
                f"got {_shown(mlp_only_raw)}; fix the config.json"
            )
        mlp_only = set(mlp_only_raw)
        layers = tuple(
            i not in mlp_only and experts > 0 and (i + 1) % step == 0 for i in range(num_layers)
        )
        shared = r.get_int("shared_expert_intermediate_size", 0) if mt == "qwen2_moe" else 0
        return (
            experts,
            r.require_int("num_experts_per_tok"),
            r.require_int("moe_intermediate_size"),
            shared,
            layers,
        )
    if mt in ("mixtral", "gpt_oss") or "num_local_experts" in r.config:
        experts = r.require_int("num_local_experts")
        per_tok = r.get_int("num_experts_per_tok", r.get_int("experts_per_token"))
        if per_tok is None:
            r.require("num_experts_per_tok")
        return (
            experts,
            per_tok,
            r.require_int("intermediate_size"),
            0,
            tuple(True for _ in range(num_layers)),
        )
    return 0, 0, 0, 0, tuple(False for _ in range(num_layers))


def _kv_heads(r: _Reader, heads: int) -> int:
    if r.model_type == "falcon":
        if r.get("new_decoder_architecture"):
            return r.get_int("num_kv_heads") or r.get_int("n_head_kv") or heads
        if r.get("multi_query"):
            return 1
        return r.get_int("num_kv_heads") or heads
    if r.model_type in ("deepseek_v2", "deepseek_v3"):
        # MLA: every head has its own key and value (decompressed from the shared latent).
        return r.get_int("num_key_value_heads") or heads
    return r.get_int("num_key_value_heads", heads)


def architecture_from_hf_config(
    config: dict, model_id: str, source: str, *, whole_model: bool = False
) -> Architecture:
    """An `Architecture` from a Hugging Face config.json dict (nested `text_config` allowed).

    A text model_type in `structure.HAND_MODELLED` is read by the rules below; any other is
    derived from transformers on the meta device (`vramtui.models.derive`) and labelled so.
    A multimodal config whose text model is hand-modelled sizes the text model only (and says
    so), unless `whole_model` asks for the whole model, derived.
    """
    from vramtui.models.structure import HAND_MODELLED

    text = text_config_of(config, source)
    model_type = text.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelError(f"config of {source} lacks required key 'model_type'")
    top_type = config.get("model_type")
    multimodal = "text_config" in config and top_type != model_type
    whole_failed = ""
    if model_type not in HAND_MODELLED or (multimodal and whole_model):
        from vramtui.models.derived_arch import derived_architecture

        try:
            return derived_architecture(config, model_id, source)
        except ModelError as exc:
            if model_type not in HAND_MODELLED:
                raise
            whole_failed = f" (the whole model could not be derived: {exc})"
    arch = _hand_modelled(text, model_type, model_id, source)
    if multimodal:
        towers = [
            str((config.get(k) or {}).get("model_type") or k.removesuffix("_config"))
            for k in ("vision_config", "audio_config")
            if isinstance(config.get(k), dict)
        ]
        what = " and ".join(towers) or "non-text"
        from dataclasses import replace

        arch = replace(
            arch,
            ledger_notes=(
                *arch.ledger_notes,
                (
                    f"{top_type}: only the text model ({model_type}) is counted; the {what} "
                    f"encoder's weights and activations are not itemised{whole_failed}"
                ),
            ),
        )
    return arch


def _hand_modelled(text: dict, model_type: str, model_id: str, source: str) -> Architecture:
    r = _Reader(text, model_type, source)

    num_layers = r.require_int("num_hidden_layers")
    hidden = r.require_int("hidden_size")
    heads = r.require_int("num_attention_heads")
    vocab = r.require_int("vocab_size")
    if heads == 0 or num_layers == 0 or hidden == 0:
        raise ModelError(
            f"config of {source}: hidden_size, num_hidden_layers and num_attention_heads must be positive"
        )

    head_dim = r.get_int("head_dim")
    if model_type == "falcon" or head_dim is None:
        head_dim = max(1, hidden // heads)
    if model_type == "falcon":
        intermediate = r.get_int("ffn_hidden_size") or 4 * hidden
    else:
        intermediate = r.require_int("intermediate_size")

    tie = r.require_bool("tie_word_embeddings")
    layer_attention, window = _layer_attention(r, num_layers)
    experts, per_tok, moe_i, shared_i, moe_layers = _moe(r, num_layers)
    # "dense MLP width": 0 when every layer's MLP is MoE (Mixtral and gpt-oss call the expert
    # width `intermediate_size`; Qwen3-MoE keeps an unused `intermediate_size` key).
    dense_intermediate = 0 if experts and all(moe_layers) else intermediate

    mla = None
    if r.get("kv_lora_rank") is not None:
        mla = MLA(
            kv_lora_rank=r.require_int("kv_lora_rank"),
            qk_rope_head_dim=r.require_int("qk_rope_head_dim"),
            qk_nope_head_dim=r.require_int("qk_nope_head_dim"),
            v_head_dim=r.require_int("v_head_dim"),
            q_lora_rank=r.get_int("q_lora_rank"),
        )
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim

    max_pos = r.get_int("max_position_embeddings")
    if max_pos is None:
        max_pos = r.require_int("max_position_embeddings")

    quant = text.get("quantization_config")
    return Architecture(
        model_id=model_id,
        model_type=model_type,
        num_layers=num_layers,
        hidden_size=hidden,
        intermediate_size=dense_intermediate,
        num_attention_heads=heads,
        num_kv_heads=_kv_heads(r, heads),
        head_dim=int(head_dim),
        vocab_size=vocab,
        tie_word_embeddings=tie,
        default_dtype=_dtype_of(text, source),
        max_position_embeddings=int(max_pos),
        gated_mlp=model_type != "falcon",
        num_experts=experts,
        num_experts_per_tok=per_tok,
        moe_intermediate_size=moe_i,
        shared_expert_intermediate_size=shared_i,
        moe_layers=moe_layers,
        layer_attention=layer_attention,
        sliding_window=window,
        mla=mla,
        quantization_config=dict(quant) if isinstance(quant, dict) else None,
        source=source,
        config=text,
        ledger_notes=tuple(dict.fromkeys(r.applied)),
    )
