"""What was measured: each figure beside its estimate with its counter and coverage, the staged
validation plan, and the conditions of the measurements (GPU, driver, library versions)."""

from __future__ import annotations

from vramtui.ledger.items import STAGE_LABELS
from vramtui.measure.coverage import describe_dims
from vramtui.measure.plan import FAILED, NOT_RUN, PARTIAL, PASSED
from vramtui.sheet.blocks import (
    INVALID,
    VALID,
    WARN,
    Bullets,
    Cell,
    Cite,
    Code,
    Facts,
    Inline,
    Mark,
    Para,
    Section,
    Strong,
    join,
)
from vramtui.sheet.describe import software_text
from vramtui.sheet.figures import exact, gib, signed

PLAN_MARKS = {PASSED: "passed", PARTIAL: "partial", FAILED: "failed", NOT_RUN: "notrun"}
# Versions shown first under the measurement conditions, and how they are named.
VERSION_LABELS = {
    "driver": "NVIDIA driver",
    "cuda": "CUDA",
    "torch": "PyTorch",
    "vllm": "vLLM",
    "transformers": "transformers",
}


def _measured_text(c) -> str:
    m = c.measurement
    if m.is_count:
        if m.quantity == "max_concurrency":
            text = f"{m.value:g}x"
        else:
            text = f"{m.value:,.0f} {'tokens' if m.quantity == 'kv_cache_tokens' else 'blocks'}"
    else:
        text = exact(m.bytes)
    if m.as_written:
        text += f", as written {m.as_written}"
    return text


def _estimate_text(c) -> str:
    if c.measurement.is_count:
        return "none" if c.estimate_value is None else f"{c.estimate_value:,.0f} tokens needed"
    return "none" if c.estimate_bytes is None else gib(c.estimate_bytes)


def _difference_text(c) -> str:
    frac = c.difference_fraction
    if c.measurement.is_count:
        return "" if frac is None else f" ({frac:+.0%} capacity)"
    if c.difference_bytes is None:
        return ""
    return f" ({signed(c.difference_bytes)}" + (f", {frac:+.0%})" if frac is not None else ")")


def _comparison_cell(c) -> Cell:
    """ "**label**: measured X against Y estimated (diff); counter at dims; coverage". What the
    estimate covers (and what the counter does not see) is the estimate's citation."""
    m = c.measurement
    parts: list[Inline] = [Strong(c.label)]
    if m.error:
        parts += [" ", Mark(FAILED, "failed"), f" ({m.error.splitlines()[0][:80]})"]
    estimate: Inline = _estimate_text(c)
    if c.scope:
        estimate = Cite(estimate, f"estimate: {c.scope}")
    parts += [f": {_measured_text(c)} against ", estimate]
    dims = describe_dims(m.dims) if m.dims else ""
    parts.append(
        ("" if m.is_count else " estimated")
        + f"{_difference_text(c)}; {m.counter}"
        + (f" at {dims}" if dims and dims not in c.label else "")
        + "; "
    )
    note = c.coverage.note
    if c.coverage.validates and dims:  # the dimensions are said once, just before
        note = note.split(" (")[0]
    parts.append(Mark(VALID if c.coverage.validates else INVALID, note))
    return tuple(parts)


def _plan(steps) -> Para:
    """The staged validation plan in one paragraph, step after step: its dimensions, status
    and what is left (one line instead of one a step keeps the sheet on one page)."""
    parts: list[Inline] = [
        Strong("Staged validation plan"),
        " (only the required limit validates the workload): ",
    ]
    for i, step in enumerate(steps):
        parts += [
            "; " if i else "",
            Strong(step.title),
            f" ({step.dims_text}): ",
            Mark(PLAN_MARKS[step.status], step.status),
        ]
        if step.status in (PARTIAL, FAILED) and step.missing_stages:
            parts.append(", to run " + ", ".join(STAGE_LABELS[s] for s in step.missing_stages))
        parts += [f", failed: {f}" for f in step.failures]
        if step.peak_bytes is not None:
            parts.append(f", largest {gib(step.peak_bytes)}")
    parts.append(".")
    return Para(tuple(p for p in parts if p != ""))


def measured_section(comparisons, steps) -> Section:
    title = "Measured beside estimated"
    plan = _plan(steps)
    if not comparisons:
        intro = Para(
            (
                Mark(WARN, "No measurement yet"),
                ": every figure here is a calculation; import probe runs or vLLM logs with ",
                Code("vramtui measure import FILE --spec SPEC.toml"),
                ".",
            )
        )
        return Section("measured", title, (intro, plan))
    figures = Bullets(tuple(_comparison_cell(c) for c in comparisons))
    return Section("measured", title, (figures, plan))


def conditions_section(spec) -> Section:
    title = "Measurement conditions"
    ms = spec.measured
    asked = software_text(spec.campaign.software) if spec.campaign.software else ""
    if not ms:
        parts: tuple[Inline, ...] = (
            Mark(WARN, "No measurement yet"),
            ": no GPU, driver or library version has confirmed any figure.",
        )
        if asked:
            parts += (f" When renting, {asked} (", Code("campaign.software"), ").")
        return Section("conditions", title, (Para(parts),))
    rows: list[tuple[str, Cell]] = []
    devices: dict[str, set] = {}
    for m in ms:
        devices.setdefault(m.device or "device not recorded", set()).add(m.gpu)
    gpus = []
    for name, idx in devices.items():
        known = sorted(x for x in idx if x is not None)
        gpus.append(name + (f" (GPU {', '.join(str(g) for g in known)})" if known else ""))
    rows.append(("GPU", "; ".join(gpus)))
    versions: dict[str, list[str]] = {}
    for m in ms:
        for name, value in m.versions:
            if value not in versions.setdefault(name, []):
                versions[name].append(value)
    engine = (spec.runtime.engine or "").lower()
    wanted = ["driver", "cuda", "torch"] + [e for e in ("vllm", "transformers") if e == engine]
    names = wanted + sorted(n for n in versions if n not in wanted)
    stated: list[tuple[Inline, ...]] = []
    for name in names:
        values = versions.get(name)
        label = VERSION_LABELS.get(name, name)
        if not values:
            stated.append((f"{label} ", Mark(WARN, "not recorded")))
        elif len(values) > 1:
            stated.append((f"{label} {', '.join(values)} ", Mark(WARN, "mixed versions")))
        else:
            stated.append((f"{label} {values[0]}",))
    rows.append(("Versions", join(stated, "; ")))
    dates = sorted({m.date for m in ms if m.date is not None})
    undated = sum(1 for m in ms if m.date is None)
    when = (
        (dates[0].isoformat() if len(dates) == 1 else f"{dates[0]} to {dates[-1]}") if dates else ""
    )
    if undated:
        when += ("; " if when else "") + f"{undated} figure(s) undated"
    rows.append(("Dates", when))
    sources = sorted({m.source for m in ms if m.source})
    runs = sorted({m.run for m in ms if m.run})
    source_cell: tuple[Inline, ...] = (
        ("; ".join(sources),) if sources else (Mark(WARN, "not recorded"),)
    )
    if runs:
        source_cell += (f"; runs {', '.join(runs)}",)
    rows.append(("Sources", source_cell))
    if asked:
        rows.append(("Renting", (asked, " (", Code("campaign.software"), ")")))
    return Section("conditions", title, (Facts(tuple(rows)),))
