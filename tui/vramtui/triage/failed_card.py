"""Which card failed, and how much memory it had: what triage judges "fits" against.

Advice must never propose a card with less memory than the one that failed (at the same
workload it fails too), so the failed card's real capacity is looked for, in this order:
1. the total capacity the error printed (PyTorch: "GPU 0 has a total capacity of 79.25 GiB");
2. the per-process limit it printed ("allowed: 20.40 GB" under a memory fraction);
3. the card the user names (`vramtui triage --failed-gpu NAME`, the app's question);
4. a catalogue card the log itself names by its NVML name ("NVIDIA A100-SXM4-80GB" in an
   nvidia-smi table, a vLLM or Trainer banner): one card only, several different ones are
   ambiguous and name none;
5. the card the spec's measured figures were taken on.
Otherwise the capacity is unknown and says so; a proposal to rent then says it holds only if
the failed card had less memory than the one proposed.
"""

from __future__ import annotations

from vramtui.errors import SpecError
from vramtui.spec import Spec

MAX_SCANNED_CHARS = 2_000_000  # the log is bounded where it enters; this bounds the name scan


def _mentions(gpu) -> tuple[str, ...]:
    """The NVML names, and each without its vendor word when what is left is still specific
    ("GeForce RTX 3090", "A100-SXM4-80GB"; not "A10" or "H200", which read as bare words)."""
    out = []
    for name in gpu.nvml_names:
        out.append(name)
        for vendor in ("NVIDIA ", "AMD "):
            if name.startswith(vendor):
                rest = name[len(vendor) :]
                if " " in rest or "-" in rest:
                    out.append(rest)
    return tuple(dict.fromkeys(out))


def gpus_named_in(text: str, catalog) -> list:
    """Catalogue cards the text names, in order of first mention (each once)."""
    if not text or catalog is None:
        return []
    text = text[:MAX_SCANNED_CHARS]
    low = text.lower()
    found: list[tuple[int, object]] = []
    for gpu in catalog.gpus.values():
        first = None
        for mention in _mentions(gpu):
            key = mention.lower()
            start = 0
            while True:
                at = low.find(key, start)
                if at < 0:
                    break
                before = low[at - 1] if at else " "
                after = low[at + len(key)] if at + len(key) < len(low) else " "
                if not (before.isalnum() or before in "-_") and not (
                    after.isalnum() or after in "-_"
                ):
                    first = at if first is None else min(first, at)
                    break
                start = at + 1
        if first is not None:
            found.append((first, gpu))
    found.sort(key=lambda t: t[0])
    return [g for _, g in found]


def resolve_failed_gpu(name: str, catalog):
    """The catalogue card the user says failed, or one line naming the problem and the fix."""
    from vramtui.gpu_match import GpuMatchError, match_gpu
    from vramtui.safe_text import safe_line

    if catalog is None:
        raise SpecError(f"--failed-gpu {safe_line(name)[:80]!r}: no GPU catalogue is loaded")
    try:
        return match_gpu(catalog.gpus, name)
    except GpuMatchError as exc:
        raise SpecError(f"--failed-gpu: {safe_line(str(exc))}") from None


def failed_card_capacity(
    reading, spec: Spec, catalog=None, failed_gpu=None, log_text: str | None = None
) -> tuple[int | None, str]:
    """(the real capacity of the card that failed, where it comes from, in words), or
    (None, "") when nothing says. `failed_gpu` is a catalogue `Gpu` the user named."""
    ev = reading.primary
    f = ev.figures if ev else {}
    if f.get("total_capacity_bytes"):
        return f["total_capacity_bytes"], "the total capacity the error printed"
    if f.get("allowed_bytes"):
        return f["allowed_bytes"], "the memory the error says the process was allowed"
    if failed_gpu is not None:
        return failed_gpu.usable().bytes, f"the card you named ({failed_gpu.name})"
    if catalog is not None:
        named = gpus_named_in(log_text or "", catalog)
        if len(named) == 1:
            return named[0].usable().bytes, f"the card the log names ({named[0].name})"
        from vramtui.gpu_match import GpuMatchError, match_gpu

        for m in reversed(spec.measured):
            try:
                gpu = match_gpu(catalog.gpus, m.device) if m.device else None
            except GpuMatchError:
                gpu = None
            if gpu is not None:
                return gpu.usable().bytes, f"the spec's measured card ({gpu.name})"
    return None, ""


__all__ = ["failed_card_capacity", "gpus_named_in", "resolve_failed_gpu"]
