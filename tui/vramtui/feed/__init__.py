"""The live counter feed: what NVML (local, or on a host over SSH) measures, tick by tick.

Plain Python, no Textual: `sample` (dataclasses and their JSON), `nvml_source` (the local
driver), `processes` (psutil attribution), `poller` (the tick loop), `record` (JSON-lines
recordings and their replay), `table` (a rich table for `vramtui watch --once`).
Every counter is *measured*; a missing one is None ("n/a"), never a guess.
"""

from vramtui.feed.sample import (
    SCHEMA_VERSION,
    FeedError,
    GpuSample,
    ProcessSample,
    Snapshot,
    snapshot_from_json,
    snapshot_to_json,
)

__all__ = [
    "SCHEMA_VERSION",
    "FeedError",
    "GpuSample",
    "ProcessSample",
    "Snapshot",
    "snapshot_from_json",
    "snapshot_to_json",
]
