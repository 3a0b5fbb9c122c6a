"""The shortlist as JSON (`vramtui shortlist --json`): every candidate with its requirements,
evidence, cost and placement hint."""

from __future__ import annotations


def _hint_dict(hint) -> dict | None:
    if hint is None:
        return None
    return {
        "gpus": hint.gpus,
        "tensor_parallel": hint.tensor_parallel,
        "pipeline_parallel": hint.pipeline_parallel,
        "status": hint.status,
        "usable_bytes_per_gpu": hint.usable_bytes,
        "peak_bytes_per_gpu": hint.peak_gpu_bytes,
        "text": hint.text,
    }


def shortlist_to_dict(sl) -> dict:
    out = []
    for c in sl.candidates:
        out.append(
            {
                "offer": c.offer.id,
                "provider": c.offer.provider,
                "title": c.offer.title,
                "gpu": c.gpu.id,
                "gpu_count": c.offer.gpu_count,
                "interconnect": c.offer.interconnect,
                "status": c.status,
                "rank": c.rank,
                "total_cost": c.cost.total if c.cost else None,
                "currency": c.cost.currency if c.cost else None,
                "per_hour": c.cost.per_hour if c.cost else None,
                "cost_breakdown": c.cost.describe() if c.cost else None,
                "usable_bytes_per_gpu": c.usable_bytes,
                "peak_bytes_per_gpu": c.peak_gpu_bytes,
                "effective_margin_bytes": c.effective_margin_bytes,
                "effective_margin_fraction": round(c.effective_margin_fraction, 4),
                "lead_time_hours": c.lead_time_hours,
                "idle_gpus": c.idle_gpus,
                "illustrative_sample": c.illustrative,
                "price_seen_on": c.price_seen_on.isoformat() if c.price_seen_on else None,
                "price_to_recheck": bool(c.price_recheck),
                "price_recheck_reason": c.price_recheck or None,
                "placement_hint": _hint_dict(c.placement_hint),
                "requirements": [
                    {
                        "key": r.key,
                        "name": r.name,
                        "status": r.status,
                        "detail": r.detail,
                        "condition": r.condition or None,
                        "evidence": list(r.evidence),
                    }
                    for r in c.requirements
                ],
                "preferences": [
                    {"name": p.name, "met": p.met, "detail": p.detail} for p in c.preferences
                ],
            }
        )
    return {
        "schema_version": 1,
        "units": "bytes (1 GB = 10^9 B, 1 GiB = 2^30 B)",
        "days": sl.days,
        "days_source": sl.days_source,
        "ranking_currency": sl.currency,
        "ranking": "fit candidates only, by total package cost, then effective margin at the "
        "worst stage, then documented lead time; price says nothing about speed",
        "estimate_scope": sl.estimate_scope,
        "price_max_age_days": sl.price_max_age_days,
        "catalogue_problems": list(sl.problems),
        "candidates": out,
    }
