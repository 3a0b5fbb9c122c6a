"""After an out-of-memory error: compare what the error says with the ledger for that stage,
and propose single changes (capacity, cache, micro-batch, precision, activation strategy,
allocator), each with its predicted new peak and what must be re-checked.

A change touches exactly one variable (`single_change`); the attempt log is `attempts`.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from vramtui.ledger import Estimate, estimate
from vramtui.ledger.items import STAGE_LABELS
from vramtui.spec import Measurement, Spec
from vramtui.triage.attempts import record_attempt, set_outcome, with_measurements
from vramtui.triage.single_change import (
    TwoVariablesError,
    check_single_change,
    edit_spec,
    spec_diff,
    variables_changed,
)
from vramtui.units import GIB_BYTES, format_bytes

PHASE_STAGES = {
    "load": ("load",),
    "generate": ("prefill", "decode"),
    "train_forward": ("forward",),
    "backward": ("backward",),
    "optimizer_step": ("optimizer_step",),
    "other": ("validation", "export"),
}

@dataclass(frozen=True)
class Recommendation:
    variable: str  # capacity | cache | micro_batch | precision | activation | allocator
    change: str  # in words: "micro_batch 8 -> 4, grad_accum 1 -> 2 (effective batch kept)"
    predicted_peak_bytes: int | None  # ledger peak of the failing stage(s) after the change
    recheck: str  # what must be re-checked: quality criteria, coverage, or nothing
    spec_after: Spec | None = None  # None: nothing in the spec changes (allocator, capacity)
    offer_id: str | None = None  # capacity: the catalogue offer proposed
    fits: bool | None = None  # predicted (calibrated) peak within the capacity the log showed
    note: str = ""


@dataclass(frozen=True)
class Advice:
    phase: str
    stages: tuple[str, ...]
    observed_in_use_bytes: int | None
    needed_at_failure_bytes: int | None  # in use + the allocation that failed: a lower bound
    capacity_bytes: int | None
    estimated_stage_bytes: int
    deviation: str  # one line: how far off the estimate was
    calibration: float  # needed / estimated when the estimate was low, else 1.0
    recommendations: tuple[Recommendation, ...]
    measurements: tuple[Measurement, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = ()


# ------------------------------------------------------------------------------ figures


def observed(reading) -> tuple[int | None, int | None, int | None]:
    """(in use at failure, in use + failed allocation, capacity) from the primary event."""
    ev = reading.primary
    if ev is None:
        return None, None, None
    f = ev.figures
    in_use = (
        f.get("process_in_use_bytes")
        or f.get("reserved_total_bytes")
        or f.get("already_allocated_bytes")
    )
    tried = f.get("tried_to_allocate_bytes", 0)
    needed = in_use + tried if in_use is not None else None
    capacity = f.get("total_capacity_bytes") or f.get("allowed_bytes")
    return in_use, needed, capacity


def _stage_peak(est: Estimate, stages: tuple[str, ...]) -> int:
    peaks = est.stage_peak_bytes
    return max(peaks[s] for s in stages if s in peaks)


def measurements_from(reading, stages: tuple[str, ...], spec: Spec) -> tuple[Measurement, ...]:
    """The error's figures as measured items for the failing stage (offered, not imposed)."""
    ev = reading.primary
    if ev is None:
        return ()
    stage = max(stages, key=lambda s: s in ("prefill", "backward", "forward"))
    valid_stages = (
        ("load", "prefill", "decode")
        if not spec.is_training
        else ("load", "forward", "backward", "optimizer_step", "validation", "export")
    )
    if stage not in valid_stages:
        return ()
    today = datetime.date.today()
    source = f"{ev.framework} out-of-memory message, line {ev.line_no}"
    out = []
    pairs = (
        ("process_in_use_bytes", "process_in_use", "this process has ... memory in use"),
        ("allocated_by_pytorch_bytes", "allocated", "allocated by PyTorch"),
        ("reserved_total_bytes", "reserved", "reserved in total by PyTorch"),
        ("already_allocated_bytes", "allocated", "already allocated"),
    )
    for key, quantity, counter in pairs:
        if key in ev.figures:
            out.append(
                Measurement(
                    stage=stage,
                    quantity=quantity,
                    bytes=ev.figures[key],
                    as_written=ev.as_written.get(key, ""),
                    counter=f"{ev.framework} OOM message '{counter}' (at the failure, not a peak)",
                    source=source,
                    gpu=ev.gpu_index,
                    date=today,
                    error=f"{ev.framework} out of memory",
                )
            )
    return tuple(out)


# ------------------------------------------------------------------------------ candidates


def _quality_recheck(spec: Spec, what: str) -> str:
    if spec.quality:
        crit = "; ".join(f"{q.metric} {q.threshold}" for q in spec.quality)
        return f"{what}: re-check the quality criteria ({crit})"
    return f"{what}: re-check output quality (the spec states no quality criterion yet)"


def candidate_edits(spec: Spec, phase: str) -> list[tuple[str, str, dict, str]]:
    """(variable, change in words, field edits, recheck) for the phase."""
    out = []
    b, le, rt, tr = spec.batch, spec.lengths, spec.runtime, spec.training
    fmt = spec.weights.format
    if phase in ("generate", "unknown") and not spec.is_training:
        if b.concurrency and b.concurrency > 1:
            new = max(1, b.concurrency // 2)
            out.append(
                (
                    "cache",
                    f"concurrency {b.concurrency} -> {new}",
                    {"batch.concurrency": new},
                    f"coverage: the spec requires {b.concurrency} concurrent sequences; "
                    f"{new} is acceptable only if that requirement changes (or add replicas)",
                )
            )
        if rt.kv_cache_dtype in ("bf16", "fp16", "fp32"):
            out.append(
                (
                    "cache",
                    f"KV cache dtype {rt.kv_cache_dtype} -> fp8",
                    {"runtime.kv_cache_dtype": "fp8"},
                    _quality_recheck(spec, "an fp8 KV cache can change outputs"),
                )
            )
        ctx = le.prompt_tokens + le.generated_tokens
        if le.prompt_tokens > 1:
            new_prompt = max(1, le.prompt_tokens // 2)
            out.append(
                (
                    "cache",
                    f"prompt tokens {le.prompt_tokens:,} -> {new_prompt:,}",
                    {"lengths.prompt_tokens": new_prompt},
                    f"coverage: the required length is {ctx:,} tokens; a shorter window does "
                    "not validate the announced workload",
                )
            )
    if phase in ("load", "generate", "unknown") and not spec.is_training:
        for new_fmt, extra in (("fp8", {}), ("int8", {}), ("nf4", {"weights.double_quant": True})):
            if fmt in ("bf16", "fp16", "fp32") and new_fmt != fmt:
                edits = {"weights.format": new_fmt, **extra}
                if spec.weights.groups:
                    edits["weights.groups"] = None
                out.append(
                    (
                        "precision",
                        f"weights {fmt} -> {new_fmt}",
                        edits,
                        _quality_recheck(spec, f"{new_fmt} weights change the model's outputs"),
                    )
                )
    if spec.is_training and phase in ("train_forward", "backward", "unknown"):
        if b.micro_batch and b.micro_batch > 1:
            new = max(1, b.micro_batch // 2)
            acc = b.grad_accum * b.micro_batch // new
            out.append(
                (
                    "micro_batch",
                    f"micro_batch {b.micro_batch} -> {new}, grad_accum {b.grad_accum} -> {acc}"
                    " (effective batch kept)",
                    {"batch.micro_batch": new, "batch.grad_accum": acc},
                    "none for quality (same effective batch); steps take longer",
                )
            )
        if tr.grad_checkpointing != "full":
            out.append(
                (
                    "activation",
                    f"gradient checkpointing {tr.grad_checkpointing} -> full",
                    {"training.grad_checkpointing": "full"},
                    "none for quality; about a third more compute per step",
                )
            )
        if rt.attention == "eager":
            out.append(
                (
                    "activation",
                    "attention eager -> flash",
                    {"runtime.attention": "flash"},
                    "none for quality; needs an Ampere or newer card",
                )
            )
    if spec.is_training and phase in ("optimizer_step", "unknown"):
        if tr.optimizer == "adamw":
            out.append(
                (
                    "precision",
                    "optimizer adamw -> adamw_8bit",
                    {"training.optimizer": "adamw_8bit", "training.optimizer_state_dtype": None},
                    _quality_recheck(spec, "8-bit optimiser states can change convergence"),
                )
            )
    # Switching LoRA to QLoRA changes the task itself, so it is never proposed here.
    return out


def advise(
    reading, spec: Spec, arch=None, checkpoint=None, catalog=None, est: Estimate | None = None
) -> Advice:
    """Compare the error with the ledger and list the single changes worth trying."""
    est = est or estimate(spec, arch, checkpoint)
    phase = reading.phase.phase
    stages = PHASE_STAGES.get(phase, est.stages)
    stages = tuple(s for s in stages if s in est.stages) or est.stages
    warnings = []
    if phase in ("train_forward", "backward", "optimizer_step") and not spec.is_training:
        warnings.append(
            f"the log shows a training phase ({phase}) but the spec is an inference "
            "spec: open the spec of the job that failed"
        )
    if phase == "generate" and spec.is_training:
        warnings.append("the log shows generation but the spec is a training spec")
    estimated = _stage_peak(est, stages)
    in_use, needed, capacity = observed(reading)
    stage_words = " / ".join(STAGE_LABELS[s] for s in stages)
    if needed is None:
        deviation = (
            f"the error gives no memory figures; the ledger estimated "
            f"{format_bytes(estimated)} per GPU for {stage_words}"
        )
        calibration = 1.0
    elif needed > estimated:
        pct = (needed - estimated) / estimated * 100 if estimated else float("inf")
        deviation = (
            f"the ledger estimated {format_bytes(estimated)} per GPU for {stage_words}; "
            f"at the failure the process held {format_bytes(in_use)} and asked for "
            f"{format_bytes(needed - in_use)} more, so at least {format_bytes(needed)} "
            f"was needed: the estimate is at least {pct:.0f}% low"
        )
        calibration = needed / estimated if estimated else 1.0
    else:
        deviation = (
            f"the ledger estimated {format_bytes(estimated)} per GPU for {stage_words}, "
            f"more than the {format_bytes(needed)} held and requested at the failure: "
            "the card had less room than assumed (other processes, a smaller "
            "allocatable total) or the failure came before the stage's peak"
        )
        calibration = 1.0
    other = reading.primary.figures.get("other_processes_bytes") if reading.primary else None
    if other:
        warnings.append(
            f"other processes held {format_bytes(other)} on the same GPU: free the "
            "card or count them before changing the workload"
        )
    recs: list[Recommendation] = []
    for variable, change, edits, recheck in candidate_edits(spec, phase):
        after = edit_spec(spec, edits)
        if after is None:
            continue
        try:
            if check_single_change(spec, after) != variable:
                continue
        except TwoVariablesError:
            continue
        new_est = estimate(after, arch, checkpoint)
        peak = _stage_peak(
            new_est, tuple(s for s in stages if s in new_est.stages) or new_est.stages
        )
        fits = None
        if capacity:
            fits = peak * calibration <= capacity
        recs.append(
            Recommendation(
                variable,
                change,
                peak,
                recheck,
                after,
                fits=fits,
                note=_calibration_note(calibration),
            )
        )
    recs += _allocator(reading, capacity, needed)
    recs += _capacity(spec, est, arch, catalog, calibration, needed, stages)
    recs.sort(key=lambda r: (r.fits is False, burden(r), r.predicted_peak_bytes or 0))
    return Advice(
        phase=phase,
        stages=stages,
        observed_in_use_bytes=in_use,
        needed_at_failure_bytes=needed,
        capacity_bytes=capacity,
        estimated_stage_bytes=estimated,
        deviation=deviation,
        calibration=calibration,
        recommendations=tuple(recs),
        measurements=measurements_from(reading, stages, spec),
        warnings=tuple(warnings),
    )


def burden(rec: Recommendation) -> int:
    """What a change costs the requirements: changes that keep the workload and its quality
    come first, then renting more, then changes that need a quality re-check, and last the
    changes that give up coverage (fewer concurrent sequences, a shorter window)."""
    if rec.variable in ("allocator", "micro_batch", "activation"):
        return 0
    if rec.variable == "capacity":
        return 1
    if rec.recheck.startswith("coverage"):
        return 3
    return 2


def _calibration_note(calibration: float) -> str:
    if calibration > 1.0:
        return (
            f"'fits' scales the ledger's prediction by {calibration:.2f}, the ratio the "
            "estimate was low by at the failure"
        )
    return ""


def _allocator(reading, capacity, needed) -> list[Recommendation]:
    ev = reading.primary
    if ev is None:
        return []
    slack = ev.figures.get("reserved_unallocated_bytes")
    if (
        slack is None
        and "reserved_total_bytes" in ev.figures
        and ("already_allocated_bytes" in ev.figures)
    ):
        slack = ev.figures["reserved_total_bytes"] - ev.figures["already_allocated_bytes"]
    tried = ev.figures.get("tried_to_allocate_bytes", 0)
    # Fragmentation is worth a change when the slack alone would have covered the failed
    # request, or when it is a large share of the card.
    if not slack or slack < GIB_BYTES // 4 or (slack < tried and slack < (capacity or 0) // 20):
        return []
    predicted = needed - slack if needed else None
    return [
        Recommendation(
            "allocator",
            "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the job's environment",
            predicted,
            "none: it changes how the allocator maps memory, not the computation",
            None,
            fits=(predicted <= capacity) if (predicted is not None and capacity) else None,
            note=f"{format_bytes(slack)} was reserved by PyTorch but unallocated (fragmentation)",
        )
    ]


def _capacity(spec, est, arch, catalog, calibration, needed, stages) -> list[Recommendation]:
    if catalog is None:
        return []
    from vramtui.shortlist import EXCLUDED, shortlist

    target = max(int(est.peak_bytes * calibration), needed or 0)
    sl = shortlist(spec, est, catalog, arch=arch)
    for c in sl.candidates:
        if c.status == EXCLUDED and any(r.key != "memory" for r in c.failing):
            continue
        if c.usable_bytes * (1 - spec.headroom.margin_fraction) >= target:
            return [
                Recommendation(
                    "capacity",
                    f"rent {c.offer.title} ({c.offer.id}, {c.offer.provider}): "
                    f"{format_bytes(c.usable_bytes)} allocatable per GPU",
                    est.peak_bytes,
                    "the new card's requirements in the shortlist (format support, placement, "
                    "host); the workload itself is unchanged",
                    None,
                    offer_id=c.offer.id,
                    fits=True,
                    note=f"needs {format_bytes(target)} per GPU (the estimate scaled by what the "
                    "failure showed)",
                )
            ]
    return []


__all__ = [
    "Advice",
    "Recommendation",
    "TwoVariablesError",
    "advise",
    "check_single_change",
    "record_attempt",
    "set_outcome",
    "spec_diff",
    "variables_changed",
    "with_measurements",
]
