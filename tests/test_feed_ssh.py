"""The SSH feed against a real OpenSSH server: `sshd` started here on 127.0.0.1 (a free port,
the current user, throw-away ed25519 host and client keys in tmp), the system `ssh` client,
and the agent (`python -m vramtui.agent`, this checkout via `SetEnv PYTHONPATH`) replaying a
recording on the "remote" side. Also: validate_host refusals, the agent run locally without
ssh, and `vramtui watch --ssh ... --once --json` in-process.

Skipped (with the reason) where sshd, ssh or ssh-keygen is not installed. Every wait is
bounded, every process is stopped in a finally or a fixture (sshd included).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from vramtui.feed import ssh as feed_ssh
from vramtui.feed.record import Recorder
from vramtui.feed.sample import FeedError, GpuSample, ProcessSample, Snapshot
from vramtui.feed.ssh import (
    CONNECTING,
    FAILED,
    LIVE,
    STALE,
    HostFeed,
    MultiHostFeed,
    agent_argv,
    explain_failure,
    validate_host,
)

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
ENV = {**os.environ, "PYTHONPATH": str(SRC)}
GIB = 2**30


def _sshd_path() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    for candidate in ("/usr/sbin/sshd", "/usr/local/sbin/sshd"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


# ---------------------------------------------------------------- helpers


def wait_until(predicate, timeout: float, what: str, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def snap(i: int, host: str = "rec-node", t0: float = 1_765_432_100.0) -> Snapshot:
    return Snapshot(
        host=host,
        time=t0 + i * 0.1,
        gpus=(
            GpuSample(
                index=0,
                name="Fake H100",
                total_bytes=80 * GIB,
                used_bytes=(10 + i) * GIB,
                free_bytes=(70 - i) * GIB,
                util_percent=10 * i,
            ),
        ),
        processes=(ProcessSample(gpu_index=0, pid=4242, used_bytes=(9 + i) * GIB, name="python"),),
        driver_version="550.54.15",
    )


def write_recording(path: Path, times: list[float]) -> list[Snapshot]:
    snaps = [
        Snapshot(**{**snap(i).__dict__, "time": 1_765_432_100.0 + t}) for i, t in enumerate(times)
    ]
    with Recorder(path) as rec:
        for s in snaps:
            rec.write(s)
    return snaps


class Recorded:
    """An on_update callback that keeps every status it is given (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items = []

    def __call__(self, status) -> None:
        with self.lock:
            self.items.append(status)

    def states(self, host: str | None = None) -> list[str]:
        with self.lock:
            out = []
            for s in self.items:
                if host is not None and s.host != host:
                    continue
                if not out or out[-1] != s.state:
                    out.append(s.state)
            return out


def ssh_children() -> list[int]:
    """Our ssh client processes still alive (zombies included): none after a stop()."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == me and name == "ssh":
            found.append(int(entry))
    return found


# ---------------------------------------------------------------- the server


class Server:
    def __init__(
        self, root: Path, port: int, proc: subprocess.Popen, key: Path, config: Path, dead_port: int
    ):
        self.root = root
        self.port = port
        self.proc = proc
        self.key = key
        self.config = config  # an ssh_config with aliases alpha, beta (this sshd), dead
        self.dead_port = dead_port
        self.known_hosts = root / "known_hosts"

    def options(self, port: int | None = None) -> tuple[str, ...]:
        """Client options for `127.0.0.1` without an ssh_config (the user's is not read)."""
        return (
            "-F",
            "/dev/null",
            "-i",
            str(self.key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-p",
            str(port or self.port),
        )

    def session_pids(self) -> list[int]:
        """sshd's per-connection children (killing them drops the connections)."""
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            if ppid == self.proc.pid:
                out.append(int(entry))
        return out


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    sshd, ssh, keygen = _sshd_path(), shutil.which("ssh"), shutil.which("ssh-keygen")
    missing = [n for n, p in (("sshd", sshd), ("ssh", ssh), ("ssh-keygen", keygen)) if not p]
    if missing:
        pytest.skip(
            f"OpenSSH not installed ({', '.join(missing)} missing): "
            "apt-get install openssh-server openssh-client"
        )
    root = tmp_path_factory.mktemp("sshd")
    os.chmod(root, 0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(
            [keygen, "-q", "-N", "", "-t", "ed25519", "-f", str(root / name)],
            check=True,
            timeout=30,
        )
    shutil.copy(root / "client_key.pub", root / "authorized_keys")
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
    port, dead_port = free_port(), free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\n"
        "ListenAddress 127.0.0.1\n"
        f"HostKey {root / 'host_key'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\n"
        f"PidFile {root / 'sshd.pid'}\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\n"
        "PermitRootLogin prohibit-password\n"
        "StrictModes no\n"
        "UsePAM no\n"
        "PrintMotd no\n"
        # OpenSSH >= 7.8: the remote `python -m vramtui.agent` imports this checkout.
        f"SetEnv PYTHONPATH={SRC}\n"
    )
    log = open(root / "sshd.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [sshd, "-D", "-e", "-f", str(config)], stdout=log, stderr=log, stdin=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                pytest.skip(f"sshd did not start: {(root / 'sshd.log').read_text().strip()[-300:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("sshd did not listen within 10 s")
                time.sleep(0.05)
        user = getpass.getuser()
        client = root / "ssh_config"
        common = (
            f"  User {user}\n  IdentityFile {root / 'client_key'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {root / 'known_hosts'}\n"
            "  StrictHostKeyChecking accept-new\n  HostKeyAlias vramtui-test-sshd\n"
        )
        client.write_text(
            f"Host alpha beta\n  HostName 127.0.0.1\n  Port {port}\n{common}"
            f"Host dead\n  HostName 127.0.0.1\n  Port {dead_port}\n{common}"
        )
        yield Server(root, port, proc, root / "client_key", client, dead_port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


@pytest.fixture
def recording(tmp_path):
    """A recording replayed (looping) by the remote agent: 5 snapshots, 0.2 s apart."""
    path = tmp_path / "rec.jsonl"
    snaps = write_recording(path, [0.0, 0.2, 0.4, 0.6, 0.8])
    return path, snaps


@pytest.fixture
def feeds():
    """Collects HostFeed/MultiHostFeed objects; stops them all and checks nothing is left."""
    made = []
    yield made
    for f in made:
        f.stop(timeout=5)
    wait_until(lambda: not ssh_children(), 5, "the ssh client processes to be reaped")


def replay_args(path: Path, speed: float = 1.0) -> tuple[str, ...]:
    return ("--replay", str(path), "--speed", str(speed), "--loop")


# ---------------------------------------------------------------- pure functions


@pytest.mark.parametrize(
    "bad, rule",
    [
        ("-oProxyCommand=x", "'-'"),
        ("a b", "whitespace"),
        ("a;rm", "metacharacters"),
        ("", "empty"),
        ("x$(id)", "metacharacters"),
        ("a\nb", "whitespace"),
        ("a\x07b", "control"),
        ("host:22", "Port"),
        ("user@", "no host name"),
        ("[not-ipv6]", "IPv6"),
    ],
)
def test_validate_host_refuses(bad, rule):
    with pytest.raises(FeedError) as err:
        validate_host(bad)
    msg = str(err.value)
    assert rule in msg and "\n" not in msg
    if bad.strip():
        assert repr(bad)[1:-1][:20] in msg or bad[:3] in msg  # the message names the host


@pytest.mark.parametrize(
    "good, expected",
    [
        ("gpu-node-01", "gpu-node-01"),
        ("alice@gpu1.example.com", "alice@gpu1.example.com"),
        ("10.0.0.7", "10.0.0.7"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("bob@[::1]", "bob@::1"),
        ("my_alias", "my_alias"),
    ],
)
def test_validate_host_accepts(good, expected):
    assert validate_host(good) == expected


def test_agent_argv_is_fixed_words():
    argv = agent_argv("alice@node1", "~/venv/bin/python", 0.5, ("-p", "2222"))
    assert argv == [
        "ssh",
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
        "-o",
        "ConnectTimeout=10",
        "-p",
        "2222",
        "--",
        "alice@node1",
        "~/venv/bin/python",
        "-m",
        "vramtui.agent",
        "--interval",
        "0.5",
    ]
    for bad in ("python3 -c evil", "py;rm", "-c", "$(x)", "a/~b"):
        with pytest.raises(FeedError, match="remote python"):
            agent_argv("node1", bad)
    with pytest.raises(FeedError, match="0.25"):
        agent_argv("node1", interval=0.01)


def test_explain_failure_lines():
    host = "n1"
    cases = {
        "ssh: connect to host n1 port 22: Connection refused": "connection refused",
        "root@n1: Permission denied (publickey).": (
            "authentication failed: add your key (ssh-add) or check ~/.ssh/config"
        ),
        "Host key verification failed.": "host key verification failed",
        "ssh: connect to host n1 port 22: Connection timed out": "timed out",
        "ssh: Could not resolve hostname n1: Name or service not known": "cannot resolve",
        "Connection to 10.0.0.1 closed by remote host.": "closed by the remote side",
        "Timeout, server n1 not responding.": "stopped answering keep-alives",
        "bash: line 1: python3: command not found": "vramtui is not installed on n1",
        "/usr/bin/python3: Error while finding module specification for 'vramtui.agent' "
        "(ModuleNotFoundError: No module named 'vramtui')": "vramtui is not installed on n1",
    }
    for stderr, expected in cases.items():
        line = explain_failure(host, stderr, 255)
        assert expected in line and "\n" not in line, (stderr, line)
    install = explain_failure(host, "python3: command not found", 127)
    # The install the README uses (from a checkout): vramtui is not on PyPI.
    assert "`pip install .` in a vramtui checkout" in install and "--remote-python" in install
    assert "pip install vramtui" not in install


# ---------------------------------------------------------------- the agent, locally


def test_agent_replay_locally(recording):
    path, snaps = recording
    once = subprocess.run(
        [sys.executable, "-m", "vramtui.agent", "--replay", str(path), "--speed", "100", "--once"],
        env=ENV,
        capture_output=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert once.returncode == 0, once.stderr
    lines = once.stdout.decode().splitlines()
    assert len(lines) == 2
    header = json.loads(lines[0])
    assert header["vramtui_agent"] == 1 and header["version"] and header["host"]
    assert header["python"].count(".") == 2
    assert json.loads(lines[1])["gpus"][0]["used_bytes"] == snaps[0].gpus[0].used_bytes

    full = subprocess.run(
        [sys.executable, "-m", "vramtui.agent", "--replay", str(path), "--speed", "100"],
        env=ENV,
        capture_output=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert full.returncode == 0 and full.stderr == b""
    got = [json.loads(x) for x in full.stdout.decode().splitlines()[1:]]
    assert [g["time"] for g in got] == [s.time for s in snaps]


def test_agent_without_nvml_and_light_imports():
    """A host without the driver: error snapshots, exit 0; no Textual/rich at start-up."""
    code = (
        "import sys, runpy; sys.argv=['vramtui.agent','--once'];"
        "sys.modules['pynvml']=None\n"  # as if nvidia-ml-py were not installed
        "try:\n runpy.run_module('vramtui.agent', run_name='__main__')\n"
        "except SystemExit as e:\n rc=e.code\n"
        "bad=[m for m in ('textual','rich') if m in sys.modules]\n"
        "print('HEAVY', bad, rc, file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=ENV,
        capture_output=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    lines = out.stdout.decode().splitlines()
    assert out.stderr.decode().strip() == "HEAVY [] 0"
    snapshot = json.loads(lines[1])
    assert snapshot["gpus"] == [] and "NVML not available" in snapshot["error"]


def test_agent_exits_quietly_on_broken_pipe_and_stdin_close(recording):
    path, _ = recording
    args = [sys.executable, "-m", "vramtui.agent", "--replay", str(path), "--speed", "20", "--loop"]
    # stdout closed by the reader: BrokenPipe -> exit 0, nothing on stderr.
    proc = subprocess.Popen(
        args, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        proc.stdout.readline()
        proc.stdout.readline()
        proc.stdout.close()
        assert proc.wait(timeout=10) == 0
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stdin.close()
        proc.stderr.close()
    # stdin closed (the ssh session went): exit 0 at once.
    proc = subprocess.Popen(
        args, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        time.sleep(0.3)
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stderr.close()


# ---------------------------------------------------------------- over ssh


def test_host_feed_goes_live_with_the_recorded_snapshots(server, recording, feeds):
    path, snaps = recording
    seen = Recorded()
    feed = HostFeed(
        "127.0.0.1",
        seen,
        remote_python=sys.executable,
        extra_ssh_options=server.options(),
        agent_args=replay_args(path),
    )
    feeds.append(feed)
    assert feed.state == CONNECTING
    feed.start()
    wait_until(
        lambda: len({s.snapshot.time for s in seen.items if s.snapshot}) >= 5,
        20,
        "five snapshots over ssh",
    )
    states = seen.states()
    assert states[:2] == [CONNECTING, LIVE], states
    got = []
    for s in seen.items:
        if s.snapshot is not None and (not got or got[-1] != s.snapshot):
            got.append(s.snapshot)
    assert got[:5] == snaps  # field for field, through the agent, ssh and the parser
    status = feed.status
    assert status.header["vramtui_agent"] == 1 and status.header["mode"] == "replay"
    assert status.attempts == 1 and status.reason is None


def test_host_feed_goes_stale(server, tmp_path, feeds):
    """Three snapshots 0.1 s apart, then a 60 s gap: live -> stale after 3 x 0.25 s."""
    path = tmp_path / "gap.jsonl"
    write_recording(path, [0.0, 0.1, 0.2, 60.0])
    seen = Recorded()
    feed = HostFeed(
        "127.0.0.1",
        seen,
        remote_python=sys.executable,
        interval=0.25,
        extra_ssh_options=server.options(),
        agent_args=replay_args(path),
    )
    feeds.append(feed)
    feed.start()
    wait_until(lambda: feed.state == STALE, 15, "stale")
    assert seen.states() == [CONNECTING, LIVE, STALE]
    assert "no snapshot for" in feed.status.reason
    assert feed.status.snapshot.time == 1_765_432_100.2  # the last one is kept


def test_two_hosts_live_and_a_dead_one_refused(server, recording, feeds):
    path, _ = recording
    seen = Recorded()
    multi = MultiHostFeed(
        ["alpha", "beta", "dead"],
        seen,
        remote_python=sys.executable,
        extra_ssh_options=("-F", str(server.config)),
        agent_args=replay_args(path),
        backoff_initial=30,
    )
    feeds.append(multi)
    multi.start()
    wait_until(
        lambda: (
            all(multi.statuses()[h].state == LIVE for h in ("alpha", "beta"))
            and multi.statuses()["dead"].state == FAILED
        ),
        20,
        "alpha, beta live; dead failed",
    )
    dead = multi.statuses()["dead"]
    assert "connection refused" in dead.reason and "\n" not in dead.reason
    assert dead.retry_at is not None
    # The dead host does not hold the others back: both keep streaming.
    before = {h: multi.statuses()[h].last_snapshot_at for h in ("alpha", "beta")}
    wait_until(
        lambda: all(multi.statuses()[h].last_snapshot_at != before[h] for h in ("alpha", "beta")),
        10,
        "more snapshots",
    )
    assert multi.statuses()["alpha"].snapshot.host == "rec-node"
    pids = [f.pid for f in multi.feeds.values() if f.pid]
    assert len(pids) == 2
    multi.stop(timeout=5)
    for pid in pids:  # reaped: no zombie, no process
        assert not Path(f"/proc/{pid}").exists()


def test_connection_killed_then_recovers(server, recording, feeds):
    path, _ = recording
    seen = Recorded()
    feed = HostFeed(
        "alpha",
        seen,
        remote_python=sys.executable,
        extra_ssh_options=("-F", str(server.config)),
        agent_args=replay_args(path),
        backoff_initial=0.5,
    )
    feeds.append(feed)
    feed.start()
    wait_until(lambda: feed.state == LIVE, 20, "live")
    # 1. the ssh client dies
    os.kill(feed.pid, signal.SIGKILL)
    wait_until(lambda: feed.state == FAILED, 10, "failed after the client was killed")
    assert "killed" in feed.status.reason
    wait_until(lambda: feed.state == LIVE and feed.status.attempts == 2, 20, "live again")
    # 2. the server drops the connection (sshd's session process killed)
    sessions = wait_until(server.session_pids, 5, "an sshd session")
    for pid in sessions:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: feed.status.attempts >= 3 and feed.state == LIVE, 20, "live a third time")
    states = seen.states()
    assert states[:4] == [CONNECTING, LIVE, FAILED, CONNECTING], states
    assert states.count(LIVE) >= 3
    failed = [s.reason for s in seen.items if s.state == FAILED]
    assert failed[0] == "ssh to alpha was killed (SIGKILL)"
    assert failed[1] == "connection to alpha closed by the remote side", failed


def test_remote_without_vramtui(server, tmp_path, feeds):
    # An interpreter that cannot see vramtui (isolated: no PYTHONPATH, no site-packages) ...
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    # ... and one that does not exist.
    for python in (str(bare), "/nonexistent/bin/python3"):
        feed = HostFeed(
            "127.0.0.1",
            remote_python=python,
            extra_ssh_options=server.options(),
            backoff_initial=30,
        )
        feeds.append(feed)
        feed.start()
        wait_until(lambda f=feed: f.state == FAILED, 20, f"failed ({python})")
        reason = feed.status.reason
        assert reason.startswith(
            "vramtui is not installed on 127.0.0.1: install it there as the README's Set up "
            "does (`pip install .` in a vramtui checkout), or pass --remote-python"
        ), reason
        feed.stop()


def test_watch_once_json_through_the_cli(server, monkeypatch, capsys):
    """`vramtui watch --ssh alpha dead --once --json`: the live agent here has no NVIDIA driver,
    so alpha answers with an error snapshot; dead fails; exit 0 (one host answered)."""
    from vramtui.cli import main

    monkeypatch.setattr(feed_ssh, "DEFAULT_SSH_OPTIONS", ("-F", str(server.config)))
    start = time.monotonic()
    rc = main(
        ["watch", "--ssh", "alpha", "dead", "--once", "--json", "--remote-python", sys.executable]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert time.monotonic() - start < feed_ssh.ONCE_TIMEOUT
    data = json.loads(out)
    assert set(data) == {"alpha", "dead"}
    assert data["alpha"]["schema"] == 1 and "gpus" in data["alpha"]
    assert data["dead"]["state"] == FAILED and "connection refused" in data["dead"]["reason"]
    assert ssh_children() == []

    rc = main(["watch", "--ssh", "dead", "--once", "--json"])
    assert rc == 1
    assert json.loads(capsys.readouterr().out)["dead"]["state"] == FAILED


def test_auth_and_host_key_failures(server, tmp_path, feeds):
    other = tmp_path / "other_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-f", str(other)], check=True, timeout=30
    )
    wrong_key = list(server.options())
    wrong_key[wrong_key.index(str(server.key))] = str(other)
    unknown = [  # ssh keeps the first value of an option: these go before the fixture's
        "-o",
        f"UserKnownHostsFile={tmp_path / 'empty_known_hosts'}",
        "-o",
        "StrictHostKeyChecking=yes",
        *server.options(),
    ]
    cases = [
        (wrong_key, "authentication failed: add your key (ssh-add) or check ~/.ssh/config"),
        (unknown, "host key verification failed for 127.0.0.1: connect once with `ssh"),
    ]
    for options, expected in cases:
        feed = HostFeed(
            "127.0.0.1",
            remote_python=sys.executable,
            extra_ssh_options=options,
            backoff_initial=30,
        )
        feeds.append(feed)
        feed.start()
        wait_until(lambda f=feed: f.state == FAILED, 20, f"failed ({expected[:30]})")
        assert feed.status.reason.startswith(expected), feed.status.reason
        feed.stop()


def test_watch_streams_json_until_ctrl_c(server, tmp_path, monkeypatch, capsys):
    """`vramtui watch --ssh alpha --json --record F`: status lines until Ctrl-C (simulated with
    interrupt_main), exit 0, ssh processes gone, the snapshots recorded."""
    import _thread

    from vramtui.cli import main
    from vramtui.feed.record import read_recording

    monkeypatch.setattr(feed_ssh, "DEFAULT_SSH_OPTIONS", ("-F", str(server.config)))
    record = tmp_path / "watched.jsonl"
    timer = threading.Timer(3.0, _thread.interrupt_main)
    timer.start()
    try:
        rc = main(
            [
                "watch",
                "--ssh",
                "alpha",
                "--json",
                "--interval",
                "0.25",
                "--record",
                str(record),
                "--remote-python",
                sys.executable,
            ]
        )
    finally:
        timer.cancel()
    assert rc == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"host": "alpha", "state": CONNECTING, "snapshot": None}
    live = [x for x in lines if x["state"] == LIVE]
    assert len(live) >= 3 and all(x["snapshot"]["schema"] == 1 for x in live)
    assert len({x["snapshot"]["time"] for x in live}) == len(live)  # one line per snapshot
    wait_until(lambda: not ssh_children(), 5, "the ssh client to be reaped")
    _, recorded = read_recording(record)
    assert [s.time for s in recorded] == [x["snapshot"]["time"] for x in live]
