"""The feed at fleet scale: hosts (or pods) grouped, one summary per group, sorted by risk.

Pure data, no Textual: the app's Feed tab draws these groups when more hosts stream than fit one
line each (`GROUP_ABOVE_HOSTS`). One pass over every GPU of every host per poll, so the cost is
O(hosts x GPUs) with a small constant (bench/bench_feed_fleet.py measures it at 500 x 8).

A GPU's pod, namespace, container and job come from the feed source's labels where it has them
(Prometheus with Kubernetes attribution); they are read with `getattr(..., None)` so samples
without those fields (NVML, SSH, older recordings) group by host.

Risk order: groups with a GPU over the estimate first (the most bytes over first), then live
groups by their fullest GPU's used fraction (in whole percent, then by name), then stale groups (no fresh counters: the reason is
kept). A stale group whose last counters were over the estimate still sorts first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from vramtui.feed.sample import Snapshot

GROUP_ABOVE_HOSTS = 20  # more hosts than this: the grouped view
FRESH_STATES = ("live",)


def gpu_label(gpu, name: str) -> str | None:
    """A label the feed source put on a GPU sample (pod, namespace, ...), None when absent."""
    value = getattr(gpu, name, None)
    return value if isinstance(value, str) and value else None


class FleetGpu(NamedTuple):
    """One GPU with what the summary needs. `margin_bytes` is used - estimate (positive: over
    the estimate); None when either is unknown. `fraction` is used / total, None when unknown.
    A tuple, not a dataclass: thousands are built per poll."""

    host: str
    index: int
    name: str | None
    used_bytes: int | None
    total_bytes: int | None
    estimate_bytes: int | None
    margin_bytes: int | None
    fraction: float | None
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    job: str | None = None


@dataclass(frozen=True)
class FleetGroup:
    key: str  # unique: "host:<name>", "pod:<namespace>/<pod>" or "job:<id>"
    label: str
    kind: str  # host | pod | job
    hosts: tuple[str, ...]
    gpus: tuple[FleetGpu, ...]
    used_bytes: int | None  # sum over the GPUs that report it
    total_bytes: int | None
    worst: FleetGpu | None  # the GPU furthest over the estimate, else the fullest
    over_bytes: int | None  # the largest used - estimate of the group's GPUs (signed)
    stale_reason: str | None  # None when every host of the group is live
    search_text: str  # lower-case: labels, hosts, pods, namespaces, containers, jobs

    @property
    def is_over(self) -> bool:
        return self.over_bytes is not None and self.over_bytes > 0

    @property
    def fraction(self) -> float | None:
        return self.worst.fraction if self.worst is not None else None

    def risk_key(self) -> tuple:
        """Used fractions compare in whole percent (as shown), so rows do not swap places on
        every poll over a few MiB."""
        percent = round((self.fraction or 0.0) * 100)
        if self.is_over:
            return (0, -self.over_bytes, -percent, self.label)
        tier = 2 if self.stale_reason else 1
        return (tier, 0, -percent, self.label)


def _stale_reason(state: str, reason: str | None, snap: Snapshot | None) -> str | None:
    if snap is not None and snap.error:
        return snap.error
    if state in FRESH_STATES and snap is not None:
        return None
    if reason:
        return f"{state}: {reason}"
    return state if snap is not None else f"{state}: no counters yet"


def has_pod_labels(statuses: dict) -> bool:
    """Whether any GPU carries a pod or job label (then grouping by pod is offered)."""
    for _, _, snap in statuses.values():
        if snap is not None:
            for g in snap.gpus:
                if gpu_label(g, "pod") or gpu_label(g, "job"):
                    return True
    return False


def _labels_of(gpu) -> tuple[str | None, str | None, str | None, str | None]:
    return (
        gpu_label(gpu, "pod"),
        gpu_label(gpu, "namespace"),
        gpu_label(gpu, "container"),
        gpu_label(gpu, "job"),
    )


_NO_LABELS = (None, None, None, None)


def build_fleet(
    statuses: dict, per_gpu_estimate: tuple[int, ...] = (), by: str = "host"
) -> list[FleetGroup]:
    """`statuses`: host -> (state, reason, snapshot) as FeedRunner.statuses() gives them.
    `per_gpu_estimate`: the spec's bytes per GPU index at the stage compared against (GPU i of
    every host against entry i; an index beyond it has no estimate). `by`: "host", or "pod"
    (by pod, else by job label; GPUs with neither stay grouped by host). Returns the groups in
    risk order. One pass over the GPUs; label fields are read only from sample types that
    have them."""
    n_est = len(per_gpu_estimate)
    labelled: dict[type, bool] = {}
    acc: dict[str, dict] = {}
    for host, (state, reason, snap) in statuses.items():
        stale = _stale_reason(state, reason, snap)
        gpus = snap.gpus if snap is not None and not snap.error else ()
        if not gpus:
            g = acc.setdefault(f"host:{host}", {"label": host, "kind": "host", "gpus": []})
            g.setdefault("hosts", {})[host] = stale
            continue
        host_key = f"host:{host}"
        for gs in gpus:
            cls = type(gs)
            has = labelled.get(cls)
            if has is None:
                has = labelled[cls] = any(
                    hasattr(gs, f) for f in ("pod", "namespace", "container", "job")
                )
            labels = _labels_of(gs) if has else _NO_LABELS
            pod, ns, _, job = labels
            if by == "pod" and pod:
                label = f"{ns}/{pod}" if ns else pod
                key, kind = f"pod:{label}", "pod"
            elif by == "pod" and job:
                label, key, kind = f"job {job}", f"job:{job}", "job"
            else:
                label, key, kind = host, host_key, "host"
            g = acc.get(key)
            if g is None:
                g = acc[key] = {"label": label, "kind": kind, "gpus": [], "hosts": {}}
            g["hosts"][host] = stale
            used, total, index = gs.used_bytes, gs.total_bytes, gs.index
            est = per_gpu_estimate[index] if 0 <= index < n_est else None
            g["gpus"].append(
                FleetGpu(
                    host,
                    index,
                    gs.name,
                    used,
                    total,
                    est,
                    used - est if used is not None and est is not None else None,
                    used / total if used is not None and total else None,
                    *labels,
                )
            )
    groups = [_summarise(key, g) for key, g in acc.items()]
    groups.sort(key=FleetGroup.risk_key)
    return groups


def _summarise(key: str, g: dict) -> FleetGroup:
    gpus: list[FleetGpu] = g["gpus"]
    used = [x.used_bytes for x in gpus if x.used_bytes is not None]
    total = [x.total_bytes for x in gpus if x.total_bytes is not None]
    margins = [x for x in gpus if x.margin_bytes is not None]
    over = max(margins, key=lambda x: x.margin_bytes) if margins else None
    if over is not None and over.margin_bytes > 0:
        worst = over
    else:
        known = [x for x in gpus if x.fraction is not None]
        worst = max(known, key=lambda x: x.fraction) if known else over
    hosts = g["hosts"]
    reasons = [f"{h}: {r}" if len(hosts) > 1 else r for h, r in hosts.items() if r]
    words = {g["label"], *hosts}
    for x in gpus:
        if x.pod or x.namespace or x.container or x.job:
            words.update(w for w in (x.pod, x.namespace, x.container, x.job) if w)
    return FleetGroup(
        key=key,
        label=g["label"],
        kind=g["kind"],
        hosts=tuple(hosts),
        gpus=tuple(gpus if len(hosts) == 1 else sorted(gpus, key=lambda x: (x.host, x.index))),
        used_bytes=sum(used) if used else None,
        total_bytes=sum(total) if total else None,
        worst=worst,
        over_bytes=over.margin_bytes if over is not None else None,
        stale_reason="; ".join(reasons) if reasons else None,
        search_text="\n".join(sorted(words)).lower(),
    )


def filter_groups(groups: list[FleetGroup], text: str) -> list[FleetGroup]:
    """The groups whose label, hosts, pods, namespaces, containers or jobs contain `text` (any case); all of
    them for an empty filter. Order is kept."""
    needle = text.strip().lower()
    if not needle:
        return groups
    return [g for g in groups if needle in g.search_text]


__all__ = [
    "GROUP_ABOVE_HOSTS",
    "FleetGpu",
    "FleetGroup",
    "build_fleet",
    "filter_groups",
    "gpu_label",
    "has_pod_labels",
]
