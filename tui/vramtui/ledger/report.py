"""The estimate as plain data (the `--json` output and the sheet's source)."""

from __future__ import annotations

from vramtui.ledger.items import STAGE_LABELS, Estimate
from vramtui.ledger.simple import SimpleEstimate
from vramtui.units import GIB_BYTES

JSON_SCHEMA_VERSION = 2  # 2: per-GPU lists grouped (gpu_groups)


def estimate_to_dict(est: Estimate, spec=None) -> dict:
    layout = est.layout
    items = []
    for item in est.items:
        items.append(
            {
                "key": item.key,
                "name": item.name,
                "category": item.category,
                "status": item.status,
                "bytes": None if item.is_unknown else item.max_bytes,
                "stage_bytes": dict(item.stage_bytes) if not item.is_unknown else None,
                "per_gpu_group_max_bytes": None if item.is_unknown else _group_max(item, est),
                "stages": list(item.stages),
                "placement": item.distribution.description,
                "basis": item.basis,
                "counter": item.counter,
                **_replaced(item, layout),
            }
        )
    peaks = est.stage_peak_bytes
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "units": "bytes (1 GB = 10^9 B, 1 GiB = 2^30 B)",
        "model": est.model_label,
        "spec_name": getattr(spec, "name", "") if spec is not None else "",
        "param_count": est.param_count,
        "gpus": layout.gpus,
        "tensor_parallel": layout.tensor_parallel,
        "pipeline_parallel": layout.pipeline_parallel,
        "weights_only_bytes": est.weights_only_bytes,
        "items": items,
        "stages": list(est.stages),
        "stage_labels": {s: STAGE_LABELS[s] for s in est.stages},
        "stage_peak_bytes": peaks,
        "gpu_groups": [
            {"label": g.label, "gpus": g.gpus, "pipeline_stages": list(g.ranks)}
            for g in est.gpu_groups
        ],
        "gpu_groups_note": "GPUs holding the same bytes of every item, listed once; the "
        "per_gpu_group_* and stage_peak_group_bytes lists follow this order (bytes on one GPU)",
        "stage_peak_group_bytes": {s: list(est.stage_group_bytes(s)) for s in est.stages},
        "peak_stage": est.peak_stage,
        "peak_bytes": est.peak_bytes,
        "peak_note": "most loaded GPU at its worst stage; known items only",
        "conservative_bound_bytes": est.conservative_bound_bytes,
        "conservative_bound_note": "sum of every item's own maximum: a conservative bound, "
        "not an observed peak",
        "unknown_items": [i.name for i in est.unknown_items],
        "measured_beside_estimated": _comparisons(est, spec),
        "validation_plan": _plan(spec),
        "notes": list(est.notes),
    }


def _group_max(item, est: Estimate) -> list[int]:
    """An item's largest bytes on one GPU of each GPU group, over its stages."""
    per_stage = [item.rank_bytes_at(s, est.layout) for s in item.stages]
    return [max(ps[g.ranks[0]] for ps in per_stage) for g in est.gpu_groups]


def _replaced(item, layout) -> dict:
    """A measured item: the estimate it replaced, and measured - estimated (per GPU, max)."""
    old = item.replaced_estimate
    if old is None:
        return {}
    if old.is_unknown:
        return {"replaced_estimate_bytes": None, "difference_bytes": None}
    old_b = old.largest_gpu_bytes(layout)
    new_b = item.largest_gpu_bytes(layout)
    return {
        "replaced_estimate_bytes": old_b,
        "difference_bytes": new_b - old_b,
        "difference_fraction": (new_b - old_b) / old_b if old_b else None,
    }


def _comparisons(est: Estimate, spec) -> list[dict]:
    if spec is None:
        return []
    from vramtui.measure.compare import compare

    return [c.to_dict() for c in compare(spec, est)]


def _plan(spec) -> list[dict]:
    if spec is None:
        return []
    from vramtui.measure.plan import staged_plan

    return [step.to_dict() for step in staged_plan(spec)]


def simple_to_dict(simple: SimpleEstimate) -> dict:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "mode": "simple",
        "units": "bytes (1 GB = 10^9 B, 1 GiB = 2^30 B)",
        "params": simple.params,
        "bits": simple.bits,
        "weights_only_bytes": simple.weights_only_bytes,
        "weights_only_gib": round(simple.weights_only_bytes / GIB_BYTES, 2),
        "reserve_bytes": simple.reserve_bytes,
        "rough_range_bytes": simple.rough_total_bytes,
        "rough_range_gib": round(simple.rough_total_bytes / GIB_BYTES, 2),
        "rough_range_note": "weights + a stated reserve: an assumption to verify, not a peak",
        "format_table": [
            {
                "bits": r.bits,
                "weights_only_bytes": r.weights_only_bytes,
                "rough_range_bytes": r.rough_total_bytes,
                "note": r.note,
            }
            for r in simple.table
        ],
    }
