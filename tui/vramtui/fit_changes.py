"""The single changes that make a spec fit, each with what it costs in quality, coverage or
speed, in the seed's order: capacity, cache, micro-batch, precision ("change only one of
capacity, cache, micro-batch or precision at a time").

`single_changes` reads them off a `vramtui fit` search (the largest value of each variable
that fits the card); `card_free_changes` lists the changes that do not depend on a card and
keep the workload's requirements (length, concurrency, effective batch), for the shortlist's
`--allow-one-change`.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.fit_capacity import FITS, OVER, card_capacity, judge
from vramtui.fit_search import GROUP_ORDER, FitReport, KnobResult
from vramtui.ledger import estimate
from vramtui.triage.single_change import edit_spec
from vramtui.unit_text import Figure, UnitText


@dataclass(frozen=True)
class SingleChange:
    group: str  # one of GROUP_ORDER
    change: str  # in words: "KV cache bf16 -> fp8"
    cost: str  # in words: what it costs (quality, coverage, speed, money)
    edits: dict | None  # dotted spec fields; None for another card
    peak_bytes: int  # the worst stage on the most loaded GPU after the change
    stage: str
    status: str  # fits | cannot_tell (judged on the card it names)
    reason: str = ""  # the verdict in one line
    gpu_id: str | None = None  # a bigger catalogue card
    keeps_requirements: bool = True  # length, concurrency and effective batch kept
    spec_after: object = None

    def to_dict(self) -> dict:
        return {
            "group": self.group,
            "change": str(self.change),
            "cost": str(self.cost),
            "edits": self.edits,
            "peak_bytes": self.peak_bytes,
            "stage": self.stage,
            "status": self.status,
            "reason": str(self.reason),
            "gpu": self.gpu_id,
            "keeps_requirements": self.keeps_requirements,
        }


def _quality(spec, what: str) -> str:
    if spec.quality:
        crit = "; ".join(f"{q.metric} {q.threshold}" for q in spec.quality)
        return f"{what}: check your eval ({crit})"
    return f"{what}: check your eval (the spec states no quality criterion yet)"


def format_cost(spec, old: str, new: str) -> str:
    if new in ("fp32", "bf16", "fp16") and old in ("fp32", "bf16", "fp16"):
        if new == "fp32":
            return "no quality cost; more memory and slower"
        return "tiny quality cost (16-bit is the usual reference precision); check your eval"
    if new == "fp8":
        return _quality(spec, "small quality cost, fp8 weights need an Ada/Hopper-class card")
    if new == "int8":
        return _quality(spec, "small quality cost, int8 kernels are often slower than 16-bit")
    return _quality(spec, f"{new} weights: a visible quality cost on some tasks, slower kernels")


def _cost(spec, result: KnobResult, new) -> tuple[str, str, bool]:
    """(change in words, cost in words, keeps the requirements) for a knob's new value."""
    k = result.knob
    old = k.current
    shown_old, shown_new = k.show(old), k.show(new)
    if k.key == "concurrency":
        return (
            f"concurrency {shown_old} -> {shown_new}",
            (
                f"lower throughput; coverage: the spec requires {shown_old} sequences in flight "
                "(or add replicas)"
            ),
            False,
        )
    if k.key == "context":
        return (
            f"context (max_model_len) {shown_old} -> {shown_new} tokens",
            (
                f"coverage: the required length is {shown_old} tokens; a shorter window does not "
                "validate the announced workload"
            ),
            False,
        )
    if k.key == "seq_len":
        return (
            f"sequence length {shown_old} -> {shown_new} tokens",
            "coverage: longer examples are truncated or split; the trained task changes",
            False,
        )
    if k.key == "kv_cache_dtype":
        if new == "fp8":
            return (
                f"KV cache {old} -> fp8",
                _quality(spec, "small quality cost"),
                True,
            )
        return f"KV cache {old} -> {new}", "tiny quality cost; check your eval", True
    if k.key == "weight_format":
        return f"weights {old} -> {new}", format_cost(spec, old, new), True
    if k.key == "grad_checkpointing":
        cost = (
            "no quality cost; about a third more compute per step"
            if new == "full"
            else "no quality cost; some recompute per step (attention only)"
        )
        return f"activation checkpointing {old} -> {new}", cost, True
    if k.key == "lora_rank":
        return (
            f"LoRA rank {shown_old} -> {shown_new}",
            _quality(spec, "fewer trainable parameters"),
            False,
        )
    if k.key == "gpus":
        return (
            f"{shown_old} -> {shown_new} GPUs ({k.note.split('(')[-1].rstrip(')')})",
            (
                "no quality cost; more cards to rent, inter-GPU traffic: check the interconnect "
                "(NVLink or PCIe)"
            ),
            True,
        )
    return f"{k.label} {shown_old} -> {shown_new}", "", True


def _micro_batch_change(spec, result: KnobResult, ledger, capacity, margin):
    """micro-batch m -> m' with grad accumulation raised to keep the effective batch: m' the
    largest value that fits and divides m x grad_accum."""
    b = spec.batch
    effective = b.micro_batch * b.grad_accum
    top = result.best.value
    for new in range(min(top, b.micro_batch - 1), 0, -1):
        if effective % new == 0:
            break
    else:
        return None
    acc = effective // new
    edits = {"batch.micro_batch": new, "batch.grad_accum": acc}
    after = edit_spec(spec, edits)
    if after is None:
        return None
    ledger.count += 1
    est = estimate(after, ledger.arch, ledger.checkpoint)
    v = judge(est.peak_bytes, est.peak_stage, capacity, margin, est.unknown_items)
    if v.status == OVER:
        return None
    return SingleChange(
        "micro_batch",
        f"micro-batch {b.micro_batch} -> {new} with gradient accumulation {b.grad_accum} -> {acc}",
        f"same effective batch ({effective}), slower: {acc // b.grad_accum}x the steps per update"
        if acc % b.grad_accum == 0
        else f"same effective batch ({effective}), slower: more, smaller steps per update",
        edits,
        est.peak_bytes,
        est.peak_stage,
        v.status,
        v.reason,
        spec_after=after,
    )


def _bigger_card(report: FitReport, catalog, est) -> SingleChange | None:
    """The smallest catalogue card with more memory than the one named that holds the spec as
    it is (never a smaller one: the spec would fail there too)."""
    if catalog is None or report.capacity.gpu is None:
        return None
    from vramtui.shortlist import EXCLUDED, format_requirement

    named = report.capacity.bytes
    cards = sorted(
        (g for g in catalog.gpus.values() if g.usable().bytes > named),
        key=lambda g: (g.usable().bytes, g.id),
    )
    for gpu in cards:
        if format_requirement(report.spec, gpu).status == EXCLUDED:
            continue
        cap = card_capacity(gpu)
        v = judge(est.peak_bytes, est.peak_stage, cap, report.margin, est.unknown_items)
        if v.status == OVER:
            continue
        offers = sorted(o.id for o in catalog.offers.values() if o.gpu == gpu.id)
        where = f"offers: {', '.join(offers[:3])}" if offers else "no offer in the catalogue"
        return SingleChange(
            "capacity",
            UnitText(f"a bigger card: {gpu.name} (", Figure(gpu.usable().bytes), ")"),
            f"no quality cost; a different card to rent ({where}); price implies no speed "
            "ranking: see `vramtui shortlist`",
            None,
            est.peak_bytes,
            est.peak_stage,
            v.status,
            v.reason,
            gpu_id=gpu.id,
        )
    return None


def single_changes(report: FitReport, ledger, catalog=None) -> tuple[SingleChange, ...]:
    """The single changes that make the spec fit the card, in the seed's order."""
    spec = report.spec
    out: list[SingleChange] = []
    est = estimate(spec, report.arch, ledger.checkpoint)
    big = _bigger_card(report, catalog, est)
    if big is not None:
        out.append(big)
    for r in report.results:
        if r.best is None or r.best.value == r.knob.current:
            continue
        if r.knob.key == "micro_batch":
            mb = _micro_batch_change(spec, r, ledger, report.capacity, report.margin)
            if mb is not None:
                out.append(mb)
            continue
        if r.best.peak_bytes >= est.peak_bytes:
            continue  # a change that does not lower the peak is no fix of an overflow
        change, cost, keeps = _cost(spec, r, r.best.value)
        v = judge(r.best.peak_bytes, r.best.stage, report.capacity, report.margin, r.best.unknown)
        out.append(
            SingleChange(
                r.knob.group,
                change,
                cost,
                r.knob.edits(r.best.value),
                r.best.peak_bytes,
                r.best.stage,
                v.status,
                v.reason,
                keeps_requirements=keeps,
                spec_after=r.best.spec,
            )
        )
    out += _optimizer_change(spec, ledger, report)
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    out.sort(key=lambda c: (order.get(c.group, len(order)), not c.keeps_requirements))
    return tuple(out)


def _optimizer_change(spec, ledger, report) -> list[SingleChange]:
    if not spec.is_training or spec.training.optimizer != "adamw":
        return []
    edits = {"training.optimizer": "adamw_8bit", "training.optimizer_state_dtype": None}
    after = edit_spec(spec, edits)
    if after is None:
        return []
    ledger.count += 1
    est = estimate(after, ledger.arch, ledger.checkpoint)
    v = judge(est.peak_bytes, est.peak_stage, report.capacity, report.margin, est.unknown_items)
    if v.status == OVER:
        return []
    return [
        SingleChange(
            "precision",
            "optimizer adamw -> adamw_8bit",
            _quality(spec, "8-bit optimiser states: small convergence risk"),
            edits,
            est.peak_bytes,
            est.peak_stage,
            v.status,
            v.reason,
            spec_after=after,
        )
    ]


# ------------------------------------------------------------------ changes for the shortlist


def card_free_changes(spec, arch) -> list[tuple[str, str, str, dict]]:
    """(group, change, cost, edits) that keep the workload's requirements (length,
    concurrency, effective batch), from the least costly to the most: the shortlist tries
    them in this order on every offer that misses on memory alone."""
    out: list[tuple[str, str, str, dict]] = []
    if spec.is_training:
        b = spec.batch
        effective = b.micro_batch * b.grad_accum
        for new in range(b.micro_batch - 1, 0, -1):
            if effective % new == 0:
                acc = effective // new
                out.append(
                    (
                        "micro_batch",
                        (
                            f"micro-batch {b.micro_batch} -> {new} with gradient accumulation "
                            f"{b.grad_accum} -> {acc}"
                        ),
                        f"same effective batch ({effective}), slower",
                        {"batch.micro_batch": new, "batch.grad_accum": acc},
                    )
                )
        ckpt = spec.training.grad_checkpointing
        for new, cost in (
            ("selective", "no quality cost; some recompute per step"),
            ("full", "no quality cost; about a third more compute per step"),
        ):
            if ckpt != new and ckpt != "full":
                out.append(
                    (
                        "activation",
                        f"activation checkpointing {ckpt} -> {new}",
                        cost,
                        {"training.grad_checkpointing": new},
                    )
                )
        if spec.training.optimizer == "adamw":
            out.append(
                (
                    "precision",
                    "optimizer adamw -> adamw_8bit",
                    _quality(spec, "8-bit optimiser states: small convergence risk"),
                    {"training.optimizer": "adamw_8bit", "training.optimizer_state_dtype": None},
                )
            )
        return _sorted(out)
    kv = spec.runtime.kv_cache_dtype
    if kv in ("fp32", "bf16", "fp16"):
        out.append(
            (
                "cache",
                f"KV cache {kv} -> fp8",
                _quality(spec, "small quality cost"),
                {"runtime.kv_cache_dtype": "fp8"},
            )
        )
    fmt = spec.weights.format
    if fmt in ("fp32", "bf16", "fp16"):
        from vramtui.fit_search import _weights_edit

        for new in ("fp8", "int8", "nf4"):
            out.append(
                (
                    "precision",
                    f"weights {fmt} -> {new}",
                    format_cost(spec, fmt, new),
                    _weights_edit(spec, new),
                )
            )
    return _sorted(out)


def _sorted(changes):
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    return sorted(changes, key=lambda c: order.get(c[0], len(order)))


__all__ = ["FITS", "SingleChange", "card_free_changes", "format_cost", "single_changes"]
