"""Everything the item builders share: the spec, the architecture, the layout, derived facts."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from vramtui.ledger.formats import DTYPE_FORMATS, FLOAT_BYTES, QuantParams
from vramtui.ledger.items import INFERENCE_STAGES, TRAINING_STAGES, GpuLayout
from vramtui.ledger.placement import layer_fractions
from vramtui.models.architecture import Architecture


@dataclass(frozen=True)
class LedgerContext:
    spec: object  # vramtui.spec.Spec (kept untyped to avoid an import cycle)
    arch: Architecture | None
    checkpoint: object | None  # vramtui.models.checkpoint.CheckpointInfo
    layout: GpuLayout

    @property
    def is_training(self) -> bool:
        return self.spec.task.kind != "inference"

    @cached_property
    def framework(self):
        """The training framework settings (vramtui.training_profiles); None for inference."""
        from vramtui.training_profiles import framework_settings

        return framework_settings(self.spec)

    @property
    def stages(self) -> tuple[str, ...]:
        return TRAINING_STAGES if self.is_training else INFERENCE_STAGES

    @property
    def quant(self) -> QuantParams:
        w = self.spec.weights
        return QuantParams(w.double_quant, w.bits, w.group_size, w.gguf_type)

    @property
    def compute_dtype(self) -> str:
        """Dtype of modules a quantised format does not convert, and of activations."""
        fmt = self.spec.weights.format
        if fmt in DTYPE_FORMATS:
            return fmt
        if self.arch is not None and self.arch.default_dtype in ("bf16", "fp16"):
            return self.arch.default_dtype
        return "bf16"

    @property
    def act_bytes(self) -> int:
        """Bytes per activation value (fp32 training keeps fp32 activations)."""
        return FLOAT_BYTES[self.compute_dtype]

    @property
    def tp(self) -> int:
        return self.layout.tensor_parallel

    @property
    def pp(self) -> int:
        return self.layout.pipeline_parallel

    @property
    def sharding(self) -> str:
        return self.spec.placement.data_parallel_sharding

    def zero_shards(self, what: str) -> bool:
        """Does the data-parallel sharding divide `what` (optimizer | gradients | params)?"""
        level = {"none": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}[self.sharding]
        need = {"optimizer": 1, "gradients": 2, "params": 3}[what]
        return self.layout.data_parallel > 1 and level >= need

    def layer_stage_fractions(self) -> tuple[Fraction, ...]:
        n = self.arch.num_layers if self.arch else self.pp
        return layer_fractions([1] * n, self.pp)
