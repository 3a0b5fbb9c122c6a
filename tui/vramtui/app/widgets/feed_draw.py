"""Drawing helpers of the feed pane: sizes in the chosen unit, the memory bar, the sparkline."""

from __future__ import annotations

from rich.text import Text

from vramtui.units import format_bytes_readable

SPARK = "▁▂▃▄▅▆▇█"


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


__all__ = ["SPARK", "memory_bar", "sparkline"]
