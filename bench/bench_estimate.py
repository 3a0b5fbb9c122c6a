"""How fast is `vramtui estimate`?

1. Start-up: wall time of the CLI as a fresh process (what a user or a script pays per call)
   against `python -c pass` (the interpreter's own floor), N runs each, median and min.
2. Recompute: in-process `estimate(spec, arch)` on an already loaded spec and architecture,
   1000 iterations (the app recomputes on every keystroke), microseconds per call.

    PYTHONPATH=tui python bench/bench_estimate.py [-n 20] [--iterations 1000] [--save]

--save writes the report to bench/results/estimate-<YYYY-MM-DD>.txt as well.
Start-up is timed with a bytecode cache (in a temporary PYTHONPYCACHEPREFIX), as an installed
package runs; --no-bytecode-cache adds a second table under the caller's own environment.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
CHAT_SPEC = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
SEED_SPEC = REPO / "sample_specs" / "seed-7b-fp16-inference.toml"

if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def child_env(pycache: str | None) -> dict[str, str]:
    """The environment of the timed processes. With `pycache`, bytecode is written to and read
    from that folder (as an installed package would have its .pyc files); without it the
    caller's environment stands, e.g. PYTHONDONTWRITEBYTECODE=1 recompiles every module on
    every start."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def time_command(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    subprocess.run(argv, env=env, cwd=REPO, check=True, capture_output=True)  # warm the caches
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            argv,
            env=env,
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - t0)
    return times


def bench_startup(runs: int, env: dict[str, str]) -> list[str]:
    py = sys.executable
    cases = [
        ("python -c pass", [py, "-c", "pass"]),
        ("estimate --help", [py, "-m", "vramtui", "estimate", "--help"]),
        ("estimate seed spec --json", [py, "-m", "vramtui", "estimate", str(SEED_SPEC), "--json"]),
        (
            "estimate llama-3.1-8b chat spec --json",
            [py, "-m", "vramtui", "estimate", str(CHAT_SPEC), "--json"],
        ),
        (
            "estimate llama-3.1-8b chat spec (rich text)",
            [py, "-m", "vramtui", "estimate", str(CHAT_SPEC)],
        ),
        (
            "shortlist llama-3.1-8b chat spec --json",
            [py, "-m", "vramtui", "shortlist", str(CHAT_SPEC), "--days", "3", "--json"],
        ),
    ]
    if "PYTHONPYCACHEPREFIX" in env:
        mode = "bytecode cached (as installed)"
    elif env.get("PYTHONDONTWRITEBYTECODE"):
        mode = "PYTHONDONTWRITEBYTECODE set: every module compiled from source on every start"
    else:
        mode = "bytecode cache as the environment has it"
    lines = [
        f"start-up: {runs} runs each (after one warm-up run), wall time of a fresh process",
        f"  {mode}",
        f"{'command':<44} {'median ms':>10} {'min ms':>9} {'x python':>9} {'+ms':>7}",
    ]
    base_median = None
    for label, argv in cases:
        t = time_command(argv, runs, env)
        med, lo = statistics.median(t) * 1e3, min(t) * 1e3
        if base_median is None:
            base_median = med
        lines.append(
            f"{label:<44} {med:>10.1f} {lo:>9.1f} {med / base_median:>9.2f} "
            f"{med - base_median:>7.1f}"
        )
    return lines


def bench_recompute(iterations: int) -> list[str]:
    from vramtui.ledger import estimate
    from vramtui.models.resolve import resolve_model
    from vramtui.spec import load_spec

    lines = [
        f"recompute: estimate(spec, arch) in process, {iterations} iterations, best of 5 rounds"
    ]
    for path in sorted((REPO / "sample_specs").glob("*.toml")):
        spec = load_spec(path)
        arch, ckpt = resolve_model(spec.model, path.parent)
        estimate(spec, arch, ckpt)  # warm-up
        rounds = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(iterations):
                estimate(spec, arch, ckpt)
            rounds.append((time.perf_counter() - t0) / iterations)
        lines.append(
            f"  {path.name:<36} {min(rounds) * 1e6:>9.1f} us/call "
            f"(median round {statistics.median(rounds) * 1e6:.1f} us)"
        )
    return lines


def bench_shortlist(iterations: int) -> list[str]:
    """estimate + shortlist over the whole catalogue: what the app redoes on every keystroke."""
    from vramtui.catalog import load_catalog
    from vramtui.ledger import estimate
    from vramtui.models.resolve import resolve_model
    from vramtui.shortlist import shortlist
    from vramtui.spec import load_spec

    catalog = load_catalog(use_user_config=False)
    n = max(1, iterations // 10)
    lines = [
        f"recompute: estimate + shortlist of all {len(catalog.offers)} offers in process, "
        f"{n} iterations, best of 5 rounds"
    ]
    for path in sorted((REPO / "sample_specs").glob("*.toml")):
        spec = load_spec(path)
        arch, ckpt = resolve_model(spec.model, path.parent)
        shortlist(spec, estimate(spec, arch, ckpt), catalog, arch=arch, days=3)  # warm-up
        rounds = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                shortlist(spec, estimate(spec, arch, ckpt), catalog, arch=arch, days=3)
            rounds.append((time.perf_counter() - t0) / n)
        lines.append(
            f"  {path.name:<36} {min(rounds) * 1e3:>9.2f} ms/call "
            f"(median round {statistics.median(rounds) * 1e3:.2f} ms)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--runs", type=int, default=20, help="process runs per command")
    ap.add_argument("--iterations", type=int, default=1000, help="in-process estimate() calls")
    ap.add_argument("--save", action="store_true", help="write bench/results/estimate-<date>.txt")
    ap.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="also time the start-up with the environment's own bytecode setting "
        "(PYTHONDONTWRITEBYTECODE=1 here means compiling every module every time)",
    )
    args = ap.parse_args(argv)

    head = [
        f"vramtui estimate benchmark, {dt.datetime.now().isoformat(timespec='seconds')}",
        f"python {platform.python_version()}, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs",
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="vramtui-bench-pycache-") as pycache:
        report = head + bench_startup(args.runs, child_env(pycache)) + [""]
    if args.no_bytecode_cache:
        report += bench_startup(args.runs, child_env(None)) + [""]
    report += bench_recompute(args.iterations) + [""]
    report += bench_shortlist(args.iterations)
    text = "\n".join(report) + "\n"
    sys.stdout.write(text)
    if args.save:
        out = REPO / "bench" / "results" / f"estimate-{dt.date.today().isoformat()}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"saved {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
