"""The tick loop: device counters every `device_interval`, processes every `process_interval`.

As in dolphie, the next poll is scheduled only once the previous one and its callback are
done: polls never overlap, and a slow callback makes the loop skip the ticks it missed
instead of queueing them. Intervals below MIN_INTERVAL (nvitop's floor) are refused.

A source is anything with `host`, `open()`, `read_devices()`, `read_processes()`,
`versions()` and `close()` (NvmlSource here; the SSH feed brings its own). `open()` raising
FeedError yields an error Snapshot (nothing crashes) and is retried every `reopen_interval`.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable

from vramtui.feed.sample import FeedError, Snapshot, error_snapshot, one_line
from vramtui.limits import MAX_POLL_INTERVAL_S

MIN_INTERVAL = 0.25
DEFAULT_DEVICE_INTERVAL = 1.0
DEFAULT_PROCESS_INTERVAL = 2.0
REOPEN_INTERVAL = 5.0


def check_interval(value: float, what: str = "--interval") -> float:
    """`value` as seconds, or FeedError (one line) when it is below MIN_INTERVAL."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise FeedError(f"{what} must be a number of seconds, got {value!r}") from None
    if not value >= MIN_INTERVAL:  # NaN fails too
        raise FeedError(
            f"{what} {value:g} s is below the {MIN_INTERVAL:g} s floor: NVML counters do not "
            f"refresh faster and polling costs CPU; use {MIN_INTERVAL:g} s or more"
        )
    if value > MAX_POLL_INTERVAL_S:  # inf too
        raise FeedError(
            f"{what} {value:g} s is above vramtui's limit of {MAX_POLL_INTERVAL_S:g} s; "
            f"use {MAX_POLL_INTERVAL_S:g} s or less"
        )
    return value


class Poller:
    def __init__(
        self,
        source,
        device_interval: float = DEFAULT_DEVICE_INTERVAL,
        process_interval: float = DEFAULT_PROCESS_INTERVAL,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        reopen_interval: float = REOPEN_INTERVAL,
    ):
        self.source = source
        self.device_interval = check_interval(device_interval, "--interval")
        self.process_interval = check_interval(process_interval, "--process-interval")
        self.clock = clock
        self.wall_clock = wall_clock
        self.reopen_interval = reopen_interval
        self._next_process: float | None = None  # None: due at the next poll
        self._next_open: float | None = None
        self._error: str | None = None
        self._opened = False
        self.polls = 0
        self.skipped_ticks = 0

    def poll(self, now: float | None = None) -> Snapshot:
        """One tick at monotonic time `now`: devices always, processes when due."""
        now = self.clock() if now is None else now
        self.polls += 1
        host = getattr(self.source, "host", None) or "localhost"
        stamp = round(self.wall_clock(), 3)
        if not self._ensure_open(now):
            return error_snapshot(host, stamp, self._error or "the feed is not open")
        try:
            gpus = tuple(self.source.read_devices())
            notes = list(getattr(self.source, "notes", ()))
            processes = None
            unread: tuple[int, ...] = ()
            if self._processes_due(now):
                processes = tuple(self.source.read_processes())
                notes += getattr(self.source, "notes", ())
                unread = tuple(getattr(self.source, "unread_process_gpus", ()))
                self._next_process = now + self.process_interval
            versions = self.source.versions()
        except FeedError as exc:  # the driver went away: report, reopen later
            self._fail(now, str(exc))
            return error_snapshot(host, stamp, self._error)
        return Snapshot(
            host=host,
            time=stamp,
            gpus=gpus,
            processes=processes,
            driver_version=versions.get("driver_version"),
            nvml_version=versions.get("nvml_version"),
            cuda_driver_version=versions.get("cuda_driver_version"),
            notes=tuple(notes),
            unread_process_gpus=unread,
        )

    def _processes_due(self, now: float) -> bool:
        # Half a device tick of slack, so that a tick arriving a little early is not put off
        # by a whole interval (1 s ticks, 2 s processes: processes on every second tick).
        return self._next_process is None or now + self.device_interval / 2 >= self._next_process

    def _ensure_open(self, now: float) -> bool:
        if self._opened:
            return True
        if self._next_open is not None and now < self._next_open:
            return False
        try:
            self.source.open()
        except FeedError as exc:
            self._fail(now, str(exc))
            return False
        self._opened = True
        self._error = None
        self._next_open = None
        self._next_process = None
        return True

    def _fail(self, now: float, reason: str) -> None:
        self._opened = False
        self._error = one_line(reason)
        self._next_open = now + self.reopen_interval
        with contextlib.suppress(Exception):  # the error already says what failed
            self.source.close()

    def close(self) -> None:
        self._opened = False
        self.source.close()

    def run(
        self,
        callback: Callable[[Snapshot], object],
        stop: threading.Event,
        *,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        """Poll, call back, sleep until the next tick; until `stop` is set. Ticks that a slow
        poll or callback overran are skipped (counted in `skipped_ticks`), never queued.
        `wait(seconds)` defaults to stop.wait; tests pass a fake that advances a fake clock."""
        wait = stop.wait if wait is None else wait
        interval = self.device_interval
        next_tick = self.clock()
        while not stop.is_set():
            callback(self.poll(self.clock()))
            if stop.is_set():
                break
            next_tick += interval
            now = self.clock()
            if now >= next_tick:
                missed = math.floor((now - next_tick) / interval) + 1
                self.skipped_ticks += missed
                next_tick += missed * interval
            wait(next_tick - now)
