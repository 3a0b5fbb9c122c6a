"""What a local checkpoint really holds, read from its safetensors headers.

A safetensors file starts with an 8-byte little-endian header length, then a JSON header
`{name: {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}`, then the raw tensor data.
Only the header is read here (pure standard library, no torch, no `safetensors`), so sizing a
70B checkpoint costs a few kilobytes of I/O. The bytes of a tensor are taken from its
`data_offsets` (authoritative) and cross-checked against numel x itemsize where the dtype is
known. Packed GPTQ/AWQ I32 weights with F16 scales and zeros therefore come out right with no
special case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from vramtui.errors import ModelError
from vramtui.models.architecture import GROUPS, Architecture

# Largest header the reference implementation accepts (safetensors MAX_HEADER_SIZE).
MAX_HEADER_BYTES = 100_000_000
MAX_JSON_BYTES = 64 * 2**20  # config.json, a shard index (the largest are a few MiB)

# Bits per element of every safetensors dtype (safetensors `Dtype::bitsize`). F4 is packed two
# per byte; F6 four per three bytes. Torch's float4_e2m1fn_x2 is saved as F4 with the last
# dimension doubled, so numel x 4 bits still equals the stored bytes.
DTYPE_BITS: dict[str, int] = {
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}

# Bytes per element (F4 = 0.5, F6 = 0.75).
DTYPE_ITEMSIZE_BYTES: dict[str, float] = {d: bits / 8 for d, bits in DTYPE_BITS.items()}

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"

# --- tensor name -> module group --------------------------------------------------------------

# Trailing name components that name a parameter or a quantisation buffer, not a module.
_PARAM_COMPONENTS = frozenset(
    {
        "weight", "bias", "qweight", "qzeros", "scales", "zeros", "g_idx", "absmax", "quant_map",
        "nested_absmax", "nested_quant_map", "SCB", "weight_format", "weight_scale",
        "weight_scale_inv", "weight_scale_2", "input_scale", "weight_zero_point", "weight_packed",
        "weight_shape", "weight_global_scale", "input_global_scale", "e_score_correction_bias",
        "k_scale", "v_scale", "q_scale", "kv_scale", "prob_scale",
    }
)  # fmt: skip

# Quantisation metadata: everything a quantised checkpoint stores besides the packed weights.
_QUANT_META_COMPONENTS = frozenset(
    {
        "qzeros", "scales", "zeros", "g_idx", "absmax", "quant_map", "nested_absmax",
        "nested_quant_map", "SCB", "weight_format", "weight_scale", "weight_scale_inv",
        "weight_scale_2", "input_scale", "weight_zero_point", "weight_shape",
        "weight_global_scale", "input_global_scale", "k_scale", "v_scale", "q_scale", "kv_scale",
        "prob_scale",
    }
)  # fmt: skip

# Vision towers, audio encoders, multimodal projectors: grouped as "other".
_OTHER_COMPONENTS = frozenset(
    {
        "vision_tower", "vision_model", "visual", "vision_encoder", "multi_modal_projector",
        "mm_projector", "audio_tower", "audio_model", "image_newline", "vision_embed_tokens",
        "embed_vision", "embed_audio", "connector", "resampler",
    }
)  # fmt: skip
_LM_HEAD_COMPONENTS = frozenset({"lm_head", "embed_out"})
_EMBEDDING_LEAVES = frozenset(
    {
        "embed_tokens", "wte", "wpe", "word_embeddings", "embed_in", "tok_embeddings",
        "position_embeddings", "token_type_embeddings", "embed_positions", "shared",
    }
)  # fmt: skip
_ROUTER_COMPONENTS = frozenset({"router", "gate_network", "shared_expert_gate"})
_MOE_BLOCKS = frozenset({"mlp", "block_sparse_moe", "feed_forward", "moe", "ffn"})
_ATTENTION_COMPONENTS = frozenset(
    {
        "self_attn",
        "attention",
        "attn",
        "self_attention",
        "cross_attn",
        "encoder_attn",
        "linear_attn",
    }
)
_ATTENTION_LEAVES = frozenset(
    {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "query_key_value", "c_attn", "wq", "wk",
     "wv", "wo", "query", "key", "value"}
)  # fmt: skip
_MLP_COMPONENTS = frozenset(
    {"mlp", "feed_forward", "ffn", "block_sparse_moe", "moe", "shared_expert", "shared_experts"}
)
_MLP_LEAVES = frozenset(
    {"gate_proj", "up_proj", "down_proj", "gate_up_proj", "c_fc", "fc1", "fc2", "w1", "w2", "w3",
     "dense_h_to_4h", "dense_4h_to_h"}
)  # fmt: skip


def _is_quant_meta_component(part: str) -> bool:
    return (
        part in _QUANT_META_COMPONENTS
        # bitsandbytes serialised QuantState; FP8 / compressed-tensors weight_scale*
        or part.startswith(("quant_state", "weight_scale"))
        or part.endswith("_scales")  # gpt-oss MXFP4 `gate_up_proj_scales`
    )


def is_quant_metadata(name: str) -> bool:
    """True for quantisation metadata: scales, zeros, absmax, quant_map, g_idx, weight_scale*..."""
    parts = name.split(".")
    # bitsandbytes hangs its buffers below `.weight.` (`q_proj.weight.absmax`); GPTQ/AWQ,
    # FP8 and compressed-tensors put them beside it (`q_proj.scales`, `q_proj.weight_scale`).
    return any(_is_quant_meta_component(p) for p in parts[1:])


def tensor_group(name: str, moe: bool = True) -> str:
    """The `ModuleShape` group a checkpoint tensor belongs to, from its name alone.

    `moe` says whether the checkpoint has routed experts: only then is a bare `gate` module
    (`mlp.gate.weight`, `block_sparse_moe.gate.weight`) the router. `shared_expert_gate`
    (Qwen-MoE, a Linear(hidden, 1)) counts as router: quantisers leave it unconverted with
    the router. Vision towers and multimodal projectors are "other".
    """
    parts = name.split(".")
    modules = list(parts)
    while len(modules) > 1 and (
        modules[-1] in _PARAM_COMPONENTS or _is_quant_meta_component(modules[-1])
    ):
        modules.pop()
    leaf = modules[-1]
    comps = set(modules)

    if comps & _OTHER_COMPONENTS or any(p.startswith(("vision_", "audio_")) for p in modules):
        return "other"
    if comps & _LM_HEAD_COMPONENTS or (len(modules) == 1 and leaf == "output"):
        return "lm_head"
    if leaf in _EMBEDDING_LEAVES:
        return "embedding"
    low = leaf.lower()
    if "norm" in low or low.startswith("ln_") or low in ("ln1", "ln2", "ln"):
        return "norm"
    if comps & _ROUTER_COMPONENTS:
        return "router"
    if moe and leaf == "gate" and len(modules) >= 2 and modules[-2] in _MOE_BLOCKS:
        return "router"
    if "experts" in comps:
        return "experts"
    if comps & _ATTENTION_COMPONENTS or leaf in _ATTENTION_LEAVES:
        return "attention"
    if comps & _MLP_COMPONENTS or leaf in _MLP_LEAVES:
        return "mlp"
    return "other"


# --- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str  # safetensors dtype string, e.g. "BF16", "I32", "F8_E4M3"
    shape: tuple[int, ...]
    nbytes: int  # data_offsets[1] - data_offsets[0]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_quant_metadata(self) -> bool:
        return is_quant_metadata(self.name)


@dataclass(frozen=True)
class CheckpointInfo:
    directory: str
    files: tuple[str, ...]  # safetensors file names, relative to `directory`
    tensors: tuple[TensorInfo, ...]
    quantization_config: dict | None

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def total_numel(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def is_moe(self) -> bool:
        return any("experts" in t.name.split(".") for t in self.tensors)

    def bytes_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.dtype] = out.get(t.dtype, 0) + t.nbytes
        return out

    def numel_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.dtype] = out.get(t.dtype, 0) + t.numel
        return out

    def bytes_by_group(self, include_quant_metadata: bool = True) -> dict[str, int]:
        """Stored bytes per `GROUPS` entry (every group present, 0 where empty).

        Quantisation metadata counts in the group of its module unless
        `include_quant_metadata` is False (then add `quant_metadata_bytes()` once yourself).
        """
        moe = self.is_moe
        out = {g: 0 for g in GROUPS}
        for t in self.tensors:
            if not include_quant_metadata and t.is_quant_metadata:
                continue
            out[tensor_group(t.name, moe)] += t.nbytes
        return out

    def numel_by_group(self, include_quant_metadata: bool = False) -> dict[str, int]:
        """Elements per group, quantisation metadata excluded by default (compare with
        `Architecture.params_by_group`; packed I32 weights count as stored, 8 values per I32)."""
        moe = self.is_moe
        out = {g: 0 for g in GROUPS}
        for t in self.tensors:
            if not include_quant_metadata and t.is_quant_metadata:
                continue
            out[tensor_group(t.name, moe)] += t.numel
        return out

    def quant_metadata_bytes(self) -> int:
        """Bytes of scales / zeros / absmax / quant_map / g_idx / weight_scale* tensors."""
        return sum(t.nbytes for t in self.tensors if t.is_quant_metadata)


# --- reading one file ---------------------------------------------------------------------------


def _bad(path: Path, problem: str, fix: str) -> ModelError:
    return ModelError(f"{path}: {problem}; {fix}")


def read_safetensors_header_and_metadata(
    path: Path, stored_file_bytes: int | None = None
) -> tuple[dict[str, dict], dict[str, str]]:
    """The tensor entries of a safetensors header, and its `__metadata__` (empty if none).

    Reads only the 8-byte length and the JSON header, never the tensor data. Each entry is
    validated (dtype, shape, data_offsets present and consistent, data inside the file).
    `stored_file_bytes`: the real file's size when `path` holds only its header (a header
    fetched from the Hub, see `vramtui.models.hub`).
    """
    from vramtui.guarded_read import read_safetensors_header as read_header

    path = Path(path)
    redownload = "re-download the file (an interrupted download leaves it truncated)"
    header, header_bytes, file_bytes = read_header(
        path,
        error=ModelError,
        cap=MAX_HEADER_BYTES,
        fix=redownload,
        stored_file_bytes=stored_file_bytes,
    )

    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise _bad(path, "__metadata__ is not a JSON object", redownload)
    data_bytes = file_bytes - 8 - header_bytes
    for name, entry in header.items():
        _check_entry(path, name, entry, data_bytes, redownload)
    return header, metadata


def _check_entry(path: Path, name: str, entry: object, data_bytes: int, fix: str) -> None:
    if not isinstance(entry, dict) or not all(
        k in entry for k in ("dtype", "shape", "data_offsets")
    ):
        raise _bad(path, f"tensor {name!r} lacks dtype, shape or data_offsets", fix)
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str):
        raise _bad(path, f"tensor {name!r} has dtype {dtype!r}, not a string", fix)
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise _bad(
            path, f"tensor {name!r} has shape {shape!r}, not a list of non-negative integers", fix
        )
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise _bad(
            path,
            f"tensor {name!r} has data_offsets {offsets!r}, not [begin, end] with begin <= end",
            fix,
        )
    if offsets[1] > data_bytes:
        raise _bad(
            path,
            f"tensor {name!r} ends at byte {offsets[1]} of data but the file holds {data_bytes}",
            fix,
        )
    bits = DTYPE_BITS.get(dtype)
    if bits is not None:
        expected_bytes = math.ceil(math.prod(shape) * bits / 8)
        stored_bytes = offsets[1] - offsets[0]
        if expected_bytes != stored_bytes:
            raise _bad(
                path,
                f"tensor {name!r} is {dtype}{shape} = {expected_bytes} bytes but data_offsets span {stored_bytes}",
                "the header is corrupt: " + fix,
            )


def read_safetensors_header(path: Path) -> dict[str, dict]:
    """The tensor entries `{name: {"dtype", "shape", "data_offsets"}}` of a safetensors file,
    `__metadata__` removed (use `read_safetensors_header_and_metadata` to get it)."""
    return read_safetensors_header_and_metadata(path)[0]


def _tensors_of(header: dict[str, dict]) -> list[TensorInfo]:
    return [
        TensorInfo(
            name=name,
            dtype=entry["dtype"],
            shape=tuple(entry["shape"]),
            nbytes=entry["data_offsets"][1] - entry["data_offsets"][0],
        )
        for name, entry in header.items()
    ]


# --- reading a directory ------------------------------------------------------------------------


def _read_json(path: Path, what: str, fix: str) -> dict:
    from vramtui.guarded_read import read_json

    return read_json(
        path, error=ModelError, what=what, source=f"{path}: {what}", cap=MAX_JSON_BYTES, fix=fix
    )


def _quantization_config(directory: Path) -> dict | None:
    """`quantization_config` from config.json (top level or text_config), else an AutoGPTQ
    `quantize_config.json` beside it."""
    cfg_path = directory / "config.json"
    if cfg_path.is_file():
        cfg = _read_json(cfg_path, "config.json", "re-download it")
        qc = cfg.get("quantization_config")
        if qc is None and isinstance(cfg.get("text_config"), dict):
            qc = cfg["text_config"].get("quantization_config")
        if isinstance(qc, dict):
            return qc
    legacy = directory / "quantize_config.json"
    if legacy.is_file():
        return _read_json(legacy, "quantize_config.json", "re-download it")
    return None


def _checkpoint_files(directory: Path) -> list[str] | None:
    """The safetensors files holding the model, relative to `directory`; None if none."""
    if (directory / SINGLE_FILE).is_file():
        return [SINGLE_FILE]
    index_path = directory / INDEX_FILE
    if index_path.is_file():
        index = _read_json(index_path, "the shard index", "re-download it")
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise _bad(index_path, "has no weight_map", "re-download the shard index")
        files = sorted(set(weight_map.values()))
        for name in files:
            if not isinstance(name, str):
                raise _bad(
                    index_path,
                    f"weight_map names a shard {name!r} that is not a file name",
                    "re-download it",
                )
            if not (directory / name).is_file():
                raise _bad(
                    directory / name,
                    f"shard listed in {INDEX_FILE} is missing",
                    "finish the download (e.g. `hf download` the repository again)",
                )
        return files
    found = sorted(
        p.name
        for p in directory.glob("*.safetensors")
        if p.is_file() and not p.name.startswith("adapter_model")
    )
    # Some repositories ship both `model-*.safetensors` and a `consolidated.safetensors` copy.
    preferred = [n for n in found if n.startswith("model")]
    return (preferred or found) or None


def read_checkpoint(
    directory: Path, stored_sizes: dict[str, int] | None = None
) -> CheckpointInfo | None:
    """Every tensor stored in the directory's safetensors files, from their headers only.

    Looks for `model.safetensors`, then a `model.safetensors.index.json` shard index (each
    shard's header is read once), then any `*.safetensors`. Returns None when the directory
    has no safetensors file (only `.bin` or `.gguf`: the caller estimates from config.json).
    `stored_sizes` maps a file name to the size of the real file when the directory holds
    only its header (what `vramtui.models.hub` keeps of a Hub repository).
    """
    directory = Path(directory)
    files = _checkpoint_files(directory)
    if files is None:
        return None
    sizes = stored_sizes or {}
    tensors: list[TensorInfo] = []
    for name in files:
        header, _ = read_safetensors_header_and_metadata(directory / name, sizes.get(name))
        tensors.extend(_tensors_of(header))
    return CheckpointInfo(
        directory=str(directory),
        files=tuple(files),
        tensors=tuple(tensors),
        quantization_config=_quantization_config(directory),
    )


def load_local_model(
    directory: Path,
    *,
    model_id: str | None = None,
    source: str | None = None,
    stored_sizes: dict[str, int] | None = None,
    weights_optional: bool = False,
) -> tuple[Architecture, CheckpointInfo | None]:
    """The architecture from `DIR/config.json` and, when present, the checkpoint's headers.

    `model_id` and `source` name the model where the directory's own name would not (a
    snapshot of a cache is named by its commit). `stored_sizes`: see `read_checkpoint`.
    `weights_optional`: a shard listed by the index but absent (a cache holding only
    config.json) sizes the model from config.json alone instead of being an error.
    """
    directory = Path(directory)
    fix = "point --model at a Hugging Face model directory"
    if not directory.exists():
        raise ModelError(f"{directory}: no such directory; {fix}")
    if not directory.is_dir():
        raise ModelError(
            f"{directory} is a file, not a directory; {fix} (the folder holding config.json)"
        )
    cfg_path = directory / "config.json"
    if not cfg_path.is_file():
        raise ModelError(f"no config.json in {directory}: {fix}")
    cfg = _read_json(cfg_path, "config.json", "re-download it")
    if model_id is None:
        model_id = cfg.get("_name_or_path") or directory.resolve().name
    from vramtui.models.hf_config import architecture_from_hf_config

    arch = architecture_from_hf_config(
        cfg,
        model_id=str(model_id),
        source=source or f"{directory}/config.json",
        whole_model=True,
    )
    if weights_optional and not _all_shards_present(directory):
        return arch, None
    return arch, read_checkpoint(directory, stored_sizes)


def _all_shards_present(directory: Path) -> bool:
    """False when a shard index lists a file the directory lacks (a partial download)."""
    if (directory / SINGLE_FILE).is_file() or not (directory / INDEX_FILE).is_file():
        return True
    index = _read_json(directory / INDEX_FILE, "the shard index", "re-download it")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict):
        return True  # read_checkpoint names the problem
    return all(isinstance(n, str) and (directory / n).is_file() for n in weight_map.values())


def compare_params(arch: Architecture, ckpt: CheckpointInfo) -> int:
    """Stored elements (quantisation metadata excluded) minus `arch.param_count`.

    Zero for a plain checkpoint whose config was counted right (tied embeddings are stored
    once). Packed quantised weights (I32 holding 8 four-bit values) make it negative: the
    ledger shows the difference rather than hiding it.
    """
    stored = sum(t.numel for t in ckpt.tensors if not t.is_quant_metadata)
    return stored - arch.param_count
