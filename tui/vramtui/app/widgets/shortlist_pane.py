"""The shortlist: ranked fit candidates, then needs-verification, then excluded; the selected
candidate's requirements and evidence below."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from vramtui.app.messages import CandidateSelected
from vramtui.render import SHORTLIST_STYLE, candidate_detail, cost_text, illustrative_banner
from vramtui.shortlist import STATUS_LABELS
from vramtui.unit_text import in_unit
from vramtui.units import format_bytes_readable


class ShortlistPane(Vertical):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.shortlist = None
        self.unit = "gib"
        self.selected: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="shortlist-title", markup=False)
        self.table = DataTable(id="shortlist-table", cursor_type="row", zebra_stripes=True)
        yield self.table
        with VerticalScroll(id="shortlist-detail"):
            yield Static(id="candidate-detail")

    def on_mount(self) -> None:
        t = self.query_one("#shortlist-table", DataTable)
        # The total cost comes before the offer's title, so that it is on screen at 80 columns.
        for key, label in (
            ("rank", "#"),
            ("status", "status"),
            ("cost", "total cost"),
            ("offer", "offer"),
            ("why", "margin / what to check / why not"),
        ):
            t.add_column(label, key=key)

    def show(self, shortlist, unit: str) -> None:
        self.shortlist, self.unit = shortlist, unit
        if shortlist is None:
            self.query_one("#shortlist-title", Static).update("No catalogue loaded.")
            return
        title = Text(f"{sl_heading(shortlist)} — price says nothing about speed")
        banner = illustrative_banner(shortlist)
        if banner:
            title.append(f"\n{banner}", style="bold yellow")
        if any(c.price_recheck for c in shortlist.candidates):
            title.append(
                f"\nre-check: price seen more than {shortlist.price_max_age_days:g} days ago, "
                "or undated (config price_max_age_days)",
                style="yellow",
            )
        self.query_one("#shortlist-title", Static).update(title)
        t = self.query_one("#shortlist-table", DataTable)
        cursor = t.cursor_row
        t.clear()
        for c in shortlist.candidates:
            if c.status == "fit":
                why = (
                    f"margin {format_bytes_readable(c.effective_margin_bytes, unit)} "
                    f"({c.effective_margin_fraction:.0%})"
                )
            elif c.status == "needs_verification":
                why = "; ".join(in_unit(r.condition, unit) for r in c.conditions)
            else:
                why = "; ".join(f"{r.name}: {in_unit(r.detail, unit)}" for r in c.failing)
                if c.placement_hint:
                    why = f"placement hint: {in_unit(c.placement_hint.text, unit)} | {why}"
            offer = c.offer.title
            if c.idle_gpus and c.status != "excluded":
                offer += f" ({c.idle_gpus} idle but paid)"
            t.add_row(
                str(c.rank or ""),
                Text(STATUS_LABELS[c.status], style=SHORTLIST_STYLE[c.status]),
                Text(
                    cost_text(c)
                    + (" · sample" if c.illustrative else "")
                    + (" · re-check" if c.price_recheck else ""),
                    justify="right",
                ),
                Text(f"{offer} · {c.offer.provider}"),
                Text(why),
                key=c.offer.id,
            )
        if t.row_count:
            t.move_cursor(row=min(cursor, t.row_count - 1))
        self._show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "shortlist-table":
            self.selected = event.row_key.value
            self._show_detail()
            self.post_message(CandidateSelected(self.selected))

    def _show_detail(self) -> None:
        if self.shortlist is None:
            return
        by_id = {c.offer.id: c for c in self.shortlist.candidates}
        c = by_id.get(self.selected) or (
            self.shortlist.candidates[0] if self.shortlist.candidates else None
        )
        if c is not None:
            self.query_one("#candidate-detail", Static).update(candidate_detail(c, self.unit))


def sl_heading(sl) -> str:
    fits = len(sl.with_status("fit"))
    verify = len(sl.with_status("needs_verification"))
    excluded = len(sl.with_status("excluded"))
    return (
        f"{fits} fit (ranked), {verify} need verification, {excluded} excluded · "
        f"campaign {sl.days:g} day(s), {sl.days_source}"
    )
