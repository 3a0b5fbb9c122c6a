"""How much do measurements cost per keystroke, and how fast are imports?

1. Per keystroke the app re-estimates and redraws "measured beside estimated" and the staged
   plan. This times `estimate` alone, then estimate + `compare` + `staged_plan`, for the chat
   spec with no stored measurements, a vLLM log imported once, and ten times (with
   distinct runs); microseconds per call, and the ratio to the estimate alone.
2. Import: `read_measurements_text` of a vLLM V1 start-up log and of a 200-stage probe file.

    PYTHONPATH=tui python bench/bench_measure.py [--iterations 500] [--save]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tui"))

from vramtui.ledger import estimate
from vramtui.measure.compare import compare
from vramtui.measure.importer import read_measurements_text
from vramtui.measure.plan import staged_plan
from vramtui.models.registry import find_model
from vramtui.spec import load_spec

CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
VLLM = REPO / "tests" / "vllm_logs" / "v1_0.10.1_api_server.log"


def per_call_us(fn, n: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def probe_text(stages: int) -> str:
    run = {
        "vramtui_probe": 1,
        "kind": "run",
        "run_id": "b" * 32,
        "run_name": "",
        "pid": 1,
        "time": "2026-12-02T10:00:00+00:00",
        "host": "node",
        "cuda_available": True,
        "versions": {"torch": "2.13.0"},
        "devices": [{"index": 0, "name": "GPU", "total_bytes": 1}],
    }
    lines = [json.dumps(run)]
    for i in range(stages):
        lines.append(
            json.dumps(
                {
                    "vramtui_probe": 1,
                    "kind": "stage",
                    "run_id": "b" * 32,
                    "stage": "prefill",
                    "time_start": "",
                    "time_end": "",
                    "seconds": 0.1,
                    "dims": {"concurrency": 1 + i % 16, "prompt_tokens": 512 * (1 + i % 16)},
                    "measured": True,
                    "reason": None,
                    "error": None,
                    "warnings": [],
                    "devices": [
                        {
                            "index": 0,
                            "max_memory_allocated_bytes": 10**9 + i,
                            "max_memory_reserved_bytes": 10**9 + 2 * i,
                            "memory_allocated_bytes": 1,
                            "memory_reserved_bytes": 1,
                            "nvml_used_bytes": 2 * 10**9,
                            "nvml_process_used_bytes": None,
                            "nvml_total_bytes": None,
                        }
                    ],
                }
            )
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    spec = load_spec(CHAT)
    arch = find_model(spec.model.id)
    log = VLLM.read_text()
    once = read_measurements_text(log, spec, source="v.log").measurements
    many = []
    for k in range(10):
        many += [replace(m, run=f"run{k}") for m in once]
    lines = [
        (
            f"bench_measure {dt.date.today()} · python {platform.python_version()} · "
            f"{platform.machine()} · {args.iterations} iterations"
        ),
        "",
        "per keystroke (estimate, then estimate + compare + staged plan), microseconds per call:",
        "| stored measurements | estimate | + compare + plan | ratio |",
        "|---:|---:|---:|---:|",
    ]
    for ms in ([], list(once), many):
        s = replace(spec, measured=tuple(ms))
        base = per_call_us(lambda s=s: estimate(s, arch), args.iterations)

        def full(s=s):
            est = estimate(s, arch)
            compare(s, est)
            staged_plan(s)

        both = per_call_us(full, args.iterations)
        lines.append(f"| {len(ms)} | {base:.0f} | {both:.0f} | {both / base:.2f}x |")
    lines += ["", "import (read_measurements_text), milliseconds:"]
    t = per_call_us(lambda: read_measurements_text(log, spec, source="v.log"), 50) / 1000
    lines.append(f"- vLLM V1 start-up log ({len(log):,} characters): {t:.2f} ms")
    text = probe_text(200)
    t = per_call_us(lambda: read_measurements_text(text, spec, source="p.jsonl"), 20) / 1000
    lines.append(f"- probe file, 200 stages ({len(text):,} characters): {t:.2f} ms")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.save:
        out = REPO / "bench" / "results" / f"measure-{dt.date.today()}.txt"
        out.write_text(report)
        print(f"saved {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
