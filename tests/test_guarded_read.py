"""The guarded readers (`vramtui.guarded_read`): every failure class of every format becomes one
line of the caller's error class, and every command that reads a file says so in one line on
stderr, never with a traceback, a hang or a MemoryError.

Failure classes: nesting 100,000 levels deep (a RecursionError inside the parser), nesting
past the 64-level limit but within the parser's recursion, a 5,000-digit integer (past Python's
4,300-digit limit), bytes that are not UTF-8, a file over the cap, a wrong top-level type, and
for safetensors a header cut short and a header length of 2^63.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vramtui import guarded_read as gr
from vramtui.catalog import load_catalog
from vramtui.cli import main
from vramtui.config import load_config
from vramtui.errors import CatalogError, ModelError, SpecError, VramtuiError
from vramtui.feed.record import iter_recording, snapshot_line
from vramtui.feed.sample import FeedError, error_snapshot
from vramtui.measure.errors import LogImportError
from vramtui.models.checkpoint import load_local_model, read_safetensors_header
from vramtui.probe.records import ProbeFileError, parse_probe_lines
from vramtui.spec import load_spec, loads_spec

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO / "tui")}

DEEP = 100_000
DEEP_JSON_ARRAY = "[" * DEEP + "]" * DEEP
DEEP_JSON_OBJECT = '{"a":' * DEEP + "1" + "}" * DEEP
DEEP_TOML_ARRAY = "a = " + "[" * DEEP + "]" * DEEP + "\n"
DEEP_TOML_TABLE = "a = " + "{b = " * DEEP + "1" + "}" * DEEP + "\n"
# 100 levels: within the parsers' recursion, past the 64-level limit
NESTED_100_JSON = '{"a":' + "[" * 99 + "]" * 99 + "}"
NESTED_100_TOML = "a = " + "[" * 100 + "]" * 100 + "\n"
HUGE_INT = "1" * 5_000
NOT_UTF8 = b'name = "caf\xe9"\n'
INFERENCE_SPEC = """schema_version = 1
name = "bare inference"
[model]
params = 1000000000
[task]
kind = "inference"
[weights]
format = "bf16"
[lengths]
prompt_tokens = 10
generated_tokens = 10
[batch]
concurrency = 1
[runtime]
attention = "sdpa"
kv_cache_dtype = "bf16"
[placement]
gpus = 1
[headroom]
mode = "manual"
reserve_gib = 1.0
reason = "test"
"""


class Boom(VramtuiError):
    """The caller's error class: the guarded readers must raise exactly this."""


def one_line_error(info) -> str:
    text = str(info.value)
    assert "\n" not in text and text.strip() == text and text
    return text


# ----------------------------------------------------------------------------------- TOML


@pytest.mark.parametrize(
    "text", [DEEP_TOML_ARRAY, DEEP_TOML_TABLE, NESTED_100_TOML], ids=["array", "table", "100"]
)
def test_toml_deep_nesting(text):
    with pytest.raises(Boom) as info:
        gr.parse_toml(text, error=Boom, source="x.toml")
    msg = one_line_error(info)
    assert msg.startswith("x.toml nests arrays or tables more than 64 levels deep")


def test_toml_64_levels_are_read():
    data = gr.parse_toml("a = " + "[" * 63 + "]" * 63 + "\n", error=Boom, source="x.toml")
    depth, value = 1, data["a"]
    while value:
        value, depth = value[0], depth + 1
    assert depth == 63


def test_toml_huge_integer():
    with pytest.raises(Boom) as info:
        gr.parse_toml(f"a = {HUGE_INT}\n", error=Boom, source="x.toml")
    assert "x.toml holds an integer of more than 4300 digits" in one_line_error(info)


def test_toml_not_utf8(tmp_path):
    path = tmp_path / "x.toml"
    path.write_bytes(NOT_UTF8)
    with pytest.raises(Boom) as info:
        gr.read_toml(path, error=Boom, what="test file", source="x.toml")
    # the bad byte is the 12th (offset 11) of line 1
    assert "x.toml is not UTF-8 text (bad byte at line 1, offset 11); save it as UTF-8" in (
        one_line_error(info)
    )


def test_toml_oversize_is_refused_before_reading(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text("a = 1\n" + "#" * 1200 + "\n")  # 1,207 bytes
    with pytest.raises(Boom) as info:
        gr.read_toml(path, error=Boom, what="test file", source="x.toml", cap=1024)
    assert one_line_error(info).startswith("x.toml is over 1 KiB, the reading limit")
    assert gr.read_toml(path, error=Boom, what="test file", cap=1207) == {"a": 1}


def test_toml_syntax_error_names_line_and_column():
    with pytest.raises(Boom) as info:
        gr.parse_toml("a = 1\nb = = 2\n", error=Boom, source="x.toml")
    assert one_line_error(info).startswith("malformed TOML in x.toml at line 2, column 5")


def test_toml_wrong_top_level_type_cannot_happen_but_a_table_is_checked(tmp_path):
    # TOML's top level is always a table; a directory where the file should be is refused.
    with pytest.raises(Boom) as info:
        gr.read_toml(tmp_path, error=Boom, what="test file")
    assert "is a directory; give the path of the test file itself" in one_line_error(info)


# ----------------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    "text", [DEEP_JSON_ARRAY, DEEP_JSON_OBJECT, NESTED_100_JSON], ids=["array", "object", "100"]
)
def test_json_deep_nesting(text):
    with pytest.raises(Boom) as info:
        gr.parse_json(text, error=Boom, source="c.json", expect=None)
    assert one_line_error(info).startswith("c.json nests arrays or objects more than 64 levels")


def test_json_huge_integer():
    with pytest.raises(Boom) as info:
        gr.parse_json(f'{{"n": {HUGE_INT}}}', error=Boom, source="c.json")
    assert "c.json holds an integer of more than 4300 digits" in one_line_error(info)


def test_json_not_utf8():
    with pytest.raises(Boom) as info:
        gr.parse_json(b'{"a": "\xff"}', error=Boom, source="c.json")
    assert one_line_error(info).startswith("c.json is not UTF-8 text (bad byte at offset 7)")


def test_json_oversize(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"a": "x" * 2000}))
    with pytest.raises(Boom) as info:
        gr.read_json(path, error=Boom, what="config.json", source="c.json", cap=1024)
    assert one_line_error(info).startswith("c.json is over 1 KiB, the reading limit")


def test_json_wrong_top_level_type():
    with pytest.raises(Boom) as info:
        gr.parse_json("[1, 2]", error=Boom, source="c.json", fix="re-download it")
    assert one_line_error(info) == "c.json is an array, not an object; re-download it"


def test_json_syntax_error():
    with pytest.raises(Boom) as info:
        gr.parse_json('{"a": ', error=Boom, source="c.json")
    assert "c.json is not valid JSON (line 1 column 7" in one_line_error(info)


def test_local_config_json_problems_are_model_errors(tmp_path):
    for body in (DEEP_JSON_OBJECT, f'{{"num_hidden_layers": {HUGE_INT}}}', "[]"):
        (tmp_path / "config.json").write_text(body)
        with pytest.raises(ModelError) as info:
            load_local_model(tmp_path)
        assert one_line_error(info).startswith(f"{tmp_path / 'config.json'}: config.json ")
    (tmp_path / "config.json").write_bytes(b"{\xff}")
    with pytest.raises(ModelError, match="config.json is not UTF-8"):
        load_local_model(tmp_path)


# ----------------------------------------------------------------------------- JSON lines


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (DEEP_JSON_ARRAY, "nests arrays or objects more than 64 levels deep"),
        (f'{{"n": {HUGE_INT}}}', "holds an integer of more than 4300 digits"),
        (b'{"a": "\xff"}', "is not UTF-8 text"),
        ("[1]", "is an array, not an object"),
        ('{"a": ', "is not valid JSON"),
    ],
    ids=["deep", "huge-int", "not-utf8", "array", "syntax"],
)
def test_json_line_names_the_line(line, problem):
    with pytest.raises(Boom) as info:
        gr.parse_json_line(line, error=Boom, source="f.jsonl", lineno=7, fix="delete it")
    msg = one_line_error(info)
    assert msg.startswith(f"f.jsonl, line 7: {problem}") and msg.endswith("; delete it")


def _probe_text(stage_changes: dict, extra_line: str | None = None) -> str:
    run = {
        "vramtui_probe": 1,
        "kind": "run",
        "run_id": "r" * 32,
        "run_name": "",
        "pid": 1,
        "time": "2026-12-01T10:00:00+00:00",
        "host": "node",
        "cuda_available": True,
        "versions": {"torch": "2.13.0"},
        "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85_029_158_912}],
    }
    stage = {
        "vramtui_probe": 1,
        "kind": "stage",
        "run_id": "r" * 32,
        "stage": "decode",
        "time_start": "2026-12-01T10:00:01+00:00",
        "time_end": "2026-12-01T10:00:02+00:00",
        "seconds": 1.0,
        "dims": {},
        "measured": True,
        "reason": None,
        "error": None,
        "devices": [
            {
                "index": 0,
                "max_memory_allocated_bytes": 2_000,
                "max_memory_reserved_bytes": 3_000,
                "memory_allocated_bytes": 1_000,
                "memory_reserved_bytes": 2_000,
            }
        ],
        **stage_changes,
    }
    lines = [json.dumps(run), json.dumps(stage)]
    if extra_line is not None:
        lines.append(extra_line)
    return "\n".join(lines) + "\n"


def test_probe_file_reads_when_whole():
    (run,) = parse_probe_lines(_probe_text({}), "p.jsonl")
    assert run.stages[0].stage == "decode" and run.stages[0].devices[0].max_memory_allocated_bytes


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"error": 3}, "'error' is 3, not a string or null"),
        ({"reason": ["x"]}, "'reason' is list, not a string or null"),
        ({"time_end": 5}, "'time_end' is 5, not a string"),
        ({"seconds": 10**400}, "'seconds' is"),
        ({"seconds": "1"}, "'seconds' is '1', not a duration in seconds"),
        ({"warnings": [1]}, "'warnings' is not a list of strings"),
        ({"devices": [{"index": -1}]}, "a device entry without an index"),
    ],
)
def test_probe_record_wrong_types_name_the_line(changes, problem):
    with pytest.raises(ProbeFileError) as info:
        parse_probe_lines(_probe_text(changes), "p.jsonl")
    msg = one_line_error(info)
    assert msg.startswith("p.jsonl, line 2: ") and problem in msg


def test_probe_byte_counts_are_bounded():
    dev = {
        "index": 0,
        "max_memory_allocated_bytes": 2**64,
        "max_memory_reserved_bytes": 0,
        "memory_allocated_bytes": 0,
        "memory_reserved_bytes": 0,
    }
    with pytest.raises(ProbeFileError, match=r"line 2: 'max_memory_allocated_bytes' is 1844"):
        parse_probe_lines(_probe_text({"devices": [dev]}), "p.jsonl")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (DEEP_JSON_ARRAY, "nests arrays or objects more than 64 levels deep"),
        (f'{{"vramtui_probe": {HUGE_INT}}}', "holds an integer of more than 4300 digits"),
    ],
    ids=["deep", "huge-int"],
)
def test_probe_file_deep_or_huge_line_is_an_error_not_a_truncation(line, problem):
    # Even as the last line without its newline (where a line cut short is forgiven), a
    # parsable-but-hostile line is an error naming it.
    text = _probe_text({}) + line
    with pytest.raises(ProbeFileError) as info:
        parse_probe_lines(text, "p.jsonl")
    assert one_line_error(info).startswith(f"p.jsonl, line 3: the record {problem}")


def test_feed_recording_deep_line_names_the_line(tmp_path):
    path = tmp_path / "feed.jsonl"
    header = '{"vramtui_feed":1,"host":"box","started":1000.0}\n'
    good = snapshot_line(error_snapshot("box", 1000.0, "no driver"))
    path.write_text(header + good + DEEP_JSON_ARRAY + "\n")
    _, snaps = iter_recording(path)
    assert next(snaps).host == "box"
    with pytest.raises(FeedError) as info:
        next(snaps)
    assert one_line_error(info).startswith(
        f"{path}, line 3: the line nests arrays or objects more than 64 levels deep"
    )
    path.write_text(header + good + f'{{"schema": {HUGE_INT}}}\n')
    with pytest.raises(FeedError, match=r"line 3: the line holds an integer of more than 4300"):
        list(iter_recording(path)[1])
    # a deep header is no header
    path.write_text(DEEP_JSON_OBJECT + "\n" + good)
    with pytest.raises(FeedError, match="is not a vramtui feed recording"):
        iter_recording(path)


def test_feed_recording_line_length_is_capped(tmp_path, monkeypatch):
    import vramtui.feed.record as record

    monkeypatch.setattr(record, "MAX_LINE_BYTES", 4096)
    path = tmp_path / "feed.jsonl"
    path.write_text('{"vramtui_feed":1,"host":"box","started":1000.0}\n' + "x" * 10_000 + "\n")
    with pytest.raises(FeedError, match=r"line 2: longer than 0 MiB|line 2: longer than"):
        list(iter_recording(path)[1])


@pytest.mark.parametrize(
    "line",
    [DEEP_JSON_ARRAY.encode(), DEEP_JSON_OBJECT.encode(), f'{{"n": {HUGE_INT}}}'.encode()],
    ids=["deep-array", "deep-object", "huge-int"],
)
def test_ssh_agent_hostile_line_ends_the_connection(line):
    from vramtui.feed import ssh

    feed = ssh.HostFeed("gpu-node")
    header = {"vramtui_agent": ssh.AGENT_PROTOCOL}
    with pytest.raises(ssh._Protocol) as info:  # the pump returns it: the host goes stale
        feed._parse(line, header)
    msg = str(info.value)
    assert msg.startswith("gpu-node sent a line that ")
    assert "levels deep" in msg or "4300 digits" in msg
    assert len(msg) < 300


# ---------------------------------------------------------------------------- safetensors


def _safetensors(path: Path, header: bytes, length: int | None = None, data: bytes = b"") -> Path:
    n = len(header) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + header + data)
    return path


@pytest.mark.parametrize(
    ("header", "length", "problem"),
    [
        (b"{}", 2**63, "header length 9223372036854775808 exceeds the 100 MB limit"),
        (b"{}", 2**64 - 1, "header length 18446744073709551615 exceeds the 100 MB limit"),
        (b'{"a": {"dtype"', 100, "header length 100 exceeds the file size 22"),
        (DEEP_JSON_ARRAY.encode(), None, "header nests arrays or objects more than 64 levels"),
        (DEEP_JSON_OBJECT.encode(), None, "header nests arrays or objects more than 64 levels"),
        (f'{{"n": {HUGE_INT}}}'.encode(), None, "header holds an integer of more than 4300"),
        (b'{"\xff": 1}', None, "header is not UTF-8 text"),
        (b"[]", None, "header is an array, not a JSON object"),
        (b'{"a": ', None, "header is not valid JSON"),
    ],
    ids=[
        "length-2^63",
        "length-2^64-1",
        "past-eof",
        "deep-array",
        "deep-object",
        "huge-int",
        "not-utf8",
        "array",
        "syntax",
    ],
)
def test_safetensors_header_failures(tmp_path, header, length, problem):
    path = _safetensors(tmp_path / "model.safetensors", header, length)
    with pytest.raises(ModelError) as info:
        read_safetensors_header(path)
    msg = one_line_error(info)
    assert msg.startswith(f"{path}: {problem}")


def test_safetensors_truncated_length_field(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\x10\x00\x00")
    with pytest.raises(Boom) as info:
        gr.read_safetensors_header(path, error=Boom)
    assert "file is 3 bytes, shorter than the 8-byte header length" in one_line_error(info)


def test_safetensors_header_is_read_and_bounded(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path = _safetensors(tmp_path / "m.safetensors", header, data=b"\0" * 8)
    got, n, size = gr.read_safetensors_header(path, error=Boom)
    assert got["w"]["shape"] == [2] and n == len(header) and size == 8 + len(header) + 8
    with pytest.raises(Boom, match=r"header length \d+ exceeds the 16 bytes limit"):
        gr.read_safetensors_header(path, error=Boom, cap=16)


# --------------------------------------------------------------------------------- logs


class Endless(io.RawIOBase):
    """An endless stream of one byte (an endless pipe)."""

    def __init__(self, byte: bytes = b"x"):
        self.byte = byte
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        n = len(view)
        view[:] = (self.byte * (n // len(self.byte) + 1))[:n]
        self.served += n
        return n


def test_log_reader_stops_an_endless_stream_at_the_cap(monkeypatch):
    raw = Endless()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(raw)))
    with pytest.raises(LogImportError) as info:
        gr.read_log_text("-", error=LogImportError, what="log", cap=2**20)
    assert one_line_error(info).startswith("standard input is over 1 MiB, the reading limit")
    assert raw.served <= 2**20 + 64 * 1024  # read one byte past the cap, in buffered chunks


def test_log_reader_dev_zero_stops_at_the_cap():
    with pytest.raises(Boom) as info:
        gr.read_log_text("/dev/zero", error=Boom, what="log file", cap=2**20, too_big_fix="tail")
    assert one_line_error(info) == "log file /dev/zero is over 1 MiB, the reading limit; tail"


def test_log_reader_replaces_bad_bytes_and_refuses_big_files(tmp_path):
    path = tmp_path / "job.log"
    path.write_bytes(b"CUDA out of memory \xff\n")
    assert gr.read_log_text(path, error=Boom, what="log file", cap=100) == (
        "CUDA out of memory \ufffd\n"
    )
    with pytest.raises(Boom, match=r"is over 16 bytes, the reading limit"):
        gr.read_log_text(path, error=Boom, what="log file", cap=16)


def test_fifo_without_writer_does_not_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out: list = []

    def read():
        try:
            gr.read_bytes(fifo, error=Boom, what="log file", cap=100)
        except Boom as exc:
            out.append(str(exc))

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading a FIFO without a writer hung"
    assert out == [
        f"log file {fifo} is a FIFO (named pipe) that nothing wrote to; pass a regular file, "
        "or pipe the text to standard input"
    ]


def test_unreadable_paths(tmp_path, monkeypatch):
    with pytest.raises(Boom, match="absent does not exist; check the path"):
        gr.read_bytes(tmp_path / "absent", error=Boom, what="log file", cap=10)
    with pytest.raises(Boom, match="is a directory"):
        gr.read_bytes(tmp_path, error=Boom, what="log file", cap=10)
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(Boom, match="does not exist"):
        gr.read_bytes(dangling, error=Boom, what="log file", cap=10)
    with pytest.raises(Boom, match="cannot be read"):
        gr.read_bytes(str(tmp_path) + "/x\0y", error=Boom, what="log file", cap=10)
    locked = tmp_path / "locked.log"
    locked.write_text("x")
    real_open = os.open

    def denied(path, *a, **k):  # tests run as root: chmod 000 would not stop the read
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(Boom) as info:
        gr.read_bytes(locked, error=Boom, what="log file", cap=10)
    assert "cannot be read: permission denied" in one_line_error(info)


# ------------------------------------------------------------------ specs, catalogue, config


def test_spec_deep_nesting_and_huge_int_are_spec_errors(tmp_path):
    for text in (DEEP_TOML_ARRAY, DEEP_TOML_TABLE, f"schema_version = {HUGE_INT}\n"):
        with pytest.raises(SpecError) as info:
            loads_spec(text, "s.toml")
        assert one_line_error(info).startswith("s.toml ")
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * (8 * 2**20 + 1))
    with pytest.raises(SpecError, match=r"big.toml is over 8 MiB, the reading limit"):
        load_spec(path)


def _user_catalog(tmp_path: Path, name: str, body: bytes) -> Path:
    (tmp_path / "cat" / "gpus").mkdir(parents=True)
    (tmp_path / "cat" / "gpus" / name).write_bytes(body)
    return tmp_path / "cat"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (NOT_UTF8, "is not UTF-8 text"),
        (DEEP_TOML_ARRAY.encode(), "nests arrays or tables more than 64 levels deep"),
        (f"id = {HUGE_INT}\n".encode(), "holds an integer of more than 4300 digits"),
        (b"id = = 1\n", "malformed TOML in"),
    ],
    ids=["not-utf8", "deep", "huge-int", "syntax"],
)
def test_broken_user_gpu_files_are_skipped_with_a_warning(tmp_path, body, problem):
    directory = _user_catalog(tmp_path, "mine.toml", body)
    catalog = load_catalog(directory)
    assert "h100-sxm" in catalog.gpus  # built-ins still there
    (line,) = catalog.problems
    assert str(directory / "gpus") in line and "mine.toml" in line and problem in line
    assert "\n" not in line


def test_builtin_catalogue_stays_strict(tmp_path, monkeypatch):
    import vramtui.catalog as catalog_module

    (tmp_path / "gpus").mkdir()
    (tmp_path / "offers").mkdir()
    (tmp_path / "gpus" / "b.toml").write_bytes(NOT_UTF8)
    monkeypatch.setattr(catalog_module, "builtin_catalog_dir", lambda: tmp_path)
    getattr(catalog_module._builtin, "cache_clear", lambda: None)()
    with pytest.raises(CatalogError) as info:
        catalog_module.load_catalog(None, use_user_config=False)
    assert one_line_error(info).startswith("b.toml is not UTF-8 text")
    getattr(catalog_module._builtin, "cache_clear", lambda: None)()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'units = "gib"\nname = "\xff"\n', "is not UTF-8 text"),
        (DEEP_TOML_TABLE.encode(), "nests arrays or tables more than 64 levels deep"),
        (f"units = {HUGE_INT}\n".encode(), "holds an integer of more than 4300 digits"),
    ],
    ids=["not-utf8", "deep", "huge-int"],
)
def test_broken_config_gives_one_warning_and_defaults(tmp_path, body, problem):
    path = tmp_path / "config.toml"
    path.write_bytes(body)
    config = load_config(path)
    assert config.units == "gib" and config.keymap == {}
    (warning,) = config.warnings
    assert warning.startswith(f"{path} ") and problem in warning
    assert warning.endswith("; using defaults")


def test_model_catalogue_file_problems_are_model_errors(tmp_path):
    from vramtui.models.registry import load_catalog_file

    path = tmp_path / "org--m.toml"
    for body in (NOT_UTF8, DEEP_TOML_ARRAY.encode(), f"a = {HUGE_INT}\n".encode()):
        path.write_bytes(body)
        with pytest.raises(ModelError) as info:
            load_catalog_file(path)
        assert one_line_error(info).startswith(f"catalogue file {path} ")


def test_measure_import_gives_figures_the_spec_cannot_store_to_the_probe_line():
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.measure.importer import MeasureImportError, read_measurements_text

    # corpus_fraction > 1 passes the probe reader (any number >= 0) but no spec stores it
    text = _probe_text({"dims": {"corpus_fraction": 3}})
    with pytest.raises(MeasureImportError) as info:
        read_measurements_text(text, seed_example_spec(), source="p.jsonl")
    msg = one_line_error(info)
    assert msg.startswith("p.jsonl, line 2: the record holds a figure no spec can store")
    assert "corpus_fraction" in msg


# ------------------------------------------------------------------------------- the CLI


def cli_error(capsys, argv, code=2) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("vramtui: ")
    return lines[0]


def test_cli_estimate_deeply_nested_spec(tmp_path, capsys):
    spec = tmp_path / "deep.toml"
    spec.write_text(DEEP_TOML_ARRAY)
    line = cli_error(capsys, ["estimate", str(spec)])
    assert line == (
        f"vramtui: error: {spec} nests arrays or tables more than 64 levels deep (the limit); "
        "fix the spec file"
    )


def test_cli_estimate_spec_with_deep_local_config_json(tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(DEEP_JSON_OBJECT)
    spec = tmp_path / "s.toml"
    spec.write_text(
        INFERENCE_SPEC.replace("params = 1000000000", 'path = "model"')
    )
    line = cli_error(capsys, ["estimate", str(spec)])
    assert "config.json nests arrays or objects more than 64 levels deep" in line


def test_cli_gpus_skips_a_non_utf8_user_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    directory = _user_catalog(tmp_path, "mine.toml", NOT_UTF8)
    assert main(["gpus", "--catalog", str(directory)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    (line,) = captured.err.splitlines()
    assert line.startswith(f"vramtui: warning: {directory / 'gpus'}/mine.toml is not UTF-8")
    assert "NVIDIA H100" in captured.out  # built-ins still listed


@pytest.mark.parametrize(
    "body", [b"units = '\xff'\n", DEEP_TOML_TABLE.encode()], ids=["not-utf8", "deep"]
)
def test_app_starts_with_a_broken_config(monkeypatch, capsys, body):
    from vramtui.app.app import VramtuiApp
    from vramtui.config import config_path

    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    seen = []
    monkeypatch.setattr(VramtuiApp, "run", lambda self, *a, **k: seen.append(self.config))
    assert main(["app"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.err == ""
    (config,) = seen
    (warning,) = config.warnings
    assert warning.startswith(f"{path} ") and warning.endswith("; using defaults")


def _bare_spec(tmp_path: Path) -> Path:
    path = tmp_path / "bare.toml"
    path.write_text(INFERENCE_SPEC)
    return path


@pytest.mark.parametrize("with_spec", [True, False])
def test_cli_measure_import_error_number_blames_the_probe_file(tmp_path, capsys, with_spec):
    probe = tmp_path / "run.jsonl"
    probe.write_text(_probe_text({"error": 3}))
    spec = _bare_spec(tmp_path)
    before = spec.read_text()
    argv = ["measure", "import", str(probe)] + (["--spec", str(spec)] if with_spec else [])
    line = cli_error(capsys, argv)
    assert line == (
        "vramtui: error: run.jsonl, line 2: 'error' is 3, not a string or null; re-run the probe"
    )
    assert spec.read_text() == before  # nothing saved


def test_cli_measure_import_deep_nesting(tmp_path, capsys):
    probe = tmp_path / "run.jsonl"
    probe.write_text(_probe_text({}, extra_line=DEEP_JSON_ARRAY))
    line = cli_error(capsys, ["measure", "import", str(probe), "--spec", str(_bare_spec(tmp_path))])
    assert line.startswith(
        "vramtui: error: run.jsonl, line 3: the record nests arrays or objects more than 64"
    )


def test_cli_triage_directory_missing_and_unreadable(tmp_path, capsys, monkeypatch):
    line = cli_error(capsys, ["triage", str(tmp_path)])
    assert line == (
        f"vramtui: error: log file {tmp_path} is a directory; give the path of the log file "
        "itself"
    )
    line = cli_error(capsys, ["triage", str(tmp_path / "absent.log")])
    assert line.endswith("absent.log does not exist; check the path")
    locked = tmp_path / "locked.log"
    locked.write_text("CUDA out of memory")
    real_open = os.open

    def denied(path, *a, **k):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", denied)
    line = cli_error(capsys, ["triage", str(locked)])
    assert "cannot be read: permission denied" in line


def test_cli_triage_dev_zero_and_endless_stdin_stop_at_the_cap(capsys, monkeypatch):
    import vramtui.triage.command as triage_command

    monkeypatch.setattr(triage_command, "MAX_LOG_BYTES", 2**20)
    line = cli_error(capsys, ["triage", "/dev/zero"])
    assert line == (
        "vramtui: error: log file /dev/zero is over 1 MiB, the reading limit; pass its tail "
        "(tail -c 524288 /dev/zero > tail.log)"
    )
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Endless(b"y\n"))))
    line = cli_error(capsys, ["triage", "-"])
    assert line.startswith("vramtui: error: standard input is over 1 MiB, the reading limit")


def test_cli_triage_fifo_without_writer_subprocess(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out = subprocess.run(
        [sys.executable, "-m", "vramtui", "triage", str(fifo)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"vramtui: error: log file {fifo} is a FIFO")


def test_cli_watch_replay_deep_line(tmp_path, capsys):
    path = tmp_path / "feed.jsonl"
    path.write_text('{"vramtui_feed":1,"host":"box","started":1000.0}\n' + DEEP_JSON_ARRAY + "\n")
    line = cli_error(capsys, ["watch", "--replay", str(path), "--json", "--speed", "1000"])
    assert line == (
        f"vramtui: error: {path}, line 2: the line nests arrays or objects more than 64 levels "
        "deep (the limit); delete that line, or record again"
    )


def test_cli_models_skips_a_broken_user_model_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    from vramtui.models.registry import file_name_for

    models = tmp_path / "cat" / "models"
    models.mkdir(parents=True)
    builtin = REPO / "catalog" / "models" / file_name_for("Qwen/Qwen2.5-7B-Instruct")
    (models / builtin.name).write_bytes(builtin.read_bytes())
    (models / "org--broken.toml").write_text(DEEP_TOML_TABLE)
    assert main(["models", "--catalog", str(tmp_path / "cat")]) == 0
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line == (
        f"vramtui: warning: catalogue file {models / 'org--broken.toml'} nests arrays or tables "
        "more than 64 levels deep (the limit); fix or remove that file (file skipped)"
    )
    assert "Qwen/Qwen2.5-7B-Instruct" in captured.out
