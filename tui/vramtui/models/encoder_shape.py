"""The facts the ledger needs to size encoder-only and encoder-decoder families.

Read from the transformers config object (its defaults applied) when a family's structure is
derived on the meta device (`vramtui.models.derive`), and cached with it. Only the families
whose layers the ledger's encoder formulas follow get a shape: BERT and its copies (post-norm
LayerNorm, GELU MLP), T5 (pre-norm RMSNorm, ReLU or gated-GELU MLP, a relative position bias)
and Whisper (pre-norm LayerNorm, GELU MLP, a convolution stem over a fixed 30 s of audio).
Any other encoder family has none, and the ledger says it is not itemised.
"""

from __future__ import annotations

from dataclasses import dataclass

# model_type -> layer style the ledger's formulas follow
BERT_STYLE = ("bert", "roberta", "xlm-roberta", "camembert")
T5_STYLE = ("t5", "mt5", "umt5")
WHISPER_STYLE = ("whisper",)


@dataclass(frozen=True)
class EncoderShape:
    style: str  # "bert" | "t5" | "whisper"
    kind: str  # "encoder" | "encoder-decoder"
    hidden: int
    encoder_layers: int
    decoder_layers: int  # 0 for encoder-only
    encoder_heads: int
    decoder_heads: int
    head_dim: int  # T5's d_kv: heads x head_dim may differ from hidden
    encoder_ffn: int
    decoder_ffn: int
    gated: bool  # T5 v1.1 / mT5 gated-GELU (wi_0, wi_1, wo)
    vocab: int
    # BERT: max_position_embeddings (absolute positions: the longest input); Whisper:
    # max_source_positions (the encoder's fixed length after the conv stem); T5: 0 (relative)
    max_input: int
    # Whisper: max_target_positions (the decoder's learned position table); else 0
    max_target: int
    mel_bins: int  # Whisper's input features per frame; else 0
    hidden_dropout: float
    attention_dropout: float
    head: str  # "mlm" (logits at every position) | "lm" (seq2seq LM head) | "none"

    @property
    def encoder_inner(self) -> int:
        return self.encoder_heads * self.head_dim

    @property
    def decoder_inner(self) -> int:
        return self.decoder_heads * self.head_dim

    @property
    def audio_frames(self) -> int:
        """Whisper's mel frames before the stride-2 convolution (30 s at 100 frames/s)."""
        return 2 * self.max_input if self.style == "whisper" else 0


def _int(cfg, *names: str, default: int = 0) -> int:
    for n in names:
        v = getattr(cfg, n, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return default


def _float(cfg, *names: str) -> float:
    for n in names:
        v = getattr(cfg, n, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return 0.0


def _head_of(model_class: str) -> str:
    if "MaskedLM" in model_class or "PreTraining" in model_class:
        return "mlm"
    if "ConditionalGeneration" in model_class or "Seq2SeqLM" in model_class:
        return "lm"
    return "none"


def encoder_shape_of(hf_config, kind: str, model_class: str) -> EncoderShape | None:
    """The shape of an encoder family the ledger models, or None."""
    model_type = str(getattr(hf_config, "model_type", ""))
    head = _head_of(model_class)
    if model_type in BERT_STYLE and kind == "encoder":
        hidden = _int(hf_config, "hidden_size")
        heads = _int(hf_config, "num_attention_heads")
        if not hidden or not heads or hidden % heads:
            return None
        return EncoderShape(
            style="bert",
            kind=kind,
            hidden=hidden,
            encoder_layers=_int(hf_config, "num_hidden_layers"),
            decoder_layers=0,
            encoder_heads=heads,
            decoder_heads=0,
            head_dim=hidden // heads,
            encoder_ffn=_int(hf_config, "intermediate_size"),
            decoder_ffn=0,
            gated=False,
            vocab=_int(hf_config, "vocab_size"),
            max_input=_int(hf_config, "max_position_embeddings"),
            max_target=0,
            mel_bins=0,
            hidden_dropout=_float(hf_config, "hidden_dropout_prob"),
            attention_dropout=_float(hf_config, "attention_probs_dropout_prob"),
            head=head,
        )
    if model_type in T5_STYLE and kind == "encoder-decoder":
        layers = _int(hf_config, "num_layers")
        ff = _int(hf_config, "d_ff")
        dropout = _float(hf_config, "dropout_rate")
        return EncoderShape(
            style="t5",
            kind=kind,
            hidden=_int(hf_config, "d_model"),
            encoder_layers=layers,
            decoder_layers=_int(hf_config, "num_decoder_layers", default=layers) or layers,
            encoder_heads=_int(hf_config, "num_heads"),
            decoder_heads=_int(hf_config, "num_heads"),
            head_dim=_int(hf_config, "d_kv"),
            encoder_ffn=ff,
            decoder_ffn=ff,
            gated=bool(getattr(hf_config, "is_gated_act", False)),
            vocab=_int(hf_config, "vocab_size"),
            max_input=0,
            max_target=0,
            mel_bins=0,
            hidden_dropout=dropout,
            attention_dropout=dropout,
            head=head,
        )
    if model_type in WHISPER_STYLE and kind == "encoder-decoder":
        hidden = _int(hf_config, "d_model")
        dec_heads = _int(hf_config, "decoder_attention_heads")
        enc_heads = _int(hf_config, "encoder_attention_heads")
        if not hidden or not dec_heads or hidden % dec_heads or enc_heads != dec_heads:
            return None
        return EncoderShape(
            style="whisper",
            kind=kind,
            hidden=hidden,
            encoder_layers=_int(hf_config, "encoder_layers"),
            decoder_layers=_int(hf_config, "decoder_layers"),
            encoder_heads=enc_heads,
            decoder_heads=dec_heads,
            head_dim=hidden // dec_heads,
            encoder_ffn=_int(hf_config, "encoder_ffn_dim"),
            decoder_ffn=_int(hf_config, "decoder_ffn_dim"),
            gated=False,
            vocab=_int(hf_config, "vocab_size"),
            max_input=_int(hf_config, "max_source_positions"),
            max_target=_int(hf_config, "max_target_positions"),
            mel_bins=_int(hf_config, "num_mel_bins"),
            hidden_dropout=_float(hf_config, "dropout"),
            attention_dropout=_float(hf_config, "attention_dropout"),
            head=head,
        )
    return None
