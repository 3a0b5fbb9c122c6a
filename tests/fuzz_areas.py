"""The fuzz suite's areas: strategies, checks and the issue's known hostile cases per area.

`AREAS` maps each area to (strategy factory, check, known cases): the pytest properties in
`tests/test_fuzz_*.py` and the long run `bench/fuzz_long.py` both use it.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import io
import json
import math
import tempfile
import tomllib
from functools import lru_cache
from pathlib import Path

from hypothesis import strategies as st

from fuzz_support import (
    CATALOG,
    HUGE_INT,
    SAMPLE_SPECS,
    TRIAGE_LOGS,
    VLLM_LOGS,
    CliCase,
    Mutated,
    NotedBytes,
    PropertyFailure,
    _deep_dict,
    _deep_list,
    _edit_repr,
    _no_esc,
    _plain_terminal,
    _render,
    check_cli,
    check_cli_case,
    guarded,
    hostile_strings,
    mutated,
    mutated_bytes,
    mutated_text,
    time_limit,
    unexpected,
    write_tree,
)


# --------------------------------------------------------------------------------------------
# Spec parser, ledger and shortlist
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def sample_spec_texts() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(SAMPLE_SPECS.glob("*.toml"))}


@lru_cache(maxsize=1)
def sample_spec_dicts() -> dict[str, dict]:
    return {name: tomllib.loads(text) for name, text in sample_spec_texts().items()}


SPEC_KEYS = ["gpus", "days", "params", "seq_len", "generate_tokens", "concurrency",
             "micro_batch", "grad_accum", "tp", "pp", "rank", "name", "id", "path", "reserve",
             "budget", "currency", "prompt_tokens", "max_model_len", "stage", "bytes", "value"]


def sample_with(name: str, path: tuple, value) -> dict:
    """A copy of sample spec `name` with the value at `path` set (tables made as needed)."""
    data = Mutated(copy.deepcopy(sample_spec_dicts()[name]))
    data.base, data.edits = name, [f"{'.'.join(path)} = {_edit_repr(value)}"]
    table = data
    for part in path[:-1]:
        table = table.setdefault(part, {})
    table[path[-1]] = value
    return data


@st.composite
def spec_dicts(draw):
    """A sample spec with hostile edits, as data for spec_from_dict."""
    name = draw(st.sampled_from(sorted(sample_spec_dicts())))
    return draw(mutated(sample_spec_dicts()[name], SPEC_KEYS, name))


def _toml_or_none(data) -> str | None:
    import tomli_w

    try:
        return tomli_w.dumps(data)
    except Exception:  # noqa: BLE001 - None, deep nesting, 5000-digit ints: not writable
        return None


@st.composite
def spec_texts(draw):
    """TOML text: a mutated sample written out, a sample with text edits, or raw text."""
    kind = draw(st.sampled_from(["dict", "dict", "edit", "edit", "raw", "deep"]))
    if kind == "dict":
        text = _toml_or_none(draw(spec_dicts()))
        if text is not None:
            return text
        kind = "edit"
    if kind == "edit":
        name = draw(st.sampled_from(sorted(sample_spec_texts())))
        return draw(mutated_text(sample_spec_texts()[name]))
    if kind == "deep":
        depth = draw(st.sampled_from([10, 900, 1100, 5000, 50_000]))
        return draw(
            st.sampled_from(
                [
                    "x = " + "[" * depth + "]" * depth,
                    "x = " + "{a=" * depth + "1" + "}" * depth,
                    "[model]\nid = " + "[" * depth + "]" * depth,
                ]
            )
        )
    return draw(st.text(max_size=200))


@st.composite
def spec_bytes(draw):
    name = draw(st.sampled_from(sorted(sample_spec_texts())))
    return draw(mutated_bytes(sample_spec_texts()[name].encode("utf-8")))


@lru_cache(maxsize=1)
def builtin_catalog():
    from vramtui.catalog import load_catalog

    return load_catalog(None, use_user_config=False)


def _spec_pipeline(spec) -> str:
    """What `estimate` and `shortlist` do with a valid spec, rendered without a terminal."""
    from vramtui.ledger import estimate
    from vramtui.ledger.report import estimate_to_dict
    from vramtui.models.resolve import resolve_model
    from vramtui.render import estimate_renderable, shortlist_renderable
    from vramtui.shortlist import shortlist, shortlist_to_dict
    from vramtui.spec import dumps_spec, validate_against_architecture

    arch, checkpoint = resolve_model(spec.model, None)
    if arch is not None:
        validate_against_architecture(spec, arch, "fuzz.toml")
    est = estimate(spec, arch, checkpoint)
    json.dumps(estimate_to_dict(est, spec), default=str)
    _no_esc(_render(estimate_renderable(est, "gib", True, spec=spec)), "estimate output")
    sl = shortlist(spec, est, builtin_catalog(), arch=arch, today=datetime.date(2026, 12, 1))
    json.dumps(shortlist_to_dict(sl), default=str)
    _no_esc(_render(shortlist_renderable(sl, est, "gib", None)), "shortlist output")
    dumps_spec(spec, "fuzz.toml")
    return "valid"


def check_spec_data(data) -> str:
    """spec_from_dict: a Spec (then estimate + shortlist) or a one-line SpecError."""
    from vramtui.spec import spec_from_dict

    def run():
        spec = spec_from_dict(data, "fuzz.toml")
        return _spec_pipeline(spec)

    return guarded(run, "spec_from_dict")


def check_spec_text(text: str) -> str:
    """loads_spec: a Spec (then estimate + shortlist) or a one-line SpecError."""
    from vramtui.spec import loads_spec

    return guarded(lambda: _spec_pipeline(loads_spec(text, "fuzz.toml")), "loads_spec")


def check_spec_bytes(raw: bytes) -> str:
    """load_spec on a file holding `raw` (non-UTF-8 bytes included)."""
    from vramtui.spec import load_spec

    with tempfile.TemporaryDirectory(prefix="vramtui-fuzz-") as tmp:
        path = Path(tmp) / "spec.toml"
        path.write_bytes(raw)
        return guarded(lambda: _spec_pipeline(load_spec(path)), "load_spec")


# --------------------------------------------------------------------------------------------
# Catalogue loader
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def catalog_files() -> dict[str, dict[str, str]]:
    """Built-in catalogue texts by folder (gpus, offers, models) and file name."""
    return {
        folder: {
            p.name: p.read_text(encoding="utf-8")
            for p in sorted((CATALOG / folder).glob("*.toml"))
        }
        for folder in ("gpus", "offers", "models")
    }


CATALOG_KEYS = ["id", "gpu", "gpu_count", "price", "hours", "value", "provider", "title",
                "lead_time_hours", "host_ram_gb", "num_hidden_layers", "hidden_size",
                "num_key_value_heads", "head_dim", "vocab_size", "hub_id", "aliases"]


@st.composite
def catalog_file_contents(draw, folder: str):
    """(name, bytes) of one mutated catalogue file from `folder`."""
    files = catalog_files()[folder]
    name = draw(st.sampled_from(sorted(files)))
    text = files[name]
    how = draw(st.sampled_from(["data", "data", "text", "bytes"]))
    if how == "data":
        data = draw(mutated(tomllib.loads(text), CATALOG_KEYS, f"{folder}/{name}"))
        out = _toml_or_none(data)
        if out is not None:
            return name, NotedBytes(out.encode("utf-8"), repr(data))
        how = "text"
    if how == "text":
        return name, draw(mutated_text(text)).encode("utf-8", "surrogatepass")
    return name, draw(mutated_bytes(text.encode("utf-8")))


@st.composite
def catalog_dirs(draw):
    """{relative path: bytes} of a user catalogue: 1-3 mutated files, maybe an intact one."""
    files: dict[str, bytes] = {}
    for _ in range(draw(st.integers(1, 3))):
        folder = draw(st.sampled_from(["gpus", "offers", "offers", "models"]))
        name, raw = draw(catalog_file_contents(folder))
        files[f"{folder}/{name}"] = raw
    if draw(st.booleans()):  # a sound user GPU beside the broken files
        files["gpus/h100-sxm.toml"] = catalog_files()["gpus"]["h100-sxm.toml"].encode()
    return files


def check_catalog_dir(path) -> str:
    """load_catalog(user dir) never raises; each problem is one line; then the listings."""
    from vramtui.catalog import load_catalog

    path = Path(path)
    try:
        with time_limit(what="load_catalog"):
            catalog = load_catalog(path, use_user_config=False)
    except PropertyFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - the property: never raises
        raise unexpected(exc) from None
    for problem in catalog.problems:
        if "\n" in problem or "\r" in problem:
            raise PropertyFailure("multiline-warning", f"catalogue problem: {problem[:200]!r}")
    outcomes = [f"{len(catalog.problems)} problem(s)"]
    for command in (["gpus"], ["offers"], ["models"], ["shortlist", "--json"]):
        outcomes.append(check_cli([*command, "--catalog", str(path)]))
    return "; ".join(outcomes)


def check_catalog_files(files: dict[str, bytes]) -> str:
    with tempfile.TemporaryDirectory(prefix="vramtui-fuzz-") as tmp:
        write_tree(Path(tmp), files)
        return check_catalog_dir(tmp)


# --------------------------------------------------------------------------------------------
# Triage reader
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def triage_logs() -> dict[str, str]:
    return {
        p.name: p.read_bytes().decode("utf-8", "replace") for p in sorted(TRIAGE_LOGS.glob("*.log"))
    }


OOM_LINES = [
    # A wrapped PyTorch message with no end marker, as when the log is cut or repeated.
    "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.35 GiB total capacity; 70.00 GiB "
    "already allocated",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.11 GiB of which 1.19 GiB is free.",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1e300 GiB (GPU 0; "
    "79.35 GiB total capacity; 9" + "9" * 400 + " GiB already allocated)",
    "RuntimeError: CUDA error: out of memory",
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 99999999999999999999.00 MiB on "
    "device 0: cudaMalloc failed: out of memory",
    "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens "
    "that can be stored in KV cache (9223372036854775807).",
]
LOG_SNIPPETS = [*OOM_LINES, "\x1b[31m", "\x1b]52;c;aGk=\x07", "\r", "\x00", "  File \"x.py\", "
                "line 1, in <module>", "Traceback (most recent call last):", "    ", "\t" * 50]


@st.composite
def triage_texts(draw):
    """Mutated real logs, repeated OOM lines without an end marker, long lines, random text."""
    kind = draw(st.sampled_from(["log", "log", "log", "repeat", "long", "raw"]))
    if kind == "raw":
        return draw(st.text(max_size=2000))
    if kind == "repeat":
        line = draw(st.sampled_from(OOM_LINES))
        count = draw(st.sampled_from([10, 200, 2000]))
        sep = draw(st.sampled_from(["\n", "\n  continued\n", "\r\n"]))
        return (line + sep) * count
    if kind == "long":
        width = draw(st.sampled_from([10_000, 100_000, 200_000]))
        char = draw(st.sampled_from(["a", " ", "9", "GiB ", "(", "\x1b["]))
        return draw(st.sampled_from(OOM_LINES)) + "\n" + (char * width)[:width] + "\n"
    name = draw(st.sampled_from(sorted(triage_logs())))
    lines = triage_logs()[name].splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        n = len(lines)
        op = draw(st.sampled_from(["drop", "truncate", "prefix", "repeat", "insert", "cut"]))
        i = draw(st.integers(0, max(0, n - 1)))
        if op == "drop" and lines:
            del lines[i]
        elif op == "truncate":
            lines = lines[:i]
        elif op == "prefix":
            pre = draw(st.sampled_from(["[rank0]: ", "2026-12-01 10:00:00 ", "\x1b[1m", "> ", "|"]))
            lines = [pre + ln for ln in lines]
        elif op == "repeat" and lines:
            lines[i:i] = [lines[i]] * draw(st.sampled_from([2, 50, 500]))
        elif op == "insert":
            lines.insert(i, draw(st.sampled_from(LOG_SNIPPETS)) + "\n")
        elif op == "cut" and lines:
            ln = lines[i]
            lines[i] = ln[: draw(st.integers(0, len(ln)))]
    return "".join(lines)


@lru_cache(maxsize=1)
def triage_spec():
    from vramtui.spec import load_spec

    return load_spec(SAMPLE_SPECS / "llama-3.1-8b-chat-8k-x16.toml")


def check_triage_text(text: str) -> str:
    """read_log returns a reading (never raises); with a spec, advice; output has no ESC."""
    from vramtui.triage.command import _print, triage_to_dict
    from vramtui.triage.reader import read_log

    try:
        with time_limit(what="read_log"):
            reading = read_log(text)
    except PropertyFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - the property: never raises
        raise unexpected(exc) from None

    def advise_and_print():
        from vramtui.models.resolve import resolve_model
        from vramtui.triage.advice import advise

        advice = None
        if reading.is_oom:
            spec = triage_spec()
            arch, checkpoint = resolve_model(spec.model, None)
            advice = advise(reading, spec, arch, checkpoint, builtin_catalog())
        json.dumps(triage_to_dict(reading, advice), default=str)
        out = io.StringIO()
        with _plain_terminal(), contextlib.redirect_stdout(out):
            _print(reading, advice)
        _no_esc(out.getvalue(), "triage output")
        return "oom" if reading.is_oom else "not oom"

    return guarded(advise_and_print, "triage advice")


# --------------------------------------------------------------------------------------------
# Measure importers: vLLM logs and probe files
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def vllm_logs() -> dict[str, str]:
    return {
        p.name: p.read_bytes().decode("utf-8", "replace") for p in sorted(VLLM_LOGS.glob("*.log"))
    }


PROBE_RUN = {
    "vramtui_probe": 1,
    "kind": "run",
    "run_id": "a" * 32,
    "run_name": "",
    "pid": 1,
    "time": "2026-12-01T10:00:00+00:00",
    "host": "node",
    "cuda_available": True,
    "versions": {"python": "3.11.7", "torch": "2.13.0", "cuda": "12.8", "driver": "570.86.15"},
    "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85_029_158_912}],
}


def _probe_stage(stage: str, alloc: int, error) -> dict:
    return {
        "vramtui_probe": 1,
        "kind": "stage",
        "run_id": "a" * 32,
        "stage": stage,
        "time_start": "2026-12-01T10:00:01+00:00",
        "time_end": "2026-12-01T10:00:02+00:00",
        "seconds": 1.0,
        "dims": {"micro_batch": 4, "seq_len": 2048},
        "measured": True,
        "reason": None,
        "error": error,
        "devices": [
            {
                "index": 0,
                "max_memory_allocated_bytes": alloc,
                "max_memory_reserved_bytes": alloc + 1_000_000,
                "memory_allocated_bytes": alloc // 2,
                "memory_reserved_bytes": alloc,
                "nvml_used_bytes": alloc + 900_000_000,
                "nvml_process_used_bytes": None,
                "nvml_total_bytes": 85_520_809_984,
            }
        ],
    }


PROBE_RECORDS = [
    PROBE_RUN,
    _probe_stage("load", 2_000_000_000, None),
    _probe_stage("forward", 9_000_000_000, None),
    _probe_stage("backward", 20_000_000_000, "CUDA out of memory"),
]

MEASURE_KEYS = ["error", "stage", "seconds", "dims", "devices", "index", "run_id", "time",
                "max_memory_allocated_bytes", "vramtui_probe", "kind", "measured"]


def _json_or_none(obj) -> str | None:
    try:
        return json.dumps(obj, allow_nan=True)
    except (ValueError, TypeError, RecursionError):
        return None


@st.composite
def probe_texts(draw):
    """Probe JSON lines with hostile edits: wrong types, nesting, huge ints, cut lines."""
    records = draw(mutated({"r": copy.deepcopy(PROBE_RECORDS)}, MEASURE_KEYS)).get("r", [])
    if not isinstance(records, list):
        records = [records]
    lines = []
    for rec in records:
        line = _json_or_none(rec)
        lines.append(line if line is not None else '{"vramtui_probe": 1, "kind": "stage"')
    if draw(st.booleans()):
        i = draw(st.integers(0, len(lines)))
        lines.insert(i, draw(st.sampled_from([
            '{"vramtui_probe": 1, "kind": "stage", "run_id": ' + "[" * 5000 + "]" * 5000 + "}",
            '{"vramtui_probe": 1, "kind": "run", "pid": ' + "9" * 5000 + "}",
            '{"vramtui_probe": 1, "kind": "stage", "run_id": "' + "a" * 32,
            "\x1b[2J",
            "",
        ])))
    return "\n".join(lines) + draw(st.sampled_from(["\n", ""]))


@st.composite
def measure_texts(draw):
    kind = draw(st.sampled_from(["vllm", "vllm", "probe", "probe", "raw"]))
    if kind == "probe":
        return draw(probe_texts())
    if kind == "raw":
        return draw(st.text(max_size=500))
    name = draw(st.sampled_from(sorted(vllm_logs())))
    lines = vllm_logs()[name].splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        n = len(lines)
        i = draw(st.integers(0, max(0, n - 1)))
        op = draw(st.sampled_from(["drop", "truncate", "edit", "repeat", "insert"]))
        if op == "drop" and lines:
            del lines[i]
        elif op == "truncate":
            lines = lines[:i]
        elif op == "edit" and lines:
            lines[i] = draw(mutated_text(lines[i]))
        elif op == "repeat" and lines:
            lines[i:i] = [lines[i]] * draw(st.sampled_from([2, 100, 2000]))
        elif op == "insert":
            number = draw(st.sampled_from(["1e308", "9" * 5000, "nan", "-1", "inf",
                                           "18446744073709551616"]))
            head = "INFO 08-20 10:15:30 "
            lines.insert(i, draw(st.sampled_from([
                f"{head}[gpu_worker.py:276] Available KV cache memory: {number} GiB\n",
                f"{head}[kv_cache_utils.py:849] GPU KV cache size: {number} tokens\n",
                f"{head}[gpu_model_runner.py:1953] Model loading took {number} GiB and 2.1 s\n",
                f"(VllmWorker rank={number} pid=1) {head}[x.py:1] Using max model len {number}\n",
                "\x1b]52;c;aGk=\x07\n",
            ])))
    return "".join(lines)


@lru_cache(maxsize=1)
def measure_specs():
    from vramtui.spec import loads_spec

    bare = (
        'schema_version = 1\nname = "bare 1e9 full fine-tune"\n[model]\nparams = 1000000000\n'
        '[task]\nkind = "full_finetune"\n[weights]\nformat = "bf16"\n[lengths]\nseq_len = 2048\n'
        "[batch]\nmicro_batch = 4\ngrad_accum = 1\n[training]\noptimizer = \"adamw\"\n"
        'master_weights_fp32 = true\ngrad_dtype = "bf16"\noptimizer_state_dtype = "fp32"\n'
        'grad_checkpointing = "none"\n[runtime]\nattention = "sdpa"\n[placement]\ngpus = 1\n'
        '[headroom]\nmode = "itemised"\n'
    )
    return [loads_spec(bare, "bare.toml"), triage_spec()]


def check_measure_text(text: str) -> str:
    """The importers on `text`: measurements or a one-line VramtuiError; then merged, estimated."""
    from vramtui.ledger import estimate
    from vramtui.measure.importer import merge_measurements, read_measurements_text
    from vramtui.measure.vllm_log import looks_like_vllm_log, parse_vllm_log
    from vramtui.models.resolve import resolve_model
    from vramtui.probe.records import parse_probe_lines

    outcomes = []
    outcomes.append(guarded(lambda: parse_probe_lines(text, "fuzz.jsonl") and "runs", "probe"))
    if looks_like_vllm_log(text):
        outcomes.append(guarded(lambda: parse_vllm_log(text, "fuzz.log") and "startup", "vllm"))
    for spec in measure_specs():

        def run(spec=spec):
            result = read_measurements_text(text, spec, source="fuzz.log")
            for line in (*result.skipped, *result.warnings, result.summary()):
                if "\n" in line:
                    raise PropertyFailure("multiline-warning", f"importer note: {line[:200]!r}")
            merged, _ = merge_measurements(spec, result.measurements)
            arch, checkpoint = resolve_model(merged.model, None)
            estimate(merged, arch, checkpoint)
            return f"{len(result.measurements)} measured"

        outcomes.append(guarded(run, "measure import"))
    return "; ".join(outcomes)


# --------------------------------------------------------------------------------------------
# CLI argv
# --------------------------------------------------------------------------------------------

NUMBER_WORDS = ["7e9", "16", "6", "0", "-1", "1e300", "1e307", "-1e307", "nan", "inf", "-inf",
                "9223372036854775808", "1e-320", "9" * 5000, "", "abc", "1_000", "0x10",
                "\x1b[2J", "1e6", "9999", "3650", "100000", "2.5"]
INT_WORDS = ["1", "0", "-1", "2", "8", "100000", "100001", "9223372036854775808", "4096",
             "131072", "1" + "0" * 30, "x", "", "7"]


def _flag(name: str, words):
    return st.tuples(st.just(name), st.sampled_from(words)).map(list)


_spec_flags = st.one_of(
    _flag("--seq", INT_WORDS),
    _flag("--generate", INT_WORDS),
    _flag("--batch", INT_WORDS),
    _flag("--grad-accum", INT_WORDS),
    _flag("--gpus", INT_WORDS),
    _flag("--tp", INT_WORDS),
    _flag("--pp", INT_WORDS),
    _flag("--lora-rank", INT_WORDS),
    _flag("--lora-targets", ["q_proj,v_proj", "", ",", "all-linear", "\x1b[2J"]),
    _flag("--task", ["inference", "full_finetune", "lora", "qlora"]),
    _flag("--format", ["fp32", "bf16", "fp16", "fp8", "int8", "nf4", "fp4", "gptq", "awq",
                       "gguf", "nope", "\x1b[2J"]),
    _flag("--kv-dtype", ["fp8", "bf16"]),
    _flag("--sharding", ["none", "zero3", "fsdp"]),
    _flag("--checkpointing", ["none", "full"]),
    _flag("--units", ["gib", "gb", "mib", "bytes"]),
    _flag("--model", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-0.6B", "m" * 300,
                      "\x1b]52;c;aGk=\x07", "no/such-model", "./nowhere", "{tmp}"]),
    st.just(["--json"]),
    st.just(["--explain"]),
)

_simple_flags = st.one_of(
    _flag("--params", NUMBER_WORDS),
    _flag("--bits", NUMBER_WORDS),
    _flag("--headroom-gib", NUMBER_WORDS),
)


@st.composite
def cli_cases(draw):
    command = draw(st.sampled_from(["estimate", "estimate", "shortlist", "shortlist", "triage",
                                    "gpus", "offers", "models"]))
    files: dict[str, bytes] = {}
    stdin = None
    argv = [command]
    if command in ("estimate", "shortlist"):
        if draw(st.booleans()):
            spec = draw(st.sampled_from(sorted(sample_spec_texts())))
            argv.append(str(SAMPLE_SPECS / spec))
        if command == "estimate" and draw(st.booleans()):
            for flags in draw(st.lists(_simple_flags, min_size=1, max_size=3)):
                argv += flags
        for flags in draw(st.lists(_spec_flags, max_size=4)):
            argv += flags
        if command == "shortlist":
            for flags in draw(st.lists(st.one_of(
                _flag("--days", NUMBER_WORDS),
                _flag("--today", ["2026-12-01", "9999-12-31", "0001-01-01", "x", "\x1b[2J"]),
                _flag("--detail", ["sample-b-h100-sxm-x1", "none", "\x1b[2J"]),
            ), max_size=2)):
                argv += flags
    elif command == "triage":
        source = draw(st.sampled_from(["file", "file", "stdin", "missing", "dir"]))
        if source == "file":
            files["job.log"] = draw(triage_texts()).encode("utf-8", "surrogatepass")
            argv.append("{tmp}/job.log")
        elif source == "stdin":
            argv.append("-")
            stdin = draw(triage_texts())
        elif source == "missing":
            argv.append("{tmp}/missing.log")
        else:
            argv.append("{tmp}")
        if draw(st.booleans()):
            spec = draw(st.sampled_from(sorted(sample_spec_texts())))
            files["spec.toml"] = sample_spec_texts()[spec].encode()
            argv += ["--spec", "{tmp}/spec.toml"]
            if draw(st.booleans()):
                argv += ["--apply", draw(st.sampled_from(["1", "2", "0", "-1", "99"]))]
            if draw(st.booleans()):
                argv.append("--record-measured")
        if draw(st.booleans()):
            argv.append("--json")
    else:
        if draw(st.booleans()):
            files.update(draw(catalog_dirs()))
            argv += ["--catalog", "{tmp}"]
        elif draw(st.booleans()):
            argv += ["--catalog", draw(st.sampled_from(["{tmp}/none", "\x1b[2J", "~" + "d" * 300]))]
        if command == "models" and draw(st.booleans()):
            argv.append(draw(hostile_strings))
    return CliCase(argv, files, stdin)


# --------------------------------------------------------------------------------------------
# Known hostile cases (the values the issue names), run before the generated ones
# --------------------------------------------------------------------------------------------

SEED = "seed-7b-fp16-inference.toml"
LLAMA = "llama-3.1-8b-chat-8k-x16.toml"


def known_spec_data() -> dict[str, dict]:
    return {
        "gpus-100000": sample_with(LLAMA, ("placement", "gpus"), 100_000),
        "gpus-2^63": sample_with(LLAMA, ("placement", "gpus"), 2**63),
        "days-1e6": sample_with(LLAMA, ("campaign", "days"), 1e6),
        "params-1e307": sample_with(SEED, ("model", "params"), 1e307),
        "params-5000-digits": sample_with(SEED, ("model", "params"), HUGE_INT),
        # found by the long run (bench/results/fuzz-long-2026-12-03.md)
        "schema-version-5000-digits": sample_with(SEED, ("schema_version",), HUGE_INT),
        "name-osc52-csi2j": sample_with(LLAMA, ("name",), "\x1b]52;c;aGk=\x07\x1b[2J"),
        "model-id-300-chars": sample_with(LLAMA, ("model", "id"), "m" * 300),
        "seq-nan": sample_with(LLAMA, ("lengths", "prompt_tokens"), math.nan),
        "model-deep-table": sample_with(LLAMA, ("model",), _deep_dict(5000)),
        "quality-deep-list": sample_with(LLAMA, ("quality",), _deep_list(5000)),
    }


def known_spec_texts() -> dict[str, str]:
    return {
        "int-5000-digits": "schema_version = " + "9" * 5000,
        "deep-array": "x = " + "[" * 5000 + "]" * 5000,
        "deep-inline-table": "x = " + "{a=" * 5000 + "1" + "}" * 5000,
    }


def known_triage_texts() -> dict[str, str]:
    return {
        "oom-line-x2000-no-end": (OOM_LINES[0] + "\n") * 2000,
        "oom-error-line-x2000": (OOM_LINES[1] + "\n") * 2000,
        "huge-figures": OOM_LINES[2] + "\n",
        "200k-line": OOM_LINES[1] + "\n" + "9" * 200_000 + "\n",
    }


def known_measure_texts() -> dict[str, str]:
    stage = copy.deepcopy(PROBE_RECORDS[3])
    stage["error"] = 3
    deep = copy.deepcopy(PROBE_RECORDS[1])
    deep["dims"] = {"a": _deep_list(3000)}
    huge = copy.deepcopy(PROBE_RECORDS[2])
    huge["devices"][0]["max_memory_allocated_bytes"] = 10**400
    return {
        "probe-error-is-a-number": "\n".join(json.dumps(r) for r in (PROBE_RUN, stage)) + "\n",
        "probe-deep-dims": json.dumps(PROBE_RUN) + "\n" + '{"vramtui_probe": 1, "kind": '
        '"stage", "dims": ' + "[" * 5000 + "]" * 5000 + "}\n",
        "probe-10^400-bytes": "\n".join(json.dumps(r) for r in (PROBE_RUN, huge)) + "\n",
        "vllm-kv-1e308-gib": vllm_logs()["v1_0.10.1_api_server.log"].replace(
            "Available KV cache memory: ", "Available KV cache memory: 1e308", 1
        ),
    }


def _escaped_offer() -> dict[str, bytes]:
    """A user copy of a built-in offer whose provider and title hold OSC 52 and CSI 2J."""
    name = "sample-b-h100-sxm-x1.toml"
    text = catalog_files()["offers"][name]
    text = text.replace('provider = "sample-cloud-b"', 'provider = "\\u001b]52;c;aGk=\\u0007b"')
    text = text.replace('title = "1 x H100 SXM 80 GB"', 'title = "\\u001b[2J\\u001b[H1 x H100"')
    return {f"offers/{name}": text.encode()}


def known_cli_cases() -> dict[str, CliCase]:
    simple = ["estimate", "--params", "7e9", "--bits", "16", "--headroom-gib"]
    return {
        "headroom-1e300": CliCase([*simple, "1e300"]),
        "params-1e307": CliCase(["estimate", "--params", "1e307", "--bits", "16",
                                 "--headroom-gib", "6"]),
        "days-9999": CliCase(["shortlist", "--days", "9999"]),
        "gpus-100000": CliCase(["estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct",
                                "--gpus", "100000"]),
        "model-300-chars": CliCase(["estimate", "--model", "m" * 300]),
        "catalog-not-utf8": CliCase(["offers", "--catalog", "{tmp}"],
                                    {"offers/x.toml": b'id = "\xff"\n'}),
        "catalog-deep": CliCase(["gpus", "--catalog", "{tmp}"],
                                {"gpus/x.toml": b"x = " + b"[" * 5000 + b"]" * 5000}),
        "catalog-provider-escapes": CliCase(["offers", "--catalog", "{tmp}"], _escaped_offer()),
        "catalog-title-escapes": CliCase(
            ["shortlist", "--catalog", "{tmp}", "--detail", "sample-b-h100-sxm-x1"],
            _escaped_offer(),
        ),
    }


# Area name -> (strategy factory, check, known cases factory): shared by CI and the long run.
AREAS = {
    "spec-data": (spec_dicts, check_spec_data, known_spec_data),
    "spec-text": (spec_texts, check_spec_text, known_spec_texts),
    "spec-file": (spec_bytes, check_spec_bytes, lambda: {"not-utf8": b'name = "\xff"\n'}),
    "catalog": (catalog_dirs, check_catalog_files, lambda: {}),
    "triage": (triage_texts, check_triage_text, known_triage_texts),
    "measure": (measure_texts, check_measure_text, known_measure_texts),
    "cli": (cli_cases, check_cli_case, known_cli_cases),
}
