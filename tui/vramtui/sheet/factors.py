"""What would invalidate the sheet's conclusion, computed from the spec and a few re-estimates.

Each factor is one line with its key number (a longer window, more sequences, another
evaluation, another weight or KV format, another engine, unpinned or unmeasured evidence,
assumptions, prices) and names the spec field(s) it depends on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramtui.ledger.items import ESTIMATED, STAGE_LABELS, Estimate
from vramtui.sheet.blocks import Cell, Code, Inline, Strong
from vramtui.sheet.describe import batch_text, context_tokens, when_text
from vramtui.sheet.figures import category_at, gib, item_gpu_max, re_estimate, signed

WINDOW_STEP_TOKENS = 1024  # "a longer window": the growth per this many more tokens per sequence
# Ledger items whose figure is a stated assumption, and the spec field that replaces it.
ASSUMPTION_FIELDS = {"overhead.cuda_context": "headroom.cuda_context_bytes"}
SHOW_PENDING = 2  # unconfirmed triage changes named before a count


@dataclass(frozen=True)
class Factor:
    """Something that would invalidate the conclusion, and the spec field(s) it depends on."""

    title: str
    detail: str
    fields: tuple[str, ...]


def factor_cell(f: Factor) -> Cell:
    """ "**Title** (`field`, `field`): detail"."""
    fields: list[Inline] = []
    for i, name in enumerate(f.fields):
        fields += [", " if i else "", Code(name)]
    return (Strong(f.title), " (", *fields, "): ", f.detail)


def top_fit(sl):
    """The top-ranked fit candidate of a Shortlist, or None."""
    if sl is None:
        return None
    from vramtui.shortlist import FIT as SL_FIT

    fits = sl.with_status(SL_FIT)
    return fits[0] if fits else None


def _room_bytes(spec, est: Estimate, top) -> int | None:
    """Bytes left per GPU on the top-ranked offer under the spec's margin."""
    if top is None:
        return None
    return int(top.usable_bytes * (1 - spec.headroom.margin_fraction)) - est.peak_bytes


def _growth_text(growth: int, room: int | None, top, step: int, unit: str) -> str:
    if growth <= 0:
        return "does not raise the estimated peak"
    text = f"adds {gib(growth)} per GPU"
    if room is not None and top is not None:
        if room <= 0:
            text += f"; #1 ({top.offer.title}) has no room left under its margin"
        else:
            more = int(room / growth * step)
            if unit.startswith("tokens"):
                more = more // 100 * 100
            text += f"; #1 ({top.offer.title}) has {gib(room)} left: about {more:,} more {unit}"
    return text


def invalidating_factors(
    spec, arch, est: Estimate, shortlist, comparisons, checkpoint=None
) -> tuple[Factor, ...]:
    """What would make the sheet's conclusion wrong, computed from the spec and re-estimates."""
    manual = spec.headroom.mode == "manual"
    itemised = not manual and arch is not None
    top = top_fit(shortlist)
    room = _room_bytes(spec, est, top)
    base = re_estimate(spec, arch, checkpoint) if itemised else None
    out: list[Factor] = []
    out += _window_factors(spec, arch, base, room, top, checkpoint, manual)
    out += _format_factors(spec, arch, est, base, checkpoint)
    out += _evidence_factors(spec, est, comparisons, top)
    out += _assumption_factors(spec, est, top)
    return tuple(out)


def _window_factors(spec, arch, base, room, top, checkpoint, manual) -> list[Factor]:
    step = WINDOW_STEP_TOKENS
    lg, b = spec.lengths, spec.batch
    ctx = context_tokens(spec)
    if spec.is_training:
        length_fields: tuple[str, ...] = ("lengths.seq_len",)
        batch_field, batch_unit = "batch.micro_batch", "sequences per micro-batch"
    else:
        length_fields = ("lengths.prompt_tokens", "lengths.generated_tokens")
        batch_field, batch_unit = "batch.concurrency", "concurrent sequences"
    if manual:
        reserve = gib(round(spec.headroom.reserve_gib * 2**30))
        what = "activations" if spec.is_training else "KV cache and activations"
        return [
            Factor(
                "A longer window",
                f"the manual {reserve} reserve is assumed to hold the {what} at {ctx:,} tokens "
                "per sequence; longer is not itemised (headroom.mode = 'itemised' would be)",
                length_fields + ("headroom.mode",),
            ),
            Factor(
                "More sequences at once",
                f"{batch_text(spec)}: the reserve does not grow with the batch, so more is "
                "unchecked",
                (batch_field, "headroom.mode"),
            ),
        ]
    if arch is None:
        return [
            Factor(
                "A longer window or batch",
                "a bare parameter count has no layers: what grows with length and batch is "
                "unknown; give model.id or model.path to itemise it",
                length_fields + (batch_field, "model.id"),
            )
        ]
    if spec.is_training:
        longer = replace(spec, lengths=replace(lg, seq_len=lg.seq_len + step))
    else:
        longer = replace(spec, lengths=replace(lg, prompt_tokens=lg.prompt_tokens + step))
    est_longer = re_estimate(longer, arch, checkpoint)
    growth = est_longer.peak_bytes - base.peak_bytes
    if spec.is_training:
        what = f"activations, checkpointing {spec.training.grad_checkpointing}"
    else:
        kv = category_at(est_longer, "decode", ("kv_cache",)) - category_at(
            base, "decode", ("kv_cache",)
        )
        what = f"{gib(kv)} of it KV cache"
    detail = (
        f"{ctx:,} tokens per sequence now; each extra {step:,} tokens per sequence ({what}) "
        + _growth_text(growth, room, top, step, "tokens")
        + f"; the model allows {arch.max_position_embeddings:,}"
    )
    out = [Factor("A longer window", detail, length_fields)]
    if spec.is_training:
        bigger = replace(spec, batch=replace(b, micro_batch=b.micro_batch + 1))
        now = f"micro-batch {b.micro_batch} now"
    else:
        bigger = replace(spec, batch=replace(b, concurrency=b.concurrency + 1))
        now = f"{b.concurrency} concurrent now"
    growth = re_estimate(bigger, arch, checkpoint).peak_bytes - base.peak_bytes
    out.append(
        Factor(
            "More sequences at once",
            f"{now}; one more sequence " + _growth_text(growth, room, top, 1, batch_unit),
            (batch_field,),
        )
    )
    return out


def _format_factors(spec, arch, est, base, checkpoint) -> list[Factor]:
    out = []
    if spec.quality:
        n = len(spec.quality)
        out.append(
            Factor(
                "Another evaluation",
                f"holds only for the {n} quality criteri{'on' if n == 1 else 'a'} stated; "
                "memory says nothing about quality",
                ("quality",),
            )
        )
    else:
        out.append(
            Factor(
                "Another evaluation",
                "no quality criterion is stated, so no change of format, length or engine can "
                "be shown to keep the output acceptable",
                ("quality",),
            )
        )
    weights = category_at(est, est.peak_stage, ("weights", "quant_metadata"))
    share = weights / est.peak_bytes if est.peak_bytes else 0
    out.append(
        Factor(
            "Another weight format",
            f"the {spec.weights.format} weights are {gib(weights)} of the "
            f"{gib(est.peak_bytes)} peak ({share:.0%}); another format changes that and the output",
            ("weights.format",),
        )
    )
    if base is None:
        return out
    r = spec.runtime
    if not spec.is_training:
        kv = category_at(base, "decode", ("kv_cache",))
        other = "fp8" if r.kv_cache_dtype != "fp8" else "bf16"
        alt = re_estimate(replace(spec, runtime=replace(r, kv_cache_dtype=other)), arch, checkpoint)
        out.append(
            Factor(
                "Another KV cache format",
                f"the {r.kv_cache_dtype} KV cache is {gib(kv)} at the end of decode; {other} "
                f"would change the peak by {signed(alt.peak_bytes - base.peak_bytes)} and needs "
                "its own quality check",
                ("runtime.kv_cache_dtype",),
            )
        )
    acts = category_at(base, base.peak_stage, ("activations", "logits"))
    engine = (r.engine or "").lower()
    detail = (
        f"{r.engine or 'engine not stated'}, {r.attention} attention: activations and logits "
        f"{gib(acts)} at {STAGE_LABELS[base.peak_stage]}"
    )
    if engine == "vllm":
        detail += (
            "; vLLM pre-allocates its KV pool (gpu_memory_utilization): its use is the pool, "
            "not this need"
        )
    elif r.attention != "eager":
        alt = re_estimate(replace(spec, runtime=replace(r, attention="eager")), arch, checkpoint)
        change = alt.peak_bytes - base.peak_bytes
        if change:
            detail += f"; eager attention: {signed(change)}"
        else:
            detail += "; eager attention would not change the peak"
    out.append(
        Factor(
            "Another engine or attention kernel", detail, ("runtime.engine", "runtime.attention")
        )
    )
    return out


def _evidence_factors(spec, est, comparisons, top) -> list[Factor]:
    out = []
    m = spec.model
    if m.id is not None and not m.revision:
        out.append(
            Factor(
                "An unpinned revision",
                "a new upload can change the config and the estimate; pin a commit",
                ("model.revision",),
            )
        )
    if not comparisons:
        out.append(
            Factor(
                "Nothing measured yet",
                "every figure is a calculation until the staged plan runs on the rented card",
                ("[[measured]]",),
            )
        )
    else:
        versions: dict[str, set[str]] = {}
        for ms in spec.measured:
            for name, value in ms.versions:
                versions.setdefault(name, set()).add(value)
        stated = ", ".join(f"{n} {'/'.join(sorted(v))}" for n, v in sorted(versions.items()))
        detail = (
            f"measured with {stated}" if stated else "the measurements record no versions"
        ) + "; others can allocate differently"
        sw = top.offer.software if top is not None else None
        if sw is not None and (sw.driver or sw.cuda):
            offered = ", ".join(
                f"{n} {v}" for n, v in (("driver", sw.driver), ("CUDA", sw.cuda)) if v
            )
            detail += f"; #1 offers {offered}"
        out.append(
            Factor(
                "Other software versions", detail, ("[[measured]] versions", "campaign.software")
            )
        )
        devices = sorted({ms.device for ms in spec.measured if ms.device})
        if top is not None:
            names = {top.gpu.name.lower(), *(n.lower() for n in top.gpu.nvml_names)}
            if not any(d.lower() in names for d in devices):
                out.append(
                    Factor(
                        "A different GPU than measured",
                        f"measured on {', '.join(devices) or 'an unrecorded device'}; #1 runs "
                        f"{top.gpu.name}: re-measure on it",
                        ("[[measured]] device",),
                    )
                )
        short = [c for c in comparisons if not c.coverage.validates]
        if short:
            out.append(
                Factor(
                    "Measurements that do not validate the workload",
                    f"{len(short)} of {len(comparisons)} figures, flagged above (e.g. "
                    f"{short[0].label}), were read below the required batch or length",
                    ("[[measured]] dims",),
                )
            )
    if est.unknown_items:
        names = ", ".join(i.name for i in est.unknown_items)
        out.append(
            Factor(
                "Unknown items",
                f"{names}: in no total, so the peak can only be higher",
                ("[[measured]] item",),
            )
        )
    return out


def _assumption_factors(spec, est, top) -> list[Factor]:
    out = []
    if spec.headroom.mode == "manual":
        h = spec.headroom
        out.append(
            Factor(
                "A manual reserve",
                f"{gib(round(h.reserve_gib * 2**30))} stands in for the KV cache, activations "
                "and overheads: an assumption, not a measured value",
                ("headroom.mode", "headroom.reserve_gib"),
            )
        )
    assumed = [
        i
        for i in est.items
        if i.status == ESTIMATED
        and i.basis.startswith(("assumption", "heuristic"))
        and i.category != "reserve"
    ]
    if assumed:
        fields = tuple(
            dict.fromkeys(ASSUMPTION_FIELDS.get(i.key, "[[measured]] item") for i in assumed)
        )
        out.append(
            Factor(
                "Assumed overheads",
                "; ".join(f"{i.name} {gib(item_gpu_max(i, est))}" for i in assumed)
                + ": assumptions; measure them",
                fields,
            )
        )
    for note in est.notes:
        if "separate memories" in note:
            out.append(Factor("Cards that do not share memory", note, ("placement",)))
    if spec.headroom.mode == "itemised" and not spec.headroom.margin_fraction:
        out.append(
            Factor(
                "No safety margin",
                "fit = below the card's whole usable memory; what the ledger misses overflows",
                ("headroom.margin_fraction",),
            )
        )
    pending = [(i, a) for i, a in enumerate(spec.triage) if a.outcome == "pending"]
    if pending:
        shown = pending[-SHOW_PENDING:]
        detail = "; ".join(f"{a.change} ({when_text(a.time)})" for _, a in shown) + " not run yet"
        if len(pending) > len(shown):
            detail += f"; {len(pending) - len(shown)} earlier pending"
        title = "An unconfirmed triage change" + ("s" if len(pending) > 1 else "")
        out.append(Factor(title, detail, tuple(f"triage[{i}].outcome" for i, _ in shown)))
    if top is not None:
        dates = sorted({e.date.isoformat() for e in top.offer.evidence if e.date})
        when = f"as documented on {', '.join(dates)}" if dates else "with no documented date"
        out.append(
            Factor(
                "A new price list or stock",
                f"offers {when}; prices, stock and lead times change",
                ("campaign.days", "campaign.start_by"),
            )
        )
    return out
