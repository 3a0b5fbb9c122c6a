"""`vramtui fit` as text (rich) and as JSON (every figure in exact bytes beside its text)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from vramtui.fit_capacity import CANNOT_TELL, FITS, OVER, VERDICT_WORDS
from vramtui.ledger.items import STAGE_LABELS
from vramtui.unit_text import in_unit
from vramtui.units import format_bytes, format_bytes_readable

STATUS_STYLE = {FITS: "green", OVER: "red", CANNOT_TELL: "yellow"}


def _stage(s: str | None) -> str:
    return STAGE_LABELS.get(s, s) if s else "-"


def _figure(n: int | None, unit: str) -> dict | None:
    if n is None:
        return None
    return {"bytes": n, "text": format_bytes(n, unit)}


def result_cells(r, unit: str) -> tuple[str, str, str, str, str]:
    """(largest that fits, binding stage, next value up, overflow, status words)."""
    k = r.knob
    best = k.show(r.best.value) if r.best is not None else "none"
    nxt = k.show(r.next_up.value) if r.next_up is not None else "-"
    over = r.overflow_bytes
    overflow = f"+{format_bytes_readable(over, unit)}" if over is not None else "-"
    words = VERDICT_WORDS.get(r.status, r.status)
    return best, _stage(r.binding_stage), nxt, overflow, words


def fit_head(report, unit: str = "gib") -> Text:
    """The card, its source, the margin and the spec as it is."""
    v = report.verdict
    head = Text()
    head.append("Fit on ", style="bold")
    head.append(in_unit(report.capacity.label, unit))
    if report.capacity.source:
        head.append(f"\nsource: {report.capacity.source}", style="dim")
    head.append(f"\nmargin: {in_unit(report.margin.text(), unit)} ({report.margin.source})")
    head.append("\nas it is: ")
    head.append(VERDICT_WORDS[v.status], style=f"bold {STATUS_STYLE[v.status]}")
    head.append(f" ({in_unit(v.reason, unit)})")
    return head


def fit_why_lines(report, unit: str = "gib") -> list[str]:
    """Why each answer is what it is, each variable's note, the choices left out, the notes."""
    why = []
    for r in report.results:
        if r.reason:
            why.append(f"- {r.knob.label}: {in_unit(r.reason, unit)}")
        if r.knob.note:
            why.append(f"- {r.knob.label}: {r.knob.note}")
        for s in r.skipped:
            why.append(f"- {r.knob.label}: left out {s}")
    return why + [f"- {n}" for n in report.notes]


def changes_renderable(report, unit: str = "gib"):
    """The single changes that make the spec fit (a table), the line saying there is none,
    or None when the spec fits as it is."""
    if report.changes:
        c = Table(
            title="single changes that make it fit (capacity, cache, micro-batch, precision: "
            "one at a time)",
            title_justify="left",
        )
        c.add_column("#", justify="right")
        c.add_column("change", overflow="fold")
        c.add_column("peak after", justify="right")
        c.add_column("what it costs", overflow="fold")
        for i, ch in enumerate(report.changes, 1):
            tell = "" if ch.status == FITS else " (cannot tell: see --json)"
            c.add_row(
                str(i),
                in_unit(ch.change, unit),
                format_bytes(ch.peak_bytes, unit) + f" at {_stage(ch.stage)}",
                ch.cost + tell,
            )
        return c
    if report.verdict.status == OVER:
        return Text("No single change makes it fit on this card.", style="red")
    return None


def fit_foot(report, timing: bool = True) -> Text:
    took = f" in {report.seconds * 1000:.0f} ms" if timing else ""
    return Text(
        f"{report.estimates} ledger estimates{took}; every figure is estimated (per GPU, the "
        "most loaded one)",
        style="dim",
    )


def fit_renderable(report, unit: str = "gib", trace=None) -> Group:
    parts = [fit_head(report, unit)]
    t = Table(
        title="each variable alone, the others held (largest value that fits; for choices, "
        "the first from the most memory to the least)",
        title_justify="left",
    )
    for col, just in (
        ("variable", "left"),
        ("now", "right"),
        ("largest that fits", "right"),
        ("binds at", "left"),
        ("next up", "right"),
        ("overflow", "right"),
        ("answer", "left"),
    ):
        t.add_column(col, justify=just, overflow="fold")
    for r in report.results:
        best, stage, nxt, overflow, words = result_cells(r, unit)
        t.add_row(
            r.knob.label,
            r.knob.show(r.knob.current),
            best,
            stage,
            nxt,
            overflow,
            Text(words, style=STATUS_STYLE.get(r.status, "")),
        )
    parts.append(t)
    why = fit_why_lines(report, unit)
    if why:
        parts.append(Text("\n".join(why)))
    changes = changes_renderable(report, unit)
    if changes is not None:
        parts.append(changes)
    if trace is not None:
        parts.append(Text(f"dry run: {in_unit(trace.line, unit)}"))
    parts.append(fit_foot(report))
    return Group(*parts)


def _point(p, unit: str) -> dict | None:
    if p is None:
        return None
    return {
        "value": p.value,
        "peak": _figure(p.peak_bytes, unit),
        "stage": p.stage,
        "unknown_items": list(p.unknown),
    }


def fit_to_dict(report, unit: str = "gib", trace=None) -> dict:
    v = report.verdict
    return {
        "capacity": report.capacity.to_dict(),
        "margin": {**report.margin.to_dict(), "text": in_unit(report.margin.text(), unit)},
        "allowed": _figure(v.allowed_bytes, unit),
        "as_is": {
            "status": v.status,
            "peak": _figure(v.peak_bytes, unit),
            "stage": v.stage,
            "reason": in_unit(v.reason, unit),
        },
        "variables": [
            {
                "variable": r.knob.key,
                "label": r.knob.label,
                "current": r.knob.current,
                "status": r.status,
                "largest_fitting": _point(r.best, unit),
                "binding_stage": r.binding_stage,
                "next_up": _point(r.next_up, unit),
                "overflow": _figure(r.overflow_bytes, unit),
                "reason": in_unit(r.reason, unit) if r.reason else "",
                "skipped": list(r.skipped),
                "note": r.knob.note,
            }
            for r in report.results
        ],
        "single_changes": [
            {**c.to_dict(), "change": in_unit(c.change, unit), "peak": _figure(c.peak_bytes, unit)}
            for c in report.changes
        ],
        "notes": list(report.notes),
        "dry_run": trace.to_dict() if trace is not None else None,
        "estimates": report.estimates,
        "status_of_figures": "estimated",
        "unit": unit,
    }
