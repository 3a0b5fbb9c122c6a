"""The autosaved drafts: the form as typed, so that no input is lost to a dropped connection.

Every running app instance owns one draft file in `<state dir>/drafts/` (the state dir is the
platformdirs user state dir `vramtui`, or `$VRAMTUI_STATE_DIR`):

- a spec opened from a file gets `<file stem>-<hash of its resolved path>.toml`;
- a new, unsaved spec, or a second instance on a spec whose draft is held or left over, gets
  a name of its own with a random part, so no two instances ever write the same file.

The instance holds an advisory lock (`fcntl.flock` on `<draft>.lock` beside it) while it lives;
a killed instance's lock goes with its process, which is how start-up tells a draft left
behind (recoverable) from one another instance is still writing. Where `fcntl` is missing
drafts are never treated as held and names stay unique.

A draft holds the form (which may be an invalid spec), the texts of fields that did not parse,
and the file the spec came from. Written atomically. A draft set aside goes to `set-aside/`
and one that cannot be read to `unreadable/`, under names that never collide; neither is ever
deleted.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import os
import re
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from vramtui.errors import VramtuiError
from vramtui.fsutil import atomic_write_text

try:  # POSIX: advisory locks; elsewhere drafts are never seen as held by another instance
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

DRAFT_VERSION = 1
MAX_DRAFT_BYTES = 1 << 20  # a draft is a form: far below this; larger is not one of ours
MAX_FORM_DEPTH = 16  # a spec nests tables three deep; deeper is corruption
MAX_ORIGIN_CHARS = 4096
MAX_LISTED = 20  # start-up lists the newest drafts; older ones wait for the next start
SET_ASIDE_DIR = "set-aside"
UNREADABLE_DIR = "unreadable"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class DraftError(VramtuiError):
    """A draft file that cannot be read back as a form."""


def state_dir() -> Path:
    override = os.environ.get("VRAMTUI_STATE_DIR")
    if override:
        return Path(override)
    from platformdirs import user_state_dir

    return Path(user_state_dir("vramtui"))


def drafts_dir() -> Path:
    return state_dir() / "drafts"


def legacy_draft_path() -> Path:
    """Where versions before per-instance drafts kept their one draft: still offered."""
    return state_dir() / "draft.toml"


def printable(text: str, limit: int = 120) -> str:
    """`text` without control characters (no escape sequence reaches the terminal), cut."""
    clean = _CONTROL.sub("", str(text))
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


# ------------------------------------------------------------------------------ the file


@dataclass(frozen=True)
class Draft:
    form: dict
    texts: dict[str, str]
    origin: str  # the spec file the draft belongs to ("" for a new spec)
    saved_at: str  # ISO time, UTC

    def title(self) -> str:
        name = self.form.get("name")
        model = self.form.get("model")
        if not (isinstance(name, str) and name.strip()) and isinstance(model, dict):
            name = model.get("id") or model.get("path")
        return printable(name if isinstance(name, str) and name.strip() else "unnamed spec", 60)

    def describe(self) -> str:
        where = f" (from {printable(self.origin, 80)})" if self.origin else " (new spec)"
        return f"{self.title()}{where}, saved {printable(self.saved_at, 40)}"


def write_draft(form: dict, texts: dict[str, str], origin: Path | None, path: Path) -> Path:
    """Write the draft atomically; raises OSError (disk full, state dir unwritable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "draft": {
            "version": DRAFT_VERSION,
            "origin": str(origin) if origin else "",
            "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        },
        "form": form,
        "texts": dict(texts),
    }
    atomic_write_text(path, tomli_w.dumps(data))
    return path


def load_draft(path: Path) -> Draft:
    """The draft in `path`; FileNotFoundError when there is none, DraftError (one line) for
    anything that is not a draft as this version writes it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_DRAFT_BYTES + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise DraftError(f"draft {path.name} cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_DRAFT_BYTES:
        raise DraftError(f"draft {path.name} is larger than {MAX_DRAFT_BYTES} bytes")
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise DraftError(f"draft {path.name} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise DraftError(f"draft {path.name} is not valid TOML ({exc})") from None
    except (RecursionError, ValueError, MemoryError) as exc:
        # deep nesting; integers beyond the digit limit
        raise DraftError(f"draft {path.name} cannot be parsed ({type(exc).__name__})") from None
    return _draft_from_doc(doc, path.name)


def _draft_from_doc(doc: dict, name: str) -> Draft:
    def bad(why: str) -> DraftError:
        return DraftError(f"draft {name}: {why}")

    meta = doc.get("draft")
    if not isinstance(meta, dict):
        raise bad("no [draft] table")
    if meta.get("version") != DRAFT_VERSION or type(meta.get("version")) is not int:
        raise bad(f"version is not {DRAFT_VERSION}")
    origin = meta.get("origin", "")
    saved_at = meta.get("saved_at", "")
    if not isinstance(origin, str) or len(origin) > MAX_ORIGIN_CHARS or _CONTROL.search(origin):
        raise bad("origin is not a file path")
    if not isinstance(saved_at, str):
        raise bad("saved_at is not a time")
    form = doc.get("form", {})
    if not isinstance(form, dict):
        raise bad("form is not a table")
    if _depth(form) > MAX_FORM_DEPTH:
        raise bad(f"form nests deeper than {MAX_FORM_DEPTH} levels")
    texts = doc.get("texts", {})
    if not isinstance(texts, dict) or not all(isinstance(v, str) for v in texts.values()):
        raise bad("texts is not a table of strings")
    return Draft(form=form, texts=dict(texts), origin=origin, saved_at=saved_at)


def _depth(value) -> int:
    """Nesting depth of tables and arrays, without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_FORM_DEPTH:
                return depth
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def read_draft(path: Path) -> Draft | None:
    """The draft in `path`, or None when there is none or it cannot be read (then it is moved
    to `unreadable/` beside it, never deleted)."""
    try:
        return load_draft(path)
    except FileNotFoundError:
        return None
    except DraftError:
        set_aside(path, UNREADABLE_DIR)
        return None


def discard_draft(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def set_aside(path: Path, kind: str = SET_ASIDE_DIR) -> Path | None:
    """Move the draft into `<its dir>/<kind>/<stem>-<UTC time>[-n].toml`, never over an
    existing file; return the new path (None when there was nothing to move, or it could not
    be moved: then it stays where it is)."""
    if not path.is_file():
        return None
    directory = path.parent / kind
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for n in range(1, 10_000):
            target = directory / f"{path.stem}-{stamp}{'' if n == 1 else f'-{n}'}.toml"
            if _move_exclusive(path, target):
                return target
    except OSError:
        return None
    return None


def _move_exclusive(source: Path, target: Path) -> bool:
    """Move `source` to `target` unless `target` exists (False then); never overwrites."""
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (
            errno.EPERM,
            errno.ENOTSUP,
            errno.EXDEV,
            errno.EMLINK,
            errno.EOPNOTSUPP,
        ):
            raise
        # no hard links here: copy into a file created exclusively
        data = source.read_bytes()
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    source.unlink()
    return True


# ------------------------------------------------------------------------------ locks


def lock_path_for(draft: Path) -> Path:
    return draft.with_name(draft.name + ".lock")


def _try_lock(lock_path: Path) -> int | None:
    """An fd holding the exclusive lock on `lock_path`, or None when another instance holds
    it. Without fcntl: -1 (nothing is ever held). Raises OSError when the file cannot be made."""
    if fcntl is None:
        return -1
    for _ in range(10):
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None  # held by a live instance
            return -1  # no locking on this file system: behave as without fcntl
        # A releasing instance unlinks its lock file while holding it: make sure the lock won
        # is on the file that is there now, not on one already unlinked.
        try:
            if os.stat(lock_path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
    return None


def _unlock(lock_path: Path, fd: int | None) -> None:
    if fd is None or fd < 0:
        return
    try:
        lock_path.unlink()
    except OSError:
        pass
    os.close(fd)


def is_held(draft: Path) -> bool:
    """True when a live instance holds the draft's lock."""
    lock = lock_path_for(draft)
    if fcntl is None or not lock.exists():
        return False
    try:
        fd = _try_lock(lock)
    except OSError:
        return False
    if fd is None:
        return True
    _unlock(lock, fd)  # nobody held it: a stale lock file of a killed instance
    return False


def name_for_spec(origin: Path) -> str:
    """`<readable stem>-<10 hex of the resolved path>`: the same spec, the same draft name."""
    try:
        resolved = str(origin.expanduser().resolve())
    except (OSError, RuntimeError, ValueError):
        resolved = str(origin)
    digest = hashlib.sha256(resolved.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", origin.stem).strip(".-")[:40] or "spec"
    return f"{slug}-{digest}"


class DraftSlot:
    """This instance's draft file and the lock it holds on it while it lives."""

    def __init__(self, path: Path, lock_fd: int | None = None, problem: str = "") -> None:
        self.path = path
        self._fd = lock_fd
        self.problem = problem  # why no lock could be taken ("" when held, or no fcntl)

    @property
    def held(self) -> bool:
        return self._fd is not None

    @classmethod
    def claim(cls, origin: Path | None, directory: Path | None = None) -> DraftSlot:
        """The slot for a spec from `origin` (None: a new spec): the path's own name when no
        live instance holds it and no draft is left there, else a unique name."""
        directory = directory if directory is not None else drafts_dir()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if origin is not None:
                base = name_for_spec(origin)
                slot = cls._take(directory / f"{base}.toml")
                if slot is not None:
                    return slot
            else:
                stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
                base = f"new-{stamp}"
            for _ in range(100):
                slot = cls._take(directory / f"{base}-{secrets.token_hex(3)}.toml")
                if slot is not None:
                    return slot
        except OSError as exc:
            problem = f"{exc.strerror or exc}"
        else:
            problem = "no free draft name"
        name = name_for_spec(origin) if origin is not None else "new"
        return cls(directory / f"{name}-{secrets.token_hex(3)}.toml", None, problem)

    @classmethod
    def _take(cls, path: Path) -> DraftSlot | None:
        fd = _try_lock(lock_path_for(path))
        if fd is None:
            return None
        if path.exists():  # a draft left by a killed instance: offered, never overwritten
            _unlock(lock_path_for(path), fd)
            return None
        return cls(path, fd)

    @classmethod
    def fixed(cls, path: Path) -> DraftSlot:
        """A slot on a given file (tests, or a draft being recovered); unlocked when another
        instance holds it or the lock file cannot be made."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return cls(path, _try_lock(lock_path_for(path)))
        except OSError as exc:
            return cls(path, None, exc.strerror or str(exc))

    @classmethod
    def adopt(cls, path: Path) -> DraftSlot | None:
        """Take over a recoverable draft; None when a live instance holds it."""
        try:
            fd = _try_lock(lock_path_for(path))
        except OSError as exc:  # no lock file can be made there: recover it all the same
            return cls(path, None, exc.strerror or str(exc))
        return None if fd is None else cls(path, fd)

    def write(self, form: dict, texts: dict[str, str], origin: Path | None) -> Path:
        return write_draft(form, texts, origin, self.path)

    def discard(self) -> None:
        try:
            discard_draft(self.path)
        except OSError:
            pass

    def set_aside(self) -> Path | None:
        return set_aside(self.path)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        _unlock(lock_path_for(self.path), fd)


# ------------------------------------------------------------------------------ start-up list


@dataclass(frozen=True)
class DraftEntry:
    """A recoverable draft as start-up lists it."""

    path: Path
    draft: Draft
    age: str  # "12 min ago"
    diff: str  # "3 fields differ: model.id, lengths.prompt_tokens, task.kind"

    def line(self) -> str:
        where = printable(Path(self.draft.origin).name, 60) if self.draft.origin else "new spec"
        return f"{self.draft.title()} ({where}), {self.age}: {self.diff}"


def recoverable_drafts(
    directory: Path | None = None,
    legacy: Path | None = None,
    now: datetime.datetime | None = None,
) -> tuple[list[DraftEntry], list[str]]:
    """The drafts no live instance holds, newest first (at most MAX_LISTED), and one line per
    unreadable draft found (each moved to `unreadable/`)."""
    directory = directory if directory is not None else drafts_dir()
    legacy = legacy if legacy is not None else legacy_draft_path()
    now = now or datetime.datetime.now(datetime.timezone.utc)
    try:
        candidates = [p for p in directory.glob("*.toml") if p.is_file()]
    except OSError:
        candidates = []
    try:
        if legacy.is_file():
            candidates.append(legacy)
    except OSError:
        pass
    found: list[tuple[float, DraftEntry]] = []
    notes: list[str] = []
    for path in candidates:
        if is_held(path):
            continue
        try:
            draft = load_draft(path)
        except FileNotFoundError:
            continue  # recovered or saved by another instance meanwhile
        except DraftError as exc:
            moved = set_aside(path, UNREADABLE_DIR)
            notes.append(f"{exc}; kept as {moved}" if moved else str(exc))
            continue
        try:
            mtime = path.stat().st_mtime
        except OSError:
            mtime = 0.0
        entry = DraftEntry(path, draft, _age(draft.saved_at, mtime, now), draft_diff(draft))
        found.append((mtime, entry))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [entry for _, entry in found[:MAX_LISTED]], notes


def _age(saved_at: str, mtime: float, now: datetime.datetime) -> str:
    try:
        when = datetime.datetime.fromisoformat(saved_at)
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
    except (ValueError, TypeError):
        when = datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc)
    seconds = (now - when).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"


def draft_diff(draft: Draft, limit: int = 4) -> str:
    """One line: which fields of the draft differ from its spec file on disk (or from the
    built-in seed example for a new spec)."""
    from vramtui.builtin_specs import drop_seed_description, seed_example_spec
    from vramtui.spec import load_spec, spec_to_dict

    if draft.origin:
        origin = Path(draft.origin)
        try:
            base = spec_to_dict(load_spec(origin))
        except VramtuiError:
            try:
                gone = not origin.exists()
            except (OSError, ValueError):
                gone = True
            return "its spec file is gone" if gone else "its spec file cannot be read"
        except (OSError, ValueError, RecursionError):
            return "its spec file cannot be read"
    else:
        base = spec_to_dict(seed_example_spec())
        if isinstance(draft.form, dict) and draft.form.get("description") == "":
            drop_seed_description(base)  # dropped by the first edit: not one of the user's
    changed = sorted(set(_differing(_pruned(base), _pruned(draft.form))) | set(draft.texts))
    if not changed:
        return "no field differs"
    shown = ", ".join(printable(c, 40) for c in changed[:limit])
    more = f", +{len(changed) - limit} more" if len(changed) > limit else ""
    noun = "1 field differs" if len(changed) == 1 else f"{len(changed)} fields differ"
    return f"{noun}: {shown}{more}"


def _pruned(form: dict) -> dict:
    """The form without the keys of fields that do not apply (what the app's edits drop)."""
    import copy

    from vramtui.spec_fields import prune_inapplicable

    pruned = copy.deepcopy(form)
    try:
        prune_inapplicable(pruned)
    except (TypeError, ValueError, AttributeError, KeyError):
        return form  # a damaged form: compared as it is
    return pruned


def _differing(a, b, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += _differing(a.get(key), b.get(key), f"{prefix}{key}.")
        return out
    return [] if a == b else [prefix.rstrip(".") or "spec"]
