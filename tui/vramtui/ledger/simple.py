"""The seed's simple mode: parameters x bits, plus a stated reserve, and the format table."""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.units import gib_to_bytes

FORMAT_TABLE_BITS = (32, 16, 8, 4)


@dataclass(frozen=True)
class SimpleRow:
    bits: int
    weights_only_bytes: int
    reserve_bytes: int
    note: str = ""

    @property
    def rough_total_bytes(self) -> int:
        return self.weights_only_bytes + self.reserve_bytes


@dataclass(frozen=True)
class SimpleEstimate:
    params: int
    bits: float
    reserve_gib: float
    weights_only_bytes: int
    reserve_bytes: int
    table: tuple[SimpleRow, ...]

    @property
    def rough_total_bytes(self) -> int:
        return self.weights_only_bytes + self.reserve_bytes


def weights_only_bytes(params: int, bits: float) -> int:
    """Dense volume: parameters x bits / 8 (no metadata, no modules in another format)."""
    return round(params * bits / 8)


def simple_estimate(params: int, bits: float, reserve_gib: float) -> SimpleEstimate:
    reserve = gib_to_bytes(reserve_gib)
    rows = []
    for b in FORMAT_TABLE_BITS:
        note = ""
        if b == 4:
            note = (
                "4-bit formats add metadata (scales/absmax, ~0.016 B/param for NF4 with double "
                "quantisation) and keep embeddings, norms and lm_head in 16-bit: not a peak"
            )
        elif b == 8:
            note = "int8/fp8 add per-row scales and keep non-linear modules in 16-bit"
        rows.append(SimpleRow(b, weights_only_bytes(params, b), reserve, note))
    return SimpleEstimate(
        params=params,
        bits=bits,
        reserve_gib=reserve_gib,
        weights_only_bytes=weights_only_bytes(params, bits),
        reserve_bytes=reserve,
        table=tuple(rows),
    )
