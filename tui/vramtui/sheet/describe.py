"""The spec's fields in words, as the sheet states them (workload, conditions, factors)."""

from __future__ import annotations

import datetime

from vramtui.sheet.blocks import WARN, Cell, Code, Mark
from vramtui.sheet.figures import exact

TASK_LABELS = {
    "inference": "inference",
    "full_finetune": "full fine-tune",
    "lora": "LoRA fine-tune",
    "qlora": "QLoRA fine-tune",
}


def context_tokens(spec) -> int:
    return spec.lengths.context_tokens


def task_text(spec) -> str:
    task = TASK_LABELS.get(spec.task.kind, spec.task.kind)
    lora = spec.task.lora
    if lora is not None:
        task += f", rank {lora.rank}" + (f", alpha {lora.alpha:g}" if lora.alpha else "")
        task += f" on {', '.join(lora.targets)}"
    return task


def weights_text(w) -> str:
    text = w.format
    if w.bits is not None:
        text += f" {w.bits}-bit"
    if w.group_size is not None:
        text += f", group size {w.group_size}"
    if w.double_quant is not None:
        text += f", double quant {'on' if w.double_quant else 'off'}"
    if w.gguf_type:
        text += f" {w.gguf_type}"
    if w.groups:
        text += "; kept in another format: " + ", ".join(f"{g} {f}" for g, f in w.groups)
    return text


def lengths_text(spec) -> str:
    lg = spec.lengths
    if spec.is_training:
        return f"{lg.seq_len:,} tokens per sequence"
    return (
        f"{lg.prompt_tokens:,} prompt + {lg.generated_tokens:,} generated = "
        f"{lg.context_tokens:,} tokens per sequence"
    )


def batch_text(spec) -> str:
    b = spec.batch
    if not spec.is_training:
        held = b.concurrency * context_tokens(spec)
        plural = "s" if b.concurrency != 1 else ""
        return f"{b.concurrency} concurrent sequence{plural} ({held:,} tokens held at once)"
    accum = b.grad_accum or 1
    text = f"micro-batch {b.micro_batch} x grad_accum {accum} = {b.micro_batch * accum} sequences"
    dp = spec.placement.data_parallel
    if dp > 1:
        return f"{text} per replica per update; x {dp} data-parallel = {b.micro_batch * accum * dp}"
    return f"{text} per update"


def placement_text(spec) -> str:
    p = spec.placement
    if p.gpus == 1:
        return "1 GPU"
    text = (
        f"{p.gpus} GPUs: TP {p.tensor_parallel} x PP {p.pipeline_parallel} x DP {p.data_parallel}"
    )
    if p.data_parallel_sharding != "none":
        text += f", {p.data_parallel_sharding} sharding"
    return text


def training_text(t) -> str:
    state = f" ({t.optimizer_state_dtype} states)" if t.optimizer_state_dtype else ""
    return (
        f"{t.optimizer}{state}; gradients {t.grad_dtype}; fp32 master weights "
        f"{'yes' if t.master_weights_fp32 else 'no'}; checkpointing {t.grad_checkpointing}"
        + (f"; framework {t.framework}" if t.framework else "; framework hf-trainer (the default)")
    )


def headroom_cell(spec) -> Cell:
    h = spec.headroom
    if h.mode == "manual":
        reserve = round(h.reserve_gib * 2**30)
        return (
            "manual reserve ",
            exact(reserve),
            f": {h.reason} (",
            Mark(WARN, "an assumption"),
            ")",
        )
    text = "itemised: every overhead is a ledger item"
    if h.margin_fraction:
        text += f"; keep {h.margin_fraction:.0%} of each card free"
    return text


def campaign_text(spec) -> str:
    c = spec.campaign
    parts = []
    if c.days is not None:
        parts.append(f"{c.days:g} day(s)")
    if c.budget is not None:
        parts.append(f"budget {c.budget:,.2f} {c.currency}")
    if c.start_by is not None:
        parts.append(f"usable by {c.start_by.isoformat()}")
    if c.software is not None:
        parts.append(software_text(c.software))
    return "; ".join(parts)


def software_text(sw) -> str:
    asked = [
        f"{name} {value}"
        for name, value in (("image", sw.image), ("driver >=", sw.driver), ("CUDA >=", sw.cuda))
        if value
    ]
    kind = "required" if sw.required else "a preference"
    return f"software asked for: {', '.join(asked) or 'nothing named'} ({kind})"


def quality_cell(spec) -> Cell:
    """The quality criteria a change of format, length or engine must keep, on one line."""
    if not spec.quality:
        return (
            Mark(WARN, "none stated"),
            ": no change of format, KV dtype or engine can be checked; add ",
            Code("[[quality]]"),
        )
    return "; ".join(f"{q.metric} {q.threshold}" for q in spec.quality)


def when_text(time: str) -> str:
    """ "2026-12-01T10:00:00+00:00" as "2026-12-01 10:00 UTC" (as written if not ISO 8601)."""
    try:
        t = datetime.datetime.fromisoformat(time)
    except ValueError:
        return time
    text = t.strftime("%Y-%m-%d %H:%M")
    offset = t.utcoffset()
    if offset is None:
        return text
    if not offset:
        return text + " UTC"
    return text + " " + t.strftime("%z")[:3] + ":" + t.strftime("%z")[3:]
