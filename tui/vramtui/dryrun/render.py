"""Rich rendering of a dry run beside the analytic ledger (rich only, no Textual)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from vramtui.dryrun.compare import DISAGREEMENT_PCT, GROUP_LABELS, compare, not_in_trace
from vramtui.dryrun.result import CATEGORY_LABELS, DryRunResult
from vramtui.ledger.items import STAGE_LABELS
from vramtui.unit_text import in_unit
from vramtui.units import format_bytes_readable

TRACED_STYLE = "cyan"
TRACED_MARK = "≈ traced estimate"


def _fmt(n: int | None, unit: str) -> str:
    if n is None:
        return "-"
    return format_bytes_readable(n, unit)


def _pct(p: float | None) -> Text:
    if p is None:
        return Text("-")
    if p in (float("inf"), float("-inf")):
        return Text("ledger 0", style="yellow")
    style = "bold red" if abs(p) > DISAGREEMENT_PCT else ""
    return Text(f"{p:+.1f}%", style=style)


def dry_run_renderable(result: DryRunResult, estimate=None, unit: str = "gib") -> Group:
    head = Text()
    head.append(f"Dry run: {result.model_label}", style="bold")
    head.append(
        f" · {result.task_kind} · {result.compute_dtype} · traced on the {result.device} "
        f"device in {result.trace_seconds:.1f} s (build {result.build_seconds:.1f} s)\n"
    )
    head.append(TRACED_MARK, style=TRACED_STYLE)
    head.append(f" ({result.counter}): {result.scope}\n")
    head.append(f"attention ({result.attention_kernel}): {result.attention_used}")
    parts: list = [head]

    comparisons = {c.stage: c for c in compare(result, estimate)} if estimate is not None else {}
    peaks = Table(title="Peak of live tensor bytes per stage", title_justify="left")
    peaks.add_column("stage")
    peaks.add_column("traced peak", justify="right")
    peaks.add_column("rounded to 512 B blocks", justify="right")
    if estimate is not None:
        peaks.add_column("ledger tensor items", justify="right")
        peaks.add_column("trace vs ledger", justify="right")
    peaks.add_column("peak reached at")
    for s in result.stages:
        row = [
            STAGE_LABELS.get(s.stage, s.stage),
            Text(_fmt(s.peak_bytes, unit), style=TRACED_STYLE),
            _fmt(s.peak_rounded_bytes, unit),
        ]
        if estimate is not None:
            c = comparisons.get(s.stage)
            row += [
                _fmt(c.ledger_tensor_bytes if c else None, unit),
                _pct(c.difference_pct if c else None),
            ]
        row.append(s.peak_op)
        peaks.add_row(*row)
    parts.append(peaks)

    cats = Table(title="At each stage's peak, by category (trace)", title_justify="left")
    cats.add_column("category")
    for s in result.stages:
        cats.add_column(STAGE_LABELS.get(s.stage, s.stage), justify="right")
    present = [
        c for c in CATEGORY_LABELS if any(s.peak_categories_bytes.get(c) for s in result.stages)
    ]
    for c in present:
        cats.add_row(
            CATEGORY_LABELS[c][0],
            *[_fmt(s.peak_categories_bytes.get(c, 0), unit) for s in result.stages],
        )
    parts.append(cats)

    if estimate is not None and comparisons:
        side = Table(
            title="Trace vs ledger by category (trace at the peak; whole model, one replica)",
            title_justify="left",
        )
        side.add_column("stage")
        side.add_column("category")
        side.add_column("trace", justify="right")
        side.add_column("ledger", justify="right")
        side.add_column("difference", justify="right")
        for stage, comp in comparisons.items():
            for k in comp.categories:
                if not (k.trace_peak_bytes or k.ledger_bytes):
                    continue
                side.add_row(
                    STAGE_LABELS.get(stage, stage),
                    GROUP_LABELS[k.group],
                    _fmt(k.trace_peak_bytes, unit),
                    _fmt(k.ledger_bytes, unit),
                    _pct(k.difference_pct),
                )
        parts.append(side)
        if result.saved_activations_bytes is not None:
            fwd = comparisons.get("forward")
            ledger_act = (
                next((k.ledger_bytes for k in fwd.categories if k.group == "activations"), 0)
                if fwd
                else 0
            )
            parts.append(
                Text(
                    f"Activations saved for backward (alive at the end of the forward): trace "
                    f"{_fmt(result.saved_activations_bytes, unit)}, ledger {_fmt(ledger_act, unit)}"
                )
            )
        missing = not_in_trace(estimate)
        if missing:
            lines = Text(
                "Not in the trace (tensor bytes only); the ledger's items:\n", style="bold"
            )
            for i in missing:
                size = "unknown" if i.is_unknown else _fmt(i.max_bytes, unit)
                lines.append(f"  {in_unit(i.name, unit)}: {size} ({i.status})\n")
            parts.append(lines)
    if estimate is not None:
        from vramtui.dryrun.compare import weights_check

        check = weights_check(result, estimate)
        if check is not None and check.disagrees:
            parts.append(Text(f"warning: {check.line()}", style="bold yellow"))
    for note in result.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)
