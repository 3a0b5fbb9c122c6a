"""Adapters: the JSON a provider's own CLI or public API returns -> rows of the import schema.

Fetching stays the user's step: save the response to a file, then
`vramtui offers import FILE`. Each adapter reads only the fields its provider documents, and
leaves out what the response does not say (an absent field is "not documented", never zero).

lambda -- Lambda Cloud API, `GET https://cloud.lambda.ai/api/v1/instance-types`, "List available
    instance types" (API reference https://docs-api.lambda.ai/api/cloud, OpenAPI document
    1.10.0: schemas `InstanceTypes`, `InstanceTypesItem`, `InstanceType`, `InstanceTypeSpecs`,
    `Region`). The response is
    `{"data": {NAME: {"instance_type": {"name", "description", "gpu_description",
    "price_cents_per_hour", "specs": {"vcpus", "memory_gib", "storage_gib", "gpus"}},
    "regions_with_capacity_available": [{"name", "description"}]}}}`. The price is in US cents
    per hour for the whole instance; memory and storage are in GiB (converted to GB here). The
    price does not depend on the region, so one offer is written per instance type, and the
    regions that had capacity when the response was saved go into its notes. CPU-only types
    (`specs.gpus` 0, `gpu_description` "N/A") are left out with a note.

vast -- vast.ai CLI, `vastai search offers --raw` (source: github.com/vast-ai/vast-cli,
    `vast.py`, `search__offers`, its field list and `offers_mult`), which prints the `offers`
    array of `POST /api/v0/bundles/` as JSON; that response, `{"offers": [...]}`, is read too.
    Fields used: `id`, `machine_id`, `gpu_name`, `num_gpus`, `gpu_ram` (per card, MiB as
    nvidia-smi reports it: 24564 for an RTX 4090, 40960 for an A100 40 GB in recorded output;
    the CLI divides by 1000 for its display, which is not its unit), `dph_total` (USD per hour for the whole offer, including the
    storage the search priced), `cpu_ram` (MB), `cpu_cores_effective`, `disk_space` (GB),
    `geolocation`. Offers of one GPU, count and place share an id, so the cheapest of them is
    kept: a marketplace listing is one machine, and re-importing replaces it.
"""

from __future__ import annotations

import math
import re

from vramtui.limits import is_finite_number

GIB_TO_GB = 2**30 / 1e9

LAMBDA_SOURCE = (
    "https://cloud.lambda.ai/api/v1/instance-types (Lambda Cloud API, saved by the user)"
)
VAST_SOURCE = "vastai search offers --raw (vast.ai marketplace, saved by the user)"


class ShapeError(Exception):
    """The JSON is not the shape the adapter reads; str() says what is missing."""


FORMATS = {
    "csv": "vramtui import schema, CSV",
    "json": "vramtui import schema, JSON",
    "lambda": "Lambda Cloud API GET /api/v1/instance-types",
    "vast": "vast.ai `vastai search offers --raw`",
}


def _scaled(value, factor: float, digits: int = 3):
    """`value * factor` rounded, when `value` is a number; else `value` as it is (the row
    check then names the field and its problem)."""
    if is_finite_number(value):
        return round(value * factor, digits)
    return value


def detect_json(data) -> str | None:
    """The format of parsed JSON: "lambda", "vast", "json", or None."""
    if isinstance(data, dict) and isinstance(data.get("data"), dict):
        items = list(data["data"].values())
        if items and all(isinstance(v, dict) and "instance_type" in v for v in items[:5]):
            return "lambda"
    records = data.get("offers") if isinstance(data, dict) else data
    if isinstance(records, list) and records:
        first = [r for r in records[:5] if isinstance(r, dict)]
        if first and all("dph_total" in r or "gpu_name" in r for r in first):
            return "vast"
        if first and all("gpu" in r or "provider" in r for r in first):
            return "json"
    return None


def lambda_rows(data) -> list[tuple[str, dict]]:
    """(label, import-schema row) per Lambda instance type."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
        raise ShapeError('has no "data" object; save the body of GET /api/v1/instance-types')
    rows = []
    for key, item in data["data"].items():
        label = f"instance type {str(key)[:60]!r}"
        if not isinstance(item, dict) or not isinstance(item.get("instance_type"), dict):
            rows.append((label, {"_error": "has no instance_type object"}))
            continue
        it = item["instance_type"]
        specs = it.get("specs") if isinstance(it.get("specs"), dict) else {}
        if specs.get("gpus") == 0 and not isinstance(specs.get("gpus"), bool):
            # The real response lists CPU-only types too (cpu_4x_general, gpu_description
            # "N/A"): not an offer of a GPU, so left out with a note, not refused.
            rows.append((label, {"_skip": "a CPU-only instance type (specs.gpus is 0)"}))
            continue
        description = it.get("description")
        gpu = it.get("gpu_description")
        if not gpu and isinstance(description, str):
            gpu = re.sub(r"^\s*\d+\s*x\s*", "", description)
        count = specs.get("gpus")
        if count is None and isinstance(description, str):
            m = re.match(r"\s*(\d+)\s*x", description)
            count = int(m.group(1)) if m else None
        regions = item.get("regions_with_capacity_available")
        names = [
            str(r.get("name"))
            for r in (regions if isinstance(regions, list) else [])
            if isinstance(r, dict) and r.get("name")
        ]
        capacity = (
            f"regions with capacity when saved: {', '.join(names[:20])}"
            if names
            else "no region had capacity when the response was saved"
        )
        name = it.get("name", key)
        rows.append(
            (
                label,
                {
                    "provider": "Lambda",
                    "gpu": gpu,
                    "gpu_count": count,
                    "price": _scaled(it.get("price_cents_per_hour"), 0.01, 6),
                    "currency": "USD",
                    "billing_unit": "hour",
                    "storage_gb": _scaled(specs.get("storage_gib"), GIB_TO_GB, 1),
                    "host_ram_gb": _scaled(specs.get("memory_gib"), GIB_TO_GB, 1),
                    "vcpus": specs.get("vcpus"),
                    "source_url": LAMBDA_SOURCE,
                    "title": f"{name}: {description}" if description else name,
                    "notes": f"Lambda instance type {name}; {capacity}. Memory and storage "
                    "converted from GiB to GB.",
                },
            )
        )
    return rows


def vast_rows(data) -> list[tuple[str, dict]]:
    """(label, import-schema row) per vast.ai offer."""
    records = data.get("offers") if isinstance(data, dict) else data
    if not isinstance(records, list):
        raise ShapeError(
            "is neither an array of offers nor an object with an offers array; save the "
            "output of `vastai search offers --raw`"
        )
    rows = []
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            rows.append((f"offer {i + 1}", {"_error": "is not an object"}))
            continue
        ask = r.get("id")
        label = f"offer {i + 1}" + (f" (id {str(ask)[:30]})" if ask is not None else "")
        cores = r.get("cpu_cores_effective")
        if is_finite_number(cores) and cores >= 0:
            cores = math.floor(cores)
        machine = r.get("machine_id")
        rows.append(
            (
                label,
                {
                    "provider": "vast.ai",
                    "gpu": r.get("gpu_name"),
                    "gpu_count": r.get("num_gpus"),
                    "gpu_memory_gb": _scaled(r.get("gpu_ram"), 2**20 / 1e9),  # MiB -> GB
                    "price": r.get("dph_total"),
                    "currency": "USD",
                    "billing_unit": "hour",
                    "region": r.get("geolocation"),
                    "storage_gb": r.get("disk_space"),
                    "host_ram_gb": _scaled(r.get("cpu_ram"), 0.001),
                    "vcpus": cores,
                    "source_url": VAST_SOURCE
                    + (f", offer id {str(ask)[:30]}" if ask is not None else ""),
                    "notes": "vast.ai marketplace offer"
                    + (f" {str(ask)[:30]}" if ask is not None else "")
                    + (f" on machine {str(machine)[:30]}" if machine is not None else "")
                    + "; dph_total includes the storage the search priced; a listing can be "
                    "gone by the time you order.",
                },
            )
        )
    return rows


def json_rows(data) -> list[tuple[str, dict]]:
    """(label, row) per object of the import schema's JSON form."""
    records = data.get("offers") if isinstance(data, dict) else data
    if not isinstance(records, list):
        raise ShapeError('is neither an array of offers nor an object with an "offers" array')
    rows = []
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            rows.append((f"offer {i + 1}", {"_error": "is not an object"}))
        else:
            rows.append((f"offer {i + 1}", r))
    return rows


ADAPTERS = {"lambda": lambda_rows, "vast": vast_rows, "json": json_rows}
