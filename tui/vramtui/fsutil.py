"""Atomic file writes: temp file in the same directory, fsync, rename, fsync the directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file.

    Keeps the old file's permissions; raises OSError (and leaves no temp file) on failure.
    """
    import secrets

    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    directory = path.parent
    mode = _existing_mode(path)
    tmp = directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        # Created with the final mode from the start: the replaced file's mode (the umask can
        # only narrow it, and fchmod sets it exactly before a byte is written), or for a new
        # file 0o666 & ~umask, as a plain create gives. The copy never holds the data with
        # wider permissions than the file it replaces.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
        with os.fdopen(fd, "wb") as handle:
            if mode is not None and hasattr(os, "fchmod"):
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    fsync_directory(directory)


def _existing_mode(path: Path) -> int | None:
    """The permission bits of the file about to be replaced, or None when there is none."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def fsync_directory(directory: Path) -> None:
    """Make a rename durable; a no-op where directories cannot be opened (Windows)."""
    if os.name == "nt":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def user_path(text: str | os.PathLike[str]) -> Path:
    """A path as the user typed it, with `~` expanded where that is possible.

    `~name` for a user that does not exist (or a home that cannot be found) stays as typed, so
    the caller's "not found" message names it, instead of `expanduser` raising RuntimeError.
    """
    path = Path(text)
    try:
        return path.expanduser()
    except (RuntimeError, KeyError, OSError, ValueError):
        return path


def is_dir(path: Path) -> bool:
    """`path.is_dir()` that answers False where the OS refuses the name itself (too long, an
    embedded NUL byte) instead of raising."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False

