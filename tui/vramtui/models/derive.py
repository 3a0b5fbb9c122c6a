"""Module shapes of a family vramtui does not hand-model, derived from `transformers` itself.

The model is built from its config on the meta device (no memory, no weights) and its
`named_modules()` are walked: `nn.Linear` -> linear, transformers' `Conv1D` (GPT-2) -> linear
with its transposed shape, `nn.Embedding` -> embedding, 1-D norm weights -> norm, fused 3-D expert
parameters -> experts, anything else holding parameters -> other. Leaf names stay the real ones
(`query_key_value`, `dense_h_to_4h`, `c_attn`...), so LoRA targets are checked against them.

The result is cached on disk (`vramtui.paths.cache_dir()/derived`), keyed by a hash of
the config and the installed transformers version, so a second run imports neither torch nor
transformers. torch and transformers are imported here only, and only on a cache miss.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vramtui.errors import ModelError
from vramtui.models.architecture import ModuleShape
from vramtui.models.encoder_shape import EncoderShape, encoder_shape_of

SCHEMA = 2  # bump when what is cached changes
MAX_CACHE_FILES = 512  # oldest entries go first past this many
MAX_CACHE_FILE_BYTES = 4 * 2**20  # a derived structure is a few KiB; a larger file is not ours
INSTALL_HINT = "pip install 'vramtui[dryrun]'"

# Keys of config.json that do not describe the structure (and that from_config must not see).
_DROPPED_KEYS = ("quantization_config", "auto_map", "_name_or_path", "transformers_version")


@dataclass(frozen=True)
class RecurrentState:
    """Fixed-size state a state-space / linear-attention layer keeps per sequence."""

    layers: int  # layers holding this state
    conv_elems: int  # per layer per sequence: the convolution window
    ssm_elems: int  # per layer per sequence: the SSM / recurrent state
    why: str  # how the two were worked out from the config


@dataclass(frozen=True)
class DerivedStructure:
    """What the meta-device build of one config gave (everything the ledger reads)."""

    transformers_version: str
    model_class: str
    modules: tuple[ModuleShape, ...]
    param_count: int
    kind: str  # "decoder" | "encoder" | "encoder-decoder"
    attrs: dict  # normalised text-model attributes (num_hidden_layers, hidden_size, ...)
    layer_kinds: tuple[str, ...]  # per decoder layer: "full" | "sliding" | "none" (no KV)
    moe_layers: tuple[bool, ...]
    gated_mlp: bool
    standard_decoder: bool  # attention/state mixer + MLP per layer, KV heads known
    state: RecurrentState | None = None
    notes: tuple[str, ...] = field(default=())
    # Encoder-only / encoder-decoder families the ledger's encoder formulas follow
    # (vramtui.models.encoder_shape); None for every other family.
    encoder: EncoderShape | None = None

    @property
    def label(self) -> str:
        return (
            f"derived from transformers {self.transformers_version} on the meta device "
            f"({self.model_class}), not hand-modelled"
        )


# ------------------------------------------------------------------------------- cache


def installed_transformers_version() -> str | None:
    """The installed transformers version, read from its metadata (no import), or None."""
    from importlib import metadata

    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def cache_key(config: dict, version: str) -> str:
    text = json.dumps(
        {"schema": SCHEMA, "transformers": version, "config": _clean(config)},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cache_dir() -> Path:
    from vramtui.paths import cache_dir

    return cache_dir() / "derived"


def _to_json(d: DerivedStructure) -> str:
    return json.dumps(asdict(d), sort_keys=True)


def _from_json(text: str) -> DerivedStructure:
    raw = json.loads(text)
    state = raw.pop("state")
    encoder = raw.pop("encoder", None)
    return DerivedStructure(
        **{
            **raw,
            "modules": tuple(ModuleShape(**m) for m in raw["modules"]),
            "layer_kinds": tuple(raw["layer_kinds"]),
            "moe_layers": tuple(raw["moe_layers"]),
            "notes": tuple(raw["notes"]),
        },
        state=RecurrentState(**state) if state else None,
        encoder=EncoderShape(**encoder) if encoder else None,
    )


def _read_cached(path: Path) -> DerivedStructure | None:
    try:
        if path.stat().st_size > MAX_CACHE_FILE_BYTES:
            return None
        return _from_json(path.read_text("utf-8"))
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent, unreadable or from another layout: derive again


def _write_cached(path: Path, derived: DerivedStructure) -> None:
    from vramtui.fsutil import atomic_write_text

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, _to_json(derived))
        entries = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in entries[: max(0, len(entries) - MAX_CACHE_FILES)]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a cache that cannot be written costs time, never the estimate


def derive_structure(config: dict, source: str) -> DerivedStructure:
    """The derived structure of `config` (the whole config.json dict), cached on disk."""
    version = installed_transformers_version()
    model_type = config.get("model_type")
    if version is None:
        raise ModelError(
            f"model_type '{model_type}' ({source}) is not hand-modelled by vramtui; "
            f"{INSTALL_HINT} derives its structure from transformers on the meta device, "
            "or pass --params N to size it by parameter count"
        )
    path = _cache_dir() / f"{cache_key(config, version)}.json"
    cached = _read_cached(path)
    if cached is not None:
        return cached
    derived = _derive(config, source)
    _write_cached(path, derived)
    return derived


# ------------------------------------------------------------------------------- derivation


def _clean(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in _DROPPED_KEYS}


def build_config(config: dict, source: str):
    """The transformers config object of `config` (its defaults and key aliases applied)."""
    try:
        import transformers
    except ImportError as exc:
        raise ModelError(
            f"model_type '{config.get('model_type')}' ({source}) is not hand-modelled by "
            f"vramtui and transformers cannot be imported ({exc}); {INSTALL_HINT} derives it, "
            "or pass --params N"
        ) from None
    kwargs = _clean(config)
    model_type = kwargs.pop("model_type", None)
    try:
        return transformers.AutoConfig.for_model(model_type, **kwargs)
    except Exception as exc:  # noqa: BLE001 - transformers' validators raise their own types
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelError(
            f"transformers {transformers.__version__} cannot read the config of {source} "
            f"(model_type '{model_type}'): {first[:200]}; upgrade transformers or pass --params N"
        ) from None


_AUTO_CLASSES = (
    "AutoModelForCausalLM",
    "AutoModelForImageTextToText",
    "AutoModelForSeq2SeqLM",
    "AutoModelForSpeechSeq2Seq",
    "AutoModelForMaskedLM",
    "AutoModel",
)


def model_class_for(config: dict, hf_config):
    """The class transformers builds for this config: its `architectures` entry when
    transformers has it, else the first auto class that maps the config."""
    import transformers

    for name in config.get("architectures") or ():
        cls = getattr(transformers, str(name), None) if isinstance(name, str) else None
        if cls is not None and hasattr(cls, "_from_config"):
            return cls
    for auto_name in _AUTO_CLASSES:
        auto = getattr(transformers, auto_name)
        if type(hf_config) in auto._model_mapping:
            return auto._model_mapping[type(hf_config)]
    raise ModelError(
        f"transformers {transformers.__version__} has no model class for model_type "
        f"'{hf_config.model_type}'; pass --params N"
    )


def build_on_meta(config: dict, source: str):
    """(model built on the meta device, its transformers config)."""
    try:
        import torch
    except ImportError as exc:
        raise ModelError(
            f"model_type '{config.get('model_type')}' ({source}) is not hand-modelled by "
            f"vramtui and torch cannot be imported ({exc}); {INSTALL_HINT} derives it, "
            "or pass --params N"
        ) from None
    hf_config = build_config(config, source)
    cls = model_class_for(config, hf_config)
    try:
        with torch.device("meta"):
            model = cls._from_config(hf_config)
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party build is one line
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelError(
            f"transformers could not build {cls.__name__} from the config of {source} on the "
            f"meta device: {first[:200]}; pass --params N"
        ) from None
    return model, hf_config


_EMBED_NAMES = {
    "embed_tokens",
    "wte",
    "wpe",
    "word_embeddings",
    "position_embeddings",
    "token_type_embeddings",
    "embed_positions",
    "embed_in",
    "shared",
}
_LM_HEAD_NAMES = {"lm_head", "embed_out", "proj_out"}
_MLP_TOKENS = {
    "mlp",
    "ffn",
    "feed_forward",
    "feedforward",
    "dense_h_to_4h",
    "dense_4h_to_h",
    "fc1",
    "fc2",
    "intermediate",
    "output",
    "densereludense",
    "c_fc",
    "shared_expert",
    "shared_experts",
}
_STATE_TOKENS = ("mamba", "mixer", "linear_attn", "ssm")
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block)\.(\d+)(?:\.|$)")


def _is_attention_path(tokens: list[str]) -> bool:
    return any(
        ("attn" in t or "attention" in t or t in ("query_key_value", "qkv"))
        and "linear_attn" not in t
        for t in tokens
    )


def _linear_row(path, leaf, names, own, in_f, out_f, **flags):
    """(path, ModuleShape) of one linear-like module: its own parameters, one instance."""
    return (
        path,
        ModuleShape(
            name=leaf,
            kind="linear",
            group=_group_of(path, "linear", names),
            params=sum(int(p.numel()) for _, p in own),
            count=1,
            in_features=int(in_f),
            out_features=int(out_f),
            has_bias=any(n == "bias" for n, _ in own),
            **flags,
        ),
    )


def _group_of(path: str, kind: str, names: set[str]) -> str:
    tokens = path.lower().split(".")
    leaf = tokens[-1]
    if leaf in _LM_HEAD_NAMES and len(tokens) <= 2:
        return "lm_head"
    if kind == "embedding" or leaf in _EMBED_NAMES:
        return "embedding"
    if "experts" in tokens:
        return "experts"
    parent = path.rsplit(".", 1)[0] if "." in path else ""
    if leaf in ("gate", "router") and f"{parent}.experts" in names:
        return "router"
    if leaf == "shared_expert_gate":
        return "router"
    if kind == "norm":
        return "norm"
    if _is_attention_path(tokens):
        return "attention"
    if any(t in _MLP_TOKENS for t in tokens):
        return "mlp"
    return "other"


def _walk(model, hidden: int) -> tuple[list[tuple[str, ModuleShape]], int]:
    """(layer path, one shape) for every parameter-holding module, and the parameter total.

    `hidden` orients fused expert tensors: transformers stores most as (experts, out, in) and
    Llama-4's as (experts, in, out); the side facing the hidden size tells which."""
    import torch

    names = {n for n, _ in model.named_modules()}
    seen: set[int] = set()
    rows: list[tuple[str, ModuleShape]] = []
    total = 0
    for path, mod in model.named_modules():
        own = [(n, p) for n, p in mod.named_parameters(recurse=False) if id(p) not in seen]
        if not own:
            continue
        for _, p in own:
            seen.add(id(p))
            total += p.numel()
        leaf = path.rsplit(".", 1)[-1]
        cls = type(mod).__name__
        params = {n: p for n, p in own}
        if isinstance(mod, torch.nn.Linear) and "weight" in params:
            out_f, in_f = params["weight"].shape
            rows.append(_linear_row(path, leaf, names, own, in_f, out_f, is_nn_linear=True))
            continue
        if cls == "Conv1D" and "weight" in params and params["weight"].dim() == 2:
            in_f, out_f = params["weight"].shape  # transformers' Conv1D stores (in, out)
            rows.append(_linear_row(path, leaf, names, own, in_f, out_f, is_conv1d=True))
            continue
        if isinstance(mod, torch.nn.Embedding):
            num, dim = params["weight"].shape
            rows.append(
                (
                    path,
                    ModuleShape(
                        name=leaf,
                        kind="embedding",
                        group=_group_of(path, "embedding", names),
                        params=sum(int(p.numel()) for _, p in own),
                        count=1,
                        in_features=int(num),
                        out_features=int(dim),
                    ),
                )
            )
            continue
        if "norm" in cls.lower() and all(p.dim() == 1 for _, p in own):
            width = int(own[0][1].numel())
            rows.append(
                (
                    path,
                    ModuleShape(
                        name=leaf,
                        kind="norm",
                        group=_group_of(path, "norm", names),
                        params=sum(int(p.numel()) for _, p in own),
                        count=1,
                        in_features=width,
                        out_features=width,
                        has_bias="bias" in params,
                    ),
                )
            )
            continue
        # Fused 3-D expert tensors (one expert's matrix per slice), their biases folded in.
        rest = dict(params)
        is_conv = isinstance(mod, torch.nn.modules.conv._ConvNd)
        for pname, p in params.items():
            if p.dim() != 3 or is_conv or "expert" not in path.lower():
                continue
            experts, a, b = (int(x) for x in p.shape)
            bias = rest.pop(f"{pname}_bias", None)
            rest.pop(pname)
            per = a * b + (int(bias.numel()) // experts if bias is not None else 0)
            if a == hidden and b != hidden:
                a, b = b, a  # stored (experts, in, out)
            rows.append(
                (
                    path,
                    ModuleShape(
                        name=pname,
                        kind="linear",
                        group="experts",
                        params=per,
                        count=experts,
                        in_features=b,
                        out_features=a,
                        has_bias=bias is not None,
                    ),
                )
            )
        weight_bias = {n: p for n, p in rest.items() if n in ("weight", "bias")}
        if weight_bias:
            w = weight_bias.get("weight")
            shape = tuple(w.shape) if w is not None else ()
            rows.append(
                (
                    path,
                    ModuleShape(
                        name=leaf,
                        kind="linear" if len(shape) == 2 else "other",
                        group=_group_of(path, "other", names),
                        params=sum(int(p.numel()) for p in weight_bias.values()),
                        count=1,
                        in_features=int(shape[1]) if len(shape) == 2 else 0,
                        out_features=int(shape[0]) if len(shape) == 2 else 0,
                        has_bias="bias" in weight_bias,
                    ),
                )
            )
        for pname, p in rest.items():
            if pname in ("weight", "bias"):
                continue
            rows.append(
                (
                    path,
                    ModuleShape(
                        name=pname,
                        kind="other",
                        group=_group_of(f"{path}.{pname}", "other", names),
                        params=int(p.numel()),
                        count=1,
                    ),
                )
            )
    return rows, total


def _collapse(rows: list[tuple[str, ModuleShape]]) -> tuple[ModuleShape, ...]:
    counts: dict[ModuleShape, int] = {}
    for _, shape in rows:
        counts[shape] = counts.get(shape, 0) + shape.count
    out = []
    for shape, n in counts.items():
        out.append(ModuleShape(**{**asdict(shape), "count": n}))
    return tuple(out)


def _int_attr(cfg, *names: str) -> int | None:
    for name in names:
        value = getattr(cfg, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _dtype_name(hf_config, text_cfg) -> str:
    for cfg in (text_cfg, hf_config):
        raw = getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None)
        if raw is not None:
            name = str(raw).removeprefix("torch.")
            return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(name, "fp32")
    return "fp32"


def _decoder_root(model, kind: str) -> str:
    """The module path prefix of the text decoder's layers ('' when not found)."""
    if kind == "encoder":
        return ""
    try:
        decoder = model.get_decoder()
    except Exception:  # noqa: BLE001 - some classes have no decoder accessor
        decoder = None
    if decoder is None:
        return ""
    for path, mod in model.named_modules():
        if mod is decoder:
            return path
    return ""


def _layers_of(rows, root: str) -> dict[int, list[tuple[str, ModuleShape]]]:
    by_layer: dict[int, list[tuple[str, ModuleShape]]] = {}
    prefix = f"{root}." if root else ""
    for path, shape in rows:
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix) :]
        m = _LAYER_RE.match(rel) or _LAYER_RE.search(rel)
        if m is None or rel[: m.start()].count(".") > 1:
            continue
        by_layer.setdefault(int(m.group(1)), []).append((rel, shape))
    return by_layer


def _state_of(model_type: str, cfg, layers: int) -> RecurrentState | None:
    """Per-sequence state of the state-space / linear-attention layers, from the config."""

    def g(*names: str) -> int | None:
        return _int_attr(cfg, *names)

    h = g("hidden_size") or 0
    if model_type == "mamba":
        d_inner, d_state, d_conv = g("intermediate_size"), g("state_size"), g("conv_kernel")
        if None in (d_inner, d_state, d_conv):
            return None
        return RecurrentState(
            layers,
            d_inner * d_conv,
            d_inner * d_state,
            f"Mamba: conv d_inner {d_inner} x d_conv {d_conv} + SSM d_inner {d_inner} x "
            f"d_state {d_state}",
        )
    if model_type == "jamba":
        expand, d_state, d_conv = g("mamba_expand"), g("mamba_d_state"), g("mamba_d_conv")
        if None in (expand, d_state, d_conv):
            return None
        d_inner = expand * h
        return RecurrentState(
            layers,
            d_inner * d_conv,
            d_inner * d_state,
            f"Mamba: conv d_inner {d_inner} (mamba_expand {expand} x hidden {h}) x d_conv "
            f"{d_conv} + SSM d_inner {d_inner} x d_state {d_state}",
        )
    if model_type in ("mamba2", "falcon_h1", "bamba", "nemotron_h", "granitemoehybrid"):
        heads = g("mamba_n_heads", "num_heads")
        head_dim = g("mamba_d_head", "mamba_head_dim", "head_dim")
        groups = g("mamba_n_groups", "n_groups")
        d_state = g("mamba_d_state", "ssm_state_size", "state_size")
        d_conv = g("mamba_d_conv", "conv_kernel")
        if None in (heads, head_dim, groups, d_state, d_conv):
            return None
        d_inner = g("mamba_d_ssm") or heads * head_dim
        conv_dim = d_inner + 2 * groups * d_state
        return RecurrentState(
            layers,
            conv_dim * d_conv,
            heads * head_dim * d_state,
            f"Mamba-2: conv (d_inner {d_inner} + 2 x {groups} groups x d_state {d_state}) x "
            f"d_conv {d_conv} + SSM {heads} heads x head_dim {head_dim} x d_state {d_state}",
        )
    if model_type == "qwen3_next":
        nk, nv = g("linear_num_key_heads"), g("linear_num_value_heads")
        dk, dv, k = (
            g("linear_key_head_dim"),
            g("linear_value_head_dim"),
            g("linear_conv_kernel_dim"),
        )
        if None in (nk, nv, dk, dv, k):
            return None
        conv_dim = 2 * nk * dk + nv * dv
        return RecurrentState(
            layers,
            conv_dim * k,
            nv * dk * dv,
            f"Gated DeltaNet: conv (2 x {nk} key heads x {dk} + {nv} value heads x {dv}) x "
            f"kernel {k} + recurrent {nv} value heads x {dk} x {dv}",
        )
    return None


def _derive(config: dict, source: str) -> DerivedStructure:
    import transformers

    model, hf_config = build_on_meta(config, source)
    try:
        text_cfg = hf_config.get_text_config(decoder=True)
    except Exception:  # noqa: BLE001
        text_cfg = hf_config
    hidden = _int_attr(text_cfg, "hidden_size", "d_model") or 0
    rows, total = _walk(model, hidden)
    modules = _collapse(rows)
    model_type = str(getattr(hf_config, "model_type", config.get("model_type")))
    if getattr(hf_config, "is_encoder_decoder", False):
        kind = "encoder-decoder"
    elif model.can_generate():
        kind = "decoder"
    else:
        kind = "encoder"
    text_type = str(getattr(text_cfg, "model_type", model_type))
    notes: list[str] = []

    layers_n = _int_attr(text_cfg, "num_hidden_layers", "num_layers", "decoder_layers") or 0
    heads = _int_attr(text_cfg, "num_attention_heads", "decoder_attention_heads") or 0
    kv_heads = _int_attr(text_cfg, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = _int_attr(text_cfg, "head_dim", "d_kv") or (hidden // heads if heads else 0)

    root = _decoder_root(model, kind)
    by_layer = _layers_of(rows, root) if kind == "decoder" else {}
    layer_types = getattr(text_cfg, "layer_types", None) or getattr(
        text_cfg, "layers_block_type", None
    )
    kinds: list[str] = []
    moe_layers: list[bool] = []
    mixer_ok = True
    mlp_ok = True
    state_layers = 0
    cross_layers = 0
    for i in range(len(by_layer)):
        layer = by_layer.get(i, [])
        groups = {s.group for _, s in layer}
        full = [(f"{p}.{s.name}".lower(), s) for p, s in layer]
        attn = any(
            s.group == "attention" and "cross_attn" not in p and "linear_attn" not in p
            for p, s in full
        )
        cross = any("cross_attn" in p for p, _ in full)
        state = any(any(t in p for t in _STATE_TOKENS) for p, _ in full)
        cross_layers += cross and not attn
        state_layers += state
        declared = (
            str(layer_types[i])
            if isinstance(layer_types, (list, tuple)) and i < len(layer_types)
            else ""
        )
        if attn:
            kinds.append("sliding" if declared == "sliding_attention" else "full")
        else:
            kinds.append("none")
            mixer_ok = mixer_ok and (state or cross)
        moe_layers.append("experts" in groups)
        mlp_ok = mlp_ok and bool(groups & {"mlp", "experts"})

    sliding = _int_attr(text_cfg, "sliding_window")
    if "sliding" not in kinds:
        if sliding and kinds:
            use = getattr(text_cfg, "use_sliding_window", None)
            if use is not False:
                notes.append(
                    f"the config sets sliding_window {sliding} but names no per-layer pattern: "
                    "the KV cache is counted at full length on every attention layer (an upper "
                    "bound)"
                )
        sliding = None

    experts_n = _int_attr(text_cfg, "num_local_experts", "num_experts", "n_routed_experts") or 0
    per_tok = _int_attr(text_cfg, "num_experts_per_tok", "experts_per_token", "moe_topk") or 0
    expert_rows = [s for p, s in rows if s.group == "experts" and s.out_features == hidden]
    moe_width = _int_attr(text_cfg, "moe_intermediate_size", "expert_intermediate_size") or (
        expert_rows[0].in_features if expert_rows else 0
    )
    if not any(moe_layers):
        experts_n = per_tok = moe_width = 0
    # Dense MLP width: the input of the MLP's projection back to hidden.
    first_dense = next((by_layer[i] for i in range(len(by_layer)) if not moe_layers[i]), [])
    dense_in = [
        s.in_features
        for p, s in first_dense
        if s.group == "mlp" and s.kind == "linear" and s.out_features == hidden
    ]
    intermediate = max(dense_in) if dense_in else (_int_attr(text_cfg, "intermediate_size") or 0)
    mlp_linears = [s for p, s in first_dense if s.group == "mlp" and s.kind == "linear"]
    gated = len(mlp_linears) >= 3 or any(
        "gate" in s.name for s in mlp_linears + [s for _, s in rows if s.group == "experts"]
    )

    state = None
    if state_layers:
        state = _state_of(model_type, text_cfg, state_layers) or _state_of(
            text_type, text_cfg, state_layers
        )
        if state is None:
            notes.append(
                f"{state_layers} layers hold a fixed-size state-space / linear-attention state "
                f"whose size vramtui does not work out for model_type '{text_type}'"
            )
    if cross_layers:
        notes.append(
            f"{cross_layers} cross-attention layers cache the image tokens' keys and values; "
            "that cache is not itemised"
        )
    vocab = _int_attr(text_cfg, "vocab_size") or _int_attr(hf_config, "vocab_size") or 0
    tie = getattr(hf_config, "tie_word_embeddings", None)
    if tie is None:
        tie = getattr(text_cfg, "tie_word_embeddings", False)
    max_pos = (
        _int_attr(text_cfg, "max_position_embeddings", "n_positions", "max_target_positions") or 0
    )
    attrs = {
        "model_type": text_type,
        "num_hidden_layers": layers_n if kind != "decoder" or not kinds else len(kinds),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": intermediate,
        "vocab_size": vocab,
        "tie_word_embeddings": bool(tie),
        "max_position_embeddings": max_pos,
        "dtype": _dtype_name(hf_config, text_cfg),
        "num_experts": experts_n,
        "num_experts_per_tok": per_tok,
        "moe_intermediate_size": moe_width,
        "sliding_window": sliding,
    }
    standard = (
        kind == "decoder"
        and bool(kinds)
        and mixer_ok
        and mlp_ok
        and heads > 0
        and kv_heads > 0
        and head_dim > 0
        and hidden > 0
        and (not experts_n or per_tok > 0)
    )
    if kind == "decoder" and not kinds:
        notes.append("no decoder layers were found in the model's module tree")
    if hf_config is not text_cfg and kind == "decoder":
        towers = [
            n for n in ("vision_config", "audio_config") if getattr(hf_config, n, None) is not None
        ]
        if towers:
            notes.append(
                "the "
                + " and ".join(t.removesuffix("_config") for t in towers)
                + " encoder's weights are counted; its activations are not itemised (image "
                "or audio tokens count as prompt tokens)"
            )
    return DerivedStructure(
        transformers_version=transformers.__version__,
        model_class=type(model).__name__,
        modules=modules,
        param_count=total,
        kind=kind,
        attrs=attrs,
        layer_kinds=tuple(kinds),
        moe_layers=tuple(moe_layers),
        gated_mlp=gated,
        standard_decoder=standard,
        state=state,
        notes=tuple(notes),
        encoder=encoder_shape_of(hf_config, kind, type(model).__name__)
        if kind != "decoder"
        else None,
    )
