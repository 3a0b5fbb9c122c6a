"""The fuzz suite's properties with a much larger budget, counted per area.

Runs the same checks as `tests/test_fuzz_*.py` (from `tests/fuzz_support.py`): the spec parser
(as data, as TOML text, as a file of bytes) with the ledger and shortlist on every spec it
accepts, the user catalogue loader, the triage reader, the measure importers, the CLI in
process, and draft recovery when `tests/test_fuzz_drafts.py` provides
`check_draft_bytes(data, state_dir)` (fed by its `draft_bytes` strategy if it has one, else by
mutated spec bytes).
The issue's known hostile values run first in each area. Every case either passes or is counted
as a failure by kind (exception type, `hang` for > 5 s, `esc-in-output`, ...) with the shortest
input seen for each distinct failure.

    PYTHONPATH=tui python bench/fuzz_long.py [--cases 20000] [--seed 12] [--minutes M]
        [--areas spec-data,triage] [--out bench/results] [--no-write]

Writes `<out>/fuzz-long-<date>.json` (counts, failures) and `.md` (the table). Exit 1 when any
case failed. A case's memory is capped (--max-memory-gib, default 8) so a runaway allocation
becomes a MemoryError instead of taking the machine down.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for sub in ("tui", "tests"):
    if str(REPO / sub) not in sys.path:
        sys.path.insert(0, str(REPO / sub))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402

import fuzz_areas  # noqa: E402
import fuzz_support as fs  # noqa: E402

# Share of the cases per area (drafts only when its check exists).
WEIGHTS = {
    "spec-data": 18,
    "spec-text": 14,
    "spec-file": 5,
    "catalog": 8,
    "triage": 20,
    "measure": 15,
    "cli": 15,
    "drafts": 5,
}


def _draft_area():
    """(strategy, check, known) for draft recovery, when the drafts fuzz module provides one."""
    try:
        import test_fuzz_drafts as drafts  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - not written yet, or broken: the area is skipped
        return None
    check = getattr(drafts, "check_draft_bytes", None)
    if check is None:
        return None
    strategy = getattr(drafts, "draft_bytes", None) or fuzz_areas.spec_bytes

    def run(raw):
        with tempfile.TemporaryDirectory(prefix="vramtui-fuzz-drafts-") as tmp:
            return fs.guarded(lambda: check(raw, Path(tmp)), "draft recovery")

    return strategy, run, lambda: {}


@dataclass
class Failure:
    kind: str
    message: str
    count: int = 0
    example: str = ""


@dataclass
class AreaStats:
    name: str
    cases: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failures: dict[str, Failure] = field(default_factory=dict)
    hangs: int = 0
    max_s: float = 0.0
    total_s: float = 0.0
    passed_s: float = 0.0  # time of the cases that passed: what CI pays once all is fixed

    @property
    def failed(self) -> int:
        return sum(f.count for f in self.failures.values())

    def record(self, case, check) -> None:
        start = time.perf_counter()
        try:
            label = check(case)
            key = _outcome_key(label)
            self.outcomes[key] = self.outcomes.get(key, 0) + 1
            self.passed_s += time.perf_counter() - start
        except fs.PropertyFailure as exc:
            self._fail(exc.kind, str(exc), case)
        except Exception as exc:  # noqa: BLE001 - a check that itself broke: count it too
            self._fail(type(exc).__name__, fs._last_line(exc), case)
        elapsed = time.perf_counter() - start
        self.cases += 1
        self.total_s += elapsed
        self.max_s = max(self.max_s, elapsed)

    def _fail(self, kind: str, message: str, case) -> None:
        if kind == "hang":
            self.hangs += 1
        signature = f"{kind}: {_signature(message)}"
        failure = self.failures.setdefault(signature, Failure(kind, message))
        failure.count += 1
        shown = fs.short_repr(case)
        if not failure.example or len(shown) < len(failure.example):
            failure.example, failure.message = shown, message

    def as_dict(self) -> dict:
        return {
            "cases": self.cases,
            "outcomes": dict(sorted(self.outcomes.items())),
            "failed": self.failed,
            "hangs_over_5s": self.hangs,
            "failures_by_kind": _by_kind(self.failures.values()),
            "max_seconds_per_case": round(self.max_s, 3),
            "mean_ms_per_case": round(1000 * self.total_s / self.cases, 1) if self.cases else 0,
            "mean_ms_per_passed_case": round(
                1000 * self.passed_s / (self.cases - self.failed), 1
            ) if self.cases > self.failed else 0,
            "distinct_failures": [
                {"kind": f.kind, "count": f.count, "message": f.message, "example": f.example}
                for f in sorted(self.failures.values(), key=lambda f: -f.count)
            ],
        }


def _outcome_key(label: str) -> str:
    """Outcome labels without their counts ("3 measured" -> "measured"; "exit 2" stays)."""
    parts = []
    for piece in str(label).split("; "):
        words = [w for w in piece.split() if not w.isdigit()]
        parts.append(" ".join(words) or piece)
    return "; ".join(parts)


def _signature(message: str) -> str:
    """A failure's identity: its kind and place, not the input's figures."""
    if " at vramtui/" in message:
        head, _, where = message.rpartition(" at ")
        exc = head.split(":", 1)[0]
        return f"{exc} at {where}"
    return "".join("#" if c.isdigit() else c for c in message)[:160]


def _by_kind(failures) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in failures:
        out[f.kind] = out.get(f.kind, 0) + f.count
    return dict(sorted(out.items()))


def run_area(name, strategy, check, known, cases: int, seed: int, stop_at: float) -> AreaStats:
    stats = AreaStats(name)
    for case in known().values():
        if time.monotonic() < stop_at:
            stats.record(case, check)
    remaining = max(0, cases - stats.cases)
    if remaining == 0:
        return stats

    @settings(
        max_examples=remaining,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @hypothesis_seed(seed)
    @given(case=strategy())
    def prop(case):
        if time.monotonic() < stop_at:
            stats.record(case, check)

    prop()
    return stats


def _areas(selected: list[str] | None):
    areas = dict(fuzz_areas.AREAS)
    drafts = _draft_area()
    if drafts is not None:
        areas["drafts"] = drafts
    if selected:
        unknown = sorted(set(selected) - set(areas))
        if unknown:
            raise SystemExit(f"fuzz_long: unknown area(s) {', '.join(unknown)}; "
                             f"choose from {', '.join(areas)}")
        areas = {k: v for k, v in areas.items() if k in selected}
    return areas


def _table(results: dict[str, AreaStats]) -> str:
    head = (
        "| area | cases | passed | failed | hangs > 5 s | max s/case | mean ms/case "
        "| mean ms/passed case | failures by kind |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    total = AreaStats("all")
    for name, s in results.items():
        kinds = ", ".join(f"{k} {v}" for k, v in _by_kind(s.failures.values()).items()) or "-"
        mean = 1000 * s.total_s / s.cases if s.cases else 0
        passed = s.cases - s.failed
        mean_passed = 1000 * s.passed_s / passed if passed else 0
        lines.append(
            f"| {name} | {s.cases:,} | {passed:,} | {s.failed:,} | {s.hangs} | "
            f"{s.max_s:.2f} | {mean:.0f} | {mean_passed:.0f} | {kinds} |"
        )
        total.cases += s.cases
        total.hangs += s.hangs
        total.total_s += s.total_s
        total.max_s = max(total.max_s, s.max_s)
        total.failures.update({f"{name}/{k}": v for k, v in s.failures.items()})
    mean = 1000 * total.total_s / total.cases if total.cases else 0
    lines.append(
        f"| **all** | {total.cases:,} | {total.cases - total.failed:,} | {total.failed:,} | "
        f"{total.hangs} | {total.max_s:.2f} | {mean:.0f} | | |"
    )
    return "\n".join(lines)


def _failure_list(results: dict[str, AreaStats]) -> str:
    out = []
    for name, s in results.items():
        for f in sorted(s.failures.values(), key=lambda f: -f.count):
            out.append(f"- {name} x{f.count}: {f.message}\n  input: {f.example}")
    return "\n".join(out) or "none"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=20_000, help="cases in all (default 20000)")
    p.add_argument("--seed", type=int, default=12, help="hypothesis seed (default 12)")
    p.add_argument("--minutes", type=float, help="stop starting new cases after this long")
    p.add_argument("--areas", help="comma-separated subset of the areas")
    p.add_argument("--out", default=str(REPO / "bench" / "results"), help="results folder")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument("--max-memory-gib", type=float, default=8.0, help="address-space cap")
    args = p.parse_args(argv)
    if args.cases < 1:
        p.error("--cases must be at least 1")

    if args.max_memory_gib > 0:
        cap = int(args.max_memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    scratch = tempfile.mkdtemp(prefix="vramtui-fuzz-long-")
    os.environ["VRAMTUI_CONFIG_DIR"] = str(Path(scratch) / "config")
    os.environ["VRAMTUI_STATE_DIR"] = str(Path(scratch) / "state")

    areas = _areas(args.areas.split(",") if args.areas else None)
    weight = sum(WEIGHTS.get(a, 5) for a in areas)
    start = time.monotonic()
    stop_at = start + args.minutes * 60 if args.minutes else float("inf")
    results: dict[str, AreaStats] = {}
    for i, (name, (strategy, check, known)) in enumerate(areas.items()):
        n = max(1, round(args.cases * WEIGHTS.get(name, 5) / weight))
        t0 = time.monotonic()
        results[name] = run_area(name, strategy, check, known, n, args.seed + i, stop_at)
        s = results[name]
        print(f"{name}: {s.cases} cases, {s.failed} failed, {s.hangs} hangs, "
              f"{time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    wall = time.monotonic() - start

    table = _table(results)
    failures = _failure_list(results)
    print(table)
    print("\ndistinct failures:\n" + failures)
    print(f"\n{sum(s.cases for s in results.values()):,} cases in {wall:.0f} s")

    if not args.no_write:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = out / f"fuzz-long-{datetime.date.today().isoformat()}"
        meta = {
            "date": datetime.date.today().isoformat(),
            "cases_requested": args.cases,
            "seed": args.seed,
            "minutes": args.minutes,
            "wall_seconds": round(wall),
            "time_limit_seconds": fs.TIME_LIMIT_S,
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        }
        data = {**meta, "areas": {k: v.as_dict() for k, v in results.items()}}
        stem.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        md = (
            f"# Long fuzz run, {meta['date']}\n\n"
            f"`python bench/fuzz_long.py --cases {args.cases} --seed {args.seed}"
            + (f" --minutes {args.minutes:g}" if args.minutes else "")
            + f"`: {sum(s.cases for s in results.values()):,} cases in {wall:.0f} s "
            f"({meta['machine']}, Python {meta['python']}). A case fails on any exception other "
            f"than a one-line VramtuiError, on taking more than {fs.TIME_LIMIT_S:g} s, on an "
            "ESC byte in terminal output, or (CLI) on an exit code outside 0-3 or a stderr line "
            "not starting `vramtui:`.\n\n"
            f"{table}\n\n## Distinct failures\n\n{failures}\n"
        )
        stem.with_suffix(".md").write_text(md, encoding="utf-8")
        print(f"wrote {stem}.json and {stem}.md", file=sys.stderr)
    return 1 if any(s.failed for s in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
