"""How old an offer's price is, and when it is old enough to be re-checked.

Prices move. Every offer says when its price was seen: the offer's `seen_on` date when it has
one (`vramtui offers import` always writes it), else the newest `[[evidence]]` date. A price
seen more than `price_max_age_days` days before the planning date (config key
`price_max_age_days`, `--price-max-age DAYS`, default 30) is flagged "price to re-check", and so
is a price with no date at all. The flag never changes a requirement's status or the ranking:
it says which figures to confirm with the provider before ordering.
"""

from __future__ import annotations

import datetime
import math

from vramtui.errors import VramtuiError
from vramtui.limits import MAX_DAYS, is_finite_number, show_number

DEFAULT_PRICE_MAX_AGE_DAYS = 30
MAX_PRICE_AGE_DAYS = MAX_DAYS  # ten years: an age past that flags nothing a user still holds
RECHECK = "price to re-check"


def price_seen_on(offer) -> datetime.date | None:
    """When the offer's prices were seen: `seen_on`, else its newest evidence date."""
    if getattr(offer, "seen_on", None) is not None:
        return offer.seen_on
    dates = [e.date for e in offer.evidence if e.date is not None]
    return max(dates) if dates else None


def price_age_days(offer, today: datetime.date) -> int | None:
    seen = price_seen_on(offer)
    return None if seen is None else (today - seen).days


def price_is_stale(offer, today: datetime.date, max_age_days: float) -> bool:
    """More than `max_age_days` old on `today`, or undated."""
    age = price_age_days(offer, today)
    return age is None or age > max_age_days


def recheck_reason(offer, today: datetime.date, max_age_days: float) -> str:
    """One line: why the price is flagged ("" when it is not)."""
    if not price_is_stale(offer, today, max_age_days):
        return ""
    seen = price_seen_on(offer)
    if seen is None:
        return f"{RECHECK}: the offer does not say when its price was seen"
    age = (today - seen).days
    return (
        f"{RECHECK}: seen {seen.isoformat()}, {age} days before {today.isoformat()} "
        f"(more than {max_age_days:g})"
    )


def check_max_age(value: float, what: str, error=VramtuiError) -> float:
    """A price age limit in days, 0 .. MAX_PRICE_AGE_DAYS, else `error` naming `what`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= MAX_PRICE_AGE_DAYS
    ):
        got = show_number(value) if is_finite_number(value) else repr(value)[:40]
        raise error(
            f"{what} must be a number of days from 0 to vramtui's limit of "
            f"{MAX_PRICE_AGE_DAYS:,}, got {got}; e.g. {DEFAULT_PRICE_MAX_AGE_DAYS}"
        )
    return float(value)


def with_price_age(candidate, today: datetime.date, max_age_days: float):
    """A shortlist candidate with its price date and re-check flag filled in."""
    from dataclasses import replace

    return replace(
        candidate,
        price_seen_on=price_seen_on(candidate.offer),
        price_recheck=recheck_reason(candidate.offer, today, max_age_days),
    )
