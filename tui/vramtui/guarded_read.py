"""Guarded readers: one function per input format, each turning whatever a broken or hostile
input raises into one line of the caller's error class.

Every file vramtui reads goes through here: TOML (specs, catalogues, config), JSON
(`config.json`, shard indexes), JSON lines (probe files, feed recordings, the SSH agent's
stream), safetensors headers, and plain-text logs. What is guarded:

- size: every read stops at a cap the caller names, and the message says which; `/dev/zero`,
  an endless pipe or standard input stop there instead of filling memory;
- decoding: bytes that are not UTF-8;
- nesting: `[[[[...` or `{{{{...` (a RecursionError inside the parser), and anything nested
  deeper than MAX_NESTING levels, which no vramtui input needs;
- integers past Python's digit limit (the ValueError `int()` raises inside tomllib and json);
- a wrong top-level type (an array where an object is due), stray TypeError/OverflowError;
- file kinds: a missing, unreadable or non-regular path (a directory, a FIFO with no writer:
  never a hang).

The error class is the caller's (`SpecError`, `CatalogError`, `ModelError`, ...), so a problem
keeps the name of what it is a problem of. Standard library and `vramtui.errors` only.
"""

from __future__ import annotations

import json
import os
import re
import stat
import struct
import sys
import tomllib
from collections.abc import Callable
from typing import Any, BinaryIO

from vramtui.errors import VramtuiError

ErrorClass = Callable[[str], VramtuiError]

MAX_NESTING = 64  # arrays/tables/objects inside each other; vramtui's own files use under 8
MAX_TOML_BYTES = 8 * 2**20  # a spec, a catalogue entry, the config
MAX_JSON_BYTES = 64 * 2**20  # config.json, a shard index
MAX_SAFETENSORS_HEADER_BYTES = 100_000_000  # the limit of the safetensors library itself
_CHUNK = 1 << 20


class Unreadable(Exception):
    """Why a text could not be parsed, before it gets the caller's error class and wording.

    `syntax` is True for malformed syntax (a line cut short reads so); `line`/`column` locate
    it when the parser said where.
    """

    def __init__(
        self, problem: str, *, syntax: bool = False, line: int | None = None, column=None
    ):
        super().__init__(problem)
        self.problem = problem
        self.syntax = syntax
        self.line = line
        self.column = column


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def size_text(n: int) -> str:
    """A cap as people write it: 512 MiB, 100 MB, else exact bytes."""
    if n >= 2**20 and n % 2**20 == 0:
        return f"{n // 2**20} MiB"
    if n >= 10**6 and n % 10**6 == 0:
        return f"{n // 10**6} MB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n:,} bytes"


# ---------------------------------------------------------------------------------- bytes


def read_bytes(
    path: str | os.PathLike[str],
    *,
    error: ErrorClass,
    what: str,
    cap: int,
    label: str | None = None,
    too_big_fix: str = "",
    missing: str = "does not exist",
    missing_fix: str = "check the path",
) -> bytes:
    """At most `cap` bytes of the file at `path`, else `error` (one line).

    `what` says what the file is ("spec file", "log file"); messages start with `label`
    (default: `what` and the path); `missing` and `missing_fix` word a missing file. The file
    is opened without blocking, so a FIFO nobody writes to reads as empty instead of hanging;
    a directory is refused; a regular file larger than `cap` is refused before it is read, and
    anything else (a character device such as /dev/zero, a pipe) is read until `cap` and
    refused past it.
    """
    label = label if label is not None else f"{what} {os.fspath(path)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(one_line(f"{label} {missing}; {missing_fix}")) from None
    except IsADirectoryError:
        raise _is_directory(error, what, label) from None
    except PermissionError:
        raise error(
            one_line(
                f"{label} cannot be read: permission denied; make it readable (chmod u+r) or "
                "copy it"
            )
        ) from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise _os_error(error, label, exc) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise _is_directory(error, what, label)
        if stat.S_ISREG(info.st_mode) and info.st_size > cap:
            raise _too_big(error, label, cap, too_big_fix)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            data = read_stream(fh, error=error, source=label, cap=cap, too_big_fix=too_big_fix)
    except OSError as exc:
        raise _os_error(error, label, exc) from None
    finally:
        if fd >= 0:
            os.close(fd)
    if not data and stat.S_ISFIFO(info.st_mode):
        raise error(
            one_line(
                f"{label} is a FIFO (named pipe) that nothing wrote to; pass a regular file, or "
                "pipe the text to standard input"
            )
        )
    return data


def _is_directory(error: ErrorClass, what: str, label: str) -> VramtuiError:
    return error(one_line(f"{label} is a directory; give the path of the {what} itself"))


def _os_error(error: ErrorClass, label: str, exc: Exception) -> VramtuiError:
    reason = getattr(exc, "strerror", None) or exc
    return error(one_line(f"{label} cannot be read ({reason}); check the path and the disk"))


def _too_big(error: ErrorClass, source: str, cap: int, fix: str) -> VramtuiError:
    tail = f"; {fix}" if fix else ""
    return error(one_line(f"{source} is over {size_text(cap)}, the reading limit{tail}"))


def read_stream(
    stream: BinaryIO, *, error: ErrorClass, source: str, cap: int, too_big_fix: str = ""
) -> bytes:
    """At most `cap` bytes of a binary stream (standard input, a pipe, a device), else `error`:
    reading stops one byte past the cap, so an endless stream never fills memory."""
    parts: list[bytes] = []
    total = 0
    while total <= cap:
        chunk = stream.read(min(_CHUNK, cap + 1 - total))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    if total > cap:
        raise _too_big(error, source, cap, too_big_fix)
    return b"".join(parts)


def read_stdin_bytes(*, error: ErrorClass, cap: int, too_big_fix: str = "") -> bytes:
    """Standard input, up to `cap` bytes (see read_stream)."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream without a buffer (a test's StringIO)
        text = sys.stdin.read(cap + 1)
        data = text.encode("utf-8", "surrogateescape")
        if len(text) > cap or len(data) > cap:
            raise _too_big(error, "standard input", cap, too_big_fix)
        return data
    return read_stream(
        stream, error=error, source="standard input", cap=cap, too_big_fix=too_big_fix
    )


def decode_utf8(raw: bytes, *, error: ErrorClass, source: str, bom: bool = True) -> str:
    """UTF-8 text (a leading BOM dropped when `bom`), else `error` naming the bad byte."""
    try:
        return raw.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(
            one_line(
                f"{source} is not UTF-8 text (bad byte at line {line}, offset {exc.start}); "
                "save it as UTF-8"
            )
        ) from None


# ---------------------------------------------------------------------------- text / logs


def read_log_text(
    source: str | os.PathLike[str],
    *,
    error: ErrorClass,
    what: str,
    cap: int,
    too_big_fix: str = "",
    missing: str = "does not exist",
) -> str:
    """A log as text: the file at `source`, or standard input for "-", at most `cap` bytes.
    Bytes that are not UTF-8 become U+FFFD (a log is read for what it says, not rejected)."""
    if os.fspath(source) == "-":
        raw = read_stdin_bytes(error=error, cap=cap, too_big_fix=too_big_fix)
    else:
        raw = read_bytes(
            source, error=error, what=what, cap=cap, too_big_fix=too_big_fix, missing=missing
        )
    return raw.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------- nesting


def check_nesting(value: Any, limit: int = MAX_NESTING, what: str = "arrays or tables") -> None:
    """Raise Unreadable when lists/dicts nest deeper than `limit` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise Unreadable(f"nests {what} more than {limit} levels deep (the limit)")
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


def _value_error(exc: ValueError) -> Unreadable:
    text = str(exc)
    if "integer string conversion" in text:
        return Unreadable(
            f"holds an integer of more than {sys.get_int_max_str_digits()} digits (the limit)"
        )
    return Unreadable(f"cannot be read ({one_line(text)[:200]})")


# ---------------------------------------------------------------------------------- TOML


def decode_toml(text: str) -> dict:
    """tomllib.loads, with every failure an Unreadable."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_syntax(exc) from None
    except RecursionError:
        raise Unreadable(
            f"nests arrays or tables more than {MAX_NESTING} levels deep (the limit)"
        ) from None
    except ValueError as exc:
        raise _value_error(exc) from None
    except (TypeError, OverflowError) as exc:
        raise Unreadable(f"cannot be read ({one_line(exc)[:200]})") from None
    check_nesting(data)
    return data


_TOML_POSITION = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$")


def _toml_syntax(exc: tomllib.TOMLDecodeError) -> Unreadable:
    detail = one_line(getattr(exc, "msg", None) or str(exc))
    line, col = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    match = _TOML_POSITION.match(detail)
    if match:
        detail, line, col = match["msg"], int(match["line"]), int(match["col"])
    detail = detail.removesuffix(" (at end of document)")
    return Unreadable(detail, syntax=True, line=line, column=col)


def toml_message(exc: Unreadable, source: str, fix: str) -> str:
    """The one line for a TOML problem of `source`."""
    if exc.syntax:
        if exc.line is not None:
            return one_line(
                f"malformed TOML in {source} at line {exc.line}, column {exc.column}: "
                f"{exc.problem}; fix the TOML syntax at that line"
            )
        return one_line(
            f"malformed TOML in {source} at the end of the document: {exc.problem}; fix the "
            "TOML syntax at the end of the file"
        )
    return one_line(f"{source} {exc.problem}; {fix}")


def parse_toml(text: str, *, error: ErrorClass, source: str, fix: str = "fix the file") -> dict:
    """TOML text as a dict, else `error` (one line naming `source`)."""
    try:
        return decode_toml(text)
    except Unreadable as exc:
        raise error(toml_message(exc, source, fix)) from None


def read_toml(
    path: str | os.PathLike[str],
    *,
    error: ErrorClass,
    what: str,
    source: str | None = None,
    cap: int = MAX_TOML_BYTES,
    fix: str = "fix the file",
    missing_fix: str = "check the path",
) -> dict:
    """The TOML file at `path` as a dict (at most `cap` bytes, UTF-8), else `error`."""
    shown = source if source is not None else f"{what} {os.fspath(path)}"
    raw = read_bytes(
        path,
        error=error,
        what=what,
        cap=cap,
        label=shown,
        too_big_fix=f"no {what} needs that much; check it is the right file",
        missing_fix=missing_fix,
    )
    text = decode_utf8(raw, error=error, source=shown)
    return parse_toml(text, error=error, source=shown, fix=fix)


# ---------------------------------------------------------------------------------- JSON


def decode_json(data: str | bytes) -> Any:
    """json.loads, with every failure an Unreadable (bytes must be UTF-8)."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Unreadable(f"is not UTF-8 text (bad byte at offset {exc.start})") from None
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        raise Unreadable(
            f"is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})",
            syntax=True,
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except RecursionError:
        raise Unreadable(
            f"nests arrays or objects more than {MAX_NESTING} levels deep (the limit)"
        ) from None
    except ValueError as exc:
        raise _value_error(exc) from None
    except (TypeError, OverflowError) as exc:
        raise Unreadable(f"cannot be read ({one_line(exc)[:200]})") from None
    check_nesting(value, what="arrays or objects")
    return value


_JSON_TYPES = {dict: "an object", list: "an array"}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def parse_json(
    data: str | bytes,
    *,
    error: ErrorClass,
    source: str,
    fix: str = "fix or replace the file",
    expect: type | None = dict,
) -> Any:
    """JSON text as a value (of type `expect` when given), else `error` naming `source`."""
    try:
        value = decode_json(data)
    except Unreadable as exc:
        raise error(one_line(f"{source} {exc.problem}; {fix}")) from None
    if expect is not None and not isinstance(value, expect):
        raise error(
            one_line(f"{source} is {_json_type(value)}, not {_JSON_TYPES[expect]}; {fix}")
        )
    return value


def read_json(
    path: str | os.PathLike[str],
    *,
    error: ErrorClass,
    what: str,
    source: str | None = None,
    cap: int = MAX_JSON_BYTES,
    fix: str = "fix or replace the file",
    expect: type | None = dict,
) -> Any:
    """The JSON file at `path` (at most `cap` bytes), else `error`."""
    shown = source if source is not None else f"{what} {os.fspath(path)}"
    raw = read_bytes(
        path,
        error=error,
        what=what,
        cap=cap,
        label=shown,
        too_big_fix=f"no {what} is that large; {fix}",
    )
    return parse_json(raw, error=error, source=shown, fix=fix, expect=expect)


def parse_json_line(
    line: str | bytes,
    *,
    error: ErrorClass,
    source: str,
    lineno: int,
    fix: str,
    expect: type | None = dict,
) -> Any:
    """One line of a JSON-lines file, else `error` naming the file and the line number."""
    return parse_json(
        line, error=error, source=f"{source}, line {lineno}:", fix=fix, expect=expect
    )


# ---------------------------------------------------------------------------- safetensors


def read_safetensors_header(
    path: str | os.PathLike[str],
    *,
    error: ErrorClass,
    cap: int = MAX_SAFETENSORS_HEADER_BYTES,
    fix: str = "re-download the file (an interrupted download leaves it truncated)",
    stored_file_bytes: int | None = None,
) -> tuple[dict, int, int]:
    """(header object, header length, file size) of a safetensors file, else `error`.

    The format: an unsigned 64-bit little-endian header length, then that many bytes of JSON.
    The length is bounded by `cap` and by the file's size before anything else is read.
    `stored_file_bytes`, when given, is the size of the real file of which `path` holds only
    the beginning (a header fetched from the Hub); the size returned is then that one.
    """
    shown = os.fspath(path)

    def bad(problem: str, how: str = fix) -> VramtuiError:
        return error(one_line(f"{shown}: {problem}; {how}"))

    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise bad("not a regular file", "point at a .safetensors file")
            file_bytes = info.st_size
            if stored_file_bytes is not None:
                file_bytes = max(file_bytes, stored_file_bytes)
            head = fh.read(8)
            if len(head) < 8:
                raise bad(f"file is {len(head)} bytes, shorter than the 8-byte header length")
            (header_bytes,) = struct.unpack("<Q", head)
            if header_bytes > cap:
                raise bad(
                    f"header length {header_bytes} exceeds the {size_text(cap)} limit: not a "
                    "safetensors file",
                    "point --model at a Hugging Face safetensors checkpoint",
                )
            if 8 + header_bytes > file_bytes:
                raise bad(f"header length {header_bytes} exceeds the file size {file_bytes}")
            raw = fh.read(header_bytes)
    except OSError as exc:
        raise bad(
            f"cannot read ({exc.strerror or exc})", "check the path and its permissions"
        ) from None
    if len(raw) < header_bytes:
        raise bad(f"header cut short ({len(raw)} of {header_bytes} bytes)")
    try:
        header = decode_json(raw)
    except Unreadable as exc:
        raise bad(f"header {exc.problem}") from None
    if not isinstance(header, dict):
        raise bad(f"header is {_json_type(header)}, not a JSON object")
    return header, header_bytes, file_bytes
