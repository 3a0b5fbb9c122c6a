"""The triage log kept in the spec: append an attempt (one change, outcome pending), record
its outcome once the job has run again, store the error's figures as measured items."""

from __future__ import annotations

import datetime
from dataclasses import replace

from vramtui.errors import SpecError
from vramtui.spec import Spec, TriageAttempt
from vramtui.triage.single_change import check_single_change

# The outcomes a user reports, as the CLI spells them -> as the triage log keeps them.
OUTCOMES = {
    "fixed": "fixed",
    "still-oom": "still out of memory",
    "other-error": "other error",
}


def record_attempt(spec: Spec, reading, advice, rec, now: datetime.datetime | None = None) -> Spec:
    """The spec after applying `rec` (exactly one variable) with the attempt appended to its
    triage log (outcome pending until the user reports it)."""
    base = rec.spec_after or spec
    if rec.spec_after is not None:
        check_single_change(spec, rec.spec_after)
    ev = reading.primary
    attempt = TriageAttempt(
        time=(now or datetime.datetime.now(datetime.UTC)).isoformat(timespec="seconds"),
        phase=advice.phase,
        framework=ev.framework if ev else "",
        figures=dict(ev.figures) if ev else {},
        variable=rec.variable,
        change=rec.change,
        predicted_peak_bytes=rec.predicted_peak_bytes,
        outcome="pending",
    )
    return replace(base, triage=tuple(spec.triage) + (attempt,))


def set_outcome(spec: Spec, index: int, outcome: str) -> Spec:
    attempts = list(spec.triage)
    attempts[index] = replace(attempts[index], outcome=outcome)
    return replace(spec, triage=tuple(attempts))


def attempt_index(spec: Spec, number: int | None, source: str = "the spec") -> int:
    """The 0-based index of attempt `number` (1-based; None: the last one), or one line
    naming what is wrong: no attempt logged yet, or a number out of range."""
    n = len(spec.triage)
    if n == 0:
        raise SpecError(
            f"{source} logs no triage attempt yet: apply a change first "
            "(vramtui triage LOG --spec SPEC --apply N), re-run the job, then record its outcome"
        )
    if number is None:
        return n - 1
    if not 1 <= number <= n:
        which = "1" if n == 1 else f"1 to {n}"
        raise SpecError(
            f"--attempt {number}: {source} logs {n} attempt{'s' if n > 1 else ''}; "
            f"choose {which} (or leave --attempt out for the last one)"
        )
    return number - 1


def record_outcome(spec: Spec, outcome: str, number: int | None = None, source: str = "the spec"):
    """(spec with attempt `number` (None: the last) marked `outcome`, its 0-based index).
    `outcome` is one of OUTCOMES' keys (fixed, still-oom, other-error) or already a logged
    outcome ("still out of memory")."""
    words = OUTCOMES.get(outcome, outcome)
    if words not in OUTCOMES.values():
        raise SpecError(f"unknown outcome {outcome!r}: choose one of {', '.join(OUTCOMES)}")
    index = attempt_index(spec, number, source)
    return set_outcome(spec, index, words), index


def with_measurements(spec: Spec, measurements) -> Spec:
    return replace(spec, measured=tuple(spec.measured) + tuple(measurements))
