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


def cache_dir() -> Path:
    """vramtui's cache: what it fetched and can fetch again (model configs and headers).

    `VRAMTUI_CACHE_DIR` overrides the platform's user cache directory.
    """
    import os

    override = os.environ.get("VRAMTUI_CACHE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("vramtui"))
