"""A bounded walk over a GGUF header: its metadata and tensor infos, never the tensor data.

A GGUF file is: magic "GGUF", version (2 or 3), tensor count and key/value count (u64 each),
the key/value metadata, one info record per tensor (name, dims, ggml type, offset), padding to
`general.alignment`, then the tensor data. `walk_header` reads the header with every size
bounded (the limits below, each named in its message), so a hostile or damaged file is refused
in one line instead of making a parser loop or allocate.

The bytes may arrive in pieces (HTTP range reads of a file on the Hub): the walker then asks
its `more` callback for the bytes it needs, and says how far it may read ahead without passing
the end of the header (`floor`: the fewest bytes the rest of the header can take), so no byte
of the tensor data is ever asked for.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from vramtui.errors import ModelError
from vramtui.safe_text import safe_line

# Bounds on what a header may claim (real files: a few hundred to ~2,000 tensors, ~50 keys, a
# vocabulary of up to ~260k tokens and a few hundred thousand merges, chat templates of KiB).
MAX_GGUF_TENSORS = 100_000
MAX_GGUF_KV = 4_096
MAX_GGUF_STRING_BYTES = 16 * 2**20
MAX_GGUF_ARRAY_ITEMS = 8 * 2**20
MAX_GGUF_HEADER_BYTES = 512 * 2**20
# Reads through `more` (HTTP range requests for a file on the Hub): a real header takes about
# 50 (a 260k-token vocabulary, merges, 720 tensors), each string longer than the bytes the rest
# of the header must hold costing one; a header built to need one read per string is stopped.
MAX_GGUF_HEADER_READS = 1_000
INT64_MAX = 2**63 - 1  # ggml's ne[] are int64_t
GGML_MAX_DIMS = 4  # ggml.h GGML_MAX_DIMS
GGML_MAX_NAME = 64  # ggml.h: a tensor name is at most 63 bytes (gguf.cpp refuses longer ones)
SHOWN_KEY_CHARS = 80  # of a metadata key in a message
GGUF_VERSIONS = (2, 3)
GGUF_DEFAULT_ALIGNMENT = 32
MAX_KEPT_ARRAY = 4096  # a numeric array up to this long is kept in the metadata
MAX_KEPT_STRING = 4096  # characters of a string value kept in the metadata

# GGUF metadata value types (gguf.GGUFValueType) -> struct format of a scalar (None: string/array)
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY, _UINT32 = 8, 9, 4
# The fewest bytes one more key/value (key length, value type, a 1-byte value) and one more
# tensor info (name length, n_dims, one dim, type, offset) can take: what is still to come in
# the header is at least this much, so reading that far never reaches the tensor data.
_MIN_KV_BYTES = 8 + 4 + 1
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8


@dataclass(frozen=True)
class GgufTensor:
    name: str
    type_name: str  # ggml type, e.g. "Q4_K"
    shape: tuple[int, ...]  # ggml order: shape[0] is the row length (a linear's in_features)
    n_elements: int
    nbytes: int  # exact: n_elements / block size x type size

    @property
    def layer(self) -> int | None:
        """The block index of a `blk.N.` tensor, else None."""
        if self.name.startswith("blk."):
            head = self.name.split(".", 2)[1]
            if head.isdigit():
                return int(head)
        return None


@dataclass(frozen=True)
class GgufHeader:
    """What the header of one GGUF file says."""

    tensors: tuple[GgufTensor, ...]
    metadata: dict  # scalars, strings (cut to MAX_KEPT_STRING), numeric arrays up to 4096 items
    array_lengths: dict  # every array key -> its length
    header_bytes: int  # where the header ends (the tensor data starts at the next alignment)
    data_offset: int


def bad(where: str, problem: str, fix: str = "") -> ModelError:
    fix = fix or "re-download or re-convert the file"
    return ModelError(safe_line(f"GGUF file {where}: {problem}; {fix}"))


class _Walker:
    """Reads inside the file and within the limits, or raises one ModelError."""

    def __init__(self, where: str, buf, size: int, more):
        self.where, self.buf, self.size, self.more = where, buf, size, more
        self.avail = len(buf)
        self.pos = 0
        self.order = "<"
        self.kv_left = self.tensors_left = self.items_left = 0
        self.reads = 0

    def floor(self, end: int, tail: int = 0) -> int:
        """The fewest bytes the header can hold, given that `end` is needed now and the
        record being read takes at least `tail` bytes more."""
        return (
            end
            + tail
            + 8 * self.items_left
            + _MIN_KV_BYTES * self.kv_left
            + _MIN_TENSOR_INFO_BYTES * self.tensors_left
        )

    def need(self, n: int, what: str, tail: int = 0) -> None:
        end = self.pos + n
        if end > self.size:
            raise bad(
                self.where,
                f"ends inside its header ({what} at byte {self.pos:,}, file is {self.size:,} "
                "bytes): truncated or not a GGUF file",
            )
        if end > MAX_GGUF_HEADER_BYTES:
            raise bad(
                self.where,
                f"header is larger than vramtui's limit of {MAX_GGUF_HEADER_BYTES:,} bytes",
                "this is not a model header vramtui can read",
            )
        if end > self.avail:
            if self.more is None:
                raise bad(
                    self.where,
                    f"the header held here ends at byte {self.avail:,}, inside {what}",
                    "delete it (it is fetched again)",
                )
            self.reads += 1
            if self.reads > MAX_GGUF_HEADER_READS:
                raise bad(
                    self.where,
                    f"header took more than {MAX_GGUF_HEADER_READS:,} range reads "
                    f"(MAX_GGUF_HEADER_READS), stopped at byte {self.pos:,}",
                    "download the .gguf file and give its path",
                )
            target = min(self.floor(end, tail), self.size, MAX_GGUF_HEADER_BYTES)
            self.buf = self.more(target)
            self.avail = len(self.buf)
            if self.avail < end:
                raise bad(self.where, f"only {self.avail:,} bytes of its header came", "try again")

    def unpack(self, fmt: str, what: str, tail: int = 0):
        n = struct.calcsize(fmt)
        self.need(n, what, tail)
        value = struct.unpack_from(self.order + fmt, self.buf, self.pos)[0]
        self.pos += n
        return value

    def string(self, what: str, tail: int = 0) -> bytes:
        n = self.unpack("Q", what, tail)
        if n > MAX_GGUF_STRING_BYTES:
            raise bad(
                self.where,
                f"{what} claims a string of {n:,} bytes, over vramtui's limit of "
                f"{MAX_GGUF_STRING_BYTES:,} (MAX_GGUF_STRING_BYTES)",
            )
        self.need(n, what, tail)
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def value(self, vtype: int, what: str):
        """The value (an array: (item type, length, the items or None))."""
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype != _ARRAY:
            raise bad(self.where, f"{what} has unknown value type {vtype}")
        itype = self.unpack("I", what)
        count = self.unpack("Q", what)
        if count > MAX_GGUF_ARRAY_ITEMS:
            raise bad(
                self.where,
                f"{what} claims an array of {count:,} items, over vramtui's limit of "
                f"{MAX_GGUF_ARRAY_ITEMS:,} (MAX_GGUF_ARRAY_ITEMS)",
            )
        if itype in _SCALARS:
            fmt = _SCALARS[itype]
            n = count * struct.calcsize(fmt)
            self.need(n, what)
            items = None
            if 0 < count <= MAX_KEPT_ARRAY:
                items = list(struct.unpack_from(f"{self.order}{count}{fmt}", self.buf, self.pos))
            self.pos += n
            return itype, count, items
        if itype == _ARRAY:
            raise bad(self.where, f"{what} nests arrays, which GGUF models do not use")
        if itype != _STRING:
            raise bad(self.where, f"{what} has an array of unknown value type {itype}")
        self._skip_strings(count, what)
        return itype, count, None

    def _skip_strings(self, count: int, what: str) -> None:
        length = struct.Struct(self.order + "Q")
        for i in range(count):
            self.items_left = count - i - 1
            if self.pos + 8 > self.avail:
                self.need(8, what)
            (n,) = length.unpack_from(self.buf, self.pos)
            if n > MAX_GGUF_STRING_BYTES:
                raise bad(
                    self.where,
                    f"{what} claims a string of {n:,} bytes, over vramtui's limit of "
                    f"{MAX_GGUF_STRING_BYTES:,} (MAX_GGUF_STRING_BYTES)",
                )
            self.pos += 8
            if self.pos + n > self.avail:
                self.need(n, what)
            self.pos += n
        self.items_left = 0


def walk_header(
    where: str, buf, size: int, more: Callable[[int], bytes] | None = None
) -> GgufHeader:
    """The header of the GGUF file whose first bytes are `buf` and whole size is `size`.

    `more(n)`, when given, returns the file's first `n` bytes (n never passes the end of the
    header); without it `buf` must hold the whole header. ModelError when the header is
    truncated, broken or over the limits."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    w = _Walker(where, buf, size, more)
    w.need(4, "magic")
    if bytes(w.buf[0:4]) != b"GGUF":
        raise bad(where, "does not start with the GGUF magic: not a GGUF file", "check the path")
    w.pos = 4
    version = w.unpack("I", "version")
    if version & 0xFFFF == 0:  # written big-endian
        w.order = ">"
        version = struct.unpack_from(">I", w.buf, 4)[0]
    if version not in GGUF_VERSIONS:
        raise bad(
            where,
            f"GGUF version {version} is not supported (versions {', '.join(map(str, GGUF_VERSIONS))})",
            "re-convert it with a current llama.cpp",
        )
    n_tensors = w.unpack("Q", "tensor count")
    n_kv = w.unpack("Q", "key/value count")
    if n_tensors > MAX_GGUF_TENSORS:
        raise bad(
            where,
            f"header claims {n_tensors:,} tensors, over vramtui's limit of {MAX_GGUF_TENSORS:,} "
            "(MAX_GGUF_TENSORS)",
        )
    if n_kv > MAX_GGUF_KV:
        raise bad(
            where,
            f"header claims {n_kv:,} metadata keys, over vramtui's limit of {MAX_GGUF_KV:,} "
            "(MAX_GGUF_KV)",
        )
    w.tensors_left = n_tensors
    alignment = GGUF_DEFAULT_ALIGNMENT
    metadata: dict = {}
    lengths: dict = {}
    for i in range(n_kv):
        w.kv_left = n_kv - i - 1
        key = w.string(f"metadata key {i}", tail=4 + 1).decode("utf-8", "replace")
        shown = safe_line(key)[:SHOWN_KEY_CHARS]  # a key may be 16 MiB long: never all shown
        if key in metadata or key in lengths:
            raise bad(where, f"metadata key '{shown}' appears twice")
        vtype = w.unpack("I", f"metadata '{shown}'", tail=1)
        value = w.value(vtype, f"metadata '{shown}'")
        if key == "general.alignment":
            if vtype != _UINT32 or value == 0 or value & (value - 1):
                raise bad(where, f"general.alignment {value!r} is not a power of two (uint32)")
            alignment = value
        if vtype == _ARRAY:
            _itype, count, items = value
            lengths[key] = count
            if items is not None:
                metadata[key] = items
        elif vtype == _STRING:
            metadata[key] = safe_line(value.decode("utf-8", "replace"))[:MAX_KEPT_STRING]
        else:
            metadata[key] = value
    w.kv_left = 0
    known = {t.value for t in GGMLQuantizationType}
    infos = []
    names: set[str] = set()
    for i in range(n_tensors):
        w.tensors_left = n_tensors - i - 1
        raw_name = w.string(f"tensor {i} name", tail=24)
        if len(raw_name) >= GGML_MAX_NAME:
            raise bad(
                where,
                f"tensor {i} has a name of {len(raw_name):,} bytes, over ggml's limit of "
                f"{GGML_MAX_NAME - 1} (GGML_MAX_NAME)",
            )
        name = safe_line(raw_name.decode("utf-8", "replace"))
        if name in names:
            raise bad(where, f"tensor '{name[:80]}' appears twice")
        names.add(name)
        n_dims = w.unpack("I", f"tensor '{name}'", tail=20)
        if not 1 <= n_dims <= GGML_MAX_DIMS:
            raise bad(where, f"tensor '{name}' has {n_dims} dimensions (ggml allows 1-4)")
        dims = tuple(
            w.unpack("Q", f"tensor '{name}'", tail=8 * (n_dims - j - 1) + 12) for j in range(n_dims)
        )
        if any(d > INT64_MAX for d in dims):
            raise bad(where, f"tensor '{name}' has a dimension over 2^63 - 1 (ggml's int64)")
        raw = w.unpack("I", f"tensor '{name}'", tail=8)
        offset = w.unpack("Q", f"tensor '{name}'")
        if raw not in known:
            raise bad(where, f"tensor '{name}' has unknown ggml type {raw}", "update vramtui")
        qtype = GGMLQuantizationType(raw)
        block, type_size = GGML_QUANT_SIZES[qtype]
        n = 1
        for d in dims:
            n *= d
        if dims[0] % block:
            raise bad(
                where,
                f"tensor '{name}' rows of {dims[0]} values are not whole {block}-value blocks",
            )
        nbytes = n // block * type_size
        infos.append((offset, GgufTensor(name, qtype.name, dims, n, nbytes)))
    header_bytes = w.pos
    data_offset = header_bytes + (-header_bytes % alignment)
    for offset, t in infos:
        end = data_offset + offset + t.nbytes
        if end > size:
            raise bad(
                where,
                f"truncated: tensor '{t.name}' ends at byte {end:,} but the file has {size:,} bytes",
            )
    return GgufHeader(
        tensors=tuple(t for _, t in infos),
        metadata=metadata,
        array_lengths=lengths,
        header_bytes=header_bytes,
        data_offset=data_offset,
    )
