"""`vramtui watch`: the live counters, headless (no Textual is imported here).

vramtui watch --once --json          one snapshot as a JSON line, exit 0 (also without NVML:
                                     the "error" field says why, and a note goes to stderr)
vramtui watch --once                 the same as tables
vramtui watch --json [--record F]    JSON lines until Ctrl-C, appended to F as well
vramtui watch --replay F [--speed X] --once / --json: a recording instead of the driver
vramtui watch --ssh HOST ...         the SSH feed (vramtui.feed.ssh, vramtui.feed.ssh_watch)
vramtui watch --prometheus URL ...   dcgm-exporter's counters from Prometheus
                                     (vramtui.feed.prometheus_watch)
vramtui watch                        the app's feed pane
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from vramtui.feed.sample import FeedError, Snapshot


def cmd_watch(args, open_app: Callable[[object], int]) -> int:
    if getattr(args, "prometheus", None):
        from vramtui.feed.poller import check_interval
        from vramtui.feed.prometheus_watch import watch_prometheus

        check_interval(args.interval, "--interval")
        if not args.once and not args.json:
            if args.ssh or args.replay:
                return watch_prometheus(args)  # says which options clash
            return open_app(args)
        return watch_prometheus(args)
    _refuse_prometheus_options(args)
    if getattr(args, "ssh", None):
        if not args.once and not args.json:
            from vramtui.feed.ssh import validate_host

            for host in args.ssh:
                validate_host(host)
            return open_app(args)
        return _watch_ssh(args)
    if args.remote_python:
        raise FeedError("--remote-python goes with --ssh HOST: it names python3 on the hosts")
    if args.replay:
        if args.record:
            raise FeedError(
                "--record and --replay together would copy a recording; copy the file instead"
            )
        from vramtui.feed.record import check_speed

        check_speed(args.speed)
    elif args.speed != 1.0:
        raise FeedError("--speed goes with --replay FILE (it scales the recorded time gaps)")
    else:
        from vramtui.feed.poller import check_interval

        check_interval(args.interval, "--interval")
        check_interval(args.process_interval, "--process-interval")
    if not args.once and not args.json:
        return open_app(args)
    if args.replay:
        return _replay(args)
    return _live(args)


_PROMETHEUS_ONLY = (
    ("match", "--match"),
    ("stale_after", "--stale-after"),
    ("bearer_token_file", "--bearer-token-file"),
    ("basic_auth_user", "--basic-auth-user"),
    ("basic_auth_password_file", "--basic-auth-password-file"),
    ("ca_file", "--ca-file"),
    ("cert_file", "--cert-file"),
    ("key_file", "--key-file"),
    ("insecure_skip_verify", "--insecure-skip-verify"),
)


def _refuse_prometheus_options(args) -> None:
    for attr, flag in _PROMETHEUS_ONLY:
        if getattr(args, attr, None):
            raise FeedError(f"{flag} goes with --prometheus URL (it shapes that feed's queries)")


def _watch_ssh(args) -> int:
    try:
        from vramtui.feed import ssh_watch
    except ModuleNotFoundError as exc:
        if exc.name not in ("vramtui.feed.ssh", "vramtui.feed.ssh_watch"):
            raise
        raise FeedError(
            "watching hosts over SSH (--ssh) is not part of this build; run `vramtui watch` "
            "on the host itself"
        ) from None
    return ssh_watch.watch_hosts(args)


def _emit(snapshot: Snapshot, as_json: bool) -> None:
    if as_json:
        from vramtui.feed.record import snapshot_line

        sys.stdout.write(snapshot_line(snapshot))
        sys.stdout.flush()
        return
    from vramtui.feed.table import snapshot_renderable
    from vramtui.render import print_renderable

    print_renderable(snapshot_renderable(snapshot))


def _note_error(snapshot: Snapshot, last: list, as_json: bool = True) -> None:
    """The error on stderr, once per distinct reason (a loop does not repeat it every tick).

    Only beside JSON: the tables print the error themselves, so a note would say it twice."""
    if as_json and snapshot.error and snapshot.error != (last[0] if last else None):
        from vramtui.safe_text import safe_line

        print(f"vramtui: note: {safe_line(snapshot.error)}", file=sys.stderr)
    last[:] = [snapshot.error]


def _live(args) -> int:
    from vramtui.feed.nvml_source import NvmlSource
    from vramtui.feed.poller import Poller
    from vramtui.feed.record import Recorder

    poller = Poller(NvmlSource(), args.interval, args.process_interval)
    recorder = Recorder(args.record) if args.record else None
    last_error: list = []

    def deliver(snapshot: Snapshot) -> None:
        _note_error(snapshot, last_error, args.json)
        if recorder is not None:
            recorder.write(snapshot)
        _emit(snapshot, args.json)

    try:
        if args.once:
            deliver(poller.poll())
        else:
            poller.run(deliver, threading.Event())
    finally:
        poller.close()
        if recorder is not None:
            recorder.close()
    return 0


def _replay(args) -> int:
    from vramtui.feed.record import iter_recording, play

    if args.once:
        _, snapshots = iter_recording(args.replay)
        first = next(snapshots, None)
        if first is None:
            raise FeedError(f"{args.replay} holds no snapshot (only its header)")
        _note_error(first, [], args.json)
        _emit(first, args.json)
        return 0
    last_error: list = []

    def deliver(snapshot: Snapshot) -> None:
        _note_error(snapshot, last_error)
        _emit(snapshot, True)

    play(args.replay, deliver, threading.Event(), args.speed)
    return 0
