"""The import schema: one row (a CSV line, a JSON object, or what an adapter made of a
provider's record) -> one checked `ImportedOffer`, or one line saying what is wrong.

Columns (docs/catalog-offers.md, "Importing offers"): provider, gpu, gpu_count, gpu_memory_gb,
price, currency, billing_unit, region, interconnect, storage_gb, host_ram_gb, vcpus, seen_on,
source_url, title, notes. Every string loses its control characters (`vramtui.safe_text`) and is
bounded (MAX_FIELD_CHARS, MAX_URL_CHARS, MAX_NOTES_CHARS); every number is bounded where it
enters (`vramtui.limits`).
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass

from vramtui.catalog import INTERCONNECTS
from vramtui.limits import MAX_GPUS, MAX_MONEY, is_finite_number, show_number
from vramtui.gpu_match import GpuMatchError, match_gpu
from vramtui.safe_text import safe_line, safe_text

MAX_FIELD_CHARS = 200  # provider, gpu, region, title, currency, billing unit, a number as text
MAX_URL_CHARS = 2_000  # source_url
MAX_NOTES_CHARS = 2_000  # notes
MAX_HOST_GB = 10**9  # storage_gb, host_ram_gb: a billion GB (an exabyte) per server
MAX_VCPUS = 10**7

COLUMNS = (
    "provider",
    "gpu",
    "gpu_count",
    "gpu_memory_gb",
    "price",
    "currency",
    "billing_unit",
    "region",
    "interconnect",
    "storage_gb",
    "host_ram_gb",
    "vcpus",
    "seen_on",
    "source_url",
    "title",
    "notes",
)
REQUIRED = ("provider", "gpu", "price", "currency", "seen_on")

# billing unit -> (plan kind, hours one purchase covers, factor to a price per hour or None)
BILLING_UNITS = {
    "second": ("hourly", 1.0, 3600.0),
    "minute": ("hourly", 1.0, 60.0),
    "hour": ("hourly", 1.0, 1.0),
    "day": ("daily", 24.0, None),
    "week": ("multi_day", 168.0, None),
    "month": ("monthly", 720.0, None),
}
_UNIT_ALIASES = {
    "s": "second",
    "sec": "second",
    "seconds": "second",
    "per second": "second",
    "min": "minute",
    "minutes": "minute",
    "per minute": "minute",
    "h": "hour",
    "hr": "hour",
    "hours": "hour",
    "hourly": "hour",
    "per hour": "hour",
    "daily": "day",
    "days": "day",
    "weekly": "week",
    "weeks": "week",
    "monthly": "month",
    "months": "month",
    "mo": "month",
}


_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")


class RowError(Exception):
    """One bad field of one row: str() is the problem and its fix (no row label)."""


@dataclass(frozen=True)
class ImportedOffer:
    """One good row, ready to be written as an offer file."""

    provider: str
    gpu: str  # catalogue id
    gpu_as_written: str
    gpu_count: int
    plan_kind: str
    plan_hours: float
    plan_price: float  # one purchase of the plan, for the whole offer
    currency: str
    billing_unit: str
    price_as_written: float  # per billing unit
    region: str | None
    interconnect: str | None
    disk_gb: float | None
    host_ram_gb: float | None
    vcpus: int | None
    seen_on: datetime.date
    source_url: str | None
    title: str | None
    notes: str

    @property
    def per_hour(self) -> float:
        return self.plan_price / self.plan_hours

    def price_line(self) -> str:
        """The price as written and as the offer records it: "0.000111 USD/second = 0.40
        USD/h", "1,200.00 USD/month (720 h; 1.67 USD/h)"."""
        _, hours, factor = BILLING_UNITS[self.billing_unit]
        written = f"{money(self.price_as_written)} {self.currency}/{self.billing_unit}"
        if self.billing_unit == "hour":
            return f"{money(self.plan_price)} {self.currency}/h"
        if factor is not None:
            return f"{written} = {money(self.plan_price)} {self.currency}/h (converted)"
        return f"{written} ({hours:g} h per purchase; {money(self.per_hour)} {self.currency}/h)"


def money(x: float) -> str:
    """A price with two decimals, or up to six where two would round it: 0.355, 0.000111."""
    if round(x, 2) == round(x, 6):
        return f"{x:,.2f}"
    return f"{x:,.6f}".rstrip("0")


def _clean(value, name: str, limit: int = MAX_FIELD_CHARS, multiline: bool = False) -> str:
    """A field as text: control characters made visible, lone surrogates replaced, bounded."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise RowError(f"{name} must be text or a number, got {_kind(value)}; write a plain value")
    text = value if isinstance(value, str) else show_number(value).replace(",", "")
    text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) > limit:
        raise RowError(
            f"{name} is {len(text):,} characters, over the import limit of {limit:,} "
            f"(MAX_{'URL' if name == 'source_url' else 'NOTES' if name == 'notes' else 'FIELD'}"
            "_CHARS); shorten it"
        )
    text = safe_text(text) if multiline else safe_line(text)
    return text.strip()


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _text(row: dict, name: str, required: bool = False, **kw) -> str | None:
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise RowError(f"{name} is missing; {_HOW[name]}")
        return None
    return _clean(value, name, **kw) or None


def _number(row: dict, name: str, required: bool = False) -> float | None:
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise RowError(f"{name} is missing; {_HOW[name]}")
        return None
    if isinstance(value, str):
        text = _clean(value, name)
        # "1,234.50" is a thousands separator; "1,5" (a decimal comma) is refused, not read as 15.
        plain = text.replace(",", "") if _THOUSANDS.fullmatch(text) else text
        try:
            number = float(plain)
        except ValueError:
            raise RowError(
                f"{name} {text!r} is not a number (write decimals with a point); {_HOW[name]}"
            ) from None
    elif is_finite_number(value):
        number = float(value)
    elif isinstance(value, float):
        raise RowError(f"{name} must be a finite number; {_HOW[name]}")
    else:
        raise RowError(f"{name} must be a number, got {_kind(value)}; {_HOW[name]}")
    if not math.isfinite(number):
        raise RowError(f"{name} must be a finite number; {_HOW[name]}")
    if number < 0:
        raise RowError(f"{name} {show_number(number)} is negative; {_HOW[name]}")
    return number


def _bounded(number: float | None, name: str, limit: float) -> float | None:
    if number is not None and number > limit:
        raise RowError(
            f"{name} = {show_number(number)} is above the import limit of {limit:,}; {_HOW[name]}"
        )
    return number


_HOW = {
    "provider": "write who sells the offer, e.g. 'Lambda'",
    "gpu": "write the GPU model, e.g. 'RTX 4090' or a catalogue id from `vramtui gpus`",
    "gpu_count": "write the number of cards in the offer, a whole number from 1",
    "gpu_memory_gb": "write the memory of one card in GB, e.g. 24",
    "price": "write the price of the whole offer per billing unit as a positive number, e.g. 1.29",
    "currency": "write an ISO 4217 code such as USD or EUR",
    "billing_unit": f"write one of {', '.join(BILLING_UNITS)}",
    "region": "write where the machine runs",
    "interconnect": f"write one of {', '.join(INTERCONNECTS)}, or leave it empty",
    "storage_gb": "write the local disk of the server in GB, e.g. 512",
    "host_ram_gb": "write the host memory of the server in GB, e.g. 200",
    "vcpus": "write the vCPUs of the server, a whole number",
    "seen_on": "write the date the price was seen as YYYY-MM-DD, e.g. 2026-12-01",
    "source_url": "write where the price is published",
    "title": "write the offer as the provider names it",
    "notes": "shorten the notes",
}


def _date(row: dict, today: datetime.date, default: datetime.date | None) -> datetime.date:
    value = row.get("seen_on")
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is not None:
            return default
        raise RowError(f"seen_on is missing; {_HOW['seen_on']} (or give --seen-on DATE)")
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        seen = value
    else:
        text = _clean(value, "seen_on")
        # A timestamp ("2026-12-01T10:00:00Z") keeps its date.
        m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})(?:[T ][0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?)?", text)
        try:
            seen = datetime.date.fromisoformat(m.group(1)) if m else None
        except ValueError:
            seen = None
        if seen is None:
            raise RowError(f"seen_on {text!r} is not a date; {_HOW['seen_on']}")
    if seen > today:
        raise RowError(
            f"seen_on {seen.isoformat()} is after today ({today.isoformat()}); write the date "
            "the price was seen"
        )
    return seen


def check_row(
    row: dict,
    gpus: dict,
    today: datetime.date,
    default_seen_on: datetime.date | None = None,
) -> ImportedOffer:
    """One row of the import schema, checked; RowError (one line, no row label) otherwise."""
    provider = _text(row, "provider", required=True)
    gpu_text = _text(row, "gpu", required=True)
    memory = _bounded(_number(row, "gpu_memory_gb"), "gpu_memory_gb", 10**6)
    try:
        gpu = match_gpu(gpus, gpu_text, memory or None)
    except GpuMatchError as exc:
        raise RowError(str(exc)) from None
    count = _number(row, "gpu_count")
    count = 1 if count is None else count
    if count != int(count) or count < 1:
        raise RowError(
            f"gpu_count {show_number(count)} is not a whole number >= 1; {_HOW['gpu_count']}"
        )
    count = int(_bounded(count, "gpu_count", MAX_GPUS))
    price = _bounded(_number(row, "price", required=True), "price", MAX_MONEY)
    if price == 0:
        raise RowError(f"price is 0; {_HOW['price']}")
    currency = _text(row, "currency", required=True).upper()
    if not re.fullmatch(r"[A-Z]{3}", currency):
        raise RowError(f"currency {currency!r} is not a three-letter code; {_HOW['currency']}")
    unit_text = (_text(row, "billing_unit") or "hour").lower()
    unit = _UNIT_ALIASES.get(unit_text, unit_text)
    if unit not in BILLING_UNITS:
        raise RowError(f"billing_unit {unit_text!r} is not known; {_HOW['billing_unit']}")
    kind, hours, factor = BILLING_UNITS[unit]
    plan_price = price * factor if factor is not None else price
    interconnect = _text(row, "interconnect")
    if interconnect is not None:
        interconnect = interconnect.lower()
        if interconnect not in INTERCONNECTS:
            raise RowError(f"interconnect {interconnect!r} is not known; {_HOW['interconnect']}")
        if interconnect not in gpu.interconnects:
            raise RowError(
                f"interconnect {interconnect!r} is not a link of {gpu.id} (it has "
                f"{', '.join(gpu.interconnects)}); fix the interconnect or the gpu"
            )
    vcpus = _bounded(_number(row, "vcpus"), "vcpus", MAX_VCPUS)
    if vcpus is not None and vcpus != int(vcpus):
        raise RowError(f"vcpus {show_number(vcpus)} is not a whole number; {_HOW['vcpus']}")
    return ImportedOffer(
        provider=provider,
        gpu=gpu.id,
        gpu_as_written=gpu_text,
        gpu_count=count,
        plan_kind=kind,
        plan_hours=hours,
        plan_price=plan_price,
        currency=currency,
        billing_unit=unit,
        price_as_written=price,
        region=_text(row, "region"),
        interconnect=interconnect,
        disk_gb=_bounded(_number(row, "storage_gb"), "storage_gb", MAX_HOST_GB),
        host_ram_gb=_bounded(_number(row, "host_ram_gb"), "host_ram_gb", MAX_HOST_GB),
        vcpus=None if vcpus is None else int(vcpus),
        seen_on=_date(row, today, default_seen_on),
        source_url=_text(row, "source_url", limit=MAX_URL_CHARS),
        title=_text(row, "title"),
        notes=_text(row, "notes", limit=MAX_NOTES_CHARS, multiline=True) or "",
    )
