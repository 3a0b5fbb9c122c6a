"""The fuzz suite's shared machinery: the properties' failure kinds, the time limit, hostile
values, data/text/byte mutation and the in-process CLI check.

A check returns a short outcome label ("valid", "error", "exit 2", ...) and raises
`PropertyFailure` when the project breaks its promise:

- bad input gives a `VramtuiError` whose text is one line, never another exception;
- no case takes longer than `TIME_LIMIT_S` (5 s): a SIGALRM timer interrupts a hang;
- nothing the project prints to a terminal holds an ESC byte (Rich writes no colour to a
  non-terminal, so any ESC came from the input);
- the CLI exits 0, 1, 2 or 3, with no traceback, and each stderr line starts with `vramtui:`.

The areas (spec, catalogue, triage, measure, CLI argv) are in `fuzz_areas.py`; the pytest
properties in `test_fuzz_*.py` and `bench/fuzz_long.py` call the same check functions.

CI budget (limit: 3 minutes): 2,070 generated cases (spec data 800, spec text 300, spec files
60, user catalogues 60, logs 300, measure files 300, command lines 250) plus 31 known hostile
cases. Measured: about 60 s for the generated cases on 2 shared cores, with every failure counted
instead of raised and a hang cut at 1 s (an all-pass run pays the same); the known cases take
under 2 s once nothing hangs. A failing property costs more: Hypothesis shrinks the input.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import io
import math
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
SAMPLE_SPECS = REPO / "sample_specs"
TRIAGE_LOGS = REPO / "tests" / "triage_logs"
VLLM_LOGS = REPO / "tests" / "vllm_logs"
CATALOG = REPO / "catalog"

TIME_LIMIT_S = float(os.environ.get("VRAMTUI_FUZZ_TIME_LIMIT", "5"))
ESC = "\x1b"


def fuzz_settings(max_examples: int) -> settings:
    """Deterministic settings for CI: fixed derandomised seed, no example database.

    VRAMTUI_FUZZ_SCALE multiplies the examples (e.g. 10 for a longer local run).
    """
    scale = float(os.environ.get("VRAMTUI_FUZZ_SCALE", "1"))
    return settings(
        derandomize=True,
        database=None,
        deadline=None,
        max_examples=max(1, round(max_examples * scale)),
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )


# --------------------------------------------------------------------------------------------
# Failures, time limit, one-line errors
# --------------------------------------------------------------------------------------------


class PropertyFailure(AssertionError):
    """The project broke a promise on this input. `kind` classifies it for the long run."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"[{kind}] {message}")
        self.kind = kind


class Hang(BaseException):
    """Raised by the SIGALRM timer; a BaseException so `except Exception` cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float = TIME_LIMIT_S, what: str = "case"):
    """Interrupt the block after `seconds` (main thread, POSIX) and fail if it ran longer."""
    use_alarm = (
        hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    )
    old = None
    if use_alarm:

        def _alarm(signum, frame):
            raise Hang(f"{what} ran past {seconds:g} s")

        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.perf_counter()
    try:
        yield
    except Hang as exc:
        raise PropertyFailure("hang", f"{exc} (interrupted at {_where(exc)})") from None
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    elapsed = time.perf_counter() - start
    if elapsed > seconds:
        raise PropertyFailure("hang", f"{what} took {elapsed:.1f} s (limit {seconds:g} s)")


def _last_line(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - str() of a huge int can itself fail
        text = type(exc).__name__
    lines = text.strip().splitlines() or [type(exc).__name__]
    return lines[-1][:300]


def _where(exc: BaseException) -> str:
    """The innermost frame inside the package, to name the module at fault."""
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if "vramtui" in f.filename and "fuzz_support" not in f.filename]
    frame = (inside or frames or [None])[-1]
    if frame is None:
        return "?"
    path = frame.filename
    cut = path.rfind("vramtui")
    return f"{path[cut:] if cut >= 0 else path}:{frame.lineno} in {frame.name}"


def unexpected(exc: BaseException) -> PropertyFailure:
    return PropertyFailure(type(exc).__name__, f"{_last_line(exc)} at {_where(exc)}")


def check_one_line(exc: BaseException) -> None:
    """A VramtuiError must read as exactly one non-empty line."""
    try:
        text = str(exc)
    except Exception as inner:  # noqa: BLE001
        raise PropertyFailure(
            "unprintable-error", f"str() of {type(exc).__name__} fails: {_last_line(inner)}"
        ) from None
    if not text.strip() or "\n" in text or "\r" in text:
        raise PropertyFailure(
            "multiline-error", f"{type(exc).__name__} is not one line: {text[:200]!r}"
        )
    if ESC in text:
        raise PropertyFailure("esc-in-error", f"{type(exc).__name__} holds ESC: {text[:200]!r}")


def guarded(fn, what: str) -> str:
    """Run fn() under the time limit: its result label, "error" for a one-line VramtuiError."""
    from vramtui.errors import VramtuiError

    try:
        with time_limit(what=what):
            label = fn()
    except PropertyFailure:
        raise
    except VramtuiError as exc:
        check_one_line(exc)
        return "error"
    except Exception as exc:  # noqa: BLE001 - the property: no other exception
        raise unexpected(exc) from None
    return label or "ok"


@contextlib.contextmanager
def _plain_terminal():
    """No forced colour: Rich then writes no escape codes of its own."""
    saved = {k: os.environ.pop(k) for k in ("FORCE_COLOR", "TTY_COMPATIBLE") if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _no_esc(text: str, where: str) -> None:
    if ESC in text:
        at = text.index(ESC)
        shown = text[max(0, at - 30) : at + 20]
        raise PropertyFailure("esc-in-output", f"{where} holds ESC: {shown!r}")


def _render(renderable) -> str:
    from rich.console import Console

    buf = io.StringIO()
    with _plain_terminal():
        Console(file=buf, width=100, color_system=None).print(renderable)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# Hostile values
# --------------------------------------------------------------------------------------------

HUGE_INT = 10**4999  # 5000 digits: beyond Python's and tomllib's 4300-digit conversion limit


class DeepList(list):
    """A list nested `depth` deep, with a short repr for failure reports."""

    def __repr__(self) -> str:
        return f"<list nested {self.depth} deep>"


class DeepDict(dict):
    """A table nested `depth` deep, with a short repr for failure reports."""

    def __repr__(self) -> str:
        return f"<table nested {self.depth} deep>"


def _deep_list(depth: int) -> DeepList:
    out: list = []
    for _ in range(depth - 1):
        out = [out]
    deep = DeepList([out])
    deep.depth = depth
    return deep


def _deep_dict(depth: int) -> DeepDict:
    out: dict = {}
    for _ in range(depth - 1):
        out = {"a": out}
    deep = DeepDict(a=out)
    deep.depth = depth
    return deep


HOSTILE_INTS = [0, -1, 1, 2, 3, 7, 2**31, 2**53 + 1, 2**63, 2**63 - 1, -(2**63), 2**64,
                10**18, 10**100, HUGE_INT, 100_000, 100_001, 1_000_000, 10**9]
HOSTILE_FLOATS = [math.nan, math.inf, -math.inf, 1e307, -1e307, 1e300, 1e308, 5e-324, -0.0,
                  0.5, 1e-300, 1e6, 9999.0, 3650.5]
HOSTILE_STRINGS = [
    "",
    " ",
    "\x1b]52;c;aGVsbG8=\x07",  # OSC 52: sets the clipboard
    "\x1b[2J\x1b[H",  # CSI 2J: clears the screen
    "a\nb",
    "\r",
    "\x00",
    "\x7f\x9b31m",
    "a" * 300,
    "x" * 100_000,
    "../../../../etc/passwd",
    "~/" + "d" * 255,
    "é💥",
    "nan",
    "1e307",
    "9" * 5000,
    "meta-llama/Llama-3.1-8B-Instruct",
    "w" * 256,
]

hostile_ints = st.one_of(st.sampled_from(HOSTILE_INTS), st.integers())
hostile_floats = st.one_of(st.sampled_from(HOSTILE_FLOATS), st.floats())
hostile_strings = st.one_of(
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=40),
    st.text(alphabet=st.characters(max_codepoint=0x9F), max_size=20),
)
_scalars = st.one_of(hostile_ints, hostile_floats, hostile_strings, st.booleans())
hostile_values = st.one_of(
    hostile_ints,
    hostile_floats,
    hostile_strings,
    st.booleans(),
    st.none(),
    st.sampled_from([datetime.date(2026, 12, 1), datetime.datetime(1, 1, 1),
                     datetime.time(12, 0)]),
    st.lists(_scalars, max_size=4),
    st.dictionaries(st.sampled_from(["a", "id", "value", "gpus", "days"]), _scalars, max_size=3),
    st.sampled_from([5, 100, 1200, 5000]).map(_deep_list),
    st.sampled_from([5, 100, 1200, 5000]).map(_deep_dict),
)

TOML_SNIPPETS = [
    "\x00",
    "\x1b[2J",
    "[[",
    "]]",
    "=",
    '"',
    "'''",
    "\n[model]\n",
    "\nx = " + "9" * 5000 + "\n",
    "\nx = " + "[" * 3000 + "]" * 3000 + "\n",
    "\nx = " + "{a=" * 1500 + "1" + "}" * 1500 + "\n",
    "\nparams = 1e400\n",
    "\ngpus = 9223372036854775808\n",
    "\ndays = 1e6\n",
    "\ufeff",
    "\r\n",
]


# --------------------------------------------------------------------------------------------
# Nested-data mutation (specs, catalogue files, probe records)
# --------------------------------------------------------------------------------------------


def _paths(obj, prefix=()):
    """Every place in a nested dict/list, down to 8 levels: (path, value)."""
    if len(prefix) >= 8 or isinstance(obj, (DeepList, DeepDict)):
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k), v
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield (*prefix, i), v
            yield from _paths(v, (*prefix, i))


def _parent(data, path):
    for part in path[:-1]:
        data = data[part]
    return data


class Mutated(dict):
    """Mutated data that shows its edits (not the whole document) in failure reports."""

    base: str = ""
    edits: list

    def __repr__(self) -> str:
        return f"<{self.base or 'data'} with {'; '.join(self.edits)}>"


def _edit_repr(value) -> str:
    return short_repr(value, 40)


@st.composite
def mutated(draw, base, keys=(), name: str = ""):
    """A deep copy of `base` with 1-3 edits: replace a value, delete a key, add a key."""
    data = Mutated(copy.deepcopy(base))
    data.base, data.edits = name, []
    known = sorted({str(p[-1]) for p, _ in _paths(base) if isinstance(p[-1], str)} | set(keys))
    for _ in range(draw(st.integers(1, 3))):
        places = list(_paths(data))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        if not places:
            op = "add"
        if op == "add":
            tables = [data] + [v for _, v in places if isinstance(v, dict)]
            table = draw(st.sampled_from(tables))
            key = draw(st.one_of(st.sampled_from(known or ["x"]), st.text(max_size=8)))
            table[key] = value = draw(hostile_values)
            data.edits.append(f"add {key!r} = {_edit_repr(value)}")
            continue
        path, _ = draw(st.sampled_from(places))
        parent = _parent(data, path)
        where = ".".join(str(p) for p in path)
        if op == "delete":
            del parent[path[-1]]
            data.edits.append(f"delete {where}")
        else:
            parent[path[-1]] = value = draw(hostile_values)
            data.edits.append(f"{where} = {_edit_repr(value)}")
    return data


@st.composite
def mutated_text(draw, base: str):
    """`base` with 1-3 text edits: cut, duplicate, insert a hostile snippet, truncate."""
    text = base
    for _ in range(draw(st.integers(1, 3))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 400)))
        op = draw(st.sampled_from(["cut", "dup", "insert", "insert", "truncate", "random"]))
        if op == "cut":
            text = text[:i] + text[j:]
        elif op == "dup":
            text = text[:j] + text[i:j] * draw(st.integers(1, 20)) + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(TOML_SNIPPETS)) + text[i:]
        elif op == "truncate":
            text = text[:i]
        else:
            text = text[:i] + draw(st.text(max_size=20)) + text[j:]
    return text


@st.composite
def mutated_bytes(draw, base: bytes):
    """`base` with byte edits that break UTF-8: stray continuation bytes, 0xff, NUL, BOMs."""
    raw = base
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(raw)))
        bad = draw(
            st.one_of(
                st.sampled_from([b"\xff", b"\xc3\x28", b"\x80", b"\xed\xa0\x80", b"\x00",
                                 b"\xef\xbb\xbf", b"\xfe\xff", b"\xe9t\xe9"]),
                st.binary(max_size=8),
            )
        )
        raw = raw[:i] + bad + raw[i:]
    return raw


# --------------------------------------------------------------------------------------------
# CLI, in process
# --------------------------------------------------------------------------------------------

ALLOWED_EXIT = {0, 1, 2, 3}


@dataclass
class CliCase:
    """An argv; `{tmp}` in it names a scratch folder that holds `files` (relative path: bytes)."""

    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    stdin: str | None = None

    def __repr__(self) -> str:
        shown = [a if len(a) <= 60 else f"{a[:40]}...({len(a)} chars)" for a in self.argv]
        extra = f", files={sorted(self.files)}" if self.files else ""
        extra += f", stdin={len(self.stdin)} chars" if self.stdin is not None else ""
        return f"CliCase({shown}{extra})"


def check_cli(argv, files: dict[str, bytes] | None = None, stdin: str | None = None) -> str:
    """main(argv) in process: exit in {0,1,2,3}, no traceback, one-line `vramtui:` errors."""
    from vramtui.cli import main

    with tempfile.TemporaryDirectory(prefix="vramtui-fuzz-") as tmp:
        if files:
            write_tree(Path(tmp), files)
        argv = [a.replace("{tmp}", tmp) for a in argv]
        out, err = io.StringIO(), io.StringIO()
        usage_error = False
        saved_stdin = sys.stdin
        try:
            if stdin is not None:
                sys.stdin = io.StringIO(stdin)
            with _plain_terminal(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(
                err
            ), time_limit(what="vramtui " + " ".join(a[:30] for a in argv[:6])):
                try:
                    rc = main(list(argv))
                except SystemExit as exc:  # argparse: usage error (2) or --help (0)
                    rc = exc.code if isinstance(exc.code, int) else 2
                    usage_error = True
        except PropertyFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - the property: main() never raises
            raise unexpected(exc) from None
        finally:
            sys.stdin = saved_stdin
    stdout, stderr = out.getvalue(), err.getvalue()
    if not isinstance(rc, int) or isinstance(rc, bool) or rc not in ALLOWED_EXIT:
        raise PropertyFailure("exit-code", f"exit code {rc!r}")
    if "Traceback (most recent call last)" in stderr + stdout:
        raise PropertyFailure("traceback", stderr.strip().splitlines()[-1][:300])
    _no_esc(stdout, "stdout")
    _no_esc(stderr, "stderr")
    if not usage_error:
        for line in stderr.splitlines():
            if line.strip() and not line.startswith("vramtui:"):
                raise PropertyFailure("stderr-line", f"stderr line not 'vramtui:': {line[:200]!r}")
        if rc != 0 and rc != 3 and not stderr.strip():
            raise PropertyFailure("silent-error", f"exit {rc} with nothing on stderr")
    return f"exit {rc}"


def check_cli_case(case: CliCase) -> str:
    return check_cli(case.argv, case.files, case.stdin)


class NotedBytes(bytes):
    """File contents that show how they were made in failure reports."""

    def __new__(cls, raw: bytes, note: str):
        obj = super().__new__(cls, raw)
        obj.note = note
        return obj

    def __repr__(self) -> str:
        return self.note


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, raw in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)


def short_repr(value, limit: int = 160) -> str:
    """A repr short enough for a findings list."""
    if isinstance(value, (CliCase, Mutated, NotedBytes)):
        text = repr(value)
    elif isinstance(value, int) and value.bit_length() > 512:
        text = f"<int of about {int(value.bit_length() * 0.30103) + 1} digits>"
    elif isinstance(value, (str, bytes)) and len(value) > limit:
        unit = "chars" if isinstance(value, str) else "bytes"
        text = f"{value[: limit // 2]!r}...({len(value)} {unit})"
    else:
        try:
            text = repr(value)
        except Exception:  # noqa: BLE001 - deep or huge values
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit * 2 else text[: limit * 2] + "..."
