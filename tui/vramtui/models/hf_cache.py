"""Hugging Face Hub ids, revisions, and the local Hugging Face cache (standard library only).

The cache is the one `huggingface_hub` fills (`hf download`, `from_pretrained`): under
`HF_HUB_CACHE` (default `HF_HOME/hub`, default `~/.cache/huggingface/hub`), a repository
`owner/name` lives in `models--owner--name/`, with `refs/<branch or tag>` holding a commit
hash and `snapshots/<commit>/` holding the files of that commit. Reading it needs no
`huggingface_hub` import.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from vramtui.fsutil import is_dir

DEFAULT_REVISION = "main"
MAX_REPO_ID_CHARS = 96  # the Hub's own limit on "owner/name"
MAX_REVISION_CHARS = 256

_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]+$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "ON", "YES", "TRUE"}


def is_hub_id(text: str) -> bool:
    """True when `text` can name a Hub repository ("owner/name", or a legacy bare "name")."""
    return (
        0 < len(text) <= MAX_REPO_ID_CHARS
        and _REPO_ID.match(text) is not None
        and "--" not in text
        and ".." not in text
        and not text.startswith(("-", "."))
        and not text.endswith(("-", "."))
    )


def is_commit(revision: str | None) -> bool:
    """A full 40-hex-digit commit hash (what a pinned revision is)."""
    return revision is not None and _COMMIT.match(revision) is not None


def revision_problem(revision: str) -> str | None:
    """Why `revision` cannot be a git branch, tag or commit name; None when it can."""
    if len(revision) > MAX_REVISION_CHARS:
        return f"is {len(revision)} characters long (the limit is {MAX_REVISION_CHARS})"
    if any(ord(c) < 32 or c in " ~^:?*[\\\x7f" for c in revision) or ".." in revision:
        return "holds characters git does not allow in a branch, tag or commit name"
    if revision.startswith(("/", ".", "-")) or revision.endswith(("/", ".lock")):
        return "is not a git branch, tag or commit name"
    return None


def env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().upper() in _TRUE


def hub_offline() -> str | None:
    """The variable that forbids the Hub ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"), else None.

    Read at each call (not at import, as `huggingface_hub.constants` does)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if env_true(name):
            return name
    return None


def hf_hub_cache_dir() -> Path:
    """The Hugging Face cache directory, from the variables `huggingface_hub` reads."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        home = os.path.join(xdg, "huggingface")
    return Path(home).expanduser() / "hub"


def repo_folder_name(repo_id: str) -> str:
    """`models--owner--name`: a model repository's folder in the Hugging Face cache layout."""
    return "models--" + repo_id.replace("/", "--")


def commit_for(repo_dir: Path, revision: str | None) -> str | None:
    """The commit `revision` names in a cache-layout repository folder, else None.

    A branch or tag is looked up in `refs/`; a full commit hash names itself when its
    snapshot exists; a prefix of at least 7 hex digits names the one snapshot it starts."""
    rev = revision or DEFAULT_REVISION
    if revision_problem(rev):
        return None
    snapshots = repo_dir / "snapshots"
    if is_commit(rev):
        return rev if is_dir(snapshots / rev) else None
    try:
        commit = (repo_dir / "refs" / rev).read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        commit = None
    if commit is not None:
        return commit if is_commit(commit) and is_dir(snapshots / commit) else None
    if re.fullmatch(r"[0-9a-f]{7,39}", rev):
        try:
            found = [p.name for p in snapshots.iterdir() if p.name.startswith(rev)]
        except OSError:
            return None
        if len(found) == 1 and is_commit(found[0]):
            return found[0]
    return None


def find_hf_snapshot(repo_id: str, revision: str | None) -> tuple[Path | None, str]:
    """(snapshot directory holding config.json, or None; what was looked at, for messages)."""
    cache = hf_hub_cache_dir()
    repo_dir = cache / repo_folder_name(repo_id)
    rev = revision or DEFAULT_REVISION
    if not is_dir(repo_dir):
        return None, f"Hugging Face cache: no {repo_id} in {cache}"
    commit = commit_for(repo_dir, revision)
    if commit is None:
        return None, f"Hugging Face cache: no snapshot of {repo_id} for revision {rev}"
    snapshot = repo_dir / "snapshots" / commit
    if not (snapshot / "config.json").is_file():
        return None, f"Hugging Face cache: snapshot {commit[:12]} of {repo_id} has no config.json"
    return snapshot, f"Hugging Face cache: {repo_id} at {commit}"
