"""Where the Prometheus feed reads from, how it authenticates, and the names it reads.

The metric and label names default to those of NVIDIA dcgm-exporter: the framebuffer family
`DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE` and `DCGM_FI_DEV_FB_RESERVED` (MiB) of its default
counters file (etc/default-counters.csv in github.com/NVIDIA/dcgm-exporter), with the labels its
exporter puts on every GPU series: `gpu` (the index), `UUID`, `device` (nvidia0), `modelName`,
`Hostname` (renamed `hostname` in dcgm-exporter 4.x after May 2026, so both are looked up), and
`pod`, `namespace`, `container` when Kubernetes attribution is on. A deployment that renames any
of them says so in the config file:

    [prometheus]
    url = "https://prometheus.example:9090"
    match = 'cluster="a"'
    stale_after = 90                     # seconds; default max(3 x interval, 90)
    bearer_token_file = "~/.config/vramtui/prom-token"
    basic_auth_username = "me"           # the password: basic_auth_password_file or env
    basic_auth_password_file = "~/.config/vramtui/prom-password"
    ca_file = "/etc/ssl/my-ca.pem"
    cert_file = "client.pem"             # with key_file: a TLS client certificate
    key_file = "client.key"
    insecure_skip_verify = false
    [prometheus.metrics]
    fb_used = "DCGM_FI_DEV_FB_USED"
    [prometheus.labels]
    host = ["Hostname", "hostname", "instance"]   # the first one present names the host
    pod = "exported_pod"                 # kube-prometheus renames clashing target labels

The option names are those of Prometheus's own HTTP client configuration (`bearer_token_file`,
`basic_auth`, `tls_config.ca_file`/`cert_file`/`key_file`/`insecure_skip_verify`). Secrets never
go on the command line: the token and password come from files, or from the environment
(VRAMTUI_PROMETHEUS_BEARER_TOKEN, VRAMTUI_PROMETHEUS_USERNAME, VRAMTUI_PROMETHEUS_PASSWORD).
"""

from __future__ import annotations

import math
import os
import re
import urllib.parse
from dataclasses import dataclass, field

from vramtui.feed.sample import FeedError

DEFAULT_METRICS = {
    "fb_used": "DCGM_FI_DEV_FB_USED",
    "fb_free": "DCGM_FI_DEV_FB_FREE",
    "fb_reserved": "DCGM_FI_DEV_FB_RESERVED",
}
DEFAULT_LABELS: dict[str, tuple[str, ...]] = {
    "host": ("Hostname", "hostname", "instance"),
    "gpu": ("gpu",),
    "uuid": ("UUID", "uuid"),
    "device": ("device",),
    "model": ("modelName",),
    "pod": ("pod",),
    "namespace": ("namespace",),
    "container": ("container",),
    "driver": ("DCGM_FI_DRIVER_VERSION",),
    "mig_instance": ("GPU_I_ID",),
}
MIN_STALE_AFTER = 90.0  # seconds: three scrapes at the 30 s interval many clusters use
STALE_FACTOR = 3.0
MAX_MATCH_CHARS = 2000
MAX_MATCHERS = 20
MAX_URL_CHARS = 2000
MAX_SECRET_BYTES = 64 * 1024

ENV_TOKEN = "VRAMTUI_PROMETHEUS_BEARER_TOKEN"
ENV_USER = "VRAMTUI_PROMETHEUS_USERNAME"
ENV_PASSWORD = "VRAMTUI_PROMETHEUS_PASSWORD"

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')
_KNOWN_KEYS = {
    "url",
    "match",
    "stale_after",
    "bearer_token_file",
    "basic_auth_username",
    "basic_auth_password_file",
    "ca_file",
    "cert_file",
    "key_file",
    "insecure_skip_verify",
    "metrics",
    "labels",
}


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str  # unescaped

    def promql(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'{self.label}{self.op}"{escaped}"'


def parse_match(text: str | None) -> tuple[Matcher, ...]:
    """`LABEL="value",LABEL=~"re",...` (PromQL label matchers, braces optional) as Matchers.

    FeedError (one line) on anything else: the selector is rebuilt from the parts, so nothing
    the user typed reaches the query unparsed."""
    if text is None:
        return ()
    if not isinstance(text, str):
        raise FeedError("--match must be a string of label matchers such as 'namespace=\"a\"'")
    if len(text) > MAX_MATCH_CHARS:
        raise FeedError(f"--match is longer than {MAX_MATCH_CHARS} characters; shorten it")
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out: list[Matcher] = []
    pos = 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if not m:
            rest = body[pos:].strip()
            shown = rest if len(rest) <= 40 else rest[:37] + "..."
            raise FeedError(
                f"--match: cannot read {shown!r}: write label matchers as "
                'LABEL="value" (or !=, =~, !~), separated by commas'
            )
        value = re.sub(r"\\(.)", lambda g: {"n": "\n"}.get(g.group(1), g.group(1)), m.group(3))
        if any(ord(c) < 32 and c != "\n" for c in value):
            raise FeedError(f"--match: the value of {m.group(1)} holds a control character")
        out.append(Matcher(m.group(1), m.group(2), value))
        pos = m.end()
        if pos < len(body):
            if body[pos] != ",":
                raise FeedError("--match: separate the label matchers with commas")
            pos += 1
    if len(out) > MAX_MATCHERS:
        raise FeedError(f"--match holds more than {MAX_MATCHERS} label matchers; use fewer")
    return tuple(out)


def check_url(text: str) -> str:
    """The Prometheus base URL (http or https, no credentials, no query), without a final /."""
    if not isinstance(text, str) or not text.strip():
        raise FeedError("--prometheus needs a URL such as http://127.0.0.1:9090")
    text = text.strip()
    if len(text) > MAX_URL_CHARS:
        raise FeedError(f"--prometheus URL is longer than {MAX_URL_CHARS} characters")
    if any(ord(c) < 33 or ord(c) == 127 for c in text):
        raise FeedError("--prometheus URL must not contain spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise FeedError(f"--prometheus URL {text[:80]!r} cannot be read ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FeedError(
            f"--prometheus URL {text[:80]!r} must start with http:// or https:// and name a host"
        )
    if parts.username is not None or parts.password is not None:
        raise FeedError(
            "--prometheus URL must not hold a user or password (other users can read a "
            f"command line): set {ENV_USER} and {ENV_PASSWORD}, or basic_auth_* in the config"
        )
    if parts.query or parts.fragment:
        raise FeedError("--prometheus URL must not hold a query (?...) or fragment (#...)")
    del port
    return text.rstrip("/")


def _check_name(kind: str, value, where: str) -> str:
    pattern = _METRIC_NAME if kind == "metric" else _LABEL_NAME
    if not isinstance(value, str) or not pattern.match(value) or len(value) > 200:
        shown = repr(value)[:60]
        raise FeedError(
            f"{where}: {shown} is not a Prometheus {kind} name (letters, digits and _"
            + (" and :" if kind == "metric" else "")
            + ", not starting with a digit)"
        )
    return value


@dataclass(frozen=True)
class PrometheusSettings:
    url: str
    matchers: tuple[Matcher, ...] = ()
    interval: float = 1.0
    stale_after: float = MIN_STALE_AFTER
    metrics: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_METRICS))
    labels: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_LABELS))
    bearer_token_file: str | None = None
    basic_auth_username: str | None = None
    basic_auth_password_file: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False

    @property
    def selector(self) -> str:
        return ",".join(m.promql() for m in self.matchers)

    def label(self) -> str:
        where = self.url + (f" {{{self.selector}}}" if self.matchers else "")
        return f"Prometheus {where}, every {self.interval:g} s"

    def headers(self) -> dict[str, str]:
        """The Authorization header (bearer token or basic auth), read now from files or env."""
        import base64

        token = None
        if self.bearer_token_file:
            token = _read_secret(self.bearer_token_file, "bearer_token_file")
        elif os.environ.get(ENV_TOKEN):
            token = os.environ[ENV_TOKEN].strip()
        user = self.basic_auth_username or os.environ.get(ENV_USER)
        if token and user:
            raise FeedError(
                "both a bearer token and basic auth are set for Prometheus: keep one of them"
            )
        if token:
            _check_header_text(token, "the bearer token")
            return {"Authorization": f"Bearer {token}"}
        if user:
            if self.basic_auth_password_file:
                password = _read_secret(self.basic_auth_password_file, "basic_auth_password_file")
            else:
                password = os.environ.get(ENV_PASSWORD, "")
            _check_header_text(user + password, "the basic-auth user or password")
            raw = f"{user}:{password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(raw).decode("ascii")}
        return {}


def _check_header_text(text: str, what: str) -> None:
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise FeedError(f"{what} holds a control character (a line break?): fix the file or env")


def _read_secret(path: str, what: str) -> str:
    from vramtui.fsutil import user_path

    p = user_path(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise FeedError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    if len(raw) > MAX_SECRET_BYTES:
        raise FeedError(f"{what} {p} is larger than {MAX_SECRET_BYTES // 1024} KiB: not a secret")
    try:
        return raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise FeedError(f"{what} {p} is not UTF-8 text") from None


def _names(table, defaults, kind: str, where: str, multi: bool) -> dict:
    out = dict(defaults)
    if table is None:
        return out
    if not isinstance(table, dict):
        raise FeedError(f'{where} must be a table of name = "{kind} name"')
    for key, value in table.items():
        if key not in defaults:
            raise FeedError(f"{where}.{key} is not known; known: {', '.join(defaults)}")
        if multi:
            values = value if isinstance(value, list) else [value]
            if not values or len(values) > 8:
                raise FeedError(f"{where}.{key}: give one to eight {kind} names")
            out[key] = tuple(_check_name(kind, v, f"{where}.{key}") for v in values)
        else:
            out[key] = _check_name(kind, value, f"{where}.{key}")
    return out


def _seconds(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FeedError(f"{where} must be a number of seconds")
    if not 1 <= value <= 86400:
        raise FeedError(f"{where} must be between 1 and 86400 seconds, got {value:g}")
    return float(value)


def settings_from(args, table: dict | None) -> PrometheusSettings:
    """The settings from `vramtui watch --prometheus ...` over the config's [prometheus] table."""
    table = dict(table or {})
    where = "config [prometheus]"
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise FeedError(
            f"{where}: unknown key {unknown[0]!r}; known: {', '.join(sorted(_KNOWN_KEYS))}"
        )
    url = getattr(args, "prometheus", None) or table.get("url")
    url = check_url(url)
    match = getattr(args, "match", None)
    if match is None:
        match = table.get("match")
    matchers = parse_match(match)
    interval = float(getattr(args, "interval", 1.0) or 1.0)
    stale = getattr(args, "stale_after", None)
    if stale is not None:
        stale_after = _seconds(stale, "--stale-after")
    elif "stale_after" in table:
        stale_after = _seconds(table["stale_after"], f"{where}.stale_after")
    else:
        stale_after = max(STALE_FACTOR * interval, MIN_STALE_AFTER)

    def text(key: str, flag: str | None = None) -> str | None:
        value = getattr(args, flag, None) if flag else None
        if value is None:
            value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise FeedError(f"{where}.{key} must be a non-empty string")
        return value

    insecure = bool(getattr(args, "insecure_skip_verify", False)) or table.get(
        "insecure_skip_verify", False
    )
    if not isinstance(insecure, bool):
        raise FeedError(f"{where}.insecure_skip_verify must be true or false")
    settings = PrometheusSettings(
        url=url,
        matchers=matchers,
        interval=interval,
        stale_after=stale_after,
        metrics=_names(table.get("metrics"), DEFAULT_METRICS, "metric", f"{where}.metrics", False),
        labels=_names(table.get("labels"), DEFAULT_LABELS, "label", f"{where}.labels", True),
        bearer_token_file=text("bearer_token_file", "bearer_token_file"),
        basic_auth_username=text("basic_auth_username", "basic_auth_user"),
        basic_auth_password_file=text("basic_auth_password_file", "basic_auth_password_file"),
        ca_file=text("ca_file", "ca_file"),
        cert_file=text("cert_file", "cert_file"),
        key_file=text("key_file", "key_file"),
        insecure_skip_verify=insecure,
    )
    if settings.key_file and not settings.cert_file:
        raise FeedError("key_file goes with cert_file (a TLS client certificate and its key)")
    settings.headers()  # a missing token file is said now, not on the first poll
    return settings
