"""From a spec's model reference to the architecture (and checkpoint headers) it names."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from vramtui.errors import ModelError
from vramtui.fsutil import is_dir, user_path
from vramtui.models.hf_cache import (
    MAX_REPO_ID_CHARS,
    find_hf_snapshot,
    hub_offline,
    is_hub_id,
    revision_problem,
)
from vramtui.safe_text import safe_line

if TYPE_CHECKING:
    from vramtui.models.architecture import Architecture
    from vramtui.models.checkpoint import CheckpointInfo

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


@dataclass(frozen=True)
class ResolvedModel:
    """What a model reference named, and where it was found.

    `origin`: "params" (a bare count), "catalogue", "local" (a directory), "gguf" (a GGUF
    file), "ollama" (a model of the local ollama store, a GGUF file), "hf-cache" (the local
    Hugging Face cache), "hub" (fetched from the Hub, or found in vramtui's cache of what it
    fetched) or "hub-gguf" (the header of a GGUF file of a Hub repository, `OWNER/NAME:QUANT`).
    `checkpoint` is a GgufModel for "gguf", "ollama" and "hub-gguf". `commit`: the commit of
    an "hf-cache", "hub" or "hub-gguf" model, else None.
    """

    arch: Architecture | None
    checkpoint: CheckpointInfo | None
    origin: str
    commit: str | None = None


def resolve_model(ref, base_dir: Path | None = None, catalog_dir: Path | None = None, **kw):
    """Return (Architecture | None, CheckpointInfo | None) for a spec's `model` table.

    See `resolve_model_ref` for the order a model id is looked up in.
    """
    found = resolve_model_ref(ref, base_dir, catalog_dir, **kw)
    return found.arch, found.checkpoint


def resolve_model_ref(
    ref,
    base_dir: Path | None = None,
    catalog_dir: Path | None = None,
    *,
    hub: bool = True,
    hub_refused: str = "",
) -> ResolvedModel:
    """Find what a spec's `model` table names.

    A bare parameter count gives no architecture. A `path` is a local directory, read relative
    to `base_dir` (the spec file's directory) when it exists there, else to the working
    directory. An `id` is looked up, in order:

    1. the catalogue (the user's `catalog_dir` first, then the built-in one);
    2. a local directory of that name;
    3. the local Hugging Face cache (`HF_HUB_CACHE` / `HF_HOME`), at `ref.revision`;
    4. the Hub (`vramtui.models.hub`; `OWNER/NAME:QUANT`, or a repository of GGUF files
       only, is a GGUF file's header: `vramtui.models.hub_gguf`): unless `HF_HUB_OFFLINE` is set or `hub` is False
       (then only what vramtui fetched before, kept in its cache, is used);
    5. else one ModelError listing what each step found. `hub_refused` says why the Hub was
       not asked when `hub` is False.
    """
    if ref.params is not None and ref.id is None and ref.path is None:
        return ResolvedModel(None, None, "params")
    if ref.path is not None:
        if _is_gguf_name(ref.path):
            return _gguf(Path(ref.path), base_dir, ref.path)
        arch, ckpt = _local(Path(ref.path), base_dir)
        return ResolvedModel(arch, ckpt, "local")
    from vramtui.models.registry import close_matches

    name = ref.id
    tried: list[str] = []

    arch = _from_catalogue(name, catalog_dir)
    if arch is not None:
        return ResolvedModel(arch, None, "catalogue")
    if _is_gguf_name(name):
        return _gguf(Path(name), base_dir, name)
    from vramtui.models.ollama_store import find_ollama_model, looks_like_ollama

    if looks_like_ollama(name):
        blob = find_ollama_model(name)
        if blob is not None:
            return _gguf_model(blob, name, "ollama")
        from vramtui.models.ollama_store import models_dir

        tried.append(f"ollama store ({models_dir()}): no model {name.removeprefix('ollama:')}")
        if name.startswith("ollama:"):
            raise _not_found(name, tried)
    shown = close_matches(name, catalog_dir)
    if catalog_dir is not None:
        shown += [m for m in close_matches(name) if m not in shown]
    tried.append("catalogue: no match" + (f" (close: {', '.join(shown[:5])})" if shown else ""))

    for candidate in _candidates(Path(name), base_dir):
        if is_dir(user_path(candidate)):
            arch, ckpt = _local(candidate, None)
            return ResolvedModel(arch, ckpt, "local")
    tried.append("local directory: none of that name")

    from vramtui.models.hub_gguf import quant_problem, split_quant

    repo_id, quant = split_quant(name)
    if quant is not None and is_hub_id(repo_id):
        problem = quant_problem(quant)
        if problem:
            raise ModelError(
                safe_line(
                    f"the GGUF quant of '{name[:120]}' {problem}; write OWNER/NAME:QUANT, e.g. "
                    f"{repo_id}:Q4_K_M"
                )
            )
        name = repo_id
    if not is_hub_id(name):
        tried.append(
            f"Hugging Face cache and Hub: not a Hub id (owner/name, at most {MAX_REPO_ID_CHARS} "
            "characters of letters, digits, '-', '_' and '.')"
        )
        raise _not_found(name, tried)
    revision = ref.revision
    if revision is not None:
        problem = revision_problem(revision)
        if problem:
            raise ModelError(
                f"model.revision '{revision[:60]}' {problem}; give a branch, tag or commit hash"
            )

    if quant is not None:
        snapshot, looked = None, "Hugging Face cache: not read for a GGUF quant"
    else:
        snapshot, looked = find_hf_snapshot(name, revision)
    if snapshot is not None:
        arch, ckpt = _load_cached(
            snapshot,
            model_id=name,
            source=f"{name}@{snapshot.name[:12]} in the Hugging Face cache ({snapshot})",
            weights_optional=True,
        )
        return ResolvedModel(arch, ckpt, "hf-cache", snapshot.name)
    tried.append(looked)

    from vramtui.models import hub as hub_mod

    offline = hub_offline()
    if offline or not hub:
        cached = hub_mod.cached_snapshot(name, revision, quant)
        if cached is not None:
            return _from_hub_snapshot(cached, ref.id)
        tried.append(
            f"Hub: not asked ({offline} is set)" if offline else f"Hub: not asked ({hub_refused})"
        )
        raise _not_found(name, tried)
    try:
        snap = hub_mod.fetch_snapshot(name, revision, quant)
    except hub_mod.HubError as exc:
        if exc.final:
            raise ModelError(str(exc)) from None
        cached = hub_mod.cached_snapshot(name, revision, quant)
        if cached is not None and exc.tried.startswith("Hub: network error"):
            return _from_hub_snapshot(cached, ref.id)
        tried.append(exc.tried)
        raise _not_found(ref.id, tried) from None
    return _from_hub_snapshot(snap, ref.id)


def _from_catalogue(name: str, catalog_dir: Path | None) -> Architecture | None:
    from vramtui.models.registry import lookup_model

    if catalog_dir is not None:
        arch = lookup_model(name, catalog_dir)
        if arch is not None:
            return arch
    return lookup_model(name)


def _from_hub_snapshot(snap, given: str) -> ResolvedModel:
    from vramtui.models.hub_gguf import HubGguf

    if isinstance(snap, HubGguf):
        return _from_hub_gguf(snap, given)
    arch, ckpt = _load_cached(
        snap.directory,
        model_id=snap.repo_id,
        source=f"{snap.repo_id}@{snap.commit[:12]} on the Hub (config.json and safetensors "
        f"headers, cached in {snap.directory})",
        stored_sizes=snap.stored_sizes,
    )
    return ResolvedModel(arch, ckpt, "hub", snap.commit)


def _from_hub_gguf(snap, given: str) -> ResolvedModel:
    """A GGUF file of a Hub repository, sized from its header (origin "hub-gguf")."""
    import dataclasses

    from vramtui.models.gguf_file import architecture_from_gguf

    model = snap.model()
    arch = architecture_from_gguf(model, given)
    source = (
        f"{model.describe()} (read by HTTP range requests, no tensor data; cached in "
        f"{snap.directory})"
    )
    return ResolvedModel(dataclasses.replace(arch, source=source), model, "hub-gguf", snap.commit)


def _not_found(name: str, tried: list[str]) -> ModelError:
    return ModelError(
        f"unknown model '{name}': " + "; ".join(tried) + "; give a catalogue or Hub id, "
        "--model PATH to a local Hugging Face directory, or --params N"
    )


def _is_gguf_name(text: str) -> bool:
    return text.lower().endswith(".gguf")


def _gguf(path: Path, base_dir: Path | None, given: str) -> ResolvedModel:
    """A GGUF file (relative to the spec's directory first), read from its header."""
    for p in _candidates(path, base_dir):
        p = user_path(p)
        try:
            found = p.is_file()
        except (OSError, ValueError):
            found = False
        if found:
            return _gguf_model(p.resolve(), p.name, "gguf")
    raise ModelError(
        f"GGUF file '{given}' not found (looked in the spec's directory and the working "
        "directory); give the path of a .gguf file (the first part of a split model)"
    )


def _gguf_model(path: Path, label: str, origin: str) -> ResolvedModel:
    from vramtui.models.gguf_file import architecture_from_gguf, read_gguf

    model = read_gguf(path)
    return ResolvedModel(architecture_from_gguf(model, label), model, origin)


def _candidates(path: Path, base_dir: Path | None) -> list[Path]:
    candidates = [path]
    if not path.is_absolute() and base_dir is not None:
        candidates.insert(0, base_dir / path)
    return candidates


def _local(path: Path, base_dir: Path | None):
    for p in _candidates(path, base_dir):
        p = user_path(p)
        if is_dir(p):
            return _load_cached(p.resolve())
    raise ModelError(
        f"model path '{path}' is not a directory; point model.path (or --model) at a local "
        "Hugging Face model directory holding config.json"
    )


def looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~")) or is_dir(user_path(text))


def _stamp(directory: Path) -> tuple:
    """Modification times of what load_local_model reads: a change re-reads the directory."""
    out = []
    for name in (
        "config.json",
        "model.safetensors.index.json",
        "model.safetensors",
        "vramtui-fetched.json",
    ):
        try:
            out.append((name, (directory / name).stat().st_mtime_ns))
        except OSError:
            out.append((name, None))
    return tuple(out)


def _load_cached(directory: Path, **kw):
    return _load_local_cached(directory, _stamp(directory), tuple(sorted(kw.items())))


@lru_cache(maxsize=16)
def _load_local_cached(directory: Path, stamp: tuple, options: tuple):
    from vramtui.models.checkpoint import load_local_model

    kw = dict(options)
    if "stored_sizes" in kw:
        kw["stored_sizes"] = dict(kw["stored_sizes"])
    arch, ckpt = load_local_model(directory, **kw)
    return _label_unmodelled_family(arch), ckpt


def _label_unmodelled_family(arch):
    """Say so where a config's family has no hand-written model in vramtui: its items are
    then worked out with the Llama-style formulas, and the estimate must not look exact."""
    import dataclasses

    from vramtui.models.hf_config import FAMILY_DEFAULTS

    if arch.model_type in FAMILY_DEFAULTS:
        return arch
    note = (
        f"{arch.source}; model_type '{arch.model_type}' has no model of its own in vramtui: "
        "itemised with Llama-style formulas (gated MLP, RMSNorm), an approximation"
    )
    return dataclasses.replace(arch, source=note)


def pin_revision(spec, found: ResolvedModel):
    """`spec` with `[model] revision` set to the commit its model was resolved at (a model
    from the Hub or the Hugging Face cache), so that a saved spec names exactly what was
    sized; the spec itself when there is nothing to pin."""
    import dataclasses

    m = spec.model
    if found.commit is None or m.id is None or m.revision == found.commit:
        return spec
    return dataclasses.replace(spec, model=dataclasses.replace(m, revision=found.commit))
