"""SIGTERM and SIGHUP as a clean exit for the headless watchers (`watch --ssh`,
`watch --prometheus`): `finally` blocks run and stop child processes, as on Ctrl-C.
Plain Python: no Textual here."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any


class _Terminated(SystemExit):
    """Raised in the main thread by SIGTERM/SIGHUP so that `finally` stops the ssh children."""


@contextlib.contextmanager
def stop_on_signals():
    """While inside: SIGTERM and SIGHUP end the program through `finally` blocks (exit status
    128 + signal), as Ctrl-C does, instead of killing it at once. The ssh children run in their
    own sessions (so a Ctrl-C in the terminal reaches us only): without this they would outlive
    a terminated watcher until their own connect timeout."""
    installed: dict[int, Any] = {}

    def handler(signum, _frame):
        for sig in installed:  # a second signal must not interrupt the clean-up
            signal.signal(sig, signal.SIG_IGN)
        raise _Terminated(128 + signum)

    if threading.current_thread() is threading.main_thread():
        for name in ("SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is not None:
                try:
                    installed[sig] = signal.signal(sig, handler)
                except (OSError, ValueError):
                    pass
    try:
        yield
    finally:
        for sig, previous in installed.items():
            try:
                signal.signal(sig, previous)
            except (OSError, ValueError):
                pass
