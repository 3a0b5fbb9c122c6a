"""The dry run's entry points: run it, turn it into JSON, render it beside the ledger."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from vramtui.dryrun.errors import DryRunError
from vramtui.dryrun.result import DryRunResult, StageResult


def run_dry_run(spec, arch, *, local_config_dir: str | Path | None = None) -> DryRunResult:
    """Trace the spec's stages with the real transformers model code on the meta device.

    `arch` is the spec's Architecture (its `.config` is the catalogue's config.json);
    `local_config_dir` reads DIR/config.json instead. Raises DryRunError (one line) when torch
    or transformers are missing, when transformers cannot build the model, or when the model
    runs an op with no meta kernel; the analytic ledger stands in every case.
    """
    return trace_spec(spec, arch, local_config_dir=local_config_dir, device="meta")


def try_dry_run(
    spec, arch, *, local_config_dir: str | Path | None = None
) -> tuple[DryRunResult | None, str | None]:
    """(the trace, None), or (None, the one-line reason it failed): a failed dry run never
    takes the ledger with it."""
    try:
        return run_dry_run(spec, arch, local_config_dir=local_config_dir), None
    except DryRunError as exc:
        return None, str(exc)


def failure_note(error: str) -> str:
    """The estimate's note for a dry run that failed."""
    return f"dry run failed, the ledger stands without it: {error}"


def failure_to_dict(error: str) -> dict:
    return {"status": "failed", "error": error}


def with_dry_run_notes(estimate, result: DryRunResult | None, error: str | None = None):
    """The estimate with the dry run's notes for the ledger's reader: the failure, or a
    disagreement of more than 10% on the weights (both figures named, and why)."""
    from dataclasses import replace

    notes: list[str] = []
    if error is not None:
        notes.append(failure_note(error))
    elif result is not None:
        from vramtui.dryrun.compare import weights_check

        check = weights_check(result, estimate)
        if check is not None and check.disagrees:
            notes.append(check.line())
    if not notes:
        return estimate
    return replace(estimate, notes=(*estimate.notes, *notes))


def trace_spec(
    spec, arch, *, local_config_dir: str | Path | None = None, device: str = "meta"
) -> DryRunResult:
    """run_dry_run on any device: "meta" for the dry run, "cpu" to check it against a real run
    of a tiny model with the same tracker."""
    from vramtui.dryrun.build import build_model, import_torch, load_config

    if arch is None and local_config_dir is None:
        raise DryRunError(
            "a bare parameter count has no architecture to trace: give model.id (a catalogue "
            "model) or model.path (a directory with config.json)"
        )
    torch, transformers = import_torch()
    config = load_config(arch, local_config_dir)
    if arch is None:
        from vramtui.models.hf_config import architecture_from_hf_config

        arch = architecture_from_hf_config(
            config, model_id=str(local_config_dir), source=f"{local_config_dir}/config.json"
        )
    t0 = time.perf_counter()
    built = build_model(spec, arch, config, device=device)
    build_seconds = time.perf_counter() - t0
    run = _run(spec, built, device)
    return _result(spec, arch, built, run, build_seconds, device, torch, transformers)


def _run(spec, built, device):
    from vramtui.dryrun.stages import run_stages
    from vramtui.dryrun.tracker import UnsupportedOpError

    try:
        return run_stages(spec, built, device=device)
    except UnsupportedOpError as exc:
        if exc.no_kernel:
            raise DryRunError(
                f"the model calls {exc.op}, which has no meta-device kernel (a data-dependent "
                f"or unsupported operation: {exc.detail}); the dry run cannot trace it, the "
                "analytic ledger still stands"
            ) from None
        raise DryRunError(
            f"the trace failed at {exc.op} ({exc.detail}); the analytic ledger still stands"
        ) from None
    except DryRunError:
        raise
    except Exception as exc:  # noqa: BLE001 - the model code itself failed: say so in one line
        text = " ".join(str(exc).split())[:200]
        raise DryRunError(
            f"the traced model code raised {type(exc).__name__}: {text}; the analytic ledger "
            "still stands"
        ) from None


def _versions(torch, transformers) -> dict[str, str]:
    out = {"torch": torch.__version__, "transformers": transformers.__version__}
    try:
        import peft

        out["peft"] = peft.__version__
    except ImportError:
        pass
    return out


def _placement_note(spec) -> str | None:
    p = spec.placement
    if p.gpus <= 1:
        return None
    return (
        f"placement: {p.gpus} GPUs (TP={p.tensor_parallel}, PP={p.pipeline_parallel}, "
        f"sharding {p.data_parallel_sharding}): the trace is one replica of the whole model "
        "on one device; the per-GPU division is the ledger's placement"
    )


def _result(spec, arch, built, run, build_seconds, device, torch, transformers) -> DryRunResult:
    from vramtui.dryrun import attention

    training = spec.task.kind != "inference"
    ckpt = spec.training.grad_checkpointing if training else "none"
    stages = tuple(
        StageResult(
            stage=p.name,
            description=p.description,
            peak_bytes=p.peak_bytes,
            peak_rounded_bytes=p.peak_rounded_bytes,
            start_bytes=p.start_bytes,
            end_bytes=p.end_bytes,
            peak_categories_bytes=p.peak_categories,
            end_categories_bytes=p.end_categories,
            peak_op=p.peak_op,
            allocations=p.allocations,
        )
        for p in run.peaks
    )
    baseline_by_tag = _baseline(run)
    baseline = sum(baseline_by_tag.values())
    notes = [*built.notes, *run.notes]
    placement = _placement_note(spec)
    if placement:
        notes.append(placement)
    return DryRunResult(
        model_label=arch.model_id,
        config_source=arch.source,
        task_kind=spec.task.kind,
        compute_dtype=built.compute_dtype,
        attention_kernel=spec.runtime.attention,
        attention_used=built.attention_used
        or attention.describe(spec.runtime.attention, training, ckpt),
        attn_implementation=built.attn_implementation,
        stages=stages,
        baseline_bytes=baseline,
        param_count=built.param_count,
        trainable_params=sum(p.numel() for p in built.trainable),
        build_seconds=build_seconds,
        trace_seconds=run.seconds,
        device=device,
        versions=_versions(torch, transformers),
        notes=tuple(notes),
        weights_bytes=baseline_by_tag.get("parameters", 0),
        weights_gap=built.weights_gap,
    )


def _baseline(run) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in run.tracker.records:
        if rec.tag in ("parameters", "adapter", "buffers") and rec.stage is None:
            out[rec.tag] = out.get(rec.tag, 0) + rec.nbytes
    return out


def dry_run_to_dict(result: DryRunResult, estimate=None) -> dict:
    """The trace as JSON-ready data; with the ledger's estimate, the comparison and the items
    a trace of tensors cannot see."""
    out = result.to_dict()
    # Traced estimates, labelled as such (status "traced_estimate" with the counter's name):
    # a meta-device trace is never a measurement.
    out["traced_items"] = [
        {
            "key": i.key,
            "name": i.name,
            "category": i.category,
            "status": i.status,
            "counter": i.counter,
            "stage_bytes": dict(i.stage_bytes),
        }
        for i in result.traced_items()
    ]
    if estimate is not None:
        from vramtui.dryrun.compare import compare, comparison_to_dict, not_in_trace, weights_check

        out["comparison"] = comparison_to_dict(compare(result, estimate))
        check = weights_check(result, estimate)
        if check is not None:
            out["weights_check"] = check.to_dict()
        out["not_in_trace"] = [
            {
                "key": i.key,
                "name": i.name,
                "status": i.status,
                "ledger_max_bytes": i.max_bytes if not i.is_unknown else None,
                "basis": i.basis,
            }
            for i in not_in_trace(estimate)
        ]
    return out


def dry_run_renderable(result: DryRunResult, estimate=None, unit: str = "gib"):
    from vramtui.dryrun.render import dry_run_renderable as render

    return render(result, estimate, unit)


def build_weights(spec, arch, *, local_config_dir: str | Path | None = None):
    """The dry run's weights only: the model built on the meta device (stored formats
    honoured), no stage traced; a WeightsBuild with its parameter bytes and notes."""
    from vramtui.dryrun.build import build_model, import_torch, load_config

    if arch is None and local_config_dir is None:
        raise DryRunError("a bare parameter count has no architecture to build")
    import_torch()
    config = load_config(arch, local_config_dir)
    t0 = time.perf_counter()
    built = build_model(spec, arch, config, device="meta")
    seconds = time.perf_counter() - t0
    adapter = built.adapter_params
    weights = sum(
        p.numel() * p.element_size() for p in built.model.parameters() if id(p) not in adapter
    )
    return WeightsBuild(weights, built.weights_gap, tuple(built.notes), seconds)


@dataclass(frozen=True)
class WeightsBuild:
    weights_bytes: int  # parameter bytes of the built model (no adapters, no buffers)
    weights_gap: str  # why they cannot match the ledger's, "" when they should
    notes: tuple[str, ...]
    build_seconds: float
