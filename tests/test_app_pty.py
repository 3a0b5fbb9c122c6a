"""The real app in a pseudo-terminal, as a user's terminal runs it: it draws, takes keys, and
keeps the edits in a draft when the terminal hangs up (SIGHUP, or the terminal itself closing);
a malformed spec stops it before the UI starts, with one line and exit status 2.

Every wait is bounded and the child is killed in a `finally`.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from vramtui.drafts import read_draft
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_specs" / "seed-7b-fp16-inference.toml"
COLS, ROWS = 120, 40
ANSI = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals"),
    pytest.mark.solo,  # alone, after the parallel pass: a real terminal's key timing
]


def child_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update(
        PYTHONPATH=str(REPO / "tui"),
        VRAMTUI_STATE_DIR=str(tmp_path / "state"),
        VRAMTUI_CONFIG_DIR=str(tmp_path / "config"),
        TERM="xterm-256color",
        TEXTUAL_ANIMATIONS="none",
    )
    return env


class PtyApp:
    """`python -m vramtui ARGS` on the slave side of a pty of COLS x ROWS, which is also its
    controlling terminal (so closing the master hangs it up, as a dropped SSH session does)."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.raw = b""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vramtui", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)

    @property
    def text(self) -> str:
        return ANSI.sub(b"", self.raw).decode("utf-8", "replace")

    def read_for(self, seconds: float, until=None) -> bool:
        """Drain the output for up to `seconds`; True as soon as `until(text)` holds."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:  # EIO: the child closed its side
                    data = b""
                if not data:
                    return bool(until and until(self.text))
                self.raw += data
            if until is not None and until(self.text):
                return True
        return False

    def wait_for(self, needle: str, seconds: float = 40) -> None:
        if not self.read_for(seconds, lambda t: needle in t):
            tail = self.text[-1500:]
            raise AssertionError(f"{needle!r} not on screen within {seconds} s; tail:\n{tail}")

    def type(self, data: str) -> None:
        os.write(self.master, data.encode())

    def wait_exit(self, seconds: float) -> int | None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return self.proc.returncode
            if self.master >= 0:
                self.read_for(0.05)
            else:
                time.sleep(0.05)
        return self.proc.poll()

    def hang_up(self) -> None:
        os.close(self.master)
        self.master = -1

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


@pytest.fixture
def seed_copy(tmp_path: Path) -> Path:
    spec = tmp_path / "seed.toml"
    shutil.copy(SEED, spec)
    return spec


def start_and_edit(tmp_path: Path, spec: Path) -> PtyApp:
    """Start the app, wait for the ledger, type a new name into the Name field."""
    app = PtyApp([str(spec)], child_env(tmp_path), cwd=tmp_path)
    try:
        app.wait_for("Manual reserve (6 GiB)")  # the ledger has drawn: the first full frame
        app.read_for(1.0)  # keys sent at the very first frame can land before the focus settles
        # Focus starts in the form's first input (Name), its text selected: typing replaces it.
        app.type("pty edit")
        app.wait_for("(modified)")  # the title says the session holds an unsaved edit
    except BaseException:
        app.close()  # not yet the caller's to close: never leave a running instance behind
        raise
    return app


def assert_draft_has_the_edit(tmp_path: Path, spec: Path) -> None:
    drafts = list((tmp_path / "state" / "drafts").glob("*.toml"))
    assert len(drafts) == 1, drafts
    # named after the spec file: its stem, then a hash of its path
    assert re.fullmatch(r"seed-[0-9a-f]{10}\.toml", drafts[0].name), drafts[0].name
    draft = read_draft(drafts[0])
    assert draft is not None, "no draft written"
    assert draft.form["name"] == "pty edit"
    assert Path(draft.origin).resolve() == spec.resolve()


def test_sighup_saves_the_draft_and_exits(tmp_path, seed_copy):
    app = start_and_edit(tmp_path, seed_copy)
    try:
        # The exit note below proves the SIGHUP handler wrote the draft (under load the 1 s
        # autosave may have written one already, so the file's absence is not checked).
        app.proc.send_signal(signal.SIGHUP)
        code = app.wait_exit(20)
        app.read_for(0.5)
        assert code == 0, app.text[-1500:]
        assert "Traceback" not in app.text
        assert "received SIGHUP: draft saved to" in app.text
    finally:
        app.close()
    assert_draft_has_the_edit(tmp_path, seed_copy)


def test_terminal_hang_up_saves_the_draft(tmp_path, seed_copy):
    """Closing the master side is what a dropped connection does: the kernel sends SIGHUP and
    the terminal is gone, so the exit note cannot be written (that used to end in an OSError
    traceback and exit status 1)."""
    app = start_and_edit(tmp_path, seed_copy)
    try:
        app.hang_up()
        code = app.wait_exit(20)
        assert code == 0
    finally:
        app.close()
    assert_draft_has_the_edit(tmp_path, seed_copy)


def test_malformed_spec_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('schema_version = 1\n[model\nid = "x"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", str(bad)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=child_env(tmp_path),
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""  # the UI never started (no escape sequences, no alternate screen)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("vramtui: error: malformed TOML in ")
    assert "line 2" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "state").exists()  # no draft, nothing written


def wait_for_file(pattern_dir: Path, count: int, seconds: float = 20) -> list[Path]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = sorted(pattern_dir.glob("*.toml")) if pattern_dir.is_dir() else []
        if len(found) >= count:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{count} drafts not written within {seconds} s")


def start_and_type(args: list[str], tmp_path: Path, text: str) -> PtyApp:
    app = PtyApp(args, child_env(tmp_path), cwd=tmp_path)
    try:
        app.wait_for("Manual reserve (6 GiB)")
        app.read_for(1.0)
        app.type(text)
        app.wait_for("(modified)")
    except BaseException:
        app.close()  # not yet the caller's to close: never leave a running instance behind
        raise
    return app


@pytest.mark.parametrize(
    "specs, kill_order",
    [(("one.toml", "two.toml"), (0, 1)), ((None, None), (1, 0))],
    ids=["two-specs", "two-new-specs"],
)
def test_two_instances_killed_leave_both_drafts(tmp_path, specs, kill_order):
    """Two real instances (two specs, or two new unsaved specs) edited, then SIGKILLed (no
    handler runs): both drafts stay, and a new start lists both and recovers each."""
    args = []
    for name in specs:
        if name is None:
            args.append([])
        else:
            shutil.copy(SEED, tmp_path / name)
            args.append([str(tmp_path / name)])
    drafts = tmp_path / "state" / "drafts"
    apps = []
    try:
        for i, a in enumerate(args):
            apps.append(start_and_type(a, tmp_path, f"edit {i}"))
        wait_for_file(drafts, 2)  # the 1 s autosave of each
        for i in kill_order:
            apps[i].proc.send_signal(signal.SIGKILL)
            assert apps[i].wait_exit(10) == -signal.SIGKILL
    finally:
        for app in apps:
            app.close()
    files = sorted(drafts.glob("*.toml"))
    assert sorted(read_draft(f).form["name"] for f in files) == ["edit 0", "edit 1"]

    # the next start lists both; recover the first and save it; the next start the other
    for round_ in range(2):
        app = PtyApp([], child_env(tmp_path), cwd=tmp_path)
        try:
            app.wait_for("2 unsaved drafts were found" if round_ == 0 else "An unsaved draft")
            app.wait_for("Skip")
            if round_ == 0:  # one line each: its spec, age and what differs
                for name, spec in zip(("edit 0", "edit 1"), specs):
                    app.wait_for(f"{name} ({spec or 'new spec'}), just now: 1 field differs: name")
            app.read_for(0.5)
            app.type("r")
            app.wait_for("draft recovered")
            app.type("\x13")  # ctrl+s: a spec file is saved; a new spec asks for a file
            if specs[0] is None:
                app.wait_for("Save spec as")
                app.read_for(0.5)  # the prompt takes the focus, its text selected
                app.type(str(tmp_path / f"saved-{round_}.toml"))
                app.wait_for(f"saved-{round_}.toml")
                app.type("\r")
            # the save removes the recovered draft (this instance's own now)
            assert app.read_for(20, lambda _: len(list(drafts.glob("*.toml"))) == 1 - round_)
            app.type("\x11")  # ctrl+q
            assert app.wait_exit(20) == 0
        finally:
            app.close()
    saved = (
        [load_spec(tmp_path / n).name for n in specs]
        if specs[0] is not None
        else [load_spec(tmp_path / f"saved-{i}.toml").name for i in (0, 1)]
    )
    assert sorted(saved) == ["edit 0", "edit 1"]
    assert list(drafts.glob("*.toml")) == []
