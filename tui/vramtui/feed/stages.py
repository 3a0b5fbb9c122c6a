"""Stage marks on the live feed: the peak per stage per GPU, with its counter, ready to be
stored in the spec as measured items (never mixed with the estimates)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from vramtui.feed.sample import Snapshot
from vramtui.spec import Measurement

INFERENCE_STAGES = ("load", "prefill", "decode")
TRAINING_STAGES = ("load", "forward", "backward", "optimizer_step", "validation", "export")


@dataclass
class StagePeak:
    stage: str
    host: str
    gpu_index: int
    gpu_name: str | None
    used_peak_bytes: int
    memory_info_version: int | None
    samples: int = 1


class StageTracker:
    """Follows the stage the user marked and keeps, per (stage, host, GPU), the highest NVML
    used memory seen while that stage was marked."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.peaks: dict[tuple[str, str, int], StagePeak] = {}
        self.marks: list[tuple[float, str | None]] = []

    def mark(self, stage: str | None, at: float) -> None:
        """Start `stage` (None ends marking); the previous stage ends here."""
        self.current = stage
        self.marks.append((at, stage))

    def update(self, snapshot: Snapshot) -> None:
        if self.current is None or snapshot.error:
            return
        for g in snapshot.gpus:
            if g.used_bytes is None:
                continue
            key = (self.current, snapshot.host, g.index)
            peak = self.peaks.get(key)
            if peak is None:
                self.peaks[key] = StagePeak(
                    self.current,
                    snapshot.host,
                    g.index,
                    g.name,
                    g.used_bytes,
                    g.memory_info_version,
                )
            else:
                peak.samples += 1
                if g.used_bytes > peak.used_peak_bytes:
                    peak.used_peak_bytes = g.used_bytes
                    peak.memory_info_version = g.memory_info_version

    def measurements(self, spec, date: datetime.date | None = None) -> list[Measurement]:
        """The peaks as measured items for the spec's stages (others are skipped)."""
        stages = TRAINING_STAGES if spec.is_training else INFERENCE_STAGES
        out = []
        for (stage, host, gpu), p in sorted(self.peaks.items()):
            if stage not in stages:
                continue
            version = p.memory_info_version
            counter = (
                "NVML nvmlDeviceGetMemoryInfo used (v2: without the driver's reserved memory)"
                if version == 2
                else "NVML nvmlDeviceGetMemoryInfo used (v1: includes the driver's reserved memory)"
            )
            out.append(
                Measurement(
                    stage=stage,
                    quantity="nvml_used",
                    bytes=p.used_peak_bytes,
                    counter=f"{counter}, peak of {p.samples} sample(s) while the stage was marked",
                    source=f"live feed, host {host}" + (f", {p.gpu_name}" if p.gpu_name else ""),
                    gpu=gpu,
                    date=date or datetime.date.today(),
                )
            )
        return out
