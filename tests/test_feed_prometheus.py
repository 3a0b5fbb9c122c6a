"""The Prometheus feed against a REAL Prometheus (Debian's package) scraping fake dcgm-exporters
that serve the layout of recorded real exporter output (tests/data/dcgm/README.md).

Figures are MiB as dcgm-exporter reports them; bytes = MiB x 1,048,576, worked by hand below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_dcgm_exporter import DATA, FakeDcgmExporter, SimGpu, parse_series, recorded_layout
from real_prometheus import prometheus_binary, prometheus_servers  # noqa: F401 - a fixture

from vramtui.feed.prometheus import (
    FAILED,
    LIVE,
    MAX_SERIES,
    STALE,
    PrometheusFeed,
    _parse_vector,
    _PollFailed,
)
from vramtui.feed.prometheus_settings import check_url, parse_match, settings_from
from vramtui.feed.sample import FeedError, snapshot_to_json

ROOT = Path(__file__).resolve().parents[1]
MIB = 1_048_576


def _settings(url: str, match: str | None = None, **extra):
    args = SimpleNamespace(prometheus=url, match=match, interval=0.5, **extra)
    return settings_from(args, {})


def _by_host(updates):
    return {u.host: u for u in updates}


# ------------------------------------------------------------------ the recorded layouts


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.prom")))
def test_the_fake_writes_the_recorded_lines_byte_for_byte(name):
    from fake_dcgm_exporter import render_series

    for line in (DATA / name).read_text().splitlines():
        if line.startswith("DCGM_"):
            assert render_series(*parse_series(line)) == line


def test_the_recorded_layouts_name_the_host_label_both_ways():
    assert recorded_layout("gpu-operator-issue-340.prom") == [
        "gpu",
        "UUID",
        "device",
        "modelName",
        "Hostname",
        "container",
        "namespace",
        "pod",
    ]
    assert "hostname" in recorded_layout("dcgm-exporter-pr-736.prom")
    assert "Hostname" not in recorded_layout("dcgm-exporter-pr-736.prom")


# ------------------------------------------------------------------ options, no server


def test_match_is_parsed_and_rebuilt():
    m = parse_match('namespace="team-a", Hostname=~"node-[ab]"')
    assert [(x.label, x.op, x.value) for x in m] == [
        ("namespace", "=", "team-a"),
        ("Hostname", "=~", "node-[ab]"),
    ]
    assert ",".join(x.promql() for x in m) == 'namespace="team-a",Hostname=~"node-[ab]"'
    assert parse_match('{pod!="x\\"y"}')[0].value == 'x"y'


@pytest.mark.parametrize(
    "text, words",
    [
        ("namespace=team-a", "cannot read"),
        ('a="1" b="2"', "commas"),
        ('a="1"} or vector(1) or {b="2"', "commas"),
        ("x" * 3000, "longer than 2000"),
    ],
)
def test_a_bad_match_is_one_line_naming_the_fix(text, words):
    with pytest.raises(FeedError, match=words):
        parse_match(text)


def test_the_url_takes_no_credentials_or_query():
    assert check_url("http://127.0.0.1:9090/") == "http://127.0.0.1:9090"
    with pytest.raises(FeedError, match="VRAMTUI_PROMETHEUS_USERNAME"):
        check_url("http://me:secret@prom:9090")
    with pytest.raises(FeedError, match="http:// or https://"):
        check_url("prom:9090")
    with pytest.raises(FeedError, match="query"):
        check_url("http://prom:9090/?x=1")


def test_config_renames_metrics_and_labels_and_refuses_bad_names():
    args = SimpleNamespace(prometheus="http://p:9090", match=None, interval=1.0)
    s = settings_from(args, {"metrics": {"fb_used": "gpu_fb_used_mib"}, "labels": {"host": "node"}})
    assert s.metrics["fb_used"] == "gpu_fb_used_mib"
    assert s.metrics["fb_free"] == "DCGM_FI_DEV_FB_FREE"
    assert s.labels["host"] == ("node",)
    with pytest.raises(FeedError, match="not a Prometheus label name"):
        settings_from(args, {"labels": {"host": "no-dash"}})
    with pytest.raises(FeedError, match="unknown key 'urll'"):
        settings_from(args, {"urll": "x"})
    assert s.stale_after == 90  # max(3 x 1 s, 90 s)


def test_auth_headers_follow_the_prometheus_client_options(tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("abc123\n")
    s = _settings("http://p:9090", bearer_token_file=str(token))
    assert s.headers() == {"Authorization": "Bearer abc123"}
    monkeypatch.setenv("VRAMTUI_PROMETHEUS_USERNAME", "me")
    monkeypatch.setenv("VRAMTUI_PROMETHEUS_PASSWORD", "pw")
    # base64("me:pw") = "bWU6cHc="
    assert _settings("http://p:9090").headers() == {"Authorization": "Basic bWU6cHc="}
    with pytest.raises(FeedError, match="keep one of them"):
        _settings("http://p:9090", bearer_token_file=str(token))
    with pytest.raises(FeedError, match="cannot read it"):
        _settings("http://p:9090", bearer_token_file=str(tmp_path / "missing"))


def test_a_response_over_the_series_bound_is_refused(monkeypatch):
    from vramtui.feed import prometheus

    assert MAX_SERIES == 100_000  # 500 hosts x 8 GPUs x 3 metrics (12 000) fits 8 times over
    monkeypatch.setattr(prometheus, "MAX_SERIES", 10)
    body = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {}, "value": [1, "1"]}] * 11,
        },
    }
    with pytest.raises(_PollFailed, match="returned 11 series, more than the 10"):
        _parse_vector(json.dumps(body).encode(), "Prometheus at x")


def test_label_values_lose_control_characters_and_length():
    body = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {
                    "metric": {"modelName": "H100\x1b]52;c;x\x07", "pod": "p" * 500},
                    "value": [5, "1"],
                }
            ],
        },
    }
    _, [(labels, _)] = _parse_vector(json.dumps(body).encode(), "x")
    assert labels["modelName"] == "H100\\x1b]52;c;x\\x07"
    assert len(labels["pod"]) == 256 and labels["pod"].endswith("...")


def test_prometheus_only_options_need_prometheus(capsys):
    from vramtui.cli import main

    assert main(["watch", "--once", "--json", "--match", 'a="b"']) == 2
    assert "--match goes with --prometheus URL" in capsys.readouterr().err
    assert main(["watch", "--once", "--prometheus", "http://p:1", "--ssh", "h"]) == 2
    assert "give one of them" in capsys.readouterr().err


# ------------------------------------------------------------------ the real server


@pytest.fixture(scope="module")
def fleet(prometheus_servers):  # noqa: F811 - the fixture imported above
    """node-a (dcgm-exporter 2.x layout: Hostname, Kubernetes labels), node-b (4.x: hostname),
    node-c (2.x, its own exporter: the one that goes away)."""
    a = FakeDcgmExporter("gpu-operator-issue-340.prom").start()
    b = FakeDcgmExporter("dcgm-exporter-pr-736.prom").start()
    c = FakeDcgmExporter("gpu-operator-issue-340.prom").start()
    a.set_gpu(
        SimGpu("node-a", 0, 1000, 14000, 450, pod="train-1", namespace="team-a", container="c")
    )
    a.set_gpu(SimGpu("node-a", 1, 2000, 13000, 450))
    b.set_gpu(SimGpu("node-b", 0, 70000, 11037, 522, model="NVIDIA H100 80GB HBM3"))
    # node-d: GPU 1 lags 60 s behind (explicit timestamps); node-e lags as a whole
    b.set_gpu(SimGpu("node-d", 0, 100, 1000, 0))
    b.set_gpu(SimGpu("node-d", 1, 100, 1000, 0, age_s=60))
    b.set_gpu(SimGpu("node-e", 0, 100, 1000, 0, age_s=60))
    c.set_gpu(SimGpu("node-c", 0, 500, 15000, None, model="Tesla T4"))
    prom = prometheus_servers({"dcgm": [a.target, b.target], "dcgm-c": [c.target]})
    hosts = {"node-a", "node-b", "node-c", "node-d", "node-e"}
    prom.wait_for(
        lambda: (
            {
                s["metric"].get("Hostname") or s["metric"].get("hostname")
                for s in prom.query("DCGM_FI_DEV_FB_USED")
            }
            == hosts
        ),
        "the five hosts scraped",
    )
    yield SimpleNamespace(prom=prom, a=a, b=b, c=c)
    for exporter in (a, b, c):
        exporter.stop()


def _wait_value(prom, promql: str, value: float) -> None:
    prom.wait_for(
        lambda: any(float(s["value"][1]) == value for s in prom.query(promql)),
        f"{promql} == {value:g}",
    )


def test_discovers_every_gpu_with_its_labels(fleet):
    feed = PrometheusFeed(_settings(fleet.prom.url))
    hosts = _by_host(feed.poll())
    assert set(hosts) == {"node-a", "node-b", "node-c", "node-d", "node-e"}
    assert {u.state for u in hosts.values()} == {LIVE}
    a = hosts["node-a"].snapshot
    assert [g.index for g in a.gpus] == [0, 1]
    g0 = a.gpus[0]
    assert g0.used_bytes == 1_048_576_000  # 1000 MiB
    assert g0.free_bytes == 14_680_064_000  # 14000 MiB
    assert g0.reserved_bytes == 471_859_200  # 450 MiB
    assert g0.total_bytes == 16_200_499_200  # 15450 MiB = used + free + reserved
    assert g0.memory_info_version == 2
    assert (g0.pod, g0.namespace, g0.container) == ("train-1", "team-a", "c")
    assert g0.name == "NVIDIA H100 80GB HBM3" and g0.uuid.startswith("GPU-")
    assert a.gpus[1].pod is None
    # node-b: the 4.x exporter's lower-case `hostname` names the host as well
    b = hosts["node-b"].snapshot.gpus[0]
    assert b.used_bytes == 73_400_320_000  # 70000 MiB
    assert b.total_bytes == 85_520_809_984  # 81559 MiB, an H100 80GB as NVML reports it
    # node-c has no reserved series: total = used + free, the memory-info version unknown
    c = hosts["node-c"].snapshot.gpus[0]
    assert c.reserved_bytes is None and c.memory_info_version is None
    assert c.total_bytes == 16_252_928_000  # 15500 MiB
    assert hosts["node-a"].snapshot.processes is None  # not polled: Prometheus has none


def test_updates_and_a_gpu_that_comes_and_goes(fleet):
    feed = PrometheusFeed(_settings(fleet.prom.url))
    feed.poll()
    fleet.a.update("node-a", 1, used_mib=30000, free_mib=1000)
    fleet.a.set_gpu(SimGpu("node-a", 2, 100, 14900, 450))
    _wait_value(fleet.prom, 'DCGM_FI_DEV_FB_USED{Hostname="node-a",gpu="1"}', 30000)
    fleet.prom.wait_for(
        lambda: fleet.prom.query('DCGM_FI_DEV_FB_USED{Hostname="node-a",gpu="2"}'), "GPU 2"
    )
    a = _by_host(feed.poll())["node-a"]
    assert a.state == LIVE
    assert [g.index for g in a.snapshot.gpus] == [0, 1, 2]
    assert a.snapshot.gpus[1].used_bytes == 31_457_280_000  # 30000 MiB
    assert a.snapshot.gpus[2].used_bytes == 104_857_600  # 100 MiB
    fleet.a.remove("node-a", 2)
    fleet.prom.wait_for(
        lambda: not fleet.prom.query('DCGM_FI_DEV_FB_USED{Hostname="node-a",gpu="2"}'),
        "GPU 2 gone",
    )
    a = _by_host(feed.poll())["node-a"]
    assert a.state == LIVE  # the host still reports its other GPUs
    gone = a.snapshot.gpus[2]
    assert gone.index == 2 and gone.used_bytes is None  # n/a, never the old value
    assert any(n.startswith("GPU 2: no DCGM_FI_DEV_FB_USED series since") for n in a.snapshot.notes)
    fleet.a.update("node-a", 1, used_mib=2000, free_mib=13000)


def test_a_target_that_goes_away_goes_stale_with_the_reason(fleet):
    feed = PrometheusFeed(_settings(fleet.prom.url))
    before = _by_host(feed.poll())["node-c"]
    assert before.state == LIVE
    port = fleet.c.port
    fleet.c.stop()
    try:
        fleet.prom.wait_for(
            lambda: not fleet.prom.query('DCGM_FI_DEV_FB_USED{Hostname="node-c"}'), "node-c gone"
        )
        hosts = _by_host(feed.poll())
        c = hosts["node-c"]
        assert c.state == STALE
        assert f"its target 127.0.0.1:{port} is down (up == 0)" in c.reason
        assert c.snapshot is before.snapshot  # the last values stay, marked stale
        assert hosts["node-a"].state == LIVE and hosts["node-b"].state == LIVE
    finally:
        fleet.c.start(port)
    fleet.prom.wait_for(
        lambda: fleet.prom.query('DCGM_FI_DEV_FB_USED{Hostname="node-c"}'), "node-c back"
    )
    assert _by_host(feed.poll())["node-c"].state == LIVE


def test_samples_older_than_stale_after_go_stale_by_gpu_or_by_host(fleet):
    hosts = _by_host(PrometheusFeed(_settings(fleet.prom.url, stale_after=20)).poll())
    d = hosts["node-d"]
    assert d.state == LIVE  # its GPU 0 is fresh
    assert d.snapshot.gpus[0].used_bytes == 104_857_600  # 100 MiB
    assert d.snapshot.gpus[1].used_bytes is None  # 60 s old: not shown as current
    assert any("GPU 1: newest sample 6" in n and "stale after 20 s" in n for n in d.snapshot.notes)
    e = hosts["node-e"]
    assert e.state == STALE and "old (stale after 20 s)" in e.reason
    assert e.snapshot.gpus[0].used_bytes == 104_857_600  # the last values, the row marked stale
    assert hosts["node-a"].state == LIVE


def test_match_narrows_to_a_host_or_a_job(fleet):
    only_a = PrometheusFeed(_settings(fleet.prom.url, 'Hostname="node-a"')).poll()
    assert [u.host for u in only_a] == ["node-a"]
    job = PrometheusFeed(_settings(fleet.prom.url, 'namespace="team-a"')).poll()
    assert [u.host for u in job] == ["node-a"]
    assert [g.index for g in job[0].snapshot.gpus] == [0]  # only the GPU of that job
    lower = PrometheusFeed(_settings(fleet.prom.url, 'hostname="node-b"')).poll()
    assert [u.host for u in lower] == ["node-b"]
    none = PrometheusFeed(_settings(fleet.prom.url, 'namespace="nobody"')).poll()
    assert none[0].state == FAILED and 'match {namespace="nobody"}' in none[0].reason


def _nvml_snapshot_json(monkeypatch) -> dict:
    from fake_pynvml import FakeGpu, make_fake_pynvml

    from vramtui.feed.nvml_source import NvmlSource
    from vramtui.feed.poller import Poller

    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([FakeGpu()]))
    poller = Poller(NvmlSource(host="box", attribute_processes=False), 1.0, 2.0)
    try:
        snap = poller.poll()
    finally:
        poller.close()
    assert snap.error is None and snap.gpus[0].used_bytes is not None
    return snapshot_to_json(snap)


def test_once_json_prints_the_nvml_schema_per_host(fleet, monkeypatch):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tui"), "VRAMTUI_CONFIG_DIR": "/nonexistent"}
    out = subprocess.run(
        [sys.executable, "-m", "vramtui", "watch", "--prometheus", fleet.prom.url]
        + ["--once", "--json", "--match", 'job="dcgm"', "--stale-after", "20"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result) == {"node-a", "node-b", "node-d", "node-e"}  # not node-c (job dcgm-c)
    assert "vramtui: note: node-e: newest sample 6" in out.stderr
    nvml = _nvml_snapshot_json(monkeypatch)
    for snap in result.values():
        assert set(snap) == set(nvml)
        assert set(snap["gpus"][0]) == set(nvml["gpus"][0])
    assert result["node-a"]["gpus"][0]["used_bytes"] == 1_048_576_000


def test_the_app_feed_runner_records_what_prometheus_reports(fleet, tmp_path):
    from vramtui.feed.record import iter_recording
    from vramtui.feed.runner import FeedRunner, FeedSettings

    args = SimpleNamespace(
        prometheus=fleet.prom.url,
        match='Hostname="node-a"',
        interval=0.5,
        process_interval=2.0,
        replay=None,
        speed=1.0,
        ssh=None,
        remote_python=None,
        record=str(tmp_path / "rec.jsonl"),
        ssh_config=None,
        ssh_option=None,
    )
    settings = FeedSettings.from_args(args)
    assert settings.kind == "prometheus"
    assert settings.label() == (f'Prometheus {fleet.prom.url} {{Hostname="node-a"}}, every 0.5 s')
    changed = threading.Event()
    runner = FeedRunner(settings, changed.set)
    runner.start()
    try:
        assert changed.wait(10)
        state, reason, snap = runner.statuses()["node-a"]
        assert state == LIVE and reason is None
        assert snap.gpus[0].used_bytes == 1_048_576_000
    finally:
        runner.stop()
    _, snapshots = iter_recording(tmp_path / "rec.jsonl")
    recorded = list(snapshots)
    assert recorded and recorded[0].host == "node-a"
    assert recorded[0].gpus[0].pod == "train-1"  # the new labels survive record/replay


def test_prometheus_stopping_makes_hosts_stale_and_the_feed_keeps_running(prometheus_servers):  # noqa: F811
    exporter = FakeDcgmExporter("dcgm-exporter-pr-736.prom").start()
    exporter.set_gpu(SimGpu("node-z", 0, 1234, 5000, 0))
    prom = prometheus_servers({"dcgm": [exporter.target]})
    try:
        prom.wait_for(lambda: prom.query("DCGM_FI_DEV_FB_USED"), "node-z scraped")
        from vramtui.feed.prometheus_watch import run_loop

        feed = PrometheusFeed(_settings(prom.url))
        seen: list = []
        stop = threading.Event()
        thread = threading.Thread(target=run_loop, args=(feed, lambda u, f: seen.append(u), stop))
        thread.start()
        try:
            prom.wait_for(lambda: any(u.state == LIVE for u in seen), "live")
            prom.stop()
            stale = prom.wait_for(
                lambda: [u for u in seen if u.state == STALE], "stale after the stop"
            )
            assert stale[0].host == "node-z"
            assert f"Prometheus at {prom.url} did not answer" in stale[0].reason
            assert stale[0].snapshot.gpus[0].used_bytes == 1234 * MIB
            time.sleep(1.2)
            assert thread.is_alive()  # still polling, waiting for Prometheus to come back
        finally:
            stop.set()
            thread.join(5)
        assert not thread.is_alive()
    finally:
        exporter.stop()


def test_nothing_known_and_prometheus_down_is_one_failed_row():
    from real_prometheus import free_port

    url = f"http://127.0.0.1:{free_port()}"
    [update] = PrometheusFeed(_settings(url)).poll()
    assert update.state == FAILED and update.snapshot is None
    assert update.host == f"prometheus 127.0.0.1:{url.rsplit(':', 1)[1]}"
    assert "did not answer" in update.reason


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_app_feed_tab_takes_prometheus_and_tracks_stage_peaks(fleet, tmp_path):
    from vramtui.app.app import VramtuiApp
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.catalog import load_catalog
    from vramtui.config import Config
    from vramtui.feed.runner import FeedSettings
    from vramtui.session import SizingSession

    settings = FeedSettings(
        kind="prometheus",
        interval=0.5,
        prometheus=_settings(fleet.prom.url, 'Hostname="node-a"'),
    )
    session = SizingSession.from_spec(
        seed_example_spec(), None, load_catalog(use_user_config=False)
    )
    app = VramtuiApp(
        session,
        Config(),
        draft_file=tmp_path / "draft.toml",
        feed_settings=settings,
        initial_tab="feed",
    )
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 10
        while not (app._feed is not None and "node-a" in app._feed.statuses()):
            assert time.monotonic() < deadline, "no Prometheus status in the app"
            await pilot.pause(0.1)
        app._tracker.mark("prefill", time.time())
        deadline = time.monotonic() + 10
        while not app._tracker.peaks:
            assert time.monotonic() < deadline, "no stage peak from the Prometheus feed"
            await pilot.pause(0.1)
        peaks = {(p.host, p.gpu_index): p.used_peak_bytes for p in app._tracker.peaks.values()}
        assert peaks[("node-a", 0)] == 1_048_576_000  # 1000 MiB, as dcgm-exporter reported it
        assert peaks[("node-a", 1)] == 2_097_152_000  # 2000 MiB
    app.stop_feed()


def test_the_config_file_gives_the_url_and_the_renames(tmp_path, monkeypatch):
    from vramtui.config import load_config
    from vramtui.feed.prometheus_watch import settings_from_args

    (tmp_path / "config.toml").write_text(
        '[prometheus]\nurl = "http://prom.example:9090/"\nstale_after = 45\n'
        '[prometheus.labels]\npod = "exported_pod"\n'
    )
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(tmp_path))
    args = SimpleNamespace(prometheus=None, match=None, interval=1.0)
    s = settings_from_args(args)
    assert (s.url, s.stale_after, s.labels["pod"]) == (
        "http://prom.example:9090",
        45.0,
        ("exported_pod",),
    )
    (tmp_path / "config.toml").write_text('prometheus = "http://x"\n')
    assert any("[prometheus] must be a table" in w for w in load_config().warnings)
