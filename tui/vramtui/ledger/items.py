"""What an estimate is made of: items, their status, the stages where they live, per GPU."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

ESTIMATED = "estimated"
MEASURED = "measured"
UNKNOWN = "unknown"
STATUSES = (ESTIMATED, MEASURED, UNKNOWN)
# A figure from a trace of the real model code on the meta device (the dry run): a close
# estimate, not a counter read from a real run. Never a ledger status: a traced estimate is
# shown beside the ledger, it never replaces an item nor counts as a measurement.
TRACED_ESTIMATE = "traced_estimate"

INFERENCE_STAGES = ("load", "prefill", "decode")
TRAINING_STAGES = ("load", "forward", "backward", "optimizer_step", "validation", "export")

# The counters a measurement reads (spec.MEASURED_QUANTITIES for bytes): PyTorch's allocator
# counters see its tensors; the device counters see every byte the process holds on the GPU.
TENSOR_COUNTERS = ("allocated", "max_memory_allocated", "reserved", "max_memory_reserved")
DEVICE_COUNTERS = ("process_in_use", "nvml_used")

STAGE_LABELS = {
    "load": "load",
    "prefill": "prefill",
    "decode": "decode",
    "forward": "forward",
    "backward": "backward",
    "optimizer_step": "first optimiser step",
    "validation": "validation",
    "export": "export",
}

# Item categories, in display order.
CATEGORIES = (
    "weights",
    "quant_metadata",
    "adapter",
    "master_weights",
    "gradients",
    "optimizer",
    "kv_cache",
    "activations",
    "logits",
    "buffers",
    "transient",
    "overhead",
    "reserve",
)


@dataclass(frozen=True)
class Distribution:
    """How one item's bytes land on the GPUs of a placement.

    `stage_fractions[p]` is the share of the item held by pipeline stage p (they sum to 1 for
    layer-wise items; (1, 0, ...) for the embedding). Inside a pipeline stage each
    tensor-parallel rank holds `tp_share` of it (1 = replicated on every TP rank) and each
    data-parallel rank `dp_share` (1 = replicated, 1/dp under ZeRO/FSDP sharding).
    """

    stage_fractions: tuple[Fraction, ...] = (Fraction(1),)
    tp_share: Fraction = Fraction(1)
    dp_share: Fraction = Fraction(1)
    description: str = "whole on each GPU"


@dataclass(frozen=True)
class LedgerItem:
    key: str  # stable identifier, e.g. "weights.attention"
    name: str  # what a user reads, e.g. "Weights: attention (nf4)"
    category: str  # one of CATEGORIES
    status: str  # estimated | measured | unknown
    basis: str  # the formula with its numbers, or the evidence (a UnitText: figures in any unit)
    stages: tuple[str, ...]  # stages where the item is live
    stage_bytes: Mapping[str, int] = field(default_factory=dict)  # logical bytes per stage
    distribution: Distribution = Distribution()
    counter: str | None = None  # for measured items: which counter
    # For measured items: the estimated item the measurement replaced (shown beside it).
    replaced_estimate: LedgerItem | None = None
    # The counters that see this item; None: the rule by category and key
    # (vramtui.measure.compare). Memory outside PyTorch's allocator (bitsandbytes' paged
    # optimiser states in CUDA managed memory) is seen by DEVICE_COUNTERS only.
    seen_by: tuple[str, ...] | None = None

    def seen_by_counter(self, quantity: str) -> bool:
        """False when the item says it is invisible to that counter."""
        return self.seen_by is None or quantity in self.seen_by

    @property
    def is_unknown(self) -> bool:
        return self.status == UNKNOWN

    @property
    def max_bytes(self) -> int:
        """The item's largest logical size over its stages (0 for unknown items)."""
        return max(self.stage_bytes.values(), default=0)

    def bytes_at(self, stage: str) -> int:
        return self.stage_bytes.get(stage, 0)

    def gpu_bytes_at(self, stage: str, layout: GpuLayout) -> tuple[int, ...]:
        """Bytes this item holds on each GPU at `stage` (rounded up to whole bytes).

        One entry per GPU: linear in the GPU count. Prefer `rank_bytes_at`, which gives one
        entry per pipeline stage (every GPU of a stage holds the same).
        """
        return layout.expand(self.rank_bytes_at(stage, layout))

    def rank_bytes_at(self, stage: str, layout: GpuLayout) -> tuple[int, ...]:
        """Bytes this item holds on one GPU of each pipeline stage at `stage`."""
        return self.rank_distribution_bytes(self.stage_bytes.get(stage, 0), layout)

    def largest_gpu_bytes(self, layout: GpuLayout) -> int:
        """The most any one GPU holds of this item, over its stages."""
        return max(max(self.rank_bytes_at(s, layout)) for s in self.stages)

    def distribution_bytes(self, total: int, layout: GpuLayout) -> tuple[int, ...]:
        """`total` logical bytes spread over the GPUs as this item is placed (one per GPU)."""
        return layout.expand(self.rank_distribution_bytes(total, layout))

    def rank_distribution_bytes(self, total: int, layout: GpuLayout) -> tuple[int, ...]:
        """`total` logical bytes on one GPU of each pipeline stage, as this item is placed."""
        pp = layout.pipeline_parallel
        if not total:
            return (0,) * pp
        dist = self.distribution
        share = dist.tp_share * dist.dp_share
        fracs = dist.stage_fractions
        return tuple(
            math.ceil(total * fracs[p] * share) if p < len(fracs) else 0 for p in range(pp)
        )


@dataclass(frozen=True)
class GpuGroup:
    """GPUs that hold exactly the same bytes of every item: shown once, with a count."""

    ranks: tuple[int, ...]  # the pipeline stages whose GPUs are in the group
    gpus: int  # how many GPUs
    label: str  # "GPU 0", "GPUs 0-3, 8-11", "64 GPUs of pipeline stages 0-3"


@dataclass(frozen=True)
class GpuLayout:
    """GPU g sits at data-parallel rank g // (pp*tp), pipeline stage (g // tp) % pp.

    Every GPU of one pipeline stage holds the same bytes of every item, so per-GPU figures are
    kept per pipeline stage ("rank") and expanded to single GPUs only on request.
    """

    gpus: int
    tensor_parallel: int = 1
    pipeline_parallel: int = 1

    @property
    def data_parallel(self) -> int:
        return self.gpus // (self.tensor_parallel * self.pipeline_parallel)

    def pp_rank(self, gpu: int) -> int:
        return (gpu // self.tensor_parallel) % self.pipeline_parallel

    def expand(self, per_rank: tuple[int, ...]) -> tuple[int, ...]:
        """Per-pipeline-stage figures as one figure per GPU (linear in the GPU count)."""
        if self.pipeline_parallel == 1:
            return (per_rank[0],) * self.gpus
        return tuple(per_rank[self.pp_rank(g)] for g in range(self.gpus))

    def gpus_at_rank(self, rank: int) -> int:
        """How many GPUs sit at pipeline stage `rank` (closed form)."""
        tp, pp = self.tensor_parallel, self.pipeline_parallel
        blocks, rest = divmod(self.gpus, tp)  # tp-sized blocks; block b is at stage b % pp
        full = blocks // pp + (1 if rank < blocks % pp else 0)
        return tp * full + (rest if rest and blocks % pp == rank else 0)

    def group(self, ranks: tuple[int, ...]) -> GpuGroup:
        count = sum(self.gpus_at_rank(r) for r in ranks)
        return GpuGroup(ranks, count, self._label(ranks, count))

    def _label(self, ranks: tuple[int, ...], count: int) -> str:
        tp, pp = self.tensor_parallel, self.pipeline_parallel
        if count == self.gpus:
            return "GPU 0" if count == 1 else f"all {count:,} GPUs"
        if self.gpus <= tp * pp:  # one replica: each stage is a contiguous run of GPUs
            spans = _spans(ranks)
            if len(spans) <= 4:
                ids = [(a * tp, min(self.gpus, (b + 1) * tp) - 1) for a, b in spans]
                text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ids)
                return f"GPU {text}" if count == 1 else f"GPUs {text}"
        stages = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in _spans(ranks)[:4])
        if len(_spans(ranks)) > 4:
            stages += ", ..."
        plural = "s" if len(ranks) > 1 else ""
        return f"{count:,} GPUs of pipeline stage{plural} {stages}"


def _spans(ranks: tuple[int, ...]) -> list[tuple[int, int]]:
    """Sorted ranks as (first, last) runs of consecutive numbers."""
    spans: list[tuple[int, int]] = []
    for r in sorted(ranks):
        if spans and spans[-1][1] == r - 1:
            spans[-1] = (spans[-1][0], r)
        else:
            spans.append((r, r))
    return spans


@dataclass(frozen=True)
class Estimate:
    """The ledger for one spec: items, and the totals that can honestly be drawn from them."""

    items: tuple[LedgerItem, ...]
    stages: tuple[str, ...]
    layout: GpuLayout
    model_label: str
    param_count: int | None
    notes: tuple[str, ...] = ()
    measurements: tuple = ()  # spec Measurements of whole stages: shown beside, never summed

    def measured_at(self, stage: str) -> list:
        return [m for m in self.measurements if m.stage == stage]

    def items_in(self, category: str) -> list[LedgerItem]:
        return [i for i in self.items if i.category == category]

    @property
    def known_items(self) -> list[LedgerItem]:
        return [i for i in self.items if not i.is_unknown]

    @property
    def unknown_items(self) -> list[LedgerItem]:
        return [i for i in self.items if i.is_unknown]

    @cached_property
    def weights_only_bytes(self) -> int:
        """Weights and their quantisation metadata, one copy of the whole model."""
        return sum(i.max_bytes for i in self.items if i.category in ("weights", "quant_metadata"))

    def stage_gpu_bytes(self, stage: str) -> tuple[int, ...]:
        """Per GPU, the sum of the known items live together at `stage` (one entry per GPU)."""
        return self.layout.expand(self.stage_rank_bytes(stage))

    def stage_rank_bytes(self, stage: str) -> tuple[int, ...]:
        """Per pipeline stage, one GPU's sum of the known items live together at `stage`."""
        return self._stage_rank_bytes[stage]

    def stage_group_bytes(self, stage: str) -> tuple[int, ...]:
        """Per GPU group (`gpu_groups`), one GPU's known bytes live at `stage`."""
        per_rank = self.stage_rank_bytes(stage)
        return tuple(per_rank[g.ranks[0]] for g in self.gpu_groups)

    @cached_property
    def _stage_rank_bytes(self) -> dict[str, tuple[int, ...]]:
        return {s: self._sum_at(s) for s in self.stages}

    def _sum_at(self, stage: str) -> tuple[int, ...]:
        totals = [0] * self.layout.pipeline_parallel
        for item in self.known_items:
            if stage in item.stages:
                for p, b in enumerate(item.rank_bytes_at(stage, self.layout)):
                    totals[p] += b
        return tuple(totals)

    @cached_property
    def gpu_groups(self) -> tuple[GpuGroup, ...]:
        """GPUs with identical bytes of every item at every stage, first GPU's order."""
        pp = self.layout.pipeline_parallel
        per_item = [
            [item.rank_bytes_at(s, self.layout) for s in item.stages] for item in self.known_items
        ]
        keys: dict[tuple, list[int]] = {}
        for p in range(pp):
            key = tuple(tuple(rb[p] for rb in stages) for stages in per_item)
            keys.setdefault(key, []).append(p)
        return tuple(self.layout.group(tuple(ranks)) for ranks in keys.values())

    @cached_property
    def stage_peak_bytes(self) -> dict[str, int]:
        """Per stage, the most loaded GPU's bytes (known items live at that stage)."""
        return {s: max(self.stage_rank_bytes(s)) for s in self.stages}

    @cached_property
    def peak_stage(self) -> str:
        peaks = self.stage_peak_bytes
        return max(self.stages, key=lambda s: peaks[s])

    @cached_property
    def peak_bytes(self) -> int:
        """The worst stage on the most loaded GPU (known items only)."""
        return max(self.stage_peak_bytes.values())

    @cached_property
    def conservative_bound_rank_bytes(self) -> tuple[int, ...]:
        """Per pipeline stage, one GPU's sum of every item's own maximum: a bound, not a peak."""
        totals = [0] * self.layout.pipeline_parallel
        for item in self.known_items:
            per_stage = [item.rank_bytes_at(s, self.layout) for s in item.stages]
            for p in range(self.layout.pipeline_parallel):
                totals[p] += max((ps[p] for ps in per_stage), default=0)
        return tuple(totals)

    @property
    def conservative_bound_gpu_bytes(self) -> tuple[int, ...]:
        """Per GPU, the sum of every item's own maximum (one entry per GPU)."""
        return self.layout.expand(self.conservative_bound_rank_bytes)

    @cached_property
    def conservative_bound_bytes(self) -> int:
        return max(self.conservative_bound_rank_bytes)
