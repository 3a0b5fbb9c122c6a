"""Which framework printed a shared out-of-memory message, from the matched line and the text
around it: the framework functions of `oom_forms.Form` (a device runtime's words, XLA's
allocator under JAX or TensorFlow, TensorRT or TensorRT-LLM, onnxruntime or CUDA, a Vulkan app
or llama.cpp's Vulkan backend, the generic "out of memory" near an error word).
"""

from __future__ import annotations

import re

from vramtui.triage.oom_figures import ascii_re


def _dev(m: re.Match[str], text: str) -> str:
    return {"CUDA": "pytorch", "HIP": "rocm", "XPU": "xpu", "NPU": "npu"}.get(
        m.group("dev").upper(), "pytorch"
    )


def _lib(m: re.Match[str], text: str) -> str:
    lib = m.group(0)
    if lib.startswith("CUBLAS"):
        return "cublas"
    if lib.startswith(("HIPBLAS", "rocblas")):
        return "rocm"
    return "cuda"


def _cuda_or_hip(m: re.Match[str], text: str) -> str:
    return "rocm" if "hip" in m.group(0).lower() else "cuda"


_JAX_MARK = ascii_re(
    r"\bjax(?:lib)?\b|xla_extension|XlaRuntimeError|xla/python|\bpjrt\b|external/xla/"
)
_TF_MARK = ascii_re(
    r"tensorflow|\(\d{1,3}\) Resource exhausted|\bkeras\b|ResourceExhaustedError|/job:|\btf\.|\bTF_\w|_bfc\b.{0,200}\[Op:"
)


def _xla_family(m: re.Match[str], text: str) -> str:
    """JAX, TensorFlow, or "xla" (the allocator and compiler the two share) when the line
    does not say which."""
    where = m.string[:2_000] + " " + text[:2_000]
    if _JAX_MARK.search(where):
        return "jax"
    if _TF_MARK.search(where):
        return "tensorflow"
    return "xla"


def _fraction(m: re.Match[str], text: str) -> str:
    where = m.string[:2_000]
    if "warmup" in where or "warm up" in where:
        return "tgi"
    if "Exception during processing" in where or "Error occurred when executing" in where:
        return "comfyui"
    return "pytorch"


def _trt(m: re.Match[str], text: str) -> str:
    where = (m.string[:2_000] + text[:2_000]).lower()
    return (
        "tensorrt-llm"
        if ("tensorrt-llm" in where or "tensorrt_llm" in where or "trt-llm" in where)
        else "tensorrt"
    )


def _ort_or_cuda(m: re.Match[str], text: str) -> str:
    where = (m.string[:2_000] + text[:2_000]).lower()
    return "onnxruntime" if ("onnxruntime" in where or "; gpu=" in where) else "cuda"


def _ort_or_torch(m: re.Match[str], text: str) -> str:
    where = (m.string[:2_000] + text[:2_000]).lower()
    return "onnxruntime" if "onnxruntime" in where else "pytorch"


def _vulkan(m: re.Match[str], text: str) -> str:
    where = (m.string[:2_000] + text[:2_000]).lower()
    return "llama.cpp" if ("ggml" in where or "llama" in where) else "vulkan"


def _generic(m: re.Match[str], text: str) -> str:
    low = (m.string[:2_000] + " " + text[:2_000]).lower()
    if "tensorrt-llm" in low or "tensorrt_llm" in low or "[trt-llm]" in low:
        return "tensorrt-llm"
    if "turbomind" in low or "lmdeploy" in low:
        return "lmdeploy"
    if "onnxruntime" in low:
        return "onnxruntime"
    if "ctranslate2" in low:
        return "ctranslate2"
    if "hip" in low or "rocm" in low:
        return "rocm"
    if "xpu" in low:
        return "xpu"
    if "mps" in low or "metal" in low:
        return "mps"
    if "cuda" in low and "torch" not in low and "pytorch" not in low:
        return "cuda"
    return "pytorch"
