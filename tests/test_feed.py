"""The live counter feed without a GPU: NVML through a hand-made fake `pynvml` module
(tests/fake_pynvml.py, built on the installed nvidia-ml-py's error classes and constants),
psutil on real PIDs, the poller on a fake clock, recordings on disk, and `vramtui watch`.

Figures are an H100 80GB as NVML v2 reports it: total 85,520,809,984 B = reserved 547,356,672
+ used 42,949,672,960 (40 GiB) + free 42,023,780,352. v1 reports used + reserved as "used".
"""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pynvml as real_pynvml
import pytest
from fake_pynvml import (
    GIB,
    H100_RESERVED,
    H100_TOTAL,
    FakeGpu,
    FakeProcess,
    fake_function_names,
    make_fake_pynvml,
)

from vramtui.cli import main
from vramtui.feed import (
    SCHEMA_VERSION,
    FeedError,
    GpuSample,
    ProcessSample,
    Snapshot,
    snapshot_from_json,
    snapshot_to_json,
)
from vramtui.feed.nvml_source import NVML_CODE_NAMES, NvmlSource
from vramtui.feed.poller import MIN_INTERVAL, Poller
from vramtui.feed.processes import Attributor
from vramtui.feed.record import Recorder, play, read_recording, replay

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
USED = 40 * GIB
FREE = 42_023_780_352
GHOST_PID = 4_300_000  # above Linux's largest pid_max (2^22): never in /proc
NO_DRIVER = (
    "NVML not available (libnvidia-ml.so.1 not found): no NVIDIA driver on this host; "
    "the estimates still work"
)


class FakeClock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def install(monkeypatch, gpus, **kw):
    fake = make_fake_pynvml(gpus, **kw)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def opened(monkeypatch, gpus, **kw):
    fake = install(monkeypatch, gpus, **kw)
    source = NvmlSource(host="box", attribute_processes=False)
    source.open()
    return fake, source


def poller_for(source, clock=None, **kw):
    clock = clock or FakeClock()
    return Poller(source, clock=clock, wall_clock=lambda: 1_765_000_000.0 + clock.t, **kw)


# --- the fake itself --------------------------------------------------------------------


def test_fake_names_only_real_pynvml_functions_and_errors():
    fake = make_fake_pynvml([FakeGpu()])
    for name in fake_function_names(fake):
        assert callable(getattr(real_pynvml, name, None)), name
    # NvmlSource classifies errors by these codes: they must exist in the real module.
    for name in NVML_CODE_NAMES:
        assert isinstance(getattr(real_pynvml, name, None), int), name
    for name in (
        "nvmlMemory_v2",
        "NVML_TEMPERATURE_GPU",
        "NVML_CLOCK_SM",
        "NVML_CLOCK_MEM",
        "NVMLLibraryMismatchError",
    ):
        assert hasattr(real_pynvml, name), name
    assert H100_TOTAL == H100_RESERVED + USED + FREE


# --- memory info v2 / v1 ----------------------------------------------------------------


def test_v2_memory_reports_reserved_apart_from_used(monkeypatch):
    fake, source = opened(monkeypatch, [FakeGpu()])
    (g,) = source.read_devices()
    assert g == GpuSample(
        index=0,
        uuid="GPU-00000000-0000-0000-0000-000000000000",
        name="NVIDIA H100 80GB HBM3",
        total_bytes=85_520_809_984,
        used_bytes=42_949_672_960,
        free_bytes=42_023_780_352,
        reserved_bytes=547_356_672,
        memory_info_version=2,
        util_percent=87,
        mem_util_percent=43,
        temperature_c=61,
        power_w=412.345,
        power_limit_w=700.0,
        sm_clock_mhz=1980,
        mem_clock_mhz=2619,
    )
    assert g.total_bytes == g.used_bytes + g.free_bytes + g.reserved_bytes
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 1
    assert "nvmlDeviceGetMemoryInfo" not in fake.calls  # v1 not needed
    assert source.versions() == {
        "driver_version": "550.54.15",
        "nvml_version": "12.550.54.15",
        "cuda_driver_version": "12.4",
    }
    source.close()
    assert fake.initialised == 0


def test_v1_when_the_library_has_no_v2_constant(monkeypatch):
    fake, source = opened(monkeypatch, [FakeGpu()], has_v2_constant=False)
    (g,) = source.read_devices()
    assert g.memory_info_version == 1
    assert g.reserved_bytes is None
    assert g.used_bytes == USED + H100_RESERVED  # v1 counts the carve-out as used
    assert g.used_bytes + g.free_bytes == g.total_bytes == H100_TOTAL
    assert "nvmlDeviceGetMemoryInfo_v2" not in fake.calls


@pytest.mark.parametrize(
    "error",
    ["NVMLError_FunctionNotFound", "NVMLError_NotSupported", "NVMLError_ArgumentVersionMismatch"],
)
def test_v1_fallback_when_the_driver_refuses_v2(monkeypatch, error):
    gpu = FakeGpu(raises={"nvmlDeviceGetMemoryInfo_v2": getattr(real_pynvml, error)})
    fake, source = opened(monkeypatch, [gpu])
    first = source.read_devices()[0]
    second = source.read_devices()[0]
    for g in (first, second):
        assert (g.memory_info_version, g.reserved_bytes) == (1, None)
        assert g.used_bytes == USED + H100_RESERVED
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 1  # not asked again on the next tick
    assert fake.calls["nvmlDeviceGetMemoryInfo"] == 2


def test_missing_counters_read_as_none(monkeypatch):
    gpu = FakeGpu(
        raises={
            "nvmlDeviceGetTemperature": real_pynvml.NVMLError_NotSupported,
            "nvmlDeviceGetPowerUsage": real_pynvml.NVMLError_NotSupported,
            "nvmlDeviceGetUUID": real_pynvml.NVMLError_NoPermission,
            "nvmlDeviceGetClockInfo": real_pynvml.NVMLError_Unknown,
        }
    )
    _, source = opened(monkeypatch, [gpu])
    (g,) = source.read_devices()
    assert g.temperature_c is None and g.power_w is None and g.uuid is None
    assert g.sm_clock_mhz is None and g.mem_clock_mhz is None
    assert g.power_limit_w == 700.0 and g.used_bytes == USED and g.name.startswith("NVIDIA")
    assert source.notes == ()


def test_gpu_lost_mid_run_blanks_that_gpu_only(monkeypatch):
    gpus = [
        FakeGpu(compute=[FakeProcess(os.getpid(), 2 * GIB)]),
        FakeGpu(uuid="GPU-1", compute=[FakeProcess(GHOST_PID, 3 * GIB)]),
    ]
    fake, source = opened(monkeypatch, gpus)
    poller = poller_for(source)
    first = poller.poll(0.0)
    assert [g.used_bytes for g in first.gpus] == [USED, USED]
    assert first.unattributed_bytes(1) == USED - 3 * GIB
    fake.gpus[1].lost = True
    second = poller.poll(2.0)
    assert second.error is None
    assert second.gpus[0] == first.gpus[0]
    assert second.gpus[1] == GpuSample(index=1)  # every field n/a
    assert any("GPU 1" in n and "lost" in n for n in second.notes)
    assert second.unattributed_bytes(1) is None
    assert second.unattributed_bytes(0) == USED - 2 * GIB
    fake.gpus[1].lost = False  # the handle is asked for again: it may come back
    third = poller.poll(4.0)
    assert third.gpus[1].used_bytes == USED and third.notes == ()


def test_no_library_gives_an_error_snapshot(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    poller = poller_for(NvmlSource(host="box"))
    snap = poller.poll(0.0)
    assert snap.error.startswith("NVML not available (")
    assert "\n" not in snap.error
    assert (snap.gpus, snap.processes) == ((), None)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        ("NVMLError_LibraryNotFound", NO_DRIVER),
        ("NVMLError_DriverNotLoaded", "NVML not available (driver not loaded): "),
        ("NVMLError_Uninitialized", "NVML not available (nvmlInit failed: Uninitialized)"),
    ],
)
def test_nvml_init_failure_is_one_line_and_retried_later(monkeypatch, error, message):
    fake = install(monkeypatch, [FakeGpu()], init_error=getattr(real_pynvml, error))
    poller = poller_for(NvmlSource(host="box"), reopen_interval=5.0)
    snap = poller.poll(0.0)
    assert snap.error.startswith(message) and "\n" not in snap.error
    poller.poll(1.0)
    assert fake.calls["nvmlInit"] == 1  # not retried every tick
    poller.poll(5.0)
    assert fake.calls["nvmlInit"] == 2


def test_real_pynvml_without_a_driver_says_so():
    source = NvmlSource()
    try:
        source.open()
    except FeedError as exc:
        assert str(exc).startswith("NVML not available (")
    else:  # a machine with a driver: the real counters must read
        try:
            assert all(g.index >= 0 for g in source.read_devices())
        finally:
            source.close()


# --- processes --------------------------------------------------------------------------


def test_attribution_of_our_pid_and_a_host_pid(monkeypatch):
    gpus = [FakeGpu(compute=[FakeProcess(os.getpid(), 2 * GIB), FakeProcess(GHOST_PID, 3 * GIB)])]
    install(monkeypatch, gpus)
    source = NvmlSource(host="box")  # attribution on
    source.open()
    poller = poller_for(source)
    snap = poller.poll(0.0)
    me, ghost = snap.processes
    assert (me.pid, me.visible, me.used_bytes) == (os.getpid(), True, 2 * GIB)
    assert me.name == psutil.Process().name() and me.name.startswith("python")
    assert me.user == psutil.Process().username()
    assert me.rss_bytes > 0 and me.cmdline
    assert me.cpu_percent is None  # first sighting: no interval to measure over yet
    assert (ghost.pid, ghost.visible, ghost.used_bytes) == (GHOST_PID, False, 3 * GIB)
    assert ghost.name is ghost.user is ghost.rss_bytes is None
    # the invisible PID's memory still counts
    assert snap.unattributed_bytes(0) == USED - 2 * GIB - 3 * GIB
    again = poller.poll(2.0)
    assert isinstance(again.processes[0].cpu_percent, float)


def test_attributor_keeps_unknown_fields_for_access_denied(monkeypatch):
    class Denied:
        def __init__(self, pid):
            raise psutil.AccessDenied(pid)

    monkeypatch.setattr(psutil, "Process", Denied)
    (p,) = Attributor().attribute([ProcessSample(gpu_index=0, pid=1, used_bytes=5)])
    assert p.visible and p.name is None and p.used_bytes == 5


def test_a_process_in_both_lists_counts_once_and_unknown_memory_is_unknown(monkeypatch):
    gpus = [
        FakeGpu(compute=[FakeProcess(111, GIB)], graphics=[FakeProcess(111, GIB)]),
        FakeGpu(compute=[FakeProcess(222, None)]),
    ]
    _, source = opened(monkeypatch, gpus)
    snap = poller_for(source).poll(0.0)
    assert [(p.gpu_index, p.pid, p.used_bytes) for p in snap.processes] == [
        (0, 111, GIB),
        (1, 222, None),
    ]
    assert snap.unattributed_bytes(0) == USED - GIB
    assert snap.unattributed_bytes(1) is None


def test_unreadable_process_list_leaves_unattributed_unknown(monkeypatch):
    gpus = [
        FakeGpu(raises={"nvmlDeviceGetComputeRunningProcesses": real_pynvml.NVMLError_NoPermission})
    ]
    _, source = opened(monkeypatch, gpus)
    snap = poller_for(source).poll(0.0)
    assert snap.processes == () and snap.unread_process_gpus == (0,)
    assert snap.unattributed_bytes(0) is None
    assert any("not readable" in n for n in snap.notes)


def test_unattributed_is_never_negative():
    s = Snapshot(
        host="h",
        time=0.0,
        gpus=(GpuSample(index=0, used_bytes=GIB),),
        processes=(ProcessSample(gpu_index=0, pid=1, used_bytes=2 * GIB),),
    )
    assert s.unattributed_bytes(0) == 0
    assert s.unattributed_bytes(7) is None
    assert Snapshot(host="h", time=0.0, gpus=s.gpus).unattributed_bytes(0) is None


# --- the poller -------------------------------------------------------------------------


def test_processes_every_process_interval_only(monkeypatch):
    _, source = opened(monkeypatch, [FakeGpu(compute=[FakeProcess(111, GIB)])])
    poller = poller_for(source, device_interval=1.0, process_interval=2.0)
    ticks = [poller.poll(t) for t in (0.0, 1.0, 2.0, 3.0, 4.01, 4.98, 6.0)]
    assert [s.processes is not None for s in ticks] == [
        True,
        False,
        True,
        False,
        True,
        False,
        True,
    ]
    assert all(len(s.gpus) == 1 for s in ticks)


@pytest.mark.parametrize("kw", [{"device_interval": 0.1}, {"process_interval": 0.2}])
def test_intervals_below_the_floor_are_refused(kw):
    with pytest.raises(FeedError) as err:
        Poller(NvmlSource(), **kw)
    assert "0.25" in str(err.value) and "\n" not in str(err.value)
    assert MIN_INTERVAL == 0.25
    Poller(NvmlSource(), MIN_INTERVAL, MIN_INTERVAL)


class _CountingSource:
    host = "fake"

    def __init__(self, clock, poll_cost=0.0):
        self.clock = clock
        self.poll_cost = poll_cost
        self.active = 0

    def open(self):
        pass

    def close(self):
        pass

    def versions(self):
        return {}

    def read_devices(self):
        self.active += 1
        assert self.active == 1, "polls overlap"
        self.clock.t += self.poll_cost
        self.active -= 1
        return (GpuSample(index=0),)

    def read_processes(self):
        return ()


def test_slow_callback_skips_ticks_instead_of_queueing():
    clock = FakeClock(100.0)
    poller = poller_for(_CountingSource(clock, poll_cost=0.01), clock, device_interval=1.0)
    stop = threading.Event()
    polled_at = []

    def slow_callback(snap):
        polled_at.append(round(clock.t - 100.0, 2))
        clock.t += 2.5  # the UI took 2.5 s
        if clock.t >= 110:
            stop.set()

    waits = []

    def fake_wait(seconds):
        assert seconds >= 0
        waits.append(round(seconds, 2))
        clock.t += seconds

    poller.run(slow_callback, stop, wait=fake_wait)
    # Polls land on whole ticks after each 2.5 s callback; no burst of catch-up polls.
    assert polled_at == [0.01, 3.01, 6.01, 9.01]
    assert waits == [0.49, 0.49, 0.49]
    assert poller.skipped_ticks == 6


def test_short_real_run_stops_and_does_not_build_a_backlog():
    source = _CountingSource(FakeClock())
    poller = Poller(source, device_interval=0.25, process_interval=0.5)
    stop = threading.Event()
    stamps = []

    def callback(snap):
        stamps.append(time.monotonic())
        time.sleep(0.3)  # slower than the interval

    thread = threading.Thread(target=poller.run, args=(callback, stop))
    start = time.monotonic()
    thread.start()
    time.sleep(0.9)
    stop.set()
    thread.join(2.0)
    assert not thread.is_alive()
    assert time.monotonic() - start < 1.6
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert 1 <= len(stamps) <= 3  # polls at 0, 0.5 (0.25 skipped), maybe 1.0 - never 0.3, 0.6
    assert all(g >= 0.45 for g in gaps), gaps


# --- JSON, recording, replay ------------------------------------------------------------


def _snapshots() -> list[Snapshot]:
    g0 = GpuSample(
        0,
        "GPU-0",
        "NVIDIA H100 80GB HBM3",
        H100_TOTAL,
        USED,
        FREE,
        H100_RESERVED,
        2,
        87,
        43,
        61,
        412.345,
        700.0,
        1980,
        2619,
    )
    g1 = GpuSample(index=1, name="NVIDIA H100 80GB HBM3")
    procs = (
        ProcessSample(0, os.getpid(), 2 * GIB, "python", "me", "python -m x", 10**8, 12.5, True),
        ProcessSample(0, GHOST_PID, 3 * GIB, visible=False),
    )
    return [
        Snapshot("box", 1000.0, (g0, g1), procs, "550.54.15", "12.550.54.15", "12.4"),
        Snapshot("box", 1001.0, (g0, g1), None, "550.54.15", notes=("GPU 1: lost",)),
        Snapshot("box", 1003.0, (), None, error=NO_DRIVER),
        Snapshot("box", 1002.5, (g0,), (), unread_process_gpus=(0,)),
    ]


def test_json_round_trip_and_schema_check():
    for s in _snapshots():
        d = snapshot_to_json(s)
        assert d["schema"] == SCHEMA_VERSION
        assert snapshot_from_json(json.loads(json.dumps(d))) == s
    with pytest.raises(FeedError, match="schema version 2 is not supported"):
        snapshot_from_json({**snapshot_to_json(_snapshots()[0]), "schema": 2})
    bad = snapshot_to_json(_snapshots()[0])
    bad["gpus"][0]["used_bytes"] = "lots"
    with pytest.raises(FeedError, match=r"gpus\[0\]\.used_bytes must be an integer"):
        snapshot_from_json(bad)


def test_record_and_read_back(tmp_path):
    path = tmp_path / "feed.jsonl"
    snaps = _snapshots()
    with Recorder(path) as rec:
        for s in snaps[:2]:
            rec.write(s)
    with Recorder(path) as rec:  # appending: no second header
        for s in snaps[2:]:
            rec.write(s)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"vramtui_feed": 1, "host": "box", "started": 1000.0}
    assert len(lines) == 1 + len(snaps)
    assert all(", " not in line and '": ' not in line for line in lines)  # compact
    header, back = read_recording(path)
    assert header["host"] == "box" and back == snaps


def test_truncated_last_line_is_tolerated_and_cut_before_appending(tmp_path):
    path = tmp_path / "feed.jsonl"
    snaps = _snapshots()
    with Recorder(path) as rec:
        for s in snaps[:3]:
            rec.write(s)
    full = path.read_bytes()
    last_line = full.rstrip(b"\n").rsplit(b"\n", 1)[1]
    path.write_bytes(full[: len(full) - len(last_line) // 2 - 1])  # killed mid-line
    assert read_recording(path)[1] == snaps[:2]
    with Recorder(path) as rec:
        rec.write(snaps[3])
    assert read_recording(path)[1] == [snaps[0], snaps[1], snaps[3]]


def test_corrupt_middle_line_names_its_number(tmp_path):
    path = tmp_path / "feed.jsonl"
    with Recorder(path) as rec:
        for s in _snapshots():
            rec.write(s)
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:40] + "\n"  # line 3 (the second snapshot) torn, with a newline
    path.write_text("".join(lines))
    with pytest.raises(FeedError, match=r"feed\.jsonl, line 3: ") as err:
        read_recording(path)
    assert "\n" not in str(err.value)


def test_not_a_recording_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("shopping list\n")
    with pytest.raises(FeedError, match="not a vramtui feed recording"):
        read_recording(path)
    with pytest.raises(FeedError, match="not a vramtui feed recording"):
        Recorder(path)
    assert path.read_text() == "shopping list\n"  # untouched
    with pytest.raises(FeedError, match="cannot read recording"):
        read_recording(tmp_path / "missing.jsonl")


def test_replay_divides_recorded_gaps_by_speed(tmp_path):
    path = tmp_path / "feed.jsonl"
    with Recorder(path) as rec:
        for s in _snapshots():  # times 1000, 1001, 1003, 1002.5 (a clock step back)
            rec.write(s)
    assert [d for d, _ in replay(path, speed=2.0)] == [0.0, 0.5, 1.0, 0.0]
    assert [d for d, _ in replay(path)] == [0.0, 1.0, 2.0, 0.0]
    for bad in (0, -1, float("nan")):
        with pytest.raises(FeedError, match="--speed must be"):
            list(replay(path, speed=bad))
    waited, got = [], []
    n = play(path, got.append, threading.Event(), speed=4.0, wait=waited.append)
    assert n == 4 and got == _snapshots() and waited == [0.25, 0.5]


# --- the command line -------------------------------------------------------------------


def _json_out(capsys) -> tuple[dict, str]:
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 1, out
    return json.loads(lines[0]), err


def test_watch_once_json_without_nvml(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert main(["watch", "--once", "--json"]) == 0
    data, err = _json_out(capsys)
    assert data["error"].startswith("NVML not available") and data["gpus"] == []
    assert err.startswith("vramtui: note: NVML not available") and err.count("\n") == 1


def test_watch_once_json_and_table_with_fake_nvml(monkeypatch, capsys, tmp_path):
    install(monkeypatch, [FakeGpu(compute=[FakeProcess(GHOST_PID, 3 * GIB)]), FakeGpu()])
    record = tmp_path / "rec.jsonl"
    assert main(["watch", "--once", "--json", "--record", str(record)]) == 0
    data, err = _json_out(capsys)
    assert err == "" and data["error"] is None
    assert [g["used_bytes"] for g in data["gpus"]] == [USED, USED]
    assert data["gpus"][0]["reserved_bytes"] == H100_RESERVED
    assert data["processes"][0]["pid"] == GHOST_PID and data["processes"][0]["visible"] is False
    assert read_recording(record)[1] == [snapshot_from_json(data)]

    monkeypatch.setenv("COLUMNS", "160")
    assert main(["watch", "--once"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out and "40.00 GiB" in out and "0.51 GiB" in out
    assert str(GHOST_PID) in out and "GPU 0: 37.00 GiB used but not listed" in out


def test_watch_once_from_a_replay(capsys, tmp_path):
    path = tmp_path / "feed.jsonl"
    with Recorder(path) as rec:
        for s in _snapshots():
            rec.write(s)
    assert main(["watch", "--once", "--json", "--replay", str(path)]) == 0
    data, _ = _json_out(capsys)
    assert snapshot_from_json(data) == _snapshots()[0]
    assert main(["watch", "--once", "--replay", str(path), "--speed", "0"]) == 2
    assert "--speed must be > 0" in capsys.readouterr().err


def test_watch_json_loop_records_until_interrupted(monkeypatch, tmp_path):
    install(monkeypatch, [FakeGpu()])
    from vramtui.feed import command

    class TwoTicks(threading.Event):
        waits = 0

        def wait(self, timeout=None):
            TwoTicks.waits += 1
            if TwoTicks.waits == 2:
                raise KeyboardInterrupt
            return False

    monkeypatch.setattr(command.threading, "Event", TwoTicks)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    record = tmp_path / "loop.jsonl"
    assert main(["watch", "--json", "--interval", "0.25", "--record", str(record)]) == 130
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    snaps = read_recording(record)[1]
    assert [snapshot_from_json(json.loads(line)) for line in lines] == snaps
    assert snaps[0].processes is not None


def test_watch_argument_errors_are_one_line(capsys):
    for argv, text in (
        (["watch", "--once", "--interval", "0.1"], "below the 0.25 s floor"),
        (["watch", "--once", "--speed", "2"], "--speed goes with --replay"),
        (["watch", "--once", "--remote-python", "/x"], "--remote-python goes with --ssh"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert text in err and err.count("\n") == 1, err


def test_watch_ssh_without_the_module_is_one_line(monkeypatch, capsys):
    import vramtui.feed

    # A build without the SSH feed: neither the feed module nor its command module.
    for name in ("ssh", "ssh_watch"):
        monkeypatch.delattr(vramtui.feed, name, raising=False)
        monkeypatch.setitem(sys.modules, f"vramtui.feed.{name}", None)
    assert main(["watch", "--ssh", "gpu1", "--once"]) == 2
    err = capsys.readouterr().err
    assert "--ssh" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [["watch", "--once", "--json"], ["watch", "--once"]])
def test_watch_once_does_not_import_textual(argv):
    code = (
        "import sys\n"
        "from vramtui.cli import main\n"
        f"rc = main({argv!r})\n"
        "loaded = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print('RC', rc, 'TEXTUAL', loaded, file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "120"},
        timeout=60,
    )
    assert "RC 0 TEXTUAL []" in result.stderr, result.stderr


def test_a_header_cut_short_is_restarted(tmp_path):
    path = tmp_path / "feed.jsonl"
    path.write_bytes(b'{"vramtui_feed":1,"ho')  # killed while writing the header
    with pytest.raises(FeedError, match="truncated header"):
        read_recording(path)
    with Recorder(path) as rec:
        rec.write(_snapshots()[0])
    assert read_recording(path) == (
        {"vramtui_feed": 1, "host": "box", "started": 1000.0},
        [_snapshots()[0]],
    )


def test_plain_watch_opens_the_app_on_the_feed_pane(monkeypatch):
    """`vramtui watch` without --once/--json opens the app on its Feed tab (not run here)."""
    import vramtui.app.run as run

    seen = {}

    def fake_run_app(spec_path, catalog_dir, feed_settings, initial_tab):
        seen.update(kind=feed_settings.kind, tab=initial_tab, interval=feed_settings.interval)
        return 0

    monkeypatch.setattr(run, "run_app", fake_run_app)
    assert main(["watch", "--interval", "0.5"]) == 0
    assert seen == {"kind": "local", "tab": "feed", "interval": 0.5}
