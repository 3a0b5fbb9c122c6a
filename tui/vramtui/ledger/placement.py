"""How a placement divides items over GPUs: only what TP, PP and ZeRO/FSDP really divide."""

from __future__ import annotations

from fractions import Fraction

from vramtui.ledger.items import Distribution, GpuLayout


def stage_layer_counts(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage: as even as possible, earlier stages take the remainder."""
    base, extra = divmod(num_layers, pp)
    return [base + (1 if p < extra else 0) for p in range(pp)]


def layer_fractions(per_layer: list[int] | list[float], pp: int) -> tuple[Fraction, ...]:
    """Share of a per-layer quantity held by each pipeline stage."""
    if pp == 1:
        return (Fraction(1),)
    total = sum(per_layer)
    counts = stage_layer_counts(len(per_layer), pp)
    out, start = [], 0
    for c in counts:
        part = sum(per_layer[start : start + c])
        out.append(Fraction(part) / Fraction(total) if total else Fraction(1, pp))
        start += c
    return tuple(out)


def first_stage(pp: int) -> tuple[Fraction, ...]:
    return (Fraction(1),) + (Fraction(0),) * (pp - 1)


def last_stage(pp: int) -> tuple[Fraction, ...]:
    return (Fraction(0),) * (pp - 1) + (Fraction(1),)


def describe(layout: GpuLayout, tp_sharded: bool, dp_sharded: bool, where: str = "layers") -> str:
    parts = []
    if layout.pipeline_parallel > 1:
        parts.append(
            {
                "first": "on the first pipeline stage",
                "last": "on the last pipeline stage",
            }.get(where, f"layers split over PP={layout.pipeline_parallel}")
        )
    if layout.tensor_parallel > 1:
        parts.append(
            f"sharded by TP={layout.tensor_parallel}"
            if tp_sharded
            else f"replicated on each of TP={layout.tensor_parallel}"
        )
    if layout.data_parallel > 1:
        parts.append(
            f"sharded over DP={layout.data_parallel}"
            if dp_sharded
            else f"one full copy per data-parallel replica (DP={layout.data_parallel})"
        )
    return "; ".join(parts) if parts else "whole on the GPU"


def distribution(
    layout: GpuLayout,
    *,
    stage_fractions: tuple[Fraction, ...] | None = None,
    tp_share: Fraction | None = None,
    dp_sharded: bool = False,
    where: str = "layers",
) -> Distribution:
    pp = layout.pipeline_parallel
    if stage_fractions is not None:
        fractions = stage_fractions
    elif where == "first":
        fractions = first_stage(pp)
    elif where == "last":
        fractions = last_stage(pp)
    else:
        fractions = layer_fractions([1] * max(pp, 1), pp)
    share = Fraction(1) if tp_share is None else tp_share
    dp_share = Fraction(1, layout.data_parallel) if dp_sharded else Fraction(1)
    return Distribution(
        stage_fractions=fractions,
        tp_share=share,
        dp_share=dp_share,
        description=describe(layout, share < 1, dp_sharded, where),
    )
