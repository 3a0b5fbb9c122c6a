"""A model in the local ollama store, found by its name, as a GGUF file.

ollama keeps models under `$OLLAMA_MODELS` (default ~/.ollama/models): a manifest per model at
`manifests/registry.ollama.ai/<namespace>/<name>/<tag>` (namespace "library" for official
models, tag "latest" by default), a JSON image manifest whose layers name blobs by digest; the
layer of mediaType "application/vnd.ollama.image.model" is the GGUF file, stored as
`blobs/sha256-<hex digest>` (ollama's server/manifest.go and server/modelpath.go: GetBlobsPath accepts only
`sha256[:-]<64 hex digits>` and stores it with ':' replaced by '-').
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from vramtui.errors import ModelError
from vramtui.fsutil import user_path
from vramtui.safe_text import safe_line

OLLAMA_PREFIX = "ollama:"
DEFAULT_REGISTRY = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"
MAX_MANIFEST_BYTES = 1 * 2**20  # a manifest lists a handful of layers: a few KiB
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_DIGEST = re.compile(r"^sha256[:-]([0-9a-fA-F]{64})$")  # ollama GetBlobsPath's pattern


def models_dir() -> Path:
    env = os.environ.get("OLLAMA_MODELS")
    return user_path(env) if env else user_path("~/.ollama/models")


def parse_name(text: str) -> tuple[str, str, str, str] | None:
    """(registry, namespace, name, tag) of an ollama model name, else None.

    Accepts `name`, `name:tag`, `namespace/name[:tag]` and `registry/namespace/name[:tag]`,
    with an optional `ollama:` prefix."""
    text = text.removeprefix(OLLAMA_PREFIX)
    base, _, tag = text.partition(":")
    tag = tag or DEFAULT_TAG
    parts = base.split("/")
    if len(parts) == 1:
        parts = [DEFAULT_REGISTRY, DEFAULT_NAMESPACE, parts[0]]
    elif len(parts) == 2:
        parts = [DEFAULT_REGISTRY, *parts]
    if len(parts) != 3 or not all(_PART.match(p) for p in (*parts, tag)):
        return None
    if ".." in parts or tag == "..":
        return None
    return parts[0], parts[1], parts[2], tag


def looks_like_ollama(text: str) -> bool:
    """`ollama:...`, or a bare `name:tag` (no path separator, not a Hub id)."""
    if text.startswith(OLLAMA_PREFIX):
        return True
    return ":" in text and "/" not in text and parse_name(text) is not None


def find_ollama_model(text: str) -> Path | None:
    """The GGUF blob of the ollama model `text`, or None when the store has no such manifest.

    A manifest that is there but broken, or names a missing blob, is a ModelError."""
    parsed = parse_name(text)
    if parsed is None:
        if text.startswith(OLLAMA_PREFIX):
            raise ModelError(
                safe_line(
                    f"'{text[:100]}' is not an ollama model name; write ollama:NAME or "
                    "ollama:NAME:TAG (letters, digits, '.', '_', '-')"
                )
            )
        return None
    registry, namespace, name, tag = parsed
    root = models_dir()
    manifest = root / "manifests" / registry / namespace / name / tag
    try:
        if not manifest.is_file():
            return None
        if manifest.stat().st_size > MAX_MANIFEST_BYTES:
            raise _bad(manifest, f"is larger than {MAX_MANIFEST_BYTES:,} bytes")
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _bad(manifest, f"cannot be read ({exc})") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        raise _bad(manifest, "has no 'layers' list")
    model = [
        la for la in layers if isinstance(la, dict) and la.get("mediaType") == MODEL_MEDIA_TYPE
    ]
    if not model:
        raise _bad(manifest, f"has no layer of mediaType {MODEL_MEDIA_TYPE}")
    match = _DIGEST.match(str(model[0].get("digest", "")))
    if not match:
        raise _bad(manifest, "names its model layer by an unreadable digest")
    blob = root / "blobs" / f"sha256-{match[1]}"
    if not blob.is_file():
        raise ModelError(
            safe_line(
                f"ollama model {name}:{tag}: its weights blob {blob} is missing; run "
                f"`ollama pull {name}:{tag}` again"
            )
        )
    return blob


def _bad(manifest: Path, problem: str) -> ModelError:
    return ModelError(
        safe_line(f"ollama manifest {manifest} {problem}; run `ollama pull` for that model again")
    )
