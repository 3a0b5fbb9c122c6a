"""`vramtui watch --prometheus URL`: the Prometheus feed headless, and the loop the app runs.

--once --json   one object {host: snapshot} (the schema of `watch --ssh ... --once --json`; a
                host or the Prometheus that could not be read: {"state", "reason"}), exit 0 when
                at least one host answered, else 1
--json          one line {"host", "state", "snapshot"[, "reason"]} per change until Ctrl-C
(neither)       the app's Feed tab (vramtui.feed.runner)
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable

from vramtui.feed.prometheus import LIVE, HostUpdate, PrometheusFeed
from vramtui.feed.prometheus_settings import PrometheusSettings, settings_from
from vramtui.feed.sample import FeedError, snapshot_to_json
from vramtui.safe_text import safe_line


def settings_from_args(args) -> PrometheusSettings:
    """The feed's settings: the command line over the config file's [prometheus] table."""
    from vramtui.config import load_config

    return settings_from(args, load_config().prometheus)


def run_loop(
    feed: PrometheusFeed,
    deliver: Callable[[HostUpdate, bool], None],
    stop: threading.Event,
) -> None:
    """Poll every interval until `stop`; `deliver(update, fresh)` for each host whose state,
    reason or snapshot changed (`fresh`: a snapshot not delivered before, to record)."""
    last: dict[str, tuple] = {}
    interval = feed.settings.interval
    while not stop.is_set():
        started = time.monotonic()
        for update in feed.poll():
            snap_time = update.snapshot.time if update.snapshot is not None else None
            key = (update.state, update.reason, snap_time)
            previous = last.get(update.host)
            if previous == key:
                continue
            last[update.host] = key
            fresh = update.snapshot is not None and (previous is None or previous[2] != snap_time)
            deliver(update, fresh)
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def _update_json(update: HostUpdate) -> dict:
    out: dict = {"host": update.host, "state": update.state}
    if update.reason:
        out["reason"] = update.reason
    out["snapshot"] = snapshot_to_json(update.snapshot) if update.snapshot is not None else None
    return out


def _summary(update: HostUpdate) -> str:
    snap = update.snapshot
    head = f"{update.host}: {update.state}"
    if update.reason:
        head += f" ({update.reason})"
    if snap is None:
        return head
    parts = []
    for g in snap.gpus:
        if g.used_bytes is not None and g.total_bytes:
            parts.append(f"GPU{g.index} {g.used_bytes / 2**30:.1f}/{g.total_bytes / 2**30:.1f} GiB")
        else:
            parts.append(f"GPU{g.index} n/a")
    return head + ": " + (", ".join(parts) if parts else "no GPUs")


def watch_prometheus(args) -> int:
    if getattr(args, "ssh", None):
        raise FeedError("--prometheus and --ssh are two feeds: give one of them")
    if getattr(args, "replay", None):
        raise FeedError("--replay plays a recording; it does not go with --prometheus")
    settings = settings_from_args(args)
    feed = PrometheusFeed(settings)
    if args.once:
        return _once(feed, bool(args.json))
    return _stream(feed, bool(args.json), getattr(args, "record", None))


def _once(feed: PrometheusFeed, as_json: bool) -> int:
    updates = feed.poll()
    result: dict = {}
    answered = 0
    for u in updates:
        if u.snapshot is not None:
            answered += 1
            result[u.host] = snapshot_to_json(u.snapshot)
            if u.state != LIVE and u.reason:
                print(f"vramtui: note: {safe_line(u.host)}: {safe_line(u.reason)}", file=sys.stderr)
        else:
            result[u.host] = {"state": u.state, "reason": u.reason}
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        from vramtui.feed.table import snapshot_renderable
        from vramtui.render import print_renderable

        for u in updates:
            if u.snapshot is not None:
                print(safe_line(f"{u.host}: {u.state}"))
                print_renderable(snapshot_renderable(u.snapshot))
            else:
                print(safe_line(f"{u.host}: {u.state}: {u.reason}"))
    return 0 if answered else 1


def _stream(feed: PrometheusFeed, as_json: bool, record_path: str | None) -> int:
    recorder = None
    if record_path:
        from vramtui.feed.record import Recorder

        recorder = Recorder(record_path)

    def deliver(update: HostUpdate, fresh: bool) -> None:
        if fresh and recorder is not None and update.state == LIVE:
            recorder.write(update.snapshot)
        if as_json:
            print(json.dumps(_update_json(update), separators=(",", ":")), flush=True)
        else:
            print(safe_line(_summary(update)), flush=True)

    from vramtui.feed.stop_signals import stop_on_signals

    try:
        with stop_on_signals():
            run_loop(feed, deliver, threading.Event())
    except KeyboardInterrupt:
        return 0
    finally:
        if recorder is not None:
            recorder.close()
    return 0
