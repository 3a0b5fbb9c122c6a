"""From a spec's model reference to the architecture (and checkpoint headers) it names."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from vramtui.errors import ModelError
from vramtui.fsutil import is_dir, user_path

# A Hub id is at most 96 characters and a path rarely passes a few hundred; a longer model
# reference is a paste gone wrong (and longer than a file name may be).
MAX_MODEL_REF_CHARS = 512


def model_ref_too_long(text: str, what: str, where: str = "") -> str | None:
    """The one-line complaint when `text` (a model id or path) is over the limit, else None."""
    if len(text) <= MAX_MODEL_REF_CHARS:
        return None
    return (
        f"{what} is {len(text)} characters long{where}; the limit is {MAX_MODEL_REF_CHARS} "
        "characters: give a catalogue or Hub id, or the path of a local model directory"
    )


def resolve_model(ref, base_dir: Path | None = None, catalog_dir: Path | None = None):
    """Return (Architecture | None, CheckpointInfo | None) for a spec's `model` table.

    A bare parameter count gives (None, None). A relative `path` is read relative to
    `base_dir` (the spec file's directory) when it exists there, else to the working directory.
    """
    if ref.params is not None and ref.id is None and ref.path is None:
        return None, None
    if ref.path is not None:
        return _local(Path(ref.path), base_dir)
    from vramtui.models.registry import find_model

    if catalog_dir is not None:
        try:
            return find_model(ref.id, catalog_dir), None
        except ModelError:
            pass  # not among the user's models: the built-in catalogue decides
    return find_model(ref.id), None


def _local(path: Path, base_dir: Path | None):
    candidates = [path]
    if not path.is_absolute() and base_dir is not None:
        candidates.insert(0, base_dir / path)
    for p in candidates:
        if is_dir(user_path(p)):
            return _load_local_cached(p.resolve(), _stamp(p))
    raise ModelError(
        f"model path '{path}' is not a directory; point model.path (or --model) at a local "
        "Hugging Face model directory holding config.json"
    )


def looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~")) or is_dir(user_path(text))


def _stamp(directory: Path) -> tuple:
    """Modification times of what load_local_model reads: a change re-reads the directory."""
    out = []
    for name in ("config.json", "model.safetensors.index.json", "model.safetensors"):
        try:
            out.append((name, (directory / name).stat().st_mtime_ns))
        except OSError:
            out.append((name, None))
    return tuple(out)


@lru_cache(maxsize=16)
def _load_local_cached(directory: Path, stamp: tuple):
    from vramtui.models.checkpoint import load_local_model

    return load_local_model(directory)
