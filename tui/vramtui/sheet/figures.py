"""Figures for the sheet: bytes in words, and per-GPU questions put to an estimate.

Every memory figure on the sheet is per GPU (the most loaded one) unless it says otherwise, in
GiB, with its exact bytes where it is a headline figure. The what-if re-estimates leave the
spec's measurements out, so that they compare like with like.
"""

from __future__ import annotations

from dataclasses import replace

from vramtui.ledger.items import STAGE_LABELS, Estimate
from vramtui.units import format_bytes, format_bytes_readable


def exact(n_bytes: int) -> str:
    """ "13.04 GiB (14,000,000,000 B)"."""
    return f"{format_bytes(n_bytes, 'gib')} ({format_bytes(n_bytes, 'bytes')})"


def gib(n_bytes: int) -> str:
    """GiB, or MiB under 0.1 GiB: "0.50 GiB", "11.74 MiB", "0 B"."""
    return format_bytes_readable(n_bytes, "gib")


def signed(n_bytes: int) -> str:
    """ "+2.00 GiB", "-7.81 GiB"."""
    return ("+" if n_bytes >= 0 else "-") + gib(abs(n_bytes))


def stages_text(stages, all_stages) -> str:
    """ "all", "all but load", or the stages named in order."""
    stages, all_stages = tuple(stages), tuple(all_stages)
    if stages == all_stages:
        return "all"
    missing = [s for s in all_stages if s not in stages]
    if len(missing) <= 2 and len(stages) > len(missing) + 1:
        return "all but " + ", ".join(STAGE_LABELS[s] for s in missing)
    return ", ".join(STAGE_LABELS[s] for s in stages)


def item_gpu_max(item, est: Estimate) -> int:
    """An item's largest share on any one GPU, over its stages."""
    return max((max(item.rank_bytes_at(s, est.layout)) for s in item.stages), default=0)


def category_at(est: Estimate, stage: str, categories: tuple[str, ...]) -> int:
    """Known bytes of `categories` live at `stage`, on the GPU most loaded at that stage."""
    totals = est.stage_rank_bytes(stage)
    p = totals.index(max(totals))
    return sum(
        i.rank_bytes_at(stage, est.layout)[p]
        for i in est.known_items
        if i.category in categories and stage in i.stages
    )


def re_estimate(spec, arch, checkpoint) -> Estimate:
    """The ledger for `spec` without its measurements: what-if figures compare like with like."""
    from vramtui.ledger import estimate

    return estimate(replace(spec, measured=()), arch, checkpoint)
