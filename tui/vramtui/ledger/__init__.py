"""The memory ledger: one pure function from a spec (+ architecture) to itemised estimates."""

from __future__ import annotations

from vramtui.ledger import encoders
from vramtui.ledger.activations import inference_items
from vramtui.ledger.context import LedgerContext
from vramtui.ledger.items import (
    ESTIMATED,
    MEASURED,
    UNKNOWN,
    Estimate,
    GpuLayout,
    LedgerItem,
)
from vramtui.ledger.kv import kv_items
from vramtui.ledger.llama_cpp import (
    compute_buffer_item,
    host_note,
    is_llama_cpp,
    kv_cache_items,
    offload_weight_items,
)
from vramtui.ledger.overheads import overhead_items, reserve_item
from vramtui.ledger.training import training_state_items
from vramtui.ledger.training_activations import training_items
from vramtui.ledger.training_mechanisms import (
    dequantised_head_items,
    fsdp_frozen_items,
    fsdp_root_items,
    offload_param_items,
    untied_head_items,
)
from vramtui.ledger.weights import weight_items

__all__ = [
    "ESTIMATED",
    "MEASURED",
    "UNKNOWN",
    "Estimate",
    "GpuLayout",
    "LedgerItem",
    "estimate",
]


def estimate(spec, arch=None, checkpoint=None) -> Estimate:
    """Itemise the memory `spec` needs.

    `arch` is the model's Architecture (None for a bare parameter count: then only what a
    parameter count determines is estimated and the rest is listed as unknown); `checkpoint`
    is the CheckpointInfo of a local model directory, whose safetensors headers give exact
    weight bytes when the spec loads the checkpoint as stored.
    """
    p = spec.placement
    layout = GpuLayout(p.gpus, p.tensor_parallel, p.pipeline_parallel)
    ctx = LedgerContext(spec=spec, arch=arch, checkpoint=checkpoint, layout=layout)
    llama_cpp = is_llama_cpp(spec)
    items: list[LedgerItem] = list(weight_items(ctx))
    if llama_cpp and arch is not None and not getattr(checkpoint, "is_gguf", False):
        items = offload_weight_items(ctx, items)
    notes: list[str] = []
    if spec.headroom.mode == "manual":
        items.append(reserve_item(ctx))
        notes.append(
            "manual reserve: the KV cache, activations, gradients, optimiser states and "
            "overheads are assumed to fit inside it; switch headroom.mode to 'itemised' to "
            "check that assumption"
        )
    else:
        encoder = encoders.shape_of(arch) is not None and not llama_cpp
        if ctx.is_training:
            items += untied_head_items(ctx)
            items += training_state_items(ctx)
            items += encoders.training_items(ctx) if encoder else training_items(ctx)
            items += fsdp_frozen_items(ctx, items)
            items += fsdp_root_items(ctx, items)
            items += dequantised_head_items(ctx)
        elif llama_cpp:
            items += kv_cache_items(ctx)
            items.append(compute_buffer_item(ctx))
        elif encoder:
            items += encoders.kv_items(ctx)
            items += encoders.inference_items(ctx)
        else:
            items += kv_items(ctx)
            items += inference_items(ctx)
        if llama_cpp:  # no PyTorch allocator, no conversion copy: the context and NCCL only
            items += [
                i
                for i in overhead_items(ctx)
                if i.key in ("overhead.cuda_context", "overhead.nccl")
            ]
        else:
            items += overhead_items(ctx)
        if ctx.is_training:
            items = offload_param_items(ctx, items)
    if llama_cpp:
        host = host_note(ctx)
        if host:
            notes.append(host)
    if (
        p.gpus > 1
        and p.tensor_parallel == 1
        and p.pipeline_parallel == 1
        and (p.data_parallel_sharding == "none")
    ):
        notes.append(
            f"{p.gpus} GPUs without tensor/pipeline parallelism or ZeRO/FSDP are {p.gpus} "
            "separate memories: each holds a full replica with the spec's batch"
        )
    if ctx.is_training and ctx.framework is not None:
        notes.append(ctx.framework.summary())
    if arch is not None:
        notes[:0] = architecture_notes(arch)
        notes += encoders.length_warnings(ctx)
    stored_note = _stored_format_note(spec, arch)
    if stored_note:
        notes.append(stored_note)
    items, stage_measurements = _apply_measurements(items, spec, layout)
    label = arch.model_id if arch is not None else "bare parameter count"
    params = arch.param_count if arch is not None else spec.model.params
    return Estimate(
        items=tuple(items),
        stages=ctx.stages,
        layout=layout,
        model_label=label,
        param_count=params,
        notes=tuple(notes),
        measurements=tuple(stage_measurements),
    )


def architecture_notes(arch) -> list[str]:
    """Where the architecture came from, how its structure was obtained when it is not
    hand-modelled, and what the ledger cannot itemise for its family."""
    out = [f"architecture from {arch.source}"]
    if not arch.is_hand_modelled:
        out.append(f"structure of {arch.model_type}: {arch.structure}")
    out += [f"{arch.model_type}: {n}" for n in arch.ledger_notes]
    return out


def _stored_format_note(spec, arch) -> str:
    """Say so when the spec's format is not the one the checkpoint declares."""
    if arch is None or not arch.quantization_config:
        return ""
    from vramtui.models.quantization import (
        describe_quantization,
        weights_from_quantization_config,
    )

    stored = weights_from_quantization_config(arch.quantization_config)
    what = describe_quantization(arch.quantization_config)
    if stored is None:
        return (
            f"the checkpoint declares quantization {what}, which this ledger does not model; "
            f"the weights are estimated as {spec.weights.format}"
        )
    if stored["format"] != spec.weights.format:
        return (
            f"the checkpoint is stored as {what} but the spec says {spec.weights.format}: "
            "the estimate follows the spec; set [weights] to the stored format to match it"
        )
    return ""


def _apply_measurements(items: list[LedgerItem], spec, layout) -> tuple[list[LedgerItem], list]:
    """A measurement of one item replaces that item's estimate (status measured, with its
    counter) when it stands for the required workload: the item does not depend on batch and
    length, or the dimensions executed cover the spec's. Several such measurements: the largest
    wins. Everything else is kept apart, shown beside the estimates, never summed."""
    from dataclasses import replace

    from vramtui.ledger.placement import distribution
    from vramtui.measure.coverage import coverage

    categories = {i.key: i.category for i in items}
    by_item: dict[str, object] = {}
    for m in spec.measured:
        if m.quantity != "item" or not m.item or m.item not in categories or m.bytes is None:
            continue
        if not coverage(m, spec, categories).validates:
            continue
        if m.item not in by_item or m.bytes > by_item[m.item].bytes:
            by_item[m.item] = m
    out = []
    for item in items:
        m = by_item.get(item.key)
        if m is None:
            out.append(item)
            continue
        previous = "unknown" if item.is_unknown else "the estimate"
        out.append(
            replace(
                item,
                status=MEASURED,
                stage_bytes={s: m.bytes for s in item.stages},
                basis=f"measured per GPU: {m.as_written or f'{m.bytes:,} B'} ({m.counter}"
                + (f"; {m.source}" if m.source else "")
                + f"); replaces {previous}: "
                + item.basis,  # a UnitText keeps its figures through `+`
                counter=m.counter,
                distribution=distribution(layout),
                replaced_estimate=item,
            )
        )
    return out, [m for m in spec.measured if m.quantity != "item" and not m.is_count]
