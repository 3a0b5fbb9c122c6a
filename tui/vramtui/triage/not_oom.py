"""What a paste is when it is not a GPU out-of-memory error, in one plain phrase.

The logs that look closest to an out-of-memory error, and are not one:
- the host ran out of RAM: PyTorch's `DefaultCPUAllocator: not enough memory`, the kernel's
  OOM killer (`Killed`, `killed by signal: Killed`, exit code 137 / -9, SIGKILL, `oom-kill`);
- a GPU kernel read or wrote out of bounds (`an illegal memory access was encountered`);
- an NCCL collective timed out (`Watchdog caught collective operation timeout`), or NCCL
  failed with another error;
- another CUDA / HIP error (`CUDA error: device-side assert triggered`, ...);
- a warning or an informational line that mentions memory, the run going on after it.

`near_miss(log)` finds these with plain substring searches over the cleaned lines (linear in
the size of the paste) and says which, with the line (original numbering) that shows it; the
first match in the order above wins. None when none is there.
"""

from __future__ import annotations

import re

from vramtui.triage.log_prefixes import CleanLog

_A = re.ASCII
NEAR_MISS_KINDS = (
    "host_ram",
    "killed",
    "illegal_access",
    "nccl_timeout",
    "nccl_error",
    "gpu_error",
    "notice",
)
MAX_QUOTE_CHARS = 160  # of the line quoted as evidence

# PyTorch's CPU allocator; TensorFlow's ("OOM when allocating tensor ... on
# /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu", "mklcpu" with oneDNN)
# C++'s operator new ("terminate called after throwing an instance of 'std::bad_alloc'") and
# Node.js's V8 ("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of
# memory") fail on host memory too.
HOST_RAM_ALLOC = (
    "DefaultCPUAllocator",
    "by allocator cpu",
    "by allocator mklcpu",
    "std::bad_alloc",
    "JavaScript heap out of memory",
    # page-locked host memory (cudaHostAlloc): llama.cpp's "failed to allocate 24000.00 MiB of
    # pinned memory: out of memory; using pageable ... fallback"
    "of pinned memory",
    # MuJoCo's arena in host memory (engine_memory.c): "mj_stackAlloc: out of memory, stack
    # overflow"
    "mj_stackAlloc: out of memory",
)
# ollama's scheduler before it loads a model: "model requires more system memory (5.0 GiB) than
# is available (3.9 GiB)" compares the host's free RAM with what the CPU part needs
_HOST_RAM_CHECK = ("requires more system memory",)
_KILLED_MARKS = (
    "Killed",
    "killed",
    "SIGKILL",
    "exit code 137",
    "exitcode: 137",
    "exit status 137",
    "exitcode: -9",
    "exit code: -9",
    "exit code -9",
    "error code -9",
    "exit status -9",
    "signal 9",
    "oom-kill",
    "oom_kill",
    "Out of memory: Killed process",
    "\u5df2\u6740\u6b7b",  # "已杀死": the shell's "Killed" in a Chinese locale
)
# A "killed" line must say the process was killed, not talk about it ("Killing local
# workers" is vLLM stopping its own workers after an error).
_KILLED_LINE = re.compile(
    r"(?:^|[\s\]|:>])(?:Killed|killed)\s*\.?\s*$|killed by signal|\bSIGKILL\b|"
    r"exit ?(?:code|status)[: ]{0,2}(?:137|-9)\b|exitcode: (?:137|-9)\b|error code -9\b|"
    r"\bsignal 9\b|oom[-_]kill|Out of memory: Killed process|\u5df2\u6740\u6b7b"
)
# "memory access was encountered": a terminal cut inside "illegal"
_ILLEGAL = (
    "illegal memory access",
    "memory access was encountered",
    "IllegalAddress",
    "ILLEGAL_ADDRESS",
)
_NCCL_TIMEOUT = (
    "Watchdog caught collective operation timeout",
    "NCCL timeout",
    "Timeout at NCCL work",
    "NCCL operations have failed or timed out",
)
_NCCL_ERROR = ("NCCL Error", "NCCL error", "ncclUnhandledCudaError", "ncclSystemError")
_CUDA_ERROR = ("CUDA error: ", "HIP error: ", "CUDA Error: ", "cudaError")
_CUDA_ERROR_LINE = re.compile(r"(?:CUDA|HIP) [Ee]rror: (?!out of memory)[a-z][^\n]{0,120}", _A)
_MEMORY_WORDS = ("memory", "Memory", "MEMORY", "VRAM", "mlock", "MemUsage")
_NOTICE_LINE = re.compile(r"(?i:warning|warn\b|\bnote\b|info\b|\[info\]|\bnotice\b)", _A)


def _quote(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= MAX_QUOTE_CHARS else line[: MAX_QUOTE_CHARS - 3] + "..."


def _first_line_with(log: CleanLog, needles: tuple[str, ...]) -> int | None:
    """The first cleaned line holding one of `needles` (plain substring searches)."""
    text = "\n".join(log.lines)
    best = -1
    for needle in needles:
        pos = text.find(needle)
        if pos != -1 and (best == -1 or pos < best):
            best = pos
    if best == -1:
        return None
    return text.count("\n", 0, best)


def _at(log: CleanLog, i: int) -> str:
    return f"line {log.line_nos[i]}: {_quote(log.lines[i])}"


def near_miss(log: CleanLog) -> tuple[str, str] | None:
    """(kind, one plain phrase): what the paste shows instead of a GPU out-of-memory error
    (see the module docstring); kind is one of NEAR_MISS_KINDS. None: none of these."""
    i = _first_line_with(log, HOST_RAM_ALLOC)
    if i is not None:
        return "host_ram", (
            "the host ran out of system RAM (CPU memory), not GPU memory: a CPU-side allocator "
            f"could not allocate ({_at(log, i)})"
        )
    i = _first_line_with(log, _HOST_RAM_CHECK)
    if i is not None:
        return "host_ram", (
            "the server refused to load the model for lack of system RAM (host memory), not "
            f"GPU memory ({_at(log, i)})"
        )
    killed = _killed_line(log)
    if killed is not None:
        return "killed", (
            "the process was killed (SIGKILL / exit 137), which usually means the host ran "
            "out of system RAM (the kernel's OOM killer), not GPU memory "
            f"({_at(log, killed)})"
        )
    i = _first_line_with(log, _ILLEGAL)
    if i is not None:
        return "illegal_access", (
            "a GPU kernel accessed memory out of its bounds (an illegal memory access): a bug "
            "or a bad index, not a lack of memory; rerun with CUDA_LAUNCH_BLOCKING=1 to find "
            f"the kernel ({_at(log, i)})"
        )
    i = _first_line_with(log, _NCCL_TIMEOUT)
    if i is not None:
        return "nccl_timeout", (
            "an NCCL collective timed out: one rank stopped reaching it (hung, crashed or far "
            f"slower than the others), not GPU memory ({_at(log, i)})"
        )
    i = _first_line_with(log, _NCCL_ERROR)
    if i is not None:
        return "nccl_error", f"an NCCL error, not an out-of-memory error ({_at(log, i)})"
    i = _first_line_with(log, _CUDA_ERROR)
    if i is not None:
        for j in range(i, min(len(log.lines), i + 2_000)):
            m = _CUDA_ERROR_LINE.search(log.lines[j])
            if m:
                return "gpu_error", (
                    f"a GPU error other than out of memory ({m.group(0).strip()}; line "
                    f"{log.line_nos[j]})"
                )
    notice = _memory_notice(log)
    if notice is not None:
        return "notice", (
            "only a warning or a notice that mentions memory, no error after it "
            f"({_at(log, notice)})"
        )
    return None


def _killed_line(log: CleanLog) -> int | None:
    """The last line (of the last 200) that says the process was killed."""
    for i in range(len(log.lines) - 1, max(-1, len(log.lines) - 200), -1):
        line = log.lines[i]
        if any(k in line for k in _KILLED_MARKS) and _KILLED_LINE.search(line):
            return i
    return None


def _memory_notice(log: CleanLog) -> int | None:
    """The first warning / notice line (its text or its stripped prefix says so) that
    mentions memory."""
    for i, line in enumerate(log.lines):
        if not any(w in line for w in _MEMORY_WORDS):
            continue
        if _NOTICE_LINE.search(line[:200]) or _NOTICE_LINE.search(log.prefixes[i]):
            return i
    return None


__all__ = ["NEAR_MISS_KINDS", "near_miss"]


# TensorFlow's BFC allocator backs off when the driver refuses a region: it logs "failed to
# allocate 6.35G (6814913792 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY" and retries at 0.9x
# (an E-level log line, not a raised error). Beside a bare Python MemoryError (numpy, a data
# loader: host RAM) those lines are the retries, not the failure.
_RETRY_LINE = "bytes) from device"
_HOST_MEMORY_ERROR = re.compile(
    r"MemoryError(?::\s?(?![^\n]{0,200}(?:CUDA|GPU|device|VRAM))[^\n]{0,200})?\s*$", _A
)


def host_error_beside_retries(messages: list[str], last_exception: str | None) -> bool:
    """True when every failure found is an allocator retry line and the exception the program
    raised is a host MemoryError (so the text holds no GPU out-of-memory error)."""
    if not messages or last_exception is None:
        return False
    if not all(_RETRY_LINE in m for m in messages):
        return False
    return bool(_HOST_MEMORY_ERROR.match(last_exception.strip()[:400]))
