"""The atomic writer: the temp copy has the final mode before any byte lands in it."""

from __future__ import annotations

import os
import stat

import pytest

from vramtui import fsutil

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")


def _spy_replace(monkeypatch):
    seen: list[tuple[str, int, bytes]] = []
    real_replace = os.replace

    def spy(src, dst, *args, **kwargs):
        info = os.stat(src)
        with open(src, "rb") as handle:
            seen.append((os.fspath(src), stat.S_IMODE(info.st_mode), handle.read()))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(fsutil.os, "replace", spy)
    return seen


def test_replacing_a_0600_file_never_makes_a_wider_temp_copy(tmp_path, monkeypatch):
    target = tmp_path / "secret.toml"
    target.write_text("old\n")
    os.chmod(target, 0o600)
    opened: list[int] = []
    real_open = os.open

    def spy_open(path, flags, mode=0o777, *args, **kwargs):
        if flags & os.O_CREAT:
            opened.append(mode)
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(fsutil.os, "open", spy_open)
    seen = _spy_replace(monkeypatch)
    old_umask = os.umask(0o022)
    try:
        fsutil.atomic_write_text(target, "new\n")
    finally:
        os.umask(old_umask)
    assert opened == [0o600]  # created 0600, not 0666 & ~umask = 0644
    assert len(seen) == 1
    tmp_name, tmp_mode, tmp_data = seen[0]
    assert tmp_mode == 0o600
    assert tmp_data == b"new\n"
    assert os.path.basename(tmp_name).startswith(".secret.toml.")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.toml"]


def test_replacing_keeps_a_wider_mode_too(tmp_path, monkeypatch):
    target = tmp_path / "shared.md"
    target.write_text("old\n")
    os.chmod(target, 0o664)
    seen = _spy_replace(monkeypatch)
    old_umask = os.umask(0o077)  # the umask would narrow a plain create to 0600
    try:
        fsutil.atomic_write_text(target, "new\n")
    finally:
        os.umask(old_umask)
    assert seen[0][1] == 0o664
    assert stat.S_IMODE(target.stat().st_mode) == 0o664


def test_a_new_file_gets_0666_less_the_umask(tmp_path, monkeypatch):
    target = tmp_path / "new.md"
    seen = _spy_replace(monkeypatch)
    old_umask = os.umask(0o027)
    try:
        fsutil.atomic_write_text(target, "x")
    finally:
        os.umask(old_umask)
    assert seen[0][1] == 0o640
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
