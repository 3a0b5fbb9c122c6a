"""The dry run's weights against the ledger's, for every catalogue model.

Each model in catalog/models/*.toml is taken as `vramtui estimate --model ID` takes it (the
default spec, the model's stored format where the ledger models it); the dry run builds its
weights on the meta device (stored formats honoured: FP8 blocks, MXFP4, compressed-tensors,
bitsandbytes; no stage traced, so it is cheap) and their parameter bytes are set beside the
ledger's weights and quantisation metadata. Every model outside 10% gets its reason.

    PYTHONPATH=tui python bench/dryrun_weights_vs_ledger.py

writes bench/results/dryrun-weights-vs-ledger-<YYYY-MM-DD>.md.
"""

from __future__ import annotations

import datetime as dt
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from vramtui.cli import _spec_and_estimate, build_parser
from vramtui.dryrun import DryRunError
from vramtui.dryrun.command import build_weights
from vramtui.dryrun.compare import DISAGREEMENT_PCT, WeightsCheck, ledger_weights_bytes

GIB = 2**30


def catalogue_ids() -> list[str]:
    return sorted(
        p.stem.replace("--", "/", 1) for p in (REPO / "catalog" / "models").glob("*.toml")
    )


def row(model_id: str) -> dict:
    args = build_parser().parse_args(["estimate", "--model", model_id])
    spec, arch, est = _spec_and_estimate(args)
    qc = arch.quantization_config or {}
    out = {
        "model": model_id,
        "model_type": arch.model_type,
        "format": spec.weights.format,
        "stored": str(qc.get("quant_method", "")) or "-",
        "ledger": ledger_weights_bytes(est),
    }
    t0 = time.perf_counter()
    try:
        built = build_weights(spec, arch)
    except DryRunError as exc:
        out.update(trace=None, seconds=time.perf_counter() - t0, reason=f"dry run refused: {exc}")
        return out
    check = WeightsCheck(built.weights_bytes, out["ledger"], built.weights_gap)
    out.update(
        trace=built.weights_bytes,
        seconds=time.perf_counter() - t0,
        pct=check.difference_pct,
        disagrees=check.disagrees,
        reason=(check.reason or "no known cause") if check.disagrees else "",
    )
    return out


def main() -> int:
    import torch
    import transformers

    rows = []
    for model_id in catalogue_ids():
        r = row(model_id)
        rows.append(r)
        shown = "-" if r["trace"] is None else f"{r['pct']:+.2f}%"
        print(f"{model_id:45s} {shown:>9s} {r['seconds']:.1f} s", flush=True)
    today = dt.date.today().isoformat()
    outside = [r for r in rows if r["trace"] is None or r["disagrees"]]
    lines = [
        f"# Dry-run weights vs ledger weights, {today}",
        "",
        (
            f"python {platform.python_version()}, torch {torch.__version__}, transformers "
            f"{transformers.__version__}, {platform.system()} {platform.machine()}."
        ),
        "",
        (
            "Every catalogue model as `vramtui estimate --model ID` takes it (default spec; the "
            "spec's weight format is the checkpoint's where the ledger models it). Dry run: the "
            "parameter bytes of the model built on the meta device with the checkpoint's stored "
            "format (FP8 e4m3 + fp32 scales per 128x128 block, MXFP4 blocks + scales, ...); "
            "ledger: its weights and quantisation metadata, whole model. Ratio = dry run / ledger; "
            f"outside {DISAGREEMENT_PCT:g}% is flagged **!** with its reason."
        ),
        "",
        (
            f"{len(rows)} models, {len(rows) - len(outside)} within {DISAGREEMENT_PCT:g}%, "
            f"{len(outside)} outside (each with its reason below)."
        ),
        "",
        "| model | model_type | spec format | stored | dry run GiB | ledger GiB | ratio | diff |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r["trace"] is None:
            lines.append(
                f"| {r['model']} | {r['model_type']} | {r['format']} | {r['stored']} | - | "
                f"{r['ledger'] / GIB:.2f} | - | refused **!** |"
            )
            continue
        flag = " **!**" if r["disagrees"] else ""
        lines.append(
            f"| {r['model']} | {r['model_type']} | {r['format']} | {r['stored']} | "
            f"{r['trace'] / GIB:.2f} | {r['ledger'] / GIB:.2f} | "
            f"{r['trace'] / r['ledger']:.4f} | {r['pct']:+.2f}%{flag} |"
        )
    lines += ["", "## Outside 10%, and why", ""]
    if not outside:
        lines.append("None.")
    for r in outside:
        lines.append(f"- **{r['model']}**: {r['reason']}")
    path = REPO / "bench" / "results" / f"dryrun-weights-vs-ledger-{today}.md"
    from vramtui.fsutil import atomic_write_text

    atomic_write_text(path, "\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
