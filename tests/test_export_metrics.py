"""`vramtui export-metrics`: the estimate as Prometheus metrics, scraped by a REAL Prometheus
beside a fake dcgm-exporter, queried back, and the shipped alert rule firing when used passes
the estimate.

The seed example (7B parameters, fp16, inference) worked by hand: weights 7e9 x 2 B =
14,000,000,000 B, the manual reserve 6 GiB = 6,442,450,944 B; every stage holds both, so the
peak at every stage is 20,442,450,944 B (= 19,495.6 MiB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from fake_dcgm_exporter import FakeDcgmExporter, SimGpu
from real_prometheus import free_port, prometheus_servers  # noqa: F401 - a fixture

from vramtui.cli import main

ROOT = Path(__file__).resolve().parents[1]
ALERTS = ROOT / "docs" / "prometheus" / "vramtui-alerts.yml"
PANEL = ROOT / "docs" / "prometheus" / "grafana-panel.json"
PEAK = 20_442_450_944
MIB = 1_048_576


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT / "tui"), "VRAMTUI_CONFIG_DIR": "/nonexistent"}


def _parse(text: str) -> dict[tuple[str, frozenset], float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _probe_file(path: Path) -> Path:
    run = {
        "vramtui_probe": 1,
        "kind": "run",
        "run_id": "r1",
        "run_name": "t",
        "time": "2026-01-01T00:00:00Z",
        "host": "node-a",
        "pid": 1,
        "cuda_available": True,
        "versions": {},
        "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85_520_809_984}],
    }

    def stage(name: str, reserved: int, nvml: int | None) -> dict:
        return {
            "vramtui_probe": 1,
            "kind": "stage",
            "run_id": "r1",
            "stage": name,
            "time_start": "2026-01-01T00:00:01Z",
            "time_end": "2026-01-01T00:00:02Z",
            "seconds": 1.0,
            "dims": {},
            "measured": True,
            "reason": None,
            "error": None,
            "devices": [
                {
                    "index": 0,
                    "max_memory_allocated_bytes": reserved - 1000,
                    "max_memory_reserved_bytes": reserved,
                    "memory_allocated_bytes": 0,
                    "memory_reserved_bytes": 0,
                    "nvml_used_bytes": nvml,
                }
            ],
        }

    lines = [
        run,
        stage("load", 15_000_000_000, 15_600_000_000),
        stage("load", 14_000_000_000, None),
    ]
    lines.append(stage("decode", 16_000_000_000, 16_500_000_000))
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_once_prints_the_estimate_with_the_join_labels(tmp_path, capsys):
    probe = _probe_file(tmp_path / "probe.jsonl")
    argv = ["export-metrics", "--once", "--hostname", "node-a", "--gpu-index", "3"]
    argv += ["--gpu", "h100-sxm", "--margin", "2GiB", "--probe", str(probe)]
    argv += ["--pod", "train-1", "--namespace", "team-a"]
    assert main(argv) == 0
    m = _parse(capsys.readouterr().out)
    join = {"Hostname": "node-a", "gpu": "3", "pod": "train-1", "namespace": "team-a"}

    def get(name: str, **labels) -> float:
        return m[(name, frozenset({**join, **labels}.items()))]

    assert get("vramtui_estimate_peak_bytes", stage="load") == PEAK
    for stage in ("load", "prefill", "decode"):
        assert get("vramtui_estimate_stage_peak_bytes", stage=stage) == PEAK
    assert get("vramtui_estimate_conservative_bound_bytes") == PEAK
    assert get("vramtui_estimate_item_bytes", item="weights.all.fp16", category="weights") == 14e9
    assert get("vramtui_estimate_margin_bytes", card="h100-sxm") == 2 * 2**30
    capacity = get("vramtui_card_capacity_bytes", card="h100-sxm")
    assert get("vramtui_card_allowed_bytes", card="h100-sxm") == capacity - 2 * 2**30
    # the probe: load measured twice (15e9 and 14e9 reserved): the larger one is the peak
    measured = "vramtui_measured_stage_peak_bytes"
    assert get(measured, stage="load", quantity="torch_max_reserved") == 15e9
    assert get(measured, stage="load", quantity="nvml_used") == 15.6e9
    assert get(measured, stage="decode", quantity="torch_max_reserved") == 16e9
    assert get(measured, stage="decode", quantity="torch_max_allocated") == 16e9 - 1000


def test_one_series_per_gpu_index_and_the_newer_host_label(capsys):
    argv = ["export-metrics", "--once", "--hostname", "n", "--gpu-index", "0,1"]
    assert main([*argv, "--host-label", "hostname"]) == 0
    m = _parse(capsys.readouterr().out)
    peaks = {dict(k[1])["gpu"] for k in m if k[0] == "vramtui_estimate_peak_bytes"}
    assert peaks == {"0", "1"}
    assert all("hostname" in dict(k[1]) and "Hostname" not in dict(k[1]) for k in m)


@pytest.mark.parametrize(
    "extra, words",
    [
        ([], "give --port N"),
        (["--port", "70000"], "not a TCP port"),
        (["--once", "--uuid", "GPU-x", "--gpu-index", "0,1"], "--uuid names one GPU"),
        (["--once", "--host-label", "host-name"], "not a Prometheus label name"),
        (["--once", "--gpu-index", "a"], "give GPU indexes"),
        (["--once", "--margin", "5%"], "--margin goes with --gpu"),
    ],
)
def test_bad_options_are_one_line(extra, words, capsys):
    assert main(["export-metrics", *extra]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_headless_start_up_does_not_import_prometheus_client():
    code = (
        "import sys, vramtui.cli, vramtui.feed.prometheus, vramtui.feed.prometheus_watch, "
        "vramtui.metrics_export; print('prometheus_client' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True
    )
    assert out.stdout.strip() == "False"


def test_the_grafana_panel_queries_both_sides():
    panel = json.loads(PANEL.read_text())
    exprs = " ".join(t["expr"] for t in panel["targets"])
    assert "DCGM_FI_DEV_FB_USED" in exprs and "vramtui_estimate_peak_bytes" in exprs
    assert panel["fieldConfig"]["defaults"]["unit"] == "bytes"


def _serve(port: int, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "vramtui", "export-metrics", "--port", str(port), *extra],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"export-metrics exited: {proc.stderr.read()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("export-metrics did not serve within 30 s")


def test_round_trip_through_prometheus_and_the_alert_fires(prometheus_servers, tmp_path):  # noqa: F811
    rules = tmp_path / "vramtui-alerts.yml"
    shipped = ALERTS.read_text()
    assert "for: 2m" in shipped
    rules.write_text(shipped.replace("for: 2m", "for: 0s"))  # the test does not wait 2 minutes
    exporter = FakeDcgmExporter("gpu-operator-issue-340.prom").start()
    exporter.set_gpu(SimGpu("node-a", 0, 10000, 60000, 522, pod="train-1", namespace="team-a"))
    exporter.set_gpu(SimGpu("node-b", 0, 30000, 40000, 522))  # no estimate for node-b
    port = free_port()
    server = _serve(port, "--hostname", "node-a", "--gpu-index", "0")
    try:
        prom = prometheus_servers(
            {"dcgm": [exporter.target], "vramtui": [f"127.0.0.1:{port}"]}, rule_files=[rules]
        )
        got = prom.wait_for(
            lambda: prom.query('vramtui_estimate_peak_bytes{Hostname="node-a",gpu="0"}'),
            "the estimate scraped",
        )
        assert float(got[0]["value"][1]) == PEAK
        assert got[0]["metric"]["stage"] == "load" and got[0]["metric"]["job"] == "vramtui"
        stages = prom.query('vramtui_estimate_stage_peak_bytes{Hostname="node-a"}')
        assert {s["metric"]["stage"] for s in stages} == {"load", "prefill", "decode"}
        prom.wait_for(lambda: prom.query("DCGM_FI_DEV_FB_USED"), "DCGM scraped")

        def alerts() -> list[dict]:
            return prom.api("/api/v1/alerts")["data"]["alerts"]

        groups = prom.wait_for(lambda: prom.api("/api/v1/rules")["data"]["groups"], "rules")
        assert groups[0]["rules"][0]["name"] == "GpuMemoryAboveVramtuiEstimate"
        time.sleep(2.5)  # two evaluations at 10000 MiB (below the 19,495.6 MiB estimate)
        assert alerts() == []  # node-b is at 30000 MiB but has no estimate: no join, no alert
        exporter.update("node-a", 0, used_mib=20000, free_mib=50000)  # 20,971,520,000 B > PEAK
        firing = prom.wait_for(
            lambda: [a for a in alerts() if a["state"] == "firing"], "the alert firing", 20
        )
        assert len(firing) == 1
        labels = firing[0]["labels"]
        assert labels["alertname"] == "GpuMemoryAboveVramtuiEstimate"
        assert (labels["Hostname"], labels["gpu"], labels["pod"]) == ("node-a", "0", "train-1")
        assert float(firing[0]["value"]) == 20000 * MIB
    finally:
        server.terminate()
        try:
            server.wait(10)
        finally:
            exporter.stop()
    assert server.returncode == 0  # SIGTERM ends it cleanly
