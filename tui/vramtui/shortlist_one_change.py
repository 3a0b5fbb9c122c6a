"""`vramtui shortlist --allow-one-change`: the offers that fit as they are, ranked together
with the offers that fit after one single change, the change named beside each.

Only changes that keep the workload's requirements are tried (the seed: "a configuration that
handles less context ... does not automatically meet the same requirement"): the KV cache in
fp8, a smaller weight format, a smaller micro-batch with more accumulation (the same effective
batch), activation checkpointing, an 8-bit optimiser; never a shorter length or fewer
concurrent sequences. Each offer gets the first change, in the seed's order and from the least
costly, under which every one of its requirements is fit. The ranking key is the shortlist's
(total cost, then margin, then lead time), so the offers that fit as they are keep their order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vramtui.fit_changes import card_free_changes
from vramtui.ledger import estimate
from vramtui.shortlist import FIT, Candidate, shortlist
from vramtui.triage.single_change import edit_spec

# A spec with a large micro-batch has many smaller ones; the shortlist tries this many of them
# (the largest first), so that the ranking stays well under a second.
MAX_MICRO_BATCH_CHANGES = 6


@dataclass(frozen=True)
class OneChangeRow:
    rank: int
    candidate: Candidate  # classified against the spec after the change (or as it is)
    change: str | None  # None: fits as it is
    cost: str = ""  # what the change costs
    group: str = ""
    edits: dict | None = None

    @property
    def as_is(self) -> bool:
        return self.change is None


@dataclass(frozen=True)
class OneChangeRanking:
    rows: tuple[OneChangeRow, ...]
    tried: tuple[str, ...]  # the changes tried, in order


def _limited(changes):
    out, micro = [], 0
    for c in changes:
        if c[0] == "micro_batch":
            micro += 1
            if micro > MAX_MICRO_BATCH_CHANGES:
                continue
        out.append(c)
    return out


def _key(c: Candidate):
    return (
        c.cost.total if c.cost else math.inf,
        -c.effective_margin_bytes,
        c.lead_time_hours if c.lead_time_hours is not None else math.inf,
        -sum(1 for p in c.preferences if p.met),
        c.offer.id,
    )


def rank_with_one_change(
    spec, sl, catalog, arch=None, days=None, today=None, checkpoint=None
) -> OneChangeRanking:
    """`sl` (the shortlist of `spec` as it is) with the offers one change makes fit."""
    rows: list[tuple[Candidate, tuple | None]] = [(c, None) for c in sl.with_status(FIT)]
    waiting = {c.offer.id for c in sl.candidates if c.status != FIT}
    changes = _limited(card_free_changes(spec, arch))
    tried = []
    for change in changes:
        if not waiting:
            break
        _group, words, _cost, edits = change
        after = edit_spec(spec, edits)
        if after is None:
            continue
        tried.append(words)
        est_after = estimate(after, arch, checkpoint)
        changed = shortlist(
            after,
            est_after,
            catalog,
            arch=arch,
            days=days if days is not None else sl.days,
            today=today,
            checkpoint=checkpoint,
        )
        for c in changed.with_status(FIT):
            if c.offer.id in waiting:
                waiting.discard(c.offer.id)
                rows.append((c, change))
    rows.sort(key=lambda r: _key(r[0]))
    return OneChangeRanking(
        tuple(
            OneChangeRow(
                i + 1,
                c,
                ch[1] if ch else None,
                ch[2] if ch else "",
                ch[0] if ch else "",
                ch[3] if ch else None,
            )
            for i, (c, ch) in enumerate(rows)
        ),
        tuple(tried),
    )


def one_change_to_dict(ranking: OneChangeRanking) -> dict:
    return {
        "changes_tried": list(ranking.tried),
        "ranked": [
            {
                "rank": r.rank,
                "offer": r.candidate.offer.id,
                "gpu": r.candidate.gpu.id,
                "gpu_count": r.candidate.offer.gpu_count,
                "as_is": r.as_is,
                "change": r.change,
                "change_cost": r.cost,
                "change_group": r.group or None,
                "edits": r.edits,
                "total_cost": r.candidate.cost.total if r.candidate.cost else None,
                "currency": r.candidate.cost.currency if r.candidate.cost else None,
                "peak_bytes_per_gpu": r.candidate.peak_gpu_bytes,
                "usable_bytes_per_gpu": r.candidate.usable_bytes,
                "effective_margin_bytes": r.candidate.effective_margin_bytes,
                "illustrative": r.candidate.illustrative,
            }
            for r in ranking.rows
        ],
    }


def one_change_renderable(ranking: OneChangeRanking, unit: str = "gib"):
    from rich.table import Table
    from rich.text import Text

    from vramtui.render import _cost_cell, _offer_cell
    from vramtui.units import format_bytes

    t = Table(
        title="fit as it is or after ONE change (marked) — ranked by total cost, then margin, "
        "then lead time; changes keep the length, concurrency and effective batch",
        title_justify="left",
        title_style="green",
    )
    t.add_column("#", justify="right")
    t.add_column("offer", overflow="fold")
    t.add_column("total cost", justify="right", max_width=14)
    t.add_column("as is / the one change, its cost; margin", overflow="fold")
    for r in ranking.rows:
        c = r.candidate
        margin = f"margin {format_bytes(c.effective_margin_bytes, unit)}"
        if r.as_is:
            what = Text("as is", style="green")
            what.append(f"; {margin}")
        else:
            what = Text("one change: ", style="bold yellow")
            what.append(r.change)
            what.append(f"\n{r.cost}; {margin}", style="")
        t.add_row(str(r.rank), _offer_cell(c), _cost_cell(c, plans=False), what)
    if not ranking.rows:
        return Text("No offer fits as it is or after one change.", style="yellow")
    return t
