"""The built-in model catalogue: one TOML file per model in `catalog/models/`.

Each file holds `[meta]` (hub_id, aliases, source, license, notes, null_keys) and `[config]`,
the keys of the model's real Hugging Face `config.json` (nested `[config.text_config]` where the
real config nests it). TOML has no null: `meta.null_keys` lists the config keys whose value in
config.json is `null` (dotted for nested ones, e.g. "text_config.rope_scaling").

Loading parses only TOML (no torch); the result is cached per directory.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

from vramtui.errors import ModelError
from vramtui.guarded_read import read_toml
from vramtui.models.architecture import Architecture
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.paths import builtin_catalog_dir
from vramtui.safe_text import safe_line

MAX_MODEL_FILE_BYTES = 1 * 2**20  # a model's config tables: a few KiB
_META_KEYS = {"hub_id", "aliases", "source", "license", "notes", "null_keys"}


def file_name_for(hub_id: str) -> str:
    """Catalogue file name of a Hub id: "/" becomes "--"."""
    return hub_id.replace("/", "--") + ".toml"


def _apply_nulls(config: dict, null_keys: list, path: Path) -> None:
    if not isinstance(null_keys, list):
        raise ModelError(f"catalogue file {path}: meta.null_keys must list config key names")
    for dotted in null_keys:
        if not isinstance(dotted, str) or not dotted:
            raise ModelError(f"catalogue file {path}: meta.null_keys must list config key names")
        *parents, leaf = dotted.split(".")
        table = config
        for part in parents:
            table = table.get(part)
            if not isinstance(table, dict):
                raise ModelError(
                    f"catalogue file {path}: meta.null_keys entry '{dotted}' names no table in [config]"
                )
        if leaf in table:
            raise ModelError(
                f"catalogue file {path}: meta.null_keys entry '{dotted}' also has a value in [config]"
            )
        table[leaf] = None


def load_catalog_file(path: Path) -> tuple[Architecture, tuple[str, ...]]:
    """One catalogue file: its architecture and its lowercase aliases. Broken -> ModelError."""
    data = read_toml(
        path,
        error=ModelError,
        what="model catalogue file",
        source=f"catalogue file {path}",
        cap=MAX_MODEL_FILE_BYTES,
        fix="fix or remove that file",
    )
    meta, config = data.get("meta"), data.get("config")
    if not isinstance(meta, dict):
        raise ModelError(f"catalogue file {path} lacks the [meta] table")
    if not isinstance(config, dict):
        raise ModelError(f"catalogue file {path} lacks the [config] table")
    unknown = sorted(set(meta) - _META_KEYS)
    if unknown:
        raise ModelError(
            f"catalogue file {path}: unknown key meta.{unknown[0]} (allowed: {', '.join(sorted(_META_KEYS))})"
        )
    for key in ("hub_id", "source", "license"):
        if not isinstance(meta.get(key), str) or not meta[key].strip():
            raise ModelError(f"catalogue file {path} lacks required key meta.{key}")
    hub_id = safe_line(meta["hub_id"])  # shown everywhere: no control character survives
    if path.name != file_name_for(hub_id):
        raise ModelError(
            f"catalogue file {path}: name should be {file_name_for(hub_id)} for hub_id '{hub_id}'"
        )
    aliases = meta.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise ModelError(f"catalogue file {path}: meta.aliases must be a list of names")
    _apply_nulls(config, meta.get("null_keys", []), path)
    source = safe_line(f"catalogue file {path.name} ({meta['source']})")
    arch = architecture_from_hf_config(config, model_id=hub_id, source=source)
    return arch, tuple(safe_line(a).lower() for a in aliases)


@lru_cache(maxsize=64)
def _load_one(path: Path) -> tuple[Architecture, tuple[str, ...]]:
    return load_catalog_file(path)


@lru_cache(maxsize=8)
def _load(
    directory: Path,
) -> tuple[dict[str, Architecture], dict[str, str], tuple[str, ...]]:
    """(models by Hub id, names -> Hub id, problems). A broken file of the built-in catalogue
    raises ModelError; one of a user's directory is skipped, its problem kept (one line)."""
    if not directory.is_dir():
        raise ModelError(f"model catalogue directory {directory} does not exist")
    strict = directory == _directory(None)
    models: dict[str, Architecture] = {}
    names: dict[str, str] = {}  # lowercase hub id or alias -> hub id
    problems: list[str] = []
    for path in sorted(directory.glob("*.toml")):
        try:
            arch, aliases = load_catalog_file(path)
            for name in (arch.model_id.lower(), *aliases):
                if name in names and names[name] != arch.model_id:
                    raise ModelError(
                        f"catalogue file {path}: name '{name}' is already used by {names[name]}"
                    )
        except ModelError as exc:
            if strict:
                raise
            problems.append(safe_line(f"{exc} (file skipped)"))
            continue
        for name in (arch.model_id.lower(), *aliases):
            names[name] = arch.model_id
        models[arch.model_id] = arch
    return models, names, tuple(problems)


def model_catalog_problems(catalog_dir: Path | None = None) -> tuple[str, ...]:
    """One line per file of a user's model directory that was skipped (empty: none)."""
    return _load(_directory(catalog_dir))[2]


def _directory(catalog_dir: Path | None) -> Path:
    return (
        Path(catalog_dir) if catalog_dir is not None else builtin_catalog_dir() / "models"
    ).resolve()


def load_catalog_models(catalog_dir: Path | None = None) -> dict[str, Architecture]:
    """Every catalogue model by Hub id (default: the built-in `catalog/models`)."""
    return dict(_load(_directory(catalog_dir))[0])


def lookup_model(name: str, catalog_dir: Path | None = None) -> Architecture | None:
    """The catalogue model whose Hub id (any case) or alias is `name`, else None.

    A broken file of the built-in catalogue still raises ModelError."""
    directory = _directory(catalog_dir)
    direct = directory / file_name_for(name.strip())
    try:
        exact_file = "/" in name and direct.is_file()
    except (OSError, ValueError):
        exact_file = False  # no such file can exist (a name too long, a NUL byte)
    if exact_file:
        # Fast path for an exact Hub id: read its one file, not the whole catalogue.
        arch, _ = _load_one(direct)
        if arch.model_id == name.strip():
            return arch
    models, names, _ = _load(directory)
    key = name.strip().lower()
    if key in names:
        return models[names[key]]
    # A bare repository name ("Llama-3.1-8B-Instruct") names its model when unique.
    bare = [hub for hub in models if hub.split("/", 1)[-1].lower() == key]
    if len(bare) == 1:
        return models[bare[0]]
    return None


def close_matches(name: str, catalog_dir: Path | None = None) -> list[str]:
    """Up to five catalogue Hub ids whose id or alias is close to `name`."""
    _, names, _ = _load(_directory(catalog_dir))
    shown: list[str] = []
    for match in difflib.get_close_matches(name.strip().lower(), list(names), n=5, cutoff=0.5):
        hub = names[match]
        if hub not in shown:
            shown.append(hub)
    return shown


def find_model(name: str, catalog_dir: Path | None = None) -> Architecture:
    """The catalogue model whose Hub id (any case) or alias is `name`; else a ModelError with close matches."""
    arch = lookup_model(name, catalog_dir)
    if arch is not None:
        return arch
    shown = close_matches(name, catalog_dir)
    hint = f"close matches: {', '.join(shown)}; " if shown else ""
    raise ModelError(
        f"unknown model '{name}': not in the catalogue; {hint}"
        "pass --model PATH to a local Hugging Face directory, or --params N"
    )
