"""`vramtui fit --dry-run`: the answer for the binding variable (micro-batch for training,
concurrency for inference) traced with the real model code on the meta device
(`vramtui.dryrun`), beside the ledger. The trace sees tensors only; the ledger's overheads
(CUDA context, allocator slack) are added back to judge the traced peak on the card."""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.fit_capacity import judge
from vramtui.ledger import estimate
from vramtui.ledger.items import STAGE_LABELS
from vramtui.unit_text import Figure, UnitText

PRIMARY_KNOBS = ("micro_batch", "concurrency")


@dataclass(frozen=True)
class TraceCheck:
    variable: str
    value: object
    stage: str | None = None
    trace_bytes: int | None = None  # the trace's peak at the stage (one replica, tensors)
    ledger_tensor_bytes: int | None = None  # the ledger's tensor items there (whole model)
    traced_peak_bytes: int | None = None  # per GPU: the ledger's peak + (trace - ledger)
    status: str | None = None  # the traced peak judged on the card (one GPU only)
    line: str = ""  # one line
    error: str = ""  # why no trace ran (the extra is not installed, no architecture...)

    def to_dict(self) -> dict:
        return {
            "variable": self.variable,
            "value": self.value,
            "stage": self.stage,
            "trace_bytes": self.trace_bytes,
            "ledger_tensor_bytes": self.ledger_tensor_bytes,
            "traced_peak_per_gpu_bytes": self.traced_peak_bytes,
            "status": self.status,
            "line": str(self.line),
            "error": self.error,
            "kind": "traced_estimate",
        }


def binding_result(report):
    """The result the trace confirms: micro-batch (training) or concurrency (inference)."""
    for key in PRIMARY_KNOBS:
        r = report.result(key)
        if r is not None and r.best is not None:
            return r
    return None


def confirm_with_trace(report, checkpoint=None) -> TraceCheck | None:
    from vramtui.dryrun import DryRunError, run_dry_run
    from vramtui.dryrun.compare import compare

    r = binding_result(report)
    if r is None:
        return None
    name, value = r.knob.label, r.best.value
    try:
        traced = run_dry_run(r.best.spec, report.arch)
    except DryRunError as exc:
        return TraceCheck(name, value, error=str(exc), line=f"dry run not run: {exc}")
    est = estimate(r.best.spec, report.arch, checkpoint)
    stage = r.best.stage
    comparisons = {c.stage: c for c in compare(traced, est)}
    c = comparisons.get(stage) or max(comparisons.values(), key=lambda x: x.trace_peak_bytes)
    stage = c.stage
    diff = c.trace_peak_bytes - c.ledger_tensor_bytes
    pct = f" ({c.difference_pct:+.1f}%)" if c.difference_pct not in (None, float("inf")) else ""
    head = UnitText(
        f"trace of {name} = {r.knob.show(value)} at {STAGE_LABELS.get(stage, stage)}: ",
        Figure(c.trace_peak_bytes),
        " of tensors vs the ledger's ",
        Figure(c.ledger_tensor_bytes),
        pct,
    )
    if report.spec.placement.gpus != 1:
        return TraceCheck(
            name,
            value,
            stage,
            c.trace_peak_bytes,
            c.ledger_tensor_bytes,
            line=UnitText(
                head, "; the trace is one replica on one device, the per-GPU split is the ledger's"
            ),
        )
    peak = est.stage_peak_bytes[stage] + diff
    v = judge(peak, stage, report.capacity, report.margin, est.unknown_items)
    return TraceCheck(
        name,
        value,
        stage,
        c.trace_peak_bytes,
        c.ledger_tensor_bytes,
        peak,
        v.status,
        UnitText(head, "; with the ledger's overheads: ", v.reason),
    )
