"""`vramtui export-metrics SPEC --port N`: the spec's estimate as Prometheus metrics, labelled so
that they join dcgm-exporter's series (`Hostname`, `gpu`, and `UUID`, `pod`, `namespace` when
given), for Grafana panels and an alert "used is above the estimate for this stage".

Gauges, all in bytes (docs/prometheus.md lists them with the example alert and panel):

    vramtui_estimate_peak_bytes{stage}                  the most loaded GPU at its worst stage
    vramtui_estimate_stage_peak_bytes{stage}            the same, per stage
    vramtui_estimate_conservative_bound_bytes           the sum of every item's own maximum
    vramtui_estimate_item_bytes{item, category}         each ledger item's largest stage
    vramtui_card_capacity_bytes{card}                   with --gpu CARD: the usable capacity
    vramtui_card_allowed_bytes{card}                    the capacity less the margin
    vramtui_estimate_margin_bytes{card}                 the margin itself
    vramtui_measured_stage_peak_bytes{stage, quantity}  with --probe FILE: the stage peaks the
                                                        probe measured (max over its runs)
    vramtui_estimate_info{spec, model, version}         1

Every series carries the join labels once per GPU index (--gpu-index, default 0..gpus-1).
prometheus-client is imported only here, when the command runs.
"""

from __future__ import annotations

import re
import signal
import socket
import sys
import threading

from vramtui.errors import VramtuiError
from vramtui.safe_text import safe_line

MAX_GPU_INDEXES = 64
MAX_LABEL_CHARS = 256
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
MEASURED_QUANTITIES = (
    ("max_memory_reserved_bytes", "torch_max_reserved"),
    ("max_memory_allocated_bytes", "torch_max_allocated"),
    ("nvml_used_bytes", "nvml_used"),
)


class ExportError(VramtuiError):
    """The metrics cannot be built or served; str() is one line with the fix."""


def add_export_parser(sub, add_spec_args) -> None:
    p = sub.add_parser(
        "export-metrics",
        help="serve the spec's estimate (per-stage peaks, card capacity, probe peaks) as "
        "Prometheus metrics that join dcgm-exporter's",
        description="Serve the estimate over HTTP for Prometheus to scrape (/metrics). The "
        "labels match dcgm-exporter's so that PromQL can compare used with the estimate; "
        "see docs/prometheus.md for the alert rule and the Grafana panel.",
    )
    add_spec_args(p)
    p.add_argument("--port", type=int, metavar="N", help="the port to serve on (required)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="the address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)",
    )
    p.add_argument("--gpu", metavar="CARD", help="catalogue card: export capacity and margin")
    p.add_argument(
        "--margin",
        metavar="X",
        help="with --gpu: memory kept free per GPU (5%% or 2GiB); default the spec's",
    )
    p.add_argument("--probe", metavar="FILE", help="a probe file: export its measured peaks")
    p.add_argument(
        "--hostname",
        metavar="NAME",
        help="the host label's value, as dcgm-exporter reports it (default: this host's name)",
    )
    p.add_argument(
        "--host-label",
        default="Hostname",
        metavar="LABEL",
        help="the host label's name: Hostname (dcgm-exporter up to 4.x) or hostname (newer)",
    )
    p.add_argument(
        "--gpu-index",
        metavar="I,J",
        help="the gpu label values, one series each (default 0..gpus-1 of the spec)",
    )
    p.add_argument("--uuid", metavar="UUID", help="the UUID label (one GPU index only)")
    p.add_argument("--pod", metavar="NAME", help="the pod label (Kubernetes)")
    p.add_argument("--namespace", metavar="NAME", help="the namespace label (Kubernetes)")
    p.add_argument(
        "--once",
        action="store_true",
        help="print the metrics in the exposition format and exit, instead of serving them",
    )


def _label_value(text: str, flag: str) -> str:
    text = safe_line(text).strip()
    if not text:
        raise ExportError(f"{flag} must not be empty")
    if len(text) > MAX_LABEL_CHARS:
        raise ExportError(f"{flag} is longer than {MAX_LABEL_CHARS} characters")
    return text


def _gpu_indexes(args, spec) -> list[str]:
    text = getattr(args, "gpu_index", None)
    if text is None:
        n = max(1, int(getattr(spec, "gpus", 1) or 1))
        return [str(i) for i in range(min(n, MAX_GPU_INDEXES))]
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or len(part) > 5:
            raise ExportError(
                f"--gpu-index {safe_line(text)[:60]!r}: give GPU indexes such as 0 or 0,1,2,3"
            )
        if part not in out:
            out.append(part)
    if len(out) > MAX_GPU_INDEXES:
        raise ExportError(f"--gpu-index lists more than {MAX_GPU_INDEXES} GPUs")
    return out


def join_labels(args, spec) -> list[dict[str, str]]:
    """One label set per GPU index: the host label, gpu, and UUID/pod/namespace when given."""
    host_label = args.host_label
    if not _LABEL_NAME.match(host_label or ""):
        raise ExportError(
            f"--host-label {safe_line(host_label)[:40]!r} is not a Prometheus label name"
        )
    host = _label_value(args.hostname or socket.gethostname(), "--hostname")
    indexes = _gpu_indexes(args, spec)
    base = {host_label: host}
    if args.uuid:
        if len(indexes) != 1:
            raise ExportError("--uuid names one GPU: give one --gpu-index with it")
        base["UUID"] = _label_value(args.uuid, "--uuid")
    if args.pod:
        base["pod"] = _label_value(args.pod, "--pod")
    if args.namespace:
        base["namespace"] = _label_value(args.namespace, "--namespace")
    return [{**base, "gpu": i} for i in indexes]


def build_series(est_dict: dict, capacity=None, margin=None, probe_runs=()) -> list[tuple]:
    """(metric, help, {label: value}, value) for everything to export, before the join labels."""
    out: list[tuple] = []
    peak_stage = est_dict.get("peak_stage") or ""
    out.append(
        (
            "vramtui_estimate_peak_bytes",
            "The estimate's peak: the most loaded GPU at its worst stage (bytes).",
            {"stage": peak_stage},
            est_dict["peak_bytes"],
        )
    )
    for stage, value in (est_dict.get("stage_peak_bytes") or {}).items():
        out.append(
            (
                "vramtui_estimate_stage_peak_bytes",
                "The estimate's peak per stage on the most loaded GPU (bytes).",
                {"stage": stage},
                value,
            )
        )
    if est_dict.get("conservative_bound_bytes") is not None:
        out.append(
            (
                "vramtui_estimate_conservative_bound_bytes",
                "The sum of every ledger item's own maximum: a conservative bound (bytes).",
                {},
                est_dict["conservative_bound_bytes"],
            )
        )
    for item in est_dict.get("items") or ():
        if item.get("bytes") is None:
            continue
        out.append(
            (
                "vramtui_estimate_item_bytes",
                "Each ledger item at its largest stage (bytes).",
                {"item": item["key"], "category": item.get("category") or ""},
                item["bytes"],
            )
        )
    if capacity is not None:
        card = {"card": getattr(capacity.gpu, "id", "") or ""}
        allowed = capacity.allowed(margin)
        out += [
            (
                "vramtui_card_capacity_bytes",
                "The chosen card's usable capacity, as the shortlist judges it (bytes).",
                card,
                capacity.bytes,
            ),
            (
                "vramtui_card_allowed_bytes",
                "The card's capacity less the margin: what the peak may reach (bytes).",
                card,
                allowed,
            ),
            (
                "vramtui_estimate_margin_bytes",
                "The memory kept free on the card (bytes).",
                card,
                capacity.bytes - allowed,
            ),
        ]
    peaks: dict[tuple[str, str, int], int] = {}
    for run in probe_runs:
        for stage in run.stages:
            if not stage.measured:
                continue
            for dev in stage.devices:
                for attr, quantity in MEASURED_QUANTITIES:
                    value = getattr(dev, attr, None)
                    if value is None:
                        continue
                    key = (stage.stage, quantity, dev.index)
                    peaks[key] = max(peaks.get(key, 0), value)
    for (stage, quantity, index), value in sorted(peaks.items()):
        out.append(
            (
                "vramtui_measured_stage_peak_bytes",
                "The stage peaks the probe measured, the largest over its runs (bytes).",
                {"stage": stage, "quantity": quantity, "_device": str(index)},
                value,
            )
        )
    return out


class _EstimateCollector:
    """A prometheus-client collector that yields fixed gauges (the estimate does not change)."""

    def __init__(self, series: list[tuple], joins: list[dict[str, str]], info: dict[str, str]):
        self.series = series
        self.joins = joins
        self.info = info

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        families: dict[str, GaugeMetricFamily] = {}
        join_names = list(self.joins[0])
        for metric, help_text, labels, value in self.series:
            device = labels.get("_device")
            own = {k: v for k, v in labels.items() if k != "_device"}
            names = join_names + list(own)
            family = families.get(metric)
            if family is None:
                family = families[metric] = GaugeMetricFamily(metric, help_text, labels=names)
            for i, join in enumerate(self.joins):
                if device is not None and int(device) != i:
                    continue  # a probe device i is the i-th exported GPU index
                family.add_metric([join[k] for k in join_names] + list(own.values()), value)
        info_names = join_names + list(self.info)
        info = GaugeMetricFamily(
            "vramtui_estimate_info", "The spec the estimate is of (value 1).", labels=info_names
        )
        for join in self.joins:
            info.add_metric([join[k] for k in join_names] + list(self.info.values()), 1)
        yield from families.values()
        yield info


def build_registry(args):
    """The registry to serve, from the command's arguments (spec, card, probe, labels)."""
    from prometheus_client import CollectorRegistry

    from vramtui import __version__
    from vramtui.cli import _load_catalog, _spec_and_estimate
    from vramtui.ledger.report import estimate_to_dict

    spec, _arch, est = _spec_and_estimate(args)
    joins = join_labels(args, spec)
    capacity = margin = None
    if args.gpu:
        from vramtui.fit_capacity import card_capacity, parse_margin, spec_margin
        from vramtui.fit_command import _card

        capacity = card_capacity(_card(_load_catalog(args), args.gpu))
        margin = parse_margin(args.margin) if args.margin is not None else spec_margin(spec)
    elif args.margin is not None:
        raise ExportError("--margin goes with --gpu CARD (it is kept free on that card)")
    runs = ()
    if args.probe:
        from vramtui.probe.records import read_probe_file

        runs = read_probe_file(args.probe)
    est_dict = estimate_to_dict(est, spec)
    info = {
        "spec": safe_line(est_dict.get("spec_name") or "")[:MAX_LABEL_CHARS],
        "model": safe_line(est_dict.get("model") or "")[:MAX_LABEL_CHARS],
        "version": __version__,
    }
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        _EstimateCollector(build_series(est_dict, capacity, margin, runs), joins, info)
    )
    return registry


def cmd_export_metrics(args) -> int:
    if args.port is None and not args.once:
        raise ExportError("give --port N to serve the metrics on (or --once to print them)")
    if args.port is not None and not 1 <= args.port <= 65535:
        raise ExportError(f"--port {args.port} is not a TCP port: give 1 to 65535")
    registry = build_registry(args)
    if args.once:
        from prometheus_client import generate_latest

        sys.stdout.write(generate_latest(registry).decode())
        return 0
    from prometheus_client import start_http_server

    try:
        server, thread = start_http_server(args.port, addr=args.host, registry=registry)
    except OSError as exc:
        raise ExportError(
            f"cannot listen on {safe_line(args.host)}:{args.port} ({exc.strerror or exc}): "
            "choose another --port, or stop what holds it"
        ) from None
    print(
        f"vramtui: serving the estimate on http://{args.host}:{args.port}/metrics (Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    done = threading.Event()

    def _stop(_signum, _frame) -> None:
        done.set()

    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, _stop)
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    return 0
