"""The autosaved draft: the form as typed, so that no input is lost to a dropped connection.

One draft file in the state directory (`<platformdirs user state dir>/vramtui/draft.toml`, or
`$VRAMTUI_STATE_DIR/draft.toml`). It holds the form (which may be an invalid spec), the texts of
fields that did not parse, and the file the spec came from. Written atomically.
"""

from __future__ import annotations

import datetime
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from vramtui.fsutil import atomic_write_text

DRAFT_VERSION = 1


def state_dir() -> Path:
    override = os.environ.get("VRAMTUI_STATE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_state_dir

    return Path(user_state_dir("vramtui"))


def draft_path() -> Path:
    return state_dir() / "draft.toml"


@dataclass(frozen=True)
class Draft:
    form: dict
    texts: dict[str, str]
    origin: str  # the spec file the draft belongs to ("" for a new spec)
    saved_at: str  # ISO time, UTC

    def describe(self) -> str:
        what = self.form.get("name") or self.form.get("model", {}).get("id") or "unnamed spec"
        where = f" (from {self.origin})" if self.origin else ""
        return f"{what}{where}, saved {self.saved_at}"


def write_draft(
    form: dict, texts: dict[str, str], origin: Path | None, path: Path | None = None
) -> Path:
    target = path or draft_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "draft": {
            "version": DRAFT_VERSION,
            "origin": str(origin) if origin else "",
            "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        },
        "form": form,
        "texts": dict(texts),
    }
    atomic_write_text(target, tomli_w.dumps(data))
    return target


def read_draft(path: Path | None = None) -> Draft | None:
    """The saved draft, or None when there is none or it cannot be read (then it is set aside
    as draft.toml.unreadable, never deleted)."""
    source = path or draft_path()
    if not source.is_file():
        return None
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
        meta = data["draft"]
        return Draft(
            form=dict(data.get("form", {})),
            texts={str(k): str(v) for k, v in data.get("texts", {}).items()},
            origin=str(meta.get("origin", "")),
            saved_at=str(meta.get("saved_at", "")),
        )
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, AttributeError):
        try:
            source.replace(source.with_name(source.name + ".unreadable"))
        except OSError:
            pass
        return None


def discard_draft(path: Path | None = None) -> None:
    try:
        (path or draft_path()).unlink()
    except FileNotFoundError:
        pass


def set_aside_draft(path: Path | None = None) -> Path | None:
    """Move the draft to `draft.set-aside-<UTC time>.toml` beside it; return that path."""
    source = path or draft_path()
    if not source.is_file():
        return None
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = source.with_name(f"draft.set-aside-{stamp}.toml")
    source.replace(target)
    return target
