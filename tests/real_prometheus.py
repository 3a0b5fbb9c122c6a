"""A real Prometheus server for the tests: Debian's `prometheus` package, started on a free port
of 127.0.0.1 with a 1 s scrape and evaluation interval, its data in a temporary directory.

    prom = RealPrometheus(tmp_dir).start()
    prom.configure({"dcgm": ["127.0.0.1:9400"]}, rule_files=[...])   # rewrites + /-/reload
    prom.query('DCGM_FI_DEV_FB_USED')                                # the instant vector
    prom.stop()

`prometheus_server` (a session fixture, in conftest.py) shares one for the tests that only
reconfigure it; a test that stops Prometheus starts its own. Skips with the reason when the
binary is absent (CI installs it: .ci/run).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

BINARY = "prometheus"
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prometheus_binary() -> str:
    path = shutil.which(BINARY) or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )
    if path is None:
        pytest.skip(
            "the `prometheus` binary is not installed (apt-get install prometheus; CI does): "
            "the real-server tests need it"
        )
    return path


class RealPrometheus:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = self.root / "prometheus.yml"
        self.log_path = self.root / "prometheus.log"
        self.proc: subprocess.Popen | None = None
        self.configure({})

    def configure(self, jobs: dict[str, list[str]], rule_files: list[str] = ()) -> None:
        """Write prometheus.yml (one static job per entry) and reload a running server."""
        lines = [
            "global:",
            "  scrape_interval: 1s",
            "  scrape_timeout: 1s",
            "  evaluation_interval: 1s",
        ]
        if rule_files:
            lines.append("rule_files:")
            lines += [f"  - {json.dumps(str(p))}" for p in rule_files]
        lines.append("scrape_configs:")
        for job, targets in jobs.items():
            lines += [
                f"  - job_name: {json.dumps(job)}",
                "    static_configs:",
                f"      - targets: {json.dumps(list(targets))}",
            ]
        if not jobs:
            lines[-1] = "scrape_configs: []"
        self.config_path.write_text("\n".join(lines) + "\n")
        if self.proc is not None:
            self._post("/-/reload")

    def start(self) -> RealPrometheus:
        binary = prometheus_binary()
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log = log
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited at start-up: {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"prometheus not ready after {START_TIMEOUT:g} s: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
            self.proc = None
            self._log.close()

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def _post(self, path: str) -> None:
        req = urllib.request.Request(self.url + path, method="POST", data=b"")
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200, r.status

    def api(self, path: str, **params) -> dict:
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())

    def query(self, promql: str) -> list[dict]:
        return self.api("/api/v1/query", query=promql)["data"]["result"]

    def wait_for(self, predicate, what: str, timeout: float = 15.0, step: float = 0.25):
        """Poll `predicate()` until it returns a true value (returned); fail after `timeout`."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(step)
        raise AssertionError(f"{what}: not within {timeout:g} s (last: {last!r})")


@pytest.fixture(scope="session")
def prometheus_servers(tmp_path_factory):
    """start(jobs, rule_files=()) -> a started RealPrometheus, stopped at the end of the session.

    The targets go in before the start: Prometheus applies discovered targets every 5 s, so a
    server started with its targets scrapes them ~5 s later, and each reload costs as much."""
    started: list[RealPrometheus] = []

    def start(jobs: dict[str, list[str]], rule_files=()) -> RealPrometheus:
        prometheus_binary()
        prom = RealPrometheus(tmp_path_factory.mktemp("prometheus"))
        prom.configure(jobs, list(rule_files))
        started.append(prom.start())
        return prom

    yield start
    for prom in started:
        prom.stop()
