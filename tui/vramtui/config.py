"""User configuration: `<platformdirs user config dir>/vramtui/config.toml`.

    units = "gib"                 # gib | gb | mib | bytes: what the app shows first
    catalog_dir = "~/my-catalog"  # GPUs/offers/models overlay (default: <config dir>/catalog)
    price_max_age_days = 30       # older offer prices are flagged "price to re-check"
    [keymap]                      # binding id = keys, e.g. save = "ctrl+s,f2"
    save = "ctrl+s"
    [prometheus]                  # `vramtui watch --prometheus`: URL, auth, TLS, renamed
    url = "http://prom:9090"      # metrics/labels (vramtui.feed.prometheus_settings)

A broken file never stops the app: each problem becomes one warning line and the defaults stand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from vramtui.errors import VramtuiError
from vramtui.fsutil import user_path
from vramtui.guarded_read import read_toml
from vramtui.safe_text import safe_line

UNITS = ("gib", "gb", "mib", "bytes")
KNOWN_KEYS = {"units", "catalog_dir", "keymap", "price_max_age_days", "prometheus"}
MAX_CONFIG_BYTES = 1 * 2**20  # a config is a few lines


class _Unusable(VramtuiError):
    """The config file cannot be read at all: one warning, and the defaults stand."""


def config_dir() -> Path:
    override = os.environ.get("VRAMTUI_CONFIG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_config_dir

    return Path(user_config_dir("vramtui"))


def config_path() -> Path:
    return config_dir() / "config.toml"


@dataclass(frozen=True)
class Config:
    units: str = "gib"
    catalog_dir: Path | None = None
    keymap: dict[str, str] = field(default_factory=dict)
    price_max_age_days: float | None = None  # None: vramtui.price_age's default (30)
    # The [prometheus] table as written; vramtui.feed.prometheus_settings checks it when the
    # Prometheus feed is used (a mistake there is an error of that command, not a warning).
    prometheus: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    path: Path | None = None


def load_config(path: Path | None = None, binding_ids: set[str] | None = None) -> Config:
    source = path or config_path()
    if not source.is_file():
        return Config(path=source)
    warnings: list[str] = []
    try:
        data = read_toml(
            source,
            error=_Unusable,
            what="config file",
            source=str(source),
            cap=MAX_CONFIG_BYTES,
            fix="fix it",
        )
    except _Unusable as exc:
        return Config(warnings=(safe_line(f"{exc}; using defaults"),), path=source)
    for key in data:
        if key not in KNOWN_KEYS:
            warnings.append(
                f"{source}: unknown key '{key}' ignored; known: units, catalog_dir, "
                "price_max_age_days, [keymap], [prometheus]"
            )
    units = data.get("units", "gib")
    if units not in UNITS:
        warnings.append(f"{source}: units = {units!r} is not one of {', '.join(UNITS)}; using gib")
        units = "gib"
    catalog = data.get("catalog_dir")
    catalog_dir = None
    if catalog is not None:
        if isinstance(catalog, str) and catalog.strip():
            catalog_dir = user_path(catalog)
        else:
            warnings.append(f"{source}: catalog_dir must be a path string; ignored")
    max_age = None
    if "price_max_age_days" in data:
        from vramtui.price_age import check_max_age

        try:
            max_age = check_max_age(data["price_max_age_days"], f"{source}: price_max_age_days")
        except VramtuiError as exc:
            warnings.append(f"{exc}; using the default")
    keymap: dict[str, str] = {}
    raw = data.get("keymap", {})
    if not isinstance(raw, dict):
        warnings.append(f'{source}: [keymap] must be a table of binding id = "keys"; ignored')
        raw = {}
    for bid, keys in raw.items():
        if not isinstance(keys, str) or not keys.strip():
            warnings.append(f'{source}: keymap.{bid} must be a key string such as "ctrl+s"')
        elif binding_ids is not None and bid not in binding_ids:
            warnings.append(
                f"{source}: keymap.{bid} is not a binding id; known: "
                f"{', '.join(sorted(binding_ids))}"
            )
        else:
            keymap[bid] = keys
    prometheus = data.get("prometheus", {})
    if not isinstance(prometheus, dict):
        warnings.append(f"{source}: [prometheus] must be a table; ignored")
        prometheus = {}
    return Config(
        units=units,
        prometheus=prometheus,
        catalog_dir=catalog_dir,
        keymap=keymap,
        price_max_age_days=max_age,
        warnings=tuple(safe_line(w) for w in warnings),
        path=source,
    )
