"""`vramtui fit`: for each workload variable the seed names, holding the others fixed, the
largest value that fits a card with a margin, the stage that binds, and the next value up with
its overflow.

The search runs over the ledger (`vramtui.ledger.estimate`) on one-variable edits of the spec
(`vramtui.triage.single_change.edit_spec`, which validates every edit like a spec file):

* integer variables (micro-batch, concurrency, lengths, LoRA rank): an exponential probe
  1, 2, 4, ... to the first value that does not fit, then a bisection between the last two;
  the peak grows with each of them, so every value up to the answer fits and the next does
  not (the tests check this by brute force);
* discrete choices (KV-cache dtype, weight format, checkpointing, GPUs): a scan in order from
  the most memory to the least; the answer is the first that fits, and the "next value up" is
  the one before it.

Each answer is judged as `vramtui.fit_capacity.judge` judges a whole spec: it becomes "cannot
tell" when the card's capacity range, or an unknown ledger item, could change it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vramtui.errors import VramtuiError
from vramtui.fit_capacity import CANNOT_TELL, FITS, OVER, Capacity, Margin, Verdict, judge
from vramtui.ledger import estimate
from vramtui.limits import MAX_BATCH, MAX_LORA_RANK, MAX_SEQ_TOKENS
from vramtui.triage.single_change import edit_spec
from vramtui.unit_text import Figure, UnitText

INTEGER = "integer"
CHOICE = "choice"

# The seed's order of single changes after an overflow: capacity, cache, micro-batch,
# precision (activation checkpointing is the micro-batch's computation strategy; a LoRA rank
# changes the adapter itself and comes last).
GROUP_ORDER = ("capacity", "cache", "micro_batch", "activation", "precision", "adapter")
# The most GPUs the placement scan tries (powers of two up to it).
MAX_TP_SCAN = 64
MAX_SHARD_SCAN = 1024


@dataclass(frozen=True)
class Knob:
    """One workload variable: how to set it, and the values it can take."""

    key: str  # micro_batch | seq_len | concurrency | context | kv_cache_dtype | ...
    label: str  # what a user reads
    group: str  # one of GROUP_ORDER
    kind: str  # integer | choice
    current: object
    edits: Callable[[object], dict]  # value -> dotted field edits
    show: Callable[[object], str] = str
    low: int = 1  # integer: the smallest value
    high: int = 1  # integer: the largest value vramtui tries (a limit, named in `high_why`)
    high_why: str = ""
    choices: tuple = ()  # choice: from the most memory to the least
    note: str = ""  # said beside the answer


@dataclass(frozen=True)
class Point:
    """The ledger at one value of a knob."""

    value: object
    peak_bytes: int
    stage: str
    unknown: tuple[str, ...]
    spec: object = None


@dataclass(frozen=True)
class KnobResult:
    knob: Knob
    status: str  # fits | does_not_fit | cannot_tell | not_applicable
    best: Point | None  # the largest value that fits (None: none does)
    next_up: Point | None  # the next value up (None: the best is the top of the range)
    allowed_bytes: int
    reason: str = ""  # one line
    skipped: tuple[str, ...] = ()  # choices left out, with why

    @property
    def overflow_bytes(self) -> int | None:
        if self.next_up is None:
            return None
        return self.next_up.peak_bytes - self.allowed_bytes

    @property
    def binding_stage(self) -> str | None:
        """The stage that binds: the worst stage of the next value up (the one that
        overflows), or of the best value when there is no next."""
        if self.next_up is not None:
            return self.next_up.stage
        return self.best.stage if self.best is not None else None


@dataclass(frozen=True)
class FitReport:
    spec: object
    arch: object
    capacity: Capacity
    margin: Margin
    verdict: Verdict  # the spec as it is
    results: tuple[KnobResult, ...]
    estimates: int  # how many ledger estimates the search made
    seconds: float
    notes: tuple[str, ...] = ()
    changes: tuple = field(default_factory=tuple)  # vramtui.fit_changes.SingleChange

    def result(self, key: str) -> KnobResult | None:
        return next((r for r in self.results if r.knob.key == key), None)


class _Ledger:
    """Estimates of one-variable edits of a spec, counted and cached per (knob, value)."""

    def __init__(self, spec, arch, checkpoint, gpu=None):
        self.spec, self.arch, self.checkpoint, self.gpu = spec, arch, checkpoint, gpu
        self.count = 0
        self._cache: dict[tuple, Point | None] = {}

    def point(self, knob: Knob, value) -> Point | None:
        key = (knob.key, value)
        if key not in self._cache:
            self._cache[key] = self._point(knob, value)
        return self._cache[key]

    def _point(self, knob: Knob, value) -> Point | None:
        spec = self.spec if value == knob.current else edit_spec(self.spec, knob.edits(value))
        if spec is None:
            return None
        if self.arch is not None:
            from vramtui.spec import validate_against_architecture

            try:
                validate_against_architecture(spec, self.arch, "a fit search")
            except VramtuiError:
                return None
        self.count += 1
        est = estimate(spec, self.arch, self.checkpoint)
        return Point(
            value,
            est.peak_bytes,
            est.peak_stage,
            tuple(i.name for i in est.unknown_items),
            spec,
        )


# ------------------------------------------------------------------------------------ knobs


def _sixteen(spec, arch) -> str:
    kv = spec.runtime.kv_cache_dtype
    if kv in ("bf16", "fp16"):
        return kv
    if arch is not None and getattr(arch, "default_dtype", None) in ("bf16", "fp16"):
        return arch.default_dtype
    return "bf16"


def _weights_edit(spec, fmt: str) -> dict:
    edits: dict = {
        "weights.format": fmt,
        "weights.bits": None,
        "weights.group_size": None,
        "weights.gguf_type": None,
        "weights.double_quant": True if fmt in ("nf4", "fp4") else None,
    }
    if spec.weights.groups:
        edits["weights.groups"] = None
    return edits


def _pow2_up_to(n: int) -> tuple[int, ...]:
    out, v = [], 1
    while v <= n:
        out.append(v)
        v *= 2
    return tuple(out)


def knobs_for(spec, arch) -> tuple[list[Knob], list[str]]:
    """The variables that apply to the spec's task, and one line for each that does not."""
    knobs: list[Knob] = []
    notes: list[str] = []
    training = spec.is_training
    manual = spec.headroom.mode == "manual"
    if manual:
        notes.append(
            "manual reserve: the ledger itemises the weights only and assumes the rest fits "
            "inside the reserve, so lengths, batch and cache are not searched; switch "
            "headroom.mode to 'itemised' to search them"
        )
    max_pos = getattr(arch, "max_position_embeddings", None) if arch is not None else None
    len_cap = min(MAX_SEQ_TOKENS, max_pos) if max_pos else MAX_SEQ_TOKENS
    len_why = (
        f"the model's max_position_embeddings ({max_pos:,})"
        if max_pos and max_pos <= MAX_SEQ_TOKENS
        else f"vramtui's limit of {MAX_SEQ_TOKENS:,} tokens"
    )
    if manual:
        pass
    elif training:
        knobs.append(
            Knob(
                "micro_batch",
                "micro-batch",
                "micro_batch",
                INTEGER,
                spec.batch.micro_batch,
                lambda v: {"batch.micro_batch": v},
                high=MAX_BATCH,
                high_why=f"vramtui's limit of {MAX_BATCH:,}",
                note=f"grad_accum {spec.batch.grad_accum} held",
            )
        )
        knobs.append(
            Knob(
                "seq_len",
                "sequence length (tokens)",
                "cache",
                INTEGER,
                spec.lengths.seq_len,
                lambda v: {"lengths.seq_len": v},
                show=lambda v: f"{v:,}",
                high=len_cap,
                high_why=len_why,
            )
        )
    else:
        gen = spec.lengths.generated_tokens
        ctx_low = gen + 1
        if ctx_low <= len_cap:
            knobs.append(
                Knob(
                    "context",
                    "context (max_model_len)",
                    "cache",
                    INTEGER,
                    spec.lengths.context_tokens,
                    lambda v, g=gen: {"lengths.prompt_tokens": v - g},
                    show=lambda v: f"{v:,}",
                    low=ctx_low,
                    high=len_cap,
                    high_why=len_why,
                    note=f"prompt + generated tokens, {gen:,} generated held",
                )
            )
        knobs.append(
            Knob(
                "concurrency",
                "concurrency",
                "cache",
                INTEGER,
                spec.batch.concurrency,
                lambda v: {"batch.concurrency": v},
                high=MAX_BATCH,
                high_why=f"vramtui's limit of {MAX_BATCH:,}",
            )
        )
        sixteen = _sixteen(spec, arch)
        knobs.append(
            Knob(
                "kv_cache_dtype",
                "KV-cache dtype",
                "cache",
                CHOICE,
                spec.runtime.kv_cache_dtype,
                lambda v: {"runtime.kv_cache_dtype": v},
                choices=("fp32", sixteen, "fp8"),
            )
        )
    fmt = spec.weights.format
    if spec.task.kind == "qlora":
        notes.append("weight format: QLoRA is NF4 by definition (another format is LoRA)")
    else:
        if fmt in ("bf16", "fp16"):
            sixteen_w = fmt
        elif arch is not None and getattr(arch, "default_dtype", None) in ("bf16", "fp16"):
            sixteen_w = arch.default_dtype
        else:
            sixteen_w = "bf16"
        choices = ("fp32", sixteen_w) if training else ("fp32", sixteen_w, "fp8", "int8", "nf4")
        if fmt not in choices:
            notes.append(
                f"weight format: the spec's {fmt} is compared with the formats in the scan "
                "by memory only"
            )
        knobs.append(
            Knob(
                "weight_format",
                "weight format",
                "precision",
                CHOICE,
                fmt,
                lambda v, s=spec: _weights_edit(s, v),
                choices=choices,
            )
        )
    if spec.task.lora is not None and not manual:
        knobs.append(
            Knob(
                "lora_rank",
                "LoRA rank",
                "adapter",
                INTEGER,
                spec.task.lora.rank,
                lambda v: {"task.lora.rank": v},
                high=MAX_LORA_RANK,
                high_why=f"vramtui's limit of {MAX_LORA_RANK:,}",
            )
        )
    if training and not manual:
        knobs.append(
            Knob(
                "grad_checkpointing",
                "activation checkpointing",
                "activation",
                CHOICE,
                spec.training.grad_checkpointing,
                lambda v: {"training.grad_checkpointing": v},
                choices=("none", "selective", "full"),
            )
        )
    gpus_knob = _gpus_knob(spec, notes)
    if gpus_knob is not None:
        knobs.append(gpus_knob)
    return knobs, notes


def _gpus_knob(spec, notes: list[str]) -> Knob | None:
    p = spec.placement
    if p.pipeline_parallel > 1:
        notes.append("GPUs: the spec uses pipeline parallelism; the GPU count is not scanned")
        return None
    if spec.is_training and p.data_parallel_sharding != "none" and p.tensor_parallel == 1:
        counts = tuple(sorted(set(_pow2_up_to(MAX_SHARD_SCAN)) | {p.gpus}))
        return Knob(
            "gpus",
            f"GPUs ({p.data_parallel_sharding})",
            "capacity",
            CHOICE,
            p.gpus,
            lambda v: {"placement.gpus": v},
            choices=counts,
            note="the fewest that fit (sharded over data-parallel ranks)",
        )
    if spec.is_training and p.tensor_parallel == 1:
        notes.append(
            "GPUs: more GPUs lower a training job's memory per GPU only with sharding "
            "(placement.data_parallel_sharding = zero3 or fsdp) or tensor parallelism; the "
            "spec sets neither, so the GPU count is not scanned"
        )
        return None
    if p.gpus == p.tensor_parallel:
        counts = tuple(sorted(set(_pow2_up_to(MAX_TP_SCAN)) | {p.gpus}))
        return Knob(
            "gpus",
            "GPUs (TP)",
            "capacity",
            CHOICE,
            p.gpus,
            lambda v: {"placement.gpus": v, "placement.tensor_parallel": v},
            choices=counts,
            note="the fewest that fit (tensor parallel over all of them)",
        )
    notes.append(
        f"GPUs: {p.gpus} GPUs at TP={p.tensor_parallel} without sharding are replicas; more of "
        "them do not lower the memory per GPU"
    )
    return None


# ----------------------------------------------------------------------------------- search


def _fits(point: Point | None, allowed: int) -> bool:
    return point is not None and point.peak_bytes <= allowed


def search_integer(ledger: _Ledger, knob: Knob, allowed: int) -> tuple[Point | None, Point | None]:
    """(largest value that fits, the value one above it); (None, lowest) when none fits."""
    lo_point = ledger.point(knob, knob.low)
    if not _fits(lo_point, allowed):
        return None, lo_point
    good = knob.low
    step = 1
    bad = None
    while True:
        probe = min(knob.low + step, knob.high)
        if probe <= good:
            break
        if _fits(ledger.point(knob, probe), allowed):
            good = probe
            if probe == knob.high:
                break
            step *= 2
        else:
            bad = probe
            break
    if bad is None:
        return ledger.point(knob, good), None
    while bad - good > 1:
        mid = (good + bad) // 2
        if _fits(ledger.point(knob, mid), allowed):
            good = mid
        else:
            bad = mid
    return ledger.point(knob, good), ledger.point(knob, bad)


def search_choice(
    ledger: _Ledger, knob: Knob, allowed: int, gpu=None
) -> tuple[Point | None, Point | None, tuple[str, ...]]:
    """Scan from the most memory to the least: (first that fits, the one before it,
    choices skipped with why)."""
    before = None
    skipped = []
    for value in knob.choices:
        point = ledger.point(knob, value)
        if point is None:
            skipped.append(f"{knob.show(value)}: not a valid spec for this model")
            continue
        refused = (
            _hardware_refuses(point.spec, gpu)
            if knob.group == "precision" or (knob.key == "kv_cache_dtype")
            else None
        )
        if refused:
            skipped.append(f"{knob.show(value)}: {refused}")
            continue
        if _fits(point, allowed):
            return point, before, tuple(skipped)
        before = point
    return None, before, tuple(skipped)


def _hardware_refuses(spec, gpu) -> str | None:
    """Why the card cannot run this spec's formats (the shortlist's format rule), or None."""
    if gpu is None:
        return None
    from vramtui.shortlist import EXCLUDED, format_requirement

    req = format_requirement(spec, gpu)
    return req.detail if req.status == EXCLUDED else None


def _judge_result(knob: Knob, best, nxt, capacity: Capacity, margin: Margin, allowed: int):
    """The status of a search answer: a capacity range or an unknown item can change it."""
    if best is None:
        lowest = nxt
        if lowest is None:
            return OVER, "no value of it is a valid spec"
        v = judge(lowest.peak_bytes, lowest.stage, capacity, margin, lowest.unknown)
        if v.status == OVER:
            return OVER, UnitText(
                f"even {knob.show(lowest.value)} needs ",
                Figure(lowest.peak_bytes),
                ", over by ",
                Figure(lowest.peak_bytes - allowed),
            )
        return CANNOT_TELL, v.reason
    at_best = judge(best.peak_bytes, best.stage, capacity, margin, best.unknown)
    if at_best.status != FITS:
        return CANNOT_TELL, UnitText(f"{knob.show(best.value)} on the figure; ", at_best.reason)
    if nxt is not None:
        at_next = judge(nxt.peak_bytes, nxt.stage, capacity, margin, ())
        if at_next.status != OVER:
            return CANNOT_TELL, UnitText(f"{knob.show(nxt.value)} might fit too: ", at_next.reason)
    return FITS, ""


def fit_report(
    spec,
    arch,
    capacity: Capacity,
    margin: Margin,
    checkpoint=None,
    est=None,
    catalog=None,
) -> FitReport:
    """Every variable's largest fitting value on `capacity` with `margin`; when the spec
    does not fit as it is, the single changes that make it fit (`catalog`: the bigger cards)."""
    t0 = time.perf_counter()
    ledger = _Ledger(spec, arch, checkpoint, capacity.gpu)
    est = est or estimate(spec, arch, checkpoint)
    verdict = judge(est.peak_bytes, est.peak_stage, capacity, margin, est.unknown_items)
    allowed = capacity.allowed(margin)
    knobs, notes = knobs_for(spec, arch)
    results = []
    for knob in knobs:
        skipped: tuple[str, ...] = ()
        if knob.kind == INTEGER:
            best, nxt = search_integer(ledger, knob, allowed)
        else:
            best, nxt, skipped = search_choice(ledger, knob, allowed, capacity.gpu)
        status, reason = _judge_result(knob, best, nxt, capacity, margin, allowed)
        if best is not None and nxt is None and knob.kind == INTEGER and knob.high_why:
            reason = UnitText(reason, "; " if reason else "", f"up to {knob.high_why}")
        results.append(KnobResult(knob, status, best, nxt, allowed, reason, skipped))
    report = FitReport(
        spec,
        arch,
        capacity,
        margin,
        verdict,
        tuple(results),
        ledger.count + 1,
        time.perf_counter() - t0,
        tuple(notes),
    )
    if verdict.status == OVER:
        from vramtui.fit_changes import single_changes

        changes = single_changes(report, ledger, catalog)
        from dataclasses import replace

        report = replace(
            report,
            changes=changes,
            estimates=ledger.count + 1,
            seconds=time.perf_counter() - t0,
        )
    return report


__all__ = [
    "CANNOT_TELL",
    "FITS",
    "GROUP_ORDER",
    "OVER",
    "FitReport",
    "Knob",
    "KnobResult",
    "Point",
    "fit_report",
    "knobs_for",
    "search_choice",
    "search_integer",
]
