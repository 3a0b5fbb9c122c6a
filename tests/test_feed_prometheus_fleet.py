"""The Prometheus feed at a moderate fleet size against a REAL Prometheus: 100 hosts x 8 GPUs
served by four fake dcgm-exporters (25 hosts each). No timing here: bench/
bench_feed_prometheus_fleet.py measures 500 x 8.

Host h, GPU g uses 1000 g + h MiB of an H100 80GB (81559 MiB = used + free + 522 reserved).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from fake_dcgm_exporter import FakeDcgmExporter, SimGpu
from real_prometheus import prometheus_servers  # noqa: F401 - a fixture

from vramtui.feed import prometheus
from vramtui.feed.prometheus import LIVE, PrometheusFeed, _parse_vector
from vramtui.feed.prometheus_settings import settings_from

MIB = 1_048_576


def _uuid(h: int, g: int) -> str:
    return f"GPU-{h:08x}-0000-4000-8000-{g:012x}"


def test_one_poll_returns_every_gpu_of_100_hosts_with_its_labels(prometheus_servers):  # noqa: F811
    exporters = [FakeDcgmExporter("gpu-operator-issue-340.prom") for _ in range(4)]
    for h in range(100):
        for g in range(8):
            used = 1000 * g + h
            gpu = SimGpu(f"node-{h:03d}", g, used, 81559 - used - 522, 522, uuid=_uuid(h, g))
            exporters[h // 25].set_gpu(gpu)
    for e in exporters:
        e.start()
    try:
        prom = prometheus_servers({"dcgm": [e.target for e in exporters]})
        prom.wait_for(lambda: len(prom.query("DCGM_FI_DEV_FB_USED")) == 800, "800 GPUs scraped")
        args = SimpleNamespace(prometheus=prom.url, match=None, interval=1.0)
        feed = PrometheusFeed(settings_from(args, {}))
        updates = feed.poll()
        # Prometheus dropped the labels the feed does not read (job, added by the scrape)
        values, stamps = prom.query(feed.values_query()), prom.query(feed.stamps_query())
    finally:
        for e in exporters:
            e.stop()
    assert len(values) == 2400 and len(stamps) == 800
    read = {"__name__", "gpu", "UUID", "device", "modelName", "Hostname", "instance"}
    assert {frozenset(v["metric"]) for v in values} == {frozenset(read)}
    assert {frozenset(v["metric"]) for v in stamps} == {
        frozenset({"gpu", "UUID", "device", "Hostname", "instance"})
    }
    assert len(updates) == 100
    assert {u.host for u in updates} == {f"node-{h:03d}" for h in range(100)}
    assert {u.state for u in updates} == {LIVE}
    samples = [(u.host, g) for u in updates for g in u.snapshot.gpus]
    assert len(samples) == 800
    by_key = {(host, g.index): g for host, g in samples}
    g = by_key[("node-042", 3)]
    assert g.used_bytes == 3_189_768_192  # 3042 MiB
    assert g.reserved_bytes == 547_356_672  # 522 MiB
    assert g.total_bytes == 85_520_809_984  # 81559 MiB
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.uuid == "GPU-0000002a-0000-4000-8000-000000000003"  # 42 = 0x2a
    for (host, index), g in by_key.items():
        h = int(host.removeprefix("node-"))
        assert g.used_bytes == (1000 * index + h) * MIB
        assert g.total_bytes == 81559 * MIB and g.memory_info_version == 2
        assert g.uuid == _uuid(h, index)
        assert g.name == "NVIDIA H100 80GB HBM3"
    assert len({g.uuid for g in by_key.values()}) == 800  # every GPU told apart by its UUID


def test_each_distinct_label_value_is_cleaned_once_per_answer(monkeypatch):
    """A fleet repeats its label values: 500 x 8 x 3 series held ~370 000 label values but only
    ~4 500 distinct ones, and cleaning each one every time cost a third of a poll."""
    calls = []
    real = prometheus.clean_label
    monkeypatch.setattr(prometheus, "clean_label", lambda v: calls.append(v) or real(v))
    result = [
        {
            "metric": {"__name__": m, "Hostname": f"node-{h}", "gpu": str(g), "job": "dcgm"},
            "value": [5, "1"],
        }
        for m in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")
        for h in range(10)
        for g in range(8)
    ]
    result[0]["metric"]["pod"] = "bad\x1bpod"
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    _, series = _parse_vector(json.dumps(body).encode(), "x")
    assert len(series) == 160
    # 2 metric names + 10 hosts + 8 GPU numbers + "dcgm" + the pod: 22 distinct texts
    assert len(calls) == 22
    assert series[0][0]["pod"] == "bad\\x1bpod"  # still cleaned
    assert series[1][0]["Hostname"] == "node-0" and series[9][0]["gpu"] == "1"


def test_the_queries_name_the_labels_read_as_the_config_renames_them():
    args = SimpleNamespace(prometheus="http://p:9090", match='namespace="team-a"', interval=1.0)
    config = {"labels": {"host": "node", "pod": "exported_pod"}, "metrics": {"fb_used": "fb_u"}}
    feed = PrometheusFeed(settings_from(args, config))
    assert feed.values_query() == (
        "max by (__name__,DCGM_FI_DRIVER_VERSION,GPU_I_ID,UUID,container,device,exported_pod,"
        "gpu,instance,modelName,namespace,node,uuid) "
        '({__name__=~"fb_u|DCGM_FI_DEV_FB_FREE|DCGM_FI_DEV_FB_RESERVED",namespace="team-a"})'
    )
    assert feed.stamps_query() == (
        'max by (GPU_I_ID,UUID,device,gpu,node,uuid) (timestamp(fb_u{namespace="team-a"}))'
    )


def _answer(result) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def test_the_fixed_shape_is_read_without_walking_what_nests_elsewhere():
    deep: list = []
    for _ in range(200):  # past guarded_read's 64 levels, in a field the feed never reads
        deep = [deep]
    body = _answer([{"metric": {"gpu": "0"}, "value": [5, "7"], "histogram": deep}])
    assert _parse_vector(body.encode(), "x") == (5.0, [({"gpu": "0"}, 7.0)])
    with pytest.raises(prometheus._PollFailed, match="x sent an answer that is not valid JSON"):
        _parse_vector(b'{"status": "success", "data": {', "x")
    with pytest.raises(prometheus._PollFailed, match="x sent an answer that is not UTF-8 text"):
        _parse_vector(b'{"status": "\xff"}', "x")


def test_a_label_cut_or_cleaned_is_a_copy_and_a_clean_one_is_kept_as_decoded():
    body = _answer(
        [
            {"metric": {"gpu": "0", "pod": "a\x07b"}, "value": [5, "1"]},
            {"metric": {"gpu": "1", "k" * 300: "v"}, "value": [5, "2"]},
            {"metric": {"gpu": "2", "n": 3}, "value": [5, "3"]},
            {"metric": {"gpu": "3", "pod": "ok"}, "value": [5, "4"]},
        ]
    )
    _, series = _parse_vector(body.encode(), "x")
    assert [labels for labels, _ in series] == [
        {"gpu": "0", "pod": "a\\x07b"},
        {"gpu": "1", "k" * 256: "v"},
        {"gpu": "2"},  # a value that is not text is dropped, the series kept
        {"gpu": "3", "pod": "ok"},
    ]
