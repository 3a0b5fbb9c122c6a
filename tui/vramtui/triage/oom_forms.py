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


_TORCH_FIELDS = (
    ("tried_to_allocate_bytes", ascii_re(r"Tried to allocate " + _Q)),
    ("total_capacity_bytes", ascii_re(r"total capacity of " + _Q)),
    ("total_capacity_bytes", ascii_re(_Q + r" total capacity")),
    ("free_bytes", ascii_re(r"of which " + _Q + r" is free")),
    ("free_bytes", ascii_re(_Q + r" free;")),
    ("already_allocated_bytes", ascii_re(_Q + r" already allocated")),
    ("allowed_bytes", ascii_re(_Q + r" allowed;")),
    ("reserved_total_bytes", ascii_re(_Q + r" reserved in total by PyTorch")),
    ("reserved_total_bytes", ascii_re(_Q + r" cached\)")),
    ("process_in_use_bytes", ascii_re(r"this process has " + _Q + r" memory in use")),
    (
        "allocated_by_pytorch_bytes",
        ascii_re(r"Of the allocated memory " + _Q + r" is allocated by PyTorch"),
    ),
    ("reserved_unallocated_bytes", ascii_re(_Q + r" is reserved by PyTorch but unallocated")),
)
_TORCH_GPU = ascii_re(r"\(GPU (\d{1,4});|\bGPU (\d{1,4}) has a total capacity")
_OTHER_PROCESS = ascii_re(r"\bProcess (\d{1,10}) has " + _Q + r" memory in use")


def _x_torch(text: str, f: Facts) -> None:
    _fields(text, f, _TORCH_FIELDS)
    m = _TORCH_GPU.search(text)
    if m:
        f.set_gpu(m.group(1) or m.group(2))
    total, written = 0, []
    for m in _OTHER_PROCESS.finditer(text):
        value = _to_bytes(m.group(2), False)
        if value is not None:
            total += value
            written.append(m.group(2).strip())
    if written:
        f.figures["other_processes_bytes"] = total
        f.written["other_processes_bytes"] = " + ".join(written)


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


_CPU_ALLOC = ascii_re(r"you tried to allocate (\d{1,20}) bytes")


def _x_cpu(text: str, f: Facts) -> None:
    m = _CPU_ALLOC.search(text)
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


def _dev(m: re.Match[str], text: str) -> str:
    return {"CUDA": "pytorch", "HIP": "rocm", "XPU": "xpu"}.get(m.group("dev"), "pytorch")


def _lib(m: re.Match[str], text: str) -> str:
    lib = m.group(0)
    if lib.startswith("CUBLAS"):
        return "cublas"
    if lib.startswith(("HIPBLAS", "rocblas")):
        return "rocm"
    return "cuda"


def _cuda_or_hip(m: re.Match[str], text: str) -> str:
    return "rocm" if "hip" in m.group(0).lower() else "cuda"


def _generic(m: re.Match[str], text: str) -> str:
    low = text.lower()
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
        ascii_re(r"(?<![\"'])\b(?P<dev>CUDA|HIP|XPU) out of memory\b"),
        "allocation",
        _dev,
        _x_torch,
        end=ascii_re(
            r"environment-variables\)|alloc-conf\)|_ALLOC_CONF\s*$|unoccupied cached "
            r"memory\.|(?:by PyTorch|cached)\)\s*$|fragmentation\.\s*$"
        ),
        keys=("out of memory",),
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
        "llama",
        ascii_re(
            r"ggml_backend_\w{1,40}_buffer_type_alloc_buffer: (?:allocating|error: failed|failed)|"
            r"failed to allocate \S{1,100} buffer of size \d|unable to allocate \S{1,100} buffer|"
            r"failed to allocate compute(?: pp)? buffers|compute buffer allocation failed|"
            r"kv_cache_init: failed to allocate|failed to allocate buffer for kv cache|"
            r"kv_cache_init\(\) failed|ggml_vulkan: Device memory allocation of size \d|"
            r"ErrorOutOfDeviceMemory|kIOGPUCommandBufferCallbackErrorOutOfMemory|"
            r"ggml_metal\w{0,60}: error: (?:failed to allocate|Insufficient Memory)|"
            r"failed to allocate buffer of size \d"
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
        "cpu_alloc",
        ascii_re(r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory)"),
        "allocation",
        "pytorch",
        _x_cpu,
        keys=("DefaultCPUAllocator",),
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
        ascii_re(r"(?<![\w.])(?:torch\.)?(?:cuda\.)?OutOfMemoryError(?=:|\s*$)"),
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
