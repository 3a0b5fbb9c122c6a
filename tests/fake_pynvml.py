"""A hand-made stand-in for the `pynvml` module (nvidia-ml-py), for machines without a GPU.

It reuses the installed nvidia-ml-py's error classes and constants (so the code under test
names the real ones: NVMLError_GpuIsLost, nvmlMemory_v2, ...) and replaces the functions with
ones that read `FakeGpu` records. Install it with
`monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([...]))`.

Figures: an H100 80GB HBM3 as NVML v2 reports it (total 85,520,809,984 B = 81,559 MiB; the
driver's reserved carve-out 547,356,672 B = 522 MiB), with `used` and `free` chosen by hand so
that total = reserved + used + free. v1 reports used + reserved as "used".
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

import pynvml as _real

H100_TOTAL = 85_520_809_984
H100_RESERVED = 547_356_672
GIB = 2**30


@dataclass
class FakeProcess:
    pid: int
    used: int | None  # None: NVML_VALUE_NOT_AVAILABLE


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    total: int = H100_TOTAL
    reserved: int = H100_RESERVED
    used: int = 40 * GIB  # as v2 counts it (without the reserved carve-out)
    util: tuple[int, int] = (87, 43)
    temperature: int = 61
    power_mw: int = 412_345
    limit_mw: int = 700_000
    sm_clock: int = 1980
    mem_clock: int = 2619
    compute: list[FakeProcess] = field(default_factory=list)
    graphics: list[FakeProcess] = field(default_factory=list)
    raises: dict[str, type[BaseException]] = field(default_factory=dict)  # function -> error
    lost: bool = False

    @property
    def free(self) -> int:
        return self.total - self.reserved - self.used


def make_fake_pynvml(
    gpus: list[FakeGpu],
    *,
    has_v2_constant: bool = True,
    init_error: type[BaseException] | None = None,
    driver_version: str = "550.54.15",
    nvml_version: str = "12.550.54.15",
    cuda_driver_version: int = 12040,
) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.__file__ = "<fake pynvml>"
    for name in dir(_real):
        if name.startswith(("NVMLError", "NVML_")) or name == "NVMLLibraryMismatchError":
            setattr(m, name, getattr(_real, name))
    if has_v2_constant:
        m.nvmlMemory_v2 = _real.nvmlMemory_v2
    m.gpus = gpus
    m.calls = {}
    m.initialised = 0

    def count(fn_name):
        m.calls[fn_name] = m.calls.get(fn_name, 0) + 1

    def gpu_of(handle, fn_name) -> FakeGpu:
        count(fn_name)
        g = gpus[handle]
        if g.lost:
            raise _real.NVMLError_GpuIsLost()
        if fn_name in g.raises:
            raise g.raises[fn_name]()
        return g

    def nvmlInit():
        count("nvmlInit")
        if init_error is not None:
            raise init_error()
        m.initialised += 1

    def nvmlShutdown():
        count("nvmlShutdown")
        m.initialised -= 1

    def nvmlDeviceGetCount():
        return len(gpus)

    def nvmlDeviceGetHandleByIndex(index):
        count("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(gpus):
            raise _real.NVMLError_InvalidArgument()
        if gpus[index].lost:
            raise _real.NVMLError_GpuIsLost()
        return index

    def nvmlDeviceGetMemoryInfo(handle, version=None):
        if version:
            g = gpu_of(handle, "nvmlDeviceGetMemoryInfo_v2")
            if version != _real.nvmlMemory_v2:
                raise _real.NVMLError_ArgumentVersionMismatch()
            return types.SimpleNamespace(
                version=version, total=g.total, reserved=g.reserved, free=g.free, used=g.used
            )
        g = gpu_of(handle, "nvmlDeviceGetMemoryInfo")
        return types.SimpleNamespace(total=g.total, free=g.free, used=g.used + g.reserved)

    def nvmlDeviceGetName(handle):
        return gpu_of(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(handle):
        return gpu_of(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetUtilizationRates(handle):
        g = gpu_of(handle, "nvmlDeviceGetUtilizationRates")
        return types.SimpleNamespace(gpu=g.util[0], memory=g.util[1])

    def nvmlDeviceGetTemperature(handle, sensor):
        assert sensor == _real.NVML_TEMPERATURE_GPU
        return gpu_of(handle, "nvmlDeviceGetTemperature").temperature

    def nvmlDeviceGetPowerUsage(handle):
        return gpu_of(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(handle):
        return gpu_of(handle, "nvmlDeviceGetEnforcedPowerLimit").limit_mw

    def nvmlDeviceGetClockInfo(handle, clock_type):
        g = gpu_of(handle, "nvmlDeviceGetClockInfo")
        return {_real.NVML_CLOCK_SM: g.sm_clock, _real.NVML_CLOCK_MEM: g.mem_clock}[clock_type]

    def _procs(items):
        # As nvidia-ml-py returns them: NOT_AVAILABLE already turned into None.
        return [
            types.SimpleNamespace(
                pid=p.pid, usedGpuMemory=p.used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0
            )
            for p in items
        ]

    def nvmlDeviceGetComputeRunningProcesses(handle):
        return _procs(gpu_of(handle, "nvmlDeviceGetComputeRunningProcesses").compute)

    def nvmlDeviceGetGraphicsRunningProcesses(handle):
        return _procs(gpu_of(handle, "nvmlDeviceGetGraphicsRunningProcesses").graphics)

    def nvmlSystemGetDriverVersion():
        return driver_version

    def nvmlSystemGetNVMLVersion():
        return nvml_version

    def nvmlSystemGetCudaDriverVersion():
        return cuda_driver_version

    for fn in list(locals().values()):
        if callable(fn) and getattr(fn, "__name__", "").startswith("nvml"):
            setattr(m, fn.__name__, fn)
    return m


def fake_function_names(module: types.ModuleType) -> list[str]:
    return [n for n in vars(module) if n.startswith("nvml") and callable(getattr(module, n))]


def eight_gpus_twenty_processes() -> list[FakeGpu]:
    """The bench's machine: 8 H100s, 20 processes spread over them (a few PIDs on two GPUs)."""
    gpus = [
        FakeGpu(uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000", used=(10 + 5 * i) * GIB)
        for i in range(8)
    ]
    pid = 4_300_000  # above Linux's pid_max: not in /proc, as a container's host PIDs
    for k in range(20):
        gpus[k % 8].compute.append(FakeProcess(pid + k, GIB + k * 2**20))
    return gpus
