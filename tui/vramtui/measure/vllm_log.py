"""Read the memory figures vLLM prints while it starts, in the V0 and V1 engines' formats.

`parse_vllm_log(text)` returns what a vLLM start-up log says about memory: the weights, the
profiled non-torch memory and activation peak, the KV cache pool (in bytes and in blocks or
tokens), the maximum concurrency, the CUDA-graph memory, the GPU's total memory; and the
configuration it ran with (version, engine, model, dtype, max_model_len, tensor-parallel size,
gpu_memory_utilization, KV-cache dtype, block size). Each figure keeps the line it came from
(1-based number and text) and the rank that printed it where the line's process prefix names
one ("(VllmWorker rank=1 pid=..)", "(VllmWorker TP1 pid=..)", "(Worker_TP1 pid=..)"); V0 worker
prefixes ("(VllmWorkerProcess pid=..)", "(RayWorkerWrapper pid=..)") and unprefixed lines name
none, so their rank is None.

The log lines, by the vLLM source that prints them (file: format string). The version ranges
are where the format was seen in released logs and source, approximate at the edges:

V0 engine (vLLM 0.4 to about 0.10; `vllm/worker`, `vllm/executor`):
  model_runner.py      "Loading model weights took %.4f GB"  (0.4 - 0.7)
                       "Model loading took %.4f GB and %.6f seconds"  (about 0.7.3 - 0.8;
                       "GiB" in later V0 code)
  gpu_executor.py / distributed_gpu_executor.py / executor_base.py
                       "# GPU blocks: %d, # CPU blocks: %d"  (0.4 - 0.6.4)
                       "# %s blocks: %d, # CPU blocks: %d"  (the device: "CUDA", "cuda"; 0.7 on)
                       "Maximum concurrency for %s tokens per request: %.2fx"  (0.6.4 on)
  worker.py            "Memory profiling results: total_gpu_memory=%.2fGiB initial_memory_usage=
                       %.2fGiB peak_torch_memory=%.2fGiB memory_usage_post_profile=%.2fGib
                       non_torch_memory=%.2fGiB kv_cache_size=%.2fGiB gpu_memory_utilization=%.2f"
                       (0.6.4, PR #9352; peak_torch_memory there includes the weights)
                       "Memory profiling takes %.2f seconds\nthe current vLLM instance can use
                       total_gpu_memory (%.2fGiB) x gpu_memory_utilization (%.2f) = %.2fGiB\n
                       model weights take %.2fGiB; non_torch_memory takes %.2fGiB; PyTorch
                       activation peak memory takes %.2fGiB; the rest of the memory reserved
                       for KV Cache is %.2fGiB."  (about 0.6.6 - 0.10; PRs #11809, #12126); the
                       tab-separated table of PR #10511 ("total_gpu_memory\t79.22GiB", ..) too
  model_runner.py      "Graph capturing finished in %.0f secs, took %.2f GiB"  (0.6.4 on; "secs."
                       and no size before)
V1 engine (vLLM 0.7 to current; `vllm/v1`):
  worker/gpu_model_runner.py  "Model loading took %.4f GB and %.6f seconds" (first V1 releases),
                       "%.4f GiB and %.6f seconds" (about 0.8 - 0.11), "Model loading took %s GiB
                       memory and %.6f seconds" (format_gib, 2026; also worker/gpu/model_runner.py)
  worker/gpu_worker.py "Available KV cache memory: %.2f GiB" / "%s GiB"  (PR #19312, about 0.9.2)
                       DEBUG: MemoryProfilingResult: "Memory profiling takes %.2f seconds. Total
                       non KV cache memory: %sGiB; torch peak memory increase: %sGiB; non-torch
                       forward increase memory: %sGiB; weights memory: %sGiB."
                       DEBUG: "Initial free memory: %s GiB; Requested memory: %f (util), %s GiB"
  core/kv_cache_utils.py "GPU KV cache size: %s tokens" and "Maximum concurrency for %s tokens
                       per request: %.2fx" (two lines; one comma-joined line in 2026 code)
  metrics/loggers.py   "[Engine 000: ]vllm cache_config_info with initialization after
                       num_gpu_blocks is: %d"
  worker/gpu_model_runner.py "Graph capturing finished in %.0f secs, took %.2f GiB"
Configuration: llm_engine.py / v1/engine/core.py "Initializing a[n] [V0 |V1 ]LLM engine (v%s) with
config: model=.., dtype=.., max_seq_len=.., tensor_parallel_size=.., kv_cache_dtype=.."; the API
server's "vLLM API server version %s", "args: Namespace(..)" (to about 0.9) and "non-default
args: {..}" (after); "Using max model len %s"; "Setting attention block size to %d tokens".

Units: every vLLM memory figure is bytes divided by 2**30 (`float(2**30)`, `GiB_bytes`,
`1 << 30`, `1024**3`), including the ones it labels "GB" (V0 "Loading model weights took 14.9888
GB" and "Model loading took 0.4678 GB"). So "GB"/"GiB" are both read as 2**30 bytes and
"MB"/"MiB" as 2**20: bytes = round(float(number) * 2**30). `as_written` keeps the label printed.

What is stated is recorded, nothing derived: the 0.6.4 line's peak_torch_memory includes the
weights, so it gives no activation_peak figure; activation_peak comes only from "PyTorch
activation peak memory takes" (V0) and "torch peak memory increase" (V1).

A log may hold several start-ups (a restart loop): a new one begins at an engine or API-server
start line that follows memory figures, and the last start-up with figures is read. A start
that failed with an out-of-memory error before it finished starting raises `LogImportError`
pointing to `vramtui triage`, as does an out-of-memory log without figures.

Linear in the size of the text: candidate lines are found by one search for a few literal
anchors, only those lines meet the regexes, every quantifier is bounded, and no line is read
past its first 20,000 characters. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vramtui.measure.errors import LogImportError

GIB = 2**30

FIGURE_NAMES = (
    "weights",
    "non_torch",
    "activation_peak",
    "kv_cache",
    "total_gpu_memory",
    "cuda_graph",
    "gpu_blocks",
    "cpu_blocks",
    "kv_cache_tokens",
    "max_concurrency",
)
BYTE_FIGURES = frozenset(
    {"weights", "non_torch", "activation_peak", "kv_cache", "total_gpu_memory", "cuda_graph"}
)
FORMATS = ("v0", "v0-profiling", "v1")

_MAX_LINE = 20_000
_A = re.ASCII

# vLLM divides by 2**30 whatever it prints ("GB" or "GiB"); see the module docstring.
_UNIT_BYTES = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def _c(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _A)


_NUM = r"-?\d{1,12}(?:\.\d{1,12})?"
_FLOAT = r"(\d{1,3}(?:\.\d{1,6})?)"
_COUNT = r"(\d{1,3}(?:,\d{3}){1,6}|\d{1,15})"
_Q = r"(?P<q>(?P<n>" + _NUM + r") ?(?P<u>[KMGTkmgt]i?[Bb]))(?![A-Za-z])"

# One search over the whole text finds the candidate lines: every line this module reads holds
# at least one of these literal anchors.
_ANCHORS = re.compile(
    "took|emory|weights take|KV Cache|KV cache|blocks|concurrency|LLM engine|API server|args"
    "|max model len|block size to|load model|startup complete|kv_cache_size"
)

_ANSI = _c(r"\x1b\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>78]")
_HEADER = _c(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d")
_LEVEL = _c(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")
_PROC = _c(r"[(\[]([A-Za-z][\w .=-]{0,60}?)[ ,]{1,2}pid=\d{1,10}[^()\[\]]{0,80}[)\]]")
_PROC_RANK = _c(r"\brank=(\d{1,5})\b")
_PROC_TP = _c(r"(?:^|[_ ])TP(\d{1,5})\b")
_PROC_PP = _c(r"(?:^|[_ ])PP(\d{1,5})(?:\b|_)")

# (figure name, a literal the line must hold, pattern, format hint): "v1" lines exist only in the
# V1 engine, "v0p" lines are V0's memory-profiling breakdown, "v0w" V0's "Loading model weights
# took"; None is shared by both engines.
_BYTE_PATTERNS: tuple[tuple[str, str, re.Pattern[str], str | None], ...] = (
    ("weights", "weights took", _c(r"Loading model weights took " + _Q), "v0w"),
    ("weights", "loading took", _c(r"Model loading took " + _Q), None),
    ("weights", "weights take", _c(r"model weights take\s{1,16}" + _Q), "v0p"),
    ("weights", "weights memory", _c(r"(?<![\w-])weights memory: " + _Q), "v1"),
    ("total_gpu_memory", "total_gpu_memory", _c(r"total_gpu_memory(?: \(|=|\s{1,16})" + _Q), "v0p"),
    ("non_torch", "non_torch_memory", _c(r"non_torch_memory(?: takes |=|\s{1,16})" + _Q), "v0p"),
    ("non_torch", "non-torch", _c(r"non-torch forward increase memory: " + _Q), "v1"),
    (
        "activation_peak",
        "activation peak",
        _c(r"PyTorch activation peak memory(?: takes |\s{1,16})" + _Q),
        "v0p",
    ),
    ("activation_peak", "peak memory", _c(r"(?<![\w-])torch peak memory increase: " + _Q), "v1"),
    (
        "kv_cache",
        "KV Cache is",
        _c(r"the rest of the memory reserved for KV Cache is " + _Q),
        "v0p",
    ),
    ("kv_cache", "kv_cache_size=", _c(r"(?<!\w)kv_cache_size=" + _Q), "v0p"),
    ("kv_cache", "available_kv", _c(r"available_kv_cache_memory\s{1,16}" + _Q), "v0p"),
    ("kv_cache", "KV cache memory", _c(r"Available KV cache memory: " + _Q), "v1"),
    (
        "cuda_graph",
        "Graph capturing",
        _c(r"Graph capturing finished in \d{1,9}(?:\.\d{1,6})? secs?, took " + _Q),
        None,
    ),
)
_BLOCKS = _c(r"# (\w{1,12}) blocks: (\d{1,12})(?:, # CPU blocks: (\d{1,12}))?")
_V1_BLOCKS = _c(r"num_gpu_blocks is: (\d{1,12})")
_KV_TOKENS = _c(r"GPU KV cache size: " + _COUNT + r" tokens")
_CONCURRENCY = _c(
    r"Maximum concurrency for " + _COUNT + r" tokens per request: (\d{1,9}(?:\.\d{1,6})?)x"
)

_ENGINE_INIT = _c(
    r"Initializing an? (?:(V[01]) )?LLM engine (?:\(v?([^\s()]{1,64})\) )?with config: "
)
_API_VERSION = _c(r"vLLM API server version v?([^\s,;]{1,64})")
_MAX_LEN = _c(r"Using max model len (\d{1,9})")
_BLOCK_SIZE = _c(r"Setting attention block size to (\d{1,9}) tokens")
_LOAD_MODEL = _c(r"Starting to load model ([^\s]{1,512}?)(?:\.\.\.|$)")
_UTIL_PROFILE = _c(r"gpu_memory_utilization(?: \(|=|\s{1,16})" + _FLOAT)
_UTIL_REQUESTED = _c(r"Requested memory: " + _FLOAT + r" \(util\)")

_FAILURE = _c(
    r"(?:CUDA|HIP|XPU|NPU) out of memory|CUDA error: out of memory|OutOfMemoryError"
    r"|No available memory for the cache blocks|KV cache is needed, which is larger than"
    r"|that can be stored in KV cache|is less than desired GPU memory utilization"
)
_COMPLETE = _c(
    r"Application startup complete|init engine \(profile, create kv cache, warmup model\) took"
    r"|Starting vLLM API server"
)
_SNIFF = re.compile(
    r"vLLM API server version|LLM engine \(v|Model loading took|Loading model weights took"
    r"|# (?:GPU|cuda|CUDA) blocks: \d|GPU KV cache size: \d|Available KV cache memory: -?\d"
    r"|Maximum concurrency for [\d,]{1,20} tokens per request|memory reserved for KV Cache is"
    r"|Memory profiling results: total_gpu_memory=|[/\\]vllm[/\\](?:v1|worker|engine|executor)[/\\]"
)

_CONFIG_KEYS = ("model", "dtype", "max_seq_len", "tensor_parallel_size", "kv_cache_dtype")
_ARG_KEYS = (
    "model",
    "dtype",
    "max_model_len",
    "tensor_parallel_size",
    "kv_cache_dtype",
    "block_size",
    "gpu_memory_utilization",
)
_EQ_ARG = {
    k: _c(r"(?<![\w.])" + k + r"=(?:'([^']{0,512})'|\"([^\"]{0,512})\"|([^\s,'\")]{1,128}))")
    for k in set(_CONFIG_KEYS) | set(_ARG_KEYS)
}
_DICT_ARG = {
    k: _c(r"'" + k + r"': (?:'([^']{0,512})'|\"([^\"]{0,512})\"|([^\s,'\"}]{1,128}))")
    for k in _ARG_KEYS
}

# Priorities of the sources of a setting: what the engine resolved beats what was asked for.
_P_PROFILE, _P_CONFIG, _P_ARGS, _P_HINT = 4, 3, 2, 1


@dataclass(frozen=True)
class VllmFigure:
    """One memory figure vLLM printed, with the line it came from."""

    name: str  # one of FIGURE_NAMES
    bytes: int | None  # byte figures: round(float(number) * 2**30) for "GiB"/"GB"
    value: float | None  # counts: blocks, tokens, concurrency factor
    as_written: str  # "14.99GiB", "14.9888 GB", "444,576 tokens", "54.27x", "27531"
    line: int  # 1-based line number in the text given
    text: str  # the log line, ANSI colours and surrounding blanks removed
    rank: int | None  # the rank named by the line's process prefix; None when none is named
    tokens_per_request: int | None = None  # max_concurrency: the max model length it is for


@dataclass(frozen=True)
class VllmStartup:
    """What a vLLM start-up log says about memory and the configuration it ran with."""

    figures: tuple[VllmFigure, ...]
    version: str | None
    engine: str | None  # "V0" | "V1" | None
    model: str | None
    dtype: str | None  # "bfloat16" (torch. prefix removed)
    max_model_len: int | None
    tensor_parallel_size: int | None
    gpu_memory_utilization: float | None
    kv_cache_dtype: str | None
    block_size: int | None
    format: str  # "v0" | "v0-profiling" | "v1"

    def figure(self, name: str, rank: int | None = None) -> VllmFigure | None:
        """The first figure called `name` printed by `rank`.

        With rank None: the first one printed without a rank, else the first of the lowest
        rank. None when the log has no such figure.
        """
        if name not in FIGURE_NAMES:
            raise ValueError(f"unknown vLLM figure {name!r}; one of {', '.join(FIGURE_NAMES)}")
        named = self.figures_named(name)
        if rank is not None:
            return next((f for f in named if f.rank == rank), None)
        unranked = next((f for f in named if f.rank is None), None)
        if unranked is not None or not named:
            return unranked
        return min(named, key=lambda f: (f.rank, f.line))

    def figures_named(self, name: str) -> tuple[VllmFigure, ...]:
        """Every figure called `name`, in log order (one per rank, or repeated)."""
        return tuple(f for f in self.figures if f.name == name)

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks named by figure lines, sorted."""
        return tuple(sorted({f.rank for f in self.figures if f.rank is not None}))


@dataclass(frozen=True)
class _Who:
    rank: int | None = None  # "rank=N": a global rank
    tp: int | None = None
    pp: int | None = None
    prefixed: bool = False  # the line has a process prefix
    header: bool = False  # the line has a "LEVEL mm-dd hh:mm:ss" header


@dataclass(frozen=True)
class _Raw:
    name: str
    nbytes: int | None
    value: float | None
    as_written: str
    line: int
    text: str
    who: _Who
    tokens: int | None = None


class _Segment:
    """One start-up: what was read from the lines between two start markers."""

    def __init__(self) -> None:
        self.raws: list[_Raw] = []
        self.meta: dict[str, tuple[int, object]] = {}
        self.hints: set[str] = set()
        self.failure: tuple[int, str] | None = None
        self.complete = False

    def set(self, key: str, value: object, priority: int) -> None:
        if value is None:
            return
        old = self.meta.get(key)
        if old is None or priority > old[0]:
            self.meta[key] = (priority, value)

    def get(self, key: str):
        got = self.meta.get(key)
        return None if got is None else got[1]


def _displayed(raw: str) -> list[str]:
    """The line as displayed: its CR-separated parts (progress bars, CRLF), no ANSI codes."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    if "\r" not in raw:
        return [raw.strip()]
    return [part.strip() for part in raw.split("\r") if part.strip()]


def _who(line: str) -> _Who:
    level = _LEVEL.search(line, 0, 400)
    region = line[: level.start()] if level else line[:400]
    header = bool(_HEADER.search(line, 0, 400))
    procs = _PROC.findall(region)
    if not procs:
        return _Who(header=header)
    name = procs[-1]  # the innermost: "(EngineCore_1 pid=1) (VllmWorker rank=1 pid=2)"
    m = _PROC_RANK.search(name)
    if m:
        return _Who(rank=int(m.group(1)), prefixed=True, header=header)
    tp = _PROC_TP.search(name)
    pp = _PROC_PP.search(name)
    return _Who(
        tp=int(tp.group(1)) if tp else None,
        pp=int(pp.group(1)) if pp else None,
        prefixed=True,
        header=header,
    )


def _bytes(number: str, unit: str) -> int:
    return round(float(number) * _UNIT_BYTES[unit[0].lower()])


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def _arg(pattern: re.Pattern[str], text: str) -> str | None:
    m = pattern.search(text)
    if not m:
        return None
    value = next((g for g in m.groups() if g is not None), None)
    if value is None or value in ("None", ""):
        return None
    return value


def _to_int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _to_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _dtype(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.removeprefix("torch.")
    return None if value == "auto" else value


class _Reader:
    def __init__(self) -> None:
        self.segments: list[_Segment] = [_Segment()]
        self._profile: tuple[int, _Who] | None = None  # the last "Memory profiling" line

    @property
    def seg(self) -> _Segment:
        return self.segments[-1]

    def _start(self) -> None:
        if self.seg.raws:
            self.segments.append(_Segment())

    def _fig(self, name, nbytes, value, as_written, line_no, line, who, tokens=None) -> None:
        self.seg.raws.append(_Raw(name, nbytes, value, as_written, line_no, line, who, tokens))

    def _config(self, text: str, priority: int, style: str) -> None:
        s = self.seg
        patterns = _EQ_ARG if style == "eq" else _DICT_ARG
        keys = _CONFIG_KEYS if priority == _P_CONFIG else _ARG_KEYS
        for key in keys:
            value = _arg(patterns[key], text)
            if value is None:
                continue
            if key == "model":
                s.set("model", value, priority)
            elif key == "dtype":
                s.set("dtype", _dtype(value), priority)
            elif key in ("max_seq_len", "max_model_len"):
                s.set("max_model_len", _to_int(value), priority)
            elif key == "tensor_parallel_size":
                s.set("tensor_parallel_size", _to_int(value), priority)
            elif key == "kv_cache_dtype":
                s.set("kv_cache_dtype", value, priority)
            elif key == "block_size":
                s.set("block_size", _to_int(value), priority)
            elif key == "gpu_memory_utilization":
                s.set("gpu_memory_utilization", _to_float(value), priority)

    def line(self, line: str, line_no: int) -> None:
        line = line[:_MAX_LINE]
        if "LLM engine" in line and "Initializing" in line:
            m = _ENGINE_INIT.search(line)
            if m:
                self._start()
                self.seg.set("engine", m.group(1) or "V0", _P_CONFIG)
                self.seg.set("version", m.group(2), _P_CONFIG)
                self._config(line[m.end() :], _P_CONFIG, "eq")
                return
        if "API server version" in line:
            m = _API_VERSION.search(line)
            if m:
                self._start()
                self.seg.set("version", m.group(1), _P_ARGS)
                return
        if "non-default args" in line:
            self._config(line, _P_ARGS, "dict")
            return
        if "args: Namespace(" in line:
            self._config(line, _P_ARGS, "eq")
            return
        self._figures(line, line_no)
        self._meta(line)
        seg = self.seg
        if seg.complete:
            return
        failing = seg.failure is None and ("emory" in line or "KV cache" in line)
        if failing and "raise " not in line and _FAILURE.search(line):  # not the source line
            seg.failure = (line_no, line)
        completing = "complete" in line or "took" in line or "API server" in line
        if completing and _COMPLETE.search(line):
            seg.complete = True

    def _meta(self, line: str) -> None:
        s = self.seg
        if "max model len" in line:
            m = _MAX_LEN.search(line)
            if m:
                s.set("max_model_len", int(m.group(1)), _P_ARGS)
        if "block size to" in line:
            m = _BLOCK_SIZE.search(line)
            if m:
                s.set("block_size", int(m.group(1)), _P_CONFIG)
        if "load model" in line:
            m = _LOAD_MODEL.search(line)
            if m:
                s.set("model", m.group(1), _P_HINT)

    def _who_for(self, line: str, line_no: int) -> _Who:
        who = _who(line)
        if not who.prefixed and not who.header and self._profile is not None:
            # a continuation of vLLM's multi-line profiling message printed without its prefix
            last_no, last_who = self._profile
            if line_no - last_no <= 3:
                return last_who
        return who

    def _figures(self, line: str, line_no: int) -> None:
        s = self.seg
        who: _Who | None = None
        if "Memory profiling" in line:
            who = _who(line)
            self._profile = (line_no, who)
        for name, key, pattern, hint in _BYTE_PATTERNS:
            if key not in line:
                continue
            m = pattern.search(line)
            if not m:
                continue
            if who is None:
                who = self._who_for(line, line_no)
            number, unit = m.group("n"), m.group("u")
            self._fig(name, _bytes(number, unit), None, m.group("q"), line_no, line, who)
            if hint:
                s.hints.add(hint)
            if name == "weights" and hint is None and unit.lower() == "gb":
                s.hints.add("v0w")
        if "gpu_memory_utilization" in line:
            m = _UTIL_PROFILE.search(line)
            if m:
                s.set("gpu_memory_utilization", float(m.group(1)), _P_PROFILE)
        if "(util)" in line:
            m = _UTIL_REQUESTED.search(line)
            if m:
                s.set("gpu_memory_utilization", float(m.group(1)), _P_PROFILE)
        if "blocks" in line:
            m = _BLOCKS.search(line)
            if m:
                who = who or self._who_for(line, line_no)
                self._fig("gpu_blocks", None, float(m.group(2)), m.group(2), line_no, line, who)
                if m.group(3):
                    cpu = m.group(3)
                    self._fig("cpu_blocks", None, float(cpu), cpu, line_no, line, who)
                s.hints.add("v0")
            m = _V1_BLOCKS.search(line)
            if m:
                who = who or self._who_for(line, line_no)
                self._fig("gpu_blocks", None, float(m.group(1)), m.group(1), line_no, line, who)
        if "KV cache size" in line:
            m = _KV_TOKENS.search(line)
            if m:
                who = who or self._who_for(line, line_no)
                tokens = _count(m.group(1))
                written = m.group(1) + " tokens"
                self._fig("kv_cache_tokens", None, float(tokens), written, line_no, line, who)
                s.hints.add("v1")
        if "concurrency" in line:
            m = _CONCURRENCY.search(line)
            if m:
                who = who or self._who_for(line, line_no)
                tokens = _count(m.group(1))
                factor = m.group(2)
                self._fig(
                    "max_concurrency", None, float(factor), factor + "x", line_no, line, who, tokens
                )
                s.set("max_model_len", tokens, _P_HINT)

    def result(self, source: str) -> VllmStartup:
        chosen = next((s for s in reversed(self.segments) if s.raws), None)
        lead = f"{source}: " if source else ""
        triage = f"`vramtui triage {source or '<log file>'}`"
        if chosen is None:
            failure = next((s.failure for s in self.segments if s.failure), None)
            if failure is not None:
                raise LogImportError(
                    f"{lead}this is a vLLM out-of-memory error (line {failure[0]}: "
                    f"{_clip(failure[1])}), not a start-up log; read it with {triage}"
                )
            raise LogImportError(
                f"{lead}no vLLM start-up memory lines found (looked for 'Model loading took', "
                "'# GPU blocks', 'GPU KV cache size', 'Available KV cache memory'); pass the log "
                "of the vLLM server start, from its first line to 'Application startup complete'"
            )
        if chosen.failure is not None:
            line_no, text = chosen.failure
            raise LogImportError(
                f"{lead}this vLLM start failed with an out-of-memory error at line {line_no} "
                f"({_clip(text)}) before it finished starting; read it with {triage}, or pass "
                "the log of a start that reached 'Application startup complete'"
            )
        return _startup(chosen)


def _clip(text: str, width: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _format(seg: _Segment, engine: str | None) -> str:
    if "v1" in seg.hints:
        return "v1"
    if "v0p" in seg.hints:
        return "v0-profiling"
    if "v0" in seg.hints:
        return "v0"
    if engine == "V1":
        return "v1"
    if engine == "V0" or "v0w" in seg.hints:
        return "v0"
    return "v1"


def _rank(who: _Who, tp_size: int | None) -> int | None:
    if who.rank is not None:
        return who.rank
    if who.tp is None:
        return None
    if not who.pp:
        return who.tp
    if tp_size:
        return who.pp * tp_size + who.tp  # vLLM's rank order within a data-parallel group
    return None


def _startup(seg: _Segment) -> VllmStartup:
    engine = seg.get("engine")
    fmt = _format(seg, engine)
    if engine is None:
        engine = "V1" if fmt == "v1" else "V0"
    tp_size = seg.get("tensor_parallel_size")
    figures = tuple(
        VllmFigure(
            name=r.name,
            bytes=r.nbytes,
            value=r.value,
            as_written=r.as_written,
            line=r.line,
            text=r.text,
            rank=_rank(r.who, tp_size),
            tokens_per_request=r.tokens,
        )
        for r in seg.raws
    )
    return VllmStartup(
        figures=figures,
        version=seg.get("version"),
        engine=engine,
        model=seg.get("model"),
        dtype=seg.get("dtype"),
        max_model_len=seg.get("max_model_len"),
        tensor_parallel_size=tp_size,
        gpu_memory_utilization=seg.get("gpu_memory_utilization"),
        kv_cache_dtype=seg.get("kv_cache_dtype"),
        block_size=seg.get("block_size"),
        format=fmt,
    )


def parse_vllm_log(text: str, source: str = "") -> VllmStartup:
    """Read the memory figures and configuration of a vLLM start-up log.

    `source` names the log in error messages (a path). Raises `LogImportError` (one line, with
    the fix) when the text holds no vLLM memory figure, or when it is an out-of-memory failure.
    """
    if not text.strip():
        raise LogImportError(
            f"{source + ': ' if source else ''}the log is empty; pass the log of the vLLM server "
            "start, from its first line to 'Application startup complete'"
        )
    reader = _Reader()
    pos = 0
    counted = 0  # newlines counted up to this offset
    line_no = 1
    size = len(text)
    while pos < size:
        m = _ANCHORS.search(text, pos)
        if m is None:
            break
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.start())
        if end == -1:
            end = size
        line_no += text.count("\n", counted, start)
        counted = start
        for part in _displayed(text[start : min(end, start + _MAX_LINE)]):
            reader.line(part, line_no)
        pos = end + 1
    return reader.result(source)


def looks_like_vllm_log(text: str) -> bool:
    """Whether the text looks like a vLLM log (start-up or failure): a cheap sniff."""
    return _SNIFF.search(text) is not None
