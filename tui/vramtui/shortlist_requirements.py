"""Every requirement the seed's procedure checks for one offer: memory (with the catalogue's
capacity bounds), context length, weight format, placement, host RAM and disk, budget,
schedule, software and currency. Each returns a `Requirement` (fit, needs verification or
excluded) with its evidence; `shortlist.classify_offer` runs them all."""

from __future__ import annotations

import datetime
import re

from vramtui import __version__
from vramtui.campaign_cost import Cost
from vramtui.capacity_bounds import BOUND_SOURCE, usable_bounds
from vramtui.catalog import Gpu, Offer
from vramtui.ledger.formats import FLOAT_BYTES
from vramtui.ledger.items import STAGE_LABELS, Estimate
from vramtui.shortlist_types import EXCLUDED, FIT, VERIFY, Preference, Requirement
from vramtui.unit_text import Figure, UnitText
from vramtui.units import format_bytes

BNB_FORMATS = ("nf4", "fp4", "int8")


def _estimate_evidence(est: Estimate, scope: str) -> dict:
    return {
        "kind": "estimate",
        "claim": UnitText(
            f"worst stage {STAGE_LABELS[est.peak_stage]}: ",
            Figure(est.peak_bytes),
            " on the most loaded GPU",
        ),
        "source": f"vramtui ledger {__version__}",
        "version": __version__,
        "scope": scope,
    }


_RAW_BYTES = re.compile(r"\d{4,}\s?B")


def _shown(fig) -> str:
    """A catalogue figure as words: as its source wrote it, but a raw byte count ("206141652992
    B") reads in the display unit with the exact bytes grouped beside it."""
    written = fig.as_written.strip()
    if _RAW_BYTES.fullmatch(written):
        return UnitText(Figure(fig.bytes, gib_in_bytes_mode=True), f" = {fig.bytes:,} B")
    return written


def _figure_evidence(gpu: Gpu, fig) -> dict:
    return {
        "kind": "catalogue",
        "claim": UnitText(f"{gpu.name} {fig.quantity.replace('_', ' ')} = ", _shown(fig)),
        "source": fig.source or "no source given",
        "version": gpu.file,
        "scope": "verified figure" if fig.verified else "unverified figure",
    }


def _offer_evidence(offer: Offer) -> tuple[dict, ...]:
    return tuple(
        {
            "kind": "offer",
            "claim": e.claim,
            "source": e.source,
            "version": e.version,
            "scope": e.scope,
            "date": e.date.isoformat() if e.date else None,
        }
        for e in offer.evidence
    )


def _outcome(peak: int, usable: int, margin: float) -> str:
    """What the comparison says at one value of the card's total: fits at the spec's margin,
    fits only inside the margin, or does not fit."""
    if peak > usable:
        return "over"
    if peak > int(usable * (1 - margin)):
        return "inside"
    return "fit"


def _bound_evidence(gpu: Gpu, bounds, peak: int, margin: float, same: bool) -> dict:
    at = f" at the {margin:.0%} margin" if margin else ""
    answer = (
        f"the answer{at} is the same at both ends"
        if same
        else f"the answer{at} changes inside this range"
    )
    return {
        "kind": "bound",
        "claim": UnitText(
            f"{gpu.name} allocatable total between ",
            Figure(bounds.low),
            " and ",
            Figure(bounds.high),
            f" ({bounds.basis}); peak ",
            Figure(peak),
            f": {answer}",
        ),
        "source": BOUND_SOURCE,
        "version": __version__,
        "scope": "uncertainty of an unverified catalogue figure",
    }


def memory_requirement(est: Estimate, spec, offer: Offer, gpu: Gpu, scope: str):
    """Per-GPU memory of the worst stage against the card's usable bytes with the margin.

    An unverified capacity figure blocks "fit" only when its bounded uncertainty
    (vramtui.capacity_bounds) could change the answer: the comparison is made at both ends
    of the range the real total lies in, and at the catalogued figure itself.
    """
    peak = est.peak_bytes
    fig = gpu.usable()
    usable = fig.bytes
    margin = spec.headroom.margin_fraction
    allowed = int(usable * (1 - margin))
    need_gpus = spec.placement.gpus
    bounds = usable_bounds(gpu)
    stated = _outcome(peak, usable, margin)
    if bounds is None:
        low = high = None
        same = False
    else:
        low, high = _outcome(peak, bounds.low, margin), _outcome(peak, bounds.high, margin)
        same = low == high
    evidence = (_estimate_evidence(est, scope), _figure_evidence(gpu, fig))
    if bounds is not None and not bounds.exact:
        evidence += (_bound_evidence(gpu, bounds, peak, margin, same),)
    compare = UnitText(
        Figure(peak),
        f" per GPU at {STAGE_LABELS[est.peak_stage]} vs ",
        Figure(usable),
        f" usable ({fig.quantity.replace('_', ' ')} ",
        _shown(fig),
        ")",
        *((f" less a {margin:.0%} margin = ", Figure(allowed)) if margin else ()),
    )
    name = "memory per GPU at the worst stage"
    if stated == "over" and (bounds is None or high == "over"):
        detail = "does not fit: " + compare
        if need_gpus == 1 and offer.gpu_count > 1:
            detail += (
                f"; {offer.gpu_count} cards with no placement are {offer.gpu_count} separate "
                "memories, not one: set tensor/pipeline parallelism or ZeRO/FSDP in the spec"
            )
        return Requirement("memory", name, EXCLUDED, detail, evidence), usable, peak
    conditions = []
    if est.unknown_items:
        conditions.append(
            "measure the unknown items (" + ", ".join(i.name for i in est.unknown_items) + ")"
        )
    if bounds is None:
        conditions.append(
            f"the allocatable total of the {gpu.name} is not catalogued (only its "
            f"{fig.quantity.replace('_', ' ')}): read torch.cuda.mem_get_info() on the node"
        )
    elif not same:
        where = UnitText(
            "between ",
            Figure(bounds.low),
            " and ",
            Figure(bounds.high),
            f" ({bounds.basis}) the answer changes",
        )
        if fig.quantity != "cuda_total":
            conditions.append(
                UnitText(
                    f"the allocatable total of the {gpu.name} is not catalogued (only its "
                    f"{fig.quantity.replace('_', ' ')} ",
                    _shown(fig),
                    "); ",
                    where,
                    ": read torch.cuda.mem_get_info() on the node",
                )
            )
        else:
            conditions.append(
                UnitText(f"confirm the {gpu.name} total (", _shown(fig), ") on the node; ", where)
            )
    if stated == "inside":
        conditions.append(f"the estimate is inside the {margin:.0%} margin: measure the peak")
    if stated == "over":
        status_detail = "does not fit on the catalogued figure, which is unverified: " + compare
    else:
        status_detail = ("fits on paper: " if conditions else "fits: ") + compare
    if bounds is not None and not bounds.exact and same and low == "fit":
        status_detail += UnitText(
            f"; {bounds.basis}: fits anywhere from ",
            Figure(bounds.low),
            " to ",
            Figure(bounds.high),
        )
    if conditions:
        condition = UnitText("; ").join(conditions)
        return (
            Requirement("memory", name, VERIFY, status_detail, evidence, condition),
            usable,
            peak,
        )
    return Requirement("memory", name, FIT, status_detail, evidence), usable, peak


def length_requirement(spec, arch) -> Requirement:
    need = spec.lengths.context_tokens
    if arch is None:
        return Requirement(
            "length",
            "required length and batch kept",
            FIT,
            f"{need:,} tokens, estimated at the spec's full length and batch; "
            "a bare parameter count states no context limit",
        )
    limit = arch.max_position_embeddings
    ev = (
        {
            "kind": "catalogue",
            "claim": f"max_position_embeddings = {limit:,}",
            "source": arch.source,
            "version": arch.model_id,
            "scope": "model config",
        },
    )
    if need > limit:
        return Requirement(
            "length",
            "required length and batch kept",
            EXCLUDED,
            f"{need:,} tokens needed, the model is configured for {limit:,}",
            ev,
        )
    return Requirement(
        "length",
        "required length and batch kept",
        FIT,
        f"{need:,} of {limit:,} tokens; the estimate keeps the full length and "
        "batch (no candidate is judged at a shorter context)",
        ev,
    )


def _cc(gpu: Gpu) -> tuple[int, int]:
    return gpu.compute_capability or (0, 0)


def format_requirement(spec, gpu: Gpu) -> Requirement:
    """Weight formats, KV dtype and attention kernel against what the hardware runs."""
    excluded, verify, fine = [], [], []
    formats = set(spec.weights.formats_used)
    dtypes = {f for f in formats if f in FLOAT_BYTES}
    if spec.runtime.kv_cache_dtype:
        kv = spec.runtime.kv_cache_dtype
    else:
        kv = None
    arch_name = f"{gpu.name} ({gpu.architecture}" + (
        f", compute capability {gpu.compute_capability[0]}.{gpu.compute_capability[1]})"
        if gpu.compute_capability
        else ")"
    )
    for f in sorted(dtypes | ({kv} if kv and kv != "fp8" else set())):
        if f in ("bf16", "fp8") and f not in gpu.formats:
            need = "Ampere or newer" if f == "bf16" else "Ada, Hopper or newer"
            excluded.append(f"{f} needs {need}; {arch_name} has no native {f}")
        else:
            fine.append(f)
    if kv == "fp8":
        if "fp8" in gpu.formats:
            fine.append("fp8 KV cache")
        else:
            verify.append(
                "fp8 KV cache without fp8 hardware: check the engine supports it "
                "as storage-only on this card"
            )
    for f in sorted(formats - dtypes):
        if f in BNB_FORMATS:
            if gpu.vendor != "nvidia":
                verify.append(f"bitsandbytes {f} needs CUDA; on {gpu.vendor} check a ROCm build")
            else:
                fine.append(f"{f} (bitsandbytes, CUDA)")
        elif f in ("gptq", "awq"):
            if gpu.vendor != "nvidia" or _cc(gpu) < (7, 5):
                verify.append(f"{f} kernels on {arch_name}: check the engine supports them")
            else:
                fine.append(f)
        elif f == "gguf":
            if gpu.vendor == "nvidia":
                fine.append("gguf (llama.cpp)")
            else:
                verify.append("gguf on ROCm: check the llama.cpp build")
    if spec.runtime.attention == "flash":
        if gpu.vendor == "nvidia" and _cc(gpu) < (8, 0):
            excluded.append(
                f"FlashAttention-2 needs Ampere or newer; {arch_name} would fall "
                "back to another kernel with different memory"
            )
        elif gpu.vendor != "nvidia":
            verify.append("flash attention on ROCm: check the engine's kernel for this card")
        else:
            fine.append("flash attention")
    ev = (
        {
            "kind": "catalogue",
            "claim": f"{gpu.name} formats: {', '.join(gpu.formats)}",
            "source": gpu.spec_source,
            "version": gpu.file,
            "scope": "vendor datasheet",
        },
    )
    name = "weight format, KV dtype and attention kernel on this hardware"
    if excluded:
        return Requirement("format", name, EXCLUDED, "; ".join(excluded), ev)
    if verify:
        return Requirement("format", name, VERIFY, "; ".join(fine) or "-", ev, "; ".join(verify))
    return Requirement("format", name, FIT, "supported: " + ", ".join(fine), ev)


def placement_requirement(spec, offer: Offer) -> Requirement:
    p = spec.placement
    name = "placement on the offer's cards"
    ev = _offer_evidence(offer)
    if offer.gpu_count < p.gpus:
        return Requirement(
            "placement",
            name,
            EXCLUDED,
            f"the spec places the model on {p.gpus} GPUs; the offer has {offer.gpu_count}",
            ev,
        )
    idle = offer.gpu_count - p.gpus
    note = f"; {idle} card(s) idle but paid" if idle else ""
    link = offer.interconnect or "an undocumented interconnect"
    if (p.tensor_parallel > 1 or p.pipeline_parallel > 1) and offer.interconnect is None:
        return Requirement(
            "placement",
            name,
            VERIFY,
            f"{p.gpus} GPUs over {link}{note}",
            ev,
            "the offer does not say how its cards are linked: ask the provider "
            "(PCIe or NVLink) and check nvidia-smi topo -m on the node",
        )
    if p.tensor_parallel > 1 and offer.interconnect == "pcie":
        return Requirement(
            "placement",
            name,
            VERIFY,
            f"TP={p.tensor_parallel} on {offer.gpu_count} cards over PCIe{note}",
            ev,
            "tensor parallel across PCIe: check peer-to-peer access and "
            "all-reduce bandwidth on this host (nvidia-smi topo -m, nccl-tests)",
        )
    how = (
        f"TP={p.tensor_parallel}, PP={p.pipeline_parallel}, DP={p.data_parallel}"
        f"{', ' + p.data_parallel_sharding if p.data_parallel_sharding != 'none' else ''}"
    )
    return Requirement(
        "placement",
        name,
        FIT,
        f"{p.gpus} of {offer.gpu_count} card(s), {how}"
        + (f", over {offer.interconnect}" if offer.interconnect else "")
        + note,
        ev,
    )


def checkpoint_bytes(spec, est: Estimate, arch) -> tuple[int, str]:
    """Bytes of the checkpoint on disk and in host memory while it loads."""
    fmt = spec.weights.format
    if arch is not None and fmt in BNB_FORMATS:
        b = FLOAT_BYTES.get(arch.default_dtype, 2)
        n = arch.param_count * b
        return (
            n,
            f"the {arch.default_dtype} checkpoint quantised at load: {arch.param_count:,} x {b} B",
        )
    return est.weights_only_bytes, "the weights as stored"


def host_requirements(spec, est: Estimate, arch, offer: Offer) -> list[Requirement]:
    need, what = checkpoint_bytes(spec, est, arch)
    out = []
    ev = _offer_evidence(offer)
    if offer.host_ram_gb is None:
        out.append(
            Requirement(
                "host_ram",
                "host RAM to load the checkpoint",
                VERIFY,
                f"needs about {format_bytes(need, 'gb')} ({what})",
                ev,
                "host RAM is not documented by the offer: ask the provider",
            )
        )
    else:
        have = offer.host_ram_gb * 1e9
        if have >= need:
            out.append(
                Requirement(
                    "host_ram",
                    "host RAM to load the checkpoint",
                    FIT,
                    f"{offer.host_ram_gb:g} GB >= {format_bytes(need, 'gb')} ({what})",
                    ev,
                )
            )
        else:
            out.append(
                Requirement(
                    "host_ram",
                    "host RAM to load the checkpoint",
                    VERIFY,
                    f"{offer.host_ram_gb:g} GB < {format_bytes(need, 'gb')} ({what})",
                    ev,
                    "loading must stream shards from disk (safetensors "
                    "memory-mapping): test a load before committing",
                )
            )
    disk_need = need
    if spec.is_training and spec.task.kind == "full_finetune":
        disk_need = need * 2 + sum(
            i.max_bytes for i in est.items if i.category in ("optimizer", "master_weights")
        )
        what = f"{what}, plus one saved checkpoint with optimiser states"
    if offer.disk_gb is None:
        out.append(
            Requirement(
                "disk",
                "disk for the checkpoint",
                VERIFY,
                f"needs about {format_bytes(disk_need, 'gb')} ({what})",
                ev,
                "disk size is not documented by the offer: ask the provider",
            )
        )
    elif offer.disk_gb * 1e9 >= disk_need:
        out.append(
            Requirement(
                "disk",
                "disk for the checkpoint",
                FIT,
                f"{offer.disk_gb:g} GB >= {format_bytes(disk_need, 'gb')} ({what})",
                ev,
            )
        )
    else:
        out.append(
            Requirement(
                "disk",
                "disk for the checkpoint",
                EXCLUDED,
                f"{offer.disk_gb:g} GB < {format_bytes(disk_need, 'gb')} ({what})",
                ev,
            )
        )
    return out


def budget_requirement(spec, cost: Cost | None, offer: Offer) -> Requirement | None:
    c = spec.campaign
    if c.budget is None:
        return None
    name = "total cost within the budget"
    ev = _offer_evidence(offer)
    if cost is None:
        return Requirement(
            "budget", name, VERIFY, "the offer lists no price", ev, "ask the provider for a price"
        )
    if cost.currency != c.currency:
        return Requirement(
            "budget",
            name,
            VERIFY,
            f"priced in {cost.currency}, budget in {c.currency}",
            ev,
            f"convert {cost.total:,.2f} {cost.currency} at your exchange rate",
        )
    if cost.total > c.budget:
        return Requirement(
            "budget", name, EXCLUDED, f"{cost.describe()} exceeds {c.budget:,.2f} {c.currency}", ev
        )
    return Requirement(
        "budget", name, FIT, f"{cost.describe()} <= {c.budget:,.2f} {c.currency}", ev
    )


def schedule_requirement(spec, offer: Offer, days: float, today: datetime.date):
    c = spec.campaign
    if c.start_by is None:
        return None
    name = "usable by the start date, for the whole campaign"
    s = offer.schedule
    ev = _offer_evidence(offer)
    if s is None or s.lead_time_hours is None:
        return Requirement(
            "schedule",
            name,
            VERIFY,
            "no documented lead time",
            ev,
            f"ask the provider whether it can be running by {c.start_by}",
        )
    start = max(today, s.available_from or today)
    ready = start + datetime.timedelta(hours=s.lead_time_hours)
    if ready > c.start_by:
        return Requirement(
            "schedule",
            name,
            EXCLUDED,
            f"usable from {ready.isoformat()} (lead time {s.lead_time_hours:g} h), "
            f"needed by {c.start_by}",
            ev,
        )
    try:
        end = ready + datetime.timedelta(days=days)
    except OverflowError:  # a campaign that runs past the year 9999
        end = datetime.date.max
    if s.available_until is not None and s.available_until < end:
        return Requirement(
            "schedule",
            name,
            EXCLUDED,
            f"available until {s.available_until}, the campaign runs to {end}",
            ev,
        )
    return Requirement(
        "schedule",
        name,
        FIT,
        f"usable from {ready.isoformat()} (lead time {s.lead_time_hours:g} h), "
        f"needed by {c.start_by}",
        ev,
    )


def _version_tuple(text: str) -> tuple[int, ...]:
    """The first dotted version number in `text`: "550.90" -> (550, 90); none -> ()."""
    m = re.search(r"\d+(?:\.\d+)*", text)
    return tuple(int(x) for x in m.group(0).split(".")) if m else ()


def software_checks(
    spec, offer: Offer, gpu: Gpu
) -> tuple[Requirement | None, tuple[Preference, ...]]:
    req = spec.campaign.software
    if req is None:
        return None, ()
    sw = offer.software
    results = []
    for field_name in ("cuda", "driver"):
        wanted = getattr(req, field_name)
        if not wanted:
            continue
        have = getattr(sw, field_name) if sw else None
        if field_name == "cuda" and gpu.vendor != "nvidia":
            results.append((field_name, False, f"CUDA {wanted} asked for; {gpu.name} runs ROCm"))
        elif not have:
            results.append((field_name, None, f"{field_name} not documented (wanted >= {wanted})"))
        else:
            ok = _version_tuple(have) >= _version_tuple(wanted)
            results.append((field_name, ok, f"{field_name} {have} vs wanted >= {wanted}"))
    if req.image:
        have = sw.image if sw else None
        ok = None if not have else req.image.lower() in have.lower()
        results.append(("image", ok, f"image {have or 'not documented'} vs wanted {req.image}"))
    if not req.required:
        prefs = tuple(Preference(f"software {n} (preference)", ok, d) for n, ok, d in results)
        return None, prefs
    ev = _offer_evidence(offer)
    name = "required software environment"
    detail = "; ".join(d for _, _, d in results)
    if any(ok is False for _, ok, _ in results):
        return Requirement("software", name, EXCLUDED, detail, ev), ()
    if any(ok is None for _, ok, _ in results):
        return Requirement(
            "software",
            name,
            VERIFY,
            detail,
            ev,
            "ask the provider for the image, driver and CUDA versions, or "
            "install them yourself and budget the time",
        ), ()
    return Requirement("software", name, FIT, detail, ev), ()


def currency_requirement(cost: Cost | None, currency: str | None, offer: Offer):
    if cost is None or currency is None or cost.currency == currency:
        return None
    return Requirement(
        "currency",
        "price comparable with the other candidates",
        VERIFY,
        f"priced in {cost.currency}; the ranking is in {currency}",
        _offer_evidence(offer),
        f"convert {cost.total:,.2f} {cost.currency} to {currency} to rank it",
    )
