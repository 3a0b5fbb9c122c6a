"""Fuzz: GGUF repositories on the Hub (tests/fake_hub.py) with hostile headers and hostile file
lists, through `vramtui estimate --model OWNER/NAME[:QUANT]` in process.

The headers are mutated from a valid one written by the gguf package's GGUFWriter (flipped
bytes, counts and string lengths up to 2^64 - 1, wrong versions, big-endian, alignment 0,
duplicate keys, truncation) or carry hostile metadata values (block_count 2^63, a string where
a count goes, NaN, negatives). The file lists hold control characters, ANSI escapes, '../',
names over 255 bytes and hostile quant tags.

Property: exit 0 or 2; on 2 one `vramtui:` line on stderr, free of control characters and at
most MAX_LINE characters long; every request for a .gguf file is a range read, at most
MAX_GGUF_HEADER_READS + 1 of them and MAX_GGUF_HEADER_BYTES in all, none past the file's end,
and (on exit 0) none past the end of the header the walker found; the cache holds no
half-written folder and nothing is written outside it; no case takes more than 5 s.
Budget: about 15 s on 2 shared cores (160 generated cases and the known ones).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from fake_hub import FakeHub, FakeRepo, VirtualGguf, llama_cpp_tensors
from fuzz_support import PropertyFailure, fuzz_settings, time_limit, unexpected

from vramtui.models import gguf_header
from vramtui.models.gguf_header import (
    MAX_GGUF_HEADER_BYTES,
    MAX_GGUF_HEADER_READS,
    walk_header,
)
from vramtui.safe_text import has_unsafe

REPO = "o/fz-GGUF"
FILE = "fz-Q4_K_M.gguf"
MAX_LINE = 1_500
# 2 llama blocks of hidden 64 (4 heads, 2 KV heads of 16), intermediate 128, 32 tokens.
SMALL = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 32,
    "tie_word_embeddings": False,
}
T = gguf.GGUFValueType
BASE_META = {
    "llama.block_count": (2, T.UINT32),
    "llama.embedding_length": (64, T.UINT32),
    "llama.feed_forward_length": (128, T.UINT32),
    "llama.attention.head_count": (4, T.UINT32),
    "llama.attention.head_count_kv": (2, T.UINT32),
    "llama.context_length": (4096, T.UINT32),
    "general.alignment": (32, T.UINT32),
    "general.aaaa": (1, T.UINT32),
    "general.bbbb": (2, T.UINT32),  # renamed to general.aaaa: a duplicate key
}


def build(meta=None, big_endian: bool = False, tensors=None) -> VirtualGguf:
    """A header written by GGUFWriter: `meta` {key: (value, GGUFValueType)} over BASE_META, 32
    tokens, the llama tensors of SMALL in F16 (norms F32); the data region is not held."""
    meta = {**BASE_META, **(meta or {})}
    tensors = tensors if tensors is not None else llama_cpp_tensors(SMALL, "F16")
    endian = gguf.GGUFEndian.BIG if big_endian else gguf.GGUFEndian.LITTLE
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.gguf"
        w = gguf.GGUFWriter(str(path), "llama", endianess=endian)
        for key, (value, vtype) in meta.items():
            if vtype == T.ARRAY:
                w.add_array(key, value)
            else:
                w.add_key_value(key, value, vtype)
        w.add_token_list([b"t%d" % i for i in range(32)])
        data = 0
        for name, type_name, shape in tensors:
            qtype = gguf.GGMLQuantizationType[type_name]
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
            n = int(np.prod(shape))
            nbytes = n // block * type_size
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=qtype)
            data += nbytes + (-nbytes % 32)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        w.close()
        prefix = path.read_bytes()
    offset = len(prefix) + (-len(prefix) % 32)
    return VirtualGguf(prefix, offset, offset + data, data)


BASE = build()
BIG = build(big_endian=True)


def _fields(prefix: bytes, order: str) -> tuple[list[int], list[int]]:
    """(offsets of u64 fields: counts and string lengths; offsets of u32 fields: version,
    value types, alignment) of a BASE-like header."""
    u64, u32 = [8, 16], [4]
    for key in [*BASE_META, "tokenizer.ggml.tokens", "general.architecture", "token_embd.weight"]:
        raw = key.encode()
        at = prefix.find(struct.pack(order + "Q", len(raw)) + raw)
        if at >= 0:
            u64.append(at)
            u32.append(at + 8 + len(raw))  # the value type (or the tensor's n_dims)
            u32.append(at + 12 + len(raw))  # the value (the alignment) or the array's item type
    return u64, u32


FIELDS = {False: _fields(BASE.prefix, "<"), True: _fields(BIG.prefix, ">")}
U64S = [0, 1, 2, 255, 2**16, 2**31, 2**32, 2**63, 2**64 - 1, len(BASE.prefix), 10**9]
U32S = [0, 1, 2, 3, 4, 7, 9, 12, 13, 0x03000000, 2**31, 2**32 - 1, 64, 3]


@st.composite
def mutated_gguf(draw):
    """(what was done, the served file): BASE or BIG with 1-3 edits."""
    big = draw(st.booleans())
    base = BIG if big else BASE
    order = ">" if big else "<"
    u64, u32 = FIELDS[big]
    raw = bytearray(base.prefix)
    edits = ["big-endian"] if big else []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(
            st.sampled_from(["u64", "u64", "u32", "flip", "truncate", "insert", "cut", "dup"])
        )
        if op == "u64":
            at, value = draw(st.sampled_from(u64)), draw(st.sampled_from(U64S))
            if at + 8 <= len(raw):
                struct.pack_into(order + "Q", raw, at, value)
        elif op == "u32":
            at, value = draw(st.sampled_from(u32)), draw(st.sampled_from(U32S))
            if at + 4 <= len(raw):
                struct.pack_into(order + "I", raw, at, value)
        elif op == "flip":
            at, value = draw(st.integers(0, len(raw) - 1)), draw(st.integers(0, 255))
            if raw:
                raw[at] = value
        elif op == "truncate":
            at = draw(st.integers(0, len(raw)))
            del raw[at:]
        elif op == "insert":
            at = draw(st.integers(0, len(raw)))
            raw[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "cut":
            at = draw(st.integers(0, len(raw)))
            del raw[at : at + draw(st.integers(1, 64))]
        else:
            at = bytes(raw).find(b"general.bbbb")
            if at >= 0:
                raw[at : at + 12] = b"general.aaaa"
        edits.append(f"{op}@{at}" + (f"={value}" if op in ("u64", "u32", "flip") else ""))
    # A truncated file ends where its bytes end; otherwise the data region follows the header.
    cut = any(e.startswith("truncate") for e in edits)
    size = len(raw) if cut else base.size - len(base.prefix) + len(raw)
    served = VirtualGguf(bytes(raw), base.data_offset, size, base.tensor_bytes)
    return ", ".join(edits), served


# --- the check -------------------------------------------------------------------------------

_COMMITS = (f"{i:040x}" for i in itertools.count(1))


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The fake Hub, HF_ENDPOINT towards it and offline mode off (as conftest's fake_hub, but
    one server for the module: each case adds its repository at a fresh commit)."""
    import huggingface_hub.constants

    fake = FakeHub().start()
    fake.scratch = tmp_path_factory.mktemp("fuzz-gguf-hub")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_ENDPOINT", fake.url)
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
            mp.delenv(name, raising=False)
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
        yield fake
    fake.stop()


@pytest.fixture(autouse=True)
def _online(hub, monkeypatch):
    """conftest's per-test isolation sets HF_HUB_OFFLINE and HF_ENDPOINT back: undo it here."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def run_estimate(hub, files: dict, model: str) -> tuple[int, str, str]:
    """`vramtui estimate --model MODEL` against a repository of `files`, with a fresh cache;
    checks the property and returns (exit code, stdout, stderr)."""
    from vramtui.cli import main

    hub.requests.clear()
    hub.add(FakeRepo(REPO, next(_COMMITS), files))
    root = Path(tempfile.mkdtemp(dir=hub.scratch))
    cache = root / "cache"
    saved = os.environ.get("VRAMTUI_CACHE_DIR")
    os.environ["VRAMTUI_CACHE_DIR"] = str(cache)
    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            time_limit(what=f"estimate --model {model[:60]!r}"),
        ):
            rc = main(["estimate", "--model", model])
    except PropertyFailure:
        raise
    except BaseException as exc:  # noqa: BLE001 - the property: main() never raises
        raise unexpected(exc) from None
    finally:
        os.environ["VRAMTUI_CACHE_DIR"] = saved or ""
    stdout, stderr = out.getvalue(), err.getvalue()
    if rc not in (0, 2):
        raise PropertyFailure("exit-code", f"exit {rc}: {stderr[:300]!r}")
    lines = stderr.splitlines()
    if rc == 2:
        if len(lines) != 1 or not lines[0].startswith("vramtui: "):
            raise PropertyFailure("stderr", f"not one 'vramtui:' line: {stderr[:300]!r}")
        if has_unsafe(lines[0], multiline=False) or len(lines[0]) > MAX_LINE:
            raise PropertyFailure("dirty-line", f"{len(lines[0])} chars: {lines[0][:300]!r}")
    if "\x1b" in stdout + stderr:
        raise PropertyFailure("esc", "ESC reached the terminal")
    _check_requests(hub, files, rc)
    _check_cache(root, cache)
    return rc, stdout, stderr


def _check_requests(hub, files: dict, rc: int) -> None:
    asked = [r for r in hub.requests if r.path.lower().endswith(".gguf")]
    if len(asked) > MAX_GGUF_HEADER_READS + 1:
        raise PropertyFailure("reads", f"{len(asked)} requests for GGUF files")
    if any(r.range is None for r in asked):
        raise PropertyFailure("whole-file", "a GGUF file was asked for without a range")
    if sum(b - a + 1 for a, b in (r.range for r in asked)) > MAX_GGUF_HEADER_BYTES:
        raise PropertyFailure("bytes", "more bytes than MAX_GGUF_HEADER_BYTES")
    for r in asked:
        served = next((f for n, f in files.items() if r.path.endswith("/" + n)), None)
        if isinstance(served, VirtualGguf) and 0 < r.range[0] >= served.size:
            raise PropertyFailure("past-end", f"range {r.range} of a {served.size}-byte file")
        if rc == 0 and isinstance(served, VirtualGguf):
            whole = served.prefix + bytes(max(0, served.size - len(served.prefix)))
            end = walk_header("served", whole, served.size).header_bytes
            if r.range[1] >= end:
                raise PropertyFailure("past-header", f"range {r.range}, header ends at {end}")


def _check_cache(root: Path, cache: Path) -> None:
    outside = sorted(p.name for p in root.iterdir() if p.name != "cache")
    if outside:
        raise PropertyFailure("outside-cache", f"written beside the cache: {outside}")
    for path in cache.rglob("*") if cache.exists() else ():
        if path.name.startswith(".fetching-") or path.name.endswith(".tmp"):
            raise PropertyFailure("half-written", str(path.relative_to(cache)))
        if path.parent.name == "snapshots" and path.is_dir():  # a commit: its file folders
            for folder in path.iterdir():
                if folder.is_dir() and not (folder / "vramtui-fetched.json").is_file():
                    raise PropertyFailure("half-written", str(folder.relative_to(cache)))


# --- hostile headers --------------------------------------------------------------------------


def test_the_valid_header_is_read_to_its_last_byte_and_no_further(hub):
    for base in (BASE, BIG):
        rc, out, _ = run_estimate(hub, {FILE: base}, f"{REPO}:Q4_K_M")
        assert rc == 0, out
        asked = [r for r in hub.requests if r.path.endswith(FILE)]
        assert max(r.range[1] for r in asked) == len(base.prefix) - 1
        assert len(asked) < 20  # far from MAX_GGUF_HEADER_READS


@fuzz_settings(max_examples=60)
@given(case=mutated_gguf())
def test_mutated_headers_fuzz(hub, case):
    _edits, served = case
    run_estimate(hub, {FILE: served}, f"{REPO}:Q4_K_M")


HOSTILE_META = [
    ("llama.block_count", 2**63, T.UINT64),
    ("llama.block_count", 2**32 - 1, T.UINT32),
    ("llama.block_count", "2", T.STRING),
    ("llama.embedding_length", 2**63, T.UINT64),
    ("llama.attention.head_count", 2**63, T.UINT64),  # hung: 2^63 heads
    ("llama.attention.head_count", "x", T.STRING),
    ("llama.attention.head_count", float("nan"), T.FLOAT32),
    ("llama.attention.head_count_kv", -4, T.INT32),
    ("llama.attention.head_count_kv", [2, 2, 2], T.ARRAY),  # 3 counts for 2 layers
    ("llama.attention.key_length", 2**60, T.UINT64),
    ("llama.context_length", 2**63, T.UINT64),
    ("llama.context_length", "abc", T.STRING),
    ("llama.feed_forward_length", True, T.BOOL),
    ("llama.expert_count", "q", T.STRING),
    ("llama.expert_used_count", 1.5, T.FLOAT32),
    ("llama.attention.sliding_window", 2**63, T.UINT64),
]


@pytest.mark.parametrize("key, value, vtype", HOSTILE_META, ids=lambda v: repr(v)[:20])
def test_hostile_metadata_values_are_one_line_naming_the_key(hub, key, value, vtype):
    rc, _, err = run_estimate(hub, {FILE: build({key: (value, vtype)})}, f"{REPO}:Q4_K_M")
    assert rc == 2
    assert f"metadata '{key}'" in err


@fuzz_settings(max_examples=20)
@given(
    key=st.sampled_from(
        [k for k in BASE_META if k.startswith("llama.")]
        + ["llama.expert_count", "llama.attention.key_length"]
    ),
    value=st.one_of(
        st.tuples(st.sampled_from([0, 1, 2**31, 2**32 - 1]), st.just(T.UINT32)),
        st.tuples(st.sampled_from([-1, 2**63 - 1, -(2**63)]), st.just(T.INT64)),
        st.tuples(st.sampled_from([2**63, 2**64 - 1, 10**5]), st.just(T.UINT64)),
        st.tuples(st.floats(width=32), st.just(T.FLOAT32)),
        st.tuples(st.text(max_size=8), st.just(T.STRING)),
        st.tuples(st.booleans(), st.just(T.BOOL)),
    ),
)
def test_hostile_metadata_fuzz(hub, key, value):
    run_estimate(hub, {FILE: build({key: value})}, f"{REPO}:Q4_K_M")


def test_a_header_built_to_need_a_read_per_string_is_stopped(hub, monkeypatch):
    """Each string longer than the bytes the rest of the header must hold costs one range
    read; past MAX_GGUF_HEADER_READS the walk stops (lowered to 20 here to stay fast)."""
    monkeypatch.setattr(gguf_header, "MAX_GGUF_HEADER_READS", 20)
    strings = [b"s" * (8 * 100 + 1)] * 100  # 100 strings, each past the 8-byte-a-string floor
    served = build({"general.strings": (strings, T.ARRAY)})
    rc, _, err = run_estimate(hub, {FILE: served}, f"{REPO}:Q4_K_M")
    assert rc == 2
    assert "more than 20 range reads (MAX_GGUF_HEADER_READS)" in err
    assert len([r for r in hub.requests if r.path.endswith(FILE)]) == 1 + 20


def test_an_empty_file_is_named_empty(hub):
    rc, _, err = run_estimate(hub, {FILE: b""}, f"{REPO}:Q4_K_M")
    assert rc == 2
    assert f"{FILE} of {REPO} on the Hub is empty" in err


def test_a_dimension_past_int64_is_refused_by_the_walker():
    raw = bytearray(BASE.prefix)
    name = b"token_embd.weight"
    at = raw.find(struct.pack("<Q", len(name)) + name) + 8 + len(name) + 4  # its first dim
    struct.pack_into("<Q", raw, at, 2**63)
    with pytest.raises(Exception, match="dimension over 2\\^63 - 1"):
        walk_header("t", bytes(raw), BASE.size)


def test_a_tensor_named_blk_n_alone_in_a_moe_header_is_read():
    """`blk.0` (no leaf name) once raised IndexError when the expert layers were listed."""
    from vramtui.models.gguf_file import GgufModel, architecture_from_gguf

    served = build(
        {"llama.expert_count": (2, T.UINT32)},
        tensors=[*llama_cpp_tensors(SMALL, "F16"), ("blk.0", "F32", [4])],
    )
    header = walk_header("t", served.prefix, served.size)
    model = GgufModel.from_headers([Path("t.gguf")], [header], "t")
    arch = architecture_from_gguf(model)
    assert arch.moe_layers == (False, False)


# --- hostile file lists -----------------------------------------------------------------------

HOSTILE_NAMES = [
    "../x-Q4_K_M.gguf",
    "a/../../../b-Q4_K_M.gguf",
    "/abs-Q4_K_M.gguf",
    "a\\b-Q4_K_M.gguf",
    "m\x1b[31m-Q4_K_M.gguf",
    "m\x1b]52;c;aGk=\x07-Q8_0.gguf",
    "m\r\n-Q4_K_M.gguf",
    "\u202e-Q4_K_M.gguf",
    "x" * 300 + "-Q4_K_M.gguf",
    "d" * 300 + "/m-Q4_K_M.gguf",
    "d" * 200 + "/" + "e" * 200 + "-Q4_K_M.gguf",  # each name under 255 bytes: fetched
    "m-Q" + "z" * 240 + ".gguf",
    "Q4_K_M/m-Q4_K_M-00001-of-00002.gguf",  # part 2 missing
    "m-Q4_K_M-00001-of-99999.gguf",
    "mmproj-Q4_K_M.gguf",
    ".gguf",
    "m-Q4_K_M.gguf",
    "m-Q8_0.gguf",
    "m-UD-Q4_K_M.gguf",
]
HOSTILE_QUANTS = [
    None,
    "Q4_K_M",
    "q8_0",
    "Q4\x1b[2J",
    "Q" * 10_000,
    "",
    "../x",
    "UD-Q4_K_M",
    "Q4_K_M\x00",
    "z" * 240,
]


@fuzz_settings(max_examples=60)
@given(
    names=st.lists(
        st.one_of(
            st.sampled_from(HOSTILE_NAMES),
            st.text(max_size=12).map(lambda t: t + "-Q4_K_M.gguf"),
        ),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    quant=st.one_of(st.sampled_from(HOSTILE_QUANTS), st.text(max_size=12)),
)
def test_hostile_file_lists_fuzz(hub, names, quant):
    model = REPO if quant is None else f"{REPO}:{quant}"
    run_estimate(hub, dict.fromkeys(names, BASE), model)


@pytest.mark.parametrize(
    "name, problem",
    [
        ("../x-Q4_K_M.gguf", "is not a plain path inside the repository"),
        ("a/../../../b-Q4_K_M.gguf", "is not a plain path inside the repository"),
        ("m\x1b[31m-Q4_K_M.gguf", "holds control characters"),
        ("x" * 300 + "-Q4_K_M.gguf", "is longer than vramtui's limit (255 bytes a name)"),
    ],
    ids=["dotdot", "deep-dotdot", "ansi", "long"],
)
def test_unsafe_file_names_are_skipped_and_named(hub, name, problem):
    """A name that would become a path outside the cache, or one a terminal or a file system
    cannot take, is never fetched or written; the error line says it was skipped and why
    (a name over 255 bytes once ended in an internal error)."""
    rc, _, err = run_estimate(hub, {name: BASE}, f"{REPO}:Q4_K_M")
    assert rc == 2
    assert "1 .gguf name(s) skipped" in err and problem in err
    assert [r for r in hub.requests if r.path.endswith(".gguf")] == []


def test_long_folder_and_file_names_under_the_limit_are_fetched(hub):
    name = "d" * 200 + "/" + "e" * 200 + "-Q4_K_M.gguf"
    rc, _, _ = run_estimate(hub, {name: BASE}, f"{REPO}:Q4_K_M")
    assert rc == 0


def test_ten_thousand_gguf_files_are_refused_not_cut(hub):
    """The list was once cut to its first 4,096 names, hiding the quants past the cut."""
    files = {f"m{i:05d}-Q{i}.gguf": BASE for i in range(10_000)}
    rc, _, err = run_estimate(hub, files, f"{REPO}:Q9999")
    assert rc == 2
    assert "lists 10,000 .gguf files, over vramtui's limit of 4,096 (MAX_GGUF_FILES)" in err


def test_long_quants_are_cut_in_the_list_of_quants(hub):
    files = {f"m-Q{c * 200}.gguf": BASE for c in "abc"}
    rc, _, err = run_estimate(hub, files, REPO)
    assert rc == 2
    assert "QUANT one of " + ", ".join(f"Q{c * 36}..." for c in "abc") + "\n" in err
    assert len(err) < 600
