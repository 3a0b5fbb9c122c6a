"""`vramtui watch --ssh`: every --ssh is watched, the app's feed gets the ssh options and both
intervals, and a terminated watcher leaves no ssh child behind.

A fake `ssh` on PATH stands in for the client: it records its arguments and process id, then
either fails at once or hangs (a host that never answers), so no network or sshd is needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vramtui.cli import build_parser, main
from vramtui.feed.runner import FeedRunner, FeedSettings

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX shell script as ssh, signals")


def fake_ssh(tmp_path: Path, body: str) -> Path:
    """A directory holding an `ssh` script that appends "pid args..." to calls.txt, then runs
    `body`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "ssh"
    script.write_text(f'#!/bin/sh\necho "$$ $*" >> "{tmp_path}/calls.txt"\n{body}\n')
    script.chmod(0o755)
    return bin_dir


def calls(tmp_path: Path) -> list[tuple[int, str]]:
    path = tmp_path / "calls.txt"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        pid, _, args = line.partition(" ")
        out.append((int(pid), args))
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# ---------------------------------------------------------------- every --ssh


@pytest.mark.parametrize(
    "argv, hosts",
    [
        (["--ssh", "a", "--ssh", "b"], ["a", "b"]),  # the README's form
        (["--ssh", "a", "b"], ["a", "b"]),
        (["--ssh", "a", "b", "--ssh", "c"], ["a", "b", "c"]),
        (["--ssh", "a"], ["a"]),
    ],
)
def test_every_ssh_flag_is_kept(argv, hosts):
    args = build_parser().parse_args(["watch", *argv])
    assert args.ssh == hosts
    assert FeedSettings.from_args(args).hosts == tuple(hosts)


def test_watch_once_asks_every_repeated_host(tmp_path, monkeypatch, capsys):
    bin_dir = fake_ssh(tmp_path, 'echo "ssh: connect to host: Connection refused" >&2\nexit 255')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    rc = main(["watch", "--ssh", "gpu-a", "--ssh", "gpu-b", "--once", "--json"])
    assert rc == 1  # no host answered
    result = json.loads(capsys.readouterr().out)
    assert sorted(result) == ["gpu-a", "gpu-b"]
    assert all(v["state"] == "failed" for v in result.values())
    destinations = sorted(args.split(" -- ")[1].split()[0] for _, args in calls(tmp_path))
    assert destinations == ["gpu-a", "gpu-b"]


# ---------------------------------------------------------------- the app's feed


def test_the_app_feed_gets_the_ssh_options_and_intervals(tmp_path, monkeypatch):
    """`vramtui watch --ssh ...` (no --once/--json) opens the app with settings that carry
    --ssh-config, every --ssh-option, --interval and --process-interval, and the feed the app
    starts from them runs ssh with all of them."""
    import vramtui.app.run as app_run

    seen = {}

    def fake_run_app(spec, catalog, settings, tab):
        seen.update(settings=settings, tab=tab)
        return 0

    monkeypatch.setattr(app_run, "run_app", fake_run_app)
    cfg = tmp_path / "ssh_config"
    cfg.write_text("")
    rc = main(
        [
            "watch",
            "--ssh",
            "gpu-a",
            "--ssh",
            "gpu-b",
            "--ssh-config",
            str(cfg),
            "--ssh-option",
            "ProxyJump=bastion",
            "--ssh-option",
            "Port=2222",
            "--interval",
            "0.5",
            "--process-interval",
            "5",
        ]
    )
    assert rc == 0 and seen["tab"] == "feed"
    settings = seen["settings"]
    assert settings.kind == "ssh" and settings.hosts == ("gpu-a", "gpu-b")
    assert settings.interval == 0.5 and settings.process_interval == 5.0
    assert settings.ssh_options == ("-F", str(cfg), "-o", "ProxyJump=bastion", "-o", "Port=2222")

    bin_dir = fake_ssh(tmp_path, "exec sleep 30")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    runner = FeedRunner(settings, lambda: None)
    runner.start()
    try:
        assert wait_until(lambda: len(calls(tmp_path)) == 2, 10)
    finally:
        runner.stop()
    for _, args in calls(tmp_path):
        options, _, remote = args.partition(" -- ")
        assert f"-F {cfg} -o ProxyJump=bastion -o Port=2222" in options
        assert remote.split()[2:] == [
            "-m",
            "vramtui.agent",
            "--interval",
            "0.5",
            "--process-interval",
            "5.0",
        ]
    assert not any(alive(pid) for pid, _ in calls(tmp_path))


def test_the_default_process_interval_adds_no_agent_flag():
    args = build_parser().parse_args(["watch", "--ssh", "a"])
    runner = FeedRunner(FeedSettings.from_args(args), lambda: None)
    from vramtui.feed.ssh import agent_args_for

    assert agent_args_for(runner.settings.process_interval) == ()
    assert agent_args_for(0.5) == ("--process-interval", "0.5")


# ---------------------------------------------------------------- signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signalled_watcher_leaves_no_ssh_child(tmp_path, sig):
    bin_dir = fake_ssh(tmp_path, "exec sleep 60")  # a host that never answers
    env = {**os.environ, "PYTHONPATH": str(SRC), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    watcher = subprocess.Popen(
        [sys.executable, "-m", "vramtui", "watch", "--json", "--ssh", "gpu-a", "--ssh", "gpu-b"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_until(lambda: len(calls(tmp_path)) == 2, 20), "ssh was never started"
        pids = [pid for pid, _ in calls(tmp_path)]
        assert all(alive(pid) for pid in pids)
        watcher.send_signal(sig)
        rc = watcher.wait(timeout=10)
        assert wait_until(lambda: not any(alive(pid) for pid in pids), 2), "ssh outlived watch"
        assert rc in (0, 128 + sig, -sig)
        assert b"Traceback" not in watcher.stderr.read()
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        for pid, _ in calls(tmp_path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
