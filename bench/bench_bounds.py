"""Does the work stay bounded as the values a user can type grow?

Three cases, each at three sizes:
  - per-GPU report (`estimate --json` data and the totals table) at 8, 512 and 100,000 GPUs
    (Llama 3.1 8B, TP 1, PP 1);
  - shortlist over the built-in catalogue for a campaign of 1, 365 and 3,650 days;
  - triage of a log repeating "CUDA out of memory. Tried to allocate 2.00 GiB" 500, 2,000 and
    8,000 times, with no end marker.

Sizes run in increasing order; once one size takes longer than --budget seconds the larger
ones of that case are skipped (the code before the bounds was quadratic in some of them).

    PYTHONPATH=tui python bench/bench_bounds.py [--budget 60] [--json-out F] [--before F]

--json-out writes the timings; --before reads such a file (from an older checkout) and prints
both with the ratio before / after.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "tui") not in sys.path:
    sys.path.insert(0, str(REPO / "tui"))

SPEC = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
OOM_LINE = "CUDA out of memory. Tried to allocate 2.00 GiB"


def _spec(gpus: int):
    from vramtui.spec import loads_spec, spec_from_dict, spec_to_dict

    d = spec_to_dict(loads_spec(SPEC.read_text()))
    d["placement"] = {"gpus": gpus}
    return spec_from_dict(d)


def per_gpu_report(gpus: int) -> None:
    from vramtui.ledger import estimate
    from vramtui.ledger.report import estimate_to_dict
    from vramtui.models.registry import find_model
    from vramtui.render import totals_table

    spec = _spec(gpus)
    est = estimate(spec, find_model(spec.model.id))
    estimate_to_dict(est)
    totals_table(est)


def shortlist_days(days: int) -> None:
    from vramtui.catalog import load_catalog
    from vramtui.ledger import estimate
    from vramtui.models.registry import find_model
    from vramtui.shortlist import cheapest_cover, shortlist

    cheapest_cover.cache_clear()
    spec = _spec(1)
    arch = find_model(spec.model.id)
    est = estimate(spec, arch)
    catalog = load_catalog(use_user_config=False)
    shortlist(spec, est, catalog, arch=arch, days=days, today=datetime.date(2026, 12, 3))


def triage_lines(n: int) -> None:
    from vramtui.triage import read_log

    read_log("\n".join([OOM_LINE] * n))


CASES = (
    ("per-GPU report", "GPUs", per_gpu_report, (8, 512, 100_000)),
    ("shortlist", "days", shortlist_days, (1, 365, 3_650)),
    ("triage, repeated OOM line", "lines", triage_lines, (500, 2_000, 8_000)),
)


def run(budget: float) -> dict:
    out: dict[str, dict[str, float | None]] = {}
    for name, unit, fn, sizes in CASES:
        fn(sizes[0])  # warm-up: imports, catalogue
        row: dict[str, float | None] = {}
        over = False
        for size in sizes:
            key = f"{size:,} {unit}"
            if over:
                row[key] = None
                print(f"{name:28s} {key:>14s}   skipped (the previous size took > {budget:g} s)")
                continue
            t0 = time.perf_counter()
            fn(size)
            dt = time.perf_counter() - t0
            row[key] = dt
            over = dt > budget
            print(f"{name:28s} {key:>14s} {dt:10.3f} s", flush=True)
        out[name] = row
    return out


def compare(before: dict, after: dict) -> str:
    lines = [f"{'case':28s} {'size':>14s} {'before':>12s} {'after':>10s} {'ratio':>10s}"]
    for name, row in after.items():
        for key, dt in row.items():
            b = before.get(name, {}).get(key)
            b_txt = f"{b:10.3f} s" if b is not None else "   skipped"
            a_txt = f"{dt:8.3f} s" if dt is not None else " skipped"
            ratio = f"{b / dt:9.1f}x" if b is not None and dt else "        -"
            lines.append(f"{name:28s} {key:>14s} {b_txt:>12s} {a_txt:>10s} {ratio:>10s}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per size before skipping")
    ap.add_argument("--json-out", type=Path, help="write the timings as JSON")
    ap.add_argument("--before", type=Path, help="timings of an older checkout, to compare")
    args = ap.parse_args()
    result = run(args.budget)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1) + "\n")
    if args.before:
        print()
        print(compare(json.loads(args.before.read_text()), result))


if __name__ == "__main__":
    main()
