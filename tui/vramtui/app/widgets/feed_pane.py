"""The live feed: per GPU a memory bar (used, reserved, free against the declared total) with
the spec's worst-stage estimate drawn on it, a history sparkline, the process table, and the
peaks of the stages the user marks."""

from __future__ import annotations

from collections import deque

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, DataTable, Label, Select, Static

from vramtui.ledger.items import STAGE_LABELS
from vramtui.safe_text import safe_line
from vramtui.units import format_bytes, format_bytes_readable

SPARK = "▁▂▃▄▅▆▇█"
COMPACT_ABOVE = 8  # more GPUs than this: one line each
MAX_PROCESS_ROWS = 64  # the largest processes by GPU memory
HISTORY = 60
STATE_STYLE = {"live": "green", "connecting": "yellow", "stale": "yellow", "failed": "red"}


class FeedRequest(Message):
    def __init__(self, action: str, value: object = None) -> None:
        super().__init__()
        self.action = action  # mark | stop | store | start
        self.value = value


def _size(n: int | None, unit: str) -> str:
    if n is None:
        return "n/a"
    return f"{n:,} B" if unit == "bytes" else format_bytes_readable(n, unit)


def memory_bar(
    total: int, used: int | None, reserved: int | None, estimate: int | None, width: int = 40
) -> Text:
    """[used █ | reserved ▒ | free ░] with the estimate marked ┃ (where it falls); built from
    runs of one style each, so a screen of bars stays cheap to draw."""
    u = min(width, round((used or 0) / total * width)) if total else 0
    r = min(width - u, round((reserved or 0) / total * width)) if total else 0
    cells = "█" * u + "▒" * r + "░" * (width - u - r)
    styles = ["bold green" if (used or 0) < 0.9 * total else "bold red", "magenta", "dim"]
    kinds = [0] * u + [1] * r + [2] * (width - u - r)
    mark = None
    if estimate is not None and total:
        mark = min(width - 1, round(estimate / total * width))
    bar = Text("[")
    start = 0
    for i in range(1, width + 1):
        if i == width or kinds[i] != kinds[start] or i == mark or start == mark:
            if start == mark:
                bar.append("┃", "bold yellow")
            else:
                bar.append(cells[start:i], styles[kinds[start]])
            start = i
    bar.append("]")
    return bar


def sparkline(values) -> Text:
    vals = [v for v in values if v is not None]
    if not vals:
        return Text("")
    top = max(vals) or 1
    return Text("".join(SPARK[min(7, int(v / top * 7))] for v in vals), style="cyan")


class FeedPane(Vertical):
    BINDINGS = [Binding("ctrl+b", "mark", "Mark stage", id="feed.mark")]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history: dict[tuple[str, int], deque] = {}
        self._rows_shown: tuple = ()

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

    def _show_peaks(self, tracker, unit: str) -> None:
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
        t = Table(title="peaks per marked stage (measured, NVML used)", title_justify="left")
        for col in ("stage", "host", "GPU", "peak used", "samples"):
            t.add_column(col)
        for (stage, host, gpu), p in sorted(tracker.peaks.items()):
            t.add_row(
                STAGE_LABELS[stage], host, str(gpu), _size(p.used_peak_bytes, unit), str(p.samples)
            )
        self.query_one("#feed-peaks", Static).update(t)


__all__ = ["FeedPane", "FeedRequest", "format_bytes"]
