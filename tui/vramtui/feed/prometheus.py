"""The feed from Prometheus: dcgm-exporter's framebuffer counters, read with PromQL instant
queries over the HTTP API (/api/v1/query) at each poll, turned into one Snapshot per host.

Each poll asks two queries (three when a host has gone missing):

    max by (__name__, READ) ({__name__=~"FB_USED|FB_FREE|FB_RESERVED", <--match>})
                                                   the values (MiB)
    max by (KEY) (timestamp(FB_USED{<--match>}))   when each GPU was last scraped
    up == 0                                        which targets are down (only then)

READ is every label the feed reads (host, GPU, UUID, model, driver, pod... as mapped, and
instance), KEY those that tell a GPU's series apart (host, GPU, device, UUID, MIG instance):
Prometheus drops the other labels, so a 500 x 8 fleet's answers are a fraction of the size.

A host is `live` while its newest sample is younger than `stale_after`; `stale` with the
reason when its samples are older, when its series are gone (its target down, say), or when
Prometheus itself does not answer: the last snapshot is kept and the others keep updating.
Values are MiB as dcgm-exporter reports them; bytes = MiB x 2**20, and with the reserved series
present `total = used + free + reserved`, NVML's memory-info v2 identity.

Everything that enters is bounded: the response size, the number of series, the number of hosts,
the label lengths; label values lose their control characters. Plain Python: no Textual here.
"""

from __future__ import annotations

import json
import math
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from vramtui.feed.prometheus_settings import PrometheusSettings
from vramtui.feed.sample import FeedError, GpuSample, Snapshot, one_line
from vramtui.guarded_read import Unreadable, decode_json
from vramtui.safe_text import safe_line

CONNECTING = "connecting"
LIVE = "live"
STALE = "stale"
FAILED = "failed"

MAX_RESPONSE_BYTES = 64 * 2**20
MAX_SERIES = 100_000  # per query: 500 hosts x 8 GPUs x 3 metrics is 12 000
MAX_HOSTS = 10_000
MAX_GPUS_PER_HOST = 256
MAX_LABELS = 64  # per series; more is not an exporter
MAX_LABEL_CHARS = 256  # longer label values are cut, with "..."
MAX_MIB = 2**40  # a counter above a yebibyte is not memory
MIB = 2**20


class _PollFailed(Exception):
    """Prometheus did not give a usable answer on this poll: every host goes stale with it."""


@dataclass(frozen=True)
class HostUpdate:
    host: str
    state: str
    reason: str | None
    snapshot: Snapshot | None


def clean_label(value: object) -> str:
    """A label value safe for a terminal and a file: controls escaped, bounded length."""
    text = safe_line(str(value))
    if len(text) > MAX_LABEL_CHARS:
        text = text[: MAX_LABEL_CHARS - 3] + "..."
    return text


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise _PollFailed(
            f"Prometheus at {req.full_url.split('/api/')[0]} redirected ({code}) to "
            f"{clean_label(newurl)[:120]}: give that URL to --prometheus"
        )


class PrometheusClient:
    """Instant queries against one Prometheus; `query(promql)` -> (eval time, [series])."""

    def __init__(self, settings: PrometheusSettings, timeout: float | None = None) -> None:
        self.settings = settings
        self.timeout = (
            timeout if timeout is not None else max(2.0, min(10.0, 2 * settings.interval))
        )
        handlers: list = [_NoRedirect()]
        if settings.url.startswith("https:"):
            handlers.append(urllib.request.HTTPSHandler(context=self._ssl_context()))
        self._opener = urllib.request.build_opener(*handlers)

    def _ssl_context(self) -> ssl.SSLContext:
        s = self.settings
        from vramtui.fsutil import user_path

        try:
            ctx = ssl.create_default_context(
                cafile=str(user_path(s.ca_file)) if s.ca_file else None
            )
            if s.cert_file:
                ctx.load_cert_chain(
                    str(user_path(s.cert_file)), str(user_path(s.key_file)) if s.key_file else None
                )
        except (OSError, ssl.SSLError) as exc:
            raise FeedError(f"TLS files for Prometheus cannot be used: {one_line(exc)}") from None
        if s.insecure_skip_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def query(self, promql: str) -> tuple[float, list[tuple[dict[str, str], float]]]:
        url = self.settings.url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        request = urllib.request.Request(url, headers={**self.settings.headers()})
        request.add_header("Accept", "application/json")
        where = f"Prometheus at {self.settings.url}"
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = _api_error(exc)
            if exc.code in (401, 403):
                raise _PollFailed(
                    f"{where} refused the query ({exc.code}{detail}): check the bearer token "
                    "or basic auth (see docs/prometheus.md)"
                ) from None
            raise _PollFailed(f"{where} answered HTTP {exc.code}{detail}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise _PollFailed(
                    f"{where}: TLS certificate not trusted ({one_line(reason.verify_message)}): "
                    "give its CA with --ca-file"
                ) from None
            raise _PollFailed(f"{where} did not answer: {one_line(reason)[:160]}") from None
        except (TimeoutError, OSError) as exc:
            raise _PollFailed(
                f"{where} did not answer within {self.timeout:g} s ({one_line(exc)[:120]})"
            ) from None
        if len(raw) > MAX_RESPONSE_BYTES:
            raise _PollFailed(
                f"{where} sent more than {MAX_RESPONSE_BYTES // MIB} MiB for one query: narrow "
                "it with --match"
            )
        return _parse_vector(raw, where)


def _api_error(exc: urllib.error.HTTPError) -> str:
    try:
        data = decode_json(exc.read(64 * 1024))
    except (Unreadable, OSError):
        return ""
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return ": " + clean_label(data["error"])[:160]
    return ""


def _loads(raw: bytes, where: str) -> object:
    """json.loads of an answer. No generic nesting walk: the answer is read along its fixed
    shape only (data.result[i].metric/value), whatever nests below that is never walked."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError, TypeError, OverflowError):
        pass  # worded as every other JSON input is, below
    try:
        return decode_json(raw)
    except Unreadable as exc:
        raise _PollFailed(f"{where} sent an answer that {exc.problem}") from None


def _parse_vector(raw: bytes, where: str) -> tuple[float, list[tuple[dict[str, str], float]]]:
    data = _loads(raw, where)
    if not isinstance(data, dict) or data.get("status") != "success":
        error = data.get("error") if isinstance(data, dict) else None
        raise _PollFailed(
            f"{where} answered with an error: {clean_label(error or 'no status')[:160]}"
        )
    result = data.get("data")
    if not isinstance(result, dict) or result.get("resultType") != "vector":
        raise _PollFailed(f"{where} did not answer with an instant vector: is it Prometheus?")
    series = result.get("result")
    if not isinstance(series, list):
        raise _PollFailed(f"{where} sent a malformed result (not a list)")
    if len(series) > MAX_SERIES:
        raise _PollFailed(
            f"{where} returned {len(series)} series, more than the {MAX_SERIES} vramtui reads: "
            "narrow the query with --match"
        )
    out: list[tuple[dict[str, str], float]] = []
    eval_time = None
    # A fleet repeats its label values (host, model, job, instance, each UUID in three metrics):
    # each distinct text is cleaned once per answer, not once per series; and a series whose
    # labels are all clean already (nearly every one) keeps its decoded dict, not a copy.
    cleaned: dict[str, str] = {}
    for item in series:
        if item.__class__ is not dict:
            continue
        metric, value = item.get("metric"), item.get("value")
        if metric.__class__ is not dict or value.__class__ is not list or len(value) != 2:
            continue
        if len(metric) > MAX_LABELS:
            continue
        labels = metric
        for k, v in metric.items():
            if v.__class__ is not str or len(k) > MAX_LABEL_CHARS:
                labels = None
                break
            text = cleaned.get(v)
            if text is None:
                text = cleaned[v] = clean_label(v)
            if text != v:
                labels = None
                break
        if labels is None:
            labels = {}
            for k, v in metric.items():
                if isinstance(v, str):
                    text = cleaned.get(v)
                    if text is None:
                        text = cleaned[v] = clean_label(v)
                    labels[str(k)[:MAX_LABEL_CHARS]] = text
        try:
            ts = float(value[0])
            number = float(value[1])
        except (TypeError, ValueError):
            continue
        if not math.isfinite(ts):
            continue
        eval_time = ts if eval_time is None else max(eval_time, ts)
        out.append((labels, number))
    return (eval_time if eval_time is not None else time.time()), out


def _mib_to_bytes(value: float | None) -> int | None:
    if value is None or not math.isfinite(value) or value < 0 or value > MAX_MIB:
        return None
    return round(value * MIB)


def _first(labels: dict[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


def _gpu_index(labels: dict[str, str], settings: PrometheusSettings) -> int | None:
    text = _first(labels, settings.labels["gpu"])
    if text is not None and text.isdigit() and len(text) < 6:
        return int(text)
    device = _first(labels, settings.labels["device"]) or ""
    digits = device[len(device.rstrip("0123456789")) :]
    if digits and len(digits) < 6:
        return int(digits)
    return None


def _when(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


@dataclass
class _GpuSeen:
    index: int
    uuid: str | None
    name: str | None
    last_seen: float  # Prometheus time of its newest sample


@dataclass
class _HostSeen:
    instance: str | None = None
    last_seen: float = 0.0
    snapshot: Snapshot | None = None
    gpus: dict[int, _GpuSeen] = field(default_factory=dict)


class PrometheusFeed:
    """Poll Prometheus; remember every host and GPU seen so that a missing one goes stale with
    the reason instead of vanishing. Not thread-safe: one poller thread owns it."""

    def __init__(self, settings: PrometheusSettings, client: PrometheusClient | None = None):
        self.settings = settings
        self.client = client or PrometheusClient(settings)
        self.hosts: dict[str, _HostSeen] = {}

    @property
    def source_name(self) -> str:
        """The row that stands for Prometheus itself when no host is known yet."""
        return f"prometheus {urllib.parse.urlsplit(self.settings.url).netloc}"

    def _selector(self, metric: str | None = None) -> str:
        sel = self.settings.selector
        if metric is None:
            names = "|".join(
                self.settings.metrics[k] for k in ("fb_used", "fb_free", "fb_reserved")
            )
            return "{" + f'__name__=~"{names}"' + ("," + sel if sel else "") + "}"
        return metric + ("{" + sel + "}" if sel else "")

    def _read_labels(self) -> tuple[str, ...]:
        """Every label the feed reads (the mapped names, and `instance`)."""
        names = {"instance"}
        for group in self.settings.labels.values():
            names.update(group)
        return tuple(sorted(names))

    def _stamp_labels(self) -> tuple[str, ...]:
        """The labels a GPU's series is told apart by: host, GPU number, UUID, MIG instance."""
        names: set[str] = set()
        for key in ("host", "gpu", "device", "uuid", "mig_instance"):
            names.update(self.settings.labels[key])
        return tuple(sorted(names))

    def values_query(self) -> str:
        """The three framebuffer series, with only the labels the feed reads: Prometheus drops
        the others (job, pci_bus_id, the Kubernetes target labels...), which shrinks the answer."""
        return f"max by (__name__,{','.join(self._read_labels())}) ({self._selector()})"

    def stamps_query(self) -> str:
        """When each GPU was last scraped, with only the labels that tell its series apart."""
        used = self._selector(self.settings.metrics["fb_used"])
        return f"max by ({','.join(self._stamp_labels())}) (timestamp({used}))"

    def poll(self) -> list[HostUpdate]:
        """One poll: an update for every host known (and for Prometheus itself when none is)."""
        s = self.settings
        try:
            now, values = self.client.query(self.values_query())
            _, stamps = self.client.query(self.stamps_query())
        except _PollFailed as exc:
            return self._all_stale(str(exc))
        hosts = self._group(values, stamps)
        updates: list[HostUpdate] = []
        if not hosts and not self.hosts:
            what = f"no {s.metrics['fb_used']} series"
            if s.matchers:
                what += f" match {{{s.selector}}}"
            return [
                HostUpdate(
                    self.source_name,
                    FAILED,
                    f"{what} in Prometheus at {s.url}: check --match, and that dcgm-exporter "
                    "is scraped (its job in prometheus.yml)",
                    None,
                )
            ]
        missing = [h for h in self.hosts if h not in hosts]
        down = self._down_instances() if missing else set()
        for host, gpus in hosts.items():
            updates.append(self._host_update(host, gpus, now))
        for host in missing:
            seen = self.hosts[host]
            reason = f"no {s.metrics['fb_used']} series since {_when(seen.last_seen)}"
            if seen.instance and seen.instance in down:
                reason += f": its target {seen.instance} is down (up == 0)"
            else:
                reason += ": its exporter stopped reporting it, or --match no longer selects it"
            updates.append(HostUpdate(host, STALE, reason, seen.snapshot))
        return updates

    def _all_stale(self, reason: str) -> list[HostUpdate]:
        if not self.hosts:
            return [HostUpdate(self.source_name, FAILED, reason, None)]
        return [HostUpdate(h, STALE, reason, seen.snapshot) for h, seen in self.hosts.items()]

    def _down_instances(self) -> set[str]:
        try:
            _, series = self.client.query("up == 0")
        except _PollFailed:
            return set()
        return {labels.get("instance", "") for labels, _ in series}

    def _group(self, values, stamps) -> dict[str, dict[tuple, dict]]:
        """host -> (gpu index, uuid) -> {"labels", "used"/"free"/"reserved", "ts", "pods"...}."""
        s = self.settings
        kinds = {s.metrics["fb_used"]: "used", s.metrics["fb_free"]: "free"}
        kinds[s.metrics["fb_reserved"]] = "reserved"
        host_names = s.labels["host"]
        key_names = self._stamp_labels()
        stamp_of: dict[tuple, float] = {}
        for labels, value in stamps:
            key = tuple([labels.get(n, "") for n in key_names])
            old = stamp_of.get(key)
            stamp_of[key] = value if old is None else max(old, value)
        # The three series of a GPU share the labels that tell it apart: its host, index, UUID
        # and MIG instance are worked out once per GPU, not once per series.
        where_of: dict[tuple, tuple | None] = {}
        uuid_names, mig = s.labels["uuid"], s.labels["mig_instance"]
        attribution = [
            (plural, s.labels[name])
            for name, plural in (("pod", "pods"), ("namespace", "namespaces"))
            + (("container", "containers"),)
        ]
        out: dict[str, dict[tuple, dict]] = {}
        for labels, value in values:
            kind = kinds.get(labels.get("__name__", ""))
            if kind is None:
                continue
            get = labels.get
            series_key = tuple([get(n, "") for n in key_names])
            where = where_of.get(series_key, False)
            if where is False:
                host = _first(labels, host_names)
                index = _gpu_index(labels, s)
                where = where_of[series_key] = (
                    None
                    if host is None or index is None
                    else (host, index, _first(labels, uuid_names), bool(_first(labels, mig)))
                )
            if where is None:
                continue
            host, index, uuid, is_mig = where
            gpus = out.get(host)
            if gpus is None:
                if len(out) >= MAX_HOSTS:
                    continue
                gpus = out[host] = {}
            key = (index, uuid)
            entry = gpus.get(key)
            if entry is None:
                if len(gpus) >= MAX_GPUS_PER_HOST:
                    continue
                entry = gpus[key] = {
                    "labels": labels,
                    "pods": set(),
                    "namespaces": set(),
                    "containers": set(),
                    "mig": 0,
                }
            if is_mig:
                entry["mig"] += 1
                continue
            entry[kind] = value
            for plural, names in attribution:
                for name in names:
                    v = get(name)
                    if v:
                        if len(entry[plural]) < 16:
                            entry[plural].add(v)
                        break
            if kind == "used":
                ts = stamp_of.get(series_key)
                if ts is not None:
                    entry["ts"] = max(entry.get("ts", ts), ts)
        return out

    def _host_update(self, host: str, gpus: dict[tuple, dict], now: float) -> HostUpdate:
        s = self.settings
        seen = self.hosts.get(host)
        if seen is None:
            if len(self.hosts) >= MAX_HOSTS:
                return HostUpdate(host, FAILED, f"more than {MAX_HOSTS} hosts: use --match", None)
            seen = self.hosts[host] = _HostSeen()
        samples: list[GpuSample] = []
        notes: list[str] = []
        stamps = [e.get("ts", now) for e in gpus.values() if "used" in e]
        newest = max(stamps) if stamps else None
        host_stale = newest is not None and now - newest > s.stale_after
        driver = None
        present: set[int] = set()
        for (index, uuid), e in sorted(gpus.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            labels = e["labels"]
            seen.instance = labels.get("instance") or seen.instance
            driver = driver or _first(labels, s.labels["driver"])
            name = _first(labels, s.labels["model"])
            if "used" not in e:
                if e["mig"]:
                    notes.append(
                        f"GPU {index}: {e['mig']} MIG instance series not shown (the Prometheus "
                        "feed reads whole GPUs)"
                    )
                continue
            present.add(index)
            ts = e.get("ts", now)
            age = now - ts
            gpu_seen = seen.gpus.get(index)
            if gpu_seen is None and len(seen.gpus) < MAX_GPUS_PER_HOST:
                gpu_seen = seen.gpus[index] = _GpuSeen(index, uuid, name, ts)
            if gpu_seen is not None:
                gpu_seen.last_seen, gpu_seen.uuid, gpu_seen.name = ts, uuid, name
            attribution = {
                "pod": ", ".join(sorted(e["pods"])) or None,
                "namespace": ", ".join(sorted(e["namespaces"])) or None,
                "container": ", ".join(sorted(e["containers"])) or None,
            }
            if age > s.stale_after and not host_stale:
                notes.append(
                    f"GPU {index}: newest sample {age:.0f} s old (stale after "
                    f"{s.stale_after:g} s), values not shown"
                )
                samples.append(GpuSample(index=index, uuid=uuid, name=name, **attribution))
                continue
            used = _mib_to_bytes(e.get("used"))
            free = _mib_to_bytes(e.get("free"))
            reserved = _mib_to_bytes(e.get("reserved"))
            total = None
            if used is not None and free is not None:
                total = used + free + (reserved or 0)
            samples.append(
                GpuSample(
                    index=index,
                    uuid=uuid,
                    name=name,
                    total_bytes=total,
                    used_bytes=used,
                    free_bytes=free,
                    reserved_bytes=reserved,
                    memory_info_version=2 if reserved is not None and used is not None else None,
                    **attribution,
                )
            )
        for index, gpu_seen in sorted(seen.gpus.items()):
            if index not in present:
                notes.append(
                    f"GPU {index}: no {s.metrics['fb_used']} series since "
                    f"{_when(gpu_seen.last_seen)} (stale)"
                )
                samples.append(GpuSample(index=index, uuid=gpu_seen.uuid, name=gpu_seen.name))
        samples.sort(key=lambda g: g.index)
        if newest is None:
            reason = f"no {s.metrics['fb_used']} series for its GPUs"
            return HostUpdate(host, STALE, reason, seen.snapshot)
        snapshot = Snapshot(
            host=host,
            time=newest,
            gpus=tuple(samples),
            processes=None,
            driver_version=driver,
            notes=tuple(notes),
        )
        seen.snapshot = snapshot
        seen.last_seen = max(seen.last_seen, newest)
        if host_stale:
            return HostUpdate(
                host,
                STALE,
                f"newest sample {now - newest:.0f} s old (stale after {s.stale_after:g} s): "
                "is its exporter still scraped?",
                snapshot,
            )
        return HostUpdate(host, LIVE, None, snapshot)
