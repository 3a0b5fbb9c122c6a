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
from vramtui.triage.failed_card import failed_card_capacity
from vramtui.triage.kv_room import judge_change, kv_room, max_len_edit
from vramtui.triage.oom_forms import PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS
from vramtui.triage.single_change import (
    TwoVariablesError,
    check_single_change,
    edit_spec,
    spec_diff,
    variables_changed,
)
from vramtui.unit_text import Figure, UnitText
from vramtui.units import GIB_BYTES

PHASE_STAGES = {
    "load": ("load",),
    "generate": ("prefill", "decode"),
    "train_forward": ("forward",),
    "backward": ("backward",),
    "optimizer_step": ("optimizer_step",),
    "other": ("validation", "export"),
}

# The question asked when the stage is unknown, with the stages a user can name.
STAGE_CHOICES = ("load", "generate", "train_forward", "backward", "optimizer_step", "other")
STAGE_QUESTION = (
    "Which stage was running when it failed? load (reading the weights), generate "
    "(inference), train_forward, backward, optimizer_step, or other (evaluation, a "
    "checkpoint save)"
)


def _either(*verdicts: bool | None) -> bool | None:
    """Both columns together: no when either says no, yes when every known one says yes."""
    known = [v for v in verdicts if v is not None]
    if not known:
        return None
    return all(known)


@dataclass(frozen=True)
class Recommendation:
    """One change, with two predictions kept apart: from the error's own figures (the need at
    the failure, less what the change saves) and from the ledger (the estimate after the
    change). Each is judged against the same capacity, `fits_against_bytes`."""

    variable: str  # capacity | cache | micro_batch | precision | activation | allocator
    change: str  # in words: "micro_batch 8 -> 4, grad_accum 1 -> 2 (effective batch kept)"
    ledger_peak_bytes: int | None  # ledger peak of the failing stage(s) after the change
    recheck: str  # what must be re-checked: quality criteria, coverage, or nothing
    spec_after: Spec | None = None  # None: nothing in the spec changes (allocator, capacity)
    offer_id: str | None = None  # capacity: the catalogue offer proposed
    error_peak_bytes: int | None = None  # the error's need after the change (a lower bound)
    fits_against_bytes: int | None = None  # the failed card's real capacity (or the new card's)
    note: str = ""
    # A KV cache too small for max_model_len (vramtui.triage.kv_room): from the error, the KV
    # one sequence needs after the change against the room the engine has for it after it.
    error_kv_need_bytes: int | None = None
    error_kv_room_bytes: int | None = None

    @property
    def fits_error(self) -> bool | None:
        if self.error_kv_need_bytes is not None and self.error_kv_room_bytes is not None:
            return self.error_kv_need_bytes <= self.error_kv_room_bytes
        if self.error_peak_bytes is None or not self.fits_against_bytes:
            return None
        return self.error_peak_bytes <= self.fits_against_bytes

    @property
    def error_column(self) -> str:
        """The "from the error" prediction in words: a peak, or KV need against KV room."""
        if self.error_kv_need_bytes is not None and self.error_kv_room_bytes is not None:
            need, room = Figure(self.error_kv_need_bytes), Figure(self.error_kv_room_bytes)
            return UnitText("KV ", need, " of ", room, " room")
        if self.error_peak_bytes is None:
            return "-"
        return UnitText(Figure(self.error_peak_bytes))

    @property
    def fits_ledger(self) -> bool | None:
        if self.ledger_peak_bytes is None or not self.fits_against_bytes:
            return None
        return self.ledger_peak_bytes <= self.fits_against_bytes

    @property
    def fits(self) -> bool | None:
        """No when either prediction exceeds the capacity; yes when every known one fits."""
        return _either(self.fits_error, self.fits_ledger)

    @property
    def predicted_peak_bytes(self) -> int | None:
        """The larger of the two predictions (the one the verdict cannot ignore), logged with
        the attempt."""
        known = [p for p in (self.error_peak_bytes, self.ledger_peak_bytes) if p is not None]
        return max(known) if known else None

    @property
    def why_not_fit(self) -> str:
        """One line: which prediction exceeds which capacity ("" when nothing says no)."""
        if self.fits is not False:
            return ""
        cap = UnitText(Figure(self.fits_against_bytes) if self.fits_against_bytes else "?")
        parts = []
        if self.fits_error is False and self.error_kv_need_bytes is not None:
            parts.append(
                UnitText(
                    "a KV cache of ",
                    Figure(self.error_kv_need_bytes),
                    " for one sequence from the error's figures, more than the ",
                    Figure(self.error_kv_room_bytes),
                    " the engine would have for it",
                )
            )
            if self.fits_ledger is False:
                parts.append(
                    UnitText(
                        Figure(self.ledger_peak_bytes),
                        " from the ledger, more than the ",
                        cap,
                        " of the card",
                    )
                )
            return "predicted " + UnitText("; and ").join(parts)
        if self.fits_error is False:
            parts.append(UnitText(Figure(self.error_peak_bytes), " from the error's figures"))
        if self.fits_ledger is False:
            parts.append(UnitText(Figure(self.ledger_peak_bytes), " from the ledger"))
        return UnitText(
            "predicted ", UnitText(" and ").join(parts), ", more than the ", cap, " of the card"
        )


@dataclass(frozen=True)
class Advice:
    phase: str
    stages: tuple[str, ...]
    observed_in_use_bytes: int | None
    needed_at_failure_bytes: int | None  # in use + the allocation that failed: a lower bound
    capacity_bytes: int | None  # the limit "fits" is judged against (the failed card)
    estimated_stage_bytes: int
    deviation: str  # one line: how far off the estimate was (a UnitText: figures in any unit)
    recommendations: tuple[Recommendation, ...]
    measurements: tuple[Measurement, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = ()
    capacity_source: str = ""  # where the failed card's capacity comes from, in words
    estimate_low_by_bytes: int | None = None  # the error needed at least this much more
    estimate_low_by_percent: float | None = None
    workload_lines: tuple = ()  # vramtui.triage.workload_lines.WorkloadLine, found in the log
    mismatches: tuple = ()  # vramtui.triage.workload_lines.Mismatch: log vs spec
    stage_question: str = ""  # the stage is unknown: what to answer (and the choices)

    @property
    def mismatch_lines(self) -> tuple[str, ...]:
        return tuple(m.line for m in self.mismatches)


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


def override_stage(reading, phase: str):
    """The reading with its stage set by hand (the user answers the stage question)."""
    from dataclasses import replace

    from vramtui.errors import SpecError
    from vramtui.triage.phase import PHASES

    if phase not in PHASES:
        raise SpecError(f"unknown stage {phase!r}: choose one of {', '.join(STAGE_CHOICES)}")
    if reading.phase.phase == phase:
        return reading
    verdict = replace(
        reading.phase, phase=phase, reason=f"set by hand (the reader said {reading.phase.phase})"
    )
    return replace(reading, phase=verdict)


def _lowers_every_stage(before: Estimate, after: Estimate) -> bool:
    """True when the change lowers the peak of every stage: it helps whichever stage failed."""
    b, a = before.stage_peak_bytes, after.stage_peak_bytes
    return all(a.get(s, b[s]) < b[s] for s in b)


def advise(
    reading,
    spec: Spec,
    arch=None,
    checkpoint=None,
    catalog=None,
    est: Estimate | None = None,
    log_text: str | None = None,
    failed_gpu=None,
) -> Advice:
    """Compare the error with the ledger and list the single changes worth trying. `log_text`
    (the whole log) lets the workload lines it prints be compared with the spec."""
    from vramtui.triage.candidates import candidate_edits
    from vramtui.triage.workload_lines import compare_with_spec, find_workload_lines

    est = est or estimate(spec, arch, checkpoint)
    phase = reading.phase.phase
    ev = reading.primary
    # A KV cache too small for max_model_len fails at the engine's start-up (phase `load`),
    # but the cache it could not fit is the serving stages' item: judge those stages.
    kv_event = ev is not None and ev.kind == "kv_cache" and not spec.is_training
    stages = PHASE_STAGES.get("generate" if kv_event else phase, est.stages)
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
    in_use, needed, _ = observed(reading)
    capacity, capacity_source = failed_card_capacity(
        reading, spec, catalog, failed_gpu=failed_gpu, log_text=log_text
    )
    stage_words = " / ".join(STAGE_LABELS[s] for s in stages)
    low_by = low_pct = None
    if needed is None:
        deviation = UnitText(
            "the error gives no memory figures; the ledger estimated ",
            Figure(estimated),
            f" per GPU for {stage_words}",
        )
    elif needed > estimated:
        low_by = needed - estimated
        low_pct = low_by / estimated * 100 if estimated else None
        pct = f", {low_pct:.0f}%" if low_pct is not None else ""
        deviation = UnitText(
            "the error proves the estimate low by at least ",
            Figure(low_by, gib_in_bytes_mode=True),
            f" ({low_by:,} B{pct}): at least ",
            Figure(needed),
            " was needed at the failure (",
            Figure(in_use),
            " held + ",
            Figure(needed - in_use),
            " asked for), the ledger estimated ",
            Figure(estimated),
            f" per GPU for {stage_words}",
        )
    else:
        deviation = UnitText(
            "the ledger estimated ",
            Figure(estimated),
            f" per GPU for {stage_words}, more than the ",
            Figure(needed),
            " held and requested at the failure: the card had less room than assumed (other "
            "processes, a smaller allocatable total) or the failure came before the stage's peak",
        )
    room = kv_room(reading, spec, arch, checkpoint, est)
    if room is not None and needed is None:
        deviation = UnitText(
            room.line(),
            "; the ledger estimated ",
            Figure(estimated),
            f" per GPU for {stage_words}",
        )
    other = reading.primary.figures.get("other_processes_total_bytes") if reading.primary else None
    if other:
        warnings.append(
            UnitText(
                "other processes held ",
                Figure(other),
                " on the same GPU: free the card or count them before changing the workload",
            )
        )
    workload = find_workload_lines(log_text) if log_text else ()
    mismatches = compare_with_spec(workload, spec)
    if mismatches:
        warnings.insert(
            0,
            f"the log ran a different workload from the spec ({len(mismatches)} "
            f"mismatch{'es' if len(mismatches) > 1 else ''}): the predictions below are for "
            "the spec; fix the spec (or the job) first",
        )
    unknown = phase not in PHASE_STAGES
    recs: list[Recommendation] = []
    edits_to_try = list(candidate_edits(spec, phase, kv_cache_event=kv_event))
    if room is not None:
        shorter = max_len_edit(room, spec)
        if shorter is not None:
            edits_to_try.insert(
                0,
                (
                    "cache",
                    f"context {spec.lengths.context_tokens:,} -> {room.room_tokens:,} tokens "
                    f"(prompt {spec.lengths.prompt_tokens:,} -> {shorter['lengths.prompt_tokens']:,}"
                    f"): max_model_len {room.room_tokens:,}, what the KV cache held",
                    shorter,
                    f"coverage: the required length is {spec.lengths.context_tokens:,} tokens; a "
                    "shorter window does not validate the announced workload",
                ),
            )
    for variable, change, edits, recheck in edits_to_try:
        after = edit_spec(spec, edits)
        if after is None:
            continue
        try:
            if check_single_change(spec, after) != variable:
                continue
        except TwoVariablesError:
            continue
        new_est = estimate(after, arch, checkpoint)
        if unknown and not _lowers_every_stage(est, new_est):
            continue  # only what holds whichever stage failed
        peak = _stage_peak(
            new_est, tuple(s for s in stages if s in new_est.stages) or new_est.stages
        )
        from_error = needed - (estimated - peak) if needed is not None else None
        kv_need = kv_room_after = None
        if room is not None:
            judged = judge_change(room, spec, after, arch, checkpoint, new_est)
            if judged is not None:
                kv_need, kv_room_after = judged
        recs.append(
            Recommendation(
                variable,
                change,
                peak,
                recheck,
                after,
                error_peak_bytes=from_error,
                fits_against_bytes=capacity,
                note=(
                    UnitText(
                        "from the error: the need at the failure less the ledger's saving (",
                        Figure(estimated - peak),
                        ")",
                    )
                    if from_error is not None
                    else ""
                ),
                error_kv_need_bytes=kv_need,
                error_kv_room_bytes=kv_room_after,
            )
        )
    recs += _allocator(reading, capacity, needed)
    overall = needed + (est.peak_bytes - estimated) if needed is not None else None
    recs += _capacity(spec, est, arch, catalog, overall, capacity)
    recs.sort(key=lambda r: (r.fits is False, burden(r), r.predicted_peak_bytes or 0))
    return Advice(
        phase=phase,
        stages=stages,
        observed_in_use_bytes=in_use,
        needed_at_failure_bytes=needed,
        capacity_bytes=capacity,
        estimated_stage_bytes=estimated,
        deviation=deviation,
        recommendations=tuple(recs),
        measurements=measurements_from(reading, stages, spec),
        warnings=tuple(warnings),
        capacity_source=capacity_source,
        estimate_low_by_bytes=low_by,
        estimate_low_by_percent=low_pct,
        workload_lines=workload,
        mismatches=mismatches,
        stage_question=STAGE_QUESTION if unknown else "",
    )


def fits_word(r) -> str:
    """yes / no / ?, saying which prediction fails when only one does."""
    if r.fits is None:
        return "?"
    if r.fits:
        return "yes"
    if r.fits_error is False and r.fits_ledger is not False:
        return "no (error)"
    if r.fits_ledger is False and r.fits_error is not False:
        return "no (ledger)"
    return "no"


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


def _allocator(reading, capacity, needed) -> list[Recommendation]:
    ev = reading.primary
    if ev is None or ev.framework not in PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS:
        return []  # another allocator: PYTORCH_CUDA_ALLOC_CONF does nothing there
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
    return [
        Recommendation(
            "allocator",
            "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the job's environment",
            None,  # the ledger does not model fragmentation
            "none: it changes how the allocator maps memory, not the computation",
            None,
            error_peak_bytes=needed - slack if needed else None,
            fits_against_bytes=capacity,
            note=UnitText(
                Figure(slack), " was reserved by PyTorch but unallocated (fragmentation)"
            ),
        )
    ]


# A catalogue card counts as "less memory" than the failed one below this share of it (the
# same card reads a few hundred MiB apart from one driver or runtime to the next).
SAME_CARD_FRACTION = 0.98


def _capacity(spec, est, arch, catalog, overall_from_error, failed_capacity):
    """The cheapest catalogue offer whose card holds the need, never one with less memory than
    the card that failed: at the same workload it would fail too."""
    if catalog is None:
        return []
    from vramtui.shortlist import EXCLUDED, shortlist

    target = max(est.peak_bytes, overall_from_error or 0)
    floor = int(failed_capacity * SAME_CARD_FRACTION) if failed_capacity else 0
    # Only statuses and capacities are read here: no placement hints (they cost estimates).
    sl = shortlist(spec, est, catalog, arch=arch, placement_hints=False)
    for c in sl.candidates:
        if c.status == EXCLUDED and any(r.key != "memory" for r in c.failing):
            continue
        if c.usable_bytes < floor:
            continue
        if c.usable_bytes * (1 - spec.headroom.margin_fraction) >= target:
            return [
                Recommendation(
                    "capacity",
                    UnitText(
                        f"rent {c.offer.title} ({c.offer.id}, {c.offer.provider}): ",
                        Figure(c.usable_bytes),
                        " allocatable per GPU",
                    ),
                    est.peak_bytes,
                    "the new card's requirements in the shortlist (format support, placement, "
                    "host); the workload itself is unchanged",
                    None,
                    offer_id=c.offer.id,
                    error_peak_bytes=overall_from_error,
                    fits_against_bytes=c.usable_bytes,
                    note=UnitText(
                        "needs ",
                        Figure(target),
                        " per GPU; 'fits' is judged against the new card",
                        *(
                            ("; no card below the failed one's ", Figure(failed_capacity))
                            if failed_capacity
                            else (
                                (
                                    "; the failed card is unknown (the error prints no "
                                    "capacity): this helps only if it had less than "
                                ),
                                Figure(c.usable_bytes),
                                "; name it (--failed-gpu) to be sure",
                            )
                        ),
                    ),
                )
            ]
    return []


__all__ = [
    "STAGE_CHOICES",
    "Advice",
    "Recommendation",
    "TwoVariablesError",
    "advise",
    "check_single_change",
    "failed_card_capacity",
    "fits_word",
    "override_stage",
    "record_attempt",
    "set_outcome",
    "spec_diff",
    "variables_changed",
    "with_measurements",
]
