"""What does `python -m vramtui.agent` cost on a node: CPU time and bytes per second it sends.

The agent runs as a child process against a fake `pynvml` (tests/fake_pynvml.py: 8 H100s,
20 processes) installed in sys.modules by a small wrapper before the agent's main() runs, at
--interval 1 (processes every 2 s, the defaults) for ~10 s. The child's CPU time (user + system,
from /proc/PID/task/*/schedstat) and its stdout bytes are measured twice: from spawn (start-up included)
and in the steady state (from the first snapshot to the end).

Two process cases: PIDs outside /proc (a container's view of host PIDs: psutil finds nothing)
and 20 real PIDs of this machine (psutil reads name, user, cmdline, RSS and CPU% of each).

    PYTHONPATH=tui python bench/bench_agent.py [--seconds 10] [--interval 1]

Linux only (/proc). The fake driver calls cost nothing, so a real NVML adds its own time
(a few hundred microseconds per call on a healthy driver).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
TESTS = REPO / "tests"

WRAPPER = """\
import sys
sys.path.insert(0, {tests!r})
from fake_pynvml import FakeProcess, eight_gpus_twenty_processes, make_fake_pynvml
gpus = eight_gpus_twenty_processes()
real = {real!r}
if real:
    k = 0
    for g in gpus:
        for p in g.compute:
            g.compute[g.compute.index(p)] = FakeProcess(real[k % len(real)], p.used)
            k += 1
sys.modules["pynvml"] = make_fake_pynvml(gpus)
from vramtui.agent import main
sys.exit(main({argv!r}))
"""

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time of `pid`, all its threads (the agent has no children): the nanosecond run
    time of /proc/PID/task/*/schedstat, else user + system from /proc/PID/stat (10 ms ticks)."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / TICK


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def real_pids(n: int = 20) -> list[int]:
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    return pids[:n]


def run_case(label: str, seconds: float, interval: float, real: list[int]) -> dict:
    argv = ["--interval", str(interval)]
    code = WRAPPER.format(tests=str(TESTS), real=real, argv=argv)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    marks: dict[str, float] = {}
    counts = {"bytes": 0, "lines": 0, "bytes_steady": 0, "lines_steady": 0}
    first = threading.Event()
    cpu_at_first: list[float] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.monotonic()
            counts["bytes"] += len(line)
            counts["lines"] += 1
            if counts["lines"] == 1:
                marks["header"] = now - t0
            elif counts["lines"] == 2:
                marks["first"] = now - t0
                try:
                    cpu_at_first.append(cpu_seconds(proc.pid))
                except OSError:
                    pass
                first.set()
            else:
                counts["bytes_steady"] += len(line)
                counts["lines_steady"] += 1

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        if not first.wait(30):
            raise SystemExit(f"{label}: no snapshot within 30 s: {proc.stderr.read().decode()}")
        time.sleep(seconds)
        wall = time.monotonic() - t0
        cpu = cpu_seconds(proc.pid)
        rss = peak_rss_mib(proc.pid)
        steady_wall = wall - marks["first"]
    finally:
        proc.stdin.close()  # the agent ends when its stdin closes (as under sshd)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait(timeout=5)
        thread.join(5)
        err = proc.stderr.read().decode().strip()
        proc.stderr.close()
    if rc != 0 or err:
        raise SystemExit(f"{label}: agent exited {rc}: {err}")
    steady_cpu = cpu - (cpu_at_first[0] if cpu_at_first else 0.0)
    return {
        "label": label,
        "wall": wall,
        "cpu": cpu,
        "startup_cpu": cpu_at_first[0] if cpu_at_first else float("nan"),
        "header_ms": marks["header"] * 1000,
        "first_ms": marks["first"] * 1000,
        "steady_wall": steady_wall,
        "steady_cpu": steady_cpu,
        "lines": counts["lines_steady"],
        "bytes": counts["bytes"],
        "bytes_steady": counts["bytes_steady"],
        "rss": rss,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    import psutil

    print(f"vramtui agent benchmark, {time.strftime('%Y-%m-%dT%H:%M:%S')}")
    print(
        f"python {platform.python_version()}, psutil {psutil.__version__}, "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(
        f"fake pynvml: 8 GPUs, 20 processes; --interval {args.interval:g} "
        f"(processes every {max(2.0, args.interval):g} s); {args.seconds:g} s after the "
        "first snapshot\n"
    )
    cases = [
        ("PIDs not in /proc (container view)", []),
        ("20 real PIDs (psutil attribution)", real_pids(20)),
    ]
    for label, real in cases:
        r = run_case(label, args.seconds, args.interval, real)
        per_line = r["bytes_steady"] / max(1, r["lines"])
        print(label)
        print(
            f"  start-up: header after {r['header_ms']:.0f} ms, first snapshot after "
            f"{r['first_ms']:.0f} ms, {r['startup_cpu'] * 1000:.0f} ms CPU"
        )
        print(
            f"  steady:   {r['steady_cpu'] * 1000:.0f} ms CPU in {r['steady_wall']:.1f} s = "
            f"{100 * r['steady_cpu'] / r['steady_wall']:.2f} % of one core; "
            f"{r['lines']} snapshots, {r['bytes_steady'] / r['steady_wall']:.0f} B/s "
            f"({per_line:.0f} B per snapshot)"
        )
        print(
            f"  overall:  {r['cpu'] * 1000:.0f} ms CPU in {r['wall']:.1f} s "
            f"({100 * r['cpu'] / r['wall']:.2f} %), {r['bytes'] / r['wall']:.0f} B/s; "
            f"peak RSS {r['rss']:.1f} MiB"
        )
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
