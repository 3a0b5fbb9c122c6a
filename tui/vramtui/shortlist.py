"""The seed's decision procedure: every requirement of every candidate is fit, needs
verification or excluded, with its evidence; only all-fit candidates are ranked.

Ranking: total package cost for the campaign, then effective margin at the worst stage, then
the documented schedule. Preferences (a software image that is not required) are reported but
never change a status: a preference cannot rescue an excluded candidate. Price says nothing
about speed.

The types are in `shortlist_types` and the requirement checks in `shortlist_requirements`;
their names are imported here too, where callers have always found them.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, replace

from vramtui.campaign_cost import cheapest_cover
from vramtui.catalog import Catalog, Gpu, Offer
from vramtui.errors import SpecError
from vramtui.ledger.items import Estimate
from vramtui.limits import MAX_DAYS
from vramtui.shortlist_json import shortlist_to_dict  # noqa: F401  (its home before)
from vramtui.shortlist_requirements import (  # noqa: F401  (re-exported)
    BNB_FORMATS,
    budget_requirement,
    checkpoint_bytes,
    currency_requirement,
    format_requirement,
    host_requirements,
    length_requirement,
    memory_requirement,
    placement_requirement,
    schedule_requirement,
    software_checks,
)
from vramtui.shortlist_types import (  # noqa: F401  (re-exported)
    EXCLUDED,
    FIT,
    STATUS_LABELS,
    STATUS_ORDER,
    VERIFY,
    Candidate,
    PlacementHint,
    Preference,
    Requirement,
    Shortlist,
    is_illustrative,
)


@dataclass(frozen=True)
class _Context:
    """What every offer's classification shares: the model, the campaign and the scope."""

    arch: object
    days: float
    today: datetime.date
    currency: str | None
    scope: str


def classify_offer(spec, est: Estimate, offer: Offer, gpu: Gpu, cost, context) -> Candidate:
    """Every requirement of one offer against `spec` and its estimate `est`."""
    mem, usable, peak = memory_requirement(est, spec, offer, gpu, context.scope)
    reqs = [
        mem,
        length_requirement(spec, context.arch),
        format_requirement(spec, gpu),
        placement_requirement(spec, offer),
    ]
    reqs += host_requirements(spec, est, context.arch, offer)
    software, prefs = software_checks(spec, offer, gpu)
    for extra in (
        budget_requirement(spec, cost, offer),
        schedule_requirement(spec, offer, context.days, context.today),
        software,
        currency_requirement(cost, context.currency, offer),
    ):
        if extra is not None:
            reqs.append(extra)
    status = max((r.status for r in reqs), key=STATUS_ORDER.__getitem__)
    idle = max(0, offer.gpu_count - spec.placement.gpus)
    return Candidate(
        offer, gpu, status, tuple(reqs), prefs, cost, usable, peak, usable - peak, idle_gpus=idle
    )


def shortlist(
    spec,
    est: Estimate,
    catalog: Catalog,
    arch=None,
    days: float | None = None,
    today: datetime.date | None = None,
    checkpoint=None,
    price_max_age_days: float | None = None,
    placement_hints: bool = True,
) -> Shortlist:
    """Classify every offer of `catalog` against `spec` (with its estimate `est`; `checkpoint`
    is the local model directory's CheckpointInfo the estimate used, for the placement hints).
    Prices seen more than `price_max_age_days` before `today` (default: the catalogue's
    setting, else 30) are flagged "price to re-check" (vramtui.price_age). `placement_hints`
    False skips the hints (each costs estimates under other placements; they never change a
    candidate's status), for callers that read only the statuses and capacities."""
    today = today or datetime.date.today()
    from vramtui.price_age import with_price_age

    max_age = _price_max_age(price_max_age_days, catalog)
    if days is not None:
        days_source = "--days"
    elif spec.campaign.days is not None:
        days, days_source = spec.campaign.days, "campaign.days in the spec"
    else:
        days, days_source = 1.0, "no campaign length given: priced for 1 day"
    if not 0 < days <= MAX_DAYS:  # NaN fails too
        raise SpecError(
            f"the campaign length must be more than 0 and at most vramtui's limit of "
            f"{MAX_DAYS:,} days, got {days:g} ({days_source}); give a shorter campaign"
        )
    hours = max(1, math.ceil(days * 24))
    scope = (
        f"spec '{spec.name or est.model_label}': {est.model_label}, {spec.task.kind}, "
        f"{spec.weights.format}, {spec.lengths.context_tokens:,} tokens, "
        + (
            f"micro-batch {spec.batch.micro_batch}"
            if spec.is_training
            else f"concurrency {spec.batch.concurrency}"
        )
    )
    costs = {o.id: cheapest_cover(o.plans, hours) for o in catalog.offers.values()}
    currency = spec.campaign.currency or _common_currency(costs.values())
    context = _Context(arch, days, today, currency, scope)
    candidates = [
        classify_offer(spec, est, offer, catalog.gpu_for(offer), costs[offer.id], context)
        for offer in catalog.offers.values()
    ]
    if placement_hints:
        from vramtui.placement_hint import with_placement_hints

        candidates = with_placement_hints(candidates, spec, est, context, checkpoint)
    candidates = [with_price_age(c, today, max_age) for c in candidates]
    ranked = sorted(
        (c for c in candidates if c.status == FIT),
        key=lambda c: (
            c.cost.total if c.cost else math.inf,
            -c.effective_margin_bytes,
            c.lead_time_hours if c.lead_time_hours is not None else math.inf,
            -sum(1 for p in c.preferences if p.met),
            c.offer.id,
        ),
    )
    ranked = [_with_rank(c, i + 1) for i, c in enumerate(ranked)]
    rest = sorted(
        (c for c in candidates if c.status != FIT),
        key=lambda c: (
            STATUS_ORDER[c.status],
            len(c.failing) + len(c.conditions),
            c.cost.total if c.cost else math.inf,
            c.offer.id,
        ),
    )
    return Shortlist(
        tuple(ranked + rest), float(days), days_source, currency, scope, catalog.problems, max_age
    )


def _price_max_age(explicit: float | None, catalog: Catalog) -> float:
    from vramtui.price_age import DEFAULT_PRICE_MAX_AGE_DAYS

    for value in (explicit, getattr(catalog, "price_max_age_days", None)):
        if value is not None:
            return float(value)
    return float(DEFAULT_PRICE_MAX_AGE_DAYS)


def _with_rank(c: Candidate, rank: int) -> Candidate:
    return replace(c, rank=rank)


def _common_currency(costs) -> str | None:
    counts: dict[str, int] = {}
    for c in costs:
        if c is not None:
            counts[c.currency] = counts.get(c.currency, 0) + 1
    return max(sorted(counts), key=counts.get) if counts else None
