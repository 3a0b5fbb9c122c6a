"""Rich (not Textual) tables of one Snapshot, for `vramtui watch --once`."""

from __future__ import annotations

import datetime as dt

from rich.console import Group
from rich.table import Table
from rich.text import Text

from vramtui.feed.sample import Snapshot
from vramtui.units import format_bytes, format_bytes_readable

NA = "n/a"


def _gib(n: int | None) -> str:
    return NA if n is None else format_bytes(n, "gib")


def _size(n: int | None) -> str:
    return NA if n is None else format_bytes_readable(n, "gib")


def _num(value, unit: str = "", fmt: str = "{:g}") -> str:
    return NA if value is None else fmt.format(value) + unit


def _when(t: float) -> str:
    try:
        return dt.datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    except (OverflowError, OSError, ValueError):
        return f"t={t:g}"


def snapshot_renderable(s: Snapshot) -> Group:
    """GPUs (memory in GiB, n/a where the driver gave nothing), then processes, then the
    memory on each GPU that no listed process accounts for."""
    versions = ", ".join(
        f"{label} {v}"
        for label, v in (
            ("driver", s.driver_version),
            ("CUDA", s.cuda_driver_version),
            ("NVML", s.nvml_version),
        )
        if v
    )
    title = f"{s.host} · {_when(s.time)}" + (f" · {versions}" if versions else "")
    parts: list = []
    if s.error:
        parts.append(Text(title, style="bold"))
        parts.append(Text(s.error, style="bold red"))
        return Group(*parts)

    gt = Table(title=f"GPUs · measured (NVML) · {title}", title_justify="left")
    for col in ("#", "name", "used", "reserved", "free", "total", "util", "temp", "power"):
        gt.add_column(col, justify="left" if col == "name" else "right")
    v1 = False
    for g in s.gpus:
        v1 = v1 or g.memory_info_version == 1
        power = NA
        if g.power_w is not None:
            power = f"{g.power_w:.0f} W"
            if g.power_limit_w is not None:
                power += f" / {g.power_limit_w:.0f} W"
        gt.add_row(
            str(g.index),
            g.name or NA,
            _gib(g.used_bytes),
            _gib(g.reserved_bytes),
            _gib(g.free_bytes),
            _gib(g.total_bytes),
            _num(g.util_percent, " %"),
            _num(g.temperature_c, " °C"),
            power,
        )
    parts.append(gt)
    if v1:
        parts.append(
            Text(
                "memory info v1 (older driver): 'used' includes the driver's reserved "
                "carve-out, which is not reported separately",
                style="yellow",
            )
        )

    if s.processes is None:
        parts.append(Text("processes: not polled on this tick", style="dim"))
    else:
        pt = Table(title="GPU processes", title_justify="left")
        for col in ("GPU", "PID", "user", "name", "GPU memory", "RSS", "CPU"):
            pt.add_column(col, justify="left" if col in ("user", "name") else "right")
        for p in sorted(s.processes, key=lambda p: (p.gpu_index, p.pid)):
            name = p.name or NA
            if not p.visible:
                name = "n/a (PID not in this host's /proc)"
            pt.add_row(
                str(p.gpu_index),
                str(p.pid),
                p.user or NA,
                name,
                _size(p.used_bytes),
                _size(p.rss_bytes),
                _num(p.cpu_percent, " %", "{:.0f}"),
            )
        if not s.processes:
            pt.add_row("", "", "", "no processes listed", "", "", "")
        parts.append(pt)
        if any(not p.visible for p in s.processes):
            parts.append(
                Text(
                    "A PID not in this host's /proc is usually a host PID seen from inside a "
                    "container; its memory is kept in the sums.",
                    style="dim",
                )
            )
        for g in s.gpus:
            rest = s.unattributed_bytes(g.index)
            why = "" if rest is not None else " (the GPU's used memory or a process's is n/a)"
            parts.append(
                Text(
                    f"GPU {g.index}: {_gib(rest)} used but not listed for any process{why}",
                    style="dim",
                )
            )
    for note in s.notes:
        parts.append(Text(note, style="yellow"))
    return Group(*parts)
