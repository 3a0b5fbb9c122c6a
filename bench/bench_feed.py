"""What does the live feed cost?

1. CPU: `Poller.poll` on a fake 8-GPU NVML (tests/fake_pynvml.py) with 20 processes, CPU time
   (time.process_time) per poll with devices only and with devices + processes (psutil
   attribution of 20 real local PIDs), and the share of one core at 1 Hz with processes
   every 2 s.
2. Stream: bytes of one compact JSON line (the --json / --record format) for 8 GPUs, with and
   without the process list, and bytes per second at 1 Hz with processes every 2 s.

    PYTHONPATH=tui python bench/bench_feed.py [--polls 400] [--save]

The fake answers in Python, so (1) is vramtui's own overhead: a real driver adds its ioctl
time per NVML call (about 15 calls per GPU per tick, 2 more per GPU for processes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (REPO / "tui", REPO / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import psutil
from fake_pynvml import eight_gpus_twenty_processes, make_fake_pynvml

from vramtui.feed.nvml_source import NvmlSource
from vramtui.feed.poller import Poller
from vramtui.feed.record import snapshot_line


def real_pids(n: int) -> list[int]:
    """n PIDs of this machine whose name we may read (ours first), for realistic psutil work."""
    pids = [os.getpid()]
    for proc in psutil.process_iter(["name"]):
        if len(pids) >= n:
            break
        if proc.pid not in pids and proc.info["name"]:
            pids.append(proc.pid)
    return pids


def cpu_per_poll(poller: Poller, polls: int, with_processes: bool) -> list[float]:
    """process_time of each poll, in seconds; the fake clock decides whether processes are due."""
    out = []
    t = 0.0
    for _ in range(polls):
        t += 2.0 if with_processes else 0.0
        if not with_processes:
            poller._next_process = float("inf")  # never due
        start = time.process_time()
        poller.poll(t)
        out.append(time.process_time() - start)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--polls", type=int, default=400)
    ap.add_argument("--save", action="store_true", help="write bench/results/feed-<date>.txt")
    args = ap.parse_args()

    gpus = eight_gpus_twenty_processes()
    pids = real_pids(20)
    k = 0
    for g in gpus:  # the 20 fake processes get real local PIDs (psutil has work to do)
        for proc in g.compute:
            proc.pid = pids[k % len(pids)] if k < len(pids) else proc.pid
            k += 1
    sys.modules["pynvml"] = make_fake_pynvml(gpus)
    source = NvmlSource(host="bench-8xh100")
    poller = Poller(source, 1.0, 2.0, clock=lambda: 0.0)
    poller.poll(0.0)  # open, first attribution (psutil caches the Process objects)
    poller.poll(2.0)

    dev = cpu_per_poll(poller, args.polls, with_processes=False)
    poller._next_process = None
    full = cpu_per_poll(poller, args.polls, with_processes=True)
    dev_ms = statistics.median(dev) * 1e3
    full_ms = statistics.median(full) * 1e3
    per_second_ms = (dev_ms + full_ms) / 2  # 1 Hz devices, processes every other tick

    poller._next_process = None
    with_procs = poller.poll(100.0)
    without = poller.poll(101.0)
    assert with_procs.processes is not None and without.processes is None
    line_full = len(snapshot_line(with_procs).encode())
    line_dev = len(snapshot_line(without).encode())
    start = time.process_time()
    for _ in range(1000):
        snapshot_line(with_procs)
    dump_us = (time.process_time() - start) * 1e3

    visible = sum(p.visible for p in with_procs.processes)
    lines = [
        f"vramtui feed benchmark, {dt.datetime.now().isoformat(timespec='seconds')}",
        (
            f"python {platform.python_version()}, {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs, psutil {psutil.__version__}"
        ),
        (
            f"fake NVML: 8 GPUs, {len(with_procs.processes)} processes ({visible} real local "
            f"PIDs attributed through psutil); {args.polls} polls each, median"
        ),
        "",
        "CPU time per poll (time.process_time)",
        f"  devices only                     {dev_ms:8.3f} ms",
        f"  devices + processes              {full_ms:8.3f} ms",
        (
            f"  at 1 Hz, processes every 2 s     {per_second_ms:8.3f} ms/s = "
            f"{per_second_ms / 10:.3f} % of one core"
        ),
        "",
        "JSON-lines stream (compact, 8 GPUs)",
        f"  line with processes              {line_full:8,d} B",
        f"  line without processes           {line_dev:8,d} B",
        (
            f"  at 1 Hz, processes every 2 s     {(line_full + line_dev) / 2:8,.0f} B/s "
            f"= {(line_full + line_dev) / 2 * 86400 / 2**20:.0f} MiB/day recorded"
        ),
        f"  at 1 Hz, processes every tick    {line_full:8,d} B/s",
        f"  serialising one line             {dump_us:8.1f} us",
    ]
    report = "\n".join(lines)
    print(report)
    if args.save:
        out = REPO / "bench" / "results" / f"feed-{dt.date.today().isoformat()}.txt"
        out.write_text(report + "\n")
        print(f"saved {out.relative_to(REPO)}")
    source.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
