"""A fake dcgm-exporter: a tiny threaded HTTP server whose /metrics serves the framebuffer
family in the layout of recorded real exporter output (tests/data/dcgm/, see its README), with
values the test changes while it runs, and GPUs or hosts it adds and removes.

    exporter = FakeDcgmExporter("gpu-operator-issue-340.prom")
    exporter.set_gpu(SimGpu("node-a", 0, used_mib=1000, free_mib=14000, reserved_mib=450))
    exporter.start()          # exporter.target == "127.0.0.1:PORT", for a scrape config
    ...
    exporter.stop()           # the target goes away: scrapes fail, Prometheus marks it stale
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).parent / "data" / "dcgm"

# From dcgm-exporter's etc/default-counters.csv ("# Memory usage").
FB_FAMILY = (
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB)."),
)
_SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_series(line: str) -> tuple[str, list[tuple[str, str]], str]:
    """One exposition line -> (metric, [(label, value)] in order, value text)."""
    m = _SERIES.match(line)
    assert m, f"not a series line: {line!r}"
    labels = _LABEL.findall(m.group(2))
    return m.group(1), labels, m.group(3)


def render_series(metric: str, labels: list[tuple[str, str]], value: str) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{metric}{{{body}}} {value}"


def recorded_layout(name: str) -> list[str]:
    """The label names, in order, of the recorded file's GPU series (the first one with the
    most labels, so the Kubernetes ones are included when the file has them)."""
    best: list[str] = []
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("DCGM_FI_DEV_"):
            _, labels, _ = parse_series(line)
            names = [k for k, _ in labels if k not in ("GPU_I_PROFILE", "GPU_I_ID", "vgpu")]
            if len(names) > len(best):
                best = names
    assert best, f"{name} holds no series"
    return best


@dataclass(frozen=True)
class SimGpu:
    host: str
    index: int
    used_mib: float
    free_mib: float
    reserved_mib: float | None = 0.0
    uuid: str | None = None
    model: str = "NVIDIA H100 80GB HBM3"
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    age_s: float | None = None  # serve with an explicit timestamp this old (a lagging source)

    @property
    def gpu_uuid(self) -> str:
        if self.uuid:
            return self.uuid
        n = sum(ord(c) * (i + 1) for i, c in enumerate(self.host)) % 0xFFFFFFFF
        return f"GPU-{n:08x}-0000-4000-8000-{self.index:012x}"


class FakeDcgmExporter:
    def __init__(self, recorded: str = "gpu-operator-issue-340.prom") -> None:
        self.layout = recorded_layout(recorded)
        self._lock = threading.Lock()
        self._gpus: dict[tuple[str, int], SimGpu] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.scrapes = 0
        self.port: int | None = None

    # ------------------------------------------------------------------ the fleet

    def set_gpu(self, gpu: SimGpu) -> None:
        with self._lock:
            self._gpus[(gpu.host, gpu.index)] = gpu

    def update(self, host: str, index: int, **changes) -> None:
        with self._lock:
            self._gpus[(host, index)] = replace(self._gpus[(host, index)], **changes)

    def remove(self, host: str, index: int | None = None) -> None:
        with self._lock:
            for key in list(self._gpus):
                if key[0] == host and (index is None or key[1] == index):
                    del self._gpus[key]

    # ------------------------------------------------------------------ the exposition

    def _labels(self, g: SimGpu) -> list[tuple[str, str]]:
        values = {
            "gpu": str(g.index),
            "UUID": g.gpu_uuid,
            "pci_bus_id": f"00000000:{0x18 + g.index:02X}:00.0",
            "device": f"nvidia{g.index}",
            "modelName": g.model,
            "Hostname": g.host,
            "hostname": g.host,
            "container": g.container,
            "namespace": g.namespace,
            "pod": g.pod,
        }
        return [(k, values[k]) for k in self.layout if values.get(k) is not None]

    def metrics_text(self) -> str:
        with self._lock:
            gpus = sorted(self._gpus.values(), key=lambda g: (g.host, g.index))
        lines: list[str] = []
        for metric, help_text in FB_FAMILY:
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
            for g in gpus:
                value = {
                    "DCGM_FI_DEV_FB_FREE": g.free_mib,
                    "DCGM_FI_DEV_FB_USED": g.used_mib,
                    "DCGM_FI_DEV_FB_RESERVED": g.reserved_mib,
                }[metric]
                if value is None:
                    continue
                text = f"{value:g}"
                if g.age_s is not None:
                    text += f" {int((time.time() - g.age_s) * 1000)}"
                lines.append(render_series(metric, self._labels(g), text))
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ the server

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> FakeDcgmExporter:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.metrics_text().encode()
                exporter.scrapes += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
