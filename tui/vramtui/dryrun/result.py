"""What a dry run traced: per stage, the peak of live tensor bytes and its categories.

A trace on the meta device is a traced estimate (status "traced_estimate"), not a measurement:
it is shown beside the ledger and never replaces an item or counts as verification."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vramtui.ledger.items import TRACED_ESTIMATE, LedgerItem

COUNTER = "dry-run live tensor bytes"
ROUNDED_COUNTER = "dry-run live tensor bytes, each storage rounded up to 512-byte blocks"
SCOPE = (
    "tensor bytes only, an estimate traced with the real model code on the meta device (not "
    "measured on a GPU): the CUDA context, library workspaces and allocator fragmentation are "
    "not in it"
)

# Trace categories, what a user reads, and the ledger category each one stands beside.
CATEGORY_LABELS = {
    "parameters": ("parameters (weights, packed quantised data)", "weights"),
    "adapter": ("LoRA adapter parameters", "adapter"),
    "buffers": ("buffers (rotary tables and the like)", "buffers"),
    "gradients": ("gradients", "gradients"),
    "master_weights": ("fp32 master weights", "master_weights"),
    "optimizer_states": ("optimiser states", "optimizer"),
    "kv_cache": ("KV cache", "kv_cache"),
    "activations": ("activations", "activations"),
    "attention_mask": ("attention mask", "buffers"),
    "logits": ("logits, their fp32 copies and loss buffers", "logits"),
    "temporaries": ("temporaries (freed inside the stage)", "transient"),
    "inputs": ("input ids and labels", "activations"),
    "other": ("other", "transient"),
}


@dataclass(frozen=True)
class StageResult:
    stage: str
    description: str
    peak_bytes: int  # live tensor bytes at the stage's peak
    peak_rounded_bytes: int  # the same, each storage rounded up to 512-byte blocks
    start_bytes: int
    end_bytes: int
    peak_categories_bytes: Mapping[str, int]  # bytes by category at the peak
    end_categories_bytes: Mapping[str, int]  # bytes by category at the end of the stage
    peak_op: str  # the op whose allocation reached the peak
    allocations: int  # storages created during the stage

    @property
    def rounding_bytes(self) -> int:
        return self.peak_rounded_bytes - self.peak_bytes


@dataclass(frozen=True)
class DryRunResult:
    model_label: str
    config_source: str
    task_kind: str
    compute_dtype: str  # bf16 | fp16 | fp32
    attention_kernel: str  # the spec's runtime.attention
    attention_used: str  # what the trace ran for it, in words
    attn_implementation: str  # the transformers attn_implementation name used
    stages: tuple[StageResult, ...]
    baseline_bytes: int  # parameters + buffers (+ adapters) before the first stage
    param_count: int  # elements of the built model's parameters (stand-ins: packed bytes)
    trainable_params: int
    build_seconds: float
    trace_seconds: float
    device: str = "meta"
    versions: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # parameter bytes of the built model (no adapters, no buffers): the weights as stored
    weights_bytes: int | None = None
    # why the built weights cannot match the ledger's (a stored format the ledger does not
    # model, ...), "" when they should match
    weights_gap: str = ""
    counter: str = COUNTER
    status: str = TRACED_ESTIMATE
    block_bytes: int = 512
    scope: str = SCOPE

    def stage(self, name: str) -> StageResult:
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(name)

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(s.stage for s in self.stages)

    @property
    def peak_stage(self) -> StageResult:
        return max(self.stages, key=lambda s: s.peak_bytes)

    @property
    def peak_bytes(self) -> int:
        return self.peak_stage.peak_bytes

    @property
    def saved_activations_bytes(self) -> int | None:
        """Training: the activations alive at the end of the forward (saved for backward)."""
        if "forward" not in self.stage_names:
            return None
        return self.stage("forward").end_categories_bytes.get("activations", 0)

    def traced_items(self) -> tuple[LedgerItem, ...]:
        """The trace as items beside the ledger (status traced_estimate, counter COUNTER: an
        estimate from a meta-device trace, never a measurement): one per category with
        its bytes at each stage's peak (they add up to the stage peak), and the 512-byte
        rounding of the peak as its own item."""
        names = self.stage_names
        cats: list[str] = []
        for s in self.stages:
            cats += [c for c in s.peak_categories_bytes if c not in cats]
        order = list(CATEGORY_LABELS)
        cats.sort(key=lambda c: order.index(c) if c in order else len(order))
        items = []
        for c in cats:
            label, ledger_cat = CATEGORY_LABELS.get(c, (c, "transient"))
            per_stage = {s.stage: s.peak_categories_bytes.get(c, 0) for s in self.stages}
            stages = tuple(n for n in names if per_stage[n])
            items.append(
                LedgerItem(
                    key=f"dryrun.{c}",
                    name=f"Dry run: {label}",
                    category=ledger_cat,
                    status=TRACED_ESTIMATE,
                    basis=f"live at each stage's peak in the {self.device}-device trace "
                    f"({self.attention_used}); {SCOPE}",
                    stages=stages,
                    stage_bytes={n: per_stage[n] for n in stages},
                    counter=COUNTER,
                )
            )
        rounding = {s.stage: s.rounding_bytes for s in self.stages}
        items.append(
            LedgerItem(
                key="dryrun.rounding",
                name="Dry run: allocator rounding to 512-byte blocks",
                category="overhead",
                status=TRACED_ESTIMATE,
                basis="the peak of the same trace with every storage rounded up to the CUDA "
                "caching allocator's 512-byte block, minus the unrounded peak",
                stages=names,
                stage_bytes=rounding,
                counter=ROUNDED_COUNTER,
            )
        )
        return tuple(items)

    def to_dict(self) -> dict:
        return {
            "model": self.model_label,
            "config_source": self.config_source,
            "task_kind": self.task_kind,
            "device": self.device,
            "status": self.status,
            "counter": self.counter,
            "scope": self.scope,
            "compute_dtype": self.compute_dtype,
            "attention": {
                "spec": self.attention_kernel,
                "used": self.attention_used,
                "attn_implementation": self.attn_implementation,
            },
            "baseline_bytes": self.baseline_bytes,
            "weights_bytes": self.weights_bytes,
            "param_count": self.param_count,
            "trainable_params": self.trainable_params,
            "saved_activations_bytes": self.saved_activations_bytes,
            "block_bytes": self.block_bytes,
            "build_seconds": round(self.build_seconds, 3),
            "trace_seconds": round(self.trace_seconds, 3),
            "versions": dict(self.versions),
            "stages": [
                {
                    "stage": s.stage,
                    "description": s.description,
                    "peak_bytes": s.peak_bytes,
                    "peak_rounded_bytes": s.peak_rounded_bytes,
                    "rounding_bytes": s.rounding_bytes,
                    "start_bytes": s.start_bytes,
                    "end_bytes": s.end_bytes,
                    "peak_op": s.peak_op,
                    "allocations": s.allocations,
                    "peak_categories_bytes": dict(s.peak_categories_bytes),
                    "end_categories_bytes": dict(s.end_categories_bytes),
                }
                for s in self.stages
            ],
            "notes": list(self.notes),
        }
