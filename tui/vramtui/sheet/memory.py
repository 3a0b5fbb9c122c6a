"""The "Memory per GPU" section: each stage's estimated total beside what was measured there,
the itemised ledger in one compact table, and the headline bounds (weights only, the
conservative bound), each in GiB with its exact bytes."""

from __future__ import annotations

import re

from vramtui.ledger.items import ESTIMATED, MEASURED, STAGE_LABELS, UNKNOWN, Estimate
from vramtui.measure.compare import QUANTITY_LABELS
from vramtui.sheet.blocks import (
    INVALID,
    WARN,
    WORST,
    Bullets,
    Cell,
    Code,
    Inline,
    Mark,
    Para,
    Section,
    Table,
    join,
)
from vramtui.sheet.figures import exact, gib, item_gpu_max, stages_text

# Whole-stage counters in short (the full name and the counter are under "Measured").
SHORT_QUANTITIES = {
    "process_in_use": "in use",
    "allocated": "allocated",
    "reserved": "reserved",
    "max_memory_allocated": "peak allocated",
    "max_memory_reserved": "peak reserved",
    "nvml_used": "NVML used",
}


def _stage_measured(c) -> tuple[Inline, ...]:
    """A whole-stage counter in short: its GiB, what it counts, flagged when it does not
    validate the required workload."""
    m = c.measurement
    what = SHORT_QUANTITIES.get(m.quantity) or QUANTITY_LABELS.get(m.quantity, m.quantity)
    gpu = f", GPU {m.gpu}" if m.gpu is not None else ""
    if c.coverage.validates:
        return (f"{gib(m.bytes)} {what}{gpu}",)
    return (f"{gib(m.bytes)} {what}{gpu} ", Mark(INVALID, "does not validate"))


def _stage_table(est: Estimate, comparisons) -> Table:
    by_stage: dict[str, list] = {}
    for c in comparisons:
        if c.subject.startswith("stage ") and c.measurement.bytes is not None:
            by_stage.setdefault(c.measurement.stage, []).append(c)
    rows = []
    for s in est.stages:
        label: Cell = STAGE_LABELS[s]
        if s == est.peak_stage:
            label = (STAGE_LABELS[s], " ", Mark(WORST, "worst stage"))
        measured = [_stage_measured(c) for c in by_stage.get(s, [])]
        total = est.stage_peak_bytes[s]
        figure = exact(total) if s == est.peak_stage else gib(total)
        rows.append((label, figure, join(measured, "; ") if measured else "none"))
    return Table(("stage", "estimated", "measured"), tuple(rows), numeric=frozenset({1}))


def _item_size(item, est: Estimate) -> str:
    return "in no total" if item.is_unknown else gib(item_gpu_max(item, est))


def _item_table(est: Estimate) -> Table:
    """The ledger, one row per item (estimated unless marked); the estimated weight parts that
    live at the same stages share one row (their split is in `--explain`)."""
    weights = [i for i in est.items if i.category == "weights" and i.status == ESTIMATED]
    merge = len(weights) > 1 and len({tuple(i.stages) for i in weights}) == 1
    rows: list[tuple[Cell, ...]] = []
    for item in est.items:
        if merge and item in weights:
            if item is not weights[0]:
                continue
            parts = ", ".join(
                re.sub(r" \(.*$", "", i.name.removeprefix("Weights: ")) for i in weights
            )
            size = gib(sum(item_gpu_max(i, est) for i in weights))
            rows.append((f"Weights: {parts}", size, stages_text(item.stages, est.stages)))
            continue
        name: Cell = item.name
        if item.status != ESTIMATED:
            name = (item.name, " ", Mark(item.status, item.status))
            was = item.replaced_estimate
            if was is not None and not was.is_unknown:
                name += (f" (estimate {gib(item_gpu_max(was, est))})",)
        rows.append((name, _item_size(item, est), stages_text(item.stages, est.stages)))
    return Table(
        ("item (estimated unless marked)", "per GPU", "live at"), tuple(rows), frozenset({1})
    )


def _counts(est: Estimate) -> tuple[Inline, ...]:
    """ "10 estimated, 1 unknown (in no total)" over the whole ledger."""
    parts: list[tuple[Inline, ...]] = []
    for status, suffix in ((ESTIMATED, ""), (MEASURED, ""), (UNKNOWN, " (in no total)")):
        n = sum(1 for i in est.items if i.status == status)
        if n:
            parts.append((Mark(status, f"{n} {status}"),) + ((suffix,) if suffix else ()))
    return join(parts, ", ")


def memory_section(est: Estimate, comparisons) -> Section:
    intro = Para(
        (
            (
                "Estimated (known items together on the most loaded GPU) beside measured "
                "(whole-stage counters, never added). Items: "
            ),
            *_counts(est),
            "; basis: ",
            Code("vramtui estimate SPEC.toml --explain"),
            ".",
        )
    )
    weights_status = sorted(
        {i.status for i in est.items if i.category in ("weights", "quant_metadata")}
    )
    whole = " (whole model)" if est.layout.gpus > 1 else ""
    bullets: list[Cell] = [
        (
            "Weights only: ",
            exact(est.weights_only_bytes),
            f"{whole}, one copy with quantisation metadata (",
            *join([(Mark(s, s),) for s in weights_status], ", "),
            ")",
        ),
        (
            "Conservative bound: ",
            exact(est.conservative_bound_bytes),
            ", every item at its own maximum: ",
            Mark(WARN, "a bound, not a peak"),
        ),
    ]
    if est.layout.gpus > 1:
        per_group = est.stage_group_bytes(est.peak_stage)
        if len(set(per_group)) > 1:
            spread = ", ".join(
                f"{g.label} {gib(b)}" for g, b in zip(est.gpu_groups, per_group, strict=True)
            )
            bullets.append(f"Per GPU at {STAGE_LABELS[est.peak_stage]}: {spread}")
    # the framework's settings are in the workload's Training row, not repeated here
    bullets += [f"Note: {n}" for n in est.notes if not n.startswith("training framework:")]
    return Section(
        "memory",
        "Memory per GPU",
        (intro, _stage_table(est, comparisons), _item_table(est), Bullets(tuple(bullets))),
    )
