"""Run one feed source in the background (local NVML, a recording, hosts over SSH, or
Prometheus) and
keep only the latest state per host: a slow reader never builds a backlog."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from typing import Callable

from vramtui.feed.sample import FeedError, Snapshot


@dataclass(frozen=True)
class FeedSettings:
    kind: str = "local"  # local | replay | ssh | prometheus
    interval: float = 1.0
    process_interval: float = 2.0
    replay_path: str | None = None
    speed: float = 1.0
    hosts: tuple[str, ...] = ()
    remote_python: str = "python3"
    record_path: str | None = None
    ssh_options: tuple[str, ...] = field(default_factory=tuple)
    prometheus: object | None = None  # vramtui.feed.prometheus_settings.PrometheusSettings

    @classmethod
    def from_args(cls, args) -> FeedSettings:
        prometheus = None
        if getattr(args, "prometheus", None):
            from vramtui.feed.prometheus_watch import settings_from_args

            kind = "prometheus"
            prometheus = settings_from_args(args)
        elif getattr(args, "ssh", None):
            kind = "ssh"
        elif getattr(args, "replay", None):
            kind = "replay"
        else:
            kind = "local"
        return cls(
            kind=kind,
            interval=args.interval,
            process_interval=args.process_interval,
            replay_path=args.replay,
            speed=args.speed,
            hosts=tuple(args.ssh or ()),
            remote_python=args.remote_python or "python3",
            record_path=args.record,
            ssh_options=_ssh_options(args),
            prometheus=prometheus,
        )

    def label(self) -> str:
        if self.kind == "replay":
            return f"replay of {self.replay_path} at {self.speed:g}x"
        if self.kind == "ssh":
            return f"{len(self.hosts)} host(s) over SSH, every {self.interval:g} s"
        if self.kind == "prometheus" and self.prometheus is not None:
            return self.prometheus.label()
        return (
            f"local NVML, devices every {self.interval:g} s, processes every "
            f"{self.process_interval:g} s"
        )


def _ssh_options(args) -> tuple[str, ...]:
    from vramtui.feed.ssh import _ssh_options_from

    return tuple(_ssh_options_from(args))


class FeedRunner:
    """`on_change()` is called (from a background thread) when something new is available;
    read it with `statuses()`. At most one notification is pending at a time."""

    def __init__(self, settings: FeedSettings, on_change: Callable[[], None]) -> None:
        self.settings = settings
        self.on_change = on_change
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[str, str | None, Snapshot | None]] = {}
        self._pending = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._multi = None
        self._recorder = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        s = self.settings
        if s.record_path:
            from vramtui.feed.record import Recorder

            self._recorder = Recorder(s.record_path)
        if s.kind == "ssh":
            from vramtui.feed.ssh import MultiHostFeed, agent_args_for

            self._multi = MultiHostFeed(
                s.hosts,
                self._on_status,
                remote_python=s.remote_python,
                interval=s.interval,
                extra_ssh_options=s.ssh_options,
                agent_args=agent_args_for(s.process_interval),
            )
            for host in self._multi.hosts:
                self._latest[host] = ("connecting", None, None)
            self._multi.start()
            return
        target = {"replay": self._run_replay, "prometheus": self._run_prometheus}.get(
            s.kind, self._run_local
        )
        self._thread = threading.Thread(target=target, name="vramtui-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._multi is not None:
            self._multi.stop()
        if self._thread is not None:
            self._thread.join(timeout=3)
        if self._recorder is not None:
            self._recorder.close()

    # ------------------------------------------------------------------ sources

    def _run_local(self) -> None:
        from vramtui.feed.nvml_source import NvmlSource
        from vramtui.feed.poller import Poller

        poller = Poller(
            NvmlSource(socket.gethostname()), self.settings.interval, self.settings.process_interval
        )
        try:
            poller.run(self._on_snapshot, self._stop)
        finally:
            poller.close()

    def _run_prometheus(self) -> None:
        from vramtui.feed.prometheus import LIVE, PrometheusFeed
        from vramtui.feed.prometheus_watch import run_loop

        def deliver(update, fresh: bool) -> None:
            if fresh and update.state == LIVE and self._recorder is not None:
                self._recorder.write(update.snapshot)
            self._set(update.host, update.state, update.reason, update.snapshot)

        try:
            run_loop(PrometheusFeed(self.settings.prometheus), deliver, self._stop)
        except FeedError as exc:
            self._set("prometheus", "failed", str(exc), None)

    def _run_replay(self) -> None:
        from vramtui.feed.record import play

        try:
            play(self.settings.replay_path, self._on_snapshot, self._stop, self.settings.speed)
        except FeedError as exc:
            self._set("replay", "failed", str(exc), None)
            return
        host = next(iter(self._latest), "replay")
        state, _, snap = self._latest.get(host, ("", None, None))
        self._set(host, "ended", "end of the recording", snap)

    # ------------------------------------------------------------------ callbacks

    def _on_snapshot(self, snap: Snapshot) -> None:
        if self._recorder is not None:
            self._recorder.write(snap)
        self._set(snap.host, "live" if not snap.error else "no counters", None, snap)

    def _on_status(self, status) -> None:
        if status.snapshot is not None and self._recorder is not None and (status.state == "live"):
            self._recorder.write(status.snapshot)
        self._set(status.host, status.state, status.reason, status.snapshot)

    def _set(self, host: str, state: str, reason: str | None, snap: Snapshot | None) -> None:
        with self._lock:
            self._latest[host] = (state, reason, snap)
            notify = not self._pending
            self._pending = True
        if notify:
            self.on_change()

    def statuses(self) -> dict[str, tuple[str, str | None, Snapshot | None]]:
        """The latest state of every host; clears the pending notification."""
        with self._lock:
            self._pending = False
            return dict(self._latest)
