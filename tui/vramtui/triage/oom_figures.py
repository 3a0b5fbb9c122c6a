"""The figures an out-of-memory message carries, read to the byte (`Facts`), one reader per
message family; `vramtui.triage.oom_forms` says which family a line belongs to.

Each `read_*` function reads one family's figures from its (de-wrapped) message text into
`Facts`: bytes, the text as written kept beside them, token counts, the GPU index. Figures are
read in the unit convention of the backend that printed them: PyTorch, vLLM, llama.cpp,
TensorFlow and XLA write KiB/MiB/GiB for powers of two; PyTorch's MPS allocator (before it
switched to GiB) and vLLM write "GB"/"MB" for powers of two (`binary_si` reads those as
GiB/MiB); everywhere else "GB" is 10^9 bytes, as `units.parse_bytes` reads it. Where a message
prints an exact byte count beside a rounded one, the exact one is read.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal

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
    "other_processes_total_bytes",
    "kv_cache_bytes",
    "model_weights_bytes",
    "activation_peak_bytes",
    "non_torch_bytes",
)
# Keys a message prints once per item: PyTorch writes one "Process N has X memory in use" line
# per other process on the card. Each item is its own figure, in the order printed
# (`Facts.lists`, `OomEvent.figure_lists`); `other_processes_total_bytes` is their sum, a
# derived figure kept for the advice.
LISTED_FIGURE_KEYS = ("other_processes_bytes",)

_A = re.ASCII
# A quantity as the frameworks print it: "20.00 MiB", "79.19GiB", "512 bytes", "1,024.5 MB".
_Q = r"(?<![-\d.,])(\d[\d,]{0,24}(?:\.\d{1,12})?\s?(?:[KMGTkmgt]i?B|[Bb]ytes|B))\b"
_N = r"(?<![-\d.,])(\d{1,3}(?:,\d{3}){1,8}(?![\d,])|\d{1,24})"  # an integer, thousands separators allowed
# A size with a bare 1024-based suffix, as XLA prints it ("11.35G", "512M"): read as KiB..TiB.
_BARE = r"(?<![-\d.,])(\d{1,9}(?:\.\d{1,6})?[KMGT])(?!\w|\.\w)"  # "31.06M." ends a sentence


# ------------------------------------------------------------------------------ facts


class Facts:
    __slots__ = ("binary_si", "figures", "gpu", "lists", "lists_written", "tokens", "written")

    def __init__(self, binary_si: bool = False) -> None:
        self.figures: dict[str, int] = {}
        self.written: dict[str, str] = {}
        self.lists: dict[str, list[int]] = {}  # keys from LISTED_FIGURE_KEYS
        self.lists_written: dict[str, list[str]] = {}
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
    if written[-1:] in ("K", "M", "G", "T") and written[:-1].replace(".", "", 1).isdigit():
        text = written + "iB"  # XLA's bare suffix is 1024-based
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
    # a paste cut right after the figure ("... Of the allocated memory 44.91 GiB i") still has it
    (
        "allocated_by_pytorch_bytes",
        ascii_re(r"Of the allocated memory " + _Q + r"(?: is\b| ?i?\s*$)"),
    ),
    ("reserved_unallocated_bytes", ascii_re(_Q + r" is reserved by PyTorch but unallocated")),
    # a paste cut inside the sentence ("..., and 87.85 MiB is reserved by PyTorch b", "..., and
    # 217.26 MiB is reserve"): the figure after ", and" that closes "Of the allocated memory"
    # (after its "allocated in private pools (e.g., CUDA Graphs)" clause, when printed) is
    # always the reserved-but-unallocated one
    (
        "reserved_unallocated_bytes",
        ascii_re(r"(?:is allocated by PyTorch|CUDA Graphs\)), and " + _Q + r" is(?: |$)"),
    ),
)
_TORCH_GPU = ascii_re(
    r"\(GPU {1,3}(\d{1,4});|\bGPU (\d{1,4}) has a total capac"
    r"|\bAllocation on device (\d{1,4})\b"
)
_OTHER_PROCESS = ascii_re(r"\bProcess (\d{1,10}) has " + _Q + r" memory in use")


# The 1.x parenthesised form's words after each figure. A paste cut inside them ("...; 1.32 GiB
# free; 9.29 GiB res", "20.68 GiB already allocate", "1.54 GiB reserved in total") still names
# its last figure: the cut words are the start of exactly one of these.
_TORCH_TAILS = (
    ("total capacity", "total_capacity_bytes"),
    ("already allocated", "already_allocated_bytes"),
    ("free", "free_bytes"),
    ("reserved in total by PyTorch", "reserved_total_bytes"),
    ("cached", "reserved_unallocated_bytes"),
)
_CUT_TAIL = ascii_re(r"[(;]\s?[^;()]{0,60}?" + _Q + r" ([a-z][a-zA-Z ]{1,40})\s*$")


def _read_cut_tail(text: str, f: Facts) -> None:
    """The last figure of a 1.x message cut inside the words that name it."""
    m = _CUT_TAIL.search(text[-200:])
    if not m:
        return
    words = m.group(2).rstrip()
    hits = [key for tail, key in _TORCH_TAILS if tail.startswith(words) and tail != words]
    if len(hits) == 1 and hits[0] not in f.figures:
        f.fig(hits[0], m.group(1))


def read_torch(text: str, f: Facts) -> None:
    # Markdown emphasis a reporter put around a figure ("has **17179869184.00 GiB** memory")
    text = text.replace("**", "").replace("__", "")
    _fields(text, f, _TORCH_FIELDS)
    _read_cut_tail(text, f)
    m = _TORCH_GPU.search(text)
    if m:
        f.set_gpu(m.group(1) or m.group(2) or m.group(3))
    listed: list[tuple[int, str]] = []
    for m in _OTHER_PROCESS.finditer(text):
        value = _to_bytes(m.group(2), False)
        if value is not None:
            listed.append((value, m.group(2).strip()))
    others = _other_processes(listed, f)
    if others:
        f.lists["other_processes_bytes"] = [v for v, _ in others]
        f.lists_written["other_processes_bytes"] = [w for _, w in others]
        f.figures["other_processes_total_bytes"] = sum(v for v, _ in others)
        f.written["other_processes_total_bytes"] = " + ".join(w for _, w in others)


# An allocator's own words next to an out-of-memory word, in engines with no form of their own
# (flashlight / ArrayFire: "Failed to allocate memory of size 152.00 MiB (Device: 0, Capacity:
# 14.75 GiB, Allocated: 13.93 GiB, Cached: 721.55 MiB) with error '... Device out of memory").
_GENERIC_FIELDS = (
    ("tried_to_allocate_bytes", ascii_re(r"\b[Ff]ailed to allocate (?:memory of size )?" + _Q)),
    ("total_capacity_bytes", ascii_re(r"[(,]\s?Capacity: " + _Q)),
    ("already_allocated_bytes", ascii_re(r"[(,]\s?Allocated: " + _Q)),
    # an engine's own "<what> alloc failed (64.00 MiB): out of memory"
    ("tried_to_allocate_bytes", ascii_re(r"\balloc(?:ation)? failed \(" + _Q + r"\)")),
    # faiss-gpu's StandardGpuResources (faiss/gpu/StandardGpuResources.cpp allocMemory):
    # "alloc fail type TemporaryMemoryBuffer dev 0 space Device stream 0x55fd... size
    # 1610612736 bytes (cudaMalloc error out of memory [2])": the request, in bytes. A wrapped
    # paste starts the message's line at "dev 0 space Device <tab>stream ...".
    (
        "tried_to_allocate_bytes",
        ascii_re(
            r"\bdev -?\d{1,3} space \w{1,20}\s{1,8}stream (?:0x)?[0-9a-fA-F]{1,16} size " + _Q
        ),
    ),
)


def read_generic(text: str, f: Facts) -> None:
    """A message that only says "out of memory" near an error word: PyTorch's figures when it
    is PyTorch's, else an allocator's "failed to allocate X (Capacity: Y, Allocated: Z)"."""
    read_torch(text, f)
    _fields(text, f, _GENERIC_FIELDS)


def _other_processes(listed: list[tuple[int, str]], f: Facts) -> list[tuple[int, str]]:
    """Sort the "Process N has X memory in use" lines into the job's own and the others'.

    PyTorch lists every process on the card and writes "this process has" for its own PID; in
    a container the job's PID is another number, so its own line reads like a stranger's. The
    job holds at least what PyTorch allocated: when "this process has" is missing, the one line
    with X at least that figure is the job (`process_in_use_bytes`); with no such figure, a
    single line is the job; no line that large means every line is another process. Of two
    candidates, the one within `_NON_TORCH_CAP` of what PyTorch reserved is the job when it is
    the only one; otherwise they, or several lines and no figure, cannot be told apart: neither
    figure is read.
    """
    if not listed:
        return []
    if "process_in_use_bytes" in f.figures:
        return listed
    floor = f.figures.get("allocated_by_pytorch_bytes")
    if floor is None:
        floor = f.figures.get("already_allocated_bytes")
    if floor is None:
        candidates = [0] if len(listed) == 1 else list(range(len(listed)))
    else:
        candidates = [k for k, (value, _) in enumerate(listed) if value >= floor]
        reserved = _reserved_by_pytorch(f)
        if len(candidates) > 1 and reserved is not None:
            # the job's process holds every segment PyTorch reserved (allocated + cached), not
            # only what is allocated; less a slack for the two figures' printed rounding
            candidates = [k for k in candidates if listed[k][0] >= reserved - _ROUNDING_SLACK]
            near = [k for k in candidates if listed[k][0] - reserved <= _NON_TORCH_CAP]
            if len(candidates) > 1 and len(near) == 1:
                # only one holds PyTorch's segments plus a plausible non-PyTorch overhead
                candidates = near
    if len(candidates) > 1:
        return []
    if candidates:
        f.fig("process_in_use_bytes", listed[candidates[0]][1])
    return [p for k, p in enumerate(listed) if k not in candidates]


_ROUNDING_SLACK = 16 * 2**20  # two figures rounded to 0.01 GiB: at most 10.24 MiB off
# What a job's process holds beyond PyTorch's reserved segments (CUDA context, cuBLAS / cuDNN
# workspaces, NCCL buffers): under a GiB in practice; 2 GiB is the bound used to pick the job
# out of several "Process N has X" lines.
_NON_TORCH_CAP = 2 * 2**30


def _reserved_by_pytorch(f: Facts) -> int | None:
    """What PyTorch's caching allocator holds on the card (allocated + reserved-unallocated)."""
    if "reserved_total_bytes" in f.figures:
        return f.figures["reserved_total_bytes"]
    allocated = f.figures.get("allocated_by_pytorch_bytes")
    cached = f.figures.get("reserved_unallocated_bytes")
    return allocated + cached if allocated is not None and cached is not None else None


_MPS_FIELDS = (
    ("allocated_by_pytorch_bytes", ascii_re(r"MPS allocated: " + _Q)),
    ("non_torch_bytes", ascii_re(r"other allocations: " + _Q)),
    ("allowed_bytes", ascii_re(r"max allowed: " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"Tried to allocate " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"Invalid buffer size: " + _Q)),
)


def read_mps(text: str, f: Facts) -> None:
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


def read_vllm_kv(text: str, f: Facts) -> None:
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


def read_tgi(text: str, f: Facts) -> None:
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


def read_llama(text: str, f: Facts) -> None:
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


def read_ollama(text: str, f: Facts) -> None:
    m = _OLLAMA_SYS.search(text)
    if m:
        f.fig("tried_to_allocate_bytes", m.group(1))
        f.fig("free_bytes", m.group(2))
    read_llama(text, f)
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


# vLLM logs the KV-cache budget left after profiling; below zero (the weights and the profiled
# activations already exceed gpu_memory_utilization x capacity) the engine then refuses to start
# ("No available memory for the cache blocks" / check_enough_kv_cache_memory).
_VLLM_NEGATIVE_KV = ascii_re(r"Available KV cache memory: -(\d{1,6}(?:\.\d{1,6})? ?GiB)")


def read_vllm_startup(text: str, f: Facts) -> None:
    m = _VLLM_NEGATIVE_KV.search(text)
    if m and "kv_cache_bytes" not in f.figures:
        value = _to_bytes(m.group(1), True)
        if value is not None:
            f.figures["kv_cache_bytes"] = -value
            f.written["kv_cache_bytes"] = "-" + m.group(1)
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


def read_fraction(text: str, f: Facts) -> None:
    _fields(text, f, _FRACTION_FIELDS)
    m = _TORCH_GPU.search(text)
    if m:
        f.set_gpu(m.group(1) or m.group(2) or m.group(3))


# TensorFlow, JAX and XLA (the TSL BFC allocator, stream executor and XLA's buffers).
# Sizes are HumanReadableNumBytes (1024-based "84.60MiB", "512B") or exact byte counts;
# where both are printed ("2.12G (2282521344 bytes)", "(rounded to 1073741824)") the exact one
# is read.
_XLA_EXACT = (
    # the request itself, when printed as a byte count (Intel's ITEX allocator: "trying to
    # allocate 10529419660 Bytes (rounded to 10529419776 Bytes)"). "(rounded to N)" is the
    # allocator's bin size, at least the request: not the request ("27.93GiB (rounded to
    # 29995136256)" asked for 27.93 GiB; 29995136256 B would print as 27.94GiB).
    ("tried_to_allocate_bytes", ascii_re(r"trying to allocate (\d{1,20}) [Bb]ytes\b")),
    ("tried_to_allocate_bytes", ascii_re(r"failed to allocate \S{1,24} \((\d{1,20}) bytes\)")),
    (
        "tried_to_allocate_bytes",
        ascii_re(r"Failed to allocate request for \S{1,24} \((\d{1,20})B\)"),
    ),
)
_XLA_FIELDS = (
    ("tried_to_allocate_bytes", ascii_re(r"[Rr]an out of memory trying to allocate " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"[Oo]ut of memory while trying to allocate " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"[Oo]ut of memory allocating " + _Q)),
    ("tried_to_allocate_bytes", ascii_re(r"Failed to allocate request for " + _Q)),
    # XLA:TPU prints sizes with a bare 1024-based suffix: "Attempting to reserve 11.35G at the
    # bottom of memory. ... There are 12.18G free, 0B reserved, and 10.52G reservable."
    (
        "tried_to_allocate_bytes",
        ascii_re(r"(?:Attempting to (?:reserve|allocate)|Failed to allocate request for) " + _BARE),
    ),
    ("free_bytes", ascii_re(r"There are " + _BARE + r" free")),
    # XLA:TPU's compile-time check: "Ran out of memory in memory space hbm. Used 21.95G of
    # 15.48G hbm." -- the second size is the chip's HBM
    (
        "total_capacity_bytes",
        ascii_re(r"\bUsed \d{1,9}(?:\.\d{1,6})?[KMGT]?B? of " + _BARE + r" hbm\b"),
    ),
)
_XLA_GPU = ascii_re(r"device:GPU:(\d{1,3})\b|\bGPU_(\d{1,3})_bfc\b|device ordinal (\d{1,3})\b")


def read_xla(text: str, f: Facts) -> None:
    for key, pattern in _XLA_EXACT:
        m = pattern.search(text)
        if m and key not in f.figures:
            f.figures[key] = int(m.group(1))
            f.written[key] = m.group(0)
    _fields(text, f, _XLA_FIELDS)
    m = _XLA_GPU.search(text)
    if m:
        f.set_gpu(m.group(1) or m.group(2) or m.group(3))


# PaddlePaddle's allocator message (1024-based sizes written kB/MB/GB: the form reads them with
# binary_si); the "allocated" figure is the card's total less its free memory (cudaMemGetInfo),
# every process together.
_PADDLE_FIELDS = (
    ("tried_to_allocate_bytes", ascii_re(r"Cannot allocate " + _Q + r" memory on GPU")),
    ("already_allocated_bytes", ascii_re(_Q + r" memory has been allocated")),
    ("free_bytes", ascii_re(r"available memory is only " + _Q)),
)
_PADDLE_GPU = ascii_re(r"Out of memory error on GPU (\d{1,3})\.")


def read_paddle(text: str, f: Facts) -> None:
    _fields(text, f, _PADDLE_FIELDS)
    m = _PADDLE_GPU.search(text)
    if m:
        f.set_gpu(m.group(1))


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


def read_trtllm(text: str, f: Facts) -> None:
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
    (
        "tried_to_allocate_bytes",
        ascii_re(r"Cannot allocate (\d{1,20}) bytes: no memory"),
    ),  # tinygrad
    # a driver call's own failure ("cuMemAllocAsync failed to allocate 1225195446464 bytes"),
    # a device runtime's ("Not enough space to allocate 204800000 B DRAM buffer")
    ("tried_to_allocate_bytes", ascii_re(r"\bfailed to allocate (\d{1,20}) bytes\b")),
    ("tried_to_allocate_bytes", ascii_re(r"\bspace to allocate (\d{1,20}) B\b")),
    ("tried_to_allocate_bytes", ascii_re(r"allocate tensor with (\d{1,20}) bytes\b")),  # DirectML
    # NVIDIA PhysX's GPU allocator: "PxgCudaDeviceMemoryAllocator fail to allocate memory
    # 339738624 bytes!! Result = 2"
    ("tried_to_allocate_bytes", ascii_re(r"\bfail to allocate memory (\d{1,20}) bytes\b")),
    # Ascend CANN's runtime under "Memory_Allocation_Failure(EL0004)": "Call rtMalloc fail,
    # purpose: page caching, type = 2, size:3221291008, device_id:0"
    (
        "tried_to_allocate_bytes",
        ascii_re(r"\brtMalloc fail, purpose: [^,\n]{1,40}, type = \d{1,3}, size:(\d{1,20})\b"),
    ),
)
_ORT_GPU = ascii_re(r"; GPU=(\d{1,3})\b")


# CuPy's memory pool (cupy/cuda/memory.pyx OutOfMemoryError): "out of memory to allocate
# 747110400 bytes (total 5722942464 bytes)" (CuPy 6 and older), "Out of memory allocating
# 747,110,400 bytes (allocated so far: 5,722,942,464 bytes)." (CuPy 7 on)
_CUPY_REQUEST = ascii_re(
    r"[Oo]ut of memory (?:to allocate|allocating) (\d{1,3}(?:,\d{3}){1,6}|\d{1,20}) bytes"
)


def read_cupy(text: str, f: Facts) -> None:
    m = _CUPY_REQUEST.search(text)
    if m:
        f.figures["tried_to_allocate_bytes"] = int(m.group(1).replace(",", ""))
        f.written["tried_to_allocate_bytes"] = m.group(1) + " bytes"


# MIOpen (ROCm's DNN library) on HIP: "MIOpen Error: .../handlehip.cpp:68: Memory not available
# to allocate buffer: 528515072" (the buffer's size in bytes, with no unit)
_MIOPEN_REQUEST = ascii_re(r"Memory not available to allocate buffer: (\d{1,20})\b")


def read_miopen(text: str, f: Facts) -> None:
    m = _MIOPEN_REQUEST.search(text)
    if m:
        f.figures["tried_to_allocate_bytes"] = int(m.group(1))
        f.written["tried_to_allocate_bytes"] = m.group(1)


def _read_exact_requests(text: str, f: Facts) -> None:
    for key, pattern in _EXACT_BYTES:
        m = pattern.search(text)
        if m and key not in f.figures:
            f.figures[key] = int(m.group(1))
            f.written[key] = m.group(1) + " bytes"


# A line after the message: only its exact request (CANN prints it a few lines below); a request
# the message itself printed is kept.
read_exact_bytes_tail = _read_exact_requests


def read_exact_bytes(text: str, f: Facts) -> None:
    read_driver_free_total(text, f)
    _read_exact_requests(text, f)
    m = _ORT_GPU.search(text)
    if m:
        f.set_gpu(m.group(1))


# XLA's cudaMallocAsync allocator prints the driver's view on the line after its failure:
# " Reported by CUDA: Free memory/Total memory: 22635544576/85095874560" (bytes).
_DRIVER_FREE_TOTAL = ascii_re(
    r"\bFree memory/Total memory: {0,4}(\d{1,20}) {0,4}/ {0,4}(\d{1,20})\b"
)


def read_driver_free_total(text: str, f: Facts) -> None:
    m = _DRIVER_FREE_TOTAL.search(text)
    if m:
        for key, digits in (("free_bytes", m.group(1)), ("total_capacity_bytes", m.group(2))):
            if key not in f.figures:
                f.figures[key] = int(digits)
                f.written[key] = digits


_MLX_ALLOC = ascii_re(
    r"\[metal::malloc\] (?:Unable to allocate|Attempting to allocate) (\d{1,20}) bytes"
)


def read_mlx(text: str, f: Facts) -> None:
    m = _MLX_ALLOC.search(text)
    if m:
        f.fig("tried_to_allocate_bytes", m.group(1))


# NCCL's alloc.h after a failed cudaMalloc: WARN("Failed to CUDA calloc %ld bytes", ...); the
# same for "CUDA malloc", "CUDA host alloc" and "CUDA calloc async" (newer releases).
_NCCL_SIZE = ascii_re(
    r"\bFailed to CUDA (?:calloc|malloc|host alloc|calloc async) (\d{1,20}) bytes"
)


def read_nccl_size(text: str, f: Facts) -> None:
    m = _NCCL_SIZE.search(text)
    if m and "tried_to_allocate_bytes" not in f.figures:
        f.figures["tried_to_allocate_bytes"] = int(m.group(1))
        f.written["tried_to_allocate_bytes"] = m.group(1) + " bytes"


# XLA's "BufferAssignment OOM Debugging." block (BufferAssignment::StatsString, sizes in
# HumanReadableNumBytes, 1024-based): the compiled program's parameters (the weights and inputs
# it is passed) and its preallocated temporaries (the activations at their peak).
_XLA_STATS = (
    ("model_weights_bytes", ascii_re(r"^\s{0,40}parameter allocation: {1,40}" + _Q)),
    ("activation_peak_bytes", ascii_re(r"^\s{0,40}preallocated temp allocation: {1,40}" + _Q)),
)


def read_xla_buffer_stats(text: str, f: Facts) -> None:
    _fields(text, f, _XLA_STATS)


# libplacebo (FFmpeg's Vulkan filters) prints sizes with PRINT_SIZE: 1024-based, one letter
# ("Allocation of size   15M failed: VK_ERROR_OUT_OF_DEVICE_MEMORY"), 15M = 15 x 2^20 B.
_VK_SIZE = ascii_re(r"\bAllocation of size\s{1,8}(\d{1,9}(?:\.\d{1,3})?)([KMGT])\s{1,3}failed\b")
_VK_UNIT = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def read_vulkan_size(text: str, f: Facts) -> None:
    m = _VK_SIZE.search(text)
    if m and "tried_to_allocate_bytes" not in f.figures:
        value = Decimal(m.group(1)) * _VK_UNIT[m.group(2)]
        f.figures["tried_to_allocate_bytes"] = int(value.to_integral_value(ROUND_HALF_EVEN))
        f.written["tried_to_allocate_bytes"] = m.group(1) + m.group(2)


def read_nothing(text: str, f: Facts) -> None:
    return None
