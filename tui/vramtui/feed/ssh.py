"""Many nodes over SSH: one `ssh HOST python3 -m vramtui.agent` per host, parsed into Snapshots.

The system's OpenSSH client is used as is, so ~/.ssh/config, ssh-agent, ProxyJump and keys
work exactly as they do for the user's own `ssh HOST`. Nothing is passed through a shell on
this side (an argument list goes to subprocess) and the remote side gets fixed words only: the
host and the remote interpreter are validated, everything else is built here.

Each host runs in its own thread (`HostFeed`) with a small state machine:

    connecting --first snapshot--> live --no snapshot for 3 x interval--> stale
        ^                                                                   |
        +---- back-off (1, 2, 4 ... 30 s) <---- failed: <reason> <----------+ (ssh exits)

A host that fails never stops the others; `MultiHostFeed` holds them and stops them all
(terminate, bounded wait, then kill: no zombies). The `watch --ssh` command over them is
`vramtui.feed.ssh_watch`.
Plain Python: no Textual here.
"""

from __future__ import annotations

import ipaddress
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vramtui.agent import AGENT_PROTOCOL
from vramtui.feed.poller import DEFAULT_PROCESS_INTERVAL, check_interval
from vramtui.feed.sample import FeedError, Snapshot, snapshot_from_json
from vramtui.guarded_read import Unreadable, decode_json

CONNECTING = "connecting"
LIVE = "live"
STALE = "stale"
FAILED = "failed"
STATES = (CONNECTING, LIVE, STALE, FAILED)

SSH_BASE_OPTIONS = (
    "-T",
    "-o",
    "BatchMode=yes",
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=3",
    "-o",
    "ConnectTimeout=10",
)
# Extra ssh options used by watch_hosts when the CLI gives none (tests point this at a
# generated ssh_config with ("-F", path)).
DEFAULT_SSH_OPTIONS: tuple[str, ...] = ()

STALE_FACTOR = 3.0  # live -> stale after this many intervals without a snapshot
BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 30.0
ONCE_TIMEOUT = 20.0  # watch --once: the longest wait for every host to answer or fail
MAX_LINE = 4 * 1024 * 1024  # a longer line without a newline is a protocol error
STDERR_LINES = 40

_MAX_HOST_LEN = 255
_SHELL_META = set("`$;&|<>(){}*?!#'\"\\~^,=%")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_USER_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.@-]*$")
_PATH_RE = re.compile(r"^~?[A-Za-z0-9_./+:-]+$")
_WORD_RE = re.compile(r"^[A-Za-z0-9_./+:=-]+$")


# ---------------------------------------------------------------- validation and argv


def _refuse(kind: str, text: str, rule: str) -> FeedError:
    shown = text if len(text) <= 60 else text[:57] + "..."
    return FeedError(f"{kind} {shown!r} refused: {rule}")


def _common_checks(kind: str, text: str) -> None:
    if not isinstance(text, str) or not text:
        raise FeedError(
            f"empty {kind} refused: give a host name, user@host or an ssh_config alias"
            if kind == "host"
            else f"empty {kind} refused"
        )
    if text.startswith("-"):
        raise _refuse(kind, text, "it must not start with '-' (ssh would read it as an option)")
    if any(ch.isspace() for ch in text):
        raise _refuse(kind, text, "it must not contain whitespace")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise _refuse(kind, text, "it must not contain control characters")
    bad = sorted({ch for ch in text if ch in _SHELL_META} - ({"~"} if kind != "host" else set()))
    if bad:
        raise _refuse(kind, text, f"it must not contain shell metacharacters ({''.join(bad)})")


def validate_host(text: str) -> str:
    """Return the ssh destination for `text` (`host`, `user@host`, an alias, IPv4, [IPv6]).

    Refuses (FeedError, one line naming the host and the rule) anything that could be read
    as an ssh option or by a shell: a leading '-', whitespace, control characters, shell
    metacharacters. `host:port` is refused with the fix (OpenSSH takes the port with -p or
    `Port` in ~/.ssh/config). `[IPv6]` is returned without brackets, as ssh wants it.
    """
    _common_checks("host", text)
    if len(text) > _MAX_HOST_LEN:
        raise _refuse("host", text, f"longer than {_MAX_HOST_LEN} characters")
    user, at, name = text.rpartition("@")
    if at and (not user or not _USER_RE.match(user)):
        raise _refuse(
            "host", text, "the user before '@' may hold letters, digits, '.', '_' and '-' only"
        )
    if not name:
        raise _refuse("host", text, "no host name after '@'")
    if name.startswith("[") or name.endswith("]"):
        inner = name[1:-1] if name.startswith("[") and name.endswith("]") else ""
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise _refuse("host", text, "brackets are for IPv6 addresses only ([2001:db8::1])")
        return f"{user}@{inner}" if at else inner
    if ":" in name:
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            raise _refuse(
                "host",
                text,
                "no ':port' here: OpenSSH takes the port with -p, so put `Port N` under a "
                "`Host` alias in ~/.ssh/config and give the alias",
            )
        return text
    if name.startswith("-"):
        raise _refuse("host", text, "the host name must not start with '-'")
    if not _NAME_RE.match(name):
        raise _refuse("host", text, "a host name may hold letters, digits, '.', '_' and '-' only")
    return text


def validate_remote_python(text: str) -> str:
    """Return `text` if it is a plain interpreter name or path (`python3`, `~/venv/bin/python`)."""
    _common_checks("remote python", text)
    if "~" in text[1:]:
        raise _refuse("remote python", text, "'~' is allowed only at the start (~/venv/bin/python)")
    if not _PATH_RE.match(text):
        raise _refuse(
            "remote python",
            text,
            "an interpreter path may hold letters, digits and . _ / + : - only",
        )
    return text


_AGENT_FLAGS = ("--replay", "--speed", "--loop", "--once", "--process-interval")


def _validate_word(text: str) -> str:
    if text in _AGENT_FLAGS:
        return text
    _common_checks("agent argument", text)
    if not _WORD_RE.match(text):
        raise _refuse("agent argument", text, "letters, digits and . _ / + : = - only")
    return text


def _interval_word(interval: float) -> str:
    return repr(check_interval(interval, "--interval"))


def agent_argv(
    host: str,
    remote_python: str = "python3",
    interval: float = 1.0,
    extra_ssh_options: Sequence[str] = (),
    *,
    agent_args: Sequence[str] = (),
) -> list[str]:
    """The argument list (no shell) that runs the agent on `host` through the system ssh.

    `extra_ssh_options` go before `--` (e.g. ("-F", cfg) or ("-p", "2222")); ssh keeps the
    first value of an option, so they cannot loosen BatchMode or the keep-alives above, and
    the command line wins over ~/.ssh/config. `agent_args` are extra fixed words for the agent
    (its own flags, e.g. ("--replay", path)), each validated like a path.
    """
    destination = validate_host(host)
    python = validate_remote_python(remote_python)
    extra = [str(o) for o in extra_ssh_options]
    if "--" in extra:
        raise FeedError("extra ssh options refused: they must not contain '--'")
    words = [_validate_word(str(a)) for a in agent_args]
    return [
        "ssh",
        *SSH_BASE_OPTIONS,
        *extra,
        "--",
        destination,
        python,
        "-m",
        "vramtui.agent",
        "--interval",
        _interval_word(interval),
        *words,
    ]


# ---------------------------------------------------------------- failure reasons


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_NOISE = (
    "Warning: Permanently added",
    "** WARNING: connection is not using a post-quantum",
    "** This session may be vulnerable",
    "** The server may need to be upgraded",
)


def explain_failure(host: str, stderr: str, returncode: int | None) -> str:
    """One actionable line for why ssh (or the remote agent) ended, from ssh's stderr."""
    text = stderr or ""
    low = text.lower()
    install = (
        f"vramtui is not installed on {host}: install it there as the README's Set up does "
        f"(`pip install .` in a vramtui checkout), or pass --remote-python "
        "/path/to/venv/bin/python"
    )
    if "could not resolve hostname" in low or "name or service not known" in low:
        return f"cannot resolve host name {host}: check the name or its HostName in ~/.ssh/config"
    if "connection refused" in low:
        return f"connection refused by {host}: is sshd running there, and is the port right?"
    if "host key verification failed" in low or "remote host identification has changed" in low:
        return (
            f"host key verification failed for {host}: connect once with `ssh {host}` to "
            "accept its key, or fix the entry in ~/.ssh/known_hosts"
        )
    if "permission denied" in low and (
        "publickey" in low or "password" in low or "keyboard-interactive" in low or "gssapi" in low
    ):
        return "authentication failed: add your key (ssh-add) or check ~/.ssh/config"
    if "too many authentication failures" in low:
        return "authentication failed (too many keys offered): set IdentitiesOnly/IdentityFile in ~/.ssh/config"
    if "timed out" in low and ("connect" in low or "banner" in low):
        return f"connection to {host} timed out: check the host name, the network or ProxyJump"
    if "no route to host" in low or "network is unreachable" in low:
        return f"no route to {host}: check the network, VPN or ProxyJump"
    if "not responding" in low or "timeout, server" in low:
        return f"connection to {host} lost: the server stopped answering keep-alives"
    if (
        re.search(r"no module named '?vramtui\.agent'?", low)
        and "no module named 'vramtui'" not in low
    ):
        return (
            f"vramtui on {host} has no agent (too old): reinstall it there from an up-to-date "
            "checkout (`pip install .`), or pass --remote-python /path/to/venv/bin/python"
        )
    if re.search(r"no module named '?vramtui", low):
        return install
    if "command not found" in low or "no such file or directory" in low or "not found" in low:
        return install
    if "no module named" in low:
        m = re.search(r"no module named '?([A-Za-z0-9_.]+)", text, re.IGNORECASE)
        mod = m.group(1) if m else "a module"
        return (
            f"the agent on {host} is missing {mod}: reinstall vramtui there from its checkout "
            "(`pip install .`, which installs its dependencies)"
        )
    if (
        re.search(r"connection (to \S+ )?closed", low)
        or "connection reset" in low
        or "broken pipe" in low
    ):
        return f"connection to {host} closed by the remote side"
    lines = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip() and not any(ln.strip().startswith(n) for n in _NOISE)
    ]
    last = _one_line(lines[-1]) if lines else ""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"ssh to {host} was killed ({name})" + (f": {last}" if last else "")
    if returncode == 0:
        return f"the agent on {host} exited" + (f": {last}" if last else "")
    if returncode == 255:
        return f"ssh to {host} failed" + (f": {last}" if last else " (exit 255)")
    if returncode is None:
        return f"ssh to {host} ended" + (f": {last}" if last else "")
    return f"the agent on {host} exited with code {returncode}" + (f": {last}" if last else "")


# ---------------------------------------------------------------- one host


@dataclass(frozen=True)
class HostStatus:
    """What one host looks like now. `state` is connecting / live / stale / failed."""

    host: str
    state: str
    reason: str | None = None  # why it failed (one actionable line), or why it is stale
    snapshot: Snapshot | None = None  # the latest snapshot, kept across stale/failed
    header: dict | None = None  # the agent's header line of the current connection
    since: float = 0.0  # time.monotonic() when the state was entered
    last_snapshot_at: float | None = None  # time.monotonic() of the latest snapshot
    attempts: int = 0  # connections started so far
    retry_at: float | None = None  # time.monotonic() of the next attempt, when failed

    @property
    def label(self) -> str:
        return (
            f"{self.state}: {self.reason}" if self.state == FAILED and self.reason else self.state
        )


class _Protocol(Exception):
    """A line the agent should not have sent: ends the connection with this reason."""


class HostFeed:
    """One ssh subprocess to one host, in one thread, reconnecting with back-off.

    `on_update(status)` is called from the feed's thread on every state change and every
    snapshot; it must be quick and thread-safe (a Textual app: `call_from_thread`).
    """

    def __init__(
        self,
        host: str,
        on_update: Callable[[HostStatus], None] | None = None,
        *,
        remote_python: str = "python3",
        interval: float = 1.0,
        extra_ssh_options: Sequence[str] = (),
        agent_args: Sequence[str] = (),
        stale_after: float | None = None,
        dead_after: float | None = None,
        backoff_initial: float = BACKOFF_INITIAL,
        backoff_max: float = BACKOFF_MAX,
        backoff_reset_after: float | None = None,
    ) -> None:
        self.host = validate_host(host)
        self.interval = float(_interval_word(interval))
        self.argv = agent_argv(
            self.host, remote_python, self.interval, extra_ssh_options, agent_args=agent_args
        )
        self.on_update = on_update
        self.stale_after = STALE_FACTOR * self.interval if stale_after is None else stale_after
        # No snapshot at all for this long (stale, or connecting) ends the connection.
        self.dead_after = max(30.0, 10 * self.interval) if dead_after is None else dead_after
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.backoff_reset_after = (
            max(5.0, 5 * self.interval) if backoff_reset_after is None else backoff_reset_after
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._failures = 0
        self._status = HostStatus(self.host, CONNECTING, since=time.monotonic())

    # -- public

    @property
    def status(self) -> HostStatus:
        with self._lock:
            return self._status

    @property
    def state(self) -> str:
        return self.status.state

    @property
    def pid(self) -> int | None:
        """The current ssh client's process id (None between connections)."""
        with self._lock:
            return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> HostFeed:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"vramtui-ssh-{self.host}", daemon=True
            )
            self._thread.start()
        return self

    def request_stop(self) -> None:
        """Ask the thread to end and terminate the ssh process (returns at once)."""
        self._stop.set()
        with self._lock:
            proc = self._proc
        if proc is not None:
            _terminate(proc)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and the ssh process: terminate, wait up to `timeout`, then kill."""
        self.request_stop()
        self.join(timeout)

    def join(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            proc = self._proc
        if proc is not None:  # the thread did not finish in time: kill its ssh here
            _reap(proc, max(0.1, deadline - time.monotonic()), close_streams=False)

    # -- internals

    def _set(self, **changes: Any) -> None:
        with self._lock:
            old = self._status
            if "state" in changes and changes["state"] != old.state:
                changes.setdefault("since", time.monotonic())
            new = HostStatus(**{**old.__dict__, **changes})
            self._status = new
        if self.on_update is not None:
            try:
                self.on_update(new)
            except Exception:  # noqa: BLE001, S110 - a broken callback must not kill the feed
                pass

    def _run(self) -> None:
        while not self._stop.is_set():
            live_for, reason = self._connect_once()
            if self._stop.is_set():
                break
            # Back-off: 1, 2, 4 ... capped; back to the start after a live period.
            if live_for is not None and live_for >= self.backoff_reset_after:
                self._failures = 0
            self._failures += 1
            delay = min(self.backoff_initial * 2 ** (self._failures - 1), self.backoff_max)
            self._set(state=FAILED, reason=reason, retry_at=time.monotonic() + delay)
            if self._stop.wait(delay):
                break

    def _connect_once(self) -> tuple[float | None, str]:
        """Run one ssh connection to its end: (how long it was live or None, why it ended)."""
        status = self.status
        self._set(
            state=CONNECTING,
            reason=None,
            header=None,
            attempts=status.attempts + 1,
            retry_at=None,
        )
        try:
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,  # held open: the agent ends when it closes
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C in the terminal reaches us, not ssh
                close_fds=True,
            )
        except FileNotFoundError:
            return None, "ssh client not found: install OpenSSH (openssh-client)"
        except OSError as exc:
            return None, f"cannot start ssh: {_one_line(str(exc))}"
        with self._lock:
            self._proc = proc
        if self._stop.is_set():
            _terminate(proc)
        stderr_lines: deque[str] = deque(maxlen=STDERR_LINES)
        live_since: float | None = None
        reason: str | None = None
        try:
            live_since, reason = self._pump(proc, stderr_lines)
        finally:
            _terminate(proc)
            _reap(proc, 3.0)
            with self._lock:
                self._proc = None
        live_for = None if live_since is None else time.monotonic() - live_since
        if reason is None:
            reason = explain_failure(self.host, "\n".join(stderr_lines), proc.returncode)
        return live_for, reason

    def _pump(self, proc: subprocess.Popen, stderr_lines: deque) -> tuple[float | None, str | None]:
        """Read the agent's lines until ssh ends; (live since, protocol failure reason)."""
        assert proc.stdout is not None and proc.stderr is not None
        sel = selectors.DefaultSelector()
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        os.set_blocking(out_fd, False)
        os.set_blocking(err_fd, False)
        sel.register(out_fd, selectors.EVENT_READ, "out")
        sel.register(err_fd, selectors.EVENT_READ, "err")
        bufs = {"out": b"", "err": b""}
        open_streams = {"out", "err"}
        started = time.monotonic()
        live_since: float | None = None
        header: dict | None = None
        tick = min(0.25, self.stale_after / 3)
        try:
            while "out" in open_streams and not self._stop.is_set():
                for key, _ in sel.select(tick):
                    name = key.data
                    try:
                        chunk = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        sel.unregister(key.fd)
                        open_streams.discard(name)
                        if bufs[name]:
                            chunk = b"\n"  # flush a last line without newline
                        else:
                            continue
                    bufs[name] += chunk
                    *lines, bufs[name] = bufs[name].split(b"\n")
                    if len(bufs[name]) > MAX_LINE:
                        return live_since, f"{self.host} sent a line longer than {MAX_LINE} bytes"
                    for raw in lines:
                        if name == "err":
                            text = raw.decode("utf-8", "replace").rstrip("\r")
                            if text.strip():
                                stderr_lines.append(text)
                            continue
                        if not raw.strip():
                            continue
                        try:
                            header, snap = self._parse(raw, header)
                        except _Protocol as exc:
                            return live_since, str(exc)
                        if snap is None:
                            self._set(header=header)
                            continue
                        now = time.monotonic()
                        if live_since is None:
                            live_since = now
                        self._set(state=LIVE, reason=None, snapshot=snap, last_snapshot_at=now)
                now = time.monotonic()
                status = self.status
                last = status.last_snapshot_at if live_since is not None else None
                quiet_since = last if last is not None else started
                if status.state == LIVE and last is not None and now - last > self.stale_after:
                    self._set(state=STALE, reason=f"no snapshot for {now - last:.1f} s")
                if now - quiet_since > self.dead_after:
                    what = "no snapshot" if live_since is not None else "no answer"
                    return live_since, (
                        f"{what} from {self.host} for {self.dead_after:.0f} s: reconnecting"
                    )
            # stdout closed: give stderr a moment to finish, then the exit status.
            deadline = time.monotonic() + 2.0
            while "err" in open_streams and time.monotonic() < deadline and not self._stop.is_set():
                for key, _ in sel.select(0.1):
                    try:
                        chunk = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        sel.unregister(key.fd)
                        open_streams.discard("err")
                        chunk = b"\n"
                    bufs["err"] += chunk
                    *lines, bufs["err"] = bufs["err"].split(b"\n")
                    for raw in lines:
                        text = raw.decode("utf-8", "replace").rstrip("\r")
                        if text.strip():
                            stderr_lines.append(text)
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass
            return live_since, None
        finally:
            sel.close()

    def _parse(self, raw: bytes, header: dict | None) -> tuple[dict | None, Snapshot | None]:
        shown = _one_line(raw.decode("utf-8", "replace"), 80)
        try:
            data = decode_json(raw)
        except Unreadable as exc:
            if not exc.syntax:  # deep nesting, a huge integer: a hostile or broken agent
                raise _Protocol(f"{self.host} sent a line that {exc.problem} ({shown!r})") from None
            raise _Protocol(
                f"{self.host} sent a line that is not JSON ({shown!r}): check that the "
                "remote shell's startup files print nothing"
            ) from None
        if not isinstance(data, dict):
            raise _Protocol(f"{self.host} sent JSON that is not an object ({shown!r})")
        if header is None:
            if "vramtui_agent" not in data:
                raise _Protocol(
                    f"{self.host} did not start with the agent header ({shown!r}): "
                    "is `vramtui.agent` the vramtui agent?"
                )
            proto = data.get("vramtui_agent")
            if proto != AGENT_PROTOCOL:
                raise _Protocol(
                    f"{self.host} speaks agent protocol {proto!r}, this vramtui speaks "
                    f"{AGENT_PROTOCOL}: install the same vramtui version on both sides"
                )
            return data, None
        try:
            snap = snapshot_from_json(data)
        except FeedError as exc:
            raise _Protocol(
                f"{self.host} sent a snapshot this vramtui cannot read: {exc}"
            ) from None
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise _Protocol(
                f"{self.host} sent a malformed snapshot ({type(exc).__name__}: {exc})"
            ) from None
        return header, snap


def _terminate(proc: subprocess.Popen) -> None:
    """SIGTERM the ssh process group (ssh and any ProxyCommand), closing its stdin first."""
    try:
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
    except OSError:
        pass
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        try:
            proc.terminate()
        except ProcessLookupError:
            pass


def _reap(proc: subprocess.Popen, timeout: float, close_streams: bool = True) -> None:
    """Wait for the process; kill it (and its group) if it outlives `timeout`."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
    if not close_streams:  # another thread may still be reading them
        return
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


# ---------------------------------------------------------------- many hosts


class MultiHostFeed:
    """One HostFeed per host; `on_update(status)` from any of their threads.

    Use as a context manager, or call start() and stop(). Duplicate hosts are merged.
    """

    def __init__(
        self,
        hosts: Iterable[str],
        on_update: Callable[[HostStatus], None] | None = None,
        **feed_options: Any,
    ) -> None:
        names: list[str] = []
        for h in hosts:
            name = validate_host(h)
            if name not in names:
                names.append(name)
        if not names:
            raise FeedError("no hosts given: name at least one (--ssh HOST ...)")
        self.on_update = on_update
        self.feeds: dict[str, HostFeed] = {
            name: HostFeed(name, on_update, **feed_options) for name in names
        }

    @property
    def hosts(self) -> list[str]:
        return list(self.feeds)

    def statuses(self) -> dict[str, HostStatus]:
        return {name: feed.status for name, feed in self.feeds.items()}

    def start(self) -> MultiHostFeed:
        for feed in self.feeds.values():
            feed.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate every ssh process, wait up to `timeout` in all, then kill what is left."""
        for feed in self.feeds.values():
            feed.request_stop()
        deadline = time.monotonic() + timeout
        for feed in self.feeds.values():
            feed.join(max(0.1, deadline - time.monotonic()))

    def __enter__(self) -> MultiHostFeed:  # noqa: PYI034 - not subclassed
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------- ssh options


def _ssh_options_from(args: Any) -> list[str]:
    options: list[str] = list(DEFAULT_SSH_OPTIONS)
    cfg = getattr(args, "ssh_config", None)
    if cfg:
        options += ["-F", str(cfg)]
    for opt in getattr(args, "ssh_option", None) or ():
        options += ["-o", str(opt)]
    return options


def agent_args_for(process_interval: float | None) -> tuple[str, ...]:
    """The agent's extra flags for a process-poll interval (none for the default)."""
    if process_interval is not None and float(process_interval) != DEFAULT_PROCESS_INTERVAL:
        return ("--process-interval", _interval_word(process_interval))
    return ()
