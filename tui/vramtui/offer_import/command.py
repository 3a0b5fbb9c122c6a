"""`vramtui offers import FILE [--format csv|json|lambda|vast] [--dry-run] [--catalog DIR]`.

Exit status: 0 when every row was imported, 1 when some rows were refused (each said in one
line; the good rows are still written), 2 when the file cannot be read at all (missing, too
large, not UTF-8, not CSV/JSON, an unknown JSON shape, no rows).
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from vramtui.errors import VramtuiError
from vramtui.offer_import.adapters import ADAPTERS, FORMATS, ShapeError, detect_json
from vramtui.offer_import.rows import COLUMNS, REQUIRED, ImportedOffer, RowError, check_row
from vramtui.safe_text import safe_line

MAX_IMPORT_BYTES = 32 * 2**20  # the file: a provider's whole price list is far smaller
MAX_IMPORT_ROWS = 10_000  # rows (CSV lines, JSON objects, provider records) per file
EXIT_SOME_REFUSED = 1
EXIT_UNREADABLE = 2


class ImportFileError(VramtuiError):
    """The import file as a whole cannot be read (exit 2)."""


@dataclass
class ImportResult:
    fmt: str
    detected: bool
    directory: Path
    written: list[tuple[str, ImportedOffer, Path, bool]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # one line each
    notes: list[str] = field(default_factory=list)


def add_import_parser(offers_sub) -> None:
    imp = offers_sub.add_parser(
        "import",
        help="import a provider's offers (CSV/JSON, or a saved Lambda / vast.ai response)",
        description="Read offers from FILE and write one offer file per good row into the "
        "user's catalogue overlay (<user config dir>/vramtui/catalog/offers/, or "
        "--catalog DIR/offers/). FILE is CSV or JSON in vramtui's import schema "
        "(docs/catalog-offers.md, 'Importing offers'), or the JSON a provider returns: "
        "lambda = Lambda Cloud API GET /api/v1/instance-types, vast = `vastai search offers "
        "--raw`. Fetching is yours: save the response, then import the file. Re-importing "
        "replaces the same offers (ids from provider, GPU, count, region). Exit 0: all rows "
        "imported; 1: some rows refused (one line each, the others written); 2: the file "
        "cannot be read.",
    )
    imp.add_argument("file", metavar="FILE", help="the CSV or JSON file")
    imp.add_argument(
        "--format",
        dest="import_format",
        choices=tuple(FORMATS),
        help="the file's format (default: detected from its content)",
    )
    imp.add_argument(
        "--dry-run", action="store_true", help="check every row and say what would be written"
    )
    imp.add_argument(
        "--catalog",
        metavar="DIR",
        default=argparse_suppress(),
        help="write into DIR/offers/ (default: the user catalogue)",
    )
    imp.add_argument(
        "--seen-on",
        metavar="YYYY-MM-DD",
        help="the date the prices were seen, for rows that do not give one (a provider "
        "response carries none: default, the file's modification date)",
    )
    imp.add_argument(
        "--today", metavar="YYYY-MM-DD", help="the date import counts as today (default: today)"
    )


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


def _date_option(text: str | None, flag: str) -> datetime.date | None:
    if text is None:
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise VramtuiError(
            f"{flag} must be a date such as 2026-12-01, got {safe_line(text)[:40]!r}"
        ) from None


def _read_rows(path: Path, fmt: str | None) -> tuple[str, bool, list[tuple[str, dict]], list]:
    """(format, detected?, [(label, row)], notes) of the file, else ImportFileError."""
    from vramtui.guarded_read import Unreadable, decode_json, decode_utf8, read_bytes

    label = f"import file {path}"
    raw = read_bytes(
        path,
        error=ImportFileError,
        what="import file",
        cap=MAX_IMPORT_BYTES,
        label=label,
        too_big_fix="split it (the import limit, MAX_IMPORT_BYTES)",
    )
    text = decode_utf8(raw, error=ImportFileError, source=label)
    detected = fmt is None
    notes: list[str] = []
    if fmt is None:
        stripped = text.lstrip()
        fmt = "json" if stripped[:1] in ("{", "[") else "csv"
    if fmt == "csv":
        rows, notes = _csv_rows(text, label)
        return "csv", detected, rows, notes
    try:
        data = decode_json(text)
    except Unreadable as exc:
        raise ImportFileError(f"{label} {exc.problem}; give a JSON or CSV file") from None
    if detected:
        fmt = detect_json(data)
        if fmt is None:
            raise ImportFileError(
                f"{label} is JSON of no known shape (not the import schema, a Lambda "
                "instance-types response or vast.ai offers); see docs/catalog-offers.md, or "
                "give --format"
            )
    try:
        rows = ADAPTERS[fmt](data)
    except ShapeError as exc:
        raise ImportFileError(f"{label} {exc}") from None
    if fmt == "json":
        notes = _unknown_keys([r for _, r in rows if "_error" not in r])
    return fmt, detected, rows, notes


def _csv_rows(text: str, label: str) -> tuple[list[tuple[str, dict]], list[str]]:
    if "\0" in text:
        raise ImportFileError(f"{label} holds a NUL byte, so it is not CSV text; save it as CSV")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise ImportFileError(f"{label} is empty; write a header line and one row per offer")
        names = [safe_line(h).strip().lower() for h in header]
        missing = [c for c in REQUIRED if c not in names and c != "seen_on"]
        if missing:
            raise ImportFileError(
                f"{label}: the header line has no {', '.join(missing)} column; it must name "
                f"{', '.join(REQUIRED)} (docs/catalog-offers.md, 'Importing offers')"
            )
        rows = []
        for cells in reader:
            if len(rows) >= MAX_IMPORT_ROWS:
                raise ImportFileError(_too_many(label))
            if not any(c.strip() for c in cells):
                continue
            where = f"line {reader.line_num}"
            if len(cells) > len(names):
                rows.append(
                    (
                        where,
                        {
                            "_error": f"has {len(cells)} cells but the header "
                            f"names {len(names)}; quote cells that hold a comma"
                        },
                    )
                )
                continue
            rows.append((where, dict(zip(names, cells))))
    except csv.Error as exc:
        raise ImportFileError(
            f"{label} is not readable CSV (line {reader.line_num}: {exc}); fix the quoting"
        ) from None
    return rows, _unknown_keys([dict.fromkeys(names)])


def _too_many(label: str) -> str:
    return (
        f"{label} holds more than {MAX_IMPORT_ROWS:,} offers, the import limit "
        "(MAX_IMPORT_ROWS); split it"
    )


def _unknown_keys(rows: list[dict]) -> list[str]:
    import difflib

    seen: list[str] = []
    for r in rows[:MAX_IMPORT_ROWS]:
        for k in r:
            if isinstance(k, str) and k not in COLUMNS and k not in seen and len(seen) < 20:
                seen.append(k)
    notes = []
    for k in seen:
        close = difflib.get_close_matches(k, COLUMNS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        notes.append(
            f"column {safe_line(k)[:60]!r} is not in the import schema and was ignored{hint}"
        )
    return notes


def import_offers(
    path: Path,
    gpus: dict,
    directory: Path,
    fmt: str | None = None,
    today: datetime.date | None = None,
    seen_on: datetime.date | None = None,
    dry_run: bool = False,
) -> ImportResult:
    """Import `path` into `directory` (the overlay's offers/); ImportFileError for a file that
    cannot be read at all."""
    from vramtui.offer_import.writer import (
        check_document,
        offer_document,
        offer_id,
        write_offer,
    )

    today = today or datetime.date.today()
    fmt, detected, rows, notes = _read_rows(path, fmt)
    if not rows:
        raise ImportFileError(f"import file {path} holds no offers; nothing to import")
    if len(rows) > MAX_IMPORT_ROWS:
        raise ImportFileError(_too_many(f"import file {path}"))
    result = ImportResult(fmt, detected, directory, notes=notes)
    if fmt in ("lambda", "vast") and seen_on is None:
        try:
            mtime = os.stat(path).st_mtime
            seen_on = min(datetime.date.fromtimestamp(mtime), today)
        except (OSError, ValueError, OverflowError):
            seen_on = today
        result.notes.append(
            f"prices dated {seen_on.isoformat()}, the file's modification date (a provider "
            "response carries no date; give --seen-on DATE if it was saved earlier)"
        )
    kept: dict[str, tuple[str, ImportedOffer, str]] = {}
    merged: dict[str, list[str]] = {}
    for where, row in rows:
        if "_skip" in row:
            result.notes.append(f"left out {where}: {row['_skip']}; only GPU offers are imported")
            continue
        if "_error" in row:
            result.refused.append(f"{where}: {row['_error']}")
            continue
        try:
            offer = check_row(row, gpus, today, seen_on)
        except RowError as exc:
            result.refused.append(f"{where}: {exc}")
            continue
        oid = offer_id(offer)
        if oid in kept:
            merged.setdefault(oid, [kept[oid][0]]).append(where)
            if offer.per_hour >= kept[oid][1].per_hour:
                continue
        kept[oid] = (where, offer, "")
    for oid, places in merged.items():
        result.notes.append(
            f"{len(places)} rows are the same offer {oid} ({', '.join(places[:5])}"
            f"{', ...' if len(places) > 5 else ''}): kept the cheapest, from {kept[oid][0]}"
        )
    for oid, (where, offer, _) in kept.items():
        text = offer_document(offer, oid, path.name)
        try:
            check_document(text, oid, gpus)
        except VramtuiError as exc:
            result.refused.append(f"{where}: the offer would not load ({exc}); fix the row")
            continue
        target = directory / f"{oid}.toml"
        existed = target.exists()
        if not dry_run:
            try:
                write_offer(directory, oid, text)
            except OSError as exc:
                raise ImportFileError(
                    f"cannot write {target} ({exc.strerror or exc}); check the directory "
                    f"{directory} is writable"
                ) from None
        result.written.append((oid, offer, target, existed))
    return result


def cmd_offers_import(args) -> int:
    from vramtui.catalog import load_catalog, user_catalog_dir
    from vramtui.fsutil import user_path

    today = _date_option(getattr(args, "today", None), "--today")
    seen_on = _date_option(args.seen_on, "--seen-on")
    catalog_arg = getattr(args, "catalog", None)
    root = user_path(catalog_arg) if catalog_arg else user_catalog_dir()
    catalog = load_catalog(catalog_arg) if catalog_arg else load_catalog()
    try:
        result = import_offers(
            user_path(args.file),
            catalog.gpus,
            root / "offers",
            args.import_format,
            today,
            seen_on,
            args.dry_run,
        )
    except ImportFileError as exc:
        print(f"vramtui: error: {safe_line(str(exc))}", file=sys.stderr)
        return EXIT_UNREADABLE
    how = "detected" if result.detected else "given"
    out = sys.stdout
    print(safe_line(f"format: {result.fmt} ({FORMATS[result.fmt]}; {how})"), file=out)
    for note in result.notes:
        print(safe_line(f"note: {note}"), file=out)
    verb = "would write" if args.dry_run else "wrote"
    for oid, offer, target, existed in result.written:
        again = " (replaces the earlier import)" if existed else ""
        print(
            safe_line(
                f"{verb} {oid}: {offer.gpu_count} x {offer.gpu}, {offer.price_line()}, seen "
                f"{offer.seen_on.isoformat()}{again}"
            ),
            file=out,
        )
    out.flush()
    for line in result.refused:
        print(safe_line(f"vramtui: refused {line}"), file=sys.stderr)
    n, bad = len(result.written), len(result.refused)
    where = result.directory
    summary = (
        f"{'Checked' if args.dry_run else 'Imported'} {n} offer{'s' if n != 1 else ''} "
        f"{'for' if args.dry_run else 'into'} {where}"
        + (f"; {bad} row{'s' if bad != 1 else ''} refused (see above)" if bad else "")
        + ("; nothing written (--dry-run)" if args.dry_run else "")
    )
    print(safe_line(summary), file=out)
    return EXIT_SOME_REFUSED if bad else 0
