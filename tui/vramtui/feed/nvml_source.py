"""Counters from the local NVIDIA driver through NVML (the `pynvml` module of nvidia-ml-py).

`pynvml` is imported inside `open()`, so importing this module never needs a driver. Without
the library, or when `nvmlInit` fails, `open()` raises FeedError with a one-line reason and the
caller shows that reason instead of counters. Every optional counter is read on its own: an
NVMLError there gives None ("n/a"). A GPU that is lost mid-run (GPUIsLost, or Unknown on its
handle) reads as all-None with a note; the other GPUs carry on.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Self

from vramtui.feed.sample import FeedError, GpuSample, ProcessSample, one_line

# NVML return codes by their pynvml constant names (the numbers are the C API's and stable;
# the generated exception class names are not what one would guess: NVMLError_GpuIsLost).
NVML_CODE_NAMES = (
    "NVML_ERROR_GPU_IS_LOST",
    "NVML_ERROR_UNKNOWN",
    "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
    "NVML_ERROR_LIBRARY_NOT_FOUND",
    "NVML_ERROR_DRIVER_NOT_LOADED",
    "NVML_ERROR_NO_PERMISSION",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
)
# Codes that mean "this GPU is gone" when memory info (the core read) returns them.
_LOST = ("NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_UNKNOWN")
# Codes after which memory info v2 is abandoned for v1 on that GPU.
_V2_FALLBACK = (
    "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
)
# Why nvmlInit failed -> what to tell the user.
_INIT_REASONS = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": (
        "libnvidia-ml.so.1 not found",
        "no NVIDIA driver on this host; the estimates still work",
    ),
    "NVML_ERROR_DRIVER_NOT_LOADED": (
        "driver not loaded",
        (
            "the NVIDIA kernel module is not loaded (nvidia-smi says the same); the "
            "estimates still work"
        ),
    ),
    "NVML_ERROR_NO_PERMISSION": (
        "insufficient permissions",
        "this user may not open /dev/nvidia*; the estimates still work",
    ),
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": (
        "driver/library version mismatch",
        "the driver was updated without a reboot or module reload; the estimates still work",
    ),
}


class _GpuLost(Exception):
    pass


def _codes(pynvml, names) -> frozenset[int]:
    return frozenset(c for c in (getattr(pynvml, n, None) for n in names) if isinstance(c, int))


def _code(exc: BaseException) -> int | None:
    return getattr(exc, "value", None)


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _cuda_version(value) -> str | None:
    """NVML's integer CUDA driver version (12040) as "12.4"."""
    if not isinstance(value, int) or value <= 0:
        return None
    return f"{value // 1000}.{value % 1000 // 10}"


class NvmlSource:
    """The local GPUs. open() -> read_devices()/read_processes()... -> close().

    After each read, `notes` holds its one-line remarks (a GPU lost, a process list that
    could not be read) and, after read_processes, `unread_process_gpus` the GPUs whose process
    list is unknown this tick; the poller copies both into the Snapshot.
    """

    def __init__(self, host: str | None = None, attribute_processes: bool = True):
        self.host = host or socket.gethostname()
        self.notes: tuple[str, ...] = ()
        self.unread_process_gpus: tuple[int, ...] = ()
        self._attribute = attribute_processes
        self._attributor = None
        self._nvml = None
        self._count = 0
        self._handles: dict[int, object] = {}
        self._v2_ok: dict[int, bool] = {}
        self._versions: dict[str, str | None] = {}
        self._lost: frozenset[int] = frozenset()
        self._gone: frozenset[int] = frozenset()
        self._unsupported: frozenset[int] = frozenset()
        self._v2_fallback: frozenset[int] = frozenset()
        self._function_not_found: frozenset[int] = frozenset()
        self._nvml_error: type[BaseException] = Exception

    # --- life cycle ---------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._nvml is not None

    def open(self) -> None:
        if self._nvml is not None:
            return
        try:
            import pynvml
        except ImportError as exc:
            raise FeedError(
                "NVML not available (the pynvml module of nvidia-ml-py cannot be imported: "
                f"{one_line(exc)}): pip install nvidia-ml-py; the estimates still work"
            ) from None
        nvml_error = getattr(pynvml, "NVMLError", Exception)
        try:
            pynvml.nvmlInit()
        except nvml_error as exc:
            raise FeedError(self._init_reason(pynvml, exc)) from None
        except Exception as exc:  # noqa: BLE001 - a broken library file, a mismatched pynvml
            raise FeedError(
                f"NVML not available ({type(exc).__name__}: {one_line(exc)}): the NVIDIA driver "
                "library cannot be loaded; the estimates still work"
            ) from None
        try:
            count = pynvml.nvmlDeviceGetCount()
        except nvml_error as exc:
            self._shutdown(pynvml)
            raise FeedError(
                f"NVML started but cannot count the GPUs ({one_line(exc)}); check nvidia-smi"
            ) from None
        self._nvml = pynvml
        self._nvml_error = nvml_error
        self._lost = _codes(pynvml, _LOST)
        self._gone = _codes(pynvml, ("NVML_ERROR_GPU_IS_LOST",))
        self._unsupported = _codes(pynvml, ("NVML_ERROR_NOT_SUPPORTED",))
        self._v2_fallback = _codes(pynvml, _V2_FALLBACK)
        self._function_not_found = _codes(pynvml, ("NVML_ERROR_FUNCTION_NOT_FOUND",))
        self._count = int(count)
        self._handles = {}
        self._v2_ok = {}
        self._versions = {
            "driver_version": _text(self._plain("nvmlSystemGetDriverVersion")),
            "nvml_version": _text(self._plain("nvmlSystemGetNVMLVersion")),
            "cuda_driver_version": _cuda_version(self._plain("nvmlSystemGetCudaDriverVersion")),
        }

    @staticmethod
    def _init_reason(pynvml, exc: BaseException) -> str:
        for name, (what, fix) in _INIT_REASONS.items():
            if _code(exc) is not None and _code(exc) == getattr(pynvml, name, None):
                return f"NVML not available ({what}): {fix}"
        return (
            f"NVML not available (nvmlInit failed: {one_line(exc)}): check the driver with "
            "nvidia-smi; the estimates still work"
        )

    def close(self) -> None:
        if self._nvml is not None:
            self._shutdown(self._nvml)
        self._nvml = None
        self._handles = {}
        self._versions = {}

    def _shutdown(self, pynvml) -> None:
        with contextlib.suppress(Exception):  # closing must not fail
            pynvml.nvmlShutdown()

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def versions(self) -> dict[str, str | None]:
        """driver_version ("550.54.15"), nvml_version ("12.550.54.15"), cuda_driver_version
        ("12.4"); None where unknown or not open."""
        return dict(self._versions) or {
            "driver_version": None,
            "nvml_version": None,
            "cuda_driver_version": None,
        }

    # --- reading ------------------------------------------------------------------------

    def _require(self):
        if self._nvml is None:
            raise FeedError("NVML is not open; call open() first")
        return self._nvml

    def _plain(self, name: str, *args):
        """pynvml.<name>(*args), or None when the function is missing or raises NVMLError."""
        fn = getattr(self._nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self._nvml_error:
            return None

    def _get(self, fn, *args):
        """fn(*args) for an optional counter: None on an NVMLError or when this pynvml lacks
        the function; _GpuLost on GPUIsLost."""
        if fn is None:
            return None
        try:
            return fn(*args)
        except self._nvml_error as exc:
            if _code(exc) in self._gone:
                raise _GpuLost from None
            return None

    def _handle(self, index: int):
        handle = self._handles.get(index)
        if handle is None:
            try:
                handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            except self._nvml_error:
                raise _GpuLost from None
            self._handles[index] = handle
        return handle

    def read_devices(self) -> tuple[GpuSample, ...]:
        pynvml = self._require()
        notes: list[str] = []
        samples = []
        for index in range(self._count):
            try:
                samples.append(self._read_device(pynvml, index))
            except _GpuLost:
                self._handles.pop(index, None)  # ask again next tick: it may come back
                notes.append(
                    f"GPU {index}: lost or not answering (NVML); its counters are n/a, "
                    "the other GPUs carry on"
                )
                samples.append(GpuSample(index=index))
        self.notes = tuple(notes)
        return tuple(samples)

    def _read_device(self, pynvml, index: int) -> GpuSample:
        h = self._handle(index)
        total, used, free, reserved, version = self._memory(pynvml, index, h)
        util = self._get(pynvml.nvmlDeviceGetUtilizationRates, h)
        temp_sensor = getattr(pynvml, "NVML_TEMPERATURE_GPU", 0)
        power_mw = self._get(getattr(pynvml, "nvmlDeviceGetPowerUsage", None), h)
        limit_mw = self._get(getattr(pynvml, "nvmlDeviceGetEnforcedPowerLimit", None), h)
        clock = getattr(pynvml, "nvmlDeviceGetClockInfo", None)
        return GpuSample(
            index=index,
            uuid=_text(self._get(pynvml.nvmlDeviceGetUUID, h)),
            name=_text(self._get(pynvml.nvmlDeviceGetName, h)),
            total_bytes=total,
            used_bytes=used,
            free_bytes=free,
            reserved_bytes=reserved,
            memory_info_version=version,
            util_percent=getattr(util, "gpu", None),
            mem_util_percent=getattr(util, "memory", None),
            temperature_c=self._get(
                getattr(pynvml, "nvmlDeviceGetTemperature", None), h, temp_sensor
            ),
            power_w=None if power_mw is None else power_mw / 1000,
            power_limit_w=None if limit_mw is None else limit_mw / 1000,
            sm_clock_mhz=self._get(clock, h, getattr(pynvml, "NVML_CLOCK_SM", 1)),
            mem_clock_mhz=self._get(clock, h, getattr(pynvml, "NVML_CLOCK_MEM", 2)),
        )

    def _memory(self, pynvml, index: int, h):
        """(total, used, free, reserved, version): v2 with `reserved` where the library has
        the constant and the driver accepts it, else v1 (reserved None). A failure of v1 as
        well reads as all None; GPUIsLost/Unknown as a lost GPU."""
        v2 = getattr(pynvml, "nvmlMemory_v2", None)
        if v2 is not None and self._v2_ok.get(index, True):
            try:
                m = pynvml.nvmlDeviceGetMemoryInfo(h, version=v2)
                self._v2_ok[index] = True
                return int(m.total), int(m.used), int(m.free), int(m.reserved), 2
            except TypeError:  # an old pynvml whose function takes no version
                self._v2_ok[index] = False
            except self._nvml_error as exc:
                if _code(exc) in self._lost:
                    raise _GpuLost from None
                if _code(exc) in self._v2_fallback:
                    self._v2_ok[index] = False  # this driver has no v2: stop asking
                # any other failure: v1 on this tick, v2 again on the next
        m = self._memory_v1(pynvml, h)
        if m is None:
            return None, None, None, None, None
        return int(m.total), int(m.used), int(m.free), None, 1

    def _memory_v1(self, pynvml, h):
        try:
            return pynvml.nvmlDeviceGetMemoryInfo(h)
        except self._nvml_error as exc:
            if _code(exc) in self._lost:
                raise _GpuLost from None
            return None

    def read_processes(self) -> tuple[ProcessSample, ...]:
        """Compute and graphics processes of every GPU, one row per (GPU, PID) (a process
        in both lists once), attributed through psutil unless attribute_processes=False."""
        pynvml = self._require()
        notes: list[str] = []
        unread: list[int] = []
        rows: dict[tuple[int, int], int | None] = {}
        for index in range(self._count):
            try:
                h = self._handle(index)
            except _GpuLost:
                notes.append(f"GPU {index}: lost; its processes are n/a")
                unread.append(index)
                continue
            for kind in ("Compute", "Graphics"):
                try:
                    procs = self._running(pynvml, kind, h)
                except self._nvml_error as exc:
                    if _code(exc) in self._unsupported and kind == "Graphics":
                        continue  # compute-only boards have no graphics list
                    notes.append(
                        f"GPU {index}: {kind.lower()} processes not readable ({one_line(exc)})"
                    )
                    unread.append(index)
                    continue
                if procs is None:
                    notes.append(
                        f"GPU {index}: {kind.lower()} processes not readable (this driver "
                        "lacks the process-list functions nvidia-ml-py calls)"
                    )
                    unread.append(index)
                    continue
                for p in procs:
                    key = (index, int(p.pid))
                    used = _used_memory(pynvml, getattr(p, "usedGpuMemory", None))
                    if key in rows:  # in both lists: one process, one figure
                        known = [u for u in (used, rows[key]) if u is not None]
                        used = max(known) if known else None
                    rows[key] = used
        self.notes = tuple(notes)
        self.unread_process_gpus = tuple(sorted(set(unread)))
        samples = tuple(
            ProcessSample(gpu_index=i, pid=pid, used_bytes=used)
            for (i, pid), used in sorted(rows.items())
        )
        if not self._attribute:
            return samples
        if self._attributor is None:
            from vramtui.feed.processes import Attributor

            self._attributor = Attributor()
        return self._attributor.attribute(samples)

    def _running(self, pynvml, kind: str, h) -> list | None:
        """nvmlDeviceGet{kind}RunningProcesses (v3 in current nvidia-ml-py), falling back to
        the _v2 function on drivers without v3 (the unversioned wrapper then raises
        NVMLLibraryMismatchError, or FunctionNotFound). None when neither is usable."""
        mismatch = getattr(pynvml, "NVMLLibraryMismatchError", None)
        mismatch = mismatch if isinstance(mismatch, type) else ()
        for suffix in ("", "_v2"):
            fn = getattr(pynvml, f"nvmlDeviceGet{kind}RunningProcesses{suffix}", None)
            if fn is None:
                continue
            try:
                return list(fn(h))
            except mismatch:
                continue
            except self._nvml_error as exc:
                if _code(exc) in self._function_not_found:
                    continue
                raise
        return None


def _used_memory(pynvml, value) -> int | None:
    """usedGpuMemory in bytes, or None when NVML says NOT_AVAILABLE (Windows WDDM, or a
    process NVML cannot see into)."""
    if value is None:
        return None
    not_available = getattr(pynvml, "NVML_VALUE_NOT_AVAILABLE_ulonglong", None)
    sentinel = getattr(not_available, "value", 2**64 - 1)
    value = int(value)
    if value in (sentinel, 2**64 - 1) or value < 0:
        return None
    return value
