"""The Feed tab's grouped table for fleets: one summary row per host (or pod, or job), the
GPUs of an expanded group under it, in risk order.

Bounded redraw: each poll builds a tuple of plain values per row (cheap, no renderables) and
compares it with the one shown; only rows whose values changed get new cells
(`DataTable.update_cell`), rows that appeared or went are added or removed, and a changed order
is applied with one `DataTable.sort` (rows are not rebuilt). Columns have fixed widths, so no
cell is measured, and the DataTable draws only the lines on screen.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist

from vramtui.app.widgets.feed_draw import _size, memory_bar
from vramtui.feed.fleet import FleetGpu, FleetGroup
from vramtui.safe_text import safe_line

EXPAND_UP_TO = 4  # this many groups or fewer are shown expanded by default
REBUILD_ABOVE = 0.5  # more than this share of the rows gone: clear and add instead of removing
COLUMNS = (  # (key, header, width): 101 cells and their padding fit a 120-column terminal
    ("group", "group", 20),
    ("gpus", "GPUs", 4),
    ("worst", "worst GPU", 14),
    ("used", "used/total", 17),
    ("bar", "bar ┃est", 12),
    ("margin", "vs estimate", 14),
    ("state", "state", 20),
)


def used_of_total(used: int | None, total: int | None, unit: str) -> str:
    """ "169.04/640.00 GiB": the unit once when both sides share it."""
    a, b = _size(used, unit), _size(total, unit)
    head, _, suffix = a.rpartition(" ")
    if head and b.endswith(" " + suffix):
        return f"{head}/{b}"
    return f"{a}/{b}"


def _margin_cell(margin: int | None, unit: str) -> Text:
    if margin is None:
        return Text("n/a", style="dim")
    if margin > 0:
        return Text(f"+{_size(margin, unit)} over", style="bold red")
    return Text(f"{_size(-margin, unit)} under", style="green")


def _pct(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{fraction * 100:.0f}%"


def _bar(g: FleetGpu | None) -> Text:
    if g is None or not g.total_bytes:
        return Text("")
    return memory_bar(g.total_bytes, g.used_bytes, None, g.estimate_bytes, width=10)


def _state_cell(stale: str | None) -> Text:
    if stale is None:
        return Text("live", style="green")
    return Text(f"stale: {safe_line(stale)}", style="yellow")


def group_values(group: FleetGroup, expanded: bool) -> tuple:
    """What a summary row shows, as plain values: equal tuples draw the same row."""
    w = group.worst
    worst = (w.host, w.index, w.used_bytes, w.total_bytes, w.estimate_bytes) if w else None
    return (
        group.label,
        expanded,
        len(group.gpus),
        worst,
        group.used_bytes,
        group.total_bytes,
        group.over_bytes,
        group.stale_reason,
    )


def gpu_values(g: FleetGpu, stale: str | None) -> tuple:
    return (g.host, g.index, g.name, g.used_bytes, g.total_bytes, g.estimate_bytes, stale)


class FleetTable(DataTable):
    """Rows are keyed "g\\0<group key>" for a summary and "u\\0<host>\\0<index>" for a GPU."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._shown: dict[str, tuple] = {}  # row key -> the values it shows
        self._order: list[str] = []
        self._first_cell: dict[str, Text] = {}  # row key -> its first cell (the sort handle)
        self.updated_rows = 0  # rows given new cells by the last refresh (for the bench)
        self.group_of: dict[str, str] = {}  # row key -> the key of its group

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    # ------------------------------------------------------------------ cells

    def _group_cells(self, group: FleetGroup, values: tuple, unit: str) -> list:
        expanded = values[1]
        w = group.worst
        label = Text(("▾ " if expanded else "▸ ") + safe_line(group.label), style="bold")
        if w is None:
            worst = Text("n/a", style="dim")
        else:
            where = f"GPU {w.index}" if group.kind == "host" else safe_line(f"{w.host}:{w.index}")
            worst = Text(f"{where} {_pct(w.fraction)}")
        return [
            label,
            Text(str(len(group.gpus)), justify="right"),
            worst,
            Text(used_of_total(group.used_bytes, group.total_bytes, unit), justify="right"),
            _bar(w),
            _margin_cell(group.over_bytes, unit),
            _state_cell(group.stale_reason),
        ]

    def _gpu_cells(self, g: FleetGpu, stale: str | None, unit: str) -> list:
        return [
            Text(f"  └ {safe_line(g.host)} GPU {g.index}"),
            Text(""),
            Text(safe_line(g.name or "n/a"), style="dim"),
            Text(used_of_total(g.used_bytes, g.total_bytes, unit), justify="right"),
            _bar(g),
            _margin_cell(g.margin_bytes, unit),
            _state_cell(stale) if stale else Text(_pct(g.fraction)),
        ]

    # ------------------------------------------------------------------ refresh

    def show_groups(self, groups: list[FleetGroup], expanded: set[str], unit: str) -> None:
        """Show `groups` in their order, the GPUs of those whose key is in `expanded` under
        them, touching only rows whose values changed."""
        wanted: list[tuple[str, tuple, object]] = []
        group_of: dict[str, str] = {}
        for group in groups:
            is_open = group.key in expanded
            key = f"g\0{group.key}"
            wanted.append((key, group_values(group, is_open), group))
            group_of[key] = group.key
            if is_open:
                for g in group.gpus:
                    key = f"u\0{g.host}\0{g.index}"
                    wanted.append((key, gpu_values(g, group.stale_reason), g))
                    group_of[key] = group.key
        self.group_of = group_of
        keys = [k for k, _, _ in wanted]
        gone = self._shown.keys() - set(keys)
        if gone and len(gone) > REBUILD_ABOVE * len(self._shown):
            self.clear()
            self._shown.clear()
            self._first_cell.clear()
            self._order = []
        else:
            for key in gone:
                self.remove_row(key)
                del self._shown[key]
                del self._first_cell[key]
        updated = 0
        written = False
        added: list[tuple[str, list]] = []
        for key, values, item in wanted:
            old = self._shown.get(key)
            if old == values:
                continue
            cells = (
                self._group_cells(item, values, unit)
                if key[0] == "g"
                else self._gpu_cells(item, values[-1], unit)
            )
            self._shown[key] = values
            self._first_cell[key] = cells[0]
            updated += 1
            if old is None:
                added.append((key, cells))
                continue
            self._set_row(key, cells)
            written = True
        if written:
            self._update_count += 1  # one invalidation for all rows written in place
            self.refresh()
        for key, cells in added:
            self.add_row(*cells, key=key)
        if keys != self._order or added:
            rank = {id(self._first_cell[k]): i for i, k in enumerate(keys)}
            cursor_key = self._cursor_key()
            if keys != self._ordered_keys():
                self.sort("group", key=lambda cell: rank[id(cell)])
            self._order = keys
            if cursor_key is not None and cursor_key in self._shown:
                self.move_cursor(row=self.get_row_index(cursor_key), scroll=False)
        self.updated_rows = updated

    def _set_row(self, key: str, cells: list) -> None:
        """Replace a row's cells in place. `update_cell` repaints the table once per cell
        (thousands of refreshes at fleet scale); this writes the row's cell dict, which is
        what `update_cell` does, and `show_groups` invalidates the render caches once."""
        row = self._data.get(key)  # keyed by RowKey, which hashes and compares as its str
        if row is None:  # pragma: no cover - only if DataTable's storage changes
            for (col, _, _), cell in zip(COLUMNS, cells, strict=True):
                self.update_cell(key, col, cell)
            return
        for (col, _, _), cell in zip(COLUMNS, cells, strict=True):
            row[col] = cell

    def _ordered_keys(self) -> list[str]:
        return [row.key.value for row in self.ordered_rows]

    def _cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except CellDoesNotExist:
            return None


__all__ = ["EXPAND_UP_TO", "FleetTable", "gpu_values", "group_values"]
