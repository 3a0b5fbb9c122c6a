"""The out-of-memory message families the triage reader knows, and the figures each carries.

One `Form` per family: where its message starts (`start`), where a message wrapped over several
lines ends (`end`), which framework printed it, and an extractor that reads its figures into
`Facts` (bytes, the text as written kept beside them, token counts, the GPU index). `ANCHORS`
and each form's `keys` are plain substrings: a line holding none of them never meets a regex.

Units: PyTorch's MPS allocator (before it switched to GiB) and vLLM write "GB"/"MB" for powers
of two (they divide by 2^30); forms with `binary_si` read those as GiB/MiB. Everywhere else "GB"
is 10^9 bytes, as `units.parse_bytes` reads it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from vramtui.errors import UnitsError
from vramtui.units import parse_bytes

FIGURE_KEYS = (
    "tried_to_allocate_bytes",
    "total_capacity_bytes",
    "free_bytes",
    "process_in_use_bytes",
    "allocated_by_pytorch_bytes",
    "reserved_unallocated_bytes",
    "reserved_total_bytes",
    "already_allocated_bytes",
    "allowed_bytes",
    "other_processes_bytes",
    "kv_cache_bytes",
    "model_weights_bytes",
    "activation_peak_bytes",
    "non_torch_bytes",
)

FRAMEWORKS = (
    "pytorch",
    "rocm",
    "xpu",
    "mps",
    "cuda",
    "cublas",
    "vllm",
    "tgi",
    "accelerate",
    "deepspeed",
    "llama.cpp",
    "ollama",
    "comfyui",
    "tensorflow",
    "jax",
    "xla",
    "tensorrt",
    "tensorrt-llm",
    "ctranslate2",
    "onnxruntime",
    "lmdeploy",
    "mlx",
)
# Frameworks whose GPU memory is PyTorch's CUDA/HIP caching allocator, the one that
# PYTORCH_CUDA_ALLOC_CONF (PYTORCH_HIP_ALLOC_CONF on ROCm) tunes. XPU and MPS have allocators of
# their own, and so have TensorFlow, JAX, TensorRT, CTranslate2, onnxruntime and llama.cpp.
PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS = (
    "pytorch",
    "rocm",
    "vllm",
    "tgi",
    "accelerate",
    "deepspeed",
    "comfyui",
)
KINDS = ("allocation", "kv_cache", "offload", "startup")

_A = re.ASCII
# A quantity as the frameworks print it: "20.00 MiB", "79.19GiB", "512 bytes", "1,024.5 MB".
_Q = r"(?<![-\d.,])(\d[\d,]{0,24}(?:\.\d{1,12})?\s?(?:[KMGTkmgt]i?B|bytes|B))\b"
_N = r"(?<![-\d.,])(\d{1,3}(?:,\d{3}){1,8}(?![\d,])|\d{1,24})"  # an integer, thousands separators allowed

# Substrings that every recognised line contains at least one of (case-sensitive, cheap to find).
ANCHORS = (
    "emory",
    "EMORY",
    "lloc",
    "LLOC",
    "apacity",
    "eserved",
    "che blocks",
    "che size",
    "Cache is",
    "cache_init",
    "cache_size",
    "seq len",
    "ispatched",
    "ffload",
    " took ",
    "eights take",
    "blocks: ",
    "oncurrency",
    "uffer",
    "runner process",
    "ALLOC",
    "xhausted",
    "XHAUSTED",
)


# ------------------------------------------------------------------------------ facts


class Facts:
    __slots__ = ("binary_si", "figures", "gpu", "tokens", "written")

    def __init__(self, binary_si: bool = False) -> None:
        self.figures: dict[str, int] = {}
        self.written: dict[str, str] = {}
        self.tokens: dict[str, int] = {}
        self.gpu: int | None = None
        self.binary_si = binary_si

    def fig(self, key: str, written: str, binary_si: bool | None = None) -> None:
        if key in self.figures:
            return
        written = written.strip()
        value = _to_bytes(written, self.binary_si if binary_si is None else binary_si)
        if value is not None:
            self.figures[key] = value
            self.written[key] = written

    def tok(self, key: str, digits: str) -> None:
        if key not in self.tokens:
            try:
                self.tokens[key] = int(digits.replace(",", ""))
            except ValueError:
                pass

    def set_gpu(self, digits: str | None) -> None:
        if self.gpu is None and digits is not None:
            try:
                self.gpu = int(digits)
            except ValueError:
                pass


_SI_TO_BINARY = re.compile(r"^(.*?)\s?([KkMGT])B$", _A)


def _to_bytes(written: str, binary_si: bool) -> int | None:
    text = written
    if binary_si:
        m = _SI_TO_BINARY.match(written)
        if m:
            text = f"{m[1]} {m[2].upper()}iB"
    try:
        return parse_bytes(text)
    except (UnitsError, ValueError, OverflowError):
        return None


def _fields(text: str, facts: Facts, table: tuple[tuple[str, re.Pattern[str]], ...]) -> None:
    for key, pattern in table:
        if key in facts.figures:
            continue
        m = pattern.search(text)
        if m:
            facts.fig(key, m.group(1))


def ascii_re(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, _A | flags)


# PyTorch's CUDA/HIP/XPU caching allocator. 1.0-1.3 ended its message "Z free; W cached)",
# where W is `amount_cached - amount_allocated` (reserved but unallocated; later "W cached; V
# inactive)"); 1.4-2.0 printed "W reserved in total by PyTorch)"; 2.1 writes "total capacty"; a
# retyped message may lose a space ("1.96GiB totalcapacity") or a capital ("by Pytorch").
_TORCH_FIELDS = (
    ("tried_to_allocate_bytes", ascii_re(r"[Tt]ried to allocate " + _Q)),
    ("total_capacity_bytes", ascii_re(r"total capac(?:i?ty|tiy) of " + _Q)),
    ("total_capacity_bytes", ascii_re(_Q + r" ?total ?capac(?:i?ty|tiy)")),
    ("free_bytes", ascii_re(r"of which " + _Q + r" is free")),
    ("free_bytes", ascii_re(_Q + r" free[;)]")),
    ("already_allocated_bytes", ascii_re(_Q + r" already allocated")),
    ("allowed_bytes", ascii_re(_Q + r" allowed;")),
    ("reserved_total_bytes", ascii_re(_Q + r" reserved in total by Py[Tt]orch")),
    ("reserved_unallocated_bytes", ascii_re(_Q + r" cached[;)]")),
    ("process_in_use_bytes", ascii_re(r"this process has " + _Q + r" memory in use")),
    ("allocated_by_pytorch_bytes", ascii_re(r"Of the allocated memory " + _Q + r" is\b")),
    ("reserved_unallocated_bytes", ascii_re(_Q + r" is reserved by PyTorch but unallocated")),
    # a paste cut inside the sentence: "..., and 87.85 MiB is reserved by PyTorch b"
    ("reserved_unallocated_bytes", ascii_re(r"by PyTorch, and " + _Q + r" is reserved by PyTorch")),
)
_TORCH_GPU = ascii_re(
    r"\(GPU {1,3}(\d{1,4});|\bGPU (\d{1,4}) has a total capac"
    r"|\bAllocation on device (\d{1,4})\b"
)
_OTHER_PROCESS = ascii_re(r"\bProcess (\d{1,10}) has " + _Q + r" memory in use")


def _x_torch(text: str, f: Facts) -> None:
    _fields(text, f, _TORCH_FIELDS)
    m = _TORCH_GPU.search(text)
    if m:
        f.set_gpu(m.group(1) or m.group(2) or m.group(3))
    listed: list[tuple[int, str]] = []
    for m in _OTHER_PROCESS.finditer(text):
        value = _to_bytes(m.group(2), False)
        if value is not None:
            listed.append((value, m.group(2).strip()))
    own = _own_process(listed, f)
    if own is not None:
        f.fig("process_in_use_bytes", listed[own][1])
    others = [p for k, p in enumerate(listed) if k != own]
    if others and ("process_in_use_bytes" in f.figures or own is not None):
        f.figures["other_processes_bytes"] = sum(v for v, _ in others)
        f.written["other_processes_bytes"] = " + ".join(w for _, w in others)


def _own_process(listed: list[tuple[int, str]], f: Facts) -> int | None:
    """Which "Process N has X memory in use" line is the job itself, when PyTorch did not
    print "this process has" (it lists every process on the card; in a container the job's
    PID is another number, so its own line reads like a stranger's). The job holds at least
    what PyTorch allocated: the one line with X at least that figure is the job; with no such
    figure, a single line is the job. Otherwise (two candidates, or several lines and no
    figure) it cannot be told: None, and no line is counted as another process's."""
    if not listed or "process_in_use_bytes" in f.figures:
        return None
    floor = f.figures.get("allocated_by_pytorch_bytes")
    if floor is None:
        floor = f.figures.get("already_allocated_bytes")
    if floor is None:
        return 0 if len(listed) == 1 else None
    candidates = [k for k, (value, _) in enumerate(listed) if value >= floor]
    return candidates[0] if len(candidates) == 1 else None


_MPS_FIELDS = (
    ("allocated_by_pytorch_bytes", ascii_re(r"MPS allocated: " + _Q)),
    ("non_torch_bytes", ascii_re(r"other allocations: " + _Q)),
    ("allowed_bytes", ascii_re(r"max allowed: " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"Tried to allocate " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"Invalid buffer size: " + _Q)),
)


def _x_mps(text: str, f: Facts) -> None:
    _fields(text, f, _MPS_FIELDS)


_VLLM_MAXLEN = ascii_re(
    r"max seq len \(" + _N + r"\) is larger than the maximum number of tokens that "
    r"can be stored in KV cache \(" + _N + r"\)"
)
_VLLM_V1 = ascii_re(
    r"max seq len \(" + _N + r"\),? \(" + _Q + r" KV cache is needed, which is larger "
    r"than the available KV cache memory \(" + _Q + r"\)"
)
_VLLM_EST = ascii_re(r"estimated maximum model length is " + _N)
_VLLM_FREE = ascii_re(
    r"Free memory on device \((\d{1,9}(?:\.\d{1,6})?)/(\d{1,9}(?:\.\d{1,6})?) "
    r"([KMGT]i?B)\) on startup is less than desired GPU memory utilization "
    r"\((\d(?:\.\d{1,6})?), (\d{1,9}(?:\.\d{1,6})? ?[KMGT]i?B)\)"
)


def _x_vllm_kv(text: str, f: Facts) -> None:
    m = _VLLM_MAXLEN.search(text)
    if m:
        f.tok("max_model_len", m.group(1))
        f.tok("kv_cache_tokens", m.group(2))
    m = _VLLM_V1.search(text)
    if m:
        f.tok("max_model_len", m.group(1))
        f.fig("tried_to_allocate_bytes", m.group(2))  # the KV cache one full-length request needs
        f.fig("kv_cache_bytes", m.group(3))
    m = _VLLM_EST.search(text)
    if m:
        f.tok("estimated_max_model_len", m.group(1))
    m = _VLLM_FREE.search(text)
    if m:
        unit = m.group(3)
        f.fig("free_bytes", f"{m.group(1)} {unit}")  # vLLM writes "37.95/79.25 GiB"
        f.fig("total_capacity_bytes", f"{m.group(2)} {unit}")
        f.fig("allowed_bytes", m.group(5))


_TGI_TOTAL = ascii_re(
    r"Not enough memory to handle " + _N + r" total tokens with " + _N + r" prefill tokens"
)
_TGI_PREFILL = ascii_re(r"Not enough memory to handle " + _N + r" prefill tokens")
_TGI_SPAN = ascii_re(r"warmup\{([^{}\n]{0,400})\}")
_TGI_ARG = ascii_re(r"(max_\w{1,40})=(?:Some\()?(\d{1,12})\b")


def _x_tgi(text: str, f: Facts) -> None:
    m = _TGI_TOTAL.search(text)
    if m:
        f.tok("total_tokens", m.group(1))
        f.tok("prefill_tokens", m.group(2))
    m = _TGI_PREFILL.search(text)
    if m:
        f.tok("prefill_tokens", m.group(1))


def read_tgi_span(text: str, f: Facts) -> None:
    m = _TGI_SPAN.search(text)
    if m:
        for arg in _TGI_ARG.finditer(m.group(1)):
            f.tok(arg.group(1), arg.group(2))


_LLAMA_FIELDS = (
    ("tried_to_allocate_bytes", ascii_re(r"allocating " + _Q + r" on device")),
    ("tried_to_allocate_bytes", ascii_re(r"buffer of size (\d{1,20})\b")),
    ("tried_to_allocate_bytes", ascii_re(r"allocation of size (\d{1,20}) failed")),
    ("tried_to_allocate_bytes", ascii_re(r"failed to allocate buffer, size = " + _Q)),
)
_LLAMA_GPU = ascii_re(
    r"on device (\d{1,3})\b|\b(?:CUDA|ROCm|Vulkan|SYCL|CANN|MUSA)(\d{1,3}) buffer|"
    r"current device: (\d{1,3})"
)


def _x_llama(text: str, f: Facts) -> None:
    _fields(text, f, _LLAMA_FIELDS)
    m = _LLAMA_GPU.search(text)
    if m:
        f.set_gpu(m.group(1) or m.group(2) or m.group(3))


_OLLAMA_SYS = ascii_re(
    r"requires more system memory \(" + _Q + r"\) than is available \(" + _Q + r"\)"
)
_OLLAMA_OFFLOAD = (
    ("free_bytes", ascii_re(r"memory\.available=\"?\[" + _Q)),
    ("kv_cache_bytes", ascii_re(r"memory\.required\.kv=\"?" + _Q)),
    ("model_weights_bytes", ascii_re(r"memory\.weights\.total=\"?" + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"memory\.required\.full=\"?" + _Q)),
)
_OLLAMA_LAYERS = ascii_re(r"\blayers\.(requested|model|offload)=(-?\d{1,6})\b")


def _x_ollama(text: str, f: Facts) -> None:
    m = _OLLAMA_SYS.search(text)
    if m:
        f.fig("tried_to_allocate_bytes", m.group(1))
        f.fig("free_bytes", m.group(2))
    _x_llama(text, f)
    _fields(text, f, _OLLAMA_OFFLOAD)
    for m in _OLLAMA_LAYERS.finditer(text):
        f.tok("layers_" + m.group(1), m.group(2))


_VLLM_STARTUP_FIELDS = (
    ("model_weights_bytes", ascii_re(r"(?:Model loading|Loading model weights) took " + _Q)),
    ("total_capacity_bytes", ascii_re(r"total_gpu_memory \(" + _Q + r"\)")),
    ("total_capacity_bytes", ascii_re(r"total_gpu_memory=" + _Q)),
    ("allowed_bytes", ascii_re(r"gpu_memory_utilization \(\d{1,3}(?:\.\d{1,6})?\) = " + _Q)),
    ("model_weights_bytes", ascii_re(r"model weights take " + _Q)),
    ("non_torch_bytes", ascii_re(r"non_torch_memory takes " + _Q)),
    ("non_torch_bytes", ascii_re(r"non_torch_memory=" + _Q)),
    ("activation_peak_bytes", ascii_re(r"activation peak memory takes " + _Q)),
    ("kv_cache_bytes", ascii_re(r"reserved for KV Cache is " + _Q)),
    ("kv_cache_bytes", ascii_re(r"Available KV cache memory: " + _Q)),
    ("kv_cache_bytes", ascii_re(r"kv_cache_size=" + _Q)),
)
_VLLM_BLOCKS = ascii_re(r"# \w{1,10} blocks: " + _N + r"(?:, # CPU blocks: " + _N + r")?")
_VLLM_KV_TOKENS = ascii_re(r"KV cache size: " + _N + r" tokens")
_VLLM_CONCURRENCY = ascii_re(r"Maximum concurrency for " + _N + r" tokens per request")


def _x_vllm_startup(text: str, f: Facts) -> None:
    _fields(text, f, _VLLM_STARTUP_FIELDS)
    m = _VLLM_BLOCKS.search(text)
    if m:
        f.tok("gpu_blocks", m.group(1))
        if m.group(2):
            f.tok("cpu_blocks", m.group(2))
    m = _VLLM_KV_TOKENS.search(text)
    if m:
        f.tok("kv_cache_tokens", m.group(1))
    m = _VLLM_CONCURRENCY.search(text)
    if m:
        f.tok("max_model_len", m.group(1))


# PyTorch's CPU allocator failing is host RAM, not GPU memory: never an out-of-memory event
# here; the reader names it when it explains why a text holds no GPU OOM.
HOST_RAM = ascii_re(r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory)")


# intel-extension-for-pytorch refuses any single block over 4 GB on some platforms, whatever
# is free ("... larger than 4GB! Tried to allocate 6.85 GiB (GPU  0; 15.56 GiB total capacity;
# 0 bytes already allocated; ...)"): a size limit, not exhausted memory, so not an OOM event.
BLOCK_LIMIT = ascii_re(r"can NOT allocate memory block with size larger than \S{1,12}")


# PyTorch's cudaMallocAsync backend (the default in ComfyUI) over a memory fraction:
#   Allocation on device 0 would exceed allowed memory. (out of memory)
#   Currently allocated     : 11.11 GiB
#   Requested               : 128.00 MiB
#   Device limit            : 12.00 GiB
#   Free (according to CUDA): 0 bytes
#   PyTorch limit (set by user-supplied memory fraction)
#                           : 17179869184.00 GiB
# text-generation-inference quotes it inside its warm-up panic with literal "\n" escapes.
_FRACTION_FIELDS = (
    ("already_allocated_bytes", ascii_re(r"Currently allocated\s{0,40}: {0,4}" + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"Requested\s{0,40}: {0,4}" + _Q)),
    ("total_capacity_bytes", ascii_re(r"Device limit\s{0,40}: {0,4}" + _Q)),
    ("free_bytes", ascii_re(r"Free \(according to CUDA\)\s{0,40}: {0,4}" + _Q)),
    (
        "allowed_bytes",
        ascii_re(r"memory fraction\)(?:\\n)?\s{0,60}(?:\\n)?\s{0,60}: {0,4}" + _Q),
    ),
)


def _x_fraction(text: str, f: Facts) -> None:
    _fields(text, f, _FRACTION_FIELDS)
    m = _TORCH_GPU.search(text)
    if m:
        f.set_gpu(m.group(1) or m.group(2) or m.group(3))


# TensorFlow, JAX and XLA (the TSL BFC allocator, stream executor and XLA's buffers).
# Sizes are HumanReadableNumBytes (1024-based "84.60MiB", "512B") or exact byte counts;
# where both are printed ("2.12G (2282521344 bytes)", "(rounded to 1073741824)") the exact one
# is read.
_XLA_EXACT = (
    ("tried_to_allocate_bytes", ascii_re(r"\(rounded to (\d{1,20})\)")),
    ("tried_to_allocate_bytes", ascii_re(r"failed to allocate \S{1,24} \((\d{1,20}) bytes\)")),
    ("tried_to_allocate_bytes", ascii_re(r"Failed to allocate request for \S{1,24} \((\d{1,20})B\)")),
)
_XLA_FIELDS = (
    ("tried_to_allocate_bytes", ascii_re(r"ran out of memory trying to allocate " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"[Oo]ut of memory while trying to allocate " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"[Oo]ut of memory allocating " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"Failed to allocate request for " + _Q)),
)
_XLA_GPU = ascii_re(r"device:GPU:(\d{1,3})\b|\bGPU_(\d{1,3})_bfc\b|device ordinal (\d{1,3})\b")


def _x_xla(text: str, f: Facts) -> None:
    for key, pattern in _XLA_EXACT:
        m = pattern.search(text)
        if m and key not in f.figures:
            f.figures[key] = int(m.group(1))
            f.written[key] = m.group(0)
    _fields(text, f, _XLA_FIELDS)
    m = _XLA_GPU.search(text)
    if m:
        f.set_gpu(m.group(1) or m.group(2) or m.group(3))


# TensorRT-LLM's executor creation (tensorrt_llm/_torch/pyexecutor): figures in GiB, no unit.
_TRTLLM_FIELDS = (
    ("total_capacity_bytes", ascii_re(r"Total GPU memory \(GiB\): (\d{1,9}(?:\.\d{1,6})?)")),
    (
        "free_bytes",
        ascii_re(
            r"Free GPU memory before component creation attempt \(GiB\): "
            r"(\d{1,9}(?:\.\d{1,6})?)"
        ),
    ),
)


def _x_trtllm(text: str, f: Facts) -> None:
    for key, pattern in _TRTLLM_FIELDS:
        m = pattern.search(text)
        if m and key not in f.figures:
            value = _to_bytes(m.group(1) + " GiB", False)
            if value is not None:
                f.figures[key] = value
                f.written[key] = m.group(1) + " (GiB)"


_EXACT_BYTES = (
    ("tried_to_allocate_bytes", ascii_re(r"requested buffer of size (\d{1,20})\b")),  # ORT
    ("tried_to_allocate_bytes", ascii_re(r"GPU memory \((\d{1,20}) bytes\) could not")),  # TRT
)
_ORT_GPU = ascii_re(r"; GPU=(\d{1,3})\b")


def _x_exact(text: str, f: Facts) -> None:
    for key, pattern in _EXACT_BYTES:
        m = pattern.search(text)
        if m and key not in f.figures:
            f.figures[key] = int(m.group(1))
            f.written[key] = m.group(1) + " bytes"
    m = _ORT_GPU.search(text)
    if m:
        f.set_gpu(m.group(1))


_MLX_ALLOC = ascii_re(r"\[metal::malloc\] Unable to allocate (\d{1,20}) bytes")


def _x_mlx(text: str, f: Facts) -> None:
    m = _MLX_ALLOC.search(text)
    if m:
        f.fig("tried_to_allocate_bytes", m.group(1))


def _x_none(text: str, f: Facts) -> None:
    return None


# ------------------------------------------------------------------------------ forms


@dataclass(frozen=True)
class Form:
    name: str
    start: re.Pattern[str]
    kind: str  # or "auto": kv_cache when the line speaks of a KV cache, else allocation
    framework: str | Callable[[re.Match[str], str], str]
    extract: Callable[[str, Facts], None]
    end: re.Pattern[str] | None = None  # None: a one-line message
    binary_si: bool = False
    needs: re.Pattern[str] | None = None  # the line must also match this to count
    exception_prefix: bool = True  # start the message at "torch.OutOfMemoryError: " if present
    keys: tuple[str, ...] = ()  # the line holds one of these before `start` is even tried
    blank_lines: int = 0  # blank lines the message may span (its figures follow a gap)


def _dev(m: re.Match[str], text: str) -> str:
    return {"CUDA": "pytorch", "HIP": "rocm", "XPU": "xpu"}.get(m.group("dev").upper(), "pytorch")


def _lib(m: re.Match[str], text: str) -> str:
    lib = m.group(0)
    if lib.startswith("CUBLAS"):
        return "cublas"
    if lib.startswith(("HIPBLAS", "rocblas")):
        return "rocm"
    return "cuda"


def _cuda_or_hip(m: re.Match[str], text: str) -> str:
    return "rocm" if "hip" in m.group(0).lower() else "cuda"


_JAX_MARK = ascii_re(r"\bjax(?:lib)?\b|xla_extension|XlaRuntimeError|xla/python|\bpjrt\b|external/xla/")
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
    return "tensorrt-llm" if ("tensorrt-llm" in where or "tensorrt_llm" in where or "trt-llm" in where) else "tensorrt"


def _ort_or_cuda(m: re.Match[str], text: str) -> str:
    where = (m.string[:2_000] + text[:2_000]).lower()
    return "onnxruntime" if ("onnxruntime" in where or "; gpu=" in where) else "cuda"


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


_VLLM_END = ascii_re(r"initializing the engine\.?|max_model_len`\.?\s*$|other processes\.?\s*$")

FORMS: tuple[Form, ...] = (
    Form(
        "torch",
        # What follows is the message's own punctuation or "Tried to allocate": prose such as
        # "getting CUDA out of memory error" is not the message. A retyped message may be
        # lower case ("cuda out of memory, tried to allocate 50MiB(GPU 0; ...").
        ascii_re(
            r"(?<![\"'])\b(?P<dev>CUDA|HIP|XPU|cuda|Cuda) out of memory"
            r"(?=[.,;:!()]|\s*$|\s{1,3}[Tt]ried to allocate)"
        ),
        "allocation",
        _dev,
        _x_torch,
        end=ascii_re(
            r"environment-variables\)|alloc-conf\)|_ALLOC_CONF\s*$|unoccupied cached "
            r"memory\.|(?:by Py[Tt]orch|cached|inactive)\)\s*$|fragmentation\.\s*$"
        ),
        keys=("out of memory",),
    ),
    Form(
        "torch_fraction",
        ascii_re(r"\bAllocation on device(?: \d{1,4} would exceed allowed memory|\s*$)"),
        "allocation",
        _fraction,
        _x_fraction,
        end=ascii_re(r"memory fraction\)(?:\\n)?\s{0,60}(?:\\n)?\s{0,60}: {0,4}\d[^\n]{0,30}B"),
        keys=("Allocation on device",),
    ),
    Form(
        "mps",
        ascii_re(r"MPS backend out of memory"),
        "allocation",
        "mps",
        _x_mps,
        end=ascii_re(r"system failure\)\.?|pool\.\s*$"),
        binary_si=True,
        keys=("MPS backend",),
    ),
    Form(
        "mps_buffer",
        ascii_re(r"\bInvalid buffer size: \d"),
        "allocation",
        "mps",
        _x_mps,
        binary_si=True,
        keys=("Invalid buffer size",),
    ),
    Form(
        "tgi",
        ascii_re(r"Not enough memory to handle \d"),
        "kv_cache",
        "tgi",
        _x_tgi,
        end=ascii_re(r"tokens`"),
        keys=("Not enough memory",),
    ),
    Form(
        "vllm_nomem",
        ascii_re(r"No available memory for the cache blocks"),
        "kv_cache",
        "vllm",
        _x_vllm_kv,
        end=_VLLM_END,
        binary_si=True,
        keys=("cache blocks",),
    ),
    Form(
        "vllm_maxlen",
        ascii_re(r"The model's max seq len \(\d"),
        "kv_cache",
        "vllm",
        _x_vllm_kv,
        end=_VLLM_END,
        binary_si=True,
        keys=("max seq len",),
    ),
    Form(
        "vllm_v1",
        ascii_re(r"To serve at least one request with the models?'s?'?s? max seq len"),
        "kv_cache",
        "vllm",
        _x_vllm_kv,
        end=_VLLM_END,
        binary_si=True,
        keys=("max seq len",),
    ),
    Form(
        "vllm_free",
        ascii_re(r"Free memory on device \(\d"),
        "allocation",
        "vllm",
        _x_vllm_kv,
        end=_VLLM_END,
        binary_si=True,
        keys=("Free memory on device",),
    ),
    Form(
        "offload_8bit",
        ascii_re(r"Some modules are dispatched on the CPU or the disk"),
        "offload",
        "accelerate",
        _x_none,
        end=ascii_re(r"for more details\.?|from_pretrained`\.?\s*$"),
        keys=("dispatched on the CPU",),
    ),
    Form(
        "offload_meta",
        ascii_re(
            r"Some parameters are on the meta device(?: device)? because they "
            r"were offloaded to the"
        ),
        "offload",
        "accelerate",
        _x_none,
        keys=("meta device",),
    ),
    Form(
        "offload_disk",
        ascii_re(r"You are trying to offload the whole model to the disk"),
        "offload",
        "accelerate",
        _x_none,
        keys=("offload the whole",),
    ),
    Form(
        "offload_buffers",
        ascii_re(r"bytes of buffer for offloaded layers"),
        "offload",
        "accelerate",
        _x_none,
        keys=("offloaded layers",),
    ),
    Form(
        "mlx",
        ascii_re(
            r"\[METAL\] Command buffer execution failed: Insufficient Memory|"
            r"\[metal::malloc\] (?:Unable to allocate|Resource limit)"
        ),
        "allocation",
        "mlx",
        _x_mlx,
        keys=("[METAL]", "[metal::malloc]"),
    ),
    Form(
        "llama",
        ascii_re(
            r"ggml_backend_\w{1,40}_buffer_type_alloc_buffer: (?:allocating|error: failed|failed)|"
            r"failed to allocate \S{1,100} buffer of size \d|unable to allocate \S{1,100} buffer|"
            r"failed to allocate compute(?: pp)? buffers|compute buffer allocation failed|"
            r"kv_cache_init: failed to allocate|failed to allocate buffer for kv cache|"
            r"kv_cache_init\(\) failed|ggml_vulkan: Device memory allocation of size \d|"
            r"ErrorOutOfDeviceMemory|kIOGPUCommandBufferCallbackErrorOutOfMemory|"
            r"ggml_metal\w{0,60}: error: (?:failed to allocate|Insufficient Memory)|"
            r"failed to allocate buffer of size \d|"
            r"CUDA error \d{1,4} at [^\s:]{0,400}ggml[^\s:]{0,100}:\d{1,6}: out of memory"
        ),
        "auto",
        "llama.cpp",
        _x_llama,
        exception_prefix=False,
        keys=(
            "_alloc_buffer",
            "failed to allocate",
            "unable to allocate",
            "allocation failed",
            "kv_cache_init",
            "Device memory allocation",
            "ErrorOutOfDeviceMemory",
            "OutOfMemory",
            "ggml_metal",
            "CUDA error",
        ),
    ),
    Form(
        "ollama_sys",
        ascii_re(r"model requires more system memory \("),
        "allocation",
        "ollama",
        _x_ollama,
        keys=("requires more system memory",),
    ),
    Form(
        "ollama_runner",
        ascii_re(r"llama runner process (?:has terminated|no longer running)"),
        "auto",
        "ollama",
        _x_ollama,
        needs=ascii_re(
            r"out of memory|unable to allocate|failed to allocate|cudaMalloc failed|"
            r"requires more|[Ii]nsufficient [Mm]emory|ErrorOutOfDeviceMemory"
        ),
        keys=("llama runner process",),
    ),
    Form(
        "cublas",
        ascii_re(
            r"\b(?:CUBLAS|HIPBLAS|CUSOLVER|CUSPARSE|CUDNN)_STATUS_ALLOC_FAILED|"
            r"\bCUFFT_ALLOC_FAILED|\brocblas_status_memory_error"
        ),
        "allocation",
        _lib,
        _x_none,
        keys=("ALLOC_FAILED", "rocblas_status_memory_error"),
    ),
    Form(
        "tf_tensor",
        ascii_re(r"(?:Resource exhausted: )?\bOOM when allocating tensor\b"),
        "allocation",
        "tensorflow",
        _x_xla,
        keys=("OOM when allocating",),
    ),
    Form(
        "xla_bfc",
        # the retried form ("... with freed_by_count=0. The caller indicates that this is not
        # a failure ...") is a warning, not a failure
        ascii_re(
            r"Allocator \(GPU_\d{1,3}_bfc\) ran out of memory trying to allocate "
            r"(?![^\n]{0,300}not a failure)"
        ),
        "allocation",
        _xla_family,
        _x_xla,
        keys=("_bfc) ran out of memory",),
    ),
    Form(
        "xla_driver",
        ascii_re(r"failed to allocate \S{1,24} \(\d{1,20} bytes\) from device"),
        "allocation",
        _xla_family,
        _x_xla,
        exception_prefix=False,
        keys=("bytes) from device",),
    ),
    Form(
        "xla_exhausted",
        ascii_re(
            r"(?:RESOURCE_EXHAUSTED|Resource exhausted): {0,4}(?:[Oo]ut ?(?:of memory)?\s*$|"
            r"[Oo]ut of memory|Failed to allocate request)"
        ),
        "allocation",
        _xla_family,
        _x_xla,
        end=ascii_re(r"(?:bytes|[KMGT]iB|\dB)\.?\s*$|\(\d{1,20}B\)"),
        keys=("RESOURCE_EXHAUSTED", "Resource exhausted"),
    ),
    Form(
        "trtllm_executor",
        ascii_re(r"Executor creation failed due to insufficient GPU memory"),
        "allocation",
        "tensorrt-llm",
        _x_trtllm,
        end=ascii_re(r"creation attempt \(GiB\): \d{1,9}(?:\.\d{1,6})?"),
        keys=("insufficient GPU memory",),
        blank_lines=2,
    ),
    Form(
        "tensorrt",
        ascii_re(r"Requested amount of GPU memory \(\d{1,20} bytes\) could not be allocated"),
        "allocation",
        _trt,
        _x_exact,
        keys=("could not be allocated",),
    ),
    Form(
        "ctranslate2",
        # CTranslate2 (faster-whisper, whisperX): THROW_RUNTIME_ERROR("CUDA failed with error " ...)
        ascii_re(r"\bCUDA failed with error out of memory"),
        "allocation",
        "ctranslate2",
        _x_none,
        keys=("failed with error",),
    ),
    Form(
        "onnxruntime",
        ascii_re(
            r"Failed to allocate memory for requested buffer of size \d|"
            r"\bCUDA failure \d{1,4}: out of memory"
        ),
        "allocation",
        _ort_or_cuda,
        _x_exact,
        exception_prefix=False,
        keys=("requested buffer", "CUDA failure"),
    ),
    Form(
        "cuda_error",
        ascii_re(r"(?<![\"'])\b(?:CUDA|HIP) error: out of memory"),
        "allocation",
        _cuda_or_hip,
        _x_none,
        keys=("error: out of memory",),
    ),
    Form(
        "xpu_ur",
        ascii_re(
            r"\b(?:UR|ZE|PI)_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|"
            r"\bPI_ERROR_OUT_OF_DEVICE_MEMORY"
        ),
        "allocation",
        "xpu",
        _x_none,
        keys=("OUT_OF_DEVICE_MEMORY",),
    ),
    Form(
        "cuda_misc",
        ascii_re(
            r"cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|Cuda failure "
            r"'?out of memory|\b(?:cuda|hip)\w{0,20} failed: out of memory|"
            r"hipErrorOutOfMemory|HIP_ERROR_OUT_OF_MEMORY|Triton Error \[CUDA\]: "
            r"out of memory"
        ),
        "allocation",
        _cuda_or_hip,
        _x_none,
        keys=("MemoryAllocation", "OUT_OF_MEMORY", "out of memory", "OutOfMemory"),
    ),
    Form(
        "vllm_startup",
        ascii_re(
            r"(?:Model loading|Loading model weights) took \d|total_gpu_memory[ =(]|model weights "
            r"take \d|non_torch_memory(?: takes |=)|activation peak memory takes|reserved for KV "
            r"Cache is|# \w{1,10} blocks: \d|KV cache size: [\d,]{1,20} tokens|Maximum concurrency "
            r"for [\d,]{1,20} tokens per request|Available KV cache memory: \d|kv_cache_size=\d"
        ),
        "startup",
        "vllm",
        _x_vllm_startup,
        binary_si=True,
        exception_prefix=False,
        keys=(
            " took ",
            "total_gpu_memory",
            "weights take",
            "non_torch_memory",
            "activation peak",
            "KV Cache is",
            " blocks: ",
            "KV cache size",
            "concurrency for",
            "KV cache memory",
            "kv_cache_size=",
        ),
    ),
    Form(
        "ollama_startup",
        ascii_re(r"msg=\"?offload to "),
        "startup",
        "ollama",
        _x_ollama,
        needs=ascii_re(r"memory\."),
        exception_prefix=False,
        keys=("offload to ",),
    ),
    Form(
        "torch_generic",
        # a Jupyter traceback heads the exception: "OutOfMemoryError      Traceback (most ..."
        ascii_re(
            r"(?<![\w.])(?:torch\.)?(?:cuda\.)?OutOfMemoryError"
            r"(?=:|\s*$|\s{2,80}Traceback \(most recent call last\))"
        ),
        "allocation",
        _generic,
        _x_torch,
        keys=("OutOfMemoryError",),
    ),
    Form(
        "generic",
        ascii_re(
            r"(?:Error|error|ERROR|FAILED|failed|RESOURCE_EXHAUSTED)\b[^\n]{0,120}?"
            r"\b[Oo]ut [Oo]f [Mm]emory\b"
        ),
        "allocation",
        _generic,
        _x_torch,
        keys=("ut of memory", "ut of Memory", "ut Of Memory", "ut Of memory"),
    ),
)

ANY_KEY = re.compile(
    "|".join(sorted({re.escape(k) for f in FORMS for k in f.keys}, key=len, reverse=True))
)
