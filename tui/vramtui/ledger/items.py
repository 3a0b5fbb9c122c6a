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

INFERENCE_STAGES = ("load", "prefill", "decode")
TRAINING_STAGES = ("load", "forward", "backward", "optimizer_step", "validation", "export")

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
    basis: str  # the formula with its numbers, or the evidence
    stages: tuple[str, ...]  # stages where the item is live
    stage_bytes: Mapping[str, int] = field(default_factory=dict)  # logical bytes per stage
    distribution: Distribution = Distribution()
    counter: str | None = None  # for measured items: which counter
    # For measured items: the estimated item the measurement replaced (shown beside it).
    replaced_estimate: LedgerItem | None = None

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
        """Bytes this item holds on each GPU at `stage` (rounded up to whole bytes)."""
        return self.distribution_bytes(self.stage_bytes.get(stage, 0), layout)

    def largest_gpu_bytes(self, layout: GpuLayout) -> int:
        """The most any one GPU holds of this item, over its stages."""
        return max(max(self.gpu_bytes_at(s, layout)) for s in self.stages)

    def distribution_bytes(self, total: int, layout: GpuLayout) -> tuple[int, ...]:
        """`total` logical bytes spread over the GPUs as this item is placed."""
        if not total:
            return (0,) * layout.gpus
        dist = self.distribution
        out = []
        for gpu in range(layout.gpus):
            p = layout.pp_rank(gpu)
            frac = dist.stage_fractions[p] if p < len(dist.stage_fractions) else Fraction(0)
            out.append(math.ceil(total * frac * dist.tp_share * dist.dp_share))
        return tuple(out)


@dataclass(frozen=True)
class GpuLayout:
    """GPU g sits at data-parallel rank g // (pp*tp), pipeline stage (g // tp) % pp."""

    gpus: int
    tensor_parallel: int = 1
    pipeline_parallel: int = 1

    @property
    def data_parallel(self) -> int:
        return self.gpus // (self.tensor_parallel * self.pipeline_parallel)

    def pp_rank(self, gpu: int) -> int:
        return (gpu // self.tensor_parallel) % self.pipeline_parallel


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
        """Per GPU, the sum of the known items live together at `stage`."""
        return self._stage_gpu_bytes[stage]

    @cached_property
    def _stage_gpu_bytes(self) -> dict[str, tuple[int, ...]]:
        return {s: self._sum_at(s) for s in self.stages}

    def _sum_at(self, stage: str) -> tuple[int, ...]:
        totals = [0] * self.layout.gpus
        for item in self.known_items:
            if stage in item.stages:
                for g, b in enumerate(item.gpu_bytes_at(stage, self.layout)):
                    totals[g] += b
        return tuple(totals)

    @cached_property
    def stage_peak_bytes(self) -> dict[str, int]:
        """Per stage, the most loaded GPU's bytes (known items live at that stage)."""
        return {s: max(self.stage_gpu_bytes(s)) for s in self.stages}

    @cached_property
    def peak_stage(self) -> str:
        peaks = self.stage_peak_bytes
        return max(self.stages, key=lambda s: peaks[s])

    @cached_property
    def peak_bytes(self) -> int:
        """The worst stage on the most loaded GPU (known items only)."""
        return max(self.stage_peak_bytes.values())

    @cached_property
    def conservative_bound_gpu_bytes(self) -> tuple[int, ...]:
        """Per GPU, the sum of every item's own maximum: a bound, not an observed peak."""
        totals = [0] * self.layout.gpus
        for item in self.known_items:
            per_stage = [item.gpu_bytes_at(s, self.layout) for s in item.stages]
            for g in range(self.layout.gpus):
                totals[g] += max((ps[g] for ps in per_stage), default=0)
        return tuple(totals)

    @cached_property
    def conservative_bound_bytes(self) -> int:
        return max(self.conservative_bound_gpu_bytes)
