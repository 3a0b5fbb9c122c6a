"""The training ledger against published peak-memory figures (tests/training_corpus/).

Each row of the corpus is sized as a vramtui spec (`bench/training_corpus_rows.py` says how a
row becomes a spec, which settings take vramtui's defaults and which models come from where)
and compared with its figure through the slice of the ledger its counter sees
(`vramtui.measure.compare`: max_memory_allocated and torchtune's peak_memory_active -> tensor
items; max_memory_reserved -> tensors + fragmentation; nvml -> everything, CUDA context
included; a counter the source does not name -> the allocated slice, marked).

    error = (estimate - measured) / measured

for the worst stage's slice on the most loaded GPU. Out-of-memory rows are judged instead:
does the estimate say "does not fit" on the card that failed (its capacity as the shortlist
takes it, `vramtui.fit_capacity.card_capacity`, no margin)?

Per framework and half: n, median |error|, p90 |error| (nearest rank), signed median, for the
rows the corpus marks fully specified and for all sized rows, and the OOM agreement. Rows not
sized (model config unavailable offline, a method vramtui does not size) are counted apart.

    PYTHONPATH=tui python bench/bench_training_corpus.py
        [--half development|held_out|held_out_2|held_out_3|held_out_4|held_out_5|held_out_6|held_out_7|held_out_8|both] [--out bench/results] [--no-write]
        [--aggregates-only] [--tag NAME] [--date YYYY-MM-DD]

`--aggregates-only` withholds every per-row line of the held-out half (its misses, its
not-sized rows): only its aggregates are printed and written. Tune only on the development
half.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for p in (REPO / "tui", REPO / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from training_corpus_rows import HALVES, Sized, load_rows, size_row

MISS_THRESHOLD = 0.10  # |error| above this is listed as a miss


def p90(values: list[float]) -> float:
    """The nearest-rank 90th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def error_stats(errors: list[float]) -> dict:
    if not errors:
        return {"n": 0, "median_abs": None, "p90_abs": None, "signed_median": None}
    return {
        "n": len(errors),
        "median_abs": statistics.median(abs(e) for e in errors),
        "p90_abs": p90([abs(e) for e in errors]),
        "signed_median": statistics.median(errors),
    }


def summarise(results: list[Sized]) -> dict:
    """Aggregates of one group of rows (one framework of one half, or a whole half)."""
    sized = [r for r in results if r.status == "sized"]
    ok = [r for r in sized if not r.row.is_oom and r.error is not None]
    oom = [r for r in sized if r.row.is_oom]
    not_sized = collections.Counter(r.reason.split(":")[0] for r in results if r.status != "sized")
    return {
        "rows": len(results),
        "sized": len(sized),
        "not_sized": dict(not_sized),
        "fully_specified": error_stats([r.error for r in ok if not r.row.under_specified]),
        "under_specified": error_stats([r.error for r in ok if r.row.under_specified]),
        "all": error_stats([r.error for r in ok]),
        "unnamed_counter": sum(1 for r in ok if r.row.counter == "unknown"),
        "oom_rows": sum(1 for r in results if r.row.is_oom),
        "oom_sized": len(oom),
        "oom_does_not_fit": sum(1 for r in oom if r.verdict == "does_not_fit"),
        "oom_cannot_tell": sum(1 for r in oom if r.verdict == "cannot_tell"),
        "oom_fits": sum(1 for r in oom if r.verdict == "fits"),
        "oom_no_card": sum(1 for r in oom if not r.verdict),
    }


def run(halves: tuple[str, ...]) -> dict[str, list[Sized]]:
    rows = [r for r in load_rows() if r.half in halves]
    out: dict[str, list[Sized]] = {h: [] for h in halves}
    for row in rows:
        out[row.half].append(size_row(row))
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}" if x < 0 else f"{x:.1%}"


def _stats_cells(s: dict) -> str:
    if not s["n"]:
        return "0 | - | - | -"
    return f"{s['n']} | {s['median_abs']:.1%} | {s['p90_abs']:.1%} | {_pct(s['signed_median'])}"


def table(summaries: dict[str, dict]) -> list[str]:
    lines = [
        (
            "| framework | rows | sized | fully specified: n | median abs | p90 abs | signed median "
            "| all sized: n | median abs | p90 abs | signed median | under-specified: n | median abs "
            "| p90 abs | signed median | OOM: does not fit / sized / rows |"
        ),
        "|---" * 16 + "|",
    ]
    for name, s in summaries.items():
        lines.append(
            f"| {name} | {s['rows']} | {s['sized']} | {_stats_cells(s['fully_specified'])} | "
            f"{_stats_cells(s['all'])} | {_stats_cells(s['under_specified'])} | "
            f"{s['oom_does_not_fit']} / {s['oom_sized']} / {s['oom_rows']} |"
        )
    return lines


def by_framework(results: list[Sized]) -> dict[str, dict]:
    groups: dict[str, list[Sized]] = collections.defaultdict(list)
    for r in results:
        groups[r.row.framework].append(r)
    out = {fw: summarise(groups[fw]) for fw in sorted(groups)}
    out["(all frameworks)"] = summarise(results)
    return out


def row_lines(results: list[Sized]) -> tuple[list[str], list[str], list[str]]:
    """(misses, OOM verdicts, not sized) lines for one half."""
    misses = sorted(
        (r for r in results if r.error is not None and abs(r.error) > MISS_THRESHOLD),
        key=lambda r: -abs(r.error),
    )
    miss_lines = [
        f"- {r.row.file} ({r.row.framework}, {r.row.counter}"
        + (", under-specified" if r.row.under_specified else "")
        + f"): error {_pct(r.error)}, estimate {r.estimate_bytes / 1e9:.2f} GB at "
        f"{r.estimate_stage} vs {r.row.data['as_written']}"
        + (f"; approximations: {'; '.join(r.approximations)}" if r.approximations else "")
        for r in misses
    ]
    oom_lines = [
        f"- {r.row.file} ({r.row.framework}, {r.row.data['n_gpus']} x {r.row.data['gpu']}): "
        f"{r.verdict or 'not judged'}: {r.verdict_reason}"
        for r in results
        if r.row.is_oom and r.status == "sized"
    ]
    not_sized = [
        f"- {r.row.file} ({r.row.settings.get('model')}): {r.reason}"
        for r in results
        if r.status != "sized"
    ]
    return miss_lines, oom_lines, not_sized


def render(
    by_half: dict[str, list[Sized]], aggregates_only: bool, date: str, tag: str
) -> tuple[str, dict]:
    md = [
        f"# Training corpus: ledger vs published peaks ({date}{', ' + tag if tag else ''})",
        "",
        (
            "error = (estimate - measured) / measured, the worst stage's slice of the ledger that "
            "the row's counter sees, on the most loaded GPU. Fully specified and under-specified "
            "rows are reported apart; 'all sized' is both. OOM: rows out of memory in the source, "
            "judged 'does not fit' on the card that failed. Produced by "
            "`bench/bench_training_corpus.py`."
        ),
        "",
    ]
    data: dict = {"date": date, "tag": tag, "halves": {}}
    for half, results in by_half.items():
        summaries = by_framework(results)
        md += [f"## {half}", ""] + table(summaries) + [""]
        entry: dict = {"aggregates": summaries}
        withheld = aggregates_only and half == "held_out"
        if withheld:
            md += ["Per-row results of the held-out half are withheld (`--aggregates-only`).", ""]
        else:
            misses, ooms, not_sized = row_lines(results)
            md += [f"### Misses (|error| > {MISS_THRESHOLD:.0%}), {half}", ""] + (
                misses or ["none"]
            )
            md += ["", f"### OOM rows, {half}", ""] + (ooms or ["none"])
            md += ["", f"### Not sized, {half}", ""] + (not_sized or ["none"]) + [""]
            entry["rows"] = [r.to_dict() for r in results]
        data["halves"][half] = entry
    return "\n".join(md) + "\n", data


def print_summary(by_half: dict[str, list[Sized]]) -> None:
    for half, results in by_half.items():
        print(f"== {half}")
        for name, s in by_framework(results).items():
            fs, al = s["fully_specified"], s["all"]
            print(
                f"  {name:18s} rows {s['rows']:3d} sized {s['sized']:3d}  "
                f"fully specified n={fs['n']:3d} median {_pct(fs['median_abs'])} "
                f"p90 {_pct(fs['p90_abs'])} signed {_pct(fs['signed_median'])}  |  "
                f"all n={al['n']:3d} median {_pct(al['median_abs'])} p90 {_pct(al['p90_abs'])} "
                f"signed {_pct(al['signed_median'])}  |  OOM does not fit "
                f"{s['oom_does_not_fit']}/{s['oom_sized']} (of {s['oom_rows']})"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=(*HALVES, "both"), default="development")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--aggregates-only",
        action="store_true",
        help="withhold the held-out half's per-row results (print and files)",
    )
    ap.add_argument("--tag", default="", help="suffix of the result files, e.g. baseline")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    args = ap.parse_args(argv)
    halves = ("development", "held_out") if args.half == "both" else (args.half,)
    by_half = run(halves)
    print_summary(by_half)
    md, data = render(by_half, args.aggregates_only, args.date, args.tag)
    for half in halves:
        if args.aggregates_only and half == "held_out":
            continue
        misses, _, _ = row_lines(by_half[half])
        print(f"-- misses, {half}: {len(misses)}")
        for line in misses[:20]:
            print("  " + line)
    if not args.no_write:
        from vramtui.fsutil import atomic_write_text

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"training-corpus-{args.date}" + (f"-{args.tag}" if args.tag else "")
        atomic_write_text(out / f"{stem}.md", md)
        atomic_write_text(out / f"{stem}.json", json.dumps(data, indent=1, default=str) + "\n")
        print(f"wrote {out / stem}.{{md,json}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
