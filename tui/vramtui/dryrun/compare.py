"""The trace beside the analytic ledger: per stage and per category, with the differences.

Like is compared with like: the trace runs one replica of the whole model on one device, so it
is compared with the ledger's logical item bytes (`LedgerItem.stage_bytes`, the whole model
before the placement divides it), summed over the items that are tensors. Items that are not
tensors of one replica - the CUDA context, NCCL buffers, allocator fragmentation, a manual
reserve, the load-time conversion copy, ZeRO-3's gathered layers, export - are left out of the
comparison and listed apart (`not_in_trace`).
"""

from __future__ import annotations

from dataclasses import dataclass

# Comparison groups: (ledger categories, trace categories).
GROUPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "parameters": (("weights", "quant_metadata", "adapter"), ("parameters", "adapter", "buffers")),
    "gradients": (("gradients",), ("gradients",)),
    "optimizer": (("master_weights", "optimizer"), ("master_weights", "optimizer_states")),
    "kv_cache": (("kv_cache",), ("kv_cache",)),
    "activations": (("activations", "buffers"), ("activations", "attention_mask", "inputs")),
    "logits": (("logits",), ("logits",)),
    "temporaries": (("transient",), ("temporaries", "other")),
}
GROUP_LABELS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer": "optimiser states + master weights",
    "kv_cache": "KV cache",
    "activations": "activations",
    "logits": "logits",
    "temporaries": "temporaries",
}
# Ledger items that are not tensors of one replica during a traced stage.
NOT_TRACED_KEYS = ("transient.load", "transient.zero3_gather", "transient.export")
NOT_TRACED_CATEGORIES = ("overhead", "reserve")
# Beyond this the two disagree enough to find out which is wrong.
DISAGREEMENT_PCT = 10.0


@dataclass(frozen=True)
class CategoryComparison:
    group: str
    trace_peak_bytes: int  # in the trace, live at the stage's peak
    trace_end_bytes: int  # in the trace, live at the end of the stage
    ledger_bytes: int  # the ledger's items of this group at the stage (whole model)
    ledger_keys: tuple[str, ...]

    @property
    def difference_bytes(self) -> int:
        return self.trace_peak_bytes - self.ledger_bytes

    @property
    def difference_pct(self) -> float | None:
        return _pct(self.trace_peak_bytes, self.ledger_bytes)


@dataclass(frozen=True)
class StageComparison:
    stage: str
    trace_peak_bytes: int
    trace_peak_rounded_bytes: int
    ledger_tensor_bytes: int  # sum of the ledger's tensor items at the stage, whole model
    ledger_per_gpu_peak_bytes: int | None  # the ledger's most loaded GPU, overheads included
    categories: tuple[CategoryComparison, ...]

    @property
    def difference_bytes(self) -> int:
        return self.trace_peak_bytes - self.ledger_tensor_bytes

    @property
    def difference_pct(self) -> float | None:
        return _pct(self.trace_peak_bytes, self.ledger_tensor_bytes)

    @property
    def disagrees(self) -> bool:
        pct = self.difference_pct
        return pct is not None and abs(pct) > DISAGREEMENT_PCT


def _pct(trace: int, ledger: int) -> float | None:
    if ledger == 0:
        return None if trace == 0 else float("inf")
    return 100.0 * (trace - ledger) / ledger


def is_traced_item(item) -> bool:
    return (
        not item.is_unknown
        and item.category not in NOT_TRACED_CATEGORIES
        and item.key not in NOT_TRACED_KEYS
    )


def not_in_trace(estimate) -> list:
    """The ledger's items that a trace of tensors cannot see (overheads, placement items)."""
    return [i for i in estimate.items if not is_traced_item(i) and not i.key.startswith("dryrun.")]


def compare(result, estimate) -> tuple[StageComparison, ...]:
    out = []
    items = [i for i in estimate.items if is_traced_item(i)]
    for s in result.stages:
        if s.stage not in estimate.stages:
            continue
        cats = []
        for group, (ledger_cats, trace_cats) in GROUPS.items():
            chosen = [i for i in items if i.category in ledger_cats and s.stage in i.stages]
            cats.append(
                CategoryComparison(
                    group=group,
                    trace_peak_bytes=sum(s.peak_categories_bytes.get(c, 0) for c in trace_cats),
                    trace_end_bytes=sum(s.end_categories_bytes.get(c, 0) for c in trace_cats),
                    ledger_bytes=sum(i.bytes_at(s.stage) for i in chosen),
                    ledger_keys=tuple(i.key for i in chosen if i.bytes_at(s.stage)),
                )
            )
        out.append(
            StageComparison(
                stage=s.stage,
                trace_peak_bytes=s.peak_bytes,
                trace_peak_rounded_bytes=s.peak_rounded_bytes,
                ledger_tensor_bytes=sum(c.ledger_bytes for c in cats),
                ledger_per_gpu_peak_bytes=estimate.stage_peak_bytes.get(s.stage),
                categories=tuple(cats),
            )
        )
    return tuple(out)


def comparison_to_dict(comparisons) -> list[dict]:
    return [
        {
            "stage": c.stage,
            "trace_peak_bytes": c.trace_peak_bytes,
            "trace_peak_rounded_bytes": c.trace_peak_rounded_bytes,
            "ledger_tensor_bytes": c.ledger_tensor_bytes,
            "difference_bytes": c.difference_bytes,
            "difference_pct": _round(c.difference_pct),
            "ledger_per_gpu_peak_bytes": c.ledger_per_gpu_peak_bytes,
            "categories": [
                {
                    "group": k.group,
                    "trace_peak_bytes": k.trace_peak_bytes,
                    "trace_end_bytes": k.trace_end_bytes,
                    "ledger_bytes": k.ledger_bytes,
                    "difference_bytes": k.difference_bytes,
                    "difference_pct": _round(k.difference_pct),
                    "ledger_keys": list(k.ledger_keys),
                }
                for k in c.categories
            ],
        }
        for c in comparisons
    ]


def _round(x: float | None) -> float | str | None:
    if x is None:
        return None
    if x in (float("inf"), float("-inf")):
        return "inf"
    return round(x, 2)


# The ledger's categories that hold the weights (one copy of the whole model).
WEIGHT_CATEGORIES = ("weights", "quant_metadata")


@dataclass(frozen=True)
class WeightsCheck:
    """The weights as built by the dry run (parameter bytes, stored formats honoured) beside
    the ledger's weights and quantisation metadata, whole model."""

    trace_bytes: int
    ledger_bytes: int
    reason: str  # why they differ, when the dry run knows; "" otherwise

    @property
    def difference_pct(self) -> float | None:
        return _pct(self.trace_bytes, self.ledger_bytes)

    @property
    def disagrees(self) -> bool:
        pct = self.difference_pct
        return pct is not None and abs(pct) > DISAGREEMENT_PCT

    def line(self) -> str:
        from vramtui.units import format_bytes_readable

        pct = self.difference_pct
        how = "inf" if pct in (None, float("inf")) else f"{pct:+.1f}%"
        why = self.reason or (
            "no known cause: one of the two is wrong, please report it with the spec"
        )
        return (
            f"dry run and ledger disagree on the weights by {how} (more than "
            f"{DISAGREEMENT_PCT:g}%): dry run {format_bytes_readable(self.trace_bytes)} "
            f"({self.trace_bytes:,} B), ledger {format_bytes_readable(self.ledger_bytes)} "
            f"({self.ledger_bytes:,} B); why: {why}"
        )

    def to_dict(self) -> dict:
        return {
            "trace_bytes": self.trace_bytes,
            "ledger_bytes": self.ledger_bytes,
            "difference_pct": _round(self.difference_pct),
            "disagrees": self.disagrees,
            "threshold_pct": DISAGREEMENT_PCT,
            "reason": self.reason or None,
        }


def ledger_weights_bytes(estimate) -> int:
    return sum(
        i.max_bytes for i in estimate.items if i.category in WEIGHT_CATEGORIES and not i.is_unknown
    )


def weights_check(result, estimate) -> WeightsCheck | None:
    """The weights of the dry run's build beside the ledger's; None when either is missing."""
    if result.weights_bytes is None:
        return None
    ledger = ledger_weights_bytes(estimate)
    if ledger == 0:
        return None
    return WeightsCheck(result.weights_bytes, ledger, result.weights_gap)
