"""The live feed: per GPU a memory bar (used, reserved, free against the declared total) with
the spec's worst-stage estimate drawn on it, a history sparkline, the process table, and the
peaks of the stages the user marks.

Past `GROUP_ABOVE_HOSTS` hosts the pane shows a fleet instead: one summary row per host (or
pod, or job) in risk order, a filter (`/`), groups expanded with enter (`e`: all), grouping by
pod or host with `g` when the source labels pods (feed/fleet.py, widgets/feed_fleet.py)."""

from __future__ import annotations

from collections import deque

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Label, Select, Static

from vramtui.app.widgets.feed_draw import _size, memory_bar, sparkline
from vramtui.app.widgets.feed_fleet import EXPAND_UP_TO, FleetTable
from vramtui.feed.fleet import GROUP_ABOVE_HOSTS, build_fleet, filter_groups, has_pod_labels
from vramtui.ledger.items import STAGE_LABELS
from vramtui.safe_text import safe_line
from vramtui.units import format_bytes

COMPACT_ABOVE = 8  # more GPUs than this: one line each
MAX_PROCESS_ROWS = 64  # fleet view: the largest processes of the expanded groups
MAX_PEAK_ROWS = 32  # fleet view: the highest stage peaks
MAX_FILTER_CHARS = 128  # fleet view: the filter box (longer than any host, pod or job name)
HISTORY = 60
STATE_STYLE = {"live": "green", "connecting": "yellow", "stale": "yellow", "failed": "red"}


class FeedRequest(Message):
    def __init__(self, action: str, value: object = None) -> None:
        super().__init__()
        self.action = action  # mark | stop | store | start
        self.value = value


class FeedPane(Vertical):
    BINDINGS = [  # noqa: RUF012 - Textual's own convention
        Binding("ctrl+b", "mark", "Mark stage", id="feed.mark"),
        Binding("slash", "filter", "Filter", id="feed.filter"),
        Binding("e", "expand_all", "Expand all", id="feed.expand_all"),
        Binding("g", "group_by", "Group by", id="feed.group_by"),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history: dict[tuple[str, int], deque] = {}
        self.fleet = False  # the grouped view is on
        self.filter_text = ""
        self.group_by = "pod"  # used when the source labels pods or jobs; else by host
        self._expanded: set[str] = set()  # groups opened by the user
        self._collapsed: set[str] = set()  # groups closed by the user
        self._last: tuple | None = None  # the arguments of the last show(), for redraws
        self._procs_shown: tuple | None = None
        self._head_shown: Text | None = None  # the fleet view's header, redrawn when it changes
        self._peaks_shown: tuple | None = None
        self._labelled = False  # the source labels pods or jobs: grouping by them is offered
        self.groups_shown: list = []  # the fleet view's groups after the filter, in risk order

    def compose(self) -> ComposeResult:
        yield Static("The feed starts when this tab is first shown.", id="feed-header")
        with Horizontal(id="feed-controls"):
            yield Label("stage ")
            yield Select(
                [], id="feed-stage", allow_blank=True, compact=True, prompt="(choose a stage)"
            )
            yield Button("Mark (ctrl+b)", id="feed-mark", compact=True, variant="primary")
            yield Button("End marking", id="feed-stop", compact=True)
            yield Button("Store peaks as measured", id="feed-store", compact=True)
        with Horizontal(id="feed-fleet-bar"):
            yield Input(
                placeholder="filter: part of a host, pod or job name (/)",
                id="feed-filter",
                compact=True,
                max_length=MAX_FILTER_CHARS,
            )
            yield Label(" enter: open or close a group · e: all", id="feed-fleet-keys")
        yield FleetTable(id="feed-fleet")
        with VerticalScroll(id="feed-body"):
            yield Static(id="feed-gpus")
            yield DataTable(id="feed-procs", cursor_type="row", zebra_stripes=True)
            yield Static(id="feed-peaks")

    def on_mount(self) -> None:
        t = self.query_one("#feed-procs", DataTable)
        for key, label in (
            ("host", "host"),
            ("gpu", "GPU"),
            ("pid", "PID"),
            ("user", "user"),
            ("name", "process"),
            ("gpu_mem", "GPU memory"),
            ("rss", "host RSS"),
            ("cpu", "CPU %"),
        ):
            t.add_column(label, key=key)

    def set_stages(self, stages: tuple[str, ...]) -> None:
        select = self.query_one("#feed-stage", Select)
        with select.prevent(Select.Changed):
            select.set_options([(STAGE_LABELS[s], s) for s in stages])

    def action_mark(self) -> None:
        value = self.query_one("#feed-stage", Select).value
        if value is not Select.NULL:
            self.post_message(FeedRequest("mark", value))

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in ("filter", "expand_all"):
            return self.fleet
        if action == "group_by":
            return self.fleet and self._labelled
        return True

    def action_filter(self) -> None:
        self.query_one("#feed-filter", Input).focus()

    def action_expand_all(self) -> None:
        keys = {g.key for g in self.groups_shown}
        if keys and keys <= self._open_keys():
            self._expanded -= keys
            self._collapsed |= keys
        else:
            self._expanded |= keys
            self._collapsed -= keys
        self._redraw()

    def action_group_by(self) -> None:
        self.group_by = "host" if self.group_by == "pod" else "pod"
        self._redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "feed-filter":
            event.stop()
            self.filter_text = event.value
            self._redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "feed-filter":
            event.stop()
            self.query_one("#feed-fleet", FleetTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "feed-fleet":
            return
        event.stop()
        table = self.query_one("#feed-fleet", FleetTable)
        key = table.group_of.get(event.row_key.value)
        if key is not None:
            self.toggle_group(key)

    def toggle_group(self, key: str) -> None:
        if key in self._open_keys():
            self._expanded.discard(key)
            self._collapsed.add(key)
        else:
            self._collapsed.discard(key)
            self._expanded.add(key)
        self._redraw()

    def _open_keys(self) -> set[str]:
        default = len(self.groups_shown) <= EXPAND_UP_TO
        return {
            g.key
            for g in self.groups_shown
            if g.key in self._expanded or (default and g.key not in self._collapsed)
        }

    def _redraw(self) -> None:
        if self._last is not None:
            self.show(*self._last)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "feed-mark":
            self.action_mark()
        elif event.button.id == "feed-stop":
            self.post_message(FeedRequest("stop"))
        elif event.button.id == "feed-store":
            self.post_message(FeedRequest("store"))

    # ------------------------------------------------------------------ view

    def show(self, source_label: str, statuses: dict, estimate, unit: str, tracker) -> None:
        """`statuses`: host -> (state, reason, snapshot). `estimate`: the spec's Estimate."""
        self._last = (source_label, statuses, estimate, unit, tracker)
        fleet = len(statuses) > GROUP_ABOVE_HOSTS
        if fleet != self.fleet:
            self.fleet = fleet
            self.set_class(fleet, "-fleet")
            self._procs_shown = self._head_shown = self._peaks_shown = None
            self.refresh_bindings()
        if fleet:
            self._show_fleet(source_label, statuses, estimate, unit, tracker)
            return
        head = Text()
        head.append(f"source: {safe_line(source_label)}", style="bold")
        if tracker.current:
            head.append(f"   marking stage: {STAGE_LABELS[tracker.current]}", style="yellow")
        for host, (state, reason, _) in statuses.items():
            head.append(f"\n{safe_line(host)}: ")
            head.append(state, style=STATE_STYLE.get(state, ""))
            if reason:
                head.append(f" — {safe_line(reason)}")
        self.query_one("#feed-header", Static).update(head)

        per_gpu = estimate.stage_gpu_bytes(estimate.peak_stage) if estimate else ()
        worst = STAGE_LABELS[estimate.peak_stage] if estimate else ""
        blocks = Text()
        rows = []
        n_gpus = sum(len(snap.gpus) for _, _, snap in statuses.values() if snap is not None)
        compact = n_gpus > COMPACT_ABOVE
        if compact and estimate is not None:
            blocks.append(
                f"┃ = the spec's estimate at {worst} (estimated); bars: used █, "
                "reserved ▒, free ░ (measured, NVML)\n",
                style="dim",
            )
        for host, (_, _, snap) in statuses.items():
            if snap is None:
                continue
            if snap.error:
                blocks.append(f"{host}: {snap.error}\n", style="yellow")
                continue
            if compact:
                for g in snap.gpus:
                    est = per_gpu[g.index] if g.index < len(per_gpu) else None
                    blocks.append_text(self._compact_line(host, g, est, unit, snap.time))
                rows += [(host, p) for p in snap.processes or ()]
                continue
            for g in snap.gpus:
                key = (host, g.index)
                hist = self.history.setdefault(key, deque(maxlen=HISTORY))
                if g.used_bytes is not None and (not hist or hist[-1] != (snap.time, g.used_bytes)):
                    hist.append((snap.time, g.used_bytes))
                est = per_gpu[g.index] if g.index < len(per_gpu) else None
                blocks.append(f"{host} GPU {g.index} {g.name or 'n/a'}\n", style="bold")
                if g.total_bytes:
                    blocks.append_text(
                        memory_bar(g.total_bytes, g.used_bytes, g.reserved_bytes, est)
                    )
                blocks.append(
                    f" used {_size(g.used_bytes, unit)}"
                    + (
                        f" · reserved {_size(g.reserved_bytes, unit)}"
                        if g.memory_info_version == 2
                        else " · reserved n/a (NVML v1)"
                    )
                    + f" · free {_size(g.free_bytes, unit)} · total {_size(g.total_bytes, unit)}"
                    + " (measured, NVML)\n"
                )
                if est is not None:
                    blocks.append(
                        f"┃ estimate at {worst}: {_size(est, unit)} (estimated)   ", style="yellow"
                    )
                un = snap.unattributed_bytes(g.index)
                if un is not None:
                    blocks.append(f"unattributed {_size(un, unit)}   ")
                util = f"{g.util_percent}%" if g.util_percent is not None else "n/a"
                temp = f"{g.temperature_c} °C" if g.temperature_c is not None else "n/a"
                power = (
                    f"{g.power_w:.0f}/{g.power_limit_w:.0f} W"
                    if g.power_w is not None and g.power_limit_w
                    else "n/a"
                )
                blocks.append(f"util {util} · {temp} · {power}\n")
                blocks.append_text(sparkline(v for _, v in hist))
                blocks.append("\n")
            for note in snap.notes:
                blocks.append(f"{host}: {note}\n", style="yellow")
            for p in snap.processes or ():
                rows.append((host, p))
        self.query_one("#feed-gpus", Static).update(blocks)
        table = self.query_one("#feed-procs", DataTable)
        if rows or not any(s is not None and s.processes is None for _, _, s in statuses.values()):
            table.clear()
            for host, p in rows:
                table.add_row(
                    host,
                    str(p.gpu_index),
                    str(p.pid) + ("" if p.visible else " (host PID)"),
                    p.user or "n/a",
                    Text(p.name or "n/a"),
                    Text(_size(p.used_bytes, unit), justify="right"),
                    Text(_size(p.rss_bytes, unit), justify="right"),
                    f"{p.cpu_percent:.0f}" if p.cpu_percent is not None else "n/a",
                )
        self._show_peaks(tracker, unit)

    def _show_fleet(self, source_label: str, statuses: dict, estimate, unit: str, tracker) -> None:
        """Hundreds of hosts: grouped summary rows in risk order (see feed/fleet.py), the
        processes and stage peaks of what is open, bounded."""
        stage = None
        if estimate is not None:
            stage = tracker.current if tracker.current in estimate.stages else estimate.peak_stage
        per_gpu = estimate.stage_gpu_bytes(stage) if stage else ()
        labelled = has_pod_labels(statuses)
        if labelled != self._labelled:
            self._labelled = labelled
            self.refresh_bindings()
        by = self.group_by if labelled else "host"
        groups = build_fleet(statuses, per_gpu, by)
        shown = filter_groups(groups, self.filter_text)
        self.groups_shown = shown
        open_keys = self._open_keys()
        self.query_one("#feed-fleet", FleetTable).show_groups(shown, open_keys, unit)

        n_gpus = sum(len(g.gpus) for g in groups)
        n_stale = sum(
            1
            for state, _, snap in statuses.values()
            if state != "live" or snap is None or snap.error
        )
        n_over = sum(1 for g in groups if g.is_over)
        head = Text()
        head.append(f"source: {safe_line(source_label)}", style="bold")
        if tracker.current:
            head.append(f"   marking stage: {STAGE_LABELS[tracker.current]}", style="yellow")
        head.append(f"\n{len(statuses)} hosts · {n_gpus} GPUs · ")
        head.append(
            f"{n_over} group(s) over the estimate"
            + (f" at {STAGE_LABELS[stage]}" if stage else ""),
            style="bold red" if n_over else "green",
        )
        head.append(" · ")
        head.append(f"{n_stale} host(s) not live", style="yellow" if n_stale else "")
        kind = "pod or job" if by == "pod" else "host"
        head.append(f"\ngrouped by {kind}, riskiest first (over the estimate, fullest, stale)")
        if self.filter_text.strip():
            head.append(
                f" · filter {safe_line(self.filter_text.strip())!r}: "
                f"{len(shown)} of {len(groups)} groups",
                style="cyan",
            )
        if head != self._head_shown:  # an auto-height Static relayouts the screen on update
            self._head_shown = head
            self.query_one("#feed-header", Static).update(head)

        rows = []
        for g in shown:
            if g.key not in open_keys:
                continue
            on = {(x.host, x.index) for x in g.gpus}
            for host in g.hosts:
                snap = statuses[host][2]
                for p in (snap.processes or ()) if snap is not None else ():
                    if (host, p.gpu_index) in on:
                        rows.append((host, p))
        rows.sort(key=lambda hp: -(hp[1].used_bytes or 0))
        rows = rows[:MAX_PROCESS_ROWS]
        key = (unit, tuple((h, p) for h, p in rows))
        if key != self._procs_shown:
            self._procs_shown = key
            self._fill_processes(rows, unit)
        peaks_key = (
            unit,
            tuple((k, p.used_peak_bytes, p.samples) for k, p in tracker.peaks.items()),
        )
        if peaks_key != self._peaks_shown:
            self._peaks_shown = peaks_key
            self._show_peaks(tracker, unit, limit=MAX_PEAK_ROWS)

    def _fill_processes(self, rows, unit: str) -> None:
        table = self.query_one("#feed-procs", DataTable)
        table.clear()
        for host, p in rows:
            table.add_row(
                safe_line(host),
                str(p.gpu_index),
                str(p.pid) + ("" if p.visible else " (host PID)"),
                Text(safe_line(p.user or "n/a")),
                Text(safe_line(p.name or "n/a")),
                Text(_size(p.used_bytes, unit), justify="right"),
                Text(_size(p.rss_bytes, unit), justify="right"),
                f"{p.cpu_percent:.0f}" if p.cpu_percent is not None else "n/a",
            )

    def _compact_line(self, host: str, g, est, unit: str, t: float) -> Text:
        """One line per GPU when many are shown (16 hosts x 8 GPUs stay responsive)."""
        key = (host, g.index)
        hist = self.history.setdefault(key, deque(maxlen=HISTORY))
        if g.used_bytes is not None and (not hist or hist[-1] != (t, g.used_bytes)):
            hist.append((t, g.used_bytes))
        line = Text(f"{host} {g.index} ")
        if g.total_bytes:
            line.append_text(
                memory_bar(g.total_bytes, g.used_bytes, g.reserved_bytes, est, width=20)
            )
        line.append(f" {_size(g.used_bytes, unit)}/{_size(g.total_bytes, unit)}")
        util = f"{g.util_percent}%" if g.util_percent is not None else "n/a"
        line.append(f" {util} ")
        line.append_text(sparkline(v for _, v in list(hist)[-16:]))
        line.append("\n")
        return line

    def _show_peaks(self, tracker, unit: str, limit: int | None = None) -> None:
        if not tracker.peaks:
            self.query_one("#feed-peaks", Static).update(
                Text(
                    "Choose a stage and mark it (ctrl+b) when your job enters it: the peak NVML "
                    "used memory per stage per GPU is kept, and can be stored in the spec as "
                    "measured items.",
                    style="dim",
                )
            )
            return
        title = "peaks per marked stage (measured, NVML used)"
        peaks = sorted(tracker.peaks.items())
        if limit is not None and len(peaks) > limit:
            title += f": the {limit} highest of {len(peaks)}, all kept for storing"
            peaks = sorted(peaks, key=lambda kv: -kv[1].used_peak_bytes)[:limit]
        t = Table(title=title, title_justify="left")
        for col in ("stage", "host", "GPU", "peak used", "samples"):
            t.add_column(col)
        for (stage, host, gpu), p in peaks:
            t.add_row(
                STAGE_LABELS[stage], host, str(gpu), _size(p.used_peak_bytes, unit), str(p.samples)
            )
        self.query_one("#feed-peaks", Static).update(t)


__all__ = ["FeedPane", "FeedRequest", "format_bytes"]
