"""Recordings of the feed: JSON lines, one snapshot a line, after one header line.

    {"vramtui_feed":1,"host":"gpu-box","started":1765432100.0}
    {"schema":1,"host":"gpu-box","time":1765432100.0,"gpus":[...],"processes":[...],...}

Each line is flushed as it is written (no fsync per line), so a killed recorder loses at most
the line it was writing. Reading tolerates that truncated last line; a malformed line anywhere
else is an error naming its line number. Appending to an existing recording first cuts such a
truncated tail, so it never becomes a corrupt middle line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from vramtui.feed.sample import FeedError, Snapshot, one_line, snapshot_from_json, snapshot_to_json
from vramtui.fsutil import user_path
from vramtui.guarded_read import Unreadable, decode_json
from vramtui.limits import MAX_REPLAY_GAP_S

FORMAT_VERSION = 1
MAX_LINE_BYTES = 16 * 2**20  # one snapshot: a few KiB, even with hundreds of processes
HEADER_KEY = "vramtui_feed"


def dumps(data) -> str:
    """Compact JSON, as every feed line is written."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def snapshot_line(s: Snapshot) -> str:
    """One snapshot as one JSON line (with the newline)."""
    return dumps(snapshot_to_json(s)) + "\n"


def _check_header(data, path: Path) -> dict:
    if not isinstance(data, dict) or HEADER_KEY not in data:
        raise FeedError(f"{path} is not a vramtui feed recording (line 1 is no feed header)")
    version = data[HEADER_KEY]
    if version != FORMAT_VERSION:
        raise FeedError(
            f"{path} is a feed recording of format {version!r}; this vramtui reads format "
            f"{FORMAT_VERSION}: use the vramtui that recorded it"
        )
    return data


class Recorder:
    """Appends snapshots to `path`. The header is written with the first snapshot of a new or
    empty file (host: `host`, else that snapshot's host; started: its time)."""

    def __init__(self, path, host: str | None = None):
        self.path = user_path(path)
        self.host = host
        self.lines = 0
        self._needs_header = self._prepare()
        try:
            self._file = open(self.path, "a", encoding="utf-8", newline="\n")  # noqa: SIM115
        except OSError as exc:
            raise FeedError(
                f"cannot record to {self.path}: {one_line(exc.strerror or exc)}"
            ) from None

    def _prepare(self) -> bool:
        """Check an existing file and cut a truncated last line; True when a header is due."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return True
        except OSError as exc:
            raise FeedError(
                f"cannot record to {self.path}: {one_line(exc.strerror or exc)}"
            ) from None
        if self.path.is_dir():
            raise FeedError(f"cannot record to {self.path}: it is a directory; name a file")
        if size == 0:
            return True
        try:
            with open(self.path, "rb+") as f:
                first = f.readline(MAX_LINE_BYTES + 1)
                if not first.endswith(b"\n"):  # a header cut short: nothing else recorded
                    if first.lstrip().startswith(b'{"' + HEADER_KEY.encode()):
                        f.truncate(0)
                        return True
                    raise FeedError(f"{self.path} is not a vramtui feed recording; name a new file")
                try:
                    header = decode_json(first)
                except Unreadable:
                    header = None
                _check_header(header, self.path)
                # Cut a tail without a newline (the line a killed recorder was writing); the
                # header's newline bounds the search.
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    pos = size
                    while pos > 0:
                        step = min(4096, pos)
                        f.seek(pos - step)
                        chunk = f.read(step)
                        nl = chunk.rfind(b"\n")
                        if nl >= 0:
                            f.truncate(pos - step + nl + 1)
                            break
                        pos -= step
        except OSError as exc:
            raise FeedError(
                f"cannot record to {self.path}: {one_line(exc.strerror or exc)}"
            ) from None
        return False

    def write(self, snapshot: Snapshot) -> None:
        try:
            if self._needs_header:
                header = {
                    HEADER_KEY: FORMAT_VERSION,
                    "host": self.host or snapshot.host,
                    "started": snapshot.time,
                }
                self._file.write(dumps(header) + "\n")
                self._needs_header = False
            self._file.write(snapshot_line(snapshot))
            self._file.flush()
        except OSError as exc:
            raise FeedError(
                f"cannot record to {self.path}: {one_line(exc.strerror or exc)}"
            ) from None
        self.lines += 1

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def iter_recording(path) -> tuple[dict, Iterator[Snapshot]]:
    """The header, and an iterator over the snapshots read lazily (a recording can be long).
    FeedError for a missing file, a bad header, or a malformed line other than a truncated
    last one (a line without its newline at the end of the file)."""
    path = user_path(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the iterator
    except OSError as exc:
        raise FeedError(f"cannot read recording {path}: {one_line(exc.strerror or exc)}") from None
    try:
        first = f.readline(MAX_LINE_BYTES + 1)
    except OSError as exc:
        f.close()
        raise FeedError(f"cannot read recording {path}: {one_line(exc)}") from None
    if not first:
        f.close()
        raise FeedError(f"{path} is empty: no feed was recorded in it")
    try:
        header = decode_json(first)
    except Unreadable:
        header = None
    if not first.endswith(b"\n") and not isinstance(header, dict):
        f.close()
        raise FeedError(f"{path} holds only a truncated header: no snapshot was recorded")
    try:
        _check_header(header, path)
    except FeedError:
        f.close()
        raise
    return header, _snapshots(f, path)


def _snapshots(f, path: Path) -> Iterator[Snapshot]:
    with f:
        lineno = 1
        while True:
            try:
                line = f.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise FeedError(f"{path}, line {lineno + 1}: {one_line(exc)}") from None
            if not line:
                return
            lineno += 1
            if len(line) > MAX_LINE_BYTES:
                raise FeedError(
                    f"{path}, line {lineno}: longer than {MAX_LINE_BYTES // 2**20} MiB (the "
                    "limit for one snapshot): not a vramtui feed recording"
                )
            if not line.strip():
                continue
            complete = line.endswith(b"\n")
            try:
                data = decode_json(line)
            except Unreadable as exc:
                if not complete and exc.syntax:  # the line a killed recorder was writing
                    return
                raise FeedError(
                    f"{path}, line {lineno}: the line {exc.problem}; delete that line, or "
                    "record again"
                ) from None
            try:
                snap = snapshot_from_json(data)
            except (ValueError, TypeError, KeyError, OverflowError, FeedError) as exc:
                if not complete:  # the line a killed recorder was writing: dropped
                    return
                raise FeedError(f"{path}, line {lineno}: {one_line(exc)}") from None
            yield snap


def read_recording(path) -> tuple[dict, list[Snapshot]]:
    """(header, snapshots) of a recording; see iter_recording for what is tolerated."""
    header, snaps = iter_recording(path)
    return header, list(snaps)


def check_speed(speed: float) -> float:
    try:
        speed = float(speed)
    except (TypeError, ValueError):
        raise FeedError(f"--speed must be a number such as 1 or 10, got {speed!r}") from None
    if not math.isfinite(speed) or speed <= 0:
        raise FeedError(
            f"--speed must be > 0 (1 = as recorded, 10 = ten times faster), got {speed:g}"
        )
    return speed


def replay(path, speed: float = 1.0) -> Iterator[tuple[float, Snapshot]]:
    """(delay_s, snapshot) pairs: wait delay_s, then show the snapshot. The first delay is 0;
    the next ones are the recorded time gaps divided by `speed` (a gap that runs backwards,
    after a clock change, counts as 0)."""
    speed = check_speed(speed)
    _, snaps = iter_recording(path)
    return _delays(snaps, speed)


def _delays(snaps: Iterator[Snapshot], speed: float) -> Iterator[tuple[float, Snapshot]]:
    """A gap longer than MAX_REPLAY_GAP_S (a recorder stopped overnight, a corrupt or
    far-future time) is replayed as MAX_REPLAY_GAP_S: a replay shows the recording, it does not
    sit idle for days, and no wait ever overflows the clock."""
    previous: float | None = None
    for snap in snaps:
        delay = 0.0
        if previous is not None:
            gap = (snap.time - previous) / speed
            delay = min(MAX_REPLAY_GAP_S, gap) if gap > 0 else 0.0  # NaN, backwards: 0
        previous = snap.time
        yield delay, snap


def play(path, callback, stop, speed: float = 1.0, wait=None) -> int:
    """Replay a recording into `callback` with its timing, until the end or `stop` (an
    Event) is set; the replay analogue of Poller.run. Returns the snapshots delivered."""
    wait = stop.wait if wait is None else wait
    n = 0
    for delay, snap in replay(path, speed):
        if delay > 0:
            wait(delay)
        if stop.is_set():
            break
        callback(snap)
        n += 1
    return n
