"""The staged validation plan, as a checklist: load, then short inputs and a small batch, then
typical inputs, then the required limit (the seed's "validate stage by stage").

Each step has the dimensions to run and, from the measurements stored with the spec, a status:

* passed: every stage of the step has a measurement, without error, at dimensions at least the
  step's;
* partial: some stages are measured at those dimensions, others are not yet;
* failed: a stage raised (out of memory or another error) at dimensions within this step;
* not run: nothing measured at these dimensions yet.

The typical step is half the required length and batch unless the user states otherwise: a
stated default, shown as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vramtui.ledger.items import INFERENCE_STAGES, TRAINING_STAGES
from vramtui.measure.coverage import describe_dims, executed_dims, required_dims

PASSED = "passed"
PARTIAL = "partial"
FAILED = "failed"
NOT_RUN = "not run"

SMOKE_SEQ_LEN = 512


@dataclass(frozen=True)
class PlanStep:
    key: str  # load | smoke | typical | required
    title: str
    dims: dict  # {"batch": B, "seq_len": S}; empty for load
    why: str
    stages: tuple[str, ...]  # the stages this step runs
    status: str
    measured_stages: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()  # "backward at 8 x 4,096 tokens: OutOfMemoryError ..."
    peak_bytes: int | None = None  # largest measured figure of the step
    peak_counter: str = ""

    @property
    def missing_stages(self) -> tuple[str, ...]:
        return tuple(s for s in self.stages if s not in self.measured_stages)

    @property
    def dims_text(self) -> str:
        return describe_dims(self.dims) if self.dims else "no inputs"

    def to_dict(self) -> dict:
        return {
            "step": self.key,
            "title": self.title,
            "dims": dict(self.dims),
            "why": self.why,
            "status": self.status,
            "stages": list(self.stages),
            "measured_stages": list(self.measured_stages),
            "missing_stages": list(self.missing_stages),
            "failures": list(self.failures),
            "peak_bytes": self.peak_bytes,
            "peak_counter": self.peak_counter,
        }


def plan_dims(spec) -> list[tuple[str, str, dict, str]]:
    """(key, title, dims, why) of the three sized steps."""
    req = required_dims(spec)
    batch, seq = max(req["batch"], 1), max(req["seq_len"], 1)
    smoke = {"batch": 1, "seq_len": min(SMOKE_SEQ_LEN, seq)}
    typical = {"batch": max(1, math.ceil(batch / 2)), "seq_len": max(1, math.ceil(seq / 2))}
    unit = "micro-batch" if spec.is_training else "concurrent sequences"
    return [
        ("smoke", "short inputs, small batch", smoke, "finds setup errors cheaply"),
        (
            "typical",
            "typical inputs",
            typical,
            (
                f"half the required length and {unit} (a stated default: run your real "
                "typical inputs and record their dimensions)"
            ),
        ),
        (
            "required",
            "the required limit",
            {"batch": batch, "seq_len": seq},
            "the workload to validate: only this step validates it",
        ),
    ]


def _covers(dims: dict, step_dims: dict) -> bool:
    return all(dims.get(k) is not None and dims[k] >= v for k, v in step_dims.items()) and (
        dims.get("corpus_fraction", 1) >= 1
    )


def staged_plan(spec) -> tuple[PlanStep, ...]:
    """The checklist for `spec`, filled from `spec.measured`."""
    all_stages = TRAINING_STAGES if spec.is_training else INFERENCE_STAGES
    run_stages = tuple(s for s in all_stages if s != "load")
    byte_measurements = [m for m in spec.measured if m.bytes is not None and not m.is_count]
    steps = [_load_step(byte_measurements)]
    sized = plan_dims(spec)
    for i, (key, title, dims, why) in enumerate(sized):
        next_dims = sized[i + 1][2] if i + 1 < len(sized) else None
        ok_stages: set[str] = set()
        failures = []
        peak, peak_counter = None, ""
        for m in byte_measurements:
            if m.stage == "load" or m.quantity in ("item", "kv_cache_pool"):
                continue
            executed = executed_dims(m)
            if not _covers(executed, dims):
                continue
            if m.error:
                # A failure belongs to the highest step it covers.
                if next_dims is None or not _covers(executed, next_dims):
                    failures.append(
                        f"{m.stage} at {describe_dims(executed)}: {m.error.splitlines()[0][:100]}"
                    )
                continue
            ok_stages.add(m.stage)
            if peak is None or m.bytes > peak:
                peak, peak_counter = m.bytes, m.counter
        measured = tuple(s for s in run_stages if s in ok_stages)
        if failures:
            status = FAILED
        elif len(measured) == len(run_stages):
            status = PASSED
        elif measured:
            status = PARTIAL
        else:
            status = NOT_RUN
        steps.append(
            PlanStep(
                key=key,
                title=title,
                dims=dims,
                why=why,
                stages=run_stages,
                status=status,
                measured_stages=measured,
                failures=tuple(failures),
                peak_bytes=peak,
                peak_counter=peak_counter,
            )
        )
    return tuple(steps)


def _load_step(measurements) -> PlanStep:
    at_load = [m for m in measurements if m.stage == "load"]
    failures = tuple(f"load: {m.error.splitlines()[0][:100]}" for m in at_load if m.error)
    ok = [m for m in at_load if not m.error]
    peak = max(ok, key=lambda m: m.bytes, default=None)
    return PlanStep(
        key="load",
        title="load the model",
        dims={},
        why="weights, format and the load transient, before any input",
        stages=("load",),
        status=FAILED if failures else (PASSED if ok else NOT_RUN),
        measured_stages=("load",) if ok else (),
        failures=failures,
        peak_bytes=peak.bytes if peak else None,
        peak_counter=peak.counter if peak else "",
    )
