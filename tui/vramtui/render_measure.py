"""Rich rendering of measurements beside estimates and of the staged validation checklist."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from vramtui.ledger.items import STAGE_LABELS
from vramtui.measure.plan import FAILED, NOT_RUN, PARTIAL, PASSED
from vramtui.unit_text import in_unit
from vramtui.units import format_bytes_readable

PLAN_MARK = {PASSED: "✓ passed", PARTIAL: "◐ partial", FAILED: "✗ failed", NOT_RUN: "· not run"}
PLAN_STYLE = {PASSED: "green", PARTIAL: "yellow", FAILED: "bold red", NOT_RUN: "dim"}


def _fmt(n: int | None, unit: str) -> str:
    return "-" if n is None else format_bytes_readable(n, unit)


def measured_text(c, unit: str) -> str:
    """The measured figure as read: bytes in the chosen unit, or the count."""
    m = c.measurement
    if m.is_count:
        if m.quantity == "max_concurrency":
            return f"{m.value:g}x"
        return f"{m.value:,.0f} {'tokens' if m.quantity == 'kv_cache_tokens' else 'blocks'}"
    return _fmt(m.bytes, unit)


def estimate_text(c, unit: str) -> str:
    if c.measurement.is_count:
        return "-" if c.estimate_value is None else f"{c.estimate_value:,.0f} tokens needed"
    return _fmt(c.estimate_bytes, unit)


def difference_text(c, unit: str) -> Text:
    frac = c.difference_fraction
    if c.measurement.is_count:
        if frac is None:
            return Text("-")
        return Text(f"{frac:+.0%} capacity", style="green" if frac >= 0 else "bold red")
    diff = c.difference_bytes
    if diff is None:
        return Text("-")
    sign = "+" if diff >= 0 else "-"
    text = f"{sign}{format_bytes_readable(abs(diff), unit)}"
    if frac is not None:
        text += f" ({frac:+.0%})"
    return Text(text, style="yellow" if frac is not None and abs(frac) > 0.1 else "")


def comparisons_table(comparisons, unit: str = "gib", title: str | None = None) -> Table:
    """One row per measurement: estimate, measurement, counter, difference, and whether it
    validates the required workload."""
    t = Table(
        title=title or "measured beside estimated (per GPU; difference = measured - estimated)",
        title_justify="left",
        show_lines=False,
    )
    t.add_column("what")
    t.add_column("estimated", justify="right")
    t.add_column("measured", justify="right", style="green")
    t.add_column("difference", justify="right")
    t.add_column("counter / conditions", overflow="fold")
    for c in comparisons:
        m = c.measurement
        cov = c.coverage
        conditions = Text(m.counter)
        if m.device:
            conditions.append(f"; {m.device}", style="dim")
        conditions.append("\n")
        conditions.append(
            cov.note,
            style="green" if cov.validates else "bold yellow",
        )
        if c.scope:
            conditions.append(f"\nestimate: {in_unit(c.scope, unit)}", style="dim")
        label = Text(c.label)
        if m.error:
            label.append(" [failed]", style="bold red")
        t.add_row(
            label,
            estimate_text(c, unit),
            measured_text(c, unit),
            difference_text(c, unit),
            conditions,
        )
    return t


def plan_table(plan, unit: str = "gib") -> Table:
    t = Table(title="staged validation plan", title_justify="left")
    t.add_column("step")
    t.add_column("dimensions")
    t.add_column("status")
    t.add_column("stages", overflow="fold")
    t.add_column("largest figure", justify="right")
    for step in plan:
        stages = Text()
        if step.measured_stages:
            stages.append(
                "measured: " + ", ".join(STAGE_LABELS[s] for s in step.measured_stages),
                style="green",
            )
        if step.missing_stages and step.measured_stages:
            stages.append("\nto run: " + ", ".join(STAGE_LABELS[s] for s in step.missing_stages))
        elif step.missing_stages:
            stages.append(
                "to run: " + ", ".join(STAGE_LABELS[s] for s in step.missing_stages)
                if len(step.missing_stages) == 1
                else f"to run: all {len(step.missing_stages)} stages",
                style="dim",
            )
        for f in step.failures:
            stages.append(f"\n{f}", style="bold red")
        peak = Text(_fmt(step.peak_bytes, unit))
        if step.peak_counter:
            peak.append(f"\n{step.peak_counter.split(' (')[0]}", style="dim")
        t.add_row(
            Text(step.title),
            Text(step.dims_text),
            Text(PLAN_MARK[step.status], style=PLAN_STYLE[step.status]),
            stages,
            peak,
        )
    return t
