"""A GGUF model on the Hugging Face Hub, sized from its header alone (HTTP range reads).

Which file: `OWNER/NAME:QUANT` names the quantisation, as llama.cpp's `-hf <user>/<model>[:quant]`
does (common/arg.cpp: "quant is optional, case-insensitive, default to Q4_K_M, or falls back to
the first file in the repo if Q4_K_M doesn't exist"). The file is the `.gguf` of the repository
whose name ends in `-QUANT.gguf` or `.QUANT.gguf`, or the first part of a split one
(`...-QUANT-00001-of-0000N.gguf`), in the top folder or in a `QUANT/` folder; `mmproj*` files
(vision projectors) are never the model. Without a QUANT: Q4_K_M when the repository has it,
else its only model file; where it has several, vramtui does not guess (llama.cpp would take the
first): it refuses in one line naming the quants there are.

What is fetched: the header of each part of that file, by HTTP range reads through
`hub._Client`: the first 24 bytes (magic, version, counts; the file's size comes from
Content-Range), then, as the bounded walker (`gguf_header.walk_header`) needs them, never more
than the fewest bytes the rest of the header can take, so no byte of tensor data is asked for.

The cache (`vramtui.paths.cache_dir()/hub/gguf/models--owner--name/`): `refs/<branch>` holds the
commit, `snapshots/<commit>/files.json` the repository's `.gguf` file names (so a QUANT is
chosen offline as online), and `snapshots/<commit>/<file key>/` the header of each part (the
file cut at the end of its header) and `FETCHED_FILE` with the real sizes, written last. That
folder is built in a private one and renamed into place.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import secrets
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from vramtui.errors import ModelError
from vramtui.models.gguf_file import MAX_GGUF_SPLITS, SPLIT_RE, GgufModel
from vramtui.models.gguf_header import MAX_GGUF_HEADER_BYTES, walk_header
from vramtui.models.hf_cache import commit_for, is_commit, repo_folder_name

DEFAULT_QUANT = "Q4_K_M"  # llama.cpp's default for -hf (common/arg.cpp)
FILES_RECORD = "files.json"
MAX_GGUF_FILES = 4096  # .gguf names kept of one repository (real ones: a few dozen)
MAX_QUANT_CHARS = 40
MAX_NAME_BYTES = 255  # a file name (one path component) on the usual file systems
MAX_PATH_CHARS = 1024  # a repository path kept (real ones: under 200 characters)
MAX_SHOWN_CHARS = 80  # of a file name in an error line
_QUANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_FIRST_READ = 24  # magic, version, tensor count, key/value count
_WORKERS = 8


def split_quant(text: str) -> tuple[str, str | None]:
    """("owner/name", "Q4_K_M") of "owner/name:Q4_K_M"; (text, None) without a ':'."""
    repo, sep, quant = text.partition(":")
    return (repo, quant) if sep else (text, None)


def quant_problem(quant: str) -> str | None:
    """Why `quant` cannot name a GGUF quantisation, else None."""
    if not quant:
        return "is empty after the ':'"
    if len(quant) > MAX_QUANT_CHARS:
        return f"is {len(quant)} characters long (the limit is {MAX_QUANT_CHARS})"
    if not _QUANT.match(quant):
        return "holds characters other than letters, digits, '_', '-' and '.'"
    return None


# --- which file -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GgufChoice:
    first: str  # the file (the first part of a split model), as the repository names it
    parts: tuple[str, ...]


def _is_model_gguf(name: str) -> bool:
    base = PurePosixPath(name).name.lower()
    return base.endswith(".gguf") and not base.startswith("mmproj")


def name_problem(name: str) -> str | None:
    """Why a file name of the repository's list cannot be fetched into vramtui's cache, else
    None: the name becomes a path under the cache, so a control character, an absolute path, a
    '..' (which would write outside the cache) or a name longer than a file system takes is
    refused where the list enters."""
    from vramtui.safe_text import has_unsafe

    if has_unsafe(name, multiline=False):
        return "holds control characters"
    parts = name.split("/")
    if "\\" in name or any(p in ("", ".", "..") for p in parts):
        return "is not a plain path inside the repository"
    if len(name) > MAX_PATH_CHARS or any(len(p.encode()) > MAX_NAME_BYTES for p in parts):
        return f"is longer than vramtui's limit ({MAX_NAME_BYTES} bytes a name)"
    return None


def _shown(name: str) -> str:
    """A file name for an error line: cut to MAX_SHOWN_CHARS (safe_line escapes the rest)."""
    return name if len(name) <= MAX_SHOWN_CHARS else name[: MAX_SHOWN_CHARS - 3] + "..."


def is_gguf_only(names: set[str] | None) -> bool:
    """A repository of GGUF model files and no safetensors."""
    if names is None or any(n.endswith(".safetensors") for n in names):
        return False
    return any(_is_model_gguf(n) for n in names)


def _stem(name: str) -> str:
    base = PurePosixPath(name).name
    m = SPLIT_RE.match(base)
    return m["stem"] if m else base[: -len(".gguf")]


def quant_of(name: str) -> str:
    """The quantisation a file's name gives: what follows the stem's last '-' or '.'
    (with unsloth's "UD-" prefix): Q4_K_M of `Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf`."""
    m = re.search(r"(?:^|[-.])((?:UD-)?[^-.]+)$", _stem(name), re.IGNORECASE)
    return m[1] if m else _stem(name)


def _matches(name: str, quant: str) -> bool:
    q = quant.lower()
    stem = _stem(name).lower()
    folder = PurePosixPath(name).parent.name.lower()
    return stem == q or stem.endswith(("-" + q, "." + q)) or folder == q or folder.endswith("-" + q)


def model_files(names, repo_id: str) -> dict[str, tuple[str, ...]]:
    """{file or first part: its parts} of the repository's GGUF model files."""
    out: dict[str, tuple[str, ...]] = {}
    for name in sorted(n for n in names if _is_model_gguf(n)):
        path = PurePosixPath(name)
        m = SPLIT_RE.match(path.name)
        if m is None:
            out[name] = (name,)
            continue
        if int(m["no"]) != 1:
            continue
        count = int(m["count"])
        if not 1 <= count <= MAX_GGUF_SPLITS:
            raise _final(
                f"{name} of {repo_id} on the Hub claims {count:,} parts, outside "
                f"1-{MAX_GGUF_SPLITS} (MAX_GGUF_SPLITS)",
                "Hub: bad GGUF split",
            )
        parts = tuple(
            str(path.with_name(f"{m['stem']}-{i:05d}-of-{m['count']}.gguf"))
            for i in range(1, count + 1)
        )
        out[name] = parts
    return out


def choose_gguf(repo_id: str, names, quant: str | None) -> GgufChoice:
    """The file `quant` names (Q4_K_M, else the only one, when None), or one HubError line."""
    unsafe = [n for n in names if _is_model_gguf(n) and name_problem(n)]
    skipped = ""
    if unsafe:
        first = min(unsafe)
        skipped = (
            f" ({len(unsafe):,} .gguf name(s) skipped: '{_shown(first)}' {name_problem(first)})"
        )
    files = model_files((n for n in names if n not in set(unsafe)), repo_id)
    if not files:
        raise _final(
            f"{repo_id} on the Hub has no .gguf model file{skipped} (mmproj files are vision "
            "projectors, not a model); give the repository id without ':QUANT'",
            "Hub: no GGUF file",
        )
    wanted = quant or DEFAULT_QUANT
    found = [f for f in files if _matches(f, wanted)]
    if len(found) > 1:  # "Q4_K_XL" also ends "UD-Q4_K_XL": the exact quant wins
        found = [f for f in found if quant_of(f).lower() == wanted.lower()] or found
    if len(found) == 1:
        choice = found[0]
    elif not found and quant is None and len(files) == 1:
        choice = next(iter(files))
    else:
        listed = _quant_list(files)
        if found:
            shown = ", ".join(_shown(f) for f in found[:4])
            problem = f"has {len(found)} GGUF files for {wanted} ({shown})"
            fix = "name the file's own quant (the end of its name) after the ':'"
        elif quant is None:
            problem = f"holds {len(files)} GGUF models and no {DEFAULT_QUANT} (llama.cpp's default)"
            fix = f"choose one: --model {repo_id}:QUANT, QUANT one of {listed}"
        else:
            problem = f"has no GGUF file for quant {quant}"
            fix = f"its quants are {listed}"
        raise _final(
            f"{repo_id} on the Hub {problem}{skipped}; {fix}", "Hub: GGUF quant not chosen"
        )
    parts = files[choice]
    missing = [p for p in parts if p not in names]
    if missing:
        raise _final(
            f"{repo_id} on the Hub has part 1 of the {len(parts)}-part GGUF model "
            f"{_shown(choice)} but not {_shown(missing[0])}; choose another quant",
            "Hub: GGUF part missing",
        )
    return GgufChoice(choice, parts)


def _quant_list(files) -> str:
    """The quants a repository's files name, for an error line: at most 40, each cut to
    MAX_QUANT_CHARS (a longer one cannot be asked for anyway)."""
    quants = sorted({quant_of(f) for f in files}, key=str.lower)
    shown = [q if len(q) <= MAX_QUANT_CHARS else q[: MAX_QUANT_CHARS - 3] + "..." for q in quants]
    text = ", ".join(shown[:40])
    return text + (f" and {len(quants) - 40} more" if len(quants) > 40 else "")


def _final(message: str, tried: str):
    from vramtui.models.hub import HubError
    from vramtui.safe_text import safe_line

    return HubError(safe_line(message), tried, final=True)


# --- what is kept ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HubGguf:
    """The header of one GGUF model of one commit of a Hub repository, as cached."""

    repo_id: str
    commit: str
    choice: GgufChoice
    directory: Path  # the folder of this file's headers
    stored_sizes: tuple[tuple[str, int], ...]  # (part, its real size)
    endpoint: str

    def model(self) -> GgufModel:
        record = self.directory / _FETCHED
        try:
            stamp = record.stat().st_mtime_ns
        except OSError as exc:
            raise ModelError(f"cannot read {record}: {exc.strerror or exc}") from None
        return _read_model(self, stamp)

    @property
    def label(self) -> str:
        return f"{self.choice.first} of {self.repo_id}@{self.commit[:12]} on the Hub"


@lru_cache(maxsize=8)
def _read_model(snap: HubGguf, stamp: int) -> GgufModel:
    sizes = dict(snap.stored_sizes)
    headers = []
    files = []
    for part in snap.choice.parts:
        path = snap.directory / part
        where = f"{part} of {snap.repo_id} (header cached in {snap.directory})"
        try:
            if path.stat().st_size > MAX_GGUF_HEADER_BYTES:
                raise ModelError(f"{path} is larger than a GGUF header; delete {snap.directory}")
            data = path.read_bytes()
        except OSError as exc:
            raise ModelError(
                f"cannot read {path}: {exc.strerror or exc}; delete {snap.directory} (it is "
                "fetched again)"
            ) from None
        headers.append(walk_header(where, data, sizes.get(part, len(data))))
        files.append(path)
    return GgufModel.from_headers(files, headers, snap.label)


def gguf_repo_dir(repo_id: str) -> Path:
    from vramtui.models.hub import hub_cache_root

    return hub_cache_root() / "gguf" / repo_folder_name(repo_id)


_FETCHED = "vramtui-fetched.json"


def _key(first: str) -> str:
    """The cache folder's name for a file: its path made one name, cut (with a hash of the whole
    to tell cut names apart) to fit a file system's 255 bytes."""
    key = re.sub(r"[^A-Za-z0-9._-]", "_", first.replace("/", "--"))
    if len(key) > 120:
        import hashlib

        key = key[:100] + "-" + hashlib.sha256(first.encode()).hexdigest()[:16]
    return key


def cached_gguf(repo_id: str, revision: str | None, quant: str | None) -> HubGguf | None:
    """The GGUF header vramtui fetched earlier for `revision` and `quant`, else None."""
    repo_dir = gguf_repo_dir(repo_id)
    commit = commit_for(repo_dir, revision)
    return None if commit is None else cached_gguf_at(repo_id, commit, quant)


def cached_gguf_at(repo_id: str, commit: str, quant: str | None) -> HubGguf | None:
    from vramtui.guarded_read import read_json

    snapshot = gguf_repo_dir(repo_id) / "snapshots" / commit
    listing = snapshot / FILES_RECORD
    if not listing.is_file():
        return None
    fix = f"delete {snapshot} (it is fetched again)"
    names = read_json(listing, error=ModelError, what="vramtui's list of GGUF files", fix=fix)
    files = names.get("files")
    if not isinstance(files, list) or not all(isinstance(n, str) for n in files):
        raise ModelError(f"{listing}: 'files' is not a list of file names; {fix}")
    choice = choose_gguf(repo_id, set(files), quant)
    directory = snapshot / _key(choice.first)
    if not (directory / _FETCHED).is_file():
        return None
    record = read_json(directory / _FETCHED, error=ModelError, what="vramtui's record", fix=fix)
    sizes = record.get("stored_sizes")
    if not isinstance(sizes, dict) or set(sizes) != set(choice.parts):
        raise ModelError(f"{directory / _FETCHED}: stored_sizes does not list the parts; {fix}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes.values()):
        raise ModelError(f"{directory / _FETCHED}: stored_sizes holds a size that is not; {fix}")
    return HubGguf(
        repo_id,
        commit,
        choice,
        directory,
        tuple(sorted(sizes.items())),
        str(record.get("endpoint", "")),
    )


# --- asking the Hub -------------------------------------------------------------------------


def _fetch_header(client, name: str) -> tuple[bytes, int]:
    """(the file's header bytes, the file's size), by range reads that stop at the header."""
    from vramtui.models.hub import HubError

    buf = bytearray()
    head, total = client.get(name, cap=_FIRST_READ, start=0, length=_FIRST_READ, allow_short=True)
    buf += head
    where = f"{name} of {client.repo_id} on the Hub"
    if total is None:
        raise HubError(
            f"{where}: the Hub did not say the file's size (no Content-Range); try again",
            f"Hub: no size for {name}",
            final=True,
        )

    def more(n: int) -> bytearray:
        if n > len(buf):
            data, _ = client.get(name, cap=n - len(buf), start=len(buf), length=n - len(buf))
            buf.extend(data)
        return buf

    try:
        header = walk_header(where, buf, total, more)
    except ModelError as exc:
        if isinstance(exc, HubError):
            raise
        raise HubError(str(exc), f"Hub: {name} is not a GGUF file", final=True) from None
    return bytes(buf[: header.header_bytes]), total


def fetch_gguf(client, names: set[str] | None, quant: str | None) -> HubGguf:
    """Fetch (or find cached) the header of the GGUF file `quant` names at `client.commit`."""
    repo_id, commit = client.repo_id, client.commit
    if names is None:
        raise _final(
            f"the Hub did not list the files of {repo_id}, so no GGUF file can be chosen; try "
            "again",
            "Hub: no file list",
        )
    if len(names) > 4 * MAX_GGUF_FILES:
        raise _final(
            f"{repo_id} on the Hub lists {len(names):,} files, over vramtui's limit of "
            f"{4 * MAX_GGUF_FILES:,} for a GGUF repository; download the .gguf file and give "
            "its path",
            "Hub: too many files",
        )
    ggufs = sorted(n for n in names if n.lower().endswith(".gguf"))
    if len(ggufs) > MAX_GGUF_FILES:  # cutting the list would hide the quants past the cut
        raise _final(
            f"{repo_id} on the Hub lists {len(ggufs):,} .gguf files, over vramtui's limit of "
            f"{MAX_GGUF_FILES:,} (MAX_GGUF_FILES); download the .gguf file and give its path",
            "Hub: too many GGUF files",
        )
    snapshot = gguf_repo_dir(repo_id) / "snapshots" / commit
    _write_listing(snapshot, repo_id, ggufs)
    cached = cached_gguf_at(repo_id, commit, quant)
    if cached is not None:
        return cached
    choice = choose_gguf(repo_id, set(ggufs), quant)
    with ThreadPoolExecutor(max_workers=min(_WORKERS, len(choice.parts))) as pool:
        fetched = list(pool.map(lambda p: _fetch_header(client, p), choice.parts))
    files = {p: stub for p, (stub, _) in zip(choice.parts, fetched)}
    sizes = {p: total for p, (_, total) in zip(choice.parts, fetched)}
    return _store(client, snapshot, choice, files, sizes)


def _cache_error(where: Path, exc: OSError):
    from vramtui.models.hub import HubError

    return HubError(
        f"cannot write vramtui's cache at {where}: {exc.strerror or exc}; set "
        "VRAMTUI_CACHE_DIR to a writable directory",
        "Hub: cache not writable",
        final=True,
    )


def _write_listing(snapshot: Path, repo_id: str, ggufs: list[str]) -> None:
    from vramtui.fsutil import atomic_write_text

    try:
        snapshot.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"repo_id": repo_id, "files": ggufs}, indent=1) + "\n"
        atomic_write_text(snapshot / FILES_RECORD, text)
    except OSError as exc:
        raise _cache_error(snapshot, exc) from None


def _store(client, snapshot: Path, choice: GgufChoice, files: dict, sizes: dict) -> HubGguf:
    from vramtui.fsutil import atomic_write_bytes, atomic_write_text

    target = snapshot / _key(choice.first)
    staging = snapshot / f".fetching-{secrets.token_hex(6)}"
    try:
        staging.mkdir()
        for name, data in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        record = {
            "repo_id": client.repo_id,
            "commit": client.commit,
            "endpoint": client.endpoint,
            "fetched_at": datetime.datetime.now(datetime.UTC).isoformat(),
            "file": choice.first,
            "stored_sizes": sizes,
            "note": "each .gguf file here holds only its header; the tensor data was not fetched",
        }
        atomic_write_text(staging / _FETCHED, json.dumps(record, indent=2) + "\n")
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / _FETCHED).is_file():
                shutil.rmtree(target, ignore_errors=True)
                os.replace(staging, target)
    except OSError as exc:
        raise _cache_error(snapshot, exc) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return HubGguf(
        client.repo_id,
        client.commit,
        choice,
        target,
        tuple(sorted(sizes.items())),
        client.endpoint,
    )


def write_ref(repo_id: str, revision: str, commit: str) -> None:
    from vramtui.fsutil import atomic_write_text

    if is_commit(revision):
        return
    ref = gguf_repo_dir(repo_id) / "refs" / revision
    try:
        ref.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(ref, commit)
    except OSError as exc:
        raise _cache_error(ref.parent, exc) from None
