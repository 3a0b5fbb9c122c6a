"""How far the real allocatable total of a card can be from the catalogue figure the shortlist
compares against, so that an unverified figure blocks "fit" only when its uncertainty could
change the answer.

The bound, from the catalogue's own figures:

* CUDA below NVML. Of the cards whose NVML total and CUDA total are both verified, the CUDA
  total (what PyTorch reports as total capacity) is 0.01 % (V100 16 GB: 16160 MiB vs 15.78 GiB)
  to 2.93 % (Tesla T4: 15360 MiB vs 14.56 GiB) below the NVML total. Rounded up: 3 %. The two
  NVML totals quoted for the A100 80 GB SXM4 (81252 MiB, 81920 MiB on recent drivers) are
  0.8 % apart, inside it.
* ECC. On GDDR cards ECC can be switched, and switching it moves the total by about 1/16
  (6.25 %; the RTX A6000 reports 49140 MiB with ECC off, 46068 MiB with it on). HBM cards run
  with ECC always on, so their figures do not move with it.

So an unverified figure is taken as 3 % uncertain either way on an HBM card and 3 % + 1/16 =
9.25 % on any other; a verified CUDA total is exact; a verified NVML total is an upper bound
with the CUDA total up to 3 % below it; a nominal size alone has no bound ("GB" on a datasheet
may mean GB or GiB, 7.4 % apart). A test recomputes the verified gaps from the catalogue and
keeps CUDA_GAP_BOUND above all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.catalog import Gpu

# The largest verified NVML-to-CUDA gap of the catalogue (Tesla T4, 2.93 %), rounded up.
CUDA_GAP_BOUND = 0.03
# What switching ECC moves on a GDDR card (the catalogue's notes: "about 1/16").
ECC_SHARE = 1 / 16

BOUND_SOURCE = (
    "vramtui's bound from the catalogue's verified figures: the CUDA total is 0.01 % (V100 "
    "16 GB) to 2.93 % (Tesla T4) below the NVML total, rounded up to 3 %; switching ECC moves "
    "a GDDR card's total by 1/16 (RTX A6000: 49140 vs 46068 MiB)"
)


@dataclass(frozen=True)
class UsableBounds:
    """The range the card's real allocatable total lies in, and why."""

    low: int
    high: int
    basis: str  # one line: which rule gave the range

    @property
    def exact(self) -> bool:
        return self.low == self.high


def figure_uncertainty(gpu: Gpu) -> float:
    """How far an unverified figure of this card may be off, either way."""
    if gpu.memory_type.upper().startswith("HBM"):
        return CUDA_GAP_BOUND
    return CUDA_GAP_BOUND + ECC_SHARE


def usable_bounds(gpu: Gpu) -> UsableBounds | None:
    """The range of the card's allocatable total around `gpu.usable()`; None when the
    catalogue gives only a nominal size (no defensible bound)."""
    fig = gpu.usable()
    n, gap, u = fig.bytes, CUDA_GAP_BOUND, figure_uncertainty(gpu)
    why = "HBM, ECC always on" if u == gap else "GDDR, ECC may be switched"
    if fig.quantity == "cuda_total":
        if fig.verified:
            return UsableBounds(n, n, "verified CUDA total")
        return UsableBounds(
            int(n * (1 - u)),
            int(n * (1 + u)),
            f"unverified CUDA total, taken as {u:.2%} uncertain either way ({why})",
        )
    if fig.quantity == "nvml_total":
        if fig.verified:
            return UsableBounds(
                int(n * (1 - gap)), n, f"verified NVML total, the CUDA total up to {gap:.0%} below"
            )
        return UsableBounds(
            int(n * (1 - u) * (1 - gap)),
            int(n * (1 + u)),
            f"unverified NVML total, taken as {u:.2%} uncertain either way ({why}), the CUDA "
            f"total up to {gap:.0%} below",
        )
    return None
