"""The stage probe: measured GPU memory per stage of a real run, written as JSON lines.

Import it inside a training or serving script; it needs nothing the script does not already
have. Importing `vramtui.probe` loads the standard library only: torch is imported when a stage
starts (or found in `sys.modules`), `pynvml` (nvidia-ml-py) only if it is installed.

    from vramtui.probe import Probe

    probe = Probe("vramtui-probe.jsonl")
    with probe.stage("load"):
        model = AutoModelForCausalLM.from_pretrained(...).cuda()
    with probe.stage("backward", batch=8, seq_len=4096):
        loss.backward()

or the module-level shortcut, writing to `$VRAMTUI_PROBE_FILE` (default
`vramtui-probe.jsonl` in the working directory):

    from vramtui import probe
    with probe.stage("prefill", concurrency=16, prompt_tokens=8000):
        ...

Stage names are free text; the ledger's stages are STANDARD_STAGES: load, prefill, decode
(inference), forward, backward, optimizer_step, validation, export (training). The keyword
arguments are the dimensions actually executed (batch, seq_len, concurrency, prompt_tokens,
generated_tokens, samples, corpus_fraction, ...); `reset_peak` is the one reserved keyword.

What a stage does. At its start: synchronise the watched devices and reset their peak counters
(`torch.cuda.reset_peak_memory_stats`), unless `reset_peak=False` (a "load" reading that should
include everything since the process started). At its end: synchronise and record, per device,
`max_memory_allocated`, `max_memory_reserved`, `memory_allocated`, `memory_reserved` (torch's
caching allocator), NVML's used memory of the whole device and this process's own (read at
the end, not peaks), the dimensions, the wall time and whether the block raised (the
exception's type and first line, e.g. `torch.OutOfMemoryError: CUDA out of memory...`; the
exception is re-raised). Stages may nest: an inner stage's reset does not lose the outer
stage's peak.

Without CUDA (no torch, or `torch.cuda.is_available()` False) the user's code still runs and
the stage is written with `"measured": false` and the reason. The probe never breaks the script:
a failure of its own is a warning on stderr and is written into the record.

File format (JSON lines, one object per line, each appended with one write, flushed and
fsync'ed, so a crash loses nothing already written). Every line has `"vramtui_probe": 1` and a
`"kind"`. One `"run"` record per Probe (per process), written before its first stage:

    {"vramtui_probe": 1, "kind": "run", "run_id": "<uuid4 hex>", "run_name": "",
     "time": "<ISO 8601 UTC>", "host": "...", "pid": 123, "cuda_available": true,
     "versions": {"python": "3.11.7", "torch": "2.13.0", "cuda": "12.8",
                  "driver": "570.86.15", "transformers": "5.24.0"},
     "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85029158912}]}

then one `"stage"` record per finished stage:

    {"vramtui_probe": 1, "kind": "stage", "run_id": "...", "stage": "backward",
     "time_start": "...", "time_end": "...", "seconds": 1.23,
     "dims": {"batch": 8, "seq_len": 4096}, "measured": true, "reason": null, "error": null,
     "warnings": [],
     "devices": [{"index": 0, "max_memory_allocated_bytes": ..., "max_memory_reserved_bytes": ...,
                  "memory_allocated_bytes": ..., "memory_reserved_bytes": ...,
                  "nvml_used_bytes": ... or null, "nvml_process_used_bytes": ... or null,
                  "nvml_total_bytes": ... or null}]}

`versions` holds only what is known (no "torch" key without torch, no "cuda" key on a CPU
build of torch, no "driver" key without NVML); transformers, vllm, peft, accelerate, deepspeed,
bitsandbytes and flash_attn appear when the script had already imported them. `error` is null
or the string "<exception type>: <first line of its message>". `warnings` lists the probe's own
problems for that stage (an NVML read that failed, ...). Several processes (ranks) may append
to one file: records are grouped by `run_id`. Read a file with
`vramtui.probe.records.read_probe_file`.

Devices: by default every visible CUDA device; only devices on which this process holds
memory are synchronised (synchronising a device creates a CUDA context on it). Pass
`devices=[local_rank]` under torchrun to watch one. NVML's figures are matched to torch's
device by UUID when NVML can (else by index through CUDA_VISIBLE_DEVICES).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import json
import os
import platform
import socket
import sys
import threading
import time
import uuid
import weakref
from typing import Self

__all__ = [
    "DEFAULT_FILE",
    "ENV_FILE",
    "PROBE_VERSION",
    "STANDARD_STAGES",
    "Probe",
    "Stage",
    "configure",
    "default_probe",
    "read_probe_file",
    "stage",
]

PROBE_VERSION = 1
ENV_FILE = "VRAMTUI_PROBE_FILE"
DEFAULT_FILE = "vramtui-probe.jsonl"
STANDARD_STAGES = (
    "load",
    "prefill",
    "decode",
    "forward",
    "backward",
    "optimizer_step",
    "validation",
    "export",
)
NO_CUDA_WARNING = "vramtui.probe: CUDA is not available: nothing was measured"
# Libraries whose versions are recorded when the script has imported them (never imported here).
OPTIONAL_LIBRARIES = (
    "transformers",
    "vllm",
    "peft",
    "accelerate",
    "deepspeed",
    "bitsandbytes",
    "flash_attn",
    "trl",
    "torchtune",
    "litgpt",
    "lightning",
    "unsloth",
    "axolotl",
)
# The training framework a run is under, read from the modules the script has imported (most
# specific first: Axolotl and Unsloth import transformers too). vramtui's framework names.
FRAMEWORK_MODULES = (
    ("axolotl", "axolotl"),
    ("unsloth", "unsloth"),
    ("litgpt", "litgpt"),
    ("torchtune", "torchtune"),
    ("lightning.fabric", "lightning-fabric"),
)


def detect_framework(default: str = "") -> str:
    """The framework of the running script from `sys.modules` (never imports anything);
    `default` when none of FRAMEWORK_MODULES is loaded ("" = not known)."""
    for module, name in FRAMEWORK_MODULES:
        if module in sys.modules:
            return name
    return default


def _load_torch():
    """torch, imported now (a stage is starting), or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _now_iso() -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _one_line(text: object) -> str:
    lines = str(text).strip().splitlines()
    return lines[0].strip() if lines else ""


def _describe_exception(exc: BaseException) -> str:
    """'<type>: <first line>', the type named as a traceback names it."""
    cls = type(exc)
    module = getattr(cls, "__module__", "") or ""
    name = (
        cls.__qualname__
        if module in ("builtins", "__main__", "")
        else f"{module}.{cls.__qualname__}"
    )
    message = _one_line(exc)
    return f"{name}: {message}" if message else name


def _jsonable(value):
    """json.dumps fallback for dims: numbers stay numbers (numpy, torch), the rest is text."""
    if hasattr(value, "__index__"):
        with contextlib.suppress(Exception):
            return int(value.__index__())
    if hasattr(value, "item"):
        with contextlib.suppress(Exception):
            return value.item()
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _default_path() -> str:
    return os.environ.get(ENV_FILE) or DEFAULT_FILE


class _Nvml:
    """NVML through `pynvml`, if installed: used memory of a device and of this process."""

    def __init__(self) -> None:
        self.module = None
        self.problem: str | None = None
        try:
            import pynvml
        except ImportError:
            self.problem = "pynvml (nvidia-ml-py) is not installed: no NVML figures"
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
            self.problem = f"nvmlInit failed ({_describe_exception(exc)}): no NVML figures"
            return
        self.module = pynvml
        self._v2 = getattr(pynvml, "nvmlMemory_v2", None)
        self._handles: dict[int, object] = {}

    def driver_version(self) -> str | None:
        if self.module is None:
            return None
        try:
            return _text(self.module.nvmlSystemGetDriverVersion())
        except Exception:  # noqa: BLE001 - the probe never breaks the script
            return None

    def handle(self, index: int, uuid_text: str | None):
        """The NVML handle of torch's device `index` (by UUID, else by the visible index)."""
        if index in self._handles:
            return self._handles[index]
        nv = self.module
        handle = None
        by_uuid = getattr(nv, "nvmlDeviceGetHandleByUUID", None)
        if uuid_text and by_uuid is not None:
            wanted = uuid_text if uuid_text.startswith(("GPU-", "MIG-")) else f"GPU-{uuid_text}"
            try:
                handle = by_uuid(wanted)
            except Exception:  # noqa: BLE001 - the probe never breaks the script
                handle = None
        if handle is None:
            handle = nv.nvmlDeviceGetHandleByIndex(_physical_index(index))
        self._handles[index] = handle
        return handle

    def read(self, index: int, uuid_text: str | None, warnings: list[str]) -> dict:
        out = {"nvml_used_bytes": None, "nvml_process_used_bytes": None, "nvml_total_bytes": None}
        if self.module is None:
            return out
        nv = self.module
        try:
            handle = self.handle(index, uuid_text)
        except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
            warnings.append(f"device {index}: NVML handle: {_describe_exception(exc)}")
            return out
        info = None
        if self._v2 is not None:
            try:
                info = nv.nvmlDeviceGetMemoryInfo(handle, version=self._v2)
            except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
                warnings.append(
                    f"device {index}: NVML memory info v2 failed ({_describe_exception(exc)}); "
                    "v1 counts the driver's reserved memory as used"
                )
                self._v2 = None
        if info is None:
            try:
                info = nv.nvmlDeviceGetMemoryInfo(handle)
            except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
                warnings.append(f"device {index}: NVML memory info: {_describe_exception(exc)}")
        if info is not None:
            out["nvml_used_bytes"] = int(info.used)
            out["nvml_total_bytes"] = int(info.total)
        try:
            procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
        except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
            warnings.append(f"device {index}: NVML process list: {_describe_exception(exc)}")
            return out
        pid = os.getpid()
        mine = [p for p in procs if getattr(p, "pid", None) == pid]
        if not mine:
            warnings.append(
                f"device {index}: this process (pid {pid}) is not in NVML's process list "
                "(another PID namespace, e.g. a container?): no per-process figure"
            )
        elif any(getattr(p, "usedGpuMemory", None) is None for p in mine):
            warnings.append(f"device {index}: NVML does not report this process's memory")
        else:
            out["nvml_process_used_bytes"] = sum(int(p.usedGpuMemory) for p in mine)
        return out


def _physical_index(index: int) -> int:
    """NVML's index of torch's device `index`, through integer CUDA_VISIBLE_DEVICES."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return index
    parts = [p.strip() for p in visible.split(",") if p.strip()]
    if index < len(parts) and parts[index].isdigit():
        return int(parts[index])
    return index


class _Backend:
    """What a probe can measure in this process: torch.cuda devices, or why nothing."""

    def __init__(self, torch, reason: str | None, devices: tuple[int, ...]) -> None:
        self.torch = torch
        self.reason = reason
        self.devices = devices
        self.nvml: _Nvml | None = None
        self.uuids: dict[int, str | None] = {}

    @property
    def cuda(self):
        return self.torch.cuda

    @property
    def available(self) -> bool:
        return self.reason is None


def _device_index(device, cuda) -> int:
    """An int, "cuda:1", "1", "cuda" or a torch.device -> torch's device index."""
    if isinstance(device, int):
        return device
    if not isinstance(device, str):
        index = getattr(device, "index", None)
        if index is not None:
            return int(index)
    text = str(device)
    if ":" in text:
        return int(text.rsplit(":", 1)[1])
    if text.isdigit():
        return int(text)
    return int(cuda.current_device())


class Stage:
    """One measured stage: a context manager, or `start()` ... `finish()` for callbacks.

    `dims` is a dict that may be completed inside the block (e.g. the tokens generated);
    `record` is the stage record as written, once the stage has finished.
    """

    def __init__(self, probe: Probe, name: str, dims: dict, reset_peak: bool) -> None:
        self.probe = probe
        self.name = str(name)
        self.dims = dict(dims)
        self.reset_peak = reset_peak
        self.warnings: list[str] = []
        self.state = "new"  # new -> open -> finished | cancelled
        self.record: dict | None = None  # the stage record, once finished
        self._t0 = 0.0
        self._time_start = ""
        self._backend: _Backend | None = None
        self._start_problem: str | None = None
        self._peaks: dict[int, tuple[int, int]] = {}  # folded peaks when a nested stage resets

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.finish(exc)
        return False

    def start(self) -> Stage:
        if self.state != "new":
            return self
        self.state = "open"
        self._time_start = _now_iso()
        try:
            self.probe._begin(self)
        except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
            self._start_problem = f"the probe failed at the stage start: {_describe_exception(exc)}"
            self.probe._warn(f"vramtui.probe: stage {self.name!r}: {self._start_problem}")
        self._t0 = time.perf_counter()
        return self

    def finish(self, error: BaseException | str | None = None) -> dict | None:
        """Record the stage (once); `error` is the exception the stage raised, if any."""
        if self.state != "open":
            return None
        seconds = time.perf_counter() - self._t0
        self.state = "finished"
        try:
            self.record = self.probe._end(self, seconds, error)
            return self.record
        except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
            self.probe._warn(
                f"vramtui.probe: stage {self.name!r} was not recorded: {_describe_exception(exc)}"
            )
            return None

    def cancel(self) -> None:
        """Forget an open stage without writing it."""
        if self.state == "open":
            self.state = "cancelled"
            self.probe._forget(self)


_LIVE_PROBES: weakref.WeakSet = weakref.WeakSet()


class Probe:
    """Writes a run record and stage records to `path` (appended; created with its folder)."""

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        *,
        devices=None,
        run_name: str = "",
        framework: str = "",
    ) -> None:
        self.path = os.path.abspath(os.fspath(path if path is not None else _default_path()))
        self.run_name = str(run_name)
        # The training framework the run is under (vramtui's names: "hf-trainer", "litgpt"...):
        # given, else read from the imported modules when the run record is written.
        self.framework = str(framework)
        self.run_id = uuid.uuid4().hex
        self._devices_arg = None if devices is None else list(devices)
        self._backend: _Backend | None = None
        self._run_written = False
        self._warned: set[str] = set()
        self._open: list[Stage] = []
        self._lock = threading.RLock()
        self._pid = os.getpid()
        _LIVE_PROBES.add(self)

    def __repr__(self) -> str:
        return f"Probe({self.path!r}, run_id={self.run_id!r})"

    # ------------------------------------------------------------------ public

    def stage(self, name: str, *, reset_peak: bool = True, **dims) -> Stage:
        """A stage to use as `with probe.stage("backward", batch=8, seq_len=4096): ...`."""
        return Stage(self, name, dims, reset_peak)

    def start(self, name: str, *, reset_peak: bool = True, **dims) -> Stage:
        """Open a stage now; call `.finish()` (or `.finish(exc)`) on what it returns."""
        return self.stage(name, reset_peak=reset_peak, **dims).start()

    def finish_open_stages(self, error: BaseException | str | None = None) -> None:
        """Record every stage still open (innermost first), e.g. before the process ends."""
        for st in reversed(list(self._open)):
            st.finish(error)

    # ------------------------------------------------------------------ internals

    def _warn(self, message: str) -> None:
        if message in self._warned:
            return
        self._warned.add(message)
        with contextlib.suppress(Exception):
            sys.stderr.write(message + "\n")
            sys.stderr.flush()

    def _resolve(self) -> _Backend:
        if self._backend is None:
            try:
                self._backend = self._make_backend()
            except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
                self._backend = _Backend(
                    None, f"the probe could not find the devices: {_describe_exception(exc)}", ()
                )
        return self._backend

    def _make_backend(self) -> _Backend:
        torch = _load_torch()
        if torch is None:
            backend = _Backend(None, "torch is not installed", ())
        else:
            cuda = torch.cuda
            if not cuda.is_available():
                built = getattr(getattr(torch, "version", None), "cuda", None)
                how = f"built for CUDA {built}" if built else "a CPU-only build"
                backend = _Backend(
                    torch,
                    f"torch.cuda.is_available() is False (torch {torch.__version__}, {how}; "
                    "no GPU visible to this process?)",
                    (),
                )
            else:
                if self._devices_arg is None:
                    devices = tuple(range(int(cuda.device_count())))
                else:
                    devices = tuple(_device_index(d, cuda) for d in self._devices_arg)
                backend = _Backend(torch, None, devices)
                if not devices:
                    backend.reason = "torch.cuda reports no devices"
        if backend.available:
            backend.nvml = _Nvml()
        return backend

    def _device_props(self, backend: _Backend) -> list[dict]:
        out = []
        for d in backend.devices:
            props = backend.cuda.get_device_properties(d)
            uuid_value = getattr(props, "uuid", None)
            backend.uuids[d] = str(uuid_value) if uuid_value is not None else None
            out.append(
                {"index": d, "name": str(props.name), "total_bytes": int(props.total_memory)}
            )
        return out

    def _versions(self, backend: _Backend) -> dict[str, str]:
        versions = {"python": platform.python_version()}
        torch = backend.torch
        if torch is not None:
            versions["torch"] = str(torch.__version__)
            cuda_version = getattr(getattr(torch, "version", None), "cuda", None)
            if cuda_version:
                versions["cuda"] = str(cuda_version)
        if backend.nvml is not None:
            driver = backend.nvml.driver_version()
            if driver:
                versions["driver"] = driver
        for name in OPTIONAL_LIBRARIES:
            module = sys.modules.get(name)
            version = getattr(module, "__version__", None) if module is not None else None
            if version:
                versions[name] = str(version)
        return versions

    def _write_run(self, backend: _Backend) -> None:
        devices: list[dict] = []
        problems: list[str] = []
        if backend.available:
            try:
                devices = self._device_props(backend)
            except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
                problems.append(f"device properties: {_describe_exception(exc)}")
        if backend.nvml is not None and backend.nvml.problem:
            problems.append(backend.nvml.problem)
        record = {
            "vramtui_probe": PROBE_VERSION,
            "kind": "run",
            "run_id": self.run_id,
            "run_name": self.run_name,
            "time": _now_iso(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "cuda_available": backend.available,
            "versions": self._versions(backend),
            "devices": devices,
        }
        framework = self.framework or detect_framework()
        if framework:
            record["framework"] = framework
        for p in problems:
            self._warn(f"vramtui.probe: {p}")
        self._append(record)
        self._run_written = True

    def _synchronize(self, backend: _Backend) -> None:
        cuda = backend.cuda
        for d in backend.devices:
            # Only where this process holds memory: synchronising would create a context.
            if cuda.memory_reserved(d) > 0:
                cuda.synchronize(d)

    def _begin(self, st: Stage) -> None:
        with self._lock:
            if os.getpid() != self._pid:  # a forked child: its own run
                self._pid = os.getpid()
                self.run_id = uuid.uuid4().hex
                self._run_written = False
                self._open = []
            backend = self._resolve()
            st._backend = backend
            self._ensure_run(backend)
            if not backend.available:
                self._warn(NO_CUDA_WARNING)
                self._open.append(st)
                return
            cuda = backend.cuda
            self._synchronize(backend)
            if st.reset_peak:
                for outer in self._open:  # keep the outer stages' peaks across this reset
                    for d in backend.devices:
                        old = outer._peaks.get(d, (0, 0))
                        outer._peaks[d] = (
                            max(old[0], int(cuda.max_memory_allocated(d))),
                            max(old[1], int(cuda.max_memory_reserved(d))),
                        )
                for d in backend.devices:
                    cuda.reset_peak_memory_stats(d)
            self._open.append(st)

    def _ensure_run(self, backend: _Backend) -> None:
        if not self._run_written:
            try:
                self._write_run(backend)
            except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
                self._warn(f"vramtui.probe: cannot write {self.path}: {_describe_exception(exc)}")

    def _forget(self, st: Stage) -> None:
        with self._lock:
            if st in self._open:
                self._open.remove(st)

    def _end(self, st: Stage, seconds: float, error) -> dict:
        with self._lock:
            if st in self._open:
                self._open.remove(st)
            backend = st._backend
            record = {
                "vramtui_probe": PROBE_VERSION,
                "kind": "stage",
                "run_id": self.run_id,
                "stage": st.name,
                "time_start": st._time_start,
                "time_end": _now_iso(),
                "seconds": round(seconds, 6),
                "dims": st.dims,
                "measured": False,
                "reason": None,
                "error": None,
                "warnings": st.warnings,
                "devices": [],
            }
            if error is not None:
                record["error"] = (
                    _describe_exception(error) if isinstance(error, BaseException) else str(error)
                )
            if backend is None:
                record["reason"] = f"nothing was measured: {st._start_problem or 'no backend'}"
            elif not backend.available:
                record["reason"] = f"nothing was measured: {backend.reason}"
            elif st._start_problem:
                record["reason"] = f"nothing was measured: {st._start_problem}"
            else:
                try:
                    record["devices"] = self._read_devices(st, backend)
                    record["measured"] = True
                except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
                    record["reason"] = (
                        "nothing was measured: reading torch.cuda's counters failed: "
                        f"{_describe_exception(exc)}"
                    )
                    self._warn(f"vramtui.probe: stage {st.name!r}: {record['reason']}")
            for w in st.warnings:
                self._warn(f"vramtui.probe: stage {st.name!r}: {w}")
            try:
                self._ensure_run(self._resolve())
                self._append(record)
            except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
                self._warn(f"vramtui.probe: cannot write {self.path}: {_describe_exception(exc)}")
            return record

    def _read_devices(self, st: Stage, backend: _Backend) -> list[dict]:
        cuda = backend.cuda
        self._synchronize(backend)
        out = []
        for d in backend.devices:
            folded = st._peaks.get(d, (0, 0))
            figures = {
                "index": d,
                "max_memory_allocated_bytes": max(folded[0], int(cuda.max_memory_allocated(d))),
                "max_memory_reserved_bytes": max(folded[1], int(cuda.max_memory_reserved(d))),
                "memory_allocated_bytes": int(cuda.memory_allocated(d)),
                "memory_reserved_bytes": int(cuda.memory_reserved(d)),
                "nvml_used_bytes": None,
                "nvml_process_used_bytes": None,
                "nvml_total_bytes": None,
            }
            nvml = backend.nvml
            if nvml is not None and nvml.module is not None:
                try:
                    figures.update(nvml.read(d, backend.uuids.get(d), st.warnings))
                except Exception as exc:  # noqa: BLE001 - the probe never breaks the script
                    st.warnings.append(f"device {d}: NVML: {_describe_exception(exc)}")
            elif nvml is not None and nvml.problem and nvml.problem not in st.warnings:
                st.warnings.append(nvml.problem)
            out.append(figures)
        return out

    def _append(self, record: dict) -> None:
        line = json.dumps(record, separators=(",", ":"), default=_jsonable) + "\n"
        data = line.encode("utf-8")
        folder = os.path.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if not self._run_written and _ends_mid_line(self.path):
                data = b"\n" + data  # an earlier run died mid-line: start ours on a new line
            while data:
                written = os.write(fd, data)
                data = data[written:]
            os.fsync(fd)
        finally:
            os.close(fd)


def _ends_mid_line(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False


@atexit.register
def _finish_at_exit() -> None:
    """Stages opened with start() and still open at exit: record them with the exception that
    ended the process (an uncaught OOM in the backward pass, ...)."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    error = exc if exc is not None else "the stage was still open when the process exited"
    for probe in list(_LIVE_PROBES):
        with contextlib.suppress(Exception):
            probe.finish_open_stages(error)


_default: Probe | None = None
_default_lock = threading.Lock()


def default_probe() -> Probe:
    """The Probe behind the module-level `stage()`: `$VRAMTUI_PROBE_FILE` or vramtui-probe.jsonl."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Probe(_default_path())
        return _default


def configure(path: str | os.PathLike | None = None, *, devices=None, run_name: str = "") -> Probe:
    """Replace the default Probe (a new run) writing to `path`."""
    global _default
    with _default_lock:
        _default = Probe(path, devices=devices, run_name=run_name)
        return _default


def stage(name: str, *, reset_peak: bool = True, **dims) -> Stage:
    """`with vramtui.probe.stage("decode", concurrency=16): ...` on the default Probe."""
    return default_probe().stage(name, reset_peak=reset_peak, **dims)


def __getattr__(name: str):
    if name == "read_probe_file":
        from vramtui.probe.records import read_probe_file

        return read_probe_file
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
