"""Rich (not Textual) rendering of estimates for the headless commands."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from vramtui.ledger.items import STAGE_LABELS, Estimate
from vramtui.ledger.simple import SimpleEstimate
from vramtui.units import format_bytes, format_bytes_readable

STATUS_STYLE = {"estimated": "yellow", "measured": "green", "unknown": "bold red"}
STATUS_MARK = {"estimated": "~ estimated", "measured": "= measured", "unknown": "? unknown"}


def _fmt(n: int, unit: str) -> str:
    return format_bytes_readable(n, unit)


def estimate_renderable(est: Estimate, unit: str = "gib", explain: bool = False) -> Group:
    layout = est.layout
    multi = layout.gpus > 1
    title = f"{est.model_label}"
    if est.param_count:
        title += f" · {est.param_count:,} parameters"
    if multi:
        title += (
            f" · {layout.gpus} GPUs (TP={layout.tensor_parallel}, PP={layout.pipeline_parallel}, "
            f"DP={layout.data_parallel})"
        )
    table = Table(title=title, title_justify="left")
    table.add_column("item")
    table.add_column("status")
    table.add_column(
        f"{unit_label(unit)} (largest GPU)" if multi else unit_label(unit), justify="right"
    )
    table.add_column("stages")
    for item in est.items:
        if item.is_unknown:
            size = Text("unknown", style=STATUS_STYLE["unknown"])
        else:
            per_gpu = max(max(item.gpu_bytes_at(s, layout)) for s in item.stages)
            size = _fmt(per_gpu, unit)
        row = [
            item.name,
            Text(STATUS_MARK[item.status], style=STATUS_STYLE[item.status]),
            size,
            ", ".join(STAGE_LABELS[s] for s in item.stages),
        ]
        table.add_row(*row)

    totals = Table(title="totals (estimated, per GPU, known items only)", title_justify="left")
    totals.add_column("quantity")
    totals.add_column(unit_label(unit), justify="right")
    totals.add_column("what it is")
    totals.add_row(
        "weights only",
        _fmt(est.weights_only_bytes, unit),
        "one copy of all weights incl. quantisation metadata" + (", whole model" if multi else ""),
    )
    peaks = est.stage_peak_bytes
    worst = est.peak_stage
    for stage in est.stages:
        mark = "  <- worst stage" if stage == worst else ""
        table_label = f"peak at {STAGE_LABELS[stage]}"
        totals.add_row(table_label, _fmt(peaks[stage], unit), f"items live together{mark}")
    totals.add_row(
        Text("conservative bound", style="italic"),
        _fmt(est.conservative_bound_bytes, unit),
        Text("sum of each item's maximum: a bound, not an observed peak", style="italic"),
    )
    parts = [table, totals]
    if explain:
        parts.append(_basis_list(est))
    if est.unknown_items:
        names = ", ".join(i.name for i in est.unknown_items)
        parts.append(Text(f"Not in any total (unknown): {names}", style=STATUS_STYLE["unknown"]))
    for note in est.notes:
        parts.append(Text(f"Note: {note}", style="dim"))
    if not explain:
        parts.append(Text("Add --explain for the formula behind every item.", style="dim"))
    return Group(*parts)


def _basis_list(est: Estimate) -> Text:
    """Each item's formula or evidence, full width, after the tables."""
    text = Text()
    text.append("basis of each item\n", style="bold")
    multi = est.layout.gpus > 1
    for item in est.items:
        text.append(f"- {item.name} ", style="bold")
        text.append(f"[{item.status}]", style=STATUS_STYLE[item.status])
        text.append(f": {item.basis}")
        if multi:
            text.append(f" Placement: {item.distribution.description}.", style="dim")
        text.append("\n")
    return text


def unit_label(unit: str) -> str:
    return {"gib": "GiB", "gb": "GB", "mib": "MiB", "bytes": "bytes"}[unit]


def simple_renderable(simple: SimpleEstimate) -> Group:
    head = Text()
    head.append(f"{simple.params:,} parameters at {simple.bits:g} bits\n", style="bold")
    head.append(
        f"weights only: {format_bytes(simple.weights_only_bytes, 'bytes')} "
        f"({format_bytes(simple.weights_only_bytes, 'gib')})  [estimated]\n"
    )
    head.append(
        f"rough range: {format_bytes(simple.rough_total_bytes, 'gib')} = weights + "
        f"{simple.reserve_gib:g} GiB reserve  [an assumption to verify, not a peak]"
    )
    table = Table(
        title=f"format table (same {simple.reserve_gib:g} GiB reserve)", title_justify="left"
    )
    table.add_column("bits", justify="right")
    table.add_column("weights only", justify="right")
    table.add_column("GiB", justify="right")
    table.add_column("rough range", justify="right")
    table.add_column("note", overflow="fold")
    for r in simple.table:
        table.add_row(
            str(r.bits),
            format_bytes(r.weights_only_bytes, "bytes"),
            format_bytes(r.weights_only_bytes, "gib"),
            format_bytes(r.rough_total_bytes, "gib"),
            r.note,
        )
    return Group(head, table)


def print_renderable(renderable, width: int | None = None) -> None:
    Console(width=width).print(renderable)
