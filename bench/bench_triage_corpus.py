"""The triage reader on real out-of-memory reports from public issue threads.

The corpus is `tests/triage_corpus/reports/*.toml`: one report per file, with its source URL,
the verbatim error excerpt and a label made by hand from the thread *before* the reader ran on
it (is it an OOM, the stage of the first OOM, the framework, every figure as written and its
bytes). `tests/triage_corpus/split.toml` assigns every source repository, once, to one half:

- `development` (round 1): tuned on from the start;
- `held_out` (round 1): measured once, on 2026-12-03, and reported. It was spent by that
  measurement and joined tuning for round 2;
- `held_out_2` (round 2): reports from repositories new to the corpus, collected and labelled
  after that measurement, before the reader ran on them. Measured once, on 2026-12-03 (results
  `triage-corpus-2026-12-03-round2.md`), then spent: it joined tuning for round 3;
- `held_out_3` (round 3): the same again, collected after the round-2 measurement. Measured
  once, on 2026-12-03 (results `triage-corpus-2026-12-03-round3.md`), then spent: it joined
  tuning for round 4;
- `held_out_4` (round 4): the same again, collected while round 4 was tuned (on the four spent
  halves only). Measured once, on 2026-12-03 (results `triage-corpus-2026-12-03-round4.md`),
  then spent: it joined tuning for round 5;
- `held_out_5` (round 5): the same again, collected while round 5 was tuned. Measured once, on
  2026-12-03 (results `triage-corpus-2026-12-03-round5.md`), then spent: it joined tuning for
  round 6;
- `held_out_6` (round 6): the same again, collected while round 6 was tuned. Measured once, on
  2026-12-03 (results `triage-corpus-2026-12-03-round6.md`), then spent: it joined tuning for
  round 7;
- `held_out_7` (round 7): the same again, collected while round 7 was tuned. Measured once, on
  2026-12-03 (results `triage-corpus-2026-12-03-round7.md`), then spent: it joined tuning for
  round 8;
- `held_out_8` (round 8): the same again, collected while round 8 was tuned. Measured once, on
  2026-12-04 (results `triage-corpus-2026-12-04-round8.md`), then spent: it joined tuning for
  round 9;
- `held_out_9` (round 9): the same again, collected while round 9 was tuned. Measured once, on
  2026-12-04 (results `triage-corpus-2026-12-04-round9.md`), then spent: it joined tuning for
  round 10;
- `held_out_10` (round 10): the same again, collected while round 10 was tuned. Measured once,
  on 2026-12-04 (results `triage-corpus-2026-12-04-round10.md`), then spent: it joined tuning
  for round 11;
- `held_out_11` (round 11): the same again, collected while round 11 was tuned. Measured once,
  on 2026-12-04 (results `triage-corpus-2026-12-04-round11.md`), then spent: it joined tuning
  for round 12;
- `held_out_12` (round 12): the same again, collected while round 12 was tuned. Measured once,
  on 2026-12-04 (results `triage-corpus-2026-12-04-round12.md`), then spent: it joined tuning
  for round 13;
- `held_out_13` (round 13): the same again, collected while round 13 was tuned. Measured once,
  on 2026-12-04 (results `triage-corpus-2026-12-04-round13.md`), then spent: it joined tuning
  for round 14;

`--half tuning` is every spent half: development, held_out, held_out_2, ... held_out_13. It is named half by half, so that a half added later stays out of
it until it has been measured.

`--fold a|b` keeps one fold of what `--half` selects, split by repository: fold `a` holds the
repositories whose sha256(lowercase "owner/name") is even, fold `b` the odd ones. Tune on one
fold's misses and measure the other before and after: that is the estimate of how the rules
transfer to repositories never looked at.

    PYTHONPATH=tui python bench/bench_triage_corpus.py
        [--half development|held_out|held_out_2|...|held_out_13|tuning|both|all]
        [--fold a|b] [--out bench/results] [--no-write] [--misses N]

`both` is the two round-1 halves (as reported in round 1); `all` is every half.

Prints per-class and total figures for each half and writes
`<out>/triage-corpus-<date>.{json,md}` with every miss listed. Scoring:
- OOM read as OOM: `is_oom` on a labelled OOM; near-miss read as OOM: `is_oom` on a labelled
  near-miss (the goal is none).
- Stage: the reader's phase equals the label. Labels the reader has no word for yet count as
  right when the reader says `other` (`eval`, `save`). Where only the reporter's words (or
  nothing) say the stage, `unknown` also counts as right. An OOM the reader missed is a wrong
  stage.
- Figures: every labelled figure whose key the reader knows (`FIGURE_KEYS`), compared to the
  byte with the same key on the FIRST OOM event the reader found (the issue asks for the first)
  and, for reference, on the event the reader calls primary. A figure-less mention the reader
  ties to the message just after it (an IDE pop-up's "Exception has occurred: OutOfMemoryError",
  a reporter's "results in CUDA out of memory." above the message: `echo_of` a later line) is
  that same failure, so the first OOM is the message it heads. Labelled figures under keys the
  reader has no name for (`other_*` keys) are counted apart, as unsupported.
- Repeated keys: PyTorch prints one "Process N has X memory in use" line per process. The label
  records each other process as its own `other_processes_bytes` figure (and the job's own line
  as `process_in_use_bytes`); the reader lists them (`OomEvent.figure_lists`) and adds their
  sum as `other_processes_total_bytes`. A label's figures under one key are matched against the
  reader's list for that key as a multiset: each labelled figure is exact when an equal figure
  of the reader's list is left unmatched, whatever the order.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import hashlib
import json
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "tui") not in sys.path:
    sys.path.insert(0, str(REPO / "tui"))

from vramtui.triage.reader import FIGURE_KEYS, LISTED_FIGURE_KEYS, read_log  # noqa: E402

CORPUS = REPO / "tests" / "triage_corpus"
STAGES_READER_LACKS = {"eval": "other", "save": "other"}
HALVES = (
    "development",
    "held_out",
    "held_out_2",
    "held_out_3",
    "held_out_4",
    "held_out_5",
    "held_out_6",
    "held_out_7",
    "held_out_8",
    "held_out_9",
    "held_out_10",
    "held_out_11",
    "held_out_12",
    "held_out_13",
)
# Named pools of halves: what `--half` accepts besides a single half.
SPENT_HALVES = (
    "development",
    "held_out",
    "held_out_2",
    "held_out_3",
    "held_out_4",
    "held_out_5",
    "held_out_6",
    "held_out_7",
    "held_out_8",
    "held_out_9",
    "held_out_10",
    "held_out_11",
    "held_out_12",
    "held_out_13",
)
POOLS = {
    "tuning": SPENT_HALVES,  # every spent half, by name: a new half stays out
    "both": ("development", "held_out"),
    "all": HALVES,
}


def load_corpus(root: Path = CORPUS) -> tuple[list[dict], dict[str, str]]:
    """(reports, repository -> half). Each report gains `id` (its file stem)."""
    split = tomllib.loads((root / "split.toml").read_text(encoding="utf-8"))
    half_of = {}
    for half in HALVES:
        for repo in split.get(half, {}).get("repositories", []):
            half_of[repo] = half
    reports = []
    for path in sorted((root / "reports").glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        data["id"] = path.stem
        reports.append(data)
    return reports, half_of


def fold_of(repository: str) -> str:
    """`a` when sha256 of the lowercase "owner/name" is even, `b` when odd."""
    digest = hashlib.sha256(repository.lower().encode("utf-8")).digest()
    return "a" if digest[-1] % 2 == 0 else "b"


def stage_right(label: dict, said: str) -> bool:
    want = label["stage"]
    if said == want or said == STAGES_READER_LACKS.get(want):
        return True
    return said == "unknown" and label.get("stage_basis") in ("reporter", "none")


def _pools(event) -> dict[str, collections.Counter]:
    """The reader's figures of one event, per key, as multisets (see "Repeated keys")."""
    if event is None:
        return {}
    keys = set(event.figures) | set(event.figure_lists)
    return {k: collections.Counter(event.figure_list(k)) for k in keys}


def _take(pool: dict[str, collections.Counter], key: str, want: int) -> int | None:
    """The reader's figure matched to a labelled one: an equal one not yet matched, else the
    first left under that key (shown in the misses), else None."""
    bag = pool.get(key)
    if not bag:
        return None
    if bag[want] > 0:
        bag[want] -= 1
        return want
    left = [v for v, n in bag.items() if n > 0]
    return left[0] if left else None


def score_one(report: dict) -> dict:
    """The reader's answer to one report, and what was right."""
    text = report["excerpt"]["text"]
    start = time.perf_counter()
    reading = read_log(text)
    seconds = time.perf_counter() - start
    first = reading.events[0] if reading.events else None
    # a figure-less mention that the reader ties to the message right after it (a heading:
    # `echo_of` a later line) is that same failure, not a first one of its own
    failures = [
        e
        for e in reading.events
        if e.kind != "startup" and (e.echo_of is None or e.echo_of < e.line_no)
    ]
    first_failure = failures[0] if failures else first
    out = {
        "id": report["id"],
        "url": report["source_url"],
        "is_oom_label": bool(report["is_oom"]),
        "is_oom_read": reading.is_oom,
        "seconds": seconds,
        "stage_label": report.get("stage", "unknown"),
        "stage_basis": report.get("stage_basis", ""),
        "stage_read": reading.phase.phase,
        "framework_label": report.get("framework", ""),
        "framework_read": reading.framework or "",
        "family": report.get("family", ""),
        "shape": list(report.get("shape", [])),
        "figures": [],
        "unsupported_figures": [],
    }
    if not report["is_oom"]:
        return out
    out["stage_right"] = reading.is_oom and stage_right(report, reading.phase.phase)
    pool_first, pool_primary = _pools(first_failure), _pools(reading.primary)
    for fig in report.get("figures", []):
        key, want = fig["key"], int(fig["bytes"])
        if key not in FIGURE_KEYS and key not in LISTED_FIGURE_KEYS:
            out["unsupported_figures"].append({"key": key, "as_written": fig["as_written"]})
            continue
        got_first = _take(pool_first, key, want)
        got_primary = _take(pool_primary, key, want)
        out["figures"].append(
            {
                "key": key,
                "as_written": fig["as_written"],
                "bytes": want,
                "first": got_first,
                "primary": got_primary,
                "exact_first": got_first == want,
                "exact_primary": got_primary == want,
            }
        )
    return out


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}% ({n}/{d})" if d else "n/a (0)"


def summarise(results: list[dict]) -> dict:
    ooms = [r for r in results if r["is_oom_label"]]
    near = [r for r in results if not r["is_oom_label"]]
    figs = [f for r in ooms for f in r["figures"]]
    summary = {
        "reports": len(results),
        "ooms": len(ooms),
        "near_misses": len(near),
        "oom_read_as_oom": sum(r["is_oom_read"] for r in ooms),
        "near_miss_read_as_oom": sum(r["is_oom_read"] for r in near),
        "stage_right": sum(r["stage_right"] for r in ooms),
        "figures": len(figs),
        "figures_exact_first": sum(f["exact_first"] for f in figs),
        "figures_exact_primary": sum(f["exact_primary"] for f in figs),
        "unsupported_figures": sum(len(r["unsupported_figures"]) for r in ooms),
        "framework_right": sum(
            r["framework_read"] == r["framework_label"] for r in ooms if r["is_oom_read"]
        ),
        "max_seconds": max((r["seconds"] for r in results), default=0.0),
    }
    by_class: dict[str, dict[str, list[int]]] = {}
    for dimension in ("family", "framework_label", "stage_label"):
        table: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
        for r in ooms:
            row = table[r[dimension] or "-"]
            row[0] += 1
            row[1] += r["is_oom_read"]
            row[2] += r["stage_right"]
        by_class[dimension] = dict(sorted(table.items(), key=lambda kv: (-kv[1][0], kv[0])))
    shapes: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for r in ooms:
        for tag in r["shape"] or ["-"]:
            shapes[tag][0] += 1
            shapes[tag][1] += r["is_oom_read"]
            shapes[tag][2] += r["stage_right"]
    by_class["shape"] = dict(sorted(shapes.items(), key=lambda kv: (-kv[1][0], kv[0])))
    summary["by_class"] = by_class
    return summary


def misses(results: list[dict]) -> list[str]:
    lines = []
    for r in results:
        what = []
        if r["is_oom_label"] and not r["is_oom_read"]:
            what.append("OOM not read")
        if not r["is_oom_label"] and r["is_oom_read"]:
            what.append("near-miss read as OOM")
        if r["is_oom_label"] and r["is_oom_read"] and not r["stage_right"]:
            what.append(f"stage {r['stage_read']} (label {r['stage_label']}, {r['stage_basis']})")
        for f in r["figures"]:
            if not f["exact_first"]:
                what.append(f"{f['key']} {f['as_written']!r}: read {f['first']} want {f['bytes']}")
        if what:
            lines.append(f"{r['id']}: " + "; ".join(what) + f" <{r['url']}>")
    return lines


def render(summaries: dict[str, dict], miss_lines: dict[str, list[str]], limit: int) -> str:
    out = ["# Triage reader on the real OOM corpus", ""]
    out.append(
        "| half | reports | OOMs read as OOM | near-misses read as OOM | stage right | "
        "figures exact (first OOM) | figures exact (primary) | unsupported figures |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for half, s in summaries.items():
        out.append(
            f"| {half} | {s['reports']} | {_pct(s['oom_read_as_oom'], s['ooms'])} | "
            f"{_pct(s['near_miss_read_as_oom'], s['near_misses'])} | "
            f"{_pct(s['stage_right'], s['ooms'])} | "
            f"{_pct(s['figures_exact_first'], s['figures'])} | "
            f"{_pct(s['figures_exact_primary'], s['figures'])} | {s['unsupported_figures']} |"
        )
    for half, s in summaries.items():
        for dimension, table in s["by_class"].items():
            out += ["", f"## {half}: by {dimension}", ""]
            out.append("| class | OOMs | read as OOM | stage right |")
            out.append("|---|---:|---:|---:|")
            for name, (n, read, stage) in table.items():
                out.append(f"| {name} | {n} | {_pct(read, n)} | {_pct(stage, n)} |")
        lines = miss_lines[half]
        out += ["", f"## {half}: misses ({len(lines)} reports)", ""]
        out += [f"- {line}" for line in lines[:limit]]
        if len(lines) > limit:
            out.append(f"- ... and {len(lines) - limit} more (see the JSON)")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=(*HALVES, *POOLS), default="both")
    parser.add_argument("--fold", choices=("a", "b"), help="one fold of the selection")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--misses", type=int, default=400, help="misses listed per half")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args(argv)
    reports, half_of = load_corpus()
    unassigned = sorted({r["repository"] for r in reports} - set(half_of))
    if unassigned:
        print(f"repositories missing from split.toml: {', '.join(unassigned)}", file=sys.stderr)
        return 2
    if args.half == "tuning":
        groups = {"tuning": POOLS["tuning"]}
    elif args.half in POOLS:
        groups = {half: (half,) for half in POOLS[args.half]}
    else:
        groups = {args.half: (args.half,)}
    summaries, miss_lines, detail = {}, {}, {}
    for half, members in groups.items():
        chosen = [r for r in reports if half_of[r["repository"]] in members]
        if args.fold:
            chosen = [r for r in chosen if fold_of(r["repository"]) == args.fold]
        results = [score_one(r) for r in chosen]
        if args.fold:
            half = f"{half} fold {args.fold}"
        summaries[half] = summarise(results)
        miss_lines[half] = misses(results)
        detail[half] = results
    text = render(summaries, miss_lines, args.misses)
    print(text)
    if not args.no_write:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = out / f"triage-corpus-{args.date}"
        payload = {"summaries": summaries, "results": detail}
        stem.with_suffix(".json").write_text(json.dumps(payload, indent=1) + "\n")
        stem.with_suffix(".md").write_text(text)
        print(f"wrote {stem}.json and {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
