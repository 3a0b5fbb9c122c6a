"""The sizing sheet as plain data: `build_sheet` and the sections that are not a module's own.

The seed: "Record the initial hypothesis, the item table, the procedure and the raw
measurements; separate estimates, measured counters and business decisions ... A good sizing
result fits on one sheet." `build_sheet` gathers that from a spec, its architecture, its
estimate and (optionally) its shortlist; the renderers only lay it out, so the Markdown and the
HTML always say the same thing. The modules beside this one:

- `blocks`: the document (inline parts, blocks, sections, header, sheet);
- `figures`: bytes in words, per-GPU questions put to an estimate;
- `describe`: the spec's fields in words;
- `memory`: "Memory per GPU" (stages, the itemised ledger, bounds);
- `measured`: measured beside estimated, the staged plan, the measurement conditions;
- `decision`: the shortlist decision and its evidence;
- `factors`: what would invalidate the conclusion.

Here: the header, the summary, the workload and the triage log.
"""

from __future__ import annotations

import datetime

from vramtui import __version__
from vramtui.ledger.items import ESTIMATED, STAGE_LABELS, Estimate
from vramtui.measure.plan import FAILED, PASSED
from vramtui.sheet.blocks import (
    EXCLUDED,
    FIT,
    INVALID,
    UNITS_NOTE,
    VALID,
    VERIFY,
    WARN,
    WORST,
    Block,
    Bullets,
    Cell,
    Cite,
    Code,
    Facts,
    Header,
    Inline,
    Mark,
    Para,
    Section,
    Sheet,
    Strong,
    Table,
)
from vramtui.sheet.decision import DECISION_NOTE, decision_section, shortlist_line
from vramtui.sheet.describe import (
    batch_text,
    campaign_text,
    headroom_cell,
    lengths_text,
    placement_text,
    quality_cell,
    task_text,
    training_text,
    weights_text,
    when_text,
)
from vramtui.sheet.factors import Factor, factor_cell, invalidating_factors
from vramtui.sheet.figures import exact, gib
from vramtui.sheet.measured import conditions_section, measured_section
from vramtui.sheet.memory import memory_section

__all__ = [
    "DECISION_NOTE",
    "EXCLUDED",
    "FIT",
    "INVALID",
    "SHOW_TRIAGE",
    "UNITS_NOTE",
    "VALID",
    "VERIFY",
    "WARN",
    "WORST",
    "Block",
    "Bullets",
    "Cell",
    "Cite",
    "Code",
    "Factor",
    "Facts",
    "Header",
    "Inline",
    "Mark",
    "Para",
    "Section",
    "Sheet",
    "Strong",
    "Table",
    "build_sheet",
    "exact",
    "gib",
    "invalidating_factors",
]

SHOW_TRIAGE = 5  # the most recent triage attempts shown; the count of the others is stated


def build_sheet(
    spec,
    arch,
    est: Estimate,
    shortlist=None,
    *,
    generated: datetime.date | None = None,
    spec_source: str = "",
    checkpoint=None,
) -> Sheet:
    """The sheet for `spec` (with its Architecture `arch` or None, its estimate `est` and
    optionally its Shortlist). `spec_source` is the spec's file name as shown in the header;
    `checkpoint` (a local model's CheckpointInfo) keeps the what-if re-estimates exact."""
    from vramtui.measure.compare import compare
    from vramtui.measure.plan import staged_plan

    comparisons = compare(spec, est)
    factors = invalidating_factors(spec, arch, est, shortlist, comparisons, checkpoint)
    header = Header(
        spec_name=spec.name or est.model_label,
        description=spec.description,
        generated=generated or datetime.date.today(),
        version=__version__,
        spec_file=spec_source,
    )
    sections = (
        _workload(spec, arch, est),
        memory_section(est, comparisons),
        measured_section(comparisons, staged_plan(spec)),
        conditions_section(spec),
        decision_section(shortlist),
        _triage(spec),
        Section(
            "invalidation",
            "What would invalidate this conclusion",
            (Bullets(tuple(factor_cell(f) for f in factors)),),
        ),
    )
    return Sheet(
        header=header,
        summary=_summary(est, comparisons, shortlist),
        sections=sections,
        factors=factors,
        warnings=tuple(shortlist.problems) if shortlist is not None else (),
    )


def _summary(est: Estimate, comparisons, shortlist) -> tuple[Cell, ...]:
    manual = any(i.category == "reserve" for i in est.items)
    peak: tuple[Inline, ...] = (
        "Estimated peak: ",
        Strong(exact(est.peak_bytes)),
        f" per GPU at {STAGE_LABELS[est.peak_stage]} (",
        Mark(ESTIMATED, "estimated"),
        "; "
        + ("weights + the manual reserve" if manual else "known items live together")
        + (f"; {len(est.unknown_items)} unknown item(s) in no total" if est.unknown_items else "")
        + ")",
    )
    if not comparisons:
        measured: tuple[Inline, ...] = ("Measured: ", Mark(WARN, "no measurement yet"))
    else:
        ok = sum(1 for c in comparisons if c.coverage.validates)
        measured = (
            f"Measured: {len(comparisons)} figure(s), ",
            Mark(VALID if ok == len(comparisons) else INVALID, f"{ok} validate"),
            " the required workload",
        )
    items: list[Cell] = [peak, measured]
    if shortlist is not None:
        items.append(shortlist_line(shortlist))
    return tuple(items)


def _model_cell(spec, arch, est: Estimate) -> Cell:
    m = spec.model
    if m.id is not None:
        model = m.id
    elif m.path is not None:
        model = f"local directory {m.path}"
    else:
        model = "a bare parameter count (no architecture)"
    parts: list[Inline] = [model]
    if m.source_kind != "params":
        parts += [", "]
        parts += [f"revision {m.revision}" if m.revision else Mark(WARN, "revision not pinned")]
    if est.param_count:
        shape = ""
        if arch is not None:
            shape = f" ({arch.model_type}, {arch.num_layers} layers"
            if arch.num_experts:
                shape += f", {arch.num_experts} experts, {arch.num_experts_per_tok} active"
            shape += ")"
        parts.append(f"; {est.param_count:,} parameters{shape}")
    return tuple(parts)


def _workload(spec, arch, est: Estimate) -> Section:
    r = spec.runtime
    precision = weights_text(spec.weights)
    if not spec.is_training:
        block = r.kv_block_tokens
        precision += f"; KV cache {r.kv_cache_dtype}, " + (
            f"paged blocks of {block} tokens" if block else "contiguous"
        )
    rows: list[tuple[str, Cell]] = [
        ("Model", _model_cell(spec, arch, est)),
        ("Task", task_text(spec)),
        ("Precision", precision),
    ]
    if spec.training is not None:
        rows.append(("Training", training_text(spec.training)))
    rows += [
        ("Runtime", f"engine {r.engine or 'not stated'}; attention {r.attention}"),
        ("Lengths", lengths_text(spec)),
        ("Micro-batch" if spec.is_training else "Concurrency", batch_text(spec)),
        ("Placement", placement_text(spec)),
        ("Headroom", headroom_cell(spec)),
    ]
    campaign = campaign_text(spec)
    if campaign:
        rows.append(("Campaign", campaign))
    rows.append(("Quality", quality_cell(spec)))
    return Section("workload", "Workload", (Facts(tuple(rows)),))


def _outcome(outcome: str) -> Mark:
    text = outcome.lower()
    if text == "fixed":
        return Mark(PASSED, outcome)
    if "out of memory" in text or "fail" in text:
        return Mark(FAILED, outcome)
    return Mark(WARN, outcome)


def _triage(spec) -> Section:
    title = "Triage log"
    if not spec.triage:
        return Section(
            "triage",
            title,
            (
                Para(
                    (
                        "No out-of-memory triage recorded (",
                        Code("vramtui triage LOG --spec SPEC.toml --apply N"),
                        " records one attempt, one variable at a time).",
                    )
                ),
            ),
        )
    shown = spec.triage[-SHOW_TRIAGE:]
    items: list[Cell] = []
    for a in shown:
        phase = a.phase + (f" ({a.framework})" if a.framework else "")
        text = f": {a.change} [{a.variable}]"
        if a.figures:
            text += "; " + ", ".join(f"{name.replace('_', ' ')} {gib(b)}" for name, b in a.figures)
        if a.predicted_peak_bytes:
            text += f"; predicted {exact(a.predicted_peak_bytes)}"
        items.append((Strong(f"{when_text(a.time)}, {phase}"), text + ": ", _outcome(a.outcome)))
    earlier = len(spec.triage) - len(shown)
    count = f"{len(spec.triage)} attempt(s), one change each"
    if earlier:
        count += f"; the last {len(shown)} shown, {earlier} earlier ones in the spec"
    return Section("triage", title, (Para((count + ".",)), Bullets(tuple(items))))
