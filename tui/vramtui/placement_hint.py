"""The placement hint: a card excluded only by the spec's placement (too few cards for it, or
a placement that leaves the memory of the offer's other cards unused) is classified again
under the other placements its offer allows, and the best one that is no longer excluded is
shown beside the excluded entry. It is never ranked among the fit candidates: the spec says
how the model is placed, and changing that is the user's decision.
"""

from __future__ import annotations

from dataclasses import replace

from vramtui.errors import VramtuiError
from vramtui.shortlist import EXCLUDED, FIT, Candidate, PlacementHint, classify_offer
from vramtui.unit_text import Figure, UnitText

# Requirements that a different placement can change; a candidate failing anything else
# (format, length, disk, budget, schedule, software) gets no hint.
PLACEMENT_BOUND = frozenset({"placement", "memory"})

# Placements tried on at most this many cards of one offer (bounds the work of a catalogue
# with very large offers; a node rarely holds more than 8 or 16).
MAX_HINT_GPUS = 16


def with_placement_hints(candidates, spec, est, context, checkpoint=None) -> list[Candidate]:
    """`candidates` with a PlacementHint on each one excluded by placement alone that some
    other placement on the same offer would make fit (or at least not excluded)."""
    estimates: dict[tuple[int, int, int], tuple | None] = {}
    out = []
    for c in candidates:
        hint = None
        if c.status == EXCLUDED and {r.key for r in c.failing} <= PLACEMENT_BOUND:
            hint = _best_hint(c, spec, est, context, checkpoint, estimates)
        out.append(replace(c, placement_hint=hint) if hint else c)
    return out


def _placements(spec, gpu_count: int):
    """(gpus, tensor_parallel, pipeline_parallel) on the offer's cards, other than the spec's
    own, best first: all the cards (none idle but paid), the spec's count, or one card; tensor
    parallel none, the spec's degree, or across all the cards used; pipeline none or the
    spec's. A short list on purpose: every placement costs an estimate."""
    p = spec.placement
    own = (p.gpus, p.tensor_parallel, p.pipeline_parallel)
    counts = {min(gpu_count, MAX_HINT_GPUS), 1}
    if p.gpus <= min(gpu_count, MAX_HINT_GPUS):
        counts.add(p.gpus)
    found = set()
    for g in counts:
        for tp in {1, p.tensor_parallel, g}:
            for pp in {1, p.pipeline_parallel}:
                if tp * pp <= g and g % (tp * pp) == 0 and (g, tp, pp) != own:
                    found.add((g, tp, pp))
    # Fewest cards idle first, then the least parallelism (least communication).
    return sorted(found, key=lambda k: (-k[0], k[1] * k[2], k[1]))


def _estimate_for(key, spec, context, checkpoint, estimates):
    """The spec with placement `key`, validated as a saved file would be, and its estimate;
    None when that placement is not valid for the spec or the model (e.g. a TP degree that
    does not divide the attention or key/value heads)."""
    if key in estimates:
        return estimates[key]
    from vramtui.ledger import estimate
    from vramtui.spec import validate_against_architecture, validate_spec

    g, tp, pp = key
    try:
        alt = validate_spec(
            replace(
                spec,
                placement=replace(spec.placement, gpus=g, tensor_parallel=tp, pipeline_parallel=pp),
            )
        )
        if context.arch is not None:
            validate_against_architecture(alt, context.arch)
        result = (alt, estimate(alt, context.arch, checkpoint))
    except VramtuiError:
        result = None
    estimates[key] = result
    return result


def _best_hint(c: Candidate, spec, est, context, checkpoint, estimates) -> PlacementHint | None:
    """The first placement (in _placements' order) that makes the card fit, else the first
    that leaves it needing verification, else None."""
    best = None
    for key in _placements(spec, c.offer.gpu_count):
        found = _estimate_for(key, spec, context, checkpoint, estimates)
        if found is None:
            continue
        alt_spec, alt_est = found
        alt = classify_offer(alt_spec, alt_est, c.offer, c.gpu, c.cost, context)
        if alt.status == EXCLUDED or (best is not None and alt.status != FIT):
            continue
        best = (key, alt)
        if alt.status == FIT:
            break
    if best is None:
        return None
    (g, tp, pp), alt = best
    return PlacementHint(
        g, tp, pp, alt.status, alt.usable_bytes, alt.peak_gpu_bytes, _hint_text(c, g, tp, pp, alt)
    )


def _hint_text(c: Candidate, g: int, tp: int, pp: int, alt: Candidate) -> str:
    verb = "fits" if alt.status == FIT else "not excluded (needs verification)"
    how = f"tensor_parallel={tp}" + (f", pipeline_parallel={pp}" if pp > 1 else "")
    cards = f"{g} GPU" + ("s" if g > 1 else "")
    text = UnitText(
        f"{verb} with {how} on {cards} of {c.gpu.nominal.as_written}: peak ",
        Figure(alt.peak_gpu_bytes),
        " of ",
        Figure(alt.usable_bytes),
        " usable",
    )
    text += f"; {c.cost.short()}" if c.cost else "; no price"
    if c.offer.gpu_count > g:
        text += f"; {c.offer.gpu_count - g} card(s) idle but paid"
    if alt.status != FIT:
        text += "; to check: " + UnitText("; ").join(r.condition for r in alt.conditions)
    return text
