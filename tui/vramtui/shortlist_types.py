"""What a shortlist holds: the three statuses, a requirement with its evidence, a preference, a
placement hint, a candidate (one offer, classified) and the shortlist itself. The checks that
build requirements are in `shortlist_requirements`, the procedure in `shortlist`."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from vramtui.campaign_cost import Cost
from vramtui.catalog import Gpu, Offer

FIT = "fit"
VERIFY = "needs_verification"
EXCLUDED = "excluded"
STATUS_ORDER = {FIT: 0, VERIFY: 1, EXCLUDED: 2}
STATUS_LABELS = {FIT: "fit", VERIFY: "needs verification", EXCLUDED: "excluded"}

@dataclass(frozen=True)
class Requirement:
    key: str
    name: str
    status: str  # fit | needs_verification | excluded
    detail: str  # one line: what was compared (a UnitText where it holds byte figures)
    evidence: tuple[dict, ...] = ()  # {kind, claim, source, version, scope}
    condition: str = ""  # for needs_verification: exactly what to check


@dataclass(frozen=True)
class Preference:
    name: str
    met: bool | None  # None: cannot be told from the offer
    detail: str


@dataclass(frozen=True)
class PlacementHint:
    """Another placement on the same offer under which an excluded card is no longer
    excluded; shown beside the excluded entry, never ranked (the user decides)."""

    gpus: int
    tensor_parallel: int
    pipeline_parallel: int
    status: str  # fit | needs_verification under that placement
    usable_bytes: int
    peak_gpu_bytes: int
    text: str  # one line: "fits with tensor_parallel=1 on 1 GPU: ..."


def is_illustrative(offer: Offer) -> bool:
    """Sample offers shipped with vramtui say so in their evidence source."""
    return any("illustrative sample data" in e.source.lower() for e in offer.evidence)


@dataclass(frozen=True)
class Candidate:
    offer: Offer
    gpu: Gpu
    status: str
    requirements: tuple[Requirement, ...]
    preferences: tuple[Preference, ...]
    cost: Cost | None
    usable_bytes: int
    peak_gpu_bytes: int
    effective_margin_bytes: int
    rank: int | None = None
    idle_gpus: int = 0  # cards of the offer the spec's placement leaves idle (still paid)
    placement_hint: PlacementHint | None = None  # excluded by placement alone: what would fit
    price_seen_on: datetime.date | None = None  # when the offer's price was seen
    price_recheck: str = ""  # "price to re-check: ..." when older than the age limit or undated

    @property
    def illustrative(self) -> bool:
        """The offer is sample data shipped with vramtui, not a quote."""
        return is_illustrative(self.offer)

    @property
    def effective_margin_fraction(self) -> float:
        return self.effective_margin_bytes / self.usable_bytes if self.usable_bytes else 0.0

    @property
    def failing(self) -> list[Requirement]:
        return [r for r in self.requirements if r.status == EXCLUDED]

    @property
    def conditions(self) -> list[Requirement]:
        return [r for r in self.requirements if r.status == VERIFY]

    @property
    def lead_time_hours(self) -> float | None:
        s = self.offer.schedule
        return s.lead_time_hours if s else None


@dataclass(frozen=True)
class Shortlist:
    candidates: tuple[Candidate, ...]  # ranked fits, then needs verification, then excluded
    days: float
    days_source: str
    currency: str | None
    estimate_scope: str
    problems: tuple[str, ...] = field(default_factory=tuple)
    price_max_age_days: float = 30.0  # prices older than this are flagged "price to re-check"

    def with_status(self, status: str) -> list[Candidate]:
        return [c for c in self.candidates if c.status == status]
