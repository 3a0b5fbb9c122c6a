"""GPUs and rental offers: load the built-in catalogue, validate it, merge the user's overlay.

The built-in catalogue lives in `catalog/gpus/` and `catalog/offers/` (see docs/catalog-gpus.md
and docs/catalog-offers.md). A user adds or overrides entries (same id) in a directory with the
same layout: `--catalog DIR`, or `<platformdirs user config dir>/vramtui/catalog`. A broken user
file is reported by name and key and skipped; the rest still loads.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from vramtui.errors import CatalogError, UnitsError
from vramtui.fsutil import is_dir, user_path
from vramtui.paths import builtin_catalog_dir
from vramtui.safe_text import safe_line, safe_text
from vramtui.units import parse_bytes

VENDORS = ("nvidia", "amd")
ARCHITECTURES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3")
INTERCONNECTS = ("pcie", "nvlink", "sxm", "infinity-fabric")
FORM_FACTORS = ("pcie", "sxm", "oam", "nvl")
HW_FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8", "int4")
PLAN_KINDS = ("hourly", "daily", "multi_day", "monthly")
CAPACITY_QUANTITIES = ("nominal", "nvml_total", "cuda_total")

GPU_KEYS = {
    "id",
    "name",
    "vendor",
    "architecture",
    "compute_capability",
    "memory_type",
    "form_factor",
    "interconnects",
    "formats",
    "aliases",
    "nvml_names",
    "spec_sheet",
    "memory",
    "notes",
}
OFFER_KEYS = {
    "id",
    "provider",
    "title",
    "gpu",
    "gpu_count",
    "interconnect",
    "host_ram_gb",
    "vcpus",
    "disk_gb",
    "region",
    "software",
    "plans",
    "schedule",
    "evidence",
    "notes",
    "seen_on",
}


@dataclass(frozen=True)
class CapacityFigure:
    """One capacity figure of a card, with where it comes from."""

    quantity: str  # nominal | nvml_total | cuda_total
    bytes: int
    as_written: str
    source: str
    verified: bool


@dataclass(frozen=True)
class Gpu:
    id: str
    name: str
    vendor: str
    architecture: str
    compute_capability: tuple[int, int] | None
    memory_type: str
    form_factor: str
    interconnects: tuple[str, ...]
    formats: tuple[str, ...]
    aliases: tuple[str, ...]
    nvml_names: tuple[str, ...]
    bandwidth_gb_per_s: float | None
    spec_source: str
    nominal: CapacityFigure
    nvml_total: CapacityFigure | None
    cuda_total: CapacityFigure | None
    notes: str
    file: str

    @property
    def nominal_gb(self) -> float:
        return self.nominal.bytes / 1e9

    def usable(self) -> CapacityFigure:
        """The best figure for what a process can allocate: the CUDA total when known (what
        PyTorch reports as total capacity), else the NVML total, else the nominal size."""
        return self.cuda_total or self.nvml_total or self.nominal


@dataclass(frozen=True)
class Plan:
    name: str
    kind: str
    hours: float
    price: float
    currency: str


@dataclass(frozen=True)
class Schedule:
    lead_time_hours: float | None = None
    available_from: datetime.date | None = None
    available_until: datetime.date | None = None
    note: str = ""


@dataclass(frozen=True)
class Evidence:
    claim: str
    source: str
    version: str
    scope: str
    date: datetime.date | None = None


@dataclass(frozen=True)
class Software:
    image: str | None = None
    driver: str | None = None
    cuda: str | None = None


@dataclass(frozen=True)
class Offer:
    id: str
    provider: str
    title: str
    gpu: str
    gpu_count: int
    interconnect: str | None  # None: not documented
    host_ram_gb: float | None
    vcpus: int | None
    disk_gb: float | None
    region: str | None
    software: Software | None
    plans: tuple[Plan, ...]
    schedule: Schedule | None
    evidence: tuple[Evidence, ...]
    notes: str
    file: str
    seen_on: datetime.date | None = None  # when the plans' prices were seen (None: not said)


@dataclass(frozen=True)
class Catalog:
    gpus: dict[str, Gpu]
    offers: dict[str, Offer]
    problems: tuple[str, ...] = ()  # one line per user file that could not be loaded
    user_dir: str | None = None
    # The age past which a price is flagged "price to re-check" (config price_max_age_days);
    # None: vramtui.price_age.DEFAULT_PRICE_MAX_AGE_DAYS.
    price_max_age_days: float | None = None

    def gpu_for(self, offer: Offer) -> Gpu:
        return self.gpus[offer.gpu]


# ------------------------------------------------------------------------------------ reading


class _Reader:
    """Typed access to one table of one file, raising CatalogError naming file and key."""

    def __init__(self, data: dict, path: Path, prefix: str = ""):
        self.data, self.path, self.prefix = data, path, prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def fail(self, name: str, problem: str, fix: str) -> CatalogError:
        return CatalogError(safe_line(f"{self.path.name}: {self.key(name)} {problem}; {fix}"))

    def check_keys(self, allowed: set[str]) -> None:
        for k in self.data:
            if k not in allowed:
                raise self.fail(k, "is not a known key", f"use only {', '.join(sorted(allowed))}")

    def get(self, name: str, types, what: str, required: bool = True, default=None):
        if name not in self.data:
            if required:
                raise self.fail(name, "is missing", f"add {self.key(name)} ({what})")
            return default
        value = self.data[name]
        if isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,)
        ):
            raise self.fail(name, f"must be {what}, got {value!r}", "fix its value")
        if not isinstance(value, types):
            raise self.fail(name, f"must be {what}, got {value!r}", "fix its value")
        return value

    def string(
        self, name: str, required: bool = True, default=None, multiline: bool = False
    ) -> str | None:
        """A string with its control characters made visible (`vramtui.safe_text`)."""
        value = self.get(name, str, "a string", required, default)
        if value is not None and required and not value.strip():
            raise self.fail(name, "is empty", "write a value")
        if value is None:
            return value
        return safe_text(value) if multiline else safe_line(value)

    def choice(self, name: str, choices, required: bool = True) -> str | None:
        value = self.string(name, required)
        if value is not None and value not in choices:
            raise self.fail(name, f"is {value!r}", f"use one of {', '.join(choices)}")
        return value

    def number(self, name: str, required: bool = True, minimum: float | None = 0):
        value = self.get(name, (int, float), "a number", required)
        if value is not None and minimum is not None and value < minimum:
            raise self.fail(name, f"is {value}", f"it must be >= {minimum}")
        return value

    def strings(self, name: str, choices=None, required: bool = True) -> tuple[str, ...]:
        value = self.get(name, list, "a list of strings", required, [])
        for v in value:
            if not isinstance(v, str) or (choices and v not in choices):
                allowed = f"one of {', '.join(choices)}" if choices else "strings"
                raise self.fail(name, f"holds {v!r}", f"use {allowed}")
        return tuple(safe_line(v) for v in value)

    def date(self, name: str) -> datetime.date | None:
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, datetime.date) or isinstance(value, datetime.datetime):
            raise self.fail(
                name, f"must be a TOML date such as 2026-12-01, got {value!r}", "fix its value"
            )
        return value

    def table(self, name: str, required: bool = True) -> _Reader | None:
        value = self.get(name, dict, "a table", required)
        return None if value is None else _Reader(value, self.path, f"{self.key(name)}.")

    def tables(self, name: str, required: bool = True) -> list[_Reader]:
        value = self.get(name, list, "an array of tables", required, [])
        if required and not value:
            raise self.fail(name, "is empty", f"add at least one [[{self.key(name)}]] table")
        out = []
        for i, v in enumerate(value):
            if not isinstance(v, dict):
                raise self.fail(name, f"entry {i} is not a table", f"write [[{self.key(name)}]]")
            out.append(_Reader(v, self.path, f"{self.key(name)}[{i}]."))
        return out


MAX_CATALOG_FILE_BYTES = 1 * 2**20  # one GPU or offer: a few hundred bytes of TOML


def _read_toml(path: Path) -> dict:
    """One catalogue file; any problem (unreadable, not UTF-8, malformed, too large or deeply
    nested) is a CatalogError starting with the file's name."""
    from vramtui.guarded_read import read_toml

    return read_toml(
        path,
        error=CatalogError,
        what="catalogue file",
        source=path.name,
        cap=MAX_CATALOG_FILE_BYTES,
        fix="fix or remove that file",
    )


def _figure(r: _Reader, quantity: str, required: bool) -> CapacityFigure | None:
    t = r.table(quantity, required)
    if t is None:
        return None
    t.check_keys({"value", "source", "verified", "note"})
    as_written = t.string("value")
    try:
        n = parse_bytes(as_written)
    except UnitsError as exc:
        raise t.fail("value", f"cannot be read ({exc})", 'write e.g. "24564 MiB"') from None
    source = t.string("source", required=False) or ""
    verified = bool(t.get("verified", bool, "true or false", required=False, default=False))
    # A figure without a source is never verified.
    return CapacityFigure(quantity, n, as_written, source, verified and bool(source.strip()))


def parse_gpu(data: dict, path: Path) -> Gpu:
    r = _Reader(data, path)
    r.check_keys(GPU_KEYS)
    gid = r.string("id")
    if path.stem != gid:
        raise r.fail("id", f"is {gid!r} but the file is {path.name}", f"name the file {gid}.toml")
    vendor = r.choice("vendor", VENDORS)
    cc_text = r.string("compute_capability", required=vendor == "nvidia")
    cc = None
    if cc_text is not None:
        try:
            major, minor = (int(x) for x in cc_text.split("."))
            cc = (major, minor)
        except ValueError:
            raise r.fail("compute_capability", f"is {cc_text!r}", 'write e.g. "8.9"') from None
    sheet = r.table("spec_sheet")
    sheet.check_keys({"source", "bandwidth_gb_per_s", "tdp_w", "note"})
    memory = r.table("memory")
    memory.check_keys(set(CAPACITY_QUANTITIES))
    return Gpu(
        id=gid,
        name=r.string("name"),
        vendor=vendor,
        architecture=r.choice("architecture", ARCHITECTURES),
        compute_capability=cc,
        memory_type=r.string("memory_type"),
        form_factor=r.choice("form_factor", FORM_FACTORS),
        interconnects=r.strings("interconnects", INTERCONNECTS),
        formats=r.strings("formats", HW_FORMATS),
        aliases=tuple(a.lower() for a in r.strings("aliases", required=False)),
        nvml_names=r.strings("nvml_names", required=False),
        bandwidth_gb_per_s=sheet.number("bandwidth_gb_per_s", required=False),
        spec_source=sheet.string("source"),
        nominal=_figure(memory, "nominal", True),
        nvml_total=_figure(memory, "nvml_total", False),
        cuda_total=_figure(memory, "cuda_total", False),
        notes=r.string("notes", required=False, multiline=True) or "",
        file=path.name,
    )


def parse_offer(data: dict, path: Path, gpu_ids) -> Offer:
    r = _Reader(data, path)
    r.check_keys(OFFER_KEYS)
    oid = r.string("id")
    if path.stem != oid:
        raise r.fail("id", f"is {oid!r} but the file is {path.name}", f"name the file {oid}.toml")
    gpu = r.string("gpu")
    if gpu not in gpu_ids:
        raise r.fail("gpu", f"names unknown GPU {gpu!r}", "use an id from catalog/gpus/")
    count = r.get("gpu_count", int, "an integer")
    if count < 1:
        raise r.fail("gpu_count", f"is {count}", "it must be >= 1")
    plans = []
    for p in r.tables("plans"):
        p.check_keys({"name", "kind", "hours", "price", "currency"})
        hours = p.number("hours")
        if hours <= 0:
            raise p.fail("hours", f"is {hours}", "a plan covers a positive number of hours")
        currency = p.string("currency")
        if len(currency) != 3 or not currency.isupper():
            raise p.fail("currency", f"is {currency!r}", 'use an ISO code such as "USD"')
        plans.append(
            Plan(
                p.string("name"),
                p.choice("kind", PLAN_KINDS),
                float(hours),
                float(p.number("price")),
                currency,
            )
        )
    schedule = None
    s = r.table("schedule", required=False)
    if s is not None:
        s.check_keys({"lead_time_hours", "available_from", "available_until", "note"})
        schedule = Schedule(
            lead_time_hours=s.number("lead_time_hours", required=False),
            available_from=s.date("available_from"),
            available_until=s.date("available_until"),
            note=s.string("note", required=False, multiline=True) or "",
        )
    currencies = sorted({p.currency for p in plans})
    if len(currencies) > 1:
        raise r.fail(
            "plans",
            f"mix currencies ({', '.join(currencies)})",
            "split them into one offer per currency",
        )
    evidence = []
    for e in r.tables("evidence"):
        e.check_keys({"claim", "source", "version", "scope", "date"})
        evidence.append(
            Evidence(
                e.string("claim"),
                e.string("source"),
                e.string("version"),
                e.string("scope"),
                e.date("date"),
            )
        )
    software = None
    sw = r.table("software", required=False)
    if sw is not None:
        sw.check_keys({"image", "driver", "cuda"})
        software = Software(
            sw.string("image", False), sw.string("driver", False), sw.string("cuda", False)
        )
    interconnect = r.choice("interconnect", INTERCONNECTS, required=False)
    if interconnect is not None and interconnect not in gpu_ids[gpu].interconnects:
        raise r.fail(
            "interconnect",
            f"is {interconnect!r} but {gpu} links by {', '.join(gpu_ids[gpu].interconnects)}",
            "fix one of the two",
        )
    return Offer(
        id=oid,
        provider=r.string("provider"),
        title=r.string("title"),
        gpu=gpu,
        gpu_count=count,
        interconnect=interconnect,
        host_ram_gb=r.number("host_ram_gb", required=False),
        vcpus=r.get("vcpus", int, "an integer", required=False),
        disk_gb=r.number("disk_gb", required=False),
        region=r.string("region", required=False),
        software=software,
        plans=tuple(plans),
        schedule=schedule,
        evidence=tuple(evidence),
        notes=r.string("notes", required=False, multiline=True) or "",
        file=path.name,
        seen_on=r.date("seen_on"),
    )


# ------------------------------------------------------------------------------------ loading


def user_catalog_dir() -> Path:
    """`<user config dir>/vramtui/catalog` (VRAMTUI_CONFIG_DIR overrides the config dir)."""
    override = os.environ.get("VRAMTUI_CONFIG_DIR")
    if override:
        return Path(override) / "catalog"
    from platformdirs import user_config_dir

    return Path(user_config_dir("vramtui")) / "catalog"


@lru_cache(maxsize=4)
def _builtin() -> tuple[dict[str, Gpu], dict[str, Offer]]:
    root = builtin_catalog_dir()
    gpus = {}
    for path in sorted((root / "gpus").glob("*.toml")):
        g = parse_gpu(_read_toml(path), path)
        gpus[g.id] = g
    offers = {}
    for path in sorted((root / "offers").glob("*.toml")):
        o = parse_offer(_read_toml(path), path, gpus)
        offers[o.id] = o
    return gpus, offers


def load_catalog(user_dir: Path | str | None = None, use_user_config: bool = True) -> Catalog:
    """Built-in GPUs and offers, overlaid by the user's directory (same id overrides).

    A problem in a built-in file raises CatalogError; a problem in a user file is collected in
    `Catalog.problems` (one line naming the file and key) and that file is skipped.
    """
    gpus, offers = (dict(x) for x in _builtin())
    directory = (
        user_path(user_dir)
        if user_dir
        else (user_catalog_dir() if use_user_config else None)
    )
    problems: list[str] = []
    if user_dir and not is_dir(directory):
        problems.append(f"catalogue directory {directory} does not exist; built-ins only")
        directory = None
    if directory is not None and is_dir(directory):
        for path in sorted((directory / "gpus").glob("*.toml")):
            try:
                g = parse_gpu(_read_toml(path), path)
                gpus[g.id] = g
            except CatalogError as exc:
                problems.append(_problem_line(path, exc))
        for path in sorted((directory / "offers").glob("*.toml")):
            try:
                o = parse_offer(_read_toml(path), path, gpus)
                offers[o.id] = o
            except CatalogError as exc:
                problems.append(_problem_line(path, exc))
    return Catalog(
        gpus=gpus,
        offers=offers,
        problems=tuple(safe_line(p) for p in problems),
        user_dir=str(directory) if directory else None,
    )


def _problem_line(path: Path, exc: CatalogError) -> str:
    """The warning for a skipped user file: its full path, then the problem."""
    text = str(exc)
    if text.startswith((f"{path.name}:", f"{path.name} ")):
        return f"{path.parent}/{text}"
    return f"{path}: {text}"


def find_gpu(catalog: Catalog, name: str) -> Gpu | None:
    """A GPU by id, alias or NVML name (case-insensitive)."""
    key = name.strip().lower()
    for g in catalog.gpus.values():
        if key == g.id or key in g.aliases or key in (n.lower() for n in g.nvml_names):
            return g
    return None


def describe_figure(f: CapacityFigure) -> dict[str, Any]:
    return {
        "quantity": f.quantity,
        "bytes": f.bytes,
        "as_written": f.as_written,
        "source": f.source,
        "verified": f.verified,
    }
