"""Is a manual reserve big enough? The itemised ledger of the same spec answers.

A manual reserve stands for everything but the weights (KV cache, activations, gradients,
optimiser states, overheads). When the itemised ledger lists more than the reserve besides the
weights, at any stage, the manual figure understates the need: say so first, not at the foot
of the ledger. Unknown items of the itemised ledger are not counted (the flag is a floor).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramtui.units import format_bytes

WEIGHT_CATEGORIES = ("weights", "quant_metadata")


@dataclass(frozen=True)
class ReserveShortfall:
    reserve_bytes: int
    besides_weights_bytes: int  # the itemised ledger's worst stage less the weights, one GPU
    stage: str
    itemised_peak_bytes: int
    unknown_items: int

    def line(self, unit: str = "gib") -> str:
        unknown = (
            f"; {self.unknown_items} unknown item(s) not counted" if self.unknown_items else ""
        )
        return (
            f"the manual reserve ({format_bytes(self.reserve_bytes, unit)}) is smaller than "
            f"what the itemised ledger lists besides the weights: "
            f"{format_bytes(self.besides_weights_bytes, unit)} at {self.stage} (itemised peak "
            f"{format_bytes(self.itemised_peak_bytes, unit)}{unknown}): set headroom.mode to "
            "itemised"
        )


def manual_reserve_shortfall(spec, arch=None, checkpoint=None) -> ReserveShortfall | None:
    """None when the headroom is itemised, or the reserve covers the itemised non-weight items."""
    from vramtui.ledger import estimate

    h = spec.headroom
    if h.mode != "manual" or h.reserve_gib is None:
        return None
    itemised_spec = replace(
        spec, headroom=replace(h, mode="itemised", reserve_gib=None, reason=None)
    )
    est = estimate(itemised_spec, arch, checkpoint)
    reserve = round(h.reserve_gib * 2**30)
    worst = None
    for stage, peak in est.stage_peak_bytes.items():
        weights = sum(
            max(i.rank_bytes_at(stage, est.layout))
            for i in est.known_items
            if i.category in WEIGHT_CATEGORIES and stage in i.stages
        )
        besides = peak - weights
        if worst is None or besides > worst[1]:
            worst = (stage, besides)
    if worst is None or worst[1] <= reserve:
        return None
    return ReserveShortfall(
        reserve_bytes=reserve,
        besides_weights_bytes=worst[1],
        stage=worst[0],
        itemised_peak_bytes=est.peak_bytes,
        unknown_items=len(est.unknown_items),
    )


__all__ = ["ReserveShortfall", "manual_reserve_shortfall"]
