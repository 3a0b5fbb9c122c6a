"""Bytes of a weight tensor in each storage format, data and quantisation metadata apart.

Sources (see also the project's memory-model reference):
- bitsandbytes NF4/FP4: 4-bit data (n/2 B) and one absmax per 64-value block, fp32 (4 B), or
  with double quantisation 1 B per block plus one fp32 per 256 blocks.
- LLM.int8: int8 data (n B) and one fp32 scale per output row.
- FP8 (e4m3): 1 B per value and one fp32 scale per output row (per-channel scaling).
- GPTQ/AWQ: packed int32 qweight (n*bits/8 B), fp16 scales and packed zeros per group and
  output column; GPTQ also an int32 g_idx per input column.
- GGUF: fixed-size blocks that include their scales (bytes per block / values per block).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FLOAT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
DTYPE_FORMATS = ("fp32", "bf16", "fp16")
BNB4_FORMATS = ("nf4", "fp4")
LINEAR_ONLY_FORMATS = ("fp8", "int8", "nf4", "fp4", "gptq", "awq")

# GGUF (ggml) tensor types: (values per block, bytes per block), as ggml's type traits define
# them (ggml/src/ggml.c `type_traits`; the `gguf` package's GGML_QUANT_SIZES holds the same, and
# a test checks every entry against it). A block includes its own scales.
GGUF_BLOCKS = {
    "F32": (1, 4),
    "F16": (1, 2),
    "BF16": (1, 2),
    "Q8_0": (32, 34),
    "Q8_1": (32, 40),
    "Q6_K": (256, 210),
    "Q5_K": (256, 176),
    "Q5_0": (32, 22),
    "Q5_1": (32, 24),
    "Q4_K": (256, 144),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    "Q3_K": (256, 110),
    "Q2_K": (256, 84),
    "Q8_K": (256, 292),
    "IQ4_NL": (32, 18),
    "IQ4_XS": (256, 136),
    "IQ3_S": (256, 110),
    "IQ3_XXS": (256, 98),
    "IQ2_S": (256, 82),
    "IQ2_XS": (256, 74),
    "IQ2_XXS": (256, 66),
    "IQ1_M": (256, 56),
    "IQ1_S": (256, 50),
    "TQ1_0": (256, 54),
    "TQ2_0": (256, 66),
    "MXFP4": (32, 17),
}

BNB_BLOCK = 64
BNB_NESTED_BLOCK = 256


@dataclass(frozen=True)
class FormatBytes:
    data_bytes: int
    metadata_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.data_bytes + self.metadata_bytes


@dataclass(frozen=True)
class QuantParams:
    double_quant: bool | None = None
    bits: int | None = None
    group_size: int | None = None
    gguf_type: str | None = None


def format_label(fmt: str, q: QuantParams) -> str:
    if fmt in BNB4_FORMATS:
        return f"{fmt}{' + double quant' if q.double_quant else ''}"
    if fmt in ("gptq", "awq"):
        return f"{fmt} {q.bits}-bit g{q.group_size}"
    if fmt == "gguf":
        return f"gguf {q.gguf_type}"
    return fmt


def linear_bytes(
    fmt: str,
    in_features: int,
    out_features: int,
    has_bias: bool,
    q: QuantParams,
    bias_bytes: int = 2,
) -> FormatBytes:
    """One Linear layer (weight [out, in] plus optional bias) stored in `fmt`."""
    n = in_features * out_features
    bias = out_features * bias_bytes if has_bias else 0
    if fmt in FLOAT_BYTES:
        scale = 4 * out_features if fmt == "fp8" else 0
        bias = out_features * FLOAT_BYTES[fmt] if (has_bias and fmt != "fp8") else bias
        return FormatBytes(n * FLOAT_BYTES[fmt] + bias, scale)
    if fmt == "int8":
        return FormatBytes(n + bias, 4 * out_features)
    if fmt in BNB4_FORMATS:
        return FormatBytes(math.ceil(n / 2) + bias, bnb4_metadata_bytes(n, bool(q.double_quant)))
    if fmt in ("gptq", "awq"):
        bits = int(q.bits or 4)
        group = in_features if (q.group_size is None or q.group_size <= 0) else q.group_size
        groups = math.ceil(in_features / group)
        qweight = math.ceil(n * bits / 32) * 4
        scales = groups * out_features * 2
        qzeros = groups * math.ceil(out_features * bits / 32) * 4
        g_idx = in_features * 4 if fmt == "gptq" else 0
        return FormatBytes(qweight + bias, scales + qzeros + g_idx)
    if fmt == "gguf":
        return FormatBytes(gguf_bytes(n, q.gguf_type or "") + bias, 0)
    raise ValueError(f"unknown weight format {fmt!r}")


def bnb4_metadata_bytes(n_values: int, double_quant: bool) -> int:
    blocks = math.ceil(n_values / BNB_BLOCK)
    if not double_quant:
        return 4 * blocks
    return blocks + 4 * math.ceil(blocks / BNB_NESTED_BLOCK)


def gguf_bytes(n_values: int, gguf_type: str) -> int:
    per_block, block_bytes = GGUF_BLOCKS[gguf_type]
    return math.ceil(n_values / per_block) * block_bytes


def dense_bytes(fmt: str, n_values: int, q: QuantParams) -> FormatBytes:
    """A tensor that is not split into rows (embedding table, norm, fused tensor) in `fmt`."""
    if fmt in FLOAT_BYTES:
        return FormatBytes(n_values * FLOAT_BYTES[fmt], 0)
    if fmt == "gguf":
        return FormatBytes(gguf_bytes(n_values, q.gguf_type or ""), 0)
    raise ValueError(f"format {fmt!r} applies to linear layers only")


def bits_per_param(fmt: str, q: QuantParams) -> float:
    """Nominal bits per parameter of the data alone (the seed's simple formula)."""
    if fmt in FLOAT_BYTES:
        return 8.0 * FLOAT_BYTES[fmt]
    if fmt == "int8":
        return 8.0
    if fmt in BNB4_FORMATS:
        return 4.0
    if fmt in ("gptq", "awq"):
        return float(q.bits or 4)
    if fmt == "gguf":
        per_block, block_bytes = GGUF_BLOCKS[q.gguf_type or ""]
        return 8.0 * block_bytes / per_block
    raise ValueError(f"unknown weight format {fmt!r}")
