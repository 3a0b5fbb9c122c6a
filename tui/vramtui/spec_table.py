"""Reading one table of a spec's raw TOML dict, with one-line `SpecError` messages.

`_Table` holds the typed getters (string, integer, choice, table...) and the key-path, example
and did-you-mean wording every spec error shares.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from vramtui import limits
from vramtui.errors import SpecError
from vramtui.safe_text import safe_line, safe_text
from vramtui.spec_types import (
    _EXAMPLES,
    SCHEMA_KEYS,
)

# --------------------------------------------------------------------------------------------
# Message helpers
# --------------------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(safe_line(text).split())


def _fail(message: str) -> SpecError:
    return SpecError(_one_line(message))


def _toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def _show(value: Any) -> str:
    """'string '4k'', 'integer 0', 'table' ... for messages (short, single line)."""
    kind = _toml_type(value)
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int) and value.bit_length() > 128:
        sign = "-" if value < 0 else ""
        return f"{kind} {sign}(about {int(abs(value).bit_length() * 0.30103) + 1} digits)"
    if isinstance(value, (list, tuple)):
        return f"{kind} of {len(value)} items"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}"


def _suggest(word: str, choices: Iterable[str]) -> str | None:
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered:
        return lowered[word.lower()]
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def _table_header(path: str) -> str:
    if path == "":
        return "at the top of the file"
    if path == "quality":
        return "in the [[quality]] entry"
    return f"under [{path}]"


# --------------------------------------------------------------------------------------------
# Reading one table of the raw TOML dict
# --------------------------------------------------------------------------------------------


class _Table:
    """One table of the raw dict, with its key path prefix and the source file for messages."""

    def __init__(self, data: Mapping[str, Any], path: str, source: str, schema: str | None = None):
        # TOML has no null: a None value (from a dict built in code, such as the app's form)
        # means the key is absent, so the stated default applies or "required" is reported.
        self.data = {k: v for k, v in data.items() if v is not None}
        self.path = path  # "lengths", "task.lora", "quality[0]", "" for the top level
        self.schema = path if schema is None else schema  # key into SCHEMA_KEYS / _EXAMPLES
        self.source = source

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def has(self, name: str) -> bool:
        return name in self.data

    def check_keys(self) -> None:
        allowed = SCHEMA_KEYS[self.schema]
        for name in self.data:
            if name in allowed:
                continue
            full = self.key(name)
            close = _suggest(name, allowed)
            if close is not None:
                hint = f"did you mean '{self.key(close)}'?"
            else:
                elsewhere = [
                    f"{table}.{name}" if table else name
                    for table, keys in SCHEMA_KEYS.items()
                    if name in keys and table not in ("weights.groups",)
                ]
                if elsewhere:
                    hint = f"did you mean '{elsewhere[0]}'? (it belongs in another table)"
                else:
                    known = ", ".join(allowed)
                    hint = f"remove it; known keys {_table_header(self.path)}: {known}"
            raise _fail(f"unknown key '{full}' in {self.source}; {hint}")

    # -- presence ---------------------------------------------------------------------------

    def missing(self, name: str, why: str = "") -> SpecError:
        schema_key = f"{self.schema}.{name}" if self.schema else name
        example = _EXAMPLES.get(schema_key, "...")
        why = f" {why}" if why else ""
        return _fail(
            f"{self.key(name)} is required{why} but missing in {self.source}; "
            f"add {name} = {example} {_table_header(self.path)}"
        )

    def forbid(self, name: str, why: str, fix: str = "remove it") -> None:
        if name in self.data:
            raise _fail(f"{self.key(name)} {why} ({self.source}); {fix}")

    def _get(self, name: str, required: bool, why: str) -> Any:
        if name in self.data:
            return self.data[name]
        if required:
            raise self.missing(name, why)
        return None

    def wrong_type(self, name: str, expected: str, value: Any) -> SpecError:
        schema_key = f"{self.schema}.{name}" if self.schema else name
        example = _EXAMPLES.get(schema_key)
        fix = f"; write e.g. {name} = {example}" if example else ""
        return _fail(
            f"{self.key(name)} must be {expected}, got {_show(value)} ({self.source}){fix}"
        )

    def out_of_range(self, name: str, condition: str, value: Any, fix: str) -> SpecError:
        shown = limits.show_number(value) if isinstance(value, (int, float)) else repr(value)
        return _fail(f"{self.key(name)} must be {condition}, got {shown} ({self.source}); {fix}")

    # -- typed getters: None when absent and not required -------------------------------------

    def integer(
        self,
        name: str,
        *,
        required: bool = False,
        why: str = "",
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int | None:
        value = self._get(name, required, why)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.wrong_type(name, "an integer", value)
        if minimum is not None and value < minimum:
            raise self.out_of_range(name, f">= {minimum}", value, f"set it to {minimum} or more")
        self._at_most(name, value, maximum)
        return value

    def number(
        self,
        name: str,
        *,
        required: bool = False,
        why: str = "",
        maximum: float | None = None,
    ) -> float | int | None:
        value = self._get(name, required, why)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.wrong_type(name, "a number", value)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.out_of_range(name, "a finite number", value, "write a plain number")
        self._at_most(name, value, maximum)
        return value

    def _at_most(self, name: str, value: float, maximum: float | None) -> None:
        """Refuse a value above vramtui's limit (vramtui.limits), naming the limit."""
        if maximum is not None and value > maximum:
            raise _fail(
                f"{self.key(name)} = {limits.show_number(value)} is above vramtui's limit of {maximum:,} "
                f"({self.source}); set it to {maximum:,} or less"
            )

    def boolean(self, name: str, *, required: bool = False, why: str = "") -> bool | None:
        value = self._get(name, required, why)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.wrong_type(name, "true or false", value)
        return value

    def string(
        self,
        name: str,
        *,
        required: bool = False,
        why: str = "",
        nonempty: bool = False,
        multiline: bool = False,
        raw: bool = False,
    ) -> str | None:
        """A string with its control characters made visible (`vramtui.safe_text`): one line
        unless `multiline`; `raw` (a file path) keeps it as written."""
        value = self._get(name, required, why)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.wrong_type(name, "a string", value)
        if nonempty and not value.strip():
            raise _fail(
                f"{self.key(name)} is empty ({self.source}); write a non-empty string or remove "
                "the key"
            )
        if raw:
            return value
        return safe_text(value) if multiline else safe_line(value)

    def choice(
        self, name: str, choices: Iterable[str], *, required: bool = False, why: str = ""
    ) -> str | None:
        choices = tuple(choices)
        value = self._get(name, required, why)
        if value is None:
            return None
        if not isinstance(value, str) or value not in choices:
            shown = _show(value)
            close = _suggest(value, choices) if isinstance(value, str) else None
            hint = f"did you mean '{close}'?" if close else "use one of those"
            raise _fail(
                f"{self.key(name)} must be one of {', '.join(choices)}, got {shown} "
                f"({self.source}); {hint}"
            )
        return value

    def table(
        self, name: str, *, required: bool = False, why: str = "", hint: str = ""
    ) -> _Table | None:
        value = self.data.get(name)
        if value is None:
            if required:
                why = f" {why}" if why else ""
                raise _fail(
                    f"[{self.key(name)}] table is required{why} but missing in {self.source}; add "
                    f"a [{self.key(name)}] table{hint}"
                )
            return None
        if not isinstance(value, Mapping):
            raise _fail(
                f"{self.key(name)} must be a table, got {_show(value)} ({self.source}); write it "
                f"as a [{self.key(name)}] table"
            )
        return _Table(
            value,
            self.key(name),
            self.source,
            schema=f"{self.schema}.{name}" if self.schema else name,
        )
