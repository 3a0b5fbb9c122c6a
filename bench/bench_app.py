"""How fast is the terminal app?

1. First frame: wall time from starting `python -m vramtui SPEC` in a 120x40 pseudo-terminal
   to the first screen that shows the ledger title (the model and its parameter count), N runs,
   median and min. `python -c "import vramtui.app.app"` (the imports alone) is timed beside it.
2. Keystroke to ledger, in process (Textual's headless Pilot): a digit typed into Prompt tokens
   of the Llama 3.1 8B chat spec, from the key press to the ledger table showing the new KV
   cache size; and the app's own handling of that edit (set_field, the form, both panes).
   The same keys written to the real app in the pty: from the write to the new KV cache size
   in what the app writes back (what a user waits for).
3. `SizingSession.set_field` alone (parse, validate, estimate, shortlist), many iterations.

    PYTHONPATH=tui python bench/bench_app.py [-n 10] [--keys 40] [--iterations 500] [--save]

--save writes the report to bench/results/app-<YYYY-MM-DD>.txt as well. Start-up runs with a
bytecode cache in a temporary PYTHONPYCACHEPREFIX (as an installed package has), and with a
throw-away VRAMTUI_STATE_DIR / VRAMTUI_CONFIG_DIR (no draft to offer, no user config).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import fcntl
import os
import platform
import re
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
CHAT_SPEC = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
LEDGER_TITLE = "meta-llama/Llama-3.1-8B-Instruct · 8,030,261,248 params"
COLS, ROWS = 120, 40
ANSI = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")

if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def child_env(scratch: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        PYTHONPATH=str(SRC),
        PYTHONPYCACHEPREFIX=os.path.join(scratch, "pycache"),
        VRAMTUI_STATE_DIR=os.path.join(scratch, "state"),
        VRAMTUI_CONFIG_DIR=os.path.join(scratch, "config"),
        TERM="xterm-256color",
        TEXTUAL_ANIMATIONS="none",
    )
    return env


def time_first_frame(env: dict[str, str], timeout: float = 60.0) -> float:
    """Seconds from spawning the app in a pty to the ledger title on screen."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vramtui", str(CHAT_SPEC)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=REPO,
        start_new_session=True,
    )
    os.close(slave)
    raw = b""
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([master], [], [], 0.01)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            if not data:
                break
            raw += data
            if LEDGER_TITLE in ANSI.sub(b"", raw).decode("utf-8", "replace"):
                return time.perf_counter() - t0
        tail = ANSI.sub(b"", raw).decode("utf-8", "replace")[-800:]
        raise RuntimeError(f"the ledger title did not appear within {timeout} s:\n{tail}")
    finally:
        proc.kill()
        proc.wait(timeout=10)
        os.close(master)


class PtyApp:
    """The app on a 120x40 pseudo-terminal; `raw` is everything it has written."""

    def __init__(self, env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vramtui", str(CHAT_SPEC)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        os.close(slave)
        self.raw = b""

    def wait_for(self, needle: str, since: int = 0, timeout: float = 30.0) -> float:
        """Seconds until `needle` shows in the output written after byte `since`."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            if needle in ANSI.sub(b"", self.raw[since:]).decode("utf-8", "replace"):
                return time.perf_counter() - t0
            ready, _, _ = select.select([self.master], [], [], 0.005)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    data = b""
                if not data:
                    break
                self.raw += data
        raise RuntimeError(f"{needle!r} did not appear within {timeout} s")

    def send(self, keys: str) -> int:
        mark = len(self.raw)
        os.write(self.master, keys.encode())
        return mark

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self.master)


def kv_texts() -> tuple[str, str]:
    """The KV cache size the ledger shows for 8000 and for 80001 prompt tokens (GiB)."""
    from vramtui.ledger import estimate
    from vramtui.models.resolve import resolve_model
    from vramtui.spec import load_spec
    from vramtui.units import format_bytes_readable

    out = []
    for tokens in (8000, 80001):
        spec = load_spec(CHAT_SPEC)
        spec = replace(spec, lengths=replace(spec.lengths, prompt_tokens=tokens))
        arch, ckpt = resolve_model(spec.model, CHAT_SPEC.parent)
        est = estimate(spec, arch, ckpt)
        kv = next(i for i in est.items if i.name.startswith("KV cache"))
        per_gpu = max(max(kv.gpu_bytes_at(s, est.layout)) for s in kv.stages)
        out.append(format_bytes_readable(per_gpu, "gib"))
    return out[0], out[1]


def time_pty_keystrokes(env: dict[str, str], keys: int, tabs: int) -> list[float]:
    """Key written to the pty -> the new KV cache size written back by the app."""
    small, large = kv_texts()
    app = PtyApp(env)
    try:
        app.wait_for(LEDGER_TITLE)
        time.sleep(1.0)  # keys sent right at the first frame can land before focus settles
        app.send("\t" * tabs)  # to Prompt tokens (its text gets selected on focus)
        time.sleep(0.5)
        mark = app.send("\x1b[F")  # End: keep the text, cursor after it
        time.sleep(0.3)
        times = []
        for i in range(keys):
            key, expect = ("1", large) if i % 2 == 0 else ("\x7f", small)
            t0 = time.perf_counter()
            mark = app.send(key)
            app.wait_for(expect, since=mark, timeout=10)
            times.append(time.perf_counter() - t0)
            time.sleep(0.05)
        return times
    finally:
        app.close()


def time_command(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def bench_pty_keystroke(keys: int, tabs: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="vramtui-bench-app-") as scratch:
        times = time_pty_keystrokes(child_env(scratch), keys, tabs)
    return [
        f"keystroke -> frame, real app in a {COLS}x{ROWS} pty, {keys} keys into Prompt tokens "
        "(8000 <-> 80001)",
        f"  key written -> new KV cache size on screen  median "
        f"{statistics.median(times) * 1e3:7.1f} ms   min {min(times) * 1e3:7.1f} ms   "
        f"max {max(times) * 1e3:7.1f} ms",
    ]


def bench_first_frame(runs: int) -> list[str]:
    lines = [
        f"first frame: {runs} runs (after one warm-up run), {COLS}x{ROWS} pty, "
        f"{CHAT_SPEC.name}, spawn -> ledger title on screen",
        f"{'':<44} {'median ms':>10} {'min ms':>9}",
    ]
    with tempfile.TemporaryDirectory(prefix="vramtui-bench-app-") as scratch:
        env = child_env(scratch)
        imports = [sys.executable, "-c", "import vramtui.app.app"]
        time_command(imports, env)
        time_first_frame(env)  # warm the bytecode and file caches
        cases = [
            ("python -c 'import vramtui.app.app'", lambda: time_command(imports, env)),
            ("vramtui CHAT_SPEC: first frame with ledger", lambda: time_first_frame(env)),
        ]
        for label, fn in cases:
            t = [fn() for _ in range(runs)]
            lines.append(f"{label:<44} {statistics.median(t) * 1e3:>10.1f} {min(t) * 1e3:>9.1f}")
    return lines


async def _keystrokes(keys: int) -> tuple[list[float], list[float], int]:
    from textual.widgets import DataTable, Input
    from vramtui.app.app import VramtuiApp
    from vramtui.catalog import load_catalog
    from vramtui.config import Config
    from vramtui.session import SizingSession
    from vramtui.spec import load_spec

    handled: list[float] = []

    class TimedApp(VramtuiApp):
        async def on_field_edited(self, message) -> None:
            t0 = time.perf_counter()
            await super().on_field_edited(message)
            handled.append(time.perf_counter() - t0)

    catalog = load_catalog(None, use_user_config=False)
    session = SizingSession.from_spec(load_spec(CHAT_SPEC), CHAT_SPEC, catalog)
    with tempfile.TemporaryDirectory(prefix="vramtui-bench-draft-") as scratch:
        app = TimedApp(session, Config(), draft_file=Path(scratch) / "draft.toml")
        to_ledger: list[float] = []
        async with app.run_test(size=(COLS, ROWS)) as pilot:
            table = app.query_one("#ledger-table", DataTable)
            kv_row = next(
                i
                for i, it in enumerate(session.results.estimate.items)
                if it.name.startswith("KV cache")
            )
            target = app.query_one("#f-lengths-prompt_tokens", Input)
            chain = app.screen.focus_chain
            tabs = chain.index(target) - chain.index(app.focused)  # for the pty run
            target.focus()
            await pilot.press("end")
            await pilot.pause()
            handled.clear()
            # 8000 -> 80001 -> 8000 -> ...: every key changes the KV cache size
            for i in range(keys):
                before = str(table.get_row_at(kv_row)[0])
                key = "1" if i % 2 == 0 else "backspace"
                t0 = time.perf_counter()
                await pilot.press(key)
                deadline = t0 + 5
                while str(table.get_row_at(kv_row)[0]) == before:
                    if time.perf_counter() > deadline:
                        raise RuntimeError("the ledger did not change after a keystroke")
                    await pilot.pause()
                to_ledger.append(time.perf_counter() - t0)
    return to_ledger, handled, tabs


def bench_keystroke(keys: int) -> tuple[list[str], int]:
    to_ledger, handled, tabs = asyncio.run(_keystrokes(keys))
    return [
        f"keystroke -> ledger, in process (Textual Pilot, headless {COLS}x{ROWS}), {keys} keys "
        "into Prompt tokens of the chat spec (8000 <-> 80001)",
        f"  key press -> KV cache row updated      median {statistics.median(to_ledger) * 1e3:7.1f}"
        f" ms   min {min(to_ledger) * 1e3:7.1f} ms   (includes Pilot's wait for an idle screen)",
        f"  app's handling of the edit             median {statistics.median(handled) * 1e3:7.1f}"
        f" ms   min {min(handled) * 1e3:7.1f} ms   (set_field + form + ledger + shortlist)",
    ], tabs


def bench_set_field(iterations: int) -> list[str]:
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.catalog import load_catalog
    from vramtui.session import SizingSession
    from vramtui.spec import load_spec

    catalog = load_catalog(None, use_user_config=False)
    lines = [
        f"SizingSession.set_field alone (parse + validate + estimate + shortlist of "
        f"{len(catalog.offers)} offers), {iterations} calls"
    ]
    cases = [
        (
            "seed, prompt tokens",
            SizingSession.from_spec(seed_example_spec(), None, catalog),
            "lengths.prompt_tokens",
            ("2049", "2048"),
        ),
        (
            "chat spec, prompt tokens",
            SizingSession.from_spec(load_spec(CHAT_SPEC), CHAT_SPEC, catalog),
            "lengths.prompt_tokens",
            ("8001", "8000"),
        ),
        (
            "chat spec, invalid text",
            SizingSession.from_spec(load_spec(CHAT_SPEC), CHAT_SPEC, catalog),
            "lengths.prompt_tokens",
            ("8k", "8kk"),
        ),
    ]
    for label, session, path, texts in cases:
        times = []
        for i in range(iterations):
            t0 = time.perf_counter()
            session.set_field(path, texts[i % 2])
            times.append(time.perf_counter() - t0)
        lines.append(
            f"  {label:<28} median {statistics.median(times) * 1e3:7.3f} ms   "
            f"min {min(times) * 1e3:7.3f} ms"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--runs", type=int, default=10, help="app starts to time")
    ap.add_argument("--keys", type=int, default=40, help="keystrokes to time in process")
    ap.add_argument("--iterations", type=int, default=500, help="set_field calls per case")
    ap.add_argument("--save", action="store_true", help="write bench/results/app-<date>.txt")
    args = ap.parse_args(argv)

    import textual

    report = [
        f"vramtui app benchmark, {dt.datetime.now().isoformat(timespec='seconds')}",
        f"python {platform.python_version()}, textual {textual.__version__}, "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "",
    ]
    report += bench_first_frame(args.runs) + [""]
    lines, tabs = bench_keystroke(args.keys)
    report += lines + [""]
    report += bench_pty_keystroke(args.keys, tabs) + [""]
    report += bench_set_field(args.iterations)
    text = "\n".join(report) + "\n"
    sys.stdout.write(text)
    if args.save:
        out = REPO / "bench" / "results" / f"app-{dt.date.today().isoformat()}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"saved {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
