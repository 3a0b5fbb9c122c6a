"""The headroom ledger: items with status and stages, totals, the basis of the selected item,
and the worst stage drawn against a card's usable memory."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, DataTable, Label, Select, Static

from vramtui.app.messages import CompareChanged
from vramtui.ledger.items import STAGE_LABELS
from vramtui.render import STATUS_MARK, STATUS_STYLE, totals_table, unit_label, usage_bar
from vramtui.unit_text import in_unit
from vramtui.units import format_bytes, format_bytes_readable

SIZE_WIDTH, STATUS_WIDTH = 13, 11  # the ledger table's fixed columns
ITEM_MIN_WIDTH = 24  # the item column never narrower than this


def _size(n: int, unit: str) -> str:
    return format_bytes(n, "bytes") if unit == "bytes" else format_bytes_readable(n, unit)


class LedgerPane(Vertical):
    def __init__(self, gpus: dict, compare: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gpus = gpus  # id -> catalogue Gpu
        self.first_compare = compare if compare in gpus else None
        self.results = None
        self.unit = "gib"
        self.selected_key: str | None = None
        self.dry_run = None  # (spec traced, DryRunResult or the error's one line)

    def compose(self) -> ComposeResult:
        yield Static(id="ledger-title", markup=False)
        yield Static(id="ledger-flag", markup=False)
        table = DataTable(id="ledger-table", cursor_type="row", zebra_stripes=True)
        yield table
        with VerticalScroll(id="ledger-detail"):
            yield Static(id="ledger-basis", markup=False)
            with Horizontal(id="bar-row"):
                yield Label("compare with ")
                yield Select(
                    [(g.name, g.id) for g in sorted(self.gpus.values(), key=lambda g: g.id)],
                    id="bar-gpu",
                    # no catalogue (no GPUs): a blank Select, since an empty one that cannot be
                    # blank raises EmptySelectError
                    allow_blank=not self.gpus,
                    compact=True,
                    value=(
                        self.first_compare
                        or ("rtx-4090" if "rtx-4090" in self.gpus else None)
                        or next(iter(self.gpus), Select.NULL)
                    ),
                )
                yield Button(
                    "Dry run",
                    id="dry-run",
                    compact=True,
                    tooltip="Trace the real transformers model code on the meta device (no GPU, "
                    "no weights): traced estimates of the live tensor bytes per stage, beside "
                    "the ledger (not measurements)",
                )
            yield Static(id="ledger-bar")
            yield Static(id="ledger-totals")
            yield Static(id="ledger-measured")
            yield Static(id="ledger-plan")
            yield Static(id="ledger-dryrun")
            yield Static(id="ledger-notes", markup=False)

    def on_mount(self) -> None:
        self._add_columns(self.query_one("#ledger-table", DataTable), ITEM_MIN_WIDTH)

    def _add_columns(self, table: DataTable, item_width: int) -> None:
        table.add_column(unit_label(self.unit), key="size", width=SIZE_WIDTH)
        table.add_column("item", key="item", width=item_width)
        table.add_column("status", key="status", width=STATUS_WIDTH)
        table.add_column("stages", key="stages")

    def _item_width(self, names) -> int:
        """The item column takes the room the pane has: the longest name when it fits beside
        the size and status columns, never under ITEM_MIN_WIDTH (a narrow pane scrolls the
        status and stages columns out of view; the status mark rides with the size)."""
        longest = max((cell_len(n) for n in names), default=ITEM_MIN_WIDTH)
        # one cell of padding each side of each of the four columns, and the scrollbar
        room = self.size.width - SIZE_WIDTH - STATUS_WIDTH - 2 * 4 - 2
        return max(ITEM_MIN_WIDTH, min(longest, room))

    def on_resize(self, event) -> None:
        if self.results is None:
            return
        width = self._item_width(in_unit(i.name, self.unit) for i in self.results.estimate.items)
        if self.query_one("#ledger-table", DataTable).columns["item"].width != width:
            self._fill_table()

    # ------------------------------------------------------------------ updates

    def show(self, results, unit: str) -> None:
        self.results, self.unit = results, unit
        est = results.estimate
        layout = est.layout
        title = f"{est.model_label}"
        if est.param_count:
            title += f" · {est.param_count:,} params"
        if layout.gpus > 1:
            title += (
                f" · {layout.gpus} GPUs (TP {layout.tensor_parallel}, "
                f"PP {layout.pipeline_parallel}, DP {layout.data_parallel}) · sizes on the "
                "most loaded GPU"
            )
        self.query_one("#ledger-title", Static).update(title)
        flag = self.query_one("#ledger-flag", Static)
        shortfall = getattr(results, "reserve_shortfall", None)
        flag.display = shortfall is not None
        if shortfall is not None:
            flag.update(Text(f"warning: {shortfall.line(unit)}", style="bold yellow"))
        self._fill_table()
        self.query_one("#ledger-totals", Static).update(totals_table(est, unit))
        self._show_measured(results, unit)
        self._show_dry_run()
        notes = (
            [
                "Not in any total (unknown): "
                + ", ".join(in_unit(i.name, unit) for i in est.unknown_items)
            ]
            if est.unknown_items
            else []
        )
        notes += [f"Note: {n}" for n in est.notes]
        self.query_one("#ledger-notes", Static).update("\n".join(notes))
        self._show_basis()
        self._show_bar()

    def _fill_table(self) -> None:
        """The items, one row each, with the item column as wide as the pane allows."""
        est, unit = self.results.estimate, self.unit
        layout = est.layout
        table = self.query_one("#ledger-table", DataTable)
        cursor = table.cursor_row
        width = self._item_width(in_unit(i.name, unit) for i in est.items)
        if table.columns["item"].width != width or str(table.columns["size"].label) != (
            unit_label(unit)
        ):
            table.clear(columns=True)
            self._add_columns(table, width)
        else:
            table.clear()
        for item in est.items:
            if item.is_unknown:
                size = Text("? unknown", style=STATUS_STYLE["unknown"], justify="right")
            else:
                per_gpu = item.largest_gpu_bytes(layout)
                # The status mark rides with the figure, so it shows even when a narrow
                # terminal scrolls the status column out of view.
                size = Text(f"{STATUS_MARK[item.status][0]} ", style=STATUS_STYLE[item.status])
                size.append(_size(per_gpu, unit), style="")
                size.justify = "right"
            table.add_row(
                size,
                Text(in_unit(item.name, unit), overflow="ellipsis", no_wrap=True),
                Text(STATUS_MARK[item.status], style=STATUS_STYLE[item.status]),
                Text(", ".join(STAGE_LABELS[s] for s in item.stages)),
                key=item.key,
            )
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))

    def _show_measured(self, results, unit: str) -> None:
        """Measurements beside the estimates, and the staged validation checklist."""
        from vramtui.measure.compare import compare
        from vramtui.measure.plan import staged_plan
        from vramtui.render_measure import comparisons_table, plan_table

        comparisons = compare(results.spec, results.estimate)
        measured = self.query_one("#ledger-measured", Static)
        if comparisons:
            measured.update(comparisons_table(comparisons, unit))
        else:
            measured.update(
                Text(
                    "No measurement yet: F9 imports a probe file or a vLLM log "
                    "(vramtui measure import).",
                    style="dim",
                )
            )
        self.query_one("#ledger-plan", Static).update(plan_table(staged_plan(results.spec), unit))

    # ------------------------------------------------------------------ dry run

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "dry-run":
            event.stop()
            self.start_dry_run()

    def start_dry_run(self) -> None:
        """Trace the current spec in a thread; the keyboard stays free meanwhile."""
        if self.results is None:
            return
        self.query_one("#dry-run", Button).disabled = True
        self.query_one("#ledger-dryrun", Static).update(
            Text(
                "Dry run: tracing the model code on the meta device (a traced estimate, not a "
                "measurement)...",
                style="italic",
            )
        )
        self._trace(self.results)

    @work(thread=True, exclusive=True, group="dry-run")
    def _trace(self, results) -> None:
        from vramtui.errors import VramtuiError

        try:
            from vramtui.dryrun.command import run_dry_run

            outcome = run_dry_run(results.spec, results.arch)
        except VramtuiError as exc:
            outcome = str(exc)
        except Exception as exc:  # noqa: BLE001 - a model the trace cannot run: say so, keep the app
            outcome = f"the dry run failed ({type(exc).__name__}: {exc}); the ledger stands"
        self.app.call_from_thread(self._traced, results.spec, outcome)

    def _traced(self, spec, outcome) -> None:
        self.dry_run = (spec, outcome)
        self.query_one("#dry-run", Button).disabled = False
        self._show_dry_run()
        if isinstance(outcome, str):
            # markup=False: the install hint's "[dryrun]" is text, not a markup tag
            self.app.notify(f"dry run: {outcome}", severity="error", timeout=10, markup=False)

    def _show_dry_run(self) -> None:
        widget = self.query_one("#ledger-dryrun", Static)
        if self.dry_run is None or self.results is None:
            widget.update("")
            return
        spec, outcome = self.dry_run
        if isinstance(outcome, str):
            widget.update(Text(f"Dry run: {outcome}", style="bold red"))
            return
        from rich.console import Group

        from vramtui.dryrun.command import dry_run_renderable

        parts = []
        if spec != self.results.spec:
            parts.append(
                Text(
                    "Dry run of an earlier version of the spec: press Dry run again to trace "
                    "the current one.",
                    style="bold yellow",
                )
            )
        parts.append(dry_run_renderable(outcome, self.results.estimate, self.unit))
        widget.update(Group(*parts))

    def compare_with(self, gpu_id: str) -> None:
        if gpu_id in self.gpus:
            self.query_one("#bar-gpu", Select).value = gpu_id

    @property
    def compare_id(self) -> str | None:
        """The compare card's id (None: no catalogue card)."""
        value = self.query_one("#bar-gpu", Select).value
        return value if value in self.gpus else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "ledger-table":
            self.selected_key = event.row_key.value
            self._show_basis()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "bar-gpu":
            event.stop()
            self._show_bar()
            if event.value in self.gpus:
                self.post_message(CompareChanged(event.value))

    def _show_basis(self) -> None:
        if self.results is None:
            return
        items = {i.key: i for i in self.results.estimate.items}
        item = items.get(self.selected_key) or next(iter(items.values()))
        unit = self.unit
        text = f"{in_unit(item.name, unit)} [{item.status}]: {in_unit(item.basis, unit)}"
        if item.counter:
            text += f" (counter: {item.counter})"
        if self.results.estimate.layout.gpus > 1:
            text += f" Placement: {item.distribution.description}."
        self.query_one("#ledger-basis", Static).update(text)

    def _show_bar(self) -> None:
        if self.results is None:
            return
        gid = self.query_one("#bar-gpu", Select).value
        gpu = self.gpus.get(gid)
        if gpu is None:
            return
        est = self.results.estimate
        fig = gpu.usable()
        peak = est.peak_bytes
        text = Text()
        text.append(f"worst stage ({STAGE_LABELS[est.peak_stage]}) on one {gpu.name}\n", "bold")
        text.append_text(usage_bar(peak, fig.bytes))
        text.append(
            f"  {_size(peak, self.unit)} of {_size(fig.bytes, self.unit)} "
            # the figure in the display unit only (as written, it can be raw bytes or GiB)
            f"({fig.quantity.replace('_', ' ')}{'' if fig.verified else ', unverified'})"
        )
        if peak > fig.bytes:
            text.append(f"\nover by {_size(peak - fig.bytes, self.unit)}", style="bold red")
        else:
            text.append(f"\nmargin {_size(fig.bytes - peak, self.unit)} (estimated)")
        self.query_one("#ledger-bar", Static).update(text)
