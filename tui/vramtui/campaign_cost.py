"""What a campaign costs on one offer: the cheapest combination of its plans that covers the
campaign's hours, in closed form in the campaign length (no loop over days or hours)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

from vramtui.catalog import Plan


@dataclass(frozen=True)
class Cost:
    total: float
    currency: str
    purchases: tuple[tuple[str, int], ...]  # (plan name, how many)
    hours_covered: float
    per_hour: float | None = None  # the hourly price when only hourly plans are bought

    def describe(self) -> str:
        parts = " + ".join(f"{n} x {name}" for name, n in self.purchases)
        rate = f", {self.per_hour:,.2f} {self.currency}/h" if self.per_hour is not None else ""
        return f"{self.total:,.2f} {self.currency} ({parts}, covers {self.hours_covered:g} h{rate})"

    def short(self) -> str:
        """The total package cost with its currency, and the hourly price when billed by the
        hour: "5.28 USD (0.22 USD/h)"."""
        rate = f" ({self.per_hour:,.2f} {self.currency}/h)" if self.per_hour is not None else ""
        return f"{self.total:,.2f} {self.currency}{rate}"


# Enumerate at most this many combinations of the other plans; beyond, price by table.
_MAX_COMBINATIONS = 50_000


@lru_cache(maxsize=4096)
def cheapest_cover(plans: tuple[Plan, ...], hours: int) -> Cost | None:
    """The cheapest combination of plan purchases whose hours cover `hours` (one currency);
    among equal costs, the fewest purchases.

    Closed form in the campaign length. Order the plans by price per hour (then longest
    first). Exchange argument: lcm(h_i, h_j) hours bought as plan i can be bought as a better
    plan j for no more money and no more purchases, so some optimum buys each plan i fewer
    than h_j / gcd(h_i, h_j) times for every better j. The best plan b covers the rest
    arithmetically: the work depends on the plans, never on the number of days.
    """
    if not plans:
        return None
    currency = plans[0].currency
    plans = tuple(p for p in plans if p.currency == currency)
    steps = [max(1, math.ceil(p.hours)) for p in plans]
    order = sorted(range(len(plans)), key=lambda i: (plans[i].price / steps[i], -steps[i], i))
    b = order[0]
    bounds = {
        i: min(steps[j] // math.gcd(steps[i], steps[j]) for j in order[: order.index(i)])
        for i in order[1:]
    }
    combinations = math.prod(bounds.values())
    if hours * len(plans) <= min(combinations, _MAX_COMBINATIONS):  # short: the table is cheaper
        total, counts = _cover_table(plans, steps, hours)
    elif combinations <= _MAX_COMBINATIONS:
        total, counts = _cover_by_combinations(plans, steps, b, bounds, hours)
    else:
        spare = sum((n - 1) * steps[i] for i, n in bounds.items())
        bulk = max(0, (hours - spare) // steps[b] - 1)  # plan-b purchases an optimum makes
        rest_cost, counts = _cover_table(plans, steps, hours - bulk * steps[b])
        counts[b] += bulk
        total = rest_cost + bulk * plans[b].price
    purchases = tuple((p.name, n) for p, n in zip(plans, counts) if n)
    covered = sum(p.hours * n for p, n in zip(plans, counts))
    bought = [p for p, n in zip(plans, counts) if n]
    per_hour = None
    if bought and all(p.kind == "hourly" and p.hours == 1 for p in bought):
        per_hour = round(total / covered, 4)
    return Cost(round(total, 2), currency, purchases, covered, per_hour)


def _cover_by_combinations(plans, steps, b, bounds, hours) -> tuple[float, list]:
    """Every bounded combination of the other plans, topped up with plan b: cost, counts."""
    others = sorted(bounds)
    best = None
    for combo in itertools.product(*(range(bounds[i]) for i in others)):
        covered = sum(n * steps[i] for n, i in zip(combo, others))
        n_b = max(0, -(-(hours - covered) // steps[b]))
        cost = sum(n * plans[i].price for n, i in zip(combo, others)) + n_b * plans[b].price
        key = (round(cost, 6), sum(combo) + n_b)
        if best is None or key < best[0]:
            best = (key, cost, combo, n_b)
    _, cost, combo, n_b = best
    counts = [0] * len(plans)
    for n, i in zip(combo, others):
        counts[i] = n
    counts[b] = n_b
    return cost, counts


def _cover_table(plans: tuple[Plan, ...], steps: list[int], hours: int) -> tuple[float, list]:
    """Cheapest cover of `hours` by table (fewest purchases among equal costs): cost, counts."""
    cost = [0.0] * (hours + 1)
    count = [0] * (hours + 1)
    pick = [-1] * (hours + 1)
    for h in range(1, hours + 1):
        best = None
        for i, p in enumerate(plans):
            prev = max(0, h - steps[i])
            option = (round(cost[prev] + p.price, 6), count[prev] + 1, i)
            if best is None or option[:2] < best[:2]:
                best = option
        cost[h], count[h], pick[h] = best
    counts = [0] * len(plans)
    h = hours
    while h > 0:
        counts[pick[h]] += 1
        h = max(0, h - steps[pick[h]])
    return cost[hours], counts
