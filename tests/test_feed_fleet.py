"""The Feed tab at fleet scale: hosts (or pods, or jobs) grouped into summary rows, sorted by
risk, filtered, drawn incrementally; the grouping module (feed/fleet.py) and the pane."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from vramtui.app.app import VramtuiApp
from vramtui.builtin_specs import seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.feed.fleet import build_fleet, filter_groups, has_pod_labels
from vramtui.feed.sample import GpuSample, ProcessSample, Snapshot
from vramtui.feed.stages import StageTracker
from vramtui.session import SizingSession

GIB = 2**30
TOTAL = 80 * GIB


@dataclass(frozen=True)
class LabelledGpu(GpuSample):
    """A GPU sample carrying the labels a Prometheus source may attach (Kubernetes)."""

    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    job: str | None = None


def gpu(index: int, used_gib: float | None, cls=GpuSample, **labels) -> GpuSample:
    used = None if used_gib is None else round(used_gib * GIB)
    return cls(index=index, name="H100", total_bytes=TOTAL, used_bytes=used, **labels)


def live(host: str, *gpus, state: str = "live", reason: str | None = None) -> tuple:
    return (state, reason, Snapshot(host=host, time=1.0, gpus=tuple(gpus)))


# ------------------------------------------------------------------ grouping and summary


def test_summary_row_worked_by_hand():
    # node-a: GPU 0 at 42 GiB against a 40 GiB estimate (2 GiB over), GPU 1 at 30 GiB.
    statuses = {"node-a": live("node-a", gpu(0, 42), gpu(1, 30))}
    [g] = build_fleet(statuses, (40 * GIB, 40 * GIB))
    assert (g.key, g.label, g.kind, g.hosts) == ("host:node-a", "node-a", "host", ("node-a",))
    assert g.used_bytes == 72 * GIB and g.total_bytes == 160 * GIB
    assert (g.worst.host, g.worst.index) == ("node-a", 0)
    assert g.over_bytes == 2 * GIB and g.is_over
    assert g.fraction == 42 / 80
    assert [x.margin_bytes for x in g.gpus] == [2 * GIB, -10 * GIB]
    assert g.stale_reason is None


def test_under_the_estimate_worst_is_the_fullest_gpu_and_margin_is_negative():
    # Estimates differ per GPU (pipeline stages): GPU 0 at 35 of 40, GPU 1 at 60 of 70.
    statuses = {"n": live("n", gpu(0, 35), gpu(1, 60))}
    [g] = build_fleet(statuses, (40 * GIB, 70 * GIB))
    assert g.worst.index == 1  # 60/80 is fuller than 35/80
    assert g.over_bytes == -5 * GIB  # the closest to its estimate: GPU 0, 5 GiB under
    assert not g.is_over


def test_gpu_beyond_the_estimate_layout_has_no_margin():
    statuses = {"n": live("n", gpu(0, 10), gpu(1, 70))}
    [g] = build_fleet(statuses, (40 * GIB,))  # a one-GPU spec: only GPU 0 is compared
    assert [x.estimate_bytes for x in g.gpus] == [40 * GIB, None]
    assert [x.margin_bytes for x in g.gpus] == [-30 * GIB, None]
    assert g.over_bytes == -30 * GIB
    assert g.worst.index == 1  # 70/80 is the fullest


def test_no_estimate_and_unknown_used():
    statuses = {"n": live("n", gpu(0, None), gpu(1, 8))}
    [g] = build_fleet(statuses)
    assert g.over_bytes is None and not g.is_over
    assert g.used_bytes == 8 * GIB and g.total_bytes == 160 * GIB
    assert g.worst.index == 1


def test_risk_order_over_first_then_fullest_then_stale():
    est = (40 * GIB,)
    statuses = {
        "a-over-2": live("a-over-2", gpu(0, 42)),
        "b-over-5": live("b-over-5", gpu(0, 45)),
        "c-39": live("c-39", gpu(0, 39)),
        "d-20": live("d-20", gpu(0, 20)),
        "e-stale-39.5": live("e-stale-39.5", gpu(0, 39.5), state="stale", reason="no snapshot"),
        "f-stale-over-1": live("f-stale-over-1", gpu(0, 41), state="stale", reason="quiet"),
        "g-failed": ("failed", "ssh: Connection refused", None),
    }
    order = [g.label for g in build_fleet(statuses, est)]
    assert order == [
        "b-over-5",  # 5 GiB over
        "a-over-2",  # 2 GiB over
        "f-stale-over-1",  # stale, but its last counters were 1 GiB over
        "c-39",  # live, 39/80
        "d-20",  # live, 20/80
        "e-stale-39.5",  # stale: after the live ones though fuller
        "g-failed",  # no counters at all
    ]


def test_fullness_ties_within_a_percent_sort_by_name():
    # 40.1 and 40.3 GiB of 80 both show as 50%: by name, so rows do not swap on every poll.
    statuses = {
        "b": live("b", gpu(0, 40.3)),
        "a": live("a", gpu(0, 40.1)),
        "c": live("c", gpu(0, 41)),
    }
    assert [g.label for g in build_fleet(statuses)] == ["c", "a", "b"]  # c: 51%


def test_stale_and_failed_groups_keep_the_reason():
    statuses = {
        "s": live("s", gpu(0, 10), state="stale", reason="no snapshot for 3.2 s"),
        "f": ("failed", "ssh: Connection refused; retrying in 8 s", None),
        "c": ("connecting", None, None),
        "e": ("live", None, Snapshot(host="e", time=1.0, error="NVML not available")),
    }
    by = {g.label: g for g in build_fleet(statuses)}
    assert by["s"].stale_reason == "stale: no snapshot for 3.2 s"
    assert by["s"].used_bytes == 10 * GIB  # the last counters are kept
    assert by["f"].stale_reason == "failed: ssh: Connection refused; retrying in 8 s"
    assert by["f"].gpus == () and by["f"].worst is None and by["f"].used_bytes is None
    assert by["c"].stale_reason == "connecting: no counters yet"
    assert by["e"].stale_reason == "NVML not available"


def test_group_by_pod_and_job_labels():
    def pg(i, used, **kw):
        return gpu(i, used, LabelledGpu, **kw)

    statuses = {
        "node-1": live(
            "node-1",
            pg(0, 50, pod="train-0", namespace="ml", container="trainer"),
            pg(1, 60, pod="train-0", namespace="ml", container="trainer"),
            pg(2, 10, job="4711"),
            pg(3, 5),  # no label: stays with its host
        ),
        "node-2": live(
            "node-2",
            pg(0, 70, pod="train-0", namespace="ml"),
            state="stale",
            reason="no snapshot",
        ),
    }
    assert has_pod_labels(statuses)
    groups = {g.key: g for g in build_fleet(statuses, by="pod")}
    assert set(groups) == {"pod:ml/train-0", "job:4711", "host:node-1"}
    pod = groups["pod:ml/train-0"]
    assert pod.kind == "pod" and pod.label == "ml/train-0"
    assert [(x.host, x.index) for x in pod.gpus] == [("node-1", 0), ("node-1", 1), ("node-2", 0)]
    assert pod.used_bytes == 180 * GIB and pod.total_bytes == 240 * GIB
    assert (pod.worst.host, pod.worst.index) == ("node-2", 0)  # 70/80, the fullest
    assert pod.stale_reason == "node-2: stale: no snapshot"  # which host, in a multi-host group
    assert groups["job:4711"].label == "job 4711"
    assert [x.index for x in groups["host:node-1"].gpus] == [3]
    # By host, the labels are ignored for grouping but still found by the filter.
    by_host = build_fleet(statuses, by="host")
    assert sorted(g.label for g in by_host) == ["node-1", "node-2"]
    assert [g.label for g in filter_groups(by_host, "TRAINER")] == ["node-1"]


def test_samples_without_labels_group_by_host():
    statuses = {"h": live("h", gpu(0, 1))}
    assert not has_pod_labels(statuses)
    assert [g.key for g in build_fleet(statuses, by="pod")] == ["host:h"]


def test_filter_by_substring_any_case_keeps_the_order():
    statuses = {f"node-{i:03d}": live(f"node-{i:03d}", gpu(0, i % 70)) for i in range(120)}
    groups = build_fleet(statuses)
    assert [g.label for g in filter_groups(groups, " NODE-11 ")] == [
        "node-119",  # 49/80, the fullest of the ten
        *(f"node-{i}" for i in range(118, 109, -1)),
    ]
    assert filter_groups(groups, "") == groups
    assert filter_groups(groups, "nothing-like-it") == []


# ------------------------------------------------------------------ the pane

anyio = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def fleet_statuses(hosts: int, gpus: int, est: int, t: float = 1.0) -> dict:
    """`hosts` x `gpus` with used memory a function of the host and GPU; node-007 GPU 0 runs
    3 GiB over `est`, node-011 GPU 0 1 GiB over; node-003 is stale and node-005 failed."""
    out = {}
    for h in range(hosts):
        host = f"node-{h:03d}"
        gs = []
        for i in range(gpus):
            used = (10 + (h * 7 + i * 3) % 25) * GIB
            if i == 0 and h == 7:
                used = est + 3 * GIB
            elif i == 0 and h == 11:
                used = est + GIB
            elif i == 0:
                used = min(used, est - GIB)
            gs.append(
                GpuSample(index=i, name="NVIDIA H100 80GB HBM3", total_bytes=TOTAL, used_bytes=used)
            )
        procs = (ProcessSample(gpu_index=0, pid=100 + h, used_bytes=5 * GIB, name="python"),)
        snap = Snapshot(host=host, time=t, gpus=tuple(gs), processes=procs)
        if h == 3:
            out[host] = ("stale", "no snapshot for 3.2 s", snap)
        elif h == 5:
            out[host] = ("failed", "ssh: Connection refused", None)
        else:
            out[host] = ("live", None, snap)
    return out


def make_app(tmp_path: Path) -> VramtuiApp:
    session = SizingSession.from_spec(
        seed_example_spec(),
        None,
        load_catalog(None, use_user_config=False),
        today=datetime.date(2026, 12, 10),
    )
    return VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")


async def open_feed(pilot) -> tuple:
    """The Feed tab with its own source stopped: the test drives the pane."""
    app = pilot.app
    await pilot.press("f8")
    await pilot.pause()
    app.stop_feed()
    est = app.session.results.estimate
    return est, est.stage_gpu_bytes(est.peak_stage)[0]


def table_labels(app) -> list[str]:
    table = app.feed_pane.query_one("#feed-fleet")
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


@anyio
async def test_pane_at_500_hosts_groups_sorts_filters_and_expands(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        est, est0 = await open_feed(pilot)
        pane = app.feed_pane
        statuses = fleet_statuses(500, 8, est0)
        pane.show("500 hosts (synthetic)", statuses, est, "gib", StageTracker())
        await pilot.pause()
        assert pane.fleet and pane.has_class("-fleet")
        table = pane.query_one("#feed-fleet")
        assert table.display and not pane.query_one("#feed-gpus").display
        assert table.row_count == 500  # one collapsed summary row per host
        labels = table_labels(app)
        assert labels[:2] == ["▸ node-007", "▸ node-011"]  # 3 GiB over, then 1 GiB over
        assert labels[-2:] == ["▸ node-003", "▸ node-005"]  # stale after live, failed last
        # 500 x 8 less the failed host's 8 GPUs, whose counters never arrived.
        row = table.get_row_at(0)
        assert str(row[5]) == "+3.00 GiB over"
        assert str(table.get_row_at(499)[6]) == "stale: failed: ssh: Connection refused"
        head = str(pane.query_one("#feed-header", Static).content)
        assert "500 hosts · 3992 GPUs · 2 group(s) over the estimate" in head
        assert "2 host(s) not live" in head

        # `/` focuses the filter; a substring narrows to matching hosts.
        table.focus()
        await pilot.press("slash")
        assert app.focused is pane.query_one("#feed-filter", Input)
        for ch in "node-04":
            await pilot.press(ch.replace("-", "minus"))
        await pilot.pause()
        assert len(pane.groups_shown) == 10  # node-040 .. node-049
        assert table.row_count == 10  # more than EXPAND_UP_TO: still collapsed
        await pilot.press("2")  # "node-042": one group, shown open with its 8 GPUs
        await pilot.pause()
        assert table_labels(app) == ["▾ node-042", *(f"  └ node-042 GPU {i}" for i in range(8))]
        assert "filter 'node-042': 1 of 500 groups" in str(
            pane.query_one("#feed-header", Static).content
        )
        # Its processes show; enter on the group row closes it.
        assert pane.query_one("#feed-procs").row_count == 1
        await pilot.press("enter")  # submit the filter: focus to the table
        assert app.focused is table
        table.move_cursor(row=0)
        await pilot.press("enter")
        await pilot.pause()
        assert table_labels(app) == ["▸ node-042"]
        # Clearing the filter brings every group back, node-042 still closed.
        pane.query_one("#feed-filter", Input).value = ""
        await pilot.pause()
        assert table.row_count == 500


@anyio
async def test_only_changed_rows_are_redrawn(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        est, est0 = await open_feed(pilot)
        pane = app.feed_pane
        table = pane.query_one("#feed-fleet")
        statuses = fleet_statuses(40, 8, est0)
        pane.show("40 hosts", statuses, est, "gib", StageTracker())
        await pilot.pause()
        assert table.updated_rows == 40
        # A new tick in which one host's GPU 5 changes and the rest repeat their values.
        statuses = fleet_statuses(40, 8, est0, t=2.0)
        state, reason, snap = statuses["node-020"]
        gs = list(snap.gpus)
        gs[5] = GpuSample(index=5, name=gs[5].name, total_bytes=TOTAL, used_bytes=79 * GIB)
        statuses["node-020"] = (state, reason, Snapshot("node-020", 2.0, tuple(gs)))
        pane.show("40 hosts", statuses, est, "gib", StageTracker())
        await pilot.pause()
        assert table.updated_rows == 1
        # Now the fullest live host: after the two over the estimate.
        assert table_labels(app)[:3] == ["▸ node-007", "▸ node-011", "▸ node-020"]
        assert str(table.get_row_at(2)[2]) == "GPU 5 99%"


@anyio
async def test_a_few_hosts_keep_the_per_gpu_view(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        est, est0 = await open_feed(pilot)
        pane = app.feed_pane
        pane.show("3 hosts", fleet_statuses(3, 2, est0), est, "gib", StageTracker())
        await pilot.pause()
        assert not pane.fleet and not pane.query_one("#feed-fleet").display
        text = str(pane.query_one("#feed-gpus", Static).content)
        assert "node-000 GPU 0 NVIDIA H100 80GB HBM3" in text
        await pilot.press("slash")  # the fleet keys are off in this view
        assert app.focused is not pane.query_one("#feed-filter", Input)


@anyio
async def test_pods_group_by_pod_and_g_switches_to_hosts(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        est, _ = await open_feed(pilot)
        pane = app.feed_pane
        # 24 hosts, 2 GPUs each; each pair of hosts runs one 4-GPU pod of namespace "ml".
        statuses = {
            f"node-{h:02d}": live(
                f"node-{h:02d}",
                *(
                    gpu(i, 10 + h, LabelledGpu, pod=f"train-{h // 2}", namespace="ml")
                    for i in range(2)
                ),
            )
            for h in range(24)
        }
        pane.show("pods", statuses, est, "gib", StageTracker())
        await pilot.pause()
        labels = table_labels(app)
        assert len(labels) == 12 and labels[0] == "▸ ml/train-11"  # node-23 at 33/80
        table = pane.query_one("#feed-fleet")
        assert str(table.get_row_at(0)[2]) == "node-23:0 41%"  # which host, in a pod
        assert str(table.get_row_at(0)[3]) == "130.00/320.00 GiB"  # 2 x 32 + 2 x 33 of 4 x 80
        table.focus()
        await pilot.press("g")
        await pilot.pause()
        assert len(table_labels(app)) == 24 and table_labels(app)[0] == "▸ node-23"
        assert "grouped by host" in str(pane.query_one("#feed-header", Static).content)


def test_grouped_pane_snapshot(snap_compare, tmp_path):
    """The grouped pane at 120x40: 30 hosts x 8 GPUs, two over the estimate, one stale, one
    failed, collapsed rows in risk order."""

    async def show(pilot) -> None:
        est, est0 = await open_feed(pilot)
        pilot.app.feed_pane.show(
            "30 host(s) over SSH, every 1 s",
            fleet_statuses(30, 8, est0),
            est,
            "gib",
            StageTracker(),
        )
        for widget in pilot.app.query(Input):
            widget.cursor_blink = False
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), terminal_size=(120, 40), run_before=show)
