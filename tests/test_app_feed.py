"""The app's live feed pane, fed by a recording (replay is how it runs without a GPU): memory
bars against the estimate, processes, stage marks and their peaks stored as measured items."""

from __future__ import annotations

import asyncio
import datetime
import shutil
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, Select, Static

from vramtui.app.app import VramtuiApp
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.feed.record import Recorder
from vramtui.feed.runner import FeedSettings
from vramtui.feed.sample import GpuSample, ProcessSample, Snapshot
from vramtui.session import SizingSession
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
GIB = 2**30
TOTAL = 85_520_809_984  # an H100 80GB as NVML reports it
RESERVED = 547_356_672

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _snap(t: float, used_gib: float) -> Snapshot:
    used = round(used_gib * GIB)
    gpu = GpuSample(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        total_bytes=TOTAL,
        used_bytes=used,
        reserved_bytes=RESERVED,
        free_bytes=TOTAL - used - RESERVED,
        memory_info_version=2,
        util_percent=90,
        temperature_c=60,
    )
    procs = (
        ProcessSample(
            gpu_index=0, pid=4242, used_bytes=used - GIB, name="python", user="me", visible=False
        ),
    )
    return Snapshot(host="node-a", time=t, gpus=(gpu,), processes=procs)


def _recording(tmp_path: Path, used: list[float], gap: float) -> Path:
    path = tmp_path / "run.jsonl"
    t0 = 1_796_000_000.0
    with Recorder(path, host="node-a") as rec:
        for i, u in enumerate(used):
            rec.write(_snap(t0 + i * gap, u))
    return path


async def _wait_for(pilot, predicate, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        await pilot.pause(0.05)


async def test_replay_shows_gpus_processes_and_stage_peaks(tmp_path):
    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    session = SizingSession.from_spec(
        load_spec(spec_path),
        spec_path,
        load_catalog(use_user_config=False),
        today=datetime.date(2026, 12, 10),
    )
    # 0.6 s between samples: time to mark a stage before the later, higher ones arrive.
    rec = _recording(tmp_path, [20.0, 35.5, 41.25, 30.0], gap=0.6)
    app = VramtuiApp(
        session,
        Config(),
        draft_file=tmp_path / "draft.toml",
        feed_settings=FeedSettings(kind="replay", replay_path=str(rec)),
        initial_tab="feed",
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait_for(pilot, lambda: app._feed is not None and app._feed.statuses())
        app.query_one("#feed-stage", Select).value = "prefill"
        await pilot.press("ctrl+b")
        await _wait_for(
            pilot,
            lambda: (
                app._tracker.peaks
                and max(p.used_peak_bytes for p in app._tracker.peaks.values())
                == round(41.25 * GIB)
            ),
        )
        text = str(app.query_one("#feed-gpus", Static).content)
        assert "NVIDIA H100 80GB HBM3" in text and "(measured, NVML)" in text
        assert "estimate at" in text  # the spec's worst stage drawn against the card
        procs = app.query_one("#feed-procs", DataTable)
        assert procs.row_count == 1
        assert "host PID" in str(procs.get_row_at(0)[2])
        await pilot.click("#feed-store")
        await pilot.pause()
        measured = app.session.spec.measured
        assert [(m.stage, m.quantity, m.gpu) for m in measured] == [("prefill", "nvml_used", 0)]
        assert measured[0].bytes == round(41.25 * GIB)
        assert "v2" in measured[0].counter
        # Stored figures show beside the estimates, never added to them.
        assert app.session.results.estimate.measurements == measured
        await _wait_for(pilot, lambda: app._feed.statuses().get("node-a", ("",))[0] == "ended")
    app.stop_feed()


async def test_no_driver_says_so_and_the_rest_works(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml fails: no library
    session = SizingSession.from_spec(load_spec(CHAT), None, None)
    app = VramtuiApp(
        session,
        Config(),
        draft_file=tmp_path / "draft.toml",
        feed_settings=FeedSettings(kind="local", interval=0.25, process_interval=0.5),
        initial_tab="feed",
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await _wait_for(
            pilot,
            lambda: (
                app._feed is not None
                and any(
                    snap is not None and snap.error for _, _, snap in app._feed.statuses().values()
                )
            ),
        )
        # The pane redraws at most twice a second: wait for it.
        await _wait_for(
            pilot, lambda: "NVML not available" in str(app.query_one("#feed-gpus", Static).content)
        )
        await pilot.press("f5")
        assert app.tabs.active == "sizing"
        await asyncio.sleep(0)
    app.stop_feed()
