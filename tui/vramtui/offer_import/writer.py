"""An imported offer as an offer TOML file (docs/catalog-offers.md), with a stable id.

The id is made of the provider, the catalogue GPU id, the card count, the region and the
interconnect (`lambda-a100-40gb-sxm-x1`, `vast-ai-rtx-4090-x1-texas-us`): importing the same
offers again writes the same files, replacing them instead of adding copies. Ids hold only
`a-z 0-9 -` and are at most MAX_ID_CHARS long (a long provider or region is cut and a short
hash of the whole key keeps the id unique), so a file name can never leave the offers
directory. Every file is checked by the catalogue's own reader before it is written, and
written atomically (`vramtui.fsutil`).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from vramtui.offer_import.rows import ImportedOffer

MAX_ID_CHARS = 96
_PART_CHARS = 32  # provider and region, each, in the id


def slug(text: str, limit: int = _PART_CHARS) -> str:
    """`text` as `a-z 0-9 -`, at most `limit` characters (may be empty)."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].strip("-")


def offer_key(o: ImportedOffer) -> tuple:
    """What makes two imported rows the same offer."""
    return (o.provider.lower(), o.gpu, o.gpu_count, (o.region or "").lower(), o.interconnect)


def offer_id(o: ImportedOffer) -> str:
    """The stable id of an imported offer."""
    provider = slug(o.provider) or "provider"
    parts = [provider, o.gpu, f"x{o.gpu_count}"]
    if o.region:
        parts.append(slug(o.region) or "region")
    if o.interconnect:
        parts.append(o.interconnect)
    oid = "-".join(p for p in parts if p)
    whole = slug(o.provider, 10**6) == provider and (
        not o.region or slug(o.region, 10**6) == parts[3]
    )
    if not whole or len(oid) > MAX_ID_CHARS:
        digest = hashlib.sha256(repr(offer_key(o)).encode("utf-8", "replace")).hexdigest()[:8]
        oid = f"{oid[: MAX_ID_CHARS - 9].rstrip('-')}-{digest}"
    return oid


def offer_document(o: ImportedOffer, oid: str, source_file: str) -> str:
    """The offer file's text: a comment saying where it came from, then the offer."""
    import tomlkit

    title = o.title or f"{o.gpu_count} x {o.gpu_as_written}"
    source = o.source_url or f"{source_file} (imported; the row gave no source_url)"
    price_claim = o.price_line()
    claim = f"{o.gpu_count} x {o.gpu_as_written} ({o.gpu}), {price_claim}"
    documented = [
        x
        for x, v in (
            ("region", o.region),
            ("interconnect", o.interconnect),
            ("disk", o.disk_gb),
            ("host RAM", o.host_ram_gb),
            ("vCPUs", o.vcpus),
        )
        if v is not None
    ]
    scope = (
        "card, count and price"
        + (f", {', '.join(documented)}" if documented else "")
        + f" as seen on {o.seen_on.isoformat()}; availability, image and lead time not documented"
    )
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"Imported by `vramtui offers import` from {_one_line(source_file)}."))
    doc.add(tomlkit.comment("Importing the same offer again replaces this file."))
    doc["id"] = oid
    doc["provider"] = o.provider
    doc["title"] = title
    doc["gpu"] = o.gpu
    doc["gpu_count"] = o.gpu_count
    if o.interconnect:
        doc["interconnect"] = o.interconnect
    if o.host_ram_gb is not None:
        doc["host_ram_gb"] = _num(o.host_ram_gb)
    if o.vcpus is not None:
        doc["vcpus"] = o.vcpus
    if o.disk_gb is not None:
        doc["disk_gb"] = _num(o.disk_gb)
    if o.region:
        doc["region"] = o.region
    doc["seen_on"] = o.seen_on
    if o.notes:
        doc["notes"] = o.notes
    plans = tomlkit.aot()
    plan = tomlkit.table()
    plan["name"] = {
        "hour": "on demand",
        "second": "on demand (billed per second)",
        "minute": "on demand (billed per minute)",
    }.get(o.billing_unit, o.billing_unit)
    plan["kind"] = o.plan_kind
    plan["hours"] = _num(o.plan_hours)
    plan["price"] = round(o.plan_price, 6)
    plan["currency"] = o.currency
    plans.append(plan)
    doc["plans"] = plans
    evidence = tomlkit.aot()
    ev = tomlkit.table()
    ev["claim"] = claim
    ev["source"] = source
    ev["version"] = f"as seen on {o.seen_on.isoformat()}"
    ev["scope"] = scope
    ev["date"] = o.seen_on
    evidence.append(ev)
    doc["evidence"] = evidence
    return tomlkit.dumps(doc)


def _num(x: float):
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def _one_line(text: str) -> str:
    from vramtui.safe_text import safe_line

    return safe_line(text)[:300]


def check_document(text: str, oid: str, gpus: dict) -> None:
    """Read `text` back as the catalogue will; CatalogError if it would not load."""
    from vramtui.catalog import parse_offer
    from vramtui.errors import CatalogError
    from vramtui.guarded_read import parse_toml

    data = parse_toml(text, error=CatalogError, source=f"{oid}.toml")
    parse_offer(data, Path(f"{oid}.toml"), gpus)


def write_offer(directory: Path, oid: str, text: str) -> Path:
    from vramtui.fsutil import atomic_write_text

    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{oid}.toml"
    atomic_write_text(target, text)
    return target
