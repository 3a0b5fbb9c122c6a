"""The workload a log says it ran (batch size, sequence length, model id, tensor-parallel size,
dtype), read from the lines frameworks print at start-up, and compared with the spec: each
difference is named before any advice ("log: batch size per device = 4; spec: micro_batch = 1").

The log may be huge or hostile: lines are found by plain substring tests first, each line is
cut to MAX_LINE_CHARS before a pattern sees it, and every pattern starts with a literal and
has bounded repetitions only (no nested quantifiers), so the scan is linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vramtui.safe_text import safe_line

MAX_LINE_CHARS = 4_000  # a line longer than this is read up to here
MAX_VALUES_PER_KEY = 4  # distinct values kept per kind of line (several runs in one log)
SHOWN_LINE_CHARS = 160

_A = re.ASCII
_INT = r"(\d{1,3}(?:,\d{3}){1,4}|\d{1,12})"
_FLOATS = (
    "bfloat16",
    "float16",
    "float32",
    "half",
    "float",
    "bf16",
    "fp16",
    "fp32",
    "auto",
)
# Spelling in the log -> the spec's weights.format ("auto" says nothing).
_DTYPE_FORMAT = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
}
_MODEL_ID = r"(/?[\w.\-]{1,120}(?:/[\w.\-]{1,120}){0,8})"

# kind -> (substrings, one of which the line must hold; pattern). Group 1 is the value.
PATTERNS: dict[str, tuple[tuple[str, ...], re.Pattern]] = {
    "micro_batch": (
        ("batch size per device", "per_device_train_batch_size"),
        re.compile(
            r"(?:batch size per device|per_device_train_batch_size)\s{0,8}[=:]\s{0,8}" + _INT,
            _A | re.IGNORECASE,
        ),
    ),
    "examples": (
        ("Num examples",),
        re.compile(r"Num examples\s{0,8}=\s{0,8}" + _INT, _A),
    ),
    "max_model_len": (
        ("max_model_len", "max-model-len"),
        re.compile(r"max[_-]model[_-]len\s{0,4}[=: ]\s{0,4}['\"]?" + _INT, _A),
    ),
    "tensor_parallel": (
        ("tensor-parallel-size", "tensor_parallel_size"),
        re.compile(r"tensor[_-]parallel[_-]size\s{0,4}[=: ]\s{0,4}['\"]?(\d{1,5})\b", _A),
    ),
    "dtype": (
        ("dtype",),
        re.compile(
            r"(?<!\w)(?:torch_)?dtype\s{0,4}[=:]\s{0,4}['\"]?(?:torch\.)?("
            + "|".join(_FLOATS)
            + r")\b",
            _A,
        ),
    ),
    "model": (
        ("from_pretrained", "model="),
        re.compile(
            r"(?:from_pretrained\(\s{0,4}|(?<![\w.])model\s{0,2}=\s{0,2})['\"]"
            + _MODEL_ID
            + "['\"]",
            _A,
        ),
    ),
    "seq_len": (
        ("max_seq_length", "max_length", "max_seq_len"),
        re.compile(
            r"(?<![\w.])(?:max_seq_length|max_length|max_seq_len)\s{0,4}[=:]\s{0,4}" + _INT, _A
        ),
    ),
}

LABELS = {
    "micro_batch": "batch size per device",
    "examples": "examples",
    "max_model_len": "max_model_len",
    "tensor_parallel": "tensor-parallel size",
    "dtype": "dtype",
    "model": "model",
    "seq_len": "sequence length",
}


@dataclass(frozen=True)
class WorkloadLine:
    kind: str  # one of PATTERNS
    value: int | str
    line_no: int  # 1-based, in the text as given
    text: str  # the line, control characters stripped, cut to SHOWN_LINE_CHARS

    @property
    def shown(self) -> str:
        return f"{LABELS[self.kind]} = {self.value}"


@dataclass(frozen=True)
class Mismatch:
    kind: str
    log: WorkloadLine
    spec_field: str  # "batch.micro_batch"
    spec_value: object

    @property
    def line(self) -> str:
        return (
            f"log: {self.log.shown} (line {self.log.line_no}); "
            f"spec: {self.spec_field} = {self.spec_value}"
        )


def _value(kind: str, raw: str) -> int | str:
    if kind in ("dtype", "model"):
        return raw.lower() if kind == "dtype" else raw
    return int(raw.replace(",", ""))


def find_workload_lines(text: str) -> tuple[WorkloadLine, ...]:
    """Every workload line in `text`, at most MAX_VALUES_PER_KEY distinct values per kind, in
    the order they appear."""
    found: list[WorkloadLine] = []
    seen: dict[str, list[object]] = {k: [] for k in PATTERNS}
    if not any(a in text for anchors, _ in PATTERNS.values() for a in anchors):
        return ()
    for line_no, line in enumerate(text.splitlines(), 1):
        line = line[:MAX_LINE_CHARS]
        for kind, (anchors, pattern) in PATTERNS.items():
            if len(seen[kind]) >= MAX_VALUES_PER_KEY or not any(a in line for a in anchors):
                continue
            for m in pattern.finditer(line):
                value = _value(kind, m.group(1))
                if value in seen[kind] or len(seen[kind]) >= MAX_VALUES_PER_KEY:
                    continue
                seen[kind].append(value)
                shown = safe_line(line.strip())
                if len(shown) > SHOWN_LINE_CHARS:
                    shown = shown[: SHOWN_LINE_CHARS - 1] + "…"
                found.append(WorkloadLine(kind, value, line_no, shown))
    return tuple(found)


def _same_model(log_id: str, spec) -> bool:
    ref = spec.model
    names = [n for n in (ref.id, ref.path) if n]
    if not names:
        return True  # a bare parameter count: nothing to compare
    a = log_id.strip().rstrip("/").lower()
    for name in names:
        b = name.strip().rstrip("/").lower()
        if a == b or a.endswith("/" + b) or b.endswith("/" + a):
            return True
        # A local copy named after the repository ("/models/Llama-3.1-8B-Instruct").
        if a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]:
            return True
    return False


def compare_with_spec(lines, spec) -> tuple[Mismatch, ...]:
    """Each workload line that differs from the spec, named with the spec field it contradicts.
    Lines the spec has no field for (the number of examples) are never mismatches."""
    out = []
    training = spec.is_training
    for wl in lines:
        k, v = wl.kind, wl.value
        if k == "micro_batch" and training and spec.batch.micro_batch is not None:
            if v != spec.batch.micro_batch:
                out.append(Mismatch(k, wl, "batch.micro_batch", spec.batch.micro_batch))
        elif k == "max_model_len" and not training:
            ctx = spec.lengths.context_tokens
            if v != ctx:
                out.append(Mismatch(k, wl, "lengths.prompt_tokens + lengths.generated_tokens", ctx))
        elif k == "seq_len":
            field, want = (
                ("lengths.seq_len", spec.lengths.seq_len)
                if training
                else (
                    "lengths.prompt_tokens + lengths.generated_tokens",
                    spec.lengths.context_tokens,
                )
            )
            if want and v != want:
                out.append(Mismatch(k, wl, field, want))
        elif k == "tensor_parallel" and v != spec.placement.tensor_parallel:
            out.append(Mismatch(k, wl, "placement.tensor_parallel", spec.placement.tensor_parallel))
        elif k == "dtype":
            fmt = _DTYPE_FORMAT.get(str(v))
            # A quantised spec computes in some float dtype: only a float spec can disagree.
            if (
                fmt
                and spec.weights.format in ("bf16", "fp16", "fp32")
                and fmt != spec.weights.format
            ):
                out.append(Mismatch(k, wl, "weights.format", spec.weights.format))
        elif k == "model" and not _same_model(str(v), spec):
            field = "model.id" if spec.model.id else "model.path"
            out.append(Mismatch(k, wl, field, spec.model.id or spec.model.path))
    return tuple(out)


__all__ = ["LABELS", "Mismatch", "WorkloadLine", "compare_with_spec", "find_workload_lines"]
