"""The spec's [[measured]] figures and [[triage]] attempts: what runs of the workload showed.

`spec_parse.spec_from_dict` calls `_parse_measured` and `_parse_triage`.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping

from vramtui import limits
from vramtui.safe_text import safe_line
from vramtui.spec_table import (
    _fail,
    _show,
    _Table,
)
from vramtui.spec_types import (
    COUNT_QUANTITIES,
    MEASURED_QUANTITIES,
    TRIAGE_PHASES,
    TRIAGE_VARIABLES,
    Measurement,
    TriageAttempt,
)


def _array_tables(root: _Table, name: str, hint: str) -> list[_Table]:
    value = root.data.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise root.wrong_type(name, f"an array of [[{name}]] tables", value)
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _fail(f"{name}[{i}] must be a table, got {_show(item)} ({root.source}); {hint}")
        t = _Table(item, f"{name}[{i}]", root.source, schema=name)
        t.check_keys()
        out.append(t)
    return out


def _parse_measured(root: _Table, kind: str) -> tuple[Measurement, ...]:
    stages = (
        ("load", "prefill", "decode")
        if kind == "inference"
        else ("load", "forward", "backward", "optimizer_step", "validation", "export")
    )
    out = []
    for t in _array_tables(root, "measured", "write each figure as a [[measured]] table"):
        date = t.data.get("date")
        if date is not None and (
            not isinstance(date, datetime.date) or isinstance(date, datetime.datetime)
        ):
            raise t.wrong_type("date", "a TOML date such as 2026-12-02", date)
        quantity = t.choice("quantity", MEASURED_QUANTITIES, required=True)
        if quantity in COUNT_QUANTITIES:
            t.forbid(
                "bytes",
                f"does not apply: quantity '{quantity}' is a count",
                "write the count as value = N instead",
            )
            value = t.number(
                "value",
                required=True,
                why=f"(quantity '{quantity}' is a count)",
                maximum=limits.MAX_COUNT,
            )
            if value < 0:
                raise t.out_of_range("value", ">= 0", value, "write the count as printed")
            n_bytes = None
        else:
            t.forbid(
                "value",
                f"does not apply: quantity '{quantity}' is in bytes",
                "write the figure as bytes = N instead",
            )
            n_bytes = t.integer("bytes", required=True, minimum=0, maximum=limits.MAX_BYTES)
            value = None
        out.append(
            Measurement(
                stage=t.choice("stage", stages, required=True),
                quantity=quantity,
                bytes=n_bytes,
                value=value,
                counter=t.string("counter", required=True, nonempty=True),
                as_written=t.string("as_written", multiline=True) or "",
                item=t.string("item", nonempty=True),
                source=t.string("source") or "",
                gpu=t.integer("gpu", minimum=0, maximum=limits.MAX_GPUS),
                device=t.string("device") or "",
                date=date,
                run=t.string("run") or "",
                error=t.string("error", multiline=True) or "",
                dims=_measured_dims(t),
                versions=_measured_versions(t),
            )
        )
    return tuple(out)


def _measured_dims(t: _Table) -> dict[str, int | float]:
    dims = t.data.get("dims", {})
    if not isinstance(dims, Mapping) or not all(
        isinstance(v, (int, float))
        and not isinstance(v, bool)
        and math.isfinite(v)
        and 0 <= v <= limits.MAX_COUNT
        and isinstance(k, str)
        for k, v in dims.items()
    ):
        raise t.wrong_type(
            "dims",
            "a table of executed dimensions (numbers from 0 to vramtui's limit of "
            f"{limits.MAX_COUNT:,}), e.g. {{ batch = 8, seq_len = 4096 }}",
            dims,
        )
    fraction = dims.get("corpus_fraction")
    if fraction is not None and fraction > 1:
        raise t.out_of_range(
            "dims", "corpus_fraction between 0 and 1", fraction, "write the share run, e.g. 0.25"
        )
    return {safe_line(k): v for k, v in dims.items()}


def _measured_versions(t: _Table) -> dict[str, str]:
    versions = t.data.get("versions", {})
    if not isinstance(versions, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in versions.items()
    ):
        raise t.wrong_type(
            "versions", 'a table of version strings, e.g. { torch = "2.13.0" }', versions
        )
    return {safe_line(k): safe_line(v) for k, v in versions.items()}


def _parse_triage(root: _Table) -> tuple[TriageAttempt, ...]:
    out = []
    for t in _array_tables(root, "triage", "write each attempt as a [[triage]] table"):
        figures = t.data.get("figures", {})
        if not isinstance(figures, Mapping) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= limits.MAX_BYTES
            for v in figures.values()
        ):
            raise t.wrong_type(
                "figures",
                "a table of byte counts (integers from 0 to vramtui's limit of 2^60)",
                figures,
            )
        time = t.data.get("time")
        if isinstance(time, (datetime.datetime, datetime.date)):
            time = time.isoformat()
        if not isinstance(time, str) or not time.strip():
            raise t.wrong_type("time", "an ISO 8601 time", time)
        time = safe_line(time)
        out.append(
            TriageAttempt(
                time=time,
                phase=t.choice("phase", TRIAGE_PHASES, required=True),
                framework=t.string("framework") or "",
                figures={safe_line(k): v for k, v in figures.items()},
                variable=t.choice("variable", TRIAGE_VARIABLES, required=True),
                change=t.string("change", required=True, nonempty=True),
                predicted_peak_bytes=t.integer(
                    "predicted_peak_bytes", minimum=0, maximum=limits.MAX_BYTES
                ),
                outcome=t.string("outcome") or "pending",
            )
        )
    return tuple(out)
