"""Measured beside estimated: each measurement against the part of the ledger it measures.

A counter measures a definite set of things, so each is compared with the matching slice of
the ledger, on the same GPU and at the same stage:

* `allocated` / `max_memory_allocated` (PyTorch tensors): the known tensor items live at the
  stage, without the CUDA context, NCCL buffers and allocator fragmentation, which that
  counter never sees, nor memory outside PyTorch's allocator (an item's `seen_by`: paged
  optimiser states in CUDA managed memory);
* `reserved` / `max_memory_reserved` (allocator segments): the same plus fragmentation;
* `process_in_use` / `nvml_used`: every known item live at the stage (NVML's device-wide
  figure also counts other processes: said in the scope);
* `item`: the named item(s) or category(ies), "+"-joined;
* `kv_cache_pool`: the KV cache the workload needs, against the pool an engine set aside;
* counts (KV cache tokens, blocks, maximum concurrency): the tokens the required workload
  holds at once.

The difference is measured minus estimated, in bytes and as a fraction of the estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.ledger.items import STAGE_LABELS, Estimate
from vramtui.measure.coverage import Coverage, coverage, describe_dims, required_tokens
from vramtui.unit_text import UnitText

NOT_IN_TENSOR_COUNTERS = ("overhead.cuda_context", "overhead.nccl", "overhead.fragmentation")

QUANTITY_LABELS = {
    "process_in_use": "process memory in use",
    "allocated": "allocated to tensors",
    "reserved": "reserved by the allocator",
    "max_memory_allocated": "peak allocated to tensors",
    "max_memory_reserved": "peak reserved by the allocator",
    "nvml_used": "device memory used (NVML)",
    "item": "item",
    "kv_cache_pool": "KV cache pool set aside",
    "kv_cache_tokens": "KV cache tokens",
    "gpu_blocks": "KV cache blocks",
    "max_concurrency": "maximum concurrency",
}


@dataclass(frozen=True)
class Comparison:
    measurement: object  # spec.Measurement
    subject: str  # "stage backward" | "item overhead.cuda_context" | "category weights" ...
    label: str  # what a user reads: "backward: peak allocated to tensors, GPU 0"
    estimate_bytes: int | None  # the matching slice of the ledger (None: nothing to compare)
    estimate_value: float | None  # for counts: the tokens required
    scope: str  # what the estimate covers, and what the counter does not see
    coverage: Coverage

    @property
    def measured_bytes(self) -> int | None:
        return self.measurement.bytes

    @property
    def difference_bytes(self) -> int | None:
        if self.measurement.bytes is None or self.estimate_bytes is None:
            return None
        return self.measurement.bytes - self.estimate_bytes

    @property
    def difference_fraction(self) -> float | None:
        """(measured - estimated) / estimated; None without an estimate or when it is 0."""
        if self.measurement.is_count:
            if self.estimate_value:
                return (self.measured_capacity_value - self.estimate_value) / self.estimate_value
            return None
        diff = self.difference_bytes
        if diff is None or not self.estimate_bytes:
            return None
        return diff / self.estimate_bytes

    @property
    def measured_capacity_value(self) -> float:
        """Counts as tokens where they can be: max concurrency x tokens per request."""
        m = self.measurement
        dims = dict(m.dims)
        if m.quantity == "max_concurrency" and dims.get("tokens_per_request"):
            return m.value * dims["tokens_per_request"]
        if m.quantity == "gpu_blocks" and dims.get("block_size"):
            return m.value * dims["block_size"]
        return m.value

    def to_dict(self) -> dict:
        m = self.measurement
        return {
            "subject": self.subject,
            "label": self.label,
            "stage": m.stage,
            "quantity": m.quantity,
            "counter": m.counter,
            "measured_bytes": m.bytes,
            "measured_value": m.value,
            "as_written": m.as_written,
            "estimated_bytes": self.estimate_bytes,
            "estimated_value": self.estimate_value,
            "difference_bytes": self.difference_bytes,
            "difference_fraction": self.difference_fraction,
            "scope": self.scope,
            "validates_required_workload": self.coverage.validates,
            "dimension_free": self.coverage.dimension_free,
            "coverage_note": self.coverage.note,
            "dims_executed": dict(m.dims),
            "gpu": m.gpu,
            "device": m.device,
            "versions": dict(m.versions),
            "source": m.source,
            "run": m.run,
            "error": m.error,
            "date": m.date.isoformat() if m.date else None,
        }


def compare(spec, est: Estimate) -> list[Comparison]:
    """Every measurement stored with the spec, beside the slice of `est` it measures."""
    categories = {i.key: i.category for i in est.items}
    return [_compare_one(m, spec, est, categories) for m in spec.measured]


def _gpu(m, est: Estimate) -> tuple[int, str]:
    """The pipeline stage of the GPU the figure was read on (-1: the most loaded GPU), and
    how it was chosen; every GPU of one pipeline stage holds the same bytes."""
    n = est.layout.gpus
    if m.gpu is not None and m.gpu < n:
        return est.layout.pp_rank(m.gpu), f"GPU {m.gpu}"
    if m.gpu is not None:
        return -1, f"GPU {m.gpu} (the spec has {n}: against its most loaded GPU)"
    return -1, "the most loaded GPU" if n > 1 else "the GPU"


def _item_bytes(item, stage: str, est: Estimate, g: int) -> int:
    """An item's estimated bytes on a GPU of pipeline stage g (-1: most loaded) at `stage`
    (else its maximum)."""
    item = item.replaced_estimate or item
    stages = [stage] if stage in item.stages else list(item.stages)
    best = 0
    for s in stages:
        per_rank = item.rank_bytes_at(s, est.layout)
        best = max(best, per_rank[g] if g >= 0 else max(per_rank))
    return best


def _stage_sum(est: Estimate, stage: str, g: int, keep) -> int:
    totals = [0] * est.layout.pipeline_parallel
    for item in est.known_items:
        if stage in item.stages and keep(item):
            for i, b in enumerate(item.rank_bytes_at(stage, est.layout)):
                totals[i] += b
    return totals[g] if g >= 0 else max(totals)


def _outside_allocator_said(est: Estimate, stage: str) -> str:
    """Name the items outside PyTorch's allocator that an allocator counter cannot see."""
    outside = [
        i.name
        for i in est.known_items
        if stage in i.stages and i.seen_by is not None and "max_memory_allocated" not in i.seen_by
    ]
    if not outside:
        return ""
    return "; outside PyTorch's allocator, seen by NVML only, left out: " + ", ".join(outside)


def _compare_one(m, spec, est: Estimate, categories: dict[str, str]) -> Comparison:
    cov = coverage(m, spec, categories)
    g, where = _gpu(m, est)
    stage_label = STAGE_LABELS.get(m.stage, m.stage)
    qlabel = QUANTITY_LABELS.get(m.quantity, m.quantity)
    manual = any(i.category == "reserve" for i in est.items)
    if m.is_count:
        need = required_tokens(spec) if not spec.is_training else None
        return Comparison(
            measurement=m,
            subject=f"capacity {m.quantity}",
            label=f"{qlabel} ({describe_dims(m.dims)})",
            estimate_bytes=None,
            estimate_value=float(need) if need is not None else None,
            scope="tokens the required workload holds at once (concurrency x tokens per "
            "sequence); the measured capacity in tokens"
            + (" (concurrency x tokens per request)" if m.quantity == "max_concurrency" else ""),
            coverage=cov,
        )
    if m.quantity == "kv_cache_pool":
        need = _stage_sum(est, "decode", g, lambda i: i.category == "kv_cache")
        return Comparison(
            measurement=m,
            subject="category kv_cache",
            label=f"{qlabel}, {where}",
            estimate_bytes=need if "decode" in est.stages else None,
            estimate_value=None,
            scope="the KV cache the required workload needs (estimated) against the pool the "
            "engine pre-allocated: the difference is spare capacity, not an error",
            coverage=cov,
        )
    if m.quantity == "item":
        keys = (m.item or "").split("+")
        picked = [i for i in est.items if i.key in keys or i.category in keys]
        missing = [k for k in keys if not any(i.key == k or i.category == k for i in est.items)]
        known = [i for i in picked if not (i.replaced_estimate or i).is_unknown]
        estimate_bytes = sum(_item_bytes(i, m.stage, est, g) for i in known) if known else None
        # item names keep their figures (a UnitText: "Manual reserve (6 GiB)" in any unit)
        scope = "the ledger's " + UnitText(", ").join(i.name for i in picked) if picked else ""
        if missing:
            scope += ("; " if scope else "") + (
                f"not in the ledger: {', '.join(missing)} (no estimate to compare)"
            )
        unknown = [i.name for i in picked if (i.replaced_estimate or i).is_unknown]
        if unknown:
            scope += f"; unknown in the ledger: {', '.join(unknown)}"
        subject_kind = "item" if len(keys) == 1 and keys[0] in categories else "category"
        return Comparison(
            measurement=m,
            subject=f"{subject_kind} {m.item}",
            label=f"{m.item} at {stage_label}, {where}",
            estimate_bytes=None if missing and not known else estimate_bytes,
            estimate_value=None,
            scope=scope,
            coverage=cov,
        )
    # Whole-stage counters.
    if m.stage not in est.stages:
        est_bytes, scope = None, f"the spec has no {stage_label} stage"
    elif manual:
        est_bytes, scope = None, "manual reserve: no itemised estimate to compare with"
    elif m.quantity in ("allocated", "max_memory_allocated"):
        est_bytes = _stage_sum(
            est,
            m.stage,
            g,
            lambda i: (
                i.category not in ("overhead", "reserve")
                and i.key not in NOT_IN_TENSOR_COUNTERS
                and i.seen_by_counter(m.quantity)
            ),
        )
        scope = (
            f"known tensor items live at {stage_label} on {where}; the CUDA context, NCCL "
            "and fragmentation are not in this counter and are left out"
        ) + _outside_allocator_said(est, m.stage)
    elif m.quantity in ("reserved", "max_memory_reserved"):
        est_bytes = _stage_sum(
            est,
            m.stage,
            g,
            lambda i: (
                i.category != "reserve"
                and i.key not in ("overhead.cuda_context", "overhead.nccl")
                and i.seen_by_counter(m.quantity)
            ),
        )
        scope = (
            f"known tensor items plus fragmentation at {stage_label} on {where}; the CUDA "
            "context and NCCL are outside the allocator and left out"
        ) + _outside_allocator_said(est, m.stage)
    else:  # process_in_use, nvml_used
        est_bytes = _stage_sum(est, m.stage, g, lambda i: True)
        scope = f"every known item live at {stage_label} on {where}"
        if m.quantity == "nvml_used":
            scope += "; NVML's device figure also counts other processes on the GPU"
    gpu_text = f", GPU {m.gpu}" if m.gpu is not None else ""
    return Comparison(
        measurement=m,
        subject=f"stage {m.stage}",
        label=f"{stage_label}: {qlabel}{gpu_text}",
        estimate_bytes=est_bytes,
        estimate_value=None,
        scope=scope,
        coverage=cov,
    )
