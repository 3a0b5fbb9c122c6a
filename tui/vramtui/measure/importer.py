"""Probe files and vLLM start-up logs become measured items of a spec.

Each figure keeps its counter name, stage, device, the dimensions actually executed and the
versions, so the ledger can show it beside the estimate and say whether it validates the
required workload. Importing never changes an estimate by itself: an item measurement replaces
its item only when it stands for the required workload (see `vramtui.measure.coverage`).
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from vramtui.errors import SpecError, VramtuiError
from vramtui.guarded_read import Unreadable, decode_json
from vramtui.spec import Measurement, Spec

# Probe stage names (free text in the user's script) -> spec stages.
STAGE_ALIASES = {
    "load": "load",
    "loading": "load",
    "model_load": "load",
    "prefill": "prefill",
    "decode": "decode",
    "generate": "decode",
    "generation": "decode",
    "forward": "forward",
    "backward": "backward",
    "optimizer_step": "optimizer_step",
    "optimiser_step": "optimizer_step",
    "optimizer": "optimizer_step",
    "step": "optimizer_step",
    "validation": "validation",
    "eval": "validation",
    "evaluation": "validation",
    "evaluate": "validation",
    "export": "export",
    "save": "export",
    "checkpoint": "export",
}

PROBE_COUNTERS = (
    # (field of the probe record, quantity, counter)
    (
        "max_memory_allocated_bytes",
        "max_memory_allocated",
        "torch.cuda.max_memory_allocated (peak since the stage started)",
    ),
    (
        "max_memory_reserved_bytes",
        "max_memory_reserved",
        "torch.cuda.max_memory_reserved (peak since the stage started)",
    ),
    (
        "nvml_process_used_bytes",
        "process_in_use",
        "NVML used memory of this process (nvmlDeviceGetComputeRunningProcesses), at stage end",
    ),
    (
        "nvml_used_bytes",
        "nvml_used",
        "NVML nvmlDeviceGetMemoryInfo used, device-wide, at stage end",
    ),
)


class MeasureImportError(VramtuiError):
    """A file that cannot be imported as measurements (one line: the problem and the fix)."""


MAX_MEASURE_FILE_BYTES = 256 * 2**20  # a probe file or a vLLM start-up log; more is not one
TOO_BIG_FIX = (
    "pass the vLLM server's start-up lines (head -c 50M FILE), or split the probe file by run"
)


@dataclass
class ImportResult:
    kind: str  # "probe" | "vllm"
    source: str
    measurements: list[Measurement] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what was read but not imported, and why
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        what = "vramtui probe file" if self.kind == "probe" else "vLLM start-up log"
        return f"{self.source}: {what}, {len(self.measurements)} measured figure(s)"


def read_measurements(path: Path, spec: Spec) -> ImportResult:
    """Read a probe JSON-lines file or a vLLM log into measurements for `spec`."""
    from vramtui.guarded_read import read_log_text

    path = Path(path)
    text = read_log_text(
        path,
        error=MeasureImportError,
        what="measurement file",
        cap=MAX_MEASURE_FILE_BYTES,
        too_big_fix=TOO_BIG_FIX,
        missing="not found (no such file)",
    )
    return read_measurements_text(text, spec, source=path.name, path=path)


def read_measurements_text(
    text: str, spec: Spec, source: str = "pasted text", path: Path | None = None
) -> ImportResult:
    if not text.strip():
        raise MeasureImportError(
            f"{source} is empty; pass the probe's JSON-lines file or the vLLM server's log"
        )
    if _looks_like_probe(text):
        return _from_probe(text, spec, source, path)
    from vramtui.measure.vllm_log import looks_like_vllm_log, parse_vllm_log

    if looks_like_vllm_log(text):
        return _from_vllm(parse_vllm_log(text, source=source), spec, source)
    raise MeasureImportError(
        f'{source} is neither a vramtui probe file (JSON lines with "vramtui_probe") nor a vLLM '
        "start-up log; record one with vramtui.probe or save the vLLM server's output to a file"
    )


def _looks_like_probe(text: str) -> bool:
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if not line.startswith("{"):
            return False
        try:
            return "vramtui_probe" in decode_json(line)
        except (Unreadable, TypeError):
            return '"vramtui_probe"' in line
    return False


def _is_dimension(value) -> bool:
    """A number >= 0 a spec can keep as a dimension (finite; an int compared exactly, so a
    huge one is refused without a float overflow)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value <= 2**63
    return isinstance(value, float) and math.isfinite(value) and value >= 0


def _spec_stages(spec: Spec) -> tuple[str, ...]:
    from vramtui.ledger.items import INFERENCE_STAGES, TRAINING_STAGES

    return TRAINING_STAGES if spec.is_training else INFERENCE_STAGES


def _date(iso: str | None) -> datetime.date | None:
    if not iso:
        return None
    try:
        return datetime.datetime.fromisoformat(iso).date()
    except ValueError:
        return None


def _from_probe(text: str, spec: Spec, source: str, path: Path | None) -> ImportResult:
    from vramtui.probe.records import ProbeFileError, parse_probe_lines

    try:
        runs = parse_probe_lines(text, source=source)
    except ProbeFileError as exc:
        raise MeasureImportError(str(exc)) from None
    result = ImportResult(kind="probe", source=source)
    lines: list[str] = []  # where each measurement was read, for messages
    stages = _spec_stages(spec)
    for run in runs:
        result.warnings.extend(run.warnings)
        names = {d.index: d.name for d in run.devices}
        versions = {k: str(v) for k, v in run.versions.items() if v}
        run_label = run.run_name or run.run_id[:8]
        if run.framework:
            versions["framework"] = run.framework
            _warn_framework(result, spec, run.framework, run_label)
        for st in run.stages:
            stage = STAGE_ALIASES.get(st.stage.strip().lower().replace(" ", "_"))
            where = f"run {run_label}, stage '{st.stage}'"
            if stage is None:
                result.skipped.append(
                    f"{where}: not a stage vramtui knows (use one of {', '.join(stages)})"
                )
                continue
            if stage not in stages:
                result.skipped.append(
                    f"{where}: the spec's task ({spec.task.kind}) has no {stage} stage"
                )
                continue
            if not st.measured:
                result.skipped.append(f"{where}: nothing measured ({st.reason or 'no CUDA'})")
                continue
            dims = {k: v for k, v in st.dims.items() if _is_dimension(v)}
            dropped = sorted(set(st.dims) - set(dims))
            if dropped:
                result.warnings.append(
                    f"{where}: dimension(s) {', '.join(dropped)} are not numbers and were left out"
                )
            for dev in st.devices:
                for attr, quantity, counter in PROBE_COUNTERS:
                    value = getattr(dev, attr, None)
                    if value is None:
                        continue
                    result.measurements.append(
                        Measurement(
                            stage=stage,
                            quantity=quantity,
                            bytes=int(value),
                            counter=counter,
                            source=f"probe {source}, {where}",
                            gpu=dev.index,
                            device=names.get(dev.index, ""),
                            date=_date(st.time_end or run.time),
                            run=run.run_id,
                            error=st.error or "",
                            dims=dims,
                            versions=versions,
                        )
                    )
                    lines.append(f"{source}, line {st.line}")
    if not result.measurements and not result.skipped:
        raise MeasureImportError(
            f"{source}: the probe file holds no stage records; wrap your stages in "
            "`with probe.stage(...)` and run again"
        )
    _check_storable(result, spec, lines)
    return result


def _check_storable(result: ImportResult, spec: Spec, where: list[str]) -> None:
    """Every figure read must be one a spec can store; else the error names the imported file
    and its line (`where[i]` for measurement i), never the spec the figures were meant for."""
    if not result.measurements:
        return
    from vramtui.spec import spec_from_dict, spec_to_dict

    try:
        spec_from_dict(
            spec_to_dict(replace(spec, measured=tuple(result.measurements))), result.source
        )
    except SpecError as exc:
        found = re.search(r"\bmeasured\[(\d+)\]", str(exc))
        index = int(found.group(1)) if found else None
        at = where[index] if index is not None and index < len(where) else result.source
        raise MeasureImportError(
            f"{at}: the record holds a figure no spec can store ({exc}); fix or delete that "
            "record"
        ) from None


# vLLM figure -> (stage, quantity, item, counter)
VLLM_FIGURES = {
    "weights": (
        "load",
        "item",
        "weights+quant_metadata",
        "vLLM 'model loading took' (weights on this GPU, measured by vLLM)",
    ),
    "non_torch": (
        "prefill",
        "item",
        "overhead.cuda_context",
        "vLLM non_torch_memory (CUDA context, NCCL and library workspaces, from its profile)",
    ),
    "activation_peak": (
        "prefill",
        "item",
        "activations+logits",
        "vLLM PyTorch activation peak (profiled at max_num_batched_tokens)",
    ),
    "kv_cache": (
        "decode",
        "kv_cache_pool",
        None,
        "vLLM KV cache memory (the pool sized to fill gpu_memory_utilization)",
    ),
    "cuda_graph": (
        "decode",
        "item",
        "cuda_graphs",
        "vLLM CUDA graph capture ('took ... GiB')",
    ),
    "kv_cache_tokens": ("decode", "kv_cache_tokens", None, "vLLM 'GPU KV cache size' (tokens)"),
    "gpu_blocks": ("decode", "gpu_blocks", None, "vLLM '# GPU blocks'"),
    "max_concurrency": (
        "decode",
        "max_concurrency",
        None,
        "vLLM 'Maximum concurrency for N tokens per request'",
    ),
}


def _from_vllm(startup, spec: Spec, source: str) -> ImportResult:
    result = ImportResult(kind="vllm", source=source)
    lines: list[str] = []  # where each measurement was read, for messages
    if spec.is_training:
        raise MeasureImportError(
            f"{source} is a vLLM serving log but the spec is a {spec.task.kind} spec; import it "
            "into an inference spec"
        )
    versions = {"vllm": startup.version} if startup.version else {}
    if startup.model and spec.model.id and not _same_model(startup.model, spec.model.id):
        result.warnings.append(
            f"the log serves '{startup.model}' but the spec's model is '{spec.model.id}': the "
            "figures may not apply"
        )
    if startup.tensor_parallel_size and startup.tensor_parallel_size != (
        spec.placement.tensor_parallel
    ):
        result.warnings.append(
            f"the log runs tensor_parallel_size={startup.tensor_parallel_size}, the spec "
            f"{spec.placement.tensor_parallel}: per-GPU figures will not match the spec's layout"
        )
    base_dims = {}
    if startup.max_model_len:
        base_dims["max_model_len"] = startup.max_model_len
    if startup.block_size:
        base_dims["block_size"] = startup.block_size
    seen: set[tuple[str, int | None]] = set()
    ranked = {f.name for f in startup.figures if f.rank is not None}
    for fig in startup.figures:
        # vLLM prints some figures more than once (the driver and each worker, an INFO and a
        # DEBUG line): one per figure and rank, the first printed; a figure some rank printed
        # is taken from the ranks, not from an unattributed repeat.
        if (fig.name, fig.rank) in seen or (fig.rank is None and fig.name in ranked):
            continue
        seen.add((fig.name, fig.rank))
        if fig.name not in VLLM_FIGURES:
            if fig.name not in ("total_gpu_memory", "cpu_blocks"):
                result.skipped.append(f"line {fig.line}: {fig.name} is not imported")
            continue
        stage, quantity, item, counter = VLLM_FIGURES[fig.name]
        dims = dict(base_dims)
        if fig.tokens_per_request:
            dims["tokens_per_request"] = fig.tokens_per_request
        count = quantity in ("kv_cache_tokens", "gpu_blocks", "max_concurrency")
        if (count and fig.value is None) or (not count and fig.bytes is None):
            result.skipped.append(f"line {fig.line}: {fig.name} has no figure")
            continue
        lines.append(f"{source}, line {fig.line}")
        result.measurements.append(
            Measurement(
                stage=stage,
                quantity=quantity,
                bytes=None if count else fig.bytes,
                value=fig.value if count else None,
                counter=counter,
                as_written=fig.as_written,
                item=item,
                source=f"vLLM log {source}, line {fig.line}",
                gpu=fig.rank,
                versions=versions,
                dims=dims,
            )
        )
    _check_storable(result, spec, lines)
    for fig in startup.figures:
        if fig.name == "total_gpu_memory" and fig.bytes:
            result.warnings.append(
                f"the GPU reports {fig.as_written} in total (cudaMemGetInfo, line {fig.line})"
            )
            break
    return result


def _same_model(served: str, spec_model: str) -> bool:
    a = served.rstrip("/").split("/")[-1].lower()
    b = spec_model.rstrip("/").split("/")[-1].lower()
    return a == b


def merge_measurements(spec: Spec, measurements) -> tuple[Spec, int]:
    """`spec` with the new measurements appended (exact repeats skipped); how many were new."""
    existing = set(spec.measured)
    new = []
    for m in measurements:
        if m not in existing:
            existing.add(m)
            new.append(m)
    if not new:
        return spec, 0
    return replace(spec, measured=tuple(spec.measured) + tuple(new)), len(new)


def _warn_framework(result, spec, framework: str, run_label: str) -> None:
    """A probe run under another training framework than the spec's is said: the estimate
    follows the spec's framework profile, and the run's figures follow the run's."""
    if spec.task.kind == "inference":
        return
    said = spec.training.framework or "hf-trainer"
    if framework == said:
        return
    default = "" if spec.training.framework else " (the default)"
    result.warnings.append(
        f"run {run_label} ran under {framework} but the spec's training framework is "
        f"{said}{default}: set [training] framework = \"{framework}\" so the estimate follows "
        "the same framework as the measurements"
    )
