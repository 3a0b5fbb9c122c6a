"""Writes tests/training_corpus/INDEX.md: one line per row of the training-memory corpus, with
its half of the split, and the counts per half, framework and counter.

    python bench/training_corpus_index.py [--check]

`--check` exits 1 when INDEX.md is not what the rows say (the test suite runs it).
"""

from __future__ import annotations

import argparse
import collections
import sys
import tomllib
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "training_corpus"


def _cell(value: object) -> str:
    return str(value).replace("|", "/").replace("\n", " ")


def render(corpus: Path = CORPUS) -> str:
    split = tomllib.loads((corpus / "split.toml").read_text(encoding="utf-8"))
    half_of = {src: half for half, t in split.items() for src in t["sources"]}
    rows = []
    for path in sorted((corpus / "rows").glob("*.toml")):
        d = tomllib.loads(path.read_text(encoding="utf-8"))
        rows.append((path.name, d, half_of.get(d["source_id"], "(none)")))
    out = [
        "# Training-memory calibration corpus: index",
        "",
        "Written by `bench/training_corpus_index.py` from `rows/*.toml` and `split.toml`; do not",
        "edit by hand. One line per row: file | half | framework | model | method | counter |",
        "figure as written | under-specified | outcome.",
        "",
    ]
    for name, d, half in rows:
        s = d["settings"]
        cells = (name, half, d["framework"], s.get("model", ""), s.get("method", ""),
                 d["counter"], d["as_written"], d["under_specified"], d["outcome"])
        out.append("- " + " | ".join(_cell(c) for c in cells))
    out += ["", "## Counts", ""]
    for title, key in (("half", lambda r: r[2]), ("framework", lambda r: r[1]["framework"]),
                       ("counter", lambda r: r[1]["counter"])):
        counts = collections.Counter(key(r) for r in rows)
        out.append(f"{title}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        out.append("")
    sources = len({r[1]["source_id"] for r in rows})
    under = sum(1 for r in rows if r[1]["under_specified"])
    ooms = sum(1 for r in rows if r[1]["outcome"] == "oom")
    out.append(f"total={len(rows)} rows from {sources} sources, under_specified={under}, oom={ooms}")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = render()
    target = CORPUS / "INDEX.md"
    if args.check:
        if target.read_text(encoding="utf-8") != text:
            print("tests/training_corpus/INDEX.md is stale: run python bench/training_corpus_index.py")
            return 1
        return 0
    tmp = target.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
