"""What a GGUF file (llama.cpp, ollama) holds, read from its header only.

A GGUF file is: magic "GGUF", version (2 or 3), tensor count and key/value count (u64 each),
the key/value metadata, one info record per tensor (name, dims, ggml type, offset), padding to
`general.alignment`, then the tensor data. vramtui first walks the header itself with every
size bounded (`vramtui.models.gguf_header`, whose limits are named in its messages), so a
hostile or damaged file is refused in one line instead of making a parser loop or allocate;
then the `gguf` package's `GGUFReader` parses a local file. A file on the Hub is read by that
walk alone, from the header's bytes (`vramtui.models.hub_gguf`). GGUFReader memory-maps the file and its tensors are views into the map:
no tensor data is read. The bytes of a tensor are exact: n_elements / block size x type size
(`gguf.GGML_QUANT_SIZES`, ggml's own type traits).

A split model (`name-00001-of-00003.gguf`) is read part by part; the metadata is the first
part's. The `gguf` package is imported here only, when a GGUF file is read.
"""

from __future__ import annotations

import mmap
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from vramtui import limits
from vramtui.errors import ModelError
from vramtui.models.architecture import Architecture, ModuleShape
from vramtui.models.gguf_header import (  # noqa: F401 - the limits are named from here too
    GGML_MAX_DIMS,
    GGUF_VERSIONS,
    MAX_GGUF_ARRAY_ITEMS,
    MAX_GGUF_HEADER_BYTES,
    MAX_GGUF_KV,
    MAX_GGUF_STRING_BYTES,
    MAX_GGUF_TENSORS,
    GgufHeader,
    GgufTensor,
    bad,
    walk_header,
)
from vramtui.safe_text import safe_line

MAX_GGUF_SPLITS = 512

SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

STRUCTURE_LABEL = "read from the GGUF header's tensor list (exact shapes and stored types)"


@dataclass(frozen=True)
class GgufModel:
    """The header of a GGUF model (all parts of a split one). Duck-types as a checkpoint:
    `is_gguf` tells the ledger to take the weights from here."""

    files: tuple[Path, ...]
    tensors: tuple[GgufTensor, ...]
    metadata: dict = field(compare=False, repr=False)  # scalars, strings, short arrays
    array_lengths: dict = field(compare=False, repr=False)  # every array key -> its length
    is_gguf: bool = True
    label: str = ""  # where the header came from, when not a local file (a file on the Hub)

    @property
    def path(self) -> Path:
        return self.files[0]

    @property
    def directory(self) -> Path:
        return self.files[0].parent

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def bytes_by_type(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for t in self.tensors:
            out[t.type_name] += t.nbytes
        return dict(out)

    def main_type(self) -> str:
        """The type holding most bytes of the 2-D weights (the file's nominal quantisation)."""
        out: dict[str, int] = defaultdict(int)
        for t in self.tensors:
            if len(t.shape) >= 2:
                out[t.type_name] += t.nbytes
        pool = out or self.bytes_by_type()
        return max(pool, key=pool.get) if pool else "F32"

    def has_tensor(self, name: str) -> bool:
        return any(t.name == name for t in self.tensors)

    def describe(self) -> str:
        n = len(self.files)
        parts = f" ({n} parts)" if n > 1 else ""
        return f"GGUF header of {self.label or self.path}{parts}"

    @classmethod
    def from_headers(cls, files, headers: list[GgufHeader], label: str = "") -> GgufModel:
        """The model of walked headers, one per part (the metadata is the first part's)."""
        return cls(
            files=tuple(files),
            tensors=tuple(t for h in headers for t in h.tensors),
            metadata=headers[0].metadata,
            array_lengths=headers[0].array_lengths,
            label=label,
        )


def _bad(path: Path, problem: str, fix: str = "") -> ModelError:
    return bad(str(path), problem, fix)


def _check_header(path: Path, buf, size: int) -> None:
    """Refuse (one ModelError) a header that is truncated or claims more than the limits."""
    walk_header(str(path), buf, size)


def _read_one(path: Path):
    """(tensors, metadata, array lengths) of one GGUF file."""
    import numpy as np
    from gguf import GGUFReader, GGUFValueType

    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            if size == 0:
                raise _bad(path, "is empty")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                _check_header(path, buf, size)
    except OSError as exc:
        raise ModelError(
            safe_line(f"cannot read GGUF file {path}: {exc.strerror or exc}")
        ) from None
    try:
        reader = GGUFReader(path, "r")
    except (ValueError, KeyError, IndexError, OverflowError, TypeError) as exc:
        raise _bad(path, f"cannot be parsed ({type(exc).__name__}: {exc})") from None
    metadata: dict = {}
    lengths: dict = {}
    for key, f in reader.fields.items():
        if not f.types:
            continue
        kind = f.types[0]
        try:
            if kind == GGUFValueType.ARRAY:
                lengths[key] = len(f.data)
                if len(f.types) > 1 and f.types[1] != GGUFValueType.STRING and len(f.data) <= 4096:
                    metadata[key] = [v.item() if hasattr(v, "item") else v for v in f.contents()]
            elif kind == GGUFValueType.STRING:
                metadata[key] = safe_line(f.contents())[:4096]
            else:
                value = f.contents()
                metadata[key] = value.item() if isinstance(value, np.generic) else value
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise _bad(path, f"metadata '{key}' cannot be read ({exc})") from None
    tensors = tuple(
        GgufTensor(
            name=safe_line(t.name),
            type_name=t.tensor_type.name,
            shape=tuple(int(d) for d in t.shape),
            n_elements=int(t.n_elements),
            nbytes=int(t.n_bytes),
        )
        for t in reader.tensors
    )
    del reader  # drop the memory map
    return tensors, metadata, lengths


def split_parts(path: Path) -> list[Path]:
    """Every part of a split GGUF given its first part (`-00001-of-0000N.gguf`), else [path]."""
    m = SPLIT_RE.match(path.name)
    if not m:
        return [path]
    count = int(m["count"])
    if int(m["no"]) != 1:
        raise ModelError(
            safe_line(
                f"GGUF file {path} is part {int(m['no'])} of a split model; give its first part "
                f"({m['stem']}-00001-of-{m['count']}.gguf)"
            )
        )
    if not 1 <= count <= MAX_GGUF_SPLITS:
        raise ModelError(
            safe_line(
                f"GGUF file {path} claims {count:,} parts, outside 1-{MAX_GGUF_SPLITS} "
                "(MAX_GGUF_SPLITS); check the file name"
            )
        )
    parts = [
        path.with_name(f"{m['stem']}-{i:05d}-of-{m['count']}.gguf") for i in range(1, count + 1)
    ]
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise ModelError(
            safe_line(
                f"split GGUF model {path.name} lacks {len(missing)} of its {count} parts "
                f"(first missing: {missing[0]}); download every part into {path.parent}"
            )
        )
    return parts


def read_gguf(path: Path) -> GgufModel:
    """The header of the GGUF model at `path` (every part of a split one). ModelError if not."""
    path = Path(path)
    parts = split_parts(path)
    stamp = tuple(_stamp(p) for p in parts)
    return _read_cached(tuple(parts), stamp)


def _stamp(p: Path) -> tuple:
    try:
        st = p.stat()
    except OSError as exc:
        raise ModelError(safe_line(f"cannot read GGUF file {p}: {exc.strerror or exc}")) from None
    return (st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _read_cached(parts: tuple[Path, ...], stamp: tuple) -> GgufModel:
    tensors: list[GgufTensor] = []
    metadata: dict = {}
    lengths: dict = {}
    for i, p in enumerate(parts):
        t, md, ln = _read_one(p)
        tensors += t
        if i == 0:
            metadata, lengths = md, ln
    return GgufModel(files=parts, tensors=tuple(tensors), metadata=metadata, array_lengths=lengths)


# --- the architecture --------------------------------------------------------------------------

# GGUF architecture names whose Hugging Face model_type differs.
_MODEL_TYPES = {
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "gemma3": "gemma3_text",
    "gptneox": "gpt_neox",
    "deepseek2": "deepseek_v3",
    "command-r": "cohere",
}
_NORM_SUFFIX = "_norm"


# The range vramtui accepts for each numeric key it reads (`{arch}.` + key; vramtui.limits, as
# for a config.json): a string, a float, a bool, a negative or an absurd count is one clear
# ModelError naming the key, never a traceback, a hang or a list of 2^63 layers. Keys that
# llama.cpp allows per layer (an array of one count per layer) are marked True.
_META_LIMITS: dict[str, tuple[int, int, bool]] = {
    "block_count": (1, limits.MAX_LAYERS, False),
    "embedding_length": (1, limits.MAX_HIDDEN, False),
    "attention.head_count": (0, limits.MAX_HEADS, True),
    "attention.head_count_kv": (0, limits.MAX_HEADS, True),
    "attention.key_length": (0, limits.MAX_HIDDEN, False),
    "attention.value_length": (0, limits.MAX_HIDDEN, False),
    "attention.kv_lora_rank": (0, limits.MAX_HIDDEN, False),
    "attention.sliding_window": (0, limits.MAX_POSITIONS, False),
    "feed_forward_length": (0, limits.MAX_HIDDEN, True),
    "expert_feed_forward_length": (0, limits.MAX_HIDDEN, False),
    "expert_count": (0, limits.MAX_EXPERTS, False),
    "expert_used_count": (0, limits.MAX_EXPERTS, False),
    "context_length": (0, limits.MAX_POSITIONS, False),
}


def _meta(md: dict, arch: str, name: str, path: Path, default=None, required: bool = False):
    """The metadata value `{arch}.{name}`, checked against `_META_LIMITS`."""
    full = f"{arch}.{name}"
    value = md.get(full, default)
    if value is None:
        if required:
            raise _bad(path, f"lacks the metadata key '{full}'")
        return None
    lo, hi, per_layer = _META_LIMITS.get(name, (0, limits.MAX_COUNT, False))
    items = value if per_layer and isinstance(value, list) else [value]
    for v in items:
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            shown = safe_line(repr(v))[:40]
            kind = "one whole number per layer" if isinstance(value, list) else "a whole number"
            raise _bad(path, f"metadata '{full}' = {shown} is not {kind} in {lo:,}-{hi:,}")
    return value


def _per_layer(value, n_layer: int, what: str, path: Path) -> list[int]:
    if isinstance(value, list):
        if len(value) != n_layer or not all(isinstance(v, int) and v >= 0 for v in value):
            raise _bad(path, f"metadata '{what}' is not one count per layer")
        return list(value)
    return [int(value)] * n_layer


def _leaf(t: GgufTensor) -> str:
    return t.name.split(".", 3)[2]


def _module_of(t: GgufTensor) -> tuple[str, str, str]:
    """(leaf name, kind, group) of a tensor, by llama.cpp's tensor names."""
    parts = t.name.split(".")
    leaf = parts[2] if t.layer is not None and len(parts) > 2 else parts[0]
    matrix = len(t.shape) >= 2
    if leaf == "token_embd":
        return leaf, "embedding", "embedding"
    if leaf.endswith(_NORM_SUFFIX):
        return leaf, "norm", "norm"
    if leaf == "output":
        group = "lm_head"
    elif leaf == "ffn_gate_inp":
        group = "router"
    elif leaf.endswith("_exps"):
        group = "experts"
    elif leaf.startswith("ffn_"):
        group = "mlp"
    elif leaf.startswith("attn_"):
        group = "attention"
    else:
        return leaf, "other", "other"
    return leaf, "linear" if matrix else "other", group


@dataclass(frozen=True)
class GgufStructure:
    """The module list read from a GGUF header (Architecture.derived)."""

    modules: tuple[ModuleShape, ...]
    main_type: str = "F16"  # the ggml type holding most of the 2-D weights


# Tensors llama.cpp stores that are buffers, not parameters, in the transformers model: the
# Llama 3.1 rope frequency factors (`rope_freqs.weight`, head_dim / 2 values; transformers
# computes them into the `inv_freq` buffer). Their bytes still count in the file's weights.
_BUFFERS = {"rope_freqs"}


def modules_from_gguf(model: GgufModel) -> tuple[ModuleShape, ...]:
    grouped: dict[tuple, int] = defaultdict(int)
    for t in model.tensors:
        if t.layer is None and t.name.split(".")[0] in _BUFFERS:
            continue
        leaf, kind, group = _module_of(t)
        if kind == "linear" and len(t.shape) == 3:  # fused experts: [in, out, n_expert]
            key = (leaf, kind, group, t.shape[0] * t.shape[1], t.shape[0], t.shape[1])
            grouped[key] += t.shape[2]
        elif kind in ("linear", "embedding") and len(t.shape) == 2:
            grouped[(leaf, kind, group, t.n_elements, t.shape[0], t.shape[1])] += 1
        else:
            grouped[(leaf, kind, group, t.n_elements, 0, 0)] += 1
    return tuple(
        ModuleShape(
            name=leaf,
            kind=kind,
            group=group,
            params=params,
            count=count,
            in_features=fin,
            out_features=fout,
        )
        for (leaf, kind, group, params, fin, fout), count in grouped.items()
    )


def architecture_from_gguf(model: GgufModel, model_id: str = "") -> Architecture:
    """An Architecture from the GGUF metadata (llama.cpp's keys) and its tensor list."""
    md, path = model.metadata, model.path
    arch = md.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise _bad(path, "lacks the metadata key 'general.architecture'")

    def key(name: str, default=None, required: bool = False):
        return _meta(md, arch, name, path, default, required)

    n_layer = key("block_count", required=True)
    n_embd = key("embedding_length", required=True)
    if not (isinstance(n_layer, int) and isinstance(n_embd, int) and n_layer > 0 and n_embd > 0):
        raise _bad(path, f"'{arch}.block_count' and '{arch}.embedding_length' must be positive")
    heads = _per_layer(
        key("attention.head_count", 0), n_layer, f"{arch}.attention.head_count", path
    )
    kv_heads = _per_layer(
        key("attention.head_count_kv", key("attention.head_count", 0)),
        n_layer,
        f"{arch}.attention.head_count_kv",
        path,
    )
    n_head = max(heads) if heads else 0
    head_dim = key("attention.key_length", n_embd // n_head if n_head else 0)
    ff = key("feed_forward_length", 0)
    ff = max(ff) if isinstance(ff, list) and ff else ff
    n_expert = int(key("expert_count", 0) or 0)
    n_used = int(key("expert_used_count", 0) or 0)
    tokens = model.array_lengths.get("tokenizer.ggml.tokens")
    embd = next((t for t in model.tensors if t.name == "token_embd.weight"), None)
    vocab = tokens or (embd.shape[1] if embd is not None and len(embd.shape) == 2 else 0)
    if not vocab:
        raise _bad(path, "names no vocabulary (no tokenizer.ggml.tokens, no token_embd.weight)")
    if vocab > limits.MAX_VOCAB:
        raise _bad(
            path,
            f"a vocabulary of {vocab:,} tokens is over vramtui's limit of "
            f"{limits.MAX_VOCAB:,} (MAX_VOCAB)",
        )
    # One pass over the tensors (not one per layer: 10,000 layers x 100,000 tensors would hang).
    expert_layers = {
        t.layer
        for t in model.tensors
        if t.layer is not None and t.name.split(".", 3)[2:3] and _leaf(t).endswith("_exps")
    }
    moe_layers = tuple(i in expert_layers for i in range(n_layer)) if n_expert else ()
    kv_unknown = ""
    notes: list[str] = []
    window = key("attention.sliding_window")
    if key("attention.kv_lora_rank") is not None:
        kv_unknown = (
            "multi-head latent attention: llama.cpp's cache layout for it (latent plus rope "
            "dims, per version) is not read from the GGUF header"
        )
    elif any(k.startswith((f"{arch}.ssm.", f"{arch}.wkv.", f"{arch}.rwkv")) for k in md):
        kv_unknown = (
            f"'{arch}' has recurrent (state-space / RWKV) layers whose state llama.cpp sizes "
            "per architecture; not worked out from the GGUF header"
        )
    elif window:
        kv_unknown = (
            f"'{arch}' uses sliding-window attention on some layers, and which layers is fixed "
            "in llama.cpp's code for each architecture, not stored in the GGUF header"
        )
    if len(set(kv_heads)) > 1:
        notes.append(f"KV heads differ per layer ({min(kv_heads)}-{max(kv_heads)})")
    model_type = _MODEL_TYPES.get(arch, arch)
    if arch == "llama" and n_expert:
        model_type = "mixtral"
    gated = any(
        t.name.endswith("ffn_gate.weight") or "ffn_gate_exps" in t.name for t in model.tensors
    )
    name = md.get("general.name")
    label = model_id or (str(name) if name else path.stem)
    return Architecture(
        model_id=safe_line(label),
        model_type=model_type,
        num_layers=n_layer,
        hidden_size=n_embd,
        intermediate_size=int(ff or 0),
        num_attention_heads=n_head,
        num_kv_heads=max(kv_heads) if kv_heads else 0,
        head_dim=int(head_dim or 0),
        vocab_size=int(vocab),
        tie_word_embeddings=not model.has_tensor("output.weight"),
        default_dtype="fp16",
        max_position_embeddings=int(key("context_length", 0) or 0),
        gated_mlp=gated,
        num_experts=n_expert,
        num_experts_per_tok=n_used,
        moe_intermediate_size=int(key("expert_feed_forward_length", 0) or 0),
        moe_layers=moe_layers,
        sliding_window=int(window) if window else None,
        source=model.describe(),
        config={"gguf_architecture": arch},
        structure=STRUCTURE_LABEL,
        ledger_notes=tuple(notes),
        kv_unknown=kv_unknown,
        derived=GgufStructure(modules_from_gguf(model), model.main_type()),
    )


def kv_layout(model: GgufModel) -> list[tuple[int, int]]:
    """Per layer, (n_embd_k_gqa, n_embd_v_gqa) = KV heads x key_length / value_length."""
    md, path = model.metadata, model.path
    arch = model.architecture
    n_layer = _meta(md, arch, "block_count", path, required=True)
    n_embd = _meta(md, arch, "embedding_length", path, required=True)
    head_count = _meta(md, arch, "attention.head_count", path, 0)
    heads = _per_layer(head_count, n_layer, "head_count", path)
    kv = _per_layer(
        _meta(md, arch, "attention.head_count_kv", path, head_count),
        n_layer,
        "head_count_kv",
        path,
    )
    n_head = max(heads) if heads else 0
    k_len = _meta(md, arch, "attention.key_length", path, n_embd // n_head if n_head else 0)
    v_len = _meta(md, arch, "attention.value_length", path, k_len)
    return [(h * k_len, h * v_len) for h in kv]


def gguf_main_type(arch: Architecture) -> str | None:
    """The main ggml type of an Architecture read from a GGUF header, else None."""
    derived = arch.derived
    return derived.main_type if isinstance(derived, GgufStructure) else None
