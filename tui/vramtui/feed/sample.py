"""What one tick of the feed measured: per-GPU counters, per-process memory, and their JSON.

Every field except a GPU's index and a process's GPU index and PID may be None, read as "n/a":
the driver did not report it (NotSupported, a lost GPU, no permission). Nothing is filled in.

Memory counters follow NVML (see MEMORY-MODEL.md "Measured counters"):
- `memory_info_version` 2: `total = reserved + used + free`, and `used` excludes the driver's
  reserved carve-out; version 1 (older drivers): `reserved_bytes` is None and `used` includes
  the carve-out.
- `ProcessSample.used_bytes` is NVML's per-process figure (the CUDA context included).
  A process whose PID is not in the local /proc (a container's view of a host PID) is kept,
  `visible=False`, and its memory stays counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from vramtui.errors import VramtuiError

SCHEMA_VERSION = 1


class FeedError(VramtuiError):
    """The live feed cannot be read, recorded or replayed; str() is one line with the fix."""


def one_line(text: object) -> str:
    """Collapse a message (an exception's text, say) to a single line."""
    return " ".join(str(text).split())


@dataclass(frozen=True)
class GpuSample:
    index: int
    uuid: str | None = None
    name: str | None = None
    total_bytes: int | None = None
    used_bytes: int | None = None
    free_bytes: int | None = None
    reserved_bytes: int | None = None
    memory_info_version: int | None = None
    util_percent: int | None = None
    mem_util_percent: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    # Kubernetes attribution, when the source knows it (the Prometheus feed reads dcgm-exporter's
    # pod/namespace/container labels; NVML leaves them None). Several pods sharing one GPU are
    # listed sorted, joined by ", ".
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None


@dataclass(frozen=True)
class ProcessSample:
    gpu_index: int
    pid: int
    used_bytes: int | None = None
    name: str | None = None
    user: str | None = None
    cmdline: str | None = None
    rss_bytes: int | None = None
    cpu_percent: float | None = None
    visible: bool = True


@dataclass(frozen=True)
class Snapshot:
    """One tick. `processes` is None on a tick where processes were not polled (not "none
    running"); `error` is a one-line reason when the counters could not be read at all;
    `notes` are one-line remarks about part of the tick (a GPU lost mid-run);
    `unread_process_gpus` the GPUs whose process list could not be read on this tick (their
    unattributed memory is unknown, not "all of it")."""

    host: str
    time: float
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[ProcessSample, ...] | None = None
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()
    unread_process_gpus: tuple[int, ...] = ()

    def gpu(self, gpu_index: int) -> GpuSample | None:
        for g in self.gpus:
            if g.index == gpu_index:
                return g
        return None

    def processes_on(self, gpu_index: int) -> tuple[ProcessSample, ...] | None:
        """The processes listed on one GPU; None when not polled or not readable this tick."""
        if self.processes is None or gpu_index in self.unread_process_gpus:
            return None
        return tuple(p for p in self.processes if p.gpu_index == gpu_index)

    def unattributed_bytes(self, gpu_index: int) -> int | None:
        """Used memory no listed process accounts for: used - sum of the listed processes'
        memory (invisible PIDs included), never negative. None when the GPU's used memory, the
        process list or any listed process's memory is unknown. With memory info v1 it
        includes the driver's reserved carve-out."""
        gpu = self.gpu(gpu_index)
        procs = self.processes_on(gpu_index)
        if gpu is None or gpu.used_bytes is None or procs is None:
            return None
        if any(p.used_bytes is None for p in procs):
            return None
        return max(0, gpu.used_bytes - sum(p.used_bytes for p in procs))


# --- JSON -----------------------------------------------------------------------------------

# Field kinds for validation of what a recording or a remote agent sent.
_GPU_KINDS = {
    "index": "int!",
    "uuid": "str",
    "name": "str",
    "total_bytes": "int",
    "used_bytes": "int",
    "free_bytes": "int",
    "reserved_bytes": "int",
    "memory_info_version": "int",
    "util_percent": "num",
    "mem_util_percent": "num",
    "temperature_c": "num",
    "power_w": "num",
    "power_limit_w": "num",
    "sm_clock_mhz": "num",
    "mem_clock_mhz": "num",
    "pod": "str",
    "namespace": "str",
    "container": "str",
}
_PROCESS_KINDS = {
    "gpu_index": "int!",
    "pid": "int!",
    "used_bytes": "int",
    "name": "str",
    "user": "str",
    "cmdline": "str",
    "rss_bytes": "int",
    "cpu_percent": "num",
    "visible": "bool!",
}
_SNAPSHOT_KINDS = {
    "host": "str!",
    "time": "num!",
    "driver_version": "str",
    "nvml_version": "str",
    "cuda_driver_version": "str",
    "error": "str",
}
assert set(_GPU_KINDS) == {f.name for f in fields(GpuSample)}
assert set(_PROCESS_KINDS) == {f.name for f in fields(ProcessSample)}

_KIND_WORDS = {"int": "an integer", "num": "a number", "str": "a string", "bool": "true or false"}


def _check(value, kind: str, where: str):
    required = kind.endswith("!")
    kind = kind.rstrip("!")
    if value is None:
        if required:
            raise FeedError(f"snapshot: {where} is missing; the line is not a vramtui snapshot")
        return None
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "num": isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value),
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
    }[kind]
    if not ok:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        nullable = "" if required else " or null"
        raise FeedError(f"snapshot: {where} must be {_KIND_WORDS[kind]}{nullable}, got {shown}")
    return value


def _record(cls, kinds: dict[str, str], data, where: str):
    if not isinstance(data, dict):
        raise FeedError(f"snapshot: {where} must be an object, got {type(data).__name__}")
    return cls(
        **{name: _check(data.get(name), kind, f"{where}.{name}") for name, kind in kinds.items()}
    )


def snapshot_to_json(s: Snapshot) -> dict:
    """A JSON-ready dict (schema version first); dump it with separators=(",", ":")."""
    return {
        "schema": SCHEMA_VERSION,
        "host": s.host,
        "time": s.time,
        "gpus": [{f: getattr(g, f) for f in _GPU_KINDS} for g in s.gpus],
        "processes": None
        if s.processes is None
        else [{f: getattr(p, f) for f in _PROCESS_KINDS} for p in s.processes],
        "driver_version": s.driver_version,
        "nvml_version": s.nvml_version,
        "cuda_driver_version": s.cuda_driver_version,
        "error": s.error,
        "notes": list(s.notes),
        "unread_process_gpus": list(s.unread_process_gpus),
    }


def snapshot_from_json(d) -> Snapshot:
    """The Snapshot a `snapshot_to_json` dict describes; FeedError (one line) on an unknown
    schema version or a malformed field."""
    if not isinstance(d, dict):
        raise FeedError(f"snapshot: expected a JSON object, got {type(d).__name__}")
    version = d.get("schema")
    if version != SCHEMA_VERSION:
        if isinstance(version, int) and not isinstance(version, bool) and version > 0:
            raise FeedError(
                f"snapshot schema version {version} is not supported (this vramtui reads "
                f"version {SCHEMA_VERSION}); use the same vramtui version on both ends"
            )
        raise FeedError(f"snapshot: missing or invalid schema version {version!r}")
    top = {name: _check(d.get(name), kind, name) for name, kind in _SNAPSHOT_KINDS.items()}
    gpus = d.get("gpus", [])
    if not isinstance(gpus, list):
        raise FeedError("snapshot: gpus must be a list")
    procs = d.get("processes")
    if procs is not None and not isinstance(procs, list):
        raise FeedError("snapshot: processes must be a list or null")
    notes = d.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise FeedError("snapshot: notes must be a list of strings")
    unread = d.get("unread_process_gpus", [])
    if not isinstance(unread, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in unread
    ):
        raise FeedError("snapshot: unread_process_gpus must be a list of GPU indexes")
    return Snapshot(
        host=top["host"],
        time=float(top["time"]),
        gpus=tuple(_record(GpuSample, _GPU_KINDS, g, f"gpus[{i}]") for i, g in enumerate(gpus)),
        processes=None
        if procs is None
        else tuple(
            _record(ProcessSample, _PROCESS_KINDS, p, f"processes[{i}]")
            for i, p in enumerate(procs)
        ),
        driver_version=top["driver_version"],
        nvml_version=top["nvml_version"],
        cuda_driver_version=top["cuda_driver_version"],
        error=top["error"],
        notes=tuple(notes),
        unread_process_gpus=tuple(unread),
    )


def error_snapshot(host: str, time: float, error: str) -> Snapshot:
    """A tick on which nothing could be read: no GPUs, processes not polled, the reason."""
    return Snapshot(host=host, time=time, error=one_line(error))
