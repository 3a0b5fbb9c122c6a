"""How fast is the dry run? Build + trace of 8B-class models on the meta device, on this CPU.

For each case: the wall time of `run_dry_run` (fresh process state after a warm-up of the
imports), split into the model build and the trace, the number of storages recorded, and the
peak the trace reached (a traced estimate). N repetitions, median and min.

    PYTHONPATH=tui python bench/bench_dryrun.py [-n 3] [--save]

--save writes the report to bench/results/dryrun-<YYYY-MM-DD>.txt as well.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from vramtui.dryrun import run_dry_run
from vramtui.models.resolve import resolve_model
from vramtui.spec import load_spec, validate_spec

GIB = 2**30


def cases():
    chat = load_spec(REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml")
    ft = load_spec(REPO / "sample_specs" / "full-finetune-zero3-4gpu.toml")
    qlora = load_spec(REPO / "sample_specs" / "qlora-7b.toml")
    # The worst case for the meta math path: 8 sequences x 8,192 tokens, forward and
    # backward, no checkpointing, flash attention modelled (no s x s scores).
    big = dataclasses.replace(
        ft,
        name="Llama-3.1-8B full FT, 8 x 8192, no checkpointing",
        lengths=dataclasses.replace(ft.lengths, seq_len=8192),
        batch=dataclasses.replace(ft.batch, micro_batch=8, grad_accum=1),
        training=dataclasses.replace(ft.training, grad_checkpointing="none"),
    )
    validate_spec(big)
    eager = dataclasses.replace(
        big,
        name="same, eager attention (s x s scores materialised)",
        runtime=dataclasses.replace(big.runtime, attention="eager"),
    )
    validate_spec(eager)
    return [
        ("llama-3.1-8b-chat-8k-x16 (inference, vLLM)", chat),
        ("full-finetune-zero3-4gpu (8B full FT)", ft),
        ("qlora-7b (Mistral 7B QLoRA, peft)", qlora),
        ("8B full FT 8 x 8192, flash, no ckpt", big),
        ("8B full FT 8 x 8192, eager, no ckpt", eager),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args(argv)
    import torch
    import transformers

    lines = [
        f"vramtui dry-run benchmark, {dt.datetime.now().isoformat(timespec='seconds')}",
        (
            f"python {platform.python_version()}, torch {torch.__version__}, transformers "
            f"{transformers.__version__}, {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs"
        ),
        f"run_dry_run(spec, arch) on the meta device, {args.n} runs each (after one warm-up)",
        "",
        (
            f"{'case':44} {'wall s':>7} {'min s':>6} {'build s':>8} {'trace s':>8} "
            f"{'peak GiB':>9} {'peak stage':>15}"
        ),
    ]
    for label, spec in cases():
        arch, _ = resolve_model(spec.model)
        run_dry_run(spec, arch)  # warm-up: imports, transformers' lazy modules
        walls, builds, traces = [], [], []
        result = None
        for _ in range(args.n):
            t0 = time.perf_counter()
            result = run_dry_run(spec, arch)
            walls.append(time.perf_counter() - t0)
            builds.append(result.build_seconds)
            traces.append(result.trace_seconds)
        peak = result.peak_stage
        lines.append(
            f"{label:44} {statistics.median(walls):7.2f} {min(walls):6.2f} "
            f"{statistics.median(builds):8.2f} {statistics.median(traces):8.2f} "
            f"{peak.peak_bytes / GIB:9.2f} {peak.stage:>15}"
        )
        print(lines[-1], flush=True)
    report = "\n".join(lines) + "\n"
    print()
    print(report)
    if args.save:
        out = REPO / "bench" / "results" / f"dryrun-{dt.date.today().isoformat()}.txt"
        out.write_text(report, encoding="utf-8")
        print(f"saved {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
