"""Rich (not Textual) rendering of estimates for the headless commands."""

from __future__ import annotations

from rich.console import Console, Group
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from vramtui.ledger.items import STAGE_LABELS, Estimate
from vramtui.ledger.simple import SimpleEstimate
from vramtui.safe_text import has_unsafe, safe_text
from vramtui.unit_text import in_unit
from vramtui.units import format_bytes, format_bytes_readable

STATUS_STYLE = {"estimated": "yellow", "measured": "green", "unknown": "bold red"}
STATUS_MARK = {"estimated": "~ estimated", "measured": "= measured", "unknown": "? unknown"}


def _fmt(n: int, unit: str) -> str:
    return format_bytes_readable(n, unit)


def replaced_estimate_text(item, layout, unit: str) -> Text:
    """For a measured item: the estimate it replaced and measured - estimated."""
    old = item.replaced_estimate
    if old is None:
        return Text("")
    if old.is_unknown:
        return Text("was unknown", style="dim")
    old_b = old.largest_gpu_bytes(layout)
    new_b = item.largest_gpu_bytes(layout)
    diff = new_b - old_b
    text = f"~{_fmt(old_b, unit)} "
    text += f"({'+' if diff >= 0 else '-'}{_fmt(abs(diff), unit)}"
    if old_b:
        text += f", {diff / old_b:+.0%}"
    return Text(text + ")", style="dim")


def estimate_renderable(
    est: Estimate, unit: str = "gib", explain: bool = False, spec=None
) -> Group:
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
    any_measured = any(i.replaced_estimate is not None for i in est.items)
    if any_measured:
        table.add_column("estimate replaced (difference)")
    for item in est.items:
        if item.is_unknown:
            size = Text("unknown", style=STATUS_STYLE["unknown"])
        else:
            per_gpu = item.largest_gpu_bytes(layout)
            size = _fmt(per_gpu, unit)
        row = [
            in_unit(item.name, unit),
            Text(STATUS_MARK[item.status], style=STATUS_STYLE[item.status]),
            size,
            ", ".join(STAGE_LABELS[s] for s in item.stages),
        ]
        if any_measured:
            row.append(replaced_estimate_text(item, layout, unit))
        table.add_row(*row)

    totals = totals_table(est, unit)
    parts = [table, totals]
    if spec is not None:
        from vramtui.measure.compare import compare
        from vramtui.measure.plan import staged_plan
        from vramtui.render_measure import comparisons_table, plan_table

        comparisons = compare(spec, est)
        if comparisons:
            parts.append(comparisons_table(comparisons, unit))
        parts.append(plan_table(staged_plan(spec), unit))
    if explain:
        parts.append(_basis_list(est, unit))
    if est.unknown_items:
        names = ", ".join(in_unit(i.name, unit) for i in est.unknown_items)
        parts.append(Text(f"Not in any total (unknown): {names}", style=STATUS_STYLE["unknown"]))
    for note in est.notes:
        parts.append(Text(f"Note: {note}", style="dim"))
    if not explain:
        parts.append(Text("Add --explain for the formula behind every item.", style="dim"))
    return Group(*parts)


def totals_table(est: Estimate, unit: str = "gib") -> Table:
    """Weights only, the peak of each stage, and the conservative bound, each labelled."""
    multi = est.layout.gpus > 1
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
    if multi:
        worst = est.peak_stage
        per_gpu = "; ".join(
            f"{g.label}: {_fmt(b, unit)}"
            for g, b in zip(est.gpu_groups, est.stage_group_bytes(worst), strict=True)
        )
        totals.add_row(f"per GPU at {STAGE_LABELS[worst]}", "", per_gpu)
    if est.measurements:
        totals.add_row(
            Text("measured", style=STATUS_STYLE["measured"]),
            "",
            Text(
                f"{len(est.measurements)} stage figure(s): see 'measured beside estimated'; "
                "never added to an estimate",
                style=STATUS_STYLE["measured"],
            ),
        )
    return totals


def usage_bar(peak_bytes: int, usable_bytes: int, width: int = 30) -> Text:
    """A bar of the worst stage against a card's usable bytes, with the figures."""
    frac = peak_bytes / usable_bytes if usable_bytes else 1.0
    filled = min(width, round(frac * width))
    style = "green" if frac <= 0.9 else ("yellow" if frac <= 1.0 else "bold red")
    bar = Text("[")
    bar.append("█" * filled, style=style)
    bar.append("░" * (width - filled), style="dim")
    bar.append("] ")
    bar.append(f"{frac:.0%}", style=style)
    return bar


def _basis_list(est: Estimate, unit: str = "gib") -> Text:
    """Each item's formula or evidence, full width, after the tables."""
    text = Text()
    text.append("basis of each item\n", style="bold")
    multi = est.layout.gpus > 1
    for item in est.items:
        text.append(f"- {in_unit(item.name, unit)} ", style="bold")
        text.append(f"[{item.status}]", style=STATUS_STYLE[item.status])
        text.append(f": {in_unit(item.basis, unit)}")
        if multi:
            text.append(f" Placement: {item.distribution.description}.", style="dim")
        text.append("\n")
    return text


def unit_label(unit: str) -> str:
    return {"gib": "GiB", "gb": "GB", "mib": "MiB", "bytes": "bytes"}[unit]


def simple_renderable(simple: SimpleEstimate, unit: str = "gib") -> Group:
    """The seed's simple mode in the display unit: exact bytes in the bytes column, every other
    figure (the reserve too) in GiB, GB or MiB, never two decimal units mixed."""
    shown = "gib" if unit == "bytes" else unit  # exact bytes have their own column
    reserve = format_bytes(simple.reserve_bytes, shown)
    head = Text()
    head.append(f"{simple.params:,} parameters at {simple.bits:g} bits\n", style="bold")
    head.append(
        f"weights only: {format_bytes(simple.weights_only_bytes, 'bytes')} "
        f"({format_bytes(simple.weights_only_bytes, shown)})  [estimated]\n"
    )
    head.append(
        f"rough range: {format_bytes(simple.rough_total_bytes, shown)} = weights + "
        f"{reserve} reserve  [an assumption to verify, not a peak]"
    )
    table = Table(title=f"format table (same {reserve} reserve)", title_justify="left")
    table.add_column("bits", justify="right")
    table.add_column("weights only", justify="right")
    table.add_column(unit_label(shown), justify="right")
    table.add_column("rough range", justify="right")
    table.add_column("note", overflow="fold")
    for r in simple.table:
        table.add_row(
            str(r.bits),
            format_bytes(r.weights_only_bytes, "bytes"),
            format_bytes(r.weights_only_bytes, shown),
            format_bytes(r.rough_total_bytes, shown),
            r.note,
        )
    return Group(head, table)


class SafeConsole(Console):
    """The headless commands' console: no markup in plain strings, and no text segment reaches
    the terminal with a control character (ESC, C1, BEL...) or a bidi override.

    Strings are cleaned where they enter; this is the last line of defence for any that were
    not. Rich's own styling is emitted from segment styles, so it is unaffected; `markup=False`
    keeps a "[/]" or "[link=...]" in a catalogue title from being read as Rich markup.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("markup", False)
        super().__init__(*args, **kwargs)

    def render_str(self, text: str, **kwargs) -> Text:
        # Plain strings (table cells...) are cleaned before layout, so widths stay right.
        return super().render_str(safe_text(text), **kwargs)

    def render(self, renderable, options=None):
        for segment in super().render(renderable, options):
            if segment.control or not has_unsafe(segment.text):
                yield segment
            else:
                yield Segment(safe_text(segment.text), segment.style)


def print_renderable(renderable, width: int | None = None) -> None:
    SafeConsole(width=width).print(renderable)


SHORTLIST_STYLE = {"fit": "green", "needs_verification": "yellow", "excluded": "red"}

ILLUSTRATIVE_BANNER = "Illustrative sample data (not a quote): rows marked 'sample'"


# The short marker of a price older than the age limit (vramtui.price_age), in list cells.
RECHECK_MARK = "re-check price"


def recheck_legend(sl) -> str | None:
    """The line under a list with a flagged price, or None."""
    if not any(c.price_recheck for c in sl.candidates):
        return None
    return (
        f"{RECHECK_MARK}: price to re-check: seen more than {sl.price_max_age_days:g} days ago, "
        "or undated; confirm it with the provider before ordering (--price-max-age DAYS, "
        "config price_max_age_days)"
    )


def illustrative_banner(sl) -> str | None:
    """The banner for a list that holds sample offers, or None."""
    return ILLUSTRATIVE_BANNER if any(c.illustrative for c in sl.candidates) else None


def cost_text(c) -> str:
    """The total package cost with its currency (and "/h" when billed by the hour)."""
    return c.cost.short() if c.cost else "no price"


def candidate_notes(c) -> list[str]:
    """What the list row says besides the status: cards idle but paid."""
    if c.idle_gpus and c.status != "excluded":
        return [f"{c.idle_gpus} idle but paid"]
    return []


def _offer_cell(c) -> Text:
    """Title, the full offer id (never cut: it is what --detail takes), the provider."""
    t = Text(c.offer.title)
    t.append(f"\n{c.offer.id}", style="bold")
    t.append(f"\n{c.offer.provider}", style="dim")
    return t


def _cost_cell(c, plans: bool = True) -> Text:
    """Total with currency; the hourly price; the plans bought; "sample" for sample offers."""
    if c.cost is None:
        t = Text("no price")
    else:
        t = Text(f"{c.cost.total:,.2f} {c.cost.currency}")
        if c.cost.per_hour is not None:
            t.append(f"\n{c.cost.per_hour:,.2f} {c.cost.currency}/h")
        if plans:
            t.append("\n" + ", ".join(f"{n} x {name}" for name, n in c.cost.purchases), style="dim")
    if c.illustrative:
        t.append("\nsample", style="yellow")
    if c.price_recheck:
        t.append(f"\n{RECHECK_MARK}", style="yellow")
    return t


# "2,620.80 USD", "0.88 USD/h": the plans bought wrap under them, so that the offer id keeps
# its width at 80 columns.
COST_WIDTH = 14


# The last column of every list keeps at least this many characters.
LAST_COLUMN_MIN = 16


def _offer_column(table: Table, sl, width: int, fixed: int) -> int:
    """Add the offer column; return the width for the last column. The offer column is
    as wide as the longest offer id where the terminal allows (an id is what --detail
    takes: it must stay whole); `fixed` is what the borders and the other columns but the
    last take. (A fixed last column, rather than a minimum on this one: Rich crops a table
    whose minimum widths it cannot honour.)"""
    longest = max((len(c.offer.id) for c in sl.candidates), default=10)
    table.add_column("offer", overflow="fold")
    return max(LAST_COLUMN_MIN, width - fixed - longest)


class _ShortlistView:
    """The shortlist laid out for the width it is printed at."""

    def __init__(self, sl, est: Estimate, unit: str, detail: str | None) -> None:
        self.args = (sl, est, unit, detail)

    def __rich_console__(self, console, options):
        yield Group(*_shortlist_parts(*self.args, width=options.max_width))


def shortlist_renderable(sl, est: Estimate, unit: str = "gib", detail: str | None = None) -> Group:
    """The shortlist for the headless command: the fit list, then needs verification, then
    excluded, each with the total cost; offer ids whole at 80 columns."""
    return Group(_ShortlistView(sl, est, unit, detail))


def _shortlist_parts(sl, est: Estimate, unit: str, detail: str | None, width: int) -> list:
    from vramtui.shortlist import EXCLUDED, FIT, VERIFY

    parts = []
    head = Text()
    head.append("Shortlist for ", style="bold")
    head.append(sl.estimate_scope)
    head.append(
        f"\nworst stage {STAGE_LABELS[est.peak_stage]}: {format_bytes(est.peak_bytes, unit)} per "
        f"GPU (estimated); campaign {sl.days:g} day(s) ({sl.days_source})"
    )
    parts.append(head)
    banner = illustrative_banner(sl)
    if banner:
        parts.append(Text(banner, style="bold yellow"))

    fits = sl.with_status(FIT)
    t = Table(
        title=f"fit — ranked by total cost ({sl.currency or '-'}), then margin, then lead time",
        title_justify="left",
        title_style=SHORTLIST_STYLE[FIT],
    )
    rank_width = len(str(len(fits)))
    t.add_column("#", justify="right")
    last = _offer_column(t, sl, width, 13 + rank_width + COST_WIDTH)
    t.add_column("total cost", justify="right", max_width=COST_WIDTH)
    t.add_column("margin (estimated), lead time, notes", overflow="fold", width=last)
    for c in fits:
        lead = (
            f"lead time {c.lead_time_hours:g} h"
            if c.lead_time_hours is not None
            else "lead time not documented"
        )
        margin = (
            f"{format_bytes(c.effective_margin_bytes, unit)} ({c.effective_margin_fraction:.0%})"
        )
        t.add_row(
            str(c.rank),
            _offer_cell(c),
            _cost_cell(c),
            Text("\n".join([margin, lead, *candidate_notes(c)])),
        )
    parts.append(
        t if fits else Text("No candidate is fit on every requirement.", style=SHORTLIST_STYLE[FIT])
    )

    verify = sl.with_status(VERIFY)
    if verify:
        v = Table(
            title="needs verification — not ranked; what to check",
            title_justify="left",
            title_style=SHORTLIST_STYLE[VERIFY],
        )
        last = _offer_column(v, sl, width, 10 + COST_WIDTH)
        v.add_column("total cost", justify="right", max_width=COST_WIDTH)
        v.add_column("conditions", overflow="fold", width=last)
        for c in verify:
            v.add_row(
                _offer_cell(c),
                _cost_cell(c),
                Text(
                    "\n".join(
                        [
                            *(f"{r.name}: {in_unit(r.condition, unit)}" for r in c.conditions),
                            *candidate_notes(c),
                        ]
                    )
                ),
            )
        parts.append(v)
    excluded = sl.with_status(EXCLUDED)
    if excluded:
        x = Table(
            title="excluded — the failing requirement (a placement hint where another placement "
            "would fit; not ranked, the choice is yours)",
            title_justify="left",
            title_style=SHORTLIST_STYLE[EXCLUDED],
        )
        last = _offer_column(x, sl, width, 10 + COST_WIDTH)
        x.add_column("total cost", justify="right", max_width=COST_WIDTH)
        x.add_column("failing requirement", overflow="fold", width=last)
        for c in excluded:
            why = Text("\n".join(f"{r.name}: {in_unit(r.detail, unit)}" for r in c.failing))
            if c.placement_hint:
                hint = in_unit(c.placement_hint.text, unit)
                why.append(f"\nplacement hint: {hint}", style="cyan")
            x.add_row(_offer_cell(c), _cost_cell(c, plans=False), why)
        parts.append(x)
    parts += _shortlist_tail(sl, detail, unit)
    return parts


def _shortlist_tail(sl, detail: str | None, unit: str = "gib") -> list:
    parts = []
    if detail:
        match = [c for c in sl.candidates if c.offer.id == detail]
        if match:
            parts.append(candidate_detail(match[0], unit))
        else:
            parts.append(Text(f"No offer with id {detail!r}.", style="red"))
    for p in sl.problems:
        parts.append(Text(f"catalogue: {p}", style="red"))
    legend = recheck_legend(sl)
    if legend:
        parts.append(Text(legend, style="yellow"))
    parts.append(
        Text(
            "Price says nothing about speed. Statuses follow the seed: fit (evidence confirms it "
            "within its scope), needs verification (no evidence), excluded (an established "
            "failure). Add --detail OFFER_ID for one candidate's evidence.",
            style="dim",
        )
    )
    return parts


def candidate_detail(c, unit: str = "gib") -> Group:
    """One candidate: each requirement with what was compared and its evidence, then the
    offer's own evidence once (every offer-based requirement rests on it); the figures the
    shortlist worked out in `unit`."""
    from vramtui.shortlist import STATUS_LABELS

    t = Table(
        title=f"{c.offer.title} — {c.offer.provider} ({c.offer.id}): {STATUS_LABELS[c.status]}",
        title_justify="left",
        show_lines=True,
    )
    t.add_column("requirement")
    t.add_column("status")
    t.add_column("what was compared / evidence", overflow="fold", ratio=3)
    for r in c.requirements:
        lines = [in_unit(r.detail, unit)]
        if r.condition:
            lines.append(f"to verify: {in_unit(r.condition, unit)}")
        for e in r.evidence:
            if e["kind"] == "offer":
                continue
            lines.append(
                f"[{e['kind']}] {in_unit(e['claim'], unit)} — {e['source']} ({e['version']}; scope: {e['scope']})"
            )
        if any(e["kind"] == "offer" for e in r.evidence):
            lines.append("[offer] see the offer's evidence below")
        t.add_row(
            Text(r.name),
            Text(STATUS_LABELS[r.status], style=SHORTLIST_STYLE[r.status]),
            Text("\n".join(lines)),
        )
    for p in c.preferences:
        met = {True: "met", False: "not met", None: "unknown"}[p.met]
        t.add_row(
            Text(p.name),
            Text(met),
            Text(in_unit(p.detail, unit) + " (a preference never changes the status)"),
        )
    hint = c.placement_hint
    if hint is not None:
        t.add_row(
            Text("placement hint (not ranked: the spec's placement is yours to change)"),
            Text(STATUS_LABELS[hint.status], style=SHORTLIST_STYLE[hint.status]),
            Text(in_unit(hint.text, unit)),
        )
    if c.illustrative:
        t.add_row(Text("price"), Text("sample"), Text(ILLUSTRATIVE_BANNER.split(":")[0]))
    seen = c.price_seen_on.isoformat() if c.price_seen_on else "not given"
    if c.price_recheck:
        t.add_row(Text("price date"), Text("re-check", style="yellow"), Text(c.price_recheck))
    else:
        t.add_row(Text("price date"), Text("seen"), Text(f"price seen {seen}"))
    ev = Text()
    ev.append("offer evidence\n", style="bold")
    for e in c.offer.evidence:
        ev.append(
            f"- {e.claim}\n  source: {e.source}\n  version: {e.version}; "
            f"date: {e.date or 'not given'}\n  scope: {e.scope}\n"
        )
    return Group(t, ev)
