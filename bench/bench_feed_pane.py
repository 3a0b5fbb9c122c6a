"""How long the app's feed pane takes to redraw 16 hosts x 8 GPUs (with 20 processes per host):
the cost of one refresh when every host streams. Run: PYTHONPATH=tui python bench/bench_feed_pane.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

GIB = 2**30


def snapshots(hosts: int = 16, gpus: int = 8, procs: int = 20, t: float = 0.0):
    from vramtui.feed.sample import GpuSample, ProcessSample, Snapshot

    out = {}
    for h in range(hosts):
        gs = tuple(
            GpuSample(
                index=i,
                name="NVIDIA H100 80GB HBM3",
                total_bytes=85_520_809_984,
                used_bytes=(30 + i) * GIB,
                reserved_bytes=547_356_672,
                free_bytes=85_520_809_984 - (30 + i) * GIB - 547_356_672,
                memory_info_version=2,
                util_percent=80,
                temperature_c=60,
                power_w=400.0,
                power_limit_w=700.0,
            )
            for i in range(gpus)
        )
        ps = tuple(
            ProcessSample(
                gpu_index=p % gpus,
                pid=1000 + p,
                used_bytes=GIB,
                name="python",
                user="me",
                rss_bytes=GIB,
                cpu_percent=50.0,
            )
            for p in range(procs)
        )
        host = f"node-{h:02d}"
        out[host] = ("live", None, Snapshot(host=host, time=t, gpus=gs, processes=ps))
    return out


async def main() -> None:
    from vramtui.app.app import VramtuiApp
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.config import Config
    from vramtui.feed.stages import StageTracker
    from vramtui.session import SizingSession

    app = VramtuiApp(
        SizingSession.from_spec(seed_example_spec()), Config(), draft_file=Path("/dev/null")
    )
    times = []
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("f8")
        await pilot.pause()
        tracker = StageTracker()
        for i in range(30):
            statuses = snapshots(t=float(i))
            t0 = time.perf_counter()
            app.feed_pane.show("bench", statuses, app.session.results.estimate, "gib", tracker)
            await pilot.pause()
            times.append(time.perf_counter() - t0)
        app.stop_feed()
    print(
        f"feed pane redraw, 16 hosts x 8 GPUs + 320 processes: median "
        f"{statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms "
        f"(30 redraws, including Textual's layout)"
    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
