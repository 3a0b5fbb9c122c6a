"""How fast is `read_log` on a big log, and is it linear?

Builds logs of 5, 25 and 50 MB from realistic noise (trainer loss dicts, tqdm bars, vLLM metric
lines, DeepSpeed and Python logging lines) with (a) one PyTorch OOM traceback at the end and
(b) "many OOMs": an OOM traceback every ~2,000 lines plus wrapped and ANSI-coloured copies.
Prints MB/s per size; the MB/s staying flat from 5 to 50 MB is what "linear" means here.
A third case is hostile: 5 MB of near-miss text ("Tried to allocate " with no number, 19,000
digits on one line, unterminated ANSI escapes) to show no pattern backtracks for long.
A log repeating one OOM line with no end marker is timed by bench/bench_bounds.py
(2,000 lines: 48.3 s before continuation gathering stopped at a new message, 0.12 s after;
bench/results/bounds-2026-12-03.txt).

    PYTHONPATH=tui python bench/bench_triage.py [--sizes 5 25 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "tui") not in sys.path:
    sys.path.insert(0, str(REPO / "tui"))

from vramtui.triage import read_log

LOGS = REPO / "tests" / "triage_logs"

NOISE = (
    "{'loss': 1.2345, 'grad_norm': 0.5312, 'learning_rate': 1.9e-05, 'epoch': 0.12}",
    " 12%|█▏        | 120/1000 [01:23<10:12,  1.43it/s]",
    "INFO 01-15 10:22:11 [loggers.py:118] Engine 000: Avg prompt throughput: 1234.5 tokens/s, "
    "Avg generation throughput: 456.7 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: 23.4%, Prefix cache hit rate: 0.0%",
    "2024-05-01 12:00:00,123 - INFO - step 1200 took 0.31s, tokens/s 12345",
    "[2024-05-01 12:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=1200, skipped=0, "
    "lr=[1.9e-05], mom=[(0.9, 0.999)]",
    "[rank0]:[W501 12:00:00.123 ProcessGroupNCCL.cpp:4115] Warning: using the current device",
    "Epoch 3/10: validation accuracy 0.8123, memory reserved 21.3 GB",
)


def build(size_mb: float, many: bool, seed: int = 0) -> str:
    rng = random.Random(seed)
    oom = (LOGS / "pytorch_cuda_current_generate.log").read_text()
    wrapped = (LOGS / "wrapped_terminal_80col.log").read_text()
    ansi = (LOGS / "ansi_crlf_backward.log").read_bytes().decode()
    target = int(size_mb * 1_000_000)
    parts: list[str] = []
    size = 0
    k = 0
    while size < target:
        line = NOISE[rng.randrange(len(NOISE))]
        parts.append(line)
        size += len(line) + 1
        k += 1
        if many and k % 2000 == 0:
            block = (oom, wrapped, ansi)[(k // 2000) % 3]
            parts.append(block)
            size += len(block)
    parts.append(oom)
    return "\n".join(parts)


def hostile(size_mb: float) -> str:
    pieces = [
        "Tried to allocate " * 50,
        "9" * 19_000 + " MiB total capacity",
        "\x1b[" + "1;" * 5_000,
        "CUDA out of memory. " + "(GPU 0; " * 2_000,
        'File "' + "a" * 5_000,
        "Error " + "out of " * 3_000 + "memory",
        "failed to allocate " + "x" * 15_000 + " buffer of size 12",
        "model's max seq len (" + "1" * 10_000,
    ]
    out, size = [], 0
    i = 0
    while size < size_mb * 1_000_000:
        s = pieces[i % len(pieces)]
        out.append(s)
        size += len(s) + 1
        i += 1
    return "\n".join(out)


def timed(text: str, repeat: int) -> tuple[float, object]:
    best = float("inf")
    reading = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        reading = read_log(text)
        best = min(best, time.perf_counter() - t0)
    return best, reading


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[5, 25, 50])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"{'case':<22}{'MB':>8}{'seconds':>10}{'MB/s':>9}{'events':>8}  phase")
    for many in (False, True):
        for mb in args.sizes:
            text = build(mb, many)
            real_mb = len(text.encode()) / 1e6
            secs, r = timed(text, args.repeat)
            label = "many OOMs" if many else "one OOM at the end"
            print(
                f"{label:<22}{real_mb:>8.1f}{secs:>10.3f}{real_mb / secs:>9.1f}"
                f"{len(r.events):>8}  {r.phase.phase}"
            )
    text = hostile(5)
    secs, r = timed(text, 1)
    mb = len(text.encode()) / 1e6
    print(f"{'hostile near-misses':<22}{mb:>8.1f}{secs:>10.3f}{mb / secs:>9.1f}{len(r.events):>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
