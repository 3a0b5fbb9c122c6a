"""The Fit tab: `vramtui fit` for the current spec on the compare card. For each variable, the
others held: the largest value that fits with the margin, the stage that binds, the next value
up and its overflow; when the spec does not fit, the single changes that make it fit.

A fit search is tens of ledger estimates (tens to hundreds of milliseconds): it runs only while
the tab is shown, after the edits have settled (FIT_DEBOUNCE_S), in a thread, so typing never
waits for it. The report holds bytes: a change of display unit redraws it without a search.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Label, Select, Static

from vramtui.errors import VramtuiError
from vramtui.fit_capacity import VERDICT_WORDS
from vramtui.fit_render import (
    STATUS_STYLE,
    changes_renderable,
    fit_foot,
    fit_head,
    fit_why_lines,
    result_cells,
)
from vramtui.render import unit_label

FIT_DEBOUNCE_S = 0.3  # the search starts this long after the last change it follows
COMPUTING = "computing the fit search (estimated figures)..."
COLUMNS = (
    ("variable", "variable"),
    ("now", "now"),
    ("best", "largest that fits"),
    ("stage", "binds at"),
    ("next", "next up"),
    ("overflow", "overflow"),
    ("answer", "answer"),
)


class FitCardChosen(Message):
    """The user picked another card in the Fit tab: it becomes the compare card."""

    def __init__(self, gpu_id: str) -> None:
        super().__init__()
        self.gpu_id = gpu_id


class FitPane(Vertical):
    def __init__(self, gpus: dict, catalog=None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gpus = gpus  # id -> catalogue Gpu
        self.catalog = catalog  # for the bigger cards among the single changes
        self.results = None
        self.unit = "gib"
        self.gpu_id: str | None = None
        self.report = None  # the last FitReport shown, or the one line saying why none
        self._shown_key: tuple | None = None  # (spec, estimate, card) of `report`
        self._drawn: tuple | None = None  # (key, unit) on screen
        self._running_key: tuple | None = None  # what the search in flight is for
        self._timer = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="fit-row"):
            yield Label("card ")
            yield Select(
                [(g.name, g.id) for g in sorted(self.gpus.values(), key=lambda g: g.id)],
                id="fit-gpu",
                allow_blank=True,
                compact=True,
            )
            yield Label(" (the Sizing tab's compare card)", classes="fit-hint")
        yield Static(id="fit-status", markup=False)
        yield DataTable(id="fit-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="fit-detail"):
            yield Static(id="fit-changes")
            yield Static(id="fit-head", markup=False)
            yield Static(id="fit-why", markup=False)
            yield Static(id="fit-foot", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#fit-table", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)

    # ------------------------------------------------------------------ inputs

    def show(self, results, unit: str, gpu_id: str | None) -> None:
        """The spec, display unit and card to show: redraws now when only the unit changed,
        else searches again (debounced) once the tab is visible."""
        self.results, self.unit = results, unit
        if gpu_id is not None and gpu_id in self.gpus:
            self.gpu_id = gpu_id
            select = self.query_one("#fit-gpu", Select)
            if select.value != gpu_id:
                select.value = gpu_id
        self.refresh_fit()

    def refresh_fit(self) -> None:
        """Show the report when it is current; otherwise ask for a search (visible only)."""
        if self.results is None:
            return
        if self.gpu_id is None:
            self._say("no card to fit on: the catalogue lists none")
            return
        if self._wanted_key() == self._shown_key:
            if self._drawn != (self._shown_key, self.unit):
                self._draw()
            return
        if not self.visible_now():
            return  # searched when the tab is shown
        if self._drawn is not None:
            self._clear()  # no figure of another spec or card stays on screen
        self._say(COMPUTING)
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(FIT_DEBOUNCE_S, self._start_search)

    def visible_now(self) -> bool:
        """The pane is on screen: its tab is the active one (hidden tabs are display: none)."""
        return self.is_attached and all(
            w.display for w in self.ancestors_with_self if isinstance(w, Widget)
        )

    @property
    def computing(self) -> bool:
        return self._wanted_key() != self._shown_key

    def _wanted_key(self) -> tuple | None:
        if self.results is None or self.gpu_id is None:
            return None
        return (self.results.spec, self.results.estimate, self.gpu_id)

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id != "fit-gpu":
            return
        event.stop()
        value = event.value
        if value is Select.NULL or value not in self.gpus or value == self.gpu_id:
            return
        self.gpu_id = value
        self.post_message(FitCardChosen(value))
        self.refresh_fit()

    # ------------------------------------------------------------------ the search

    def _start_search(self) -> None:
        self._timer = None
        key = self._wanted_key()
        if key is None or key == self._shown_key or key == self._running_key:
            return
        if not self.visible_now():
            return
        self._running_key = key
        self._search(key, self.results, self.gpus[self.gpu_id])

    @work(thread=True, exclusive=True, group="fit-search")
    def _search(self, key: tuple, results, gpu) -> None:
        from vramtui.fit_capacity import card_capacity, spec_margin
        from vramtui.fit_search import fit_report

        try:
            outcome = fit_report(
                results.spec,
                results.arch,
                card_capacity(gpu),
                spec_margin(results.spec),
                checkpoint=results.checkpoint,
                est=results.estimate,
                catalog=self.catalog,
            )
        except VramtuiError as exc:
            outcome = str(exc)
        except Exception as exc:  # noqa: BLE001 - say it in the pane, keep the app
            outcome = f"the fit search failed ({type(exc).__name__}: {exc})"
        try:
            self.app.call_from_thread(self._searched, key, outcome)
        except RuntimeError:
            pass  # the app is closing

    def _searched(self, key: tuple, outcome) -> None:
        if key == self._running_key:
            self._running_key = None
        if key != self._wanted_key() or not self.is_attached:
            # An older spec or card: the current one is searched (or will be when shown).
            self.refresh_fit()
            return
        self.report, self._shown_key = outcome, key
        self._draw()

    # ------------------------------------------------------------------ drawing

    def _say(self, line: str) -> None:
        self.query_one("#fit-status", Static).update(Text(line, style="italic"))

    def _clear(self) -> None:
        self._drawn = None
        self.query_one("#fit-table", DataTable).clear()
        for widget_id in ("#fit-head", "#fit-changes", "#fit-why", "#fit-foot"):
            self.query_one(widget_id, Static).update("")

    def _draw(self) -> None:
        report, unit = self.report, self.unit
        self._clear()
        self._drawn = (self._shown_key, unit)
        table = self.query_one("#fit-table", DataTable)
        if isinstance(report, str):
            self.query_one("#fit-status", Static).update(Text(f"fit: {report}", style="bold red"))
            return
        v = report.verdict
        status = Text()
        status.append(f"{self.gpus[self.gpu_id].name}: ", style="bold")
        status.append(
            f"{VERDICT_WORDS.get(v.status, v.status)} as it is",
            style=f"bold {STATUS_STYLE.get(v.status, '')}",
        )
        status.append(
            f" · each variable alone, the others held · estimated, per GPU, in {unit_label(unit)}"
        )
        self.query_one("#fit-status", Static).update(status)
        for r in report.results:
            best, stage, nxt, overflow, words = result_cells(r, unit)
            table.add_row(
                r.knob.label,
                r.knob.show(r.knob.current),
                best,
                stage,
                nxt,
                overflow,
                Text(words, style=STATUS_STYLE.get(r.status, "")),
                key=r.knob.key,
            )
        changes = changes_renderable(report, unit)
        if changes is not None:
            self.query_one("#fit-changes", Static).update(changes)
        self.query_one("#fit-head", Static).update(Group(Text(""), fit_head(report, unit)))
        why = fit_why_lines(report, unit)
        if why:
            self.query_one("#fit-why", Static).update("\n".join(why))
        self.query_one("#fit-foot", Static).update(fit_foot(report, timing=False))
