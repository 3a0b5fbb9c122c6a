"""Who holds the GPU memory: name, user, command line, RSS and CPU% of each PID NVML lists.

psutil.Process objects are cached across polls, so cpu_percent measures the time since the
previous poll (the first sighting of a PID reads None, not psutil's meaningless 0.0).
A PID that is not in the local /proc (inside a container NVML reports host PIDs) stays in the
list with `visible=False` and its memory still counts; a process we may not inspect (another
user's, AccessDenied) stays visible with the unreadable fields None.
"""

from __future__ import annotations

import dataclasses

from vramtui.feed.sample import ProcessSample

CMDLINE_MAX_CHARS = 1000


class Attributor:
    """Fills ProcessSample's psutil fields; keep one per feed so cpu_percent spans polls."""

    def __init__(self):
        self._cache: dict[int, object] = {}  # pid -> psutil.Process

    def attribute(self, gpu_processes) -> tuple[ProcessSample, ...]:
        import psutil

        seen: set[int] = set()
        out = []
        info: dict[int, dict | None] = {}
        for p in gpu_processes:
            seen.add(p.pid)
            if p.pid not in info:
                info[p.pid] = self._inspect(psutil, p.pid)
            fields = info[p.pid]
            if fields is None:
                out.append(
                    dataclasses.replace(
                        p,
                        name=None,
                        user=None,
                        cmdline=None,
                        rss_bytes=None,
                        cpu_percent=None,
                        visible=False,
                    )
                )
            else:
                out.append(dataclasses.replace(p, visible=True, **fields))
        for pid in list(self._cache):
            if pid not in seen:
                del self._cache[pid]
        return tuple(out)

    def _process(self, psutil, pid: int):
        """The cached psutil.Process for pid, and whether it was already known (a reused PID
        is a new process: psutil compares creation times)."""
        proc = self._cache.get(pid)
        if proc is not None and proc.is_running():
            return proc, True
        proc = psutil.Process(pid)
        self._cache[pid] = proc
        return proc, False

    def _inspect(self, psutil, pid: int) -> dict | None:
        """psutil fields for pid, or None when no such process is visible here."""
        try:
            proc, known = self._process(psutil, pid)
        except psutil.NoSuchProcess:
            self._cache.pop(pid, None)
            return None
        except (psutil.AccessDenied, OSError):
            return _EMPTY.copy()
        fields = _EMPTY.copy()
        try:
            with proc.oneshot():
                fields["name"] = _call(psutil, proc.name)
                fields["user"] = _call(psutil, proc.username)
                cmd = _call(psutil, proc.cmdline)
                if cmd:
                    text = " ".join(cmd)
                    if len(text) > CMDLINE_MAX_CHARS:
                        text = text[: CMDLINE_MAX_CHARS - 3] + "..."
                    fields["cmdline"] = text
                mem = _call(psutil, proc.memory_info)
                fields["rss_bytes"] = None if mem is None else int(mem.rss)
                cpu = _call(psutil, proc.cpu_percent, None)
                fields["cpu_percent"] = cpu if known else None
        except psutil.NoSuchProcess:  # it ended while we looked (a zombie reads as fields None)
            self._cache.pop(pid, None)
            return None
        return fields


_EMPTY = {"name": None, "user": None, "cmdline": None, "rss_bytes": None, "cpu_percent": None}


def _call(psutil, fn, *args):
    try:
        return fn(*args)
    except (psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return None


_default = Attributor()


def attribute(gpu_processes) -> tuple[ProcessSample, ...]:
    """Attribute through a module-wide cache (one feed per process); a feed that runs beside
    others should keep its own Attributor."""
    return _default.attribute(gpu_processes)
