"""Where the built-in catalogue lives, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path


def builtin_catalog_dir() -> Path:
    """The built-in `catalog/` directory.

    A wheel carries it inside the package (`vramtui/catalog`); a source checkout or an
    editable install finds it at the repository root, two levels above the package.
    """
    here = Path(__file__).resolve().parent
    packaged = here / "catalog"
    if packaged.is_dir():
        return packaged
    checkout = here.parent.parent / "catalog"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(
        "built-in catalogue not found next to the vramtui package; reinstall with `pip install .`"
    )


def user_cache_dir() -> Path:
    """vramtui's cache directory: `$VRAMTUI_CACHE_DIR`, else `$XDG_CACHE_HOME/vramtui`, else
    `~/.cache/vramtui`. Nothing is created here; writers create what they need."""
    import os

    explicit = os.environ.get("VRAMTUI_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "vramtui"
