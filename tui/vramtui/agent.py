"""The remote end of `vramtui watch --ssh HOST`: NVML snapshots as JSON lines on stdout.

    python -m vramtui.agent [--interval S] [--process-interval S] [--replay FILE] [--speed X]
                            [--loop] [--once]

The first line is a header, `{"vramtui_agent": 1, "version": ..., "host": ..., "python": ...}`;
every following line is one `snapshot_to_json` object, flushed as it is written. When NVML
cannot be read the snapshots carry the reason in their `error` field; the agent never crashes
on a driver problem. It ends quietly (exit 0) when its reader goes away: a broken pipe on
stdout, its stdin (a pipe or socket, as under sshd) closing, SIGTERM, SIGHUP or SIGINT.

It runs on every watched node, so it starts light: no Textual, no rich, no psutil until a
process list is read. `--replay FILE` plays a recording instead of the driver (tests, demos).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import signal
import socket
import stat
import sys
import threading
import time

from vramtui import __version__

AGENT_PROTOCOL = 1  # bump when the line protocol changes (ssh.py checks it)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number of seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m vramtui.agent",
        description="Stream this host's GPU counters as JSON lines (vramtui watch --ssh runs "
        "this on each node).",
    )
    p.add_argument(
        "--interval",
        type=_positive_seconds,
        default=1.0,
        metavar="S",
        help="seconds between device snapshots (default 1)",
    )
    p.add_argument(
        "--process-interval",
        type=_positive_seconds,
        default=None,
        metavar="S",
        help="seconds between process-list reads (default: max(2, interval))",
    )
    p.add_argument("--replay", metavar="FILE", help="play a recording instead of the driver")
    p.add_argument(
        "--speed",
        type=_positive_seconds,
        default=1.0,
        metavar="X",
        help="replay speed factor (default 1)",
    )
    p.add_argument("--loop", action="store_true", help="replay: start again at the end")
    p.add_argument("--once", action="store_true", help="one snapshot, then exit")
    return p


class _Out:
    """Line writer on the raw stdout: one JSON object per line, flushed."""

    def __init__(self) -> None:
        self.stream = sys.stdout.buffer
        self.bytes = 0

    def write(self, obj: dict) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n"
        self.stream.write(data)
        self.stream.flush()
        self.bytes += len(data)


def _watch_stdin(stop: threading.Event) -> None:
    """Under sshd stdin is a pipe or socket that closes when the client goes: stop then.

    A terminal or /dev/null is not watched (a local run would otherwise end at once)."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return

    def reader() -> None:
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        stop.set()

    threading.Thread(target=reader, name="vramtui-agent-stdin", daemon=True).start()


def _install_signals(stop: threading.Event) -> None:
    def handler(_signum, _frame) -> None:
        stop.set()

    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError):  # not the main thread, or not allowed
                pass


def _error_snapshot(host: str, reason: str) -> dict:
    from vramtui.feed.sample import error_snapshot, snapshot_to_json

    return snapshot_to_json(error_snapshot(host, time.time(), reason))


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def run_replay(
    out: _Out, path: str, speed: float, once: bool, loop: bool, stop: threading.Event
) -> None:
    from vramtui.feed.record import replay
    from vramtui.feed.sample import snapshot_to_json

    while not stop.is_set():
        sent = 0
        for delay, snap in replay(path, speed):
            if delay > 0 and stop.wait(delay):
                return
            if stop.is_set():
                return
            out.write(snapshot_to_json(snap))
            sent += 1
            if once:
                return
        if not loop or sent == 0:
            return


def run_live(
    out: _Out,
    host: str,
    interval: float,
    process_interval: float | None,
    once: bool,
    stop: threading.Event,
) -> None:
    from vramtui.feed.nvml_source import NvmlSource
    from vramtui.feed.poller import DEFAULT_PROCESS_INTERVAL, Poller
    from vramtui.feed.sample import snapshot_to_json

    if process_interval is None:
        process_interval = max(DEFAULT_PROCESS_INTERVAL, interval)
    # Poller turns a driver that cannot be opened into error snapshots and retries it.
    poller = Poller(NvmlSource(host=host), interval, process_interval)

    def emit(snapshot) -> None:
        try:
            obj = snapshot_to_json(snapshot)
        except Exception as exc:  # noqa: BLE001 - the agent reports, it never crashes
            obj = _error_snapshot(host, f"agent could not encode a snapshot ({_one_line(exc)})")
        out.write(obj)

    try:
        if once:
            emit(poller.poll())
        else:
            poller.run(emit, stop)
    finally:
        with contextlib.suppress(Exception):
            poller.close()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.replay:
        from vramtui.feed.poller import check_interval
        from vramtui.feed.sample import FeedError

        try:
            check_interval(args.interval, "--interval")
            if args.process_interval is not None:
                check_interval(args.process_interval, "--process-interval")
        except FeedError as exc:
            parser.error(str(exc))
    stop = threading.Event()
    _install_signals(stop)
    _watch_stdin(stop)
    host = socket.gethostname()
    out = _Out()
    try:
        out.write(
            {
                "vramtui_agent": AGENT_PROTOCOL,
                "version": __version__,
                "host": host,
                "python": platform.python_version(),
                "pid": os.getpid(),
                "mode": "replay" if args.replay else "nvml",
                "interval": args.interval,
            }
        )
        if args.replay:
            try:
                run_replay(out, args.replay, args.speed, args.once, args.loop, stop)
            except Exception as exc:  # noqa: BLE001 - a bad recording: say so, exit non-zero
                out.write(_error_snapshot(host, f"replay failed ({_one_line(exc)})"))
                print(f"vramtui.agent: replay failed: {_one_line(exc)}", file=sys.stderr)
                return 2
        else:
            run_live(out, host, args.interval, args.process_interval, args.once, stop)
    except (BrokenPipeError, ConnectionResetError):
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        return 0
    return 0


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
