"""A checkpoint's `quantization_config` as the spec's weights table."""

from __future__ import annotations


def weights_from_quantization_config(qc: dict | None) -> dict | None:
    """The `[weights]` table a quantised checkpoint implies, or None if it implies none we model.

    GPTQ/AWQ: bits and group size; bitsandbytes: nf4/fp4 with its double-quant flag, or int8;
    FP8 (fbgemm_fp8, fp8, compressed-tensors float 8-bit): fp8.
    """
    if not qc:
        return None
    method = str(qc.get("quant_method", "")).lower()
    if method in ("gptq", "awq"):
        return {
            "format": method,
            "bits": int(qc.get("bits", qc.get("w_bit", 4))),
            "group_size": int(qc.get("group_size", qc.get("q_group_size", 128))),
        }
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            return {
                "format": str(qc.get("bnb_4bit_quant_type", "nf4")).lower(),
                "double_quant": bool(qc.get("bnb_4bit_use_double_quant", False)),
            }
        if qc.get("load_in_8bit"):
            return {"format": "int8"}
        return None
    if method in ("fp8", "fbgemm_fp8"):
        return {"format": "fp8"}
    return None


def describe_quantization(qc: dict) -> str:
    method = qc.get("quant_method", "?")
    extra = ", ".join(
        f"{k}={qc[k]}" for k in ("bits", "group_size", "bnb_4bit_quant_type") if k in qc
    )
    return f"{method}" + (f" ({extra})" if extra else "")
