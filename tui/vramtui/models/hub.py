"""A model on the Hugging Face Hub, sized from its config and safetensors headers only (a
GGUF repository from its GGUF file's header: `vramtui.models.hub_gguf`).

What is fetched: `config.json`, the shard index `model.safetensors.index.json` (and an
AutoGPTQ `quantize_config.json` where the repository has one), and the header of each
safetensors file by two HTTP range reads: its first 8 bytes (the header length), then the
header itself. Never a byte of the weights. The header length is bounded by
`MAX_HEADER_BYTES` (the safetensors library's own limit) before it is asked for.

What was fetched is kept in vramtui's cache (`vramtui.paths.cache_dir()/hub`) in the Hugging
Face cache layout: `models--owner--name/refs/<branch>` holds the commit and
`snapshots/<commit>/` the files, each safetensors file cut after its header. Its real size is
kept in `FETCHED_FILE` beside them (written last: a snapshot without it is incomplete and is
fetched again). A snapshot is built in a private folder and renamed into place, so a crash
or a concurrent fetch never leaves a half-written one.

`huggingface_hub` is imported here only, and only when the Hub is really asked: the
catalogue, a local directory and both caches need no import of it. `HF_TOKEN` (or the token
`hf auth login` saved) is sent as `huggingface_hub` sends it; `HF_ENDPOINT`,
`HF_HUB_OFFLINE` and `HF_HUB_DOWNLOAD_TIMEOUT` are read at each call.
"""

from __future__ import annotations

import datetime
import os
import secrets
import shutil
import struct
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from vramtui.errors import ModelError
from vramtui.models.checkpoint import (
    INDEX_FILE,
    MAX_HEADER_BYTES,
    MAX_JSON_BYTES,
    SINGLE_FILE,
)
from vramtui.models.hf_cache import (
    DEFAULT_REVISION,
    commit_for,
    is_commit,
    repo_folder_name,
)

DEFAULT_ENDPOINT = "https://huggingface.co"
FETCHED_FILE = "vramtui-fetched.json"
LEGACY_GPTQ_FILE = "quantize_config.json"
MAX_SHARDS = 4096  # the largest published checkpoints have a few hundred shards
DEFAULT_TIMEOUT_S = 10.0
_WORKERS = 8


class HubError(ModelError):
    """The Hub could not give the model. `tried` is the short phrase for the list of what
    was tried; `final` is True when the answer is definite and deserves its own line (a
    gated repository, a refused token, a broken file), not "not found, try something else"."""

    def __init__(self, message: str, tried: str, final: bool = False) -> None:
        super().__init__(message)
        self.tried = tried
        self.final = final


@dataclass(frozen=True)
class HubSnapshot:
    """What vramtui keeps of one commit of a Hub repository."""

    repo_id: str
    commit: str
    directory: Path
    stored_sizes: tuple[tuple[str, int], ...]  # (safetensors file, its real size)
    endpoint: str


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _timeout() -> float:
    try:
        value = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if 0 < value <= 600 else DEFAULT_TIMEOUT_S


def hub_cache_root() -> Path:
    from vramtui.paths import cache_dir

    return cache_dir() / "hub"


# --- the cache -----------------------------------------------------------------------------------


def cached_snapshot(repo_id: str, revision: str | None, quant: str | None = None):
    """The complete snapshot (HubSnapshot, or HubGguf for a GGUF file) vramtui fetched
    earlier for `revision` (and `quant`: a GGUF file), else None."""
    from vramtui.models.hub_gguf import cached_gguf

    if quant is None:
        repo_dir = hub_cache_root() / repo_folder_name(repo_id)
        commit = commit_for(repo_dir, revision)
        if commit is not None:
            found = _read_snapshot(repo_id, repo_dir / "snapshots" / commit, commit)
            if found is not None:
                return found
    return cached_gguf(repo_id, revision, quant)


def _cached_at(repo_id: str, commit: str, quant: str | None):
    from vramtui.models.hub_gguf import cached_gguf_at

    if quant is None:
        repo_dir = hub_cache_root() / repo_folder_name(repo_id)
        found = _read_snapshot(repo_id, repo_dir / "snapshots" / commit, commit)
        if found is not None:
            return found
    return cached_gguf_at(repo_id, commit, quant)


def _read_snapshot(repo_id: str, directory: Path, commit: str) -> HubSnapshot | None:
    from vramtui.guarded_read import read_json

    if not (directory / FETCHED_FILE).is_file():
        return None
    record = read_json(
        directory / FETCHED_FILE,
        error=ModelError,
        what="vramtui's record of a Hub fetch",
        fix=f"delete {directory} (it is fetched again)",
    )
    sizes = record.get("stored_sizes")
    if not isinstance(sizes, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in sizes.items()
    ):
        raise ModelError(
            f"{directory / FETCHED_FILE}: stored_sizes is not a map of file sizes; delete "
            f"{directory} (it is fetched again)"
        )
    return HubSnapshot(
        repo_id=repo_id,
        commit=commit,
        directory=directory,
        stored_sizes=tuple(sorted(sizes.items())),
        endpoint=str(record.get("endpoint", "")),
    )


def _write_ref(repo_dir: Path, revision: str, commit: str) -> None:
    from vramtui.fsutil import atomic_write_text

    if is_commit(revision):
        return
    ref = repo_dir / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(ref, commit)


# --- asking the Hub --------------------------------------------------------------------------------


def _classify(repo_id: str, revision: str, status: int, code: str, message: str, what: str):
    """A HubError for an HTTP answer of the Hub (status, X-Error-Code, X-Error-Message)."""
    from huggingface_hub import get_token

    page = f"{endpoint()}/{repo_id}"
    has_token = bool(get_token())
    if status == 401 and "invalid credentials" in message.lower():
        return HubError(
            f"the Hub refused the token in HF_TOKEN for {repo_id} (invalid credentials): set "
            "HF_TOKEN to a valid access token (https://huggingface.co/settings/tokens), or "
            "unset it for a public model",
            "Hub: token refused",
            final=True,
        )
    if code == "GatedRepo" or (status == 403 and has_token):
        if has_token:
            fix = f"accept its licence at {page} with the account of HF_TOKEN, then run again"
        else:
            fix = (
                f"accept its licence at {page}, then set HF_TOKEN to an access token of that "
                "account (https://huggingface.co/settings/tokens)"
            )
        return HubError(f"model {repo_id} is gated on the Hub: {fix}", "Hub: gated", final=True)
    if code == "RevisionNotFound":
        return HubError(
            f"the Hub has no revision {revision} of {repo_id}: give a branch, tag or commit "
            "that exists as model.revision",
            f"Hub: no revision {revision}",
            final=True,
        )
    if code == "EntryNotFound" or (status == 404 and what != "model info"):
        return HubError(
            f"{repo_id} on the Hub has no {what}: it is not a transformers model repository "
            f"(for one of its GGUF files, give --model {repo_id}:QUANT), or pass --params N",
            f"Hub: no {what}",
            final=True,
        )
    if status == 416:  # a range from byte 0 that the file cannot satisfy: it is empty
        return HubError(
            f"{what} of {repo_id} on the Hub is empty (HTTP 416 for its first bytes): not a "
            "model file; choose another file or quant",
            f"Hub: {what} is empty",
            final=True,
        )
    if status in (401, 404) or code == "RepoNotFound":
        private = "" if has_token else " (or private: set HF_TOKEN)"
        return HubError(
            f"no repository {repo_id} on the Hub{private}",
            f"Hub: no repository {repo_id}{private}",
        )
    return HubError(
        f"the Hub answered HTTP {status} for the {what} of {repo_id}; try again later",
        f"Hub: HTTP {status}",
    )


def _from_exception(exc: Exception, repo_id: str, revision: str, what: str) -> HubError:
    """A HubError for whatever a request raised: an HTTP error, offline mode, the network."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        headers = response.headers
        return _classify(
            repo_id,
            revision,
            status,
            headers.get("X-Error-Code", ""),
            headers.get("X-Error-Message", ""),
            what,
        )
    if type(exc).__name__ == "OfflineModeIsEnabled":
        return HubError(
            f"the Hub was not asked for {repo_id}: offline mode is on", "Hub: offline mode"
        )
    detail = " ".join(str(exc).split())[:160] or type(exc).__name__
    return HubError(
        f"the Hub could not be reached for {repo_id} ({type(exc).__name__}: {detail}); check "
        "the network, or set HF_HUB_OFFLINE=1 to use only what is cached",
        f"Hub: network error ({type(exc).__name__})",
    )


class _Client:
    """Requests to one repository at one commit, through huggingface_hub's session."""

    def __init__(self, repo_id: str, revision: str) -> None:
        from huggingface_hub import get_session
        from huggingface_hub.utils import build_hf_headers

        self.repo_id = repo_id
        self.revision = revision
        self.endpoint = endpoint()
        self.session = get_session()
        self.headers = build_hf_headers()
        self.timeout = _timeout()
        self.commit = revision

    def model_info(self):
        from huggingface_hub import HfApi

        api = HfApi(endpoint=self.endpoint)
        try:
            return api.model_info(self.repo_id, revision=self.revision, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line
            raise _from_exception(exc, self.repo_id, self.revision, "model info") from None

    def url(self, filename: str) -> str:
        from huggingface_hub import hf_hub_url

        return hf_hub_url(self.repo_id, filename, revision=self.commit, endpoint=self.endpoint)

    def get(
        self,
        filename: str,
        cap: int,
        start: int = 0,
        length: int | None = None,
        allow_short: bool = False,
    ):
        """(bytes, size of the whole file): the file, or `length` bytes from `start`.

        Stops reading at `cap` bytes (a larger file is an error naming the limit); a server
        that ignores the Range header is read no further than the bytes asked for. With
        `allow_short`, a range that the file's end cuts short is no error.
        """
        headers = dict(self.headers)
        if length is not None:
            headers["Range"] = f"bytes={start}-{start + length - 1}"
        try:
            with self.session.stream(
                "GET", self.url(filename), headers=headers, timeout=self.timeout
            ) as response:
                status = response.status_code
                if status >= 400:
                    raise _classify(
                        self.repo_id,
                        self.revision,
                        status,
                        response.headers.get("X-Error-Code", ""),
                        response.headers.get("X-Error-Message", ""),
                        filename,
                    )
                total = _total_size(response, status)
                skip = start if (length is not None and status != 206) else 0
                want = length if length is not None else cap + 1
                data = _read_at_most(response, skip, want)
        except HubError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line
            raise _from_exception(exc, self.repo_id, self.revision, filename) from None
        if length is None and len(data) > cap:
            raise HubError(
                f"{filename} of {self.repo_id} on the Hub is over {_mib(cap)}, the limit for "
                "it: not a model config",
                f"Hub: {filename} too large",
                final=True,
            )
        ends = allow_short and total is not None and start + len(data) >= total
        if length is not None and len(data) < length and not ends:
            raise HubError(
                f"the Hub sent {len(data)} of the {length} bytes asked of {filename} "
                f"({self.repo_id}); try again",
                f"Hub: {filename} cut short",
                final=True,
            )
        return data, total


def _mib(n: int) -> str:
    from vramtui.guarded_read import size_text

    return size_text(n)


def _total_size(response, status: int) -> int | None:
    if status == 206:
        value = response.headers.get("Content-Range", "")
        total = value.rpartition("/")[2]
        return int(total) if total.isdigit() else None
    length = response.headers.get("Content-Length", "")
    return int(length) if length.isdigit() else None


def _read_at_most(response, skip: int, want: int) -> bytes:
    out = bytearray()
    for chunk in response.iter_bytes():
        if skip:
            dropped = min(skip, len(chunk))
            chunk, skip = chunk[dropped:], skip - dropped
        out += chunk
        if len(out) >= want:
            break
    return bytes(out[:want])


def _json(data: bytes, repo_id: str, filename: str) -> dict:
    from vramtui.guarded_read import parse_json

    return parse_json(
        data,
        error=lambda m: HubError(m, f"Hub: {filename} unreadable", final=True),
        source=f"{filename} of {repo_id} on the Hub",
        fix="the repository's file is broken: pass --params N, or a local directory",
    )


def _safetensors_header(client: _Client, filename: str) -> tuple[bytes, int]:
    """(the file's first 8 + N bytes: length and header, the file's whole size)."""
    head, total = client.get(filename, cap=8, start=0, length=8)
    (header_bytes,) = struct.unpack("<Q", head)
    where = f"{filename} of {client.repo_id} on the Hub"
    if header_bytes > MAX_HEADER_BYTES:
        raise HubError(
            f"{where}: safetensors header length {header_bytes:,} bytes is over the "
            f"{_mib(MAX_HEADER_BYTES)} limit: not a safetensors file; pass --params N",
            f"Hub: {filename} header over the limit",
            final=True,
        )
    if total is None:
        raise HubError(
            f"{where}: the Hub did not say the file's size (no Content-Range); try again",
            f"Hub: no size for {filename}",
            final=True,
        )
    if 8 + header_bytes > total:
        raise HubError(
            f"{where}: header length {header_bytes:,} is past the end of the "
            f"{total:,}-byte file: not a safetensors file",
            f"Hub: {filename} broken",
            final=True,
        )
    header, _ = client.get(filename, cap=header_bytes, start=8, length=header_bytes)
    return head + header, total


def _shard_names(index: dict, repo_id: str) -> list[str]:
    weight_map = index.get("weight_map")
    where = f"{INDEX_FILE} of {repo_id} on the Hub"
    if not isinstance(weight_map, dict) or not weight_map:
        raise HubError(f"{where} has no weight_map; pass --params N", "Hub: bad index", True)
    names = sorted({v for v in weight_map.values() if isinstance(v, str)})
    if any(not isinstance(v, str) for v in weight_map.values()) or not names:
        raise HubError(
            f"{where}: weight_map names a shard that is not a file name", "Hub: bad index", True
        )
    if len(names) > MAX_SHARDS:
        raise HubError(
            f"{where} lists {len(names):,} shards, over the limit of {MAX_SHARDS:,}",
            "Hub: too many shards",
            True,
        )
    for name in names:
        if "/" in name or "\\" in name or name.startswith(".") or not name.endswith(".safetensors"):
            raise HubError(
                f"{where}: shard {name!r} is not a .safetensors file beside the index "
                "(vramtui reads shards in the repository's top folder only)",
                "Hub: bad index",
                True,
            )
    return names


def fetch_snapshot(repo_id: str, revision: str | None, quant: str | None = None):
    """Ask the Hub for `revision` of `repo_id`; fetch what is not cached yet. HubError else.

    A HubSnapshot (config.json and safetensors headers), or a HubGguf (the header of one
    GGUF file) when `quant` names one or the repository holds GGUF files and no safetensors."""
    from vramtui.models import hub_gguf

    rev = revision or DEFAULT_REVISION
    repo_dir = hub_cache_root() / repo_folder_name(repo_id)
    if is_commit(rev):
        cached = _cached_at(repo_id, rev, quant)
        if cached is not None:
            return cached
    client = _Client(repo_id, rev)
    info = client.model_info()
    commit = getattr(info, "sha", None)
    if not isinstance(commit, str) or not is_commit(commit):
        raise HubError(
            f"the Hub gave no commit for {repo_id} at {rev}; try again",
            "Hub: no commit in the answer",
        )
    client.commit = commit
    siblings = getattr(info, "siblings", None)
    names = None if siblings is None else {s.rfilename for s in siblings}
    if quant is not None or hub_gguf.is_gguf_only(names):
        # A GGUF repository is sized from the GGUF file's header, never from a config.json
        # (which some publish, in full or as a stub): that would count unquantised weights.
        found = hub_gguf.fetch_gguf(client, names, quant)
        hub_gguf.write_ref(repo_id, rev, commit)
        return found
    cached = _read_snapshot(repo_id, repo_dir / "snapshots" / commit, commit)
    if cached is None:
        cached = _fetch_files(client, repo_dir, names)
    _write_ref(repo_dir, rev, commit)
    return cached


def _fetch_files(client: _Client, repo_dir: Path, names: set[str] | None) -> HubSnapshot:
    repo_id = client.repo_id
    files: dict[str, bytes] = {}
    config, _ = client.get("config.json", cap=MAX_JSON_BYTES)
    _json(config, repo_id, "config.json")
    files["config.json"] = config
    if names is None or LEGACY_GPTQ_FILE in names:
        try:
            files[LEGACY_GPTQ_FILE] = client.get(LEGACY_GPTQ_FILE, cap=MAX_JSON_BYTES)[0]
        except HubError as exc:
            if names is not None or not exc.tried.startswith("Hub: no "):
                raise
    shards: list[str] = []
    sizes: dict[str, int] = {}
    if names is None or SINGLE_FILE in names:
        try:
            files[SINGLE_FILE], sizes[SINGLE_FILE] = _safetensors_header(client, SINGLE_FILE)
        except HubError as exc:
            if names is not None or not exc.tried.startswith("Hub: no "):
                raise
    if not sizes and (names is None or INDEX_FILE in names):
        try:
            index_bytes, _ = client.get(INDEX_FILE, cap=MAX_JSON_BYTES)
        except HubError as exc:
            if names is not None or not exc.tried.startswith("Hub: no "):
                raise
        else:
            shards = _shard_names(_json(index_bytes, repo_id, INDEX_FILE), repo_id)
            files[INDEX_FILE] = index_bytes
    if shards:
        with ThreadPoolExecutor(max_workers=min(_WORKERS, len(shards))) as pool:
            for name, (stub, total) in zip(
                shards, pool.map(lambda n: _safetensors_header(client, n), shards)
            ):
                files[name] = stub
                sizes[name] = total
    return _store(client, repo_dir, files, sizes)


def _store(client: _Client, repo_dir: Path, files: dict[str, bytes], sizes: dict[str, int]):
    """Validate what was fetched (as a local directory), then rename it into the cache."""
    import json

    from vramtui.fsutil import atomic_write_bytes, atomic_write_text
    from vramtui.models.checkpoint import read_checkpoint

    repo_id, commit = client.repo_id, client.commit
    snapshots = repo_dir / "snapshots"
    target = snapshots / commit
    try:
        snapshots.mkdir(parents=True, exist_ok=True)
        staging = snapshots / f".fetching-{commit[:12]}-{secrets.token_hex(4)}"
        staging.mkdir()
    except OSError as exc:
        raise HubError(
            f"cannot write vramtui's cache at {repo_dir}: {exc.strerror or exc}; set "
            "VRAMTUI_CACHE_DIR to a writable directory",
            "Hub: cache not writable",
            final=True,
        ) from None
    try:
        for name, data in files.items():
            atomic_write_bytes(staging / name, data)
        # Read the headers back as a local directory would be: a broken one is named now,
        # not cached. (config.json is read by the caller: a family vramtui cannot size yet
        # is still cached, and its message names the key.)
        read_checkpoint(staging, sizes)
        record = {
            "repo_id": repo_id,
            "commit": commit,
            "endpoint": client.endpoint,
            "fetched_at": datetime.datetime.now(datetime.UTC).isoformat(),
            "stored_sizes": sizes,
            "note": "safetensors files here hold only their header; the weights were not fetched",
        }
        atomic_write_text(staging / FETCHED_FILE, json.dumps(record, indent=2) + "\n")
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / FETCHED_FILE).is_file():
                shutil.rmtree(target, ignore_errors=True)
                os.replace(staging, target)
    except OSError as exc:
        raise HubError(
            f"cannot write vramtui's cache at {repo_dir}: {exc.strerror or exc}; set "
            "VRAMTUI_CACHE_DIR to a writable directory",
            "Hub: cache not writable",
            final=True,
        ) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return HubSnapshot(
        repo_id=repo_id,
        commit=commit,
        directory=target,
        stored_sizes=tuple(sorted(sizes.items())),
        endpoint=client.endpoint,
    )
