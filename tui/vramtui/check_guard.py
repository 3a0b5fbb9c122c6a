"""`vramtui check`: a guard for launch scripts. Exit 0 when the worst stage fits with the
margin, 1 when it does not, 2 when it cannot tell (unknown items that could change the answer,
a capacity that is not known closely enough, no NVML for --local, bad input), with one line
saying why:

    vramtui check spec.toml --local && torchrun ...

The capacity is a catalogue card's (`--gpu`, `--offer`: as the shortlist judges it) or the
free memory NVML reads on this node's GPUs (`--local`, through the live feed's source).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from vramtui.fit_capacity import (
    CANNOT_TELL,
    FITS,
    OVER,
    Capacity,
    Margin,
    Verdict,
    card_capacity,
    judge,
)
from vramtui.unit_text import Figure, UnitText, in_unit

EXIT_CODES = {FITS: 0, OVER: 1, CANNOT_TELL: 2}


@dataclass(frozen=True)
class CheckResult:
    status: str  # fits | does_not_fit | cannot_tell
    line: str  # one line (a UnitText)
    peak_bytes: int | None = None
    stage: str | None = None
    capacity: Capacity | None = None
    margin: Margin | None = None
    gpus: tuple[dict, ...] = ()  # --local: what NVML read per GPU

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_dict(self, unit: str = "gib") -> dict:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "line": in_unit(self.line, unit),
            "peak_bytes": self.peak_bytes,
            "stage": self.stage,
            "capacity": self.capacity.to_dict() if self.capacity else None,
            "margin": self.margin.to_dict() if self.margin else None,
            "local_gpus": list(self.gpus),
            "status_of_peak": "estimated",
        }


def _result(v: Verdict, capacity: Capacity, margin: Margin, gpus=()) -> CheckResult:
    word = {FITS: "fits", OVER: "does not fit", CANNOT_TELL: "cannot tell"}[v.status]
    source = f" (source: {capacity.source})" if capacity.source else ""
    return CheckResult(
        v.status,
        UnitText(f"{word}: ", v.reason, source),
        v.peak_bytes,
        v.stage,
        capacity,
        margin,
        gpus,
    )


def check_card(est, gpu, margin: Margin) -> CheckResult:
    cap = card_capacity(gpu)
    return _result(
        judge(est.peak_bytes, est.peak_stage, cap, margin, est.unknown_items), cap, margin
    )


def check_offer(spec, est, offer, gpu, margin: Margin) -> CheckResult:
    """A catalogue offer: its card, and enough of them for the spec's placement."""
    if offer.gpu_count < spec.placement.gpus:
        cap = card_capacity(gpu)
        return CheckResult(
            OVER,
            f"does not fit: the spec places the model on {spec.placement.gpus} GPUs; offer "
            f"{offer.id} has {offer.gpu_count}",
            est.peak_bytes,
            est.peak_stage,
            cap,
            margin,
        )
    res = check_card(est, gpu, margin)
    return CheckResult(
        res.status,
        UnitText(res.line, f" (offer {offer.id}, {offer.gpu_count}x)"),
        res.peak_bytes,
        res.stage,
        res.capacity,
        margin,
    )


# ---------------------------------------------------------------------------------- --local


def visible_indices(samples, env: str | None) -> tuple[list, str]:
    """The GPUs a job launched here would see (CUDA_VISIBLE_DEVICES by index or UUID), and
    how they were chosen, in words."""
    if env is None or not env.strip():
        return list(samples), "all GPUs NVML lists"
    chosen = []
    for entry in (e.strip() for e in env.split(",")):
        if not entry:
            continue
        if entry.lstrip("-").isdigit():
            i = int(entry)
            if i < 0:
                break  # CUDA stops at the first invalid index
            match = [s for s in samples if s.index == i]
        else:
            match = [s for s in samples if s.uuid and s.uuid.startswith(entry)]
        if not match:
            break
        chosen.append(match[0])
    return chosen, f"CUDA_VISIBLE_DEVICES={env.strip()}"


def read_local_gpus(source=None):
    """The devices NVML reads now (vramtui.feed.nvml_source); FeedError when it cannot."""
    from vramtui.feed.nvml_source import NvmlSource

    source = source or NvmlSource(attribute_processes=False)
    source.open()
    try:
        return source.read_devices(), source.notes
    finally:
        source.close()


def check_local(spec, est, margin: Margin, source=None, env: str | None = None) -> CheckResult:
    """The worst stage per GPU against the free memory NVML reads on the GPUs the job would
    use (the first `placement.gpus` visible ones). A margin share is a share of each card's
    total."""
    from vramtui.feed.sample import FeedError

    if env is None:
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        samples, notes = read_local_gpus(source)
    except FeedError as exc:
        return CheckResult(
            CANNOT_TELL,
            f"cannot tell: no free memory to compare with ({exc})",
            est.peak_bytes,
            est.peak_stage,
            margin=margin,
        )
    visible, how = visible_indices(samples, env)
    if not visible:
        return CheckResult(
            CANNOT_TELL,
            f"cannot tell: no GPU visible to a job here ({how}; NVML lists {len(samples)})",
            est.peak_bytes,
            est.peak_stage,
            margin=margin,
        )
    want = spec.placement.gpus
    used = visible[:want]
    read = tuple(
        {
            "index": s.index,
            "name": s.name,
            "uuid": s.uuid,
            "free_bytes": s.free_bytes,
            "total_bytes": s.total_bytes,
            "memory_info_version": s.memory_info_version,
            "counter": "NVML free memory",
        }
        for s in used
    )
    unread = [s.index for s in used if s.free_bytes is None or s.total_bytes is None]
    if unread:
        return CheckResult(
            CANNOT_TELL,
            f"cannot tell: NVML gave no memory figures for GPU {', '.join(map(str, unread))}"
            + (f" ({'; '.join(notes)})" if notes else ""),
            est.peak_bytes,
            est.peak_stage,
            margin=margin,
            gpus=read,
        )
    verdicts = []
    for s in used:
        cap = Capacity(
            s.free_bytes,
            UnitText(
                f"NVML free on GPU {s.index} ({s.name or 'unnamed'}, memory info "
                f"v{s.memory_info_version}) ",
                Figure(s.free_bytes),
                " of ",
                Figure(s.total_bytes),
            ),
            s.free_bytes,
            s.free_bytes,
            "read now through NVML",
            base=s.total_bytes,
        )
        verdicts.append(
            (judge(est.peak_bytes, est.peak_stage, cap, margin, est.unknown_items), cap)
        )
    order = {OVER: 0, CANNOT_TELL: 1, FITS: 2}
    worst, cap = min(verdicts, key=lambda vc: (order[vc[0].status], vc[0].room_bytes))
    res = _result(worst, cap, margin, read)
    extra = []
    if len(used) > 1:
        extra.append(f"the tightest of GPUs {', '.join(str(s.index) for s in used)}")
    if len(used) < want:
        extra.append(
            f"the spec places {want} GPUs, {len(used)} visible here ({how}): the other ranks "
            "are not checked"
        )
    elif env:
        extra.append(how)
    if extra:
        res = CheckResult(
            res.status,
            UnitText(res.line, f" ({'; '.join(extra)})"),
            res.peak_bytes,
            res.stage,
            res.capacity,
            margin,
            read,
        )
    return res
