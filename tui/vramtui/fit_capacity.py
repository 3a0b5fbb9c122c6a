"""What "fits" means for `vramtui fit` and `vramtui check`: the worst stage's peak on the most
loaded GPU, plus a margin, against a capacity; and the three answers (fits, does not fit,
cannot tell) with the reason.

The capacity of a catalogue card is the shortlist's: `Gpu.usable()` (the CUDA total when
known, else the NVML total, else the nominal size), with the range its real allocatable total
lies in from `vramtui.capacity_bounds`. The answer is "cannot tell" when that range, or an
unknown ledger item, could change it; a peak over the range's upper end does not fit whatever
the unknown items hold (they only add memory).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from vramtui.capacity_bounds import usable_bounds
from vramtui.errors import SpecError, UnitsError
from vramtui.ledger.items import STAGE_LABELS
from vramtui.limits import MAX_BYTES, show_number
from vramtui.unit_text import Figure, UnitText
from vramtui.units import parse_bytes

FITS = "fits"
OVER = "does_not_fit"
CANNOT_TELL = "cannot_tell"
VERDICT_WORDS = {FITS: "fits", OVER: "does not fit", CANNOT_TELL: "cannot tell"}

# The spec's own rule for headroom.margin_fraction: 0 <= x < 0.5.
MAX_MARGIN_FRACTION = 0.5


@dataclass(frozen=True)
class Margin:
    """Memory kept free on each GPU: a share of the card (`fraction`) or a fixed `bytes`."""

    fraction: float | None = None
    bytes: int | None = None
    source: str = ""  # where it comes from: "--margin 10%", "headroom.margin_fraction"

    def margin_bytes(self, base: int) -> int:
        """The margin in bytes on a card whose total is `base`."""
        if self.bytes is not None:
            return self.bytes
        return math.ceil(base * (self.fraction or 0.0))

    def allowed(self, capacity: int, base: int | None = None) -> int:
        """What the peak may reach: `capacity` less the margin. A share is a share of `base`
        (the card's total; default `capacity`), rounded as the shortlist rounds it."""
        if self.bytes is not None:
            return capacity - self.bytes
        if base is None:
            return int(capacity * (1 - (self.fraction or 0.0)))
        return capacity - self.margin_bytes(base)

    def text(self) -> str:
        if self.bytes is not None:
            return UnitText("a margin of ", Figure(self.bytes))
        if not self.fraction:
            return "no margin"
        return (
            f"a {self.fraction:.0%} margin"
            if self.fraction * 100 == round(self.fraction * 100)
            else f"a {self.fraction:.2%} margin"
        )

    def to_dict(self) -> dict:
        return {"fraction": self.fraction, "bytes": self.bytes, "source": self.source}


_PERCENT = re.compile(r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*%\s*$")


def parse_margin(text: str, flag: str = "--margin") -> Margin:
    """ "10%" (a share of the card) or a memory quantity with its unit ("2GiB", "1500 MB")."""
    raw = str(text)
    m = _PERCENT.match(raw)
    if m:
        pct = float(m["num"])
        if not (0 <= pct < MAX_MARGIN_FRACTION * 100):  # NaN fails too
            raise SpecError(
                f"{flag} {raw.strip()} is outside vramtui's limit for a margin share "
                f"(0% <= margin < {MAX_MARGIN_FRACTION:.0%}, as headroom.margin_fraction); "
                "give e.g. 10%"
            )
        return Margin(fraction=pct / 100, source=f"{flag} {raw.strip()}")
    try:
        n = parse_bytes(raw)
    except UnitsError as exc:
        raise SpecError(
            f"{flag} {raw.strip()!r} is neither a share nor a memory quantity ({exc}); give "
            "e.g. 10% or 2GiB"
        ) from None
    if not re.search(r"[A-Za-z]", raw):
        raise SpecError(
            f"{flag} {raw.strip()} has no unit; give a share (10%) or a quantity with its unit "
            "(2GiB, 1500MB)"
        )
    if n > MAX_BYTES:
        raise SpecError(
            f"{flag} {raw.strip()} = {show_number(n)} B is above vramtui's limit of "
            f"{MAX_BYTES:,} B (1 EiB); give a smaller margin"
        )
    return Margin(bytes=n, source=f"{flag} {raw.strip()}")


def spec_margin(spec) -> Margin:
    return Margin(
        fraction=spec.headroom.margin_fraction, source="the spec's headroom.margin_fraction"
    )


@dataclass(frozen=True)
class Capacity:
    """What one GPU can give the job, with the range it may really be in.

    `bytes`: the figure compared against; `low`/`high`: where the real figure lies (equal when
    exact; None when no bound can be defended, e.g. a nominal size alone); `base`: the total a
    margin share is taken of (None: `bytes` itself, as the shortlist does)."""

    bytes: int
    label: str  # one line: "RTX 4090: CUDA total 23.53 GiB (source ...)"
    low: int | None = None
    high: int | None = None
    basis: str = ""  # why the range is what it is
    base: int | None = None
    gpu: object = None  # the catalogue Gpu, when the capacity is a catalogue card's
    source: str = ""  # where the figure comes from

    @property
    def exact(self) -> bool:
        return self.low is not None and self.low == self.high == self.bytes

    def allowed(self, margin: Margin, at: int | None = None) -> int:
        return margin.allowed(self.bytes if at is None else at, self.base)

    def to_dict(self) -> dict:
        return {
            "bytes": self.bytes,
            "low_bytes": self.low,
            "high_bytes": self.high,
            "basis": self.basis,
            "label": str(self.label),
            "source": self.source,
            "gpu": getattr(self.gpu, "id", None),
        }


def card_capacity(gpu) -> Capacity:
    """A catalogue card's capacity as the shortlist judges it."""
    fig = gpu.usable()
    bounds = usable_bounds(gpu)
    what = fig.quantity.replace("_", " ")
    verified = "verified" if fig.verified else "unverified"
    label = UnitText(f"{gpu.name}: {what} ", Figure(fig.bytes), f" ({verified})")
    source = fig.source or "no source given"
    if bounds is None:
        return Capacity(
            fig.bytes,
            label,
            basis=f"only the nominal size of the {gpu.name} is catalogued",
            gpu=gpu,
            source=source,
        )
    return Capacity(fig.bytes, label, bounds.low, bounds.high, bounds.basis, gpu=gpu, source=source)


@dataclass(frozen=True)
class Verdict:
    status: str  # fits | does_not_fit | cannot_tell
    peak_bytes: int
    stage: str
    allowed_bytes: int  # the capacity less the margin, at the compared figure
    reason: str  # one line (a UnitText)

    @property
    def room_bytes(self) -> int:
        return self.allowed_bytes - self.peak_bytes


def judge(peak: int, stage: str, capacity: Capacity, margin: Margin, unknown=()) -> Verdict:
    """Fits, does not fit or cannot tell, for a peak at `stage` with `unknown` ledger items."""
    allowed = capacity.allowed(margin)
    words = UnitText(
        Figure(peak),
        f" at {STAGE_LABELS.get(stage, stage)} + {margin.text()} vs ",
        capacity.label,
    )
    unknown_names = ", ".join(getattr(i, "name", str(i)) for i in unknown)
    if capacity.low is None:
        if peak > allowed:
            return Verdict(OVER, peak, stage, allowed, UnitText("over: ", words))
        return Verdict(
            CANNOT_TELL,
            peak,
            stage,
            allowed,
            UnitText(
                "fits the figure but ",
                capacity.basis,
                ": read torch.cuda.mem_get_info() on the node: ",
                words,
            ),
        )
    if peak > capacity.allowed(margin, capacity.high):
        over = UnitText(" by ", Figure(peak - allowed)) if peak > allowed else ""
        return Verdict(OVER, peak, stage, allowed, UnitText("over", over, ": ", words))
    if peak > capacity.allowed(margin, capacity.low):
        return Verdict(
            CANNOT_TELL,
            peak,
            stage,
            allowed,
            UnitText(
                "the answer changes between ",
                Figure(capacity.low),
                " and ",
                Figure(capacity.high),
                f" ({capacity.basis}): confirm the total on the node: ",
                words,
            ),
        )
    if unknown_names:
        return Verdict(
            CANNOT_TELL,
            peak,
            stage,
            allowed,
            UnitText(
                f"the known items fit but unknown items could change it ({unknown_names}): "
                "measure them: ",
                words,
            ),
        )
    return Verdict(
        FITS,
        peak,
        stage,
        allowed,
        UnitText(Figure(allowed - peak), " to spare: ", words),
    )


def estimate_verdict(est, capacity: Capacity, margin: Margin) -> Verdict:
    return judge(est.peak_bytes, est.peak_stage, capacity, margin, est.unknown_items)
