"""Read a probe file (JSON lines written by `vramtui.probe.Probe`) back into runs and stages.

Standard library and `vramtui.errors` only. A file may hold several runs (appended by several
processes or several launches); records are grouped by `run_id`, runs in the order their run
records appear, stages in file order.

Crashes: each record is written with one `write` and fsync'ed, so a killed process leaves at
most one truncated line, at the end of what it wrote. Such a line is skipped, with a warning
kept on the run that was being written last (`ProbeRun.warnings`), when it is the file's last
line or is followed by a new run's record (the next launch starts its records on a new line).
Any other bad line is an error: `ProbeFileError`, one line naming the file, the line number, the
problem and the fix.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from vramtui.errors import VramtuiError
from vramtui.guarded_read import Unreadable, decode_json

PROBE_VERSION = 1
RUN_KEYS = ("run_id", "run_name", "time", "host", "pid", "cuda_available", "versions", "devices")
STAGE_KEYS = (
    "run_id",
    "stage",
    "time_start",
    "time_end",
    "seconds",
    "dims",
    "measured",
    "reason",
    "error",
    "devices",
)
FIGURE_KEYS = (
    "max_memory_allocated_bytes",
    "max_memory_reserved_bytes",
    "memory_allocated_bytes",
    "memory_reserved_bytes",
    "nvml_used_bytes",
    "nvml_process_used_bytes",
    "nvml_total_bytes",
)
MAX_PROBE_FILE_BYTES = 256 * 2**20  # thousands of runs; a run is a few KiB
MAX_FIGURE_BYTES = 2**63 - 1  # a byte counter is an unsigned 64-bit integer at most
FIX = 'write it with vramtui.probe (e.g. `with probe.stage("load"): ...`) and pass that file'


class ProbeFileError(VramtuiError):
    """A probe file that cannot be read: str() names the file, the line, the problem, the fix."""


@dataclass(frozen=True)
class ProbeDevice:
    index: int
    name: str
    total_bytes: int


@dataclass(frozen=True)
class ProbeDeviceFigures:
    index: int
    max_memory_allocated_bytes: int | None
    max_memory_reserved_bytes: int | None
    memory_allocated_bytes: int | None
    memory_reserved_bytes: int | None
    nvml_used_bytes: int | None = None
    nvml_process_used_bytes: int | None = None
    nvml_total_bytes: int | None = None


@dataclass(frozen=True)
class ProbeStage:
    stage: str
    dims: dict
    measured: bool
    reason: str | None
    error: str | None
    seconds: float
    devices: tuple[ProbeDeviceFigures, ...]
    time_start: str = ""
    time_end: str = ""
    warnings: tuple[str, ...] = ()
    line: int = 0  # where it was read, for messages

    def device(self, index: int) -> ProbeDeviceFigures | None:
        return next((d for d in self.devices if d.index == index), None)


# A framework name as the probe writes it ("hf-trainer", "lightning-fabric"); empty: none.
_FRAMEWORK_NAME = re.compile(r"(?:[a-z0-9][a-z0-9._-]{0,63})?")


@dataclass(frozen=True)
class ProbeRun:
    run_id: str
    run_name: str
    time: str
    host: str
    versions: dict
    devices: tuple[ProbeDevice, ...]
    stages: tuple[ProbeStage, ...]
    cuda_available: bool
    pid: int | None = None
    warnings: tuple[str, ...] = ()  # what the reader skipped (a truncated last line)
    framework: str = ""  # the training framework the run was under ("" = not recorded)

    def stages_named(self, name: str) -> list[ProbeStage]:
        return [s for s in self.stages if s.stage == name]

    def device(self, index: int) -> ProbeDevice | None:
        return next((d for d in self.devices if d.index == index), None)


def _fail(path: str, line: int | None, problem: str, fix: str) -> ProbeFileError:
    where = f"{path}, line {line}" if line else path
    return ProbeFileError(f"{where}: {problem}; {fix}")


def read_probe_file(path: str | os.PathLike) -> list[ProbeRun]:
    """Every run in the probe file at `path`, in order. Raises ProbeFileError on bad input."""
    from vramtui.guarded_read import read_bytes

    shown = os.fspath(path)
    raw = read_bytes(
        path,
        error=ProbeFileError,
        what="probe file",
        label=shown,
        cap=MAX_PROBE_FILE_BYTES,
        too_big_fix="split it: each probe run appends a few KiB",
        missing="not found (no such file)",
        missing_fix="run the script with vramtui.probe first",
    )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise _fail(shown, line, "not UTF-8 text, so not a vramtui probe file", FIX) from None
    return parse_probe_lines(text, shown)


def parse_probe_lines(text: str, source: str = "<probe>") -> list[ProbeRun]:
    """Parse the text of a probe file (see read_probe_file)."""
    lines = text.split("\n")
    ends_with_newline = text.endswith("\n")
    numbered = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip()]
    if not numbered:
        raise _fail(
            source,
            None,
            "the file is empty (no probe records)",
            "run the script with vramtui.probe stages until at least one stage ends",
        )
    runs: dict[str, dict] = {}
    order: list[str] = []
    last_run: str | None = None
    pending_warnings: list[str] = []
    for pos, (lineno, ln) in enumerate(numbered):
        try:
            obj = decode_json(ln)
        except Unreadable as exc:
            if not exc.syntax:  # deep nesting, a huge integer: not a record cut short
                raise _fail(
                    source,
                    lineno,
                    f"the record {exc.problem}",
                    "delete that line or re-run the measurement into a new file",
                ) from None
            is_last = pos == len(numbered) - 1
            truncated = (is_last and not ends_with_newline) or (
                not is_last and _is_run_line(numbered[pos + 1][1])
            )
            if truncated and ln.lstrip().startswith('{"vramtui_probe"'):
                warning = (
                    f"line {lineno} was skipped: a record cut short (the process stopped "
                    "while writing it)"
                )
                if last_run is not None:
                    runs[last_run]["warnings"].append(warning)
                else:
                    pending_warnings.append(warning)
                continue
            if pos == 0:
                raise _fail(
                    source,
                    lineno,
                    "not a vramtui probe file (the line is not JSON: a log file?)",
                    FIX,
                ) from None
            raise _fail(
                source,
                lineno,
                "not a JSON object (a corrupted record)",
                "delete that line or re-run the measurement into a new file",
            ) from None
        if not isinstance(obj, dict) or "vramtui_probe" not in obj:
            raise _fail(
                source,
                lineno,
                'not a vramtui probe record (no "vramtui_probe" key)',
                FIX,
            )
        version = obj["vramtui_probe"]
        if version != PROBE_VERSION or isinstance(version, bool):
            raise _fail(
                source,
                lineno,
                f"probe record version {version!r}, this vramtui reads version {PROBE_VERSION}",
                "upgrade vramtui, or re-run the measurement with this vramtui's probe",
            )
        kind = obj.get("kind")
        if kind == "run":
            _require(obj, RUN_KEYS, source, lineno, "run")
            run_id = _str(obj, "run_id", source, lineno)
            if run_id in runs:
                raise _fail(
                    source,
                    lineno,
                    f"a second run record for run {run_id[:64]!r}",
                    "each probe run writes one; split the file or re-run into a new file",
                )
            runs[run_id] = {
                "record": obj,
                "line": lineno,
                "stages": [],
                "warnings": pending_warnings,
            }
            pending_warnings = []
            order.append(run_id)
            last_run = run_id
        elif kind == "stage":
            _require(obj, STAGE_KEYS, source, lineno, "stage")
            run_id = _str(obj, "run_id", source, lineno)
            if run_id not in runs:
                raise _fail(
                    source,
                    lineno,
                    f"a stage record of run {run_id[:64]!r} before that run's record",
                    "keep the file whole: the run record is written before the first stage",
                )
            runs[run_id]["stages"].append(_stage(obj, source, lineno))
            last_run = run_id
        else:
            raise _fail(
                source,
                lineno,
                f'unknown record kind {kind!r} (expected "run" or "stage")',
                "upgrade vramtui, or remove that line",
            )
    if not order:
        raise _fail(source, None, "no run record in the file", FIX)
    return [_run(runs[r], source) for r in order]


def _is_run_line(text: str) -> bool:
    try:
        obj = decode_json(text)
    except Unreadable:
        return False
    return isinstance(obj, dict) and obj.get("kind") == "run" and "vramtui_probe" in obj


def _require(obj: dict, keys, source: str, lineno: int, kind: str) -> None:
    for key in keys:
        if key not in obj:
            raise _fail(
                source,
                lineno,
                f"the {kind} record lacks the key {key!r}",
                "the file was not written by vramtui.probe version 1, or was edited; re-run "
                "the measurement",
            )


def _str(obj: dict, key: str, source: str, lineno: int) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise _fail(source, lineno, f"{key!r} is {_show(value)}, not a string", "re-run the probe")
    return value


def _str_or_none(obj: dict, key: str, source: str, lineno: int) -> str | None:
    value = obj[key]
    if value is not None and not isinstance(value, str):
        raise _fail(
            source, lineno, f"{key!r} is {_show(value)}, not a string or null", "re-run the probe"
        )
    return value


def _show(value) -> str:
    """A short, one-line picture of a JSON value for messages."""
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value


def _int_or_none(value, key: str, source: str, lineno: int) -> int | None:
    if value is None:
        return None
    if not _is_count(value) or value > MAX_FIGURE_BYTES:
        raise _fail(
            source,
            lineno,
            f"{key!r} is {_show(value)}, not a byte count (0 to 2^63-1)",
            "re-run the probe",
        )
    return value


def _stage(obj: dict, source: str, lineno: int) -> ProbeStage:
    dims = obj["dims"]
    if not isinstance(dims, dict):
        raise _fail(source, lineno, f"'dims' is {_show(dims)}, not an object", "re-run the probe")
    measured = obj["measured"]
    if not isinstance(measured, bool):
        raise _fail(source, lineno, f"'measured' is {_show(measured)}, not true/false", "re-run")
    devices = obj["devices"]
    if not isinstance(devices, list):
        raise _fail(source, lineno, "'devices' is not a list", "re-run the probe")
    figures = []
    for dev in devices:
        if not isinstance(dev, dict) or not _is_count(dev.get("index")) or dev["index"] > 2**31:
            raise _fail(
                source, lineno, "a device entry without an index (0, 1, ...)", "re-run the probe"
            )
        for key in FIGURE_KEYS[:4]:
            if key not in dev:
                raise _fail(
                    source, lineno, f"device {dev['index']} lacks {key!r}", "re-run the probe"
                )
        figures.append(
            ProbeDeviceFigures(
                index=dev["index"],
                **{k: _int_or_none(dev.get(k), k, source, lineno) for k in FIGURE_KEYS},
            )
        )
    if measured and not figures:
        raise _fail(source, lineno, "a measured stage without devices", "re-run the probe")
    seconds = obj["seconds"]
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not 0 <= seconds <= 1e9  # compares ints exactly: no float overflow
        or (isinstance(seconds, float) and not math.isfinite(seconds))
    ):
        raise _fail(
            source, lineno, f"'seconds' is {_show(seconds)}, not a duration in seconds", "re-run"
        )
    name = _str(obj, "stage", source, lineno)
    warnings = obj.get("warnings") or []
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _fail(source, lineno, "'warnings' is not a list of strings", "re-run the probe")
    return ProbeStage(
        stage=name,
        dims=dict(dims),
        measured=measured,
        reason=_str_or_none(obj, "reason", source, lineno),
        error=_str_or_none(obj, "error", source, lineno),
        seconds=float(seconds),
        devices=tuple(figures),
        time_start=_str(obj, "time_start", source, lineno),
        time_end=_str(obj, "time_end", source, lineno),
        warnings=tuple(warnings),
        line=lineno,
    )


def _run(entry: dict, source: str) -> ProbeRun:
    obj = entry["record"]
    lineno = entry["line"]
    versions = obj["versions"]
    if not isinstance(versions, dict):
        raise _fail(source, lineno, "'versions' is not an object", "re-run the probe")
    devices = obj["devices"]
    if not isinstance(devices, list):
        raise _fail(source, lineno, "'devices' is not a list", "re-run the probe")
    out = []
    for dev in devices:
        if (
            not isinstance(dev, dict)
            or not _is_count(dev.get("index"))
            or dev["index"] > 2**31
            or not isinstance(dev.get("name"), str)
            or not _is_count(dev.get("total_bytes"))
            or dev["total_bytes"] > MAX_FIGURE_BYTES
        ):
            raise _fail(
                source,
                lineno,
                "a device entry lacks index, name or total_bytes (or has a wrong type)",
                "re-run the probe",
            )
        out.append(
            ProbeDevice(index=dev["index"], name=dev["name"], total_bytes=dev["total_bytes"])
        )
    cuda_available = obj["cuda_available"]
    if not isinstance(cuda_available, bool):
        raise _fail(source, lineno, "'cuda_available' is not true/false", "re-run the probe")
    for key in ("run_name", "time", "host"):
        _str(obj, key, source, lineno)
    pid = obj["pid"]
    framework = obj.get("framework", "")
    if not isinstance(framework, str) or not _FRAMEWORK_NAME.fullmatch(framework):
        raise _fail(source, lineno, "'framework' is not a short text", "re-run the probe")
    return ProbeRun(
        framework=framework,
        run_id=obj["run_id"],
        run_name=obj["run_name"],
        time=obj["time"],
        host=obj["host"],
        versions=dict(versions),
        devices=tuple(out),
        stages=tuple(entry["stages"]),
        cuda_available=cuda_available,
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        warnings=tuple(entry["warnings"]),
    )
