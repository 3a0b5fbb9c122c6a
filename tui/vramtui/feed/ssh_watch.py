"""`vramtui watch --ssh HOST ...`: the headless command over `MultiHostFeed` (vramtui.feed.ssh).

Streams every host's updates until Ctrl-C, or with --once collects one snapshot per host
(bounded by `ssh.ONCE_TIMEOUT`). Plain Python: no Textual here.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from vramtui.feed.sample import FeedError, snapshot_to_json
from vramtui.feed.ssh import (
    CONNECTING,
    FAILED,
    LIVE,
    ONCE_TIMEOUT,
    HostStatus,
    MultiHostFeed,
    _ssh_options_from,
    agent_args_for,
)
from vramtui.feed.stop_signals import stop_on_signals
from vramtui.safe_text import safe_line


def _status_json(status: HostStatus) -> dict:
    out: dict[str, Any] = {"host": status.host, "state": status.state}
    if status.reason:
        out["reason"] = status.reason
    out["snapshot"] = snapshot_to_json(status.snapshot) if status.snapshot is not None else None
    return out


def _summary_line(status: HostStatus) -> str:
    if status.state == FAILED:
        return f"{status.host}: failed: {status.reason}"
    snap = status.snapshot
    if status.state == CONNECTING or snap is None:
        return f"{status.host}: {status.state}"
    if snap.error:
        return f"{status.host}: {status.state}: {snap.error}"
    parts = []
    for gpu in snap.gpus:
        used, total, index = gpu.used_bytes, gpu.total_bytes, gpu.index
        if isinstance(used, (int, float)) and isinstance(total, (int, float)) and total:
            parts.append(f"GPU{index} {used / 2**30:.1f}/{total / 2**30:.1f} GiB")
        else:
            parts.append(f"GPU{index} n/a")
    gpus = ", ".join(parts) if parts else "no GPUs"
    return f"{status.host}: {status.state}: {gpus}"


def watch_hosts(args: Any) -> int:
    """`vramtui watch --ssh HOST ...`: stream (or, with --once, collect) every host's feed.

    --once: wait (at most ONCE_TIMEOUT s) until every host has sent a snapshot or failed, print
    them (--json: one object {host: snapshot-or-{"state", "reason"}}), exit 0 if at least one
    host answered, else 1. Without --once: print each update until Ctrl-C (--json: one line
    {"host", "state", "snapshot"[, "reason"]} per update).
    """
    hosts = list(getattr(args, "ssh", None) or [])
    remote_python = getattr(args, "remote_python", None) or "python3"
    interval = getattr(args, "interval", None) or 1.0
    as_json = bool(getattr(args, "json", False))
    once = bool(getattr(args, "once", False))
    record_path = getattr(args, "record", None)
    options = _ssh_options_from(args)
    if getattr(args, "replay", None):
        raise FeedError(
            "--replay plays a local recording; it does not go with --ssh (to replay on a host, "
            "run `python -m vramtui.agent --replay FILE` there)"
        )
    agent_args = agent_args_for(getattr(args, "process_interval", None))

    with stop_on_signals():
        if once:
            return _watch_once(hosts, remote_python, interval, options, agent_args, as_json)
        return _watch_stream(
            hosts, remote_python, interval, options, agent_args, as_json, record_path
        )


def _watch_stream(
    hosts: list[str],
    remote_python: str,
    interval: float,
    options: list[str],
    agent_args: tuple[str, ...],
    as_json: bool,
    record_path: str | None,
) -> int:
    import queue

    updates: queue.Queue[HostStatus] = queue.Queue()
    multi = MultiHostFeed(
        hosts,
        updates.put,
        remote_python=remote_python,
        interval=interval,
        extra_ssh_options=options,
        agent_args=agent_args,
    )
    recorder = None
    if record_path:
        from vramtui.feed.record import Recorder

        recorder = Recorder(record_path)
    seen: dict[str, tuple[str, str | None, float | None]] = {}
    shown: dict[str, str] = {}
    try:
        multi.start()
        while True:
            try:
                status = updates.get(timeout=0.5)
            except queue.Empty:
                continue
            key = (status.state, status.reason, status.last_snapshot_at)
            previous = seen.get(status.host)
            if previous == key:
                continue  # a repeated notification: nothing new to show
            seen[status.host] = key
            fresh = status.snapshot is not None and (
                previous is None or previous[2] != status.last_snapshot_at
            )
            if fresh and recorder is not None:
                recorder.write(status.snapshot)
            if as_json:
                print(json.dumps(_status_json(status), separators=(",", ":")), flush=True)
                continue
            line = safe_line(_summary_line(status))
            if shown.get(status.host) != line:  # text: a host's line when it changes
                shown[status.host] = line
                print(line, flush=True)
    except KeyboardInterrupt:
        return 0
    finally:
        multi.stop()
        if recorder is not None:
            recorder.close()


def _watch_once(
    hosts: list[str],
    remote_python: str,
    interval: float,
    options: list[str],
    agent_args: tuple[str, ...],
    as_json: bool,
) -> int:
    done = threading.Event()
    multi: MultiHostFeed | None = None

    def on_update(_status: HostStatus) -> None:
        if multi is not None and all(
            s.state == FAILED or s.snapshot is not None for s in multi.statuses().values()
        ):
            done.set()

    multi = MultiHostFeed(
        hosts,
        on_update,
        remote_python=remote_python,
        interval=interval,
        extra_ssh_options=options,
        agent_args=agent_args,
        backoff_initial=ONCE_TIMEOUT * 10,  # --once: no retries
    )
    try:
        multi.start()
        done.wait(ONCE_TIMEOUT)
        statuses = multi.statuses()
    finally:
        multi.stop()
    result: dict[str, Any] = {}
    answered = 0
    for host, status in statuses.items():
        if status.snapshot is not None:
            answered += 1
            result[host] = snapshot_to_json(status.snapshot)
        else:
            reason = status.reason or (
                f"no snapshot within {ONCE_TIMEOUT:.0f} s" if status.state != FAILED else None
            )
            result[host] = {
                "state": FAILED if status.state != LIVE else status.state,
                "reason": reason,
            }
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        from vramtui.feed.table import snapshot_renderable
        from vramtui.render import print_renderable

        for host, status in statuses.items():
            if status.snapshot is not None:
                print(f"{host}:")
                print_renderable(snapshot_renderable(status.snapshot))
            else:
                print(safe_line(f"{host}: failed: {result[host]['reason']}"))
    return 0 if answered else 1
