"""An `Architecture` for a family vramtui does not hand-model, from its derived structure.

The structure comes from transformers on the meta device (`vramtui.models.derive`); this
module turns it into the facts the ledger reads and writes down, as sentences shown with every
estimate, how the structure was obtained and what the ledger cannot itemise for the family.
"""

from __future__ import annotations

from vramtui import limits
from vramtui.errors import ModelError
from vramtui.models.architecture import Architecture
from vramtui.models.hf_config import _DTYPES, _LIMITS, _Reader, text_config_of

# Config keys (and the aliases older families use) bounded before anything is built: an absurd
# value is one clear line, never a build that hangs.
_ALIAS_LIMITS = {
    "n_layer": _LIMITS["num_hidden_layers"],
    "num_layers": _LIMITS["num_hidden_layers"],
    "encoder_layers": _LIMITS["num_hidden_layers"],
    "decoder_layers": _LIMITS["num_hidden_layers"],
    "num_decoder_layers": _LIMITS["num_hidden_layers"],
    "n_embd": _LIMITS["hidden_size"],
    "n_embed": _LIMITS["hidden_size"],
    "d_model": _LIMITS["hidden_size"],
    "d_ff": _LIMITS["intermediate_size"],
    "n_inner": _LIMITS["intermediate_size"],
    "n_head": _LIMITS["num_attention_heads"],
    "encoder_attention_heads": _LIMITS["num_attention_heads"],
    "decoder_attention_heads": _LIMITS["num_attention_heads"],
    "n_positions": _LIMITS["max_position_embeddings"],
}

# Families whose attention and MLP read the same input in parallel (one residual add).
_PARALLEL_KEYS = ("use_parallel_residual", "parallel_attn", "parallel_residual")
_PARALLEL_FAMILIES = ("phi", "gptj", "cohere", "cohere2", "gpt_neox", "gpt_neox_japanese")


def _check_bounds(config: dict, source: str, depth: int = 0) -> None:
    reader = _Reader(config, str(config.get("model_type", "")), source)
    for key, value in config.items():
        if isinstance(value, dict) and depth < 3:
            _check_bounds(value, source, depth + 1)
            continue
        if value is None:
            continue
        if key in _LIMITS:
            reader.checked_int(key, value)
        elif key in _ALIAS_LIMITS and isinstance(value, int) and not isinstance(value, bool):
            low, high = _ALIAS_LIMITS[key]
            if not low <= value <= high:
                raise ModelError(
                    f"config of {source}: key '{key}' = {limits.show_number(value)} is outside "
                    f"{low} to {high:,}; fix the config.json, or pass --params N"
                )


def _parallel(config: dict, model_type: str) -> bool:
    if any(config.get(k) for k in _PARALLEL_KEYS):
        return True
    return model_type in _PARALLEL_FAMILIES and not any(
        config.get(k) is False for k in _PARALLEL_KEYS
    )


def derived_architecture(config: dict, model_id: str, source: str) -> Architecture:
    """The Architecture of a family not hand-modelled (torch/transformers on a cache miss)."""
    from vramtui.models.derive import derive_structure

    _check_bounds(config, source)
    text = text_config_of(config, source)
    d = derive_structure(config, source)
    a = d.attrs
    model_type = str(a["model_type"])
    layers = int(a["num_hidden_layers"]) or 1
    if layers > limits.MAX_LAYERS:
        raise ModelError(f"config of {source}: {layers} layers is above vramtui's limit")
    notes: list[str] = []
    activation_unknown = kv_unknown = ""
    if d.kind != "decoder" and d.encoder is not None:
        from vramtui.ledger.encoders import family_note

        notes.append(family_note(model_type, d.encoder))
    elif d.kind != "decoder":
        what = "an encoder-only" if d.kind == "encoder" else "an encoder-decoder"
        activation_unknown = (
            f"{model_type} is {what} model ({d.model_class}); the ledger's activation and "
            "logit formulas are those of decoder-only models and are not applied to it"
        )
        kv_unknown = f"{model_type} is {what} model: " + (
            "it keeps no KV cache between tokens"
            if d.kind == "encoder"
            else "its decoder's self- and cross-attention caches are not itemised"
        )
    elif not d.standard_decoder:
        activation_unknown = (
            f"the structure derived for {model_type} is not a standard decoder (attention or a "
            "state mixer plus an MLP in every layer, with known heads, KV heads and head_dim); "
            "the ledger's activation formulas are not applied to it"
        )
    else:
        say = (
            f"activation bytes use the decoder formula of the hand-modelled families (attention "
            f"+ MLP per layer); not checked against {model_type}'s own layers"
        )
        if _parallel(text, model_type):
            say += f", nor for {model_type}'s parallel attention+MLP"
        if d.state is not None or "none" in d.layer_kinds:
            say += "; its state-space / linear-attention layers are charged an attention layer's working set"
        notes.append(say)
    if d.kind == "decoder" and d.layer_kinds and all(k == "none" for k in d.layer_kinds):
        notes.append(f"{model_type} has no attention layer: it keeps no KV cache")
    if d.state is not None:
        notes.append(
            f"{d.state.layers} state-space / linear-attention layers keep a fixed-size state "
            "per sequence instead of a KV cache (itemised apart)"
        )
    notes += list(d.notes)

    raw_dtype = text.get("torch_dtype", text.get("dtype"))
    dtype = (
        _DTYPES.get(str(raw_dtype).removeprefix("torch."), a["dtype"]) if raw_dtype else a["dtype"]
    )
    kinds = d.layer_kinds if len(d.layer_kinds) == layers else ()
    moe = d.moe_layers if len(d.moe_layers) == layers else tuple(False for _ in range(layers))
    experts = int(a["num_experts"])
    shared = text.get("shared_expert_intermediate_size")
    if not isinstance(shared, int) or isinstance(shared, bool):
        n_shared = text.get("n_shared_experts")
        shared = (
            n_shared * int(a["moe_intermediate_size"])
            if isinstance(n_shared, int) and not isinstance(n_shared, bool)
            else 0
        )
    quant = text.get("quantization_config", config.get("quantization_config"))
    return Architecture(
        model_id=model_id,
        model_type=model_type,
        num_layers=layers,
        hidden_size=int(a["hidden_size"]),
        intermediate_size=0 if experts and all(moe) else int(a["intermediate_size"]),
        num_attention_heads=int(a["num_attention_heads"]),
        num_kv_heads=int(a["num_key_value_heads"]),
        head_dim=int(a["head_dim"]),
        vocab_size=int(a["vocab_size"]),
        tie_word_embeddings=bool(a["tie_word_embeddings"]),
        default_dtype=dtype,
        max_position_embeddings=int(a["max_position_embeddings"]),
        gated_mlp=d.gated_mlp,
        num_experts=experts,
        num_experts_per_tok=int(a["num_experts_per_tok"]),
        moe_intermediate_size=int(a["moe_intermediate_size"]),
        shared_expert_intermediate_size=int(shared) if experts else 0,
        moe_layers=moe,
        layer_attention=kinds,
        sliding_window=a["sliding_window"],
        quantization_config=dict(quant) if isinstance(quant, dict) else None,
        source=source,
        config=text,
        structure=d.label,
        ledger_notes=tuple(notes),
        activation_unknown=activation_unknown,
        kv_unknown=kv_unknown,
        state=d.state,
        derived=d,
    )
