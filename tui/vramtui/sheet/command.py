"""`vramtui sheet SPEC.toml [-o FILE.md|FILE.html]`: the one-page sizing sheet.

Without -o the Markdown goes to standard output; with -o the format follows the suffix
(.md/.markdown or .html/.htm) and the file is written atomically. `--today` fixes the date on
the sheet and the shortlist's schedule, for reproducible output. Imports are lazy: the command
never loads Textual. The app exports through `save_sheet`.
"""

from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from vramtui.errors import VramtuiError
from vramtui.fsutil import user_path

MARKDOWN_SUFFIXES = (".md", ".markdown")
HTML_SUFFIXES = (".html", ".htm")


class SheetError(VramtuiError):
    """A sheet that cannot be written where or how it was asked for."""


@dataclass(frozen=True)
class SheetInputs:
    spec: object  # vramtui.spec.Spec
    arch: object  # Architecture | None
    checkpoint: object  # CheckpointInfo | None
    estimate: object  # Estimate
    shortlist: object  # Shortlist | None
    spec_source: str  # the spec's file name (no directory)


def output_format(output: str | os.PathLike[str] | None) -> str:
    """ "markdown" or "html" from the output's suffix (None: Markdown to standard output)."""
    if output is None:
        return "markdown"
    suffix = Path(output).suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in HTML_SUFFIXES:
        return "html"
    if not suffix:
        raise SheetError(f"sheet: output '{output}' has no suffix; use FILE.md or FILE.html")
    raise SheetError(f"sheet: unknown output format '{suffix}'; use FILE.md or FILE.html")


def check_writable(output: str | os.PathLike[str]) -> Path:
    """The output path, after checking its directory can take it (before any work is done)."""
    path = user_path(output)
    directory = path.parent
    if path.is_dir():
        raise SheetError(
            f"sheet: '{output}' is a directory; give a file name such as {path / 'sheet.md'}"
        )
    if not directory.exists():
        raise SheetError(
            f"sheet: cannot write '{output}': directory '{directory}' does not exist; create "
            "it or choose another -o path"
        )
    if not directory.is_dir():
        raise SheetError(
            f"sheet: cannot write '{output}': '{directory}' is not a directory; choose another "
            "-o path"
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise SheetError(
            f"sheet: cannot write '{output}': directory '{directory}' is not writable; choose "
            "a directory you can write to"
        )
    return path


def build_sheet_inputs(
    spec_path: str | os.PathLike[str],
    catalog_dir: str | os.PathLike[str] | None = None,
    *,
    today: datetime.date | None = None,
) -> SheetInputs:
    """Load the spec file, resolve its model (a relative model.path against the spec's
    directory), estimate it and shortlist the catalogue's offers under it.

    `catalog_dir` is a catalogue directory (models/, gpus/, offers/) over the built-ins.
    """
    from vramtui.catalog import load_catalog
    from vramtui.ledger import estimate
    from vramtui.models.resolve import resolve_model
    from vramtui.shortlist import shortlist
    from vramtui.spec import validate_against_architecture
    from vramtui.spec_overrides import load_base_spec

    spec, base_dir = load_base_spec(str(spec_path))
    models = user_path(catalog_dir) / "models" if catalog_dir else None
    arch, checkpoint = resolve_model(
        spec.model, base_dir, models if models is not None and models.is_dir() else None
    )
    if arch is not None:
        validate_against_architecture(spec, arch, str(spec_path))
    est = estimate(spec, arch, checkpoint)
    catalog = load_catalog(catalog_dir)
    sl = shortlist(spec, est, catalog, arch=arch, today=today)
    return SheetInputs(spec, arch, checkpoint, est, sl, Path(spec_path).name)


def sheet_for_file(
    spec_path: str | os.PathLike[str],
    *,
    catalog_dir: str | os.PathLike[str] | None = None,
    today: datetime.date | None = None,
):
    """The Sheet of a spec file."""
    from vramtui.sheet.model import build_sheet

    inputs = build_sheet_inputs(spec_path, catalog_dir, today=today)
    return build_sheet(
        inputs.spec,
        inputs.arch,
        inputs.estimate,
        inputs.shortlist,
        generated=today,
        spec_source=inputs.spec_source,
        checkpoint=inputs.checkpoint,
    )


def render_sheet(sheet, fmt: str) -> str:
    """`fmt` is "markdown" or "html"."""
    if fmt == "html":
        from vramtui.sheet.html import render_html

        return render_html(sheet)
    from vramtui.sheet.markdown import render_markdown

    return render_markdown(sheet)


def save_sheet(sheet, output: str | os.PathLike[str]) -> str:
    """Render `sheet` in the format of `output`'s suffix and write it atomically; the text."""
    fmt = output_format(output)
    path = check_writable(output)
    text = render_sheet(sheet, fmt)
    _write(path, output, text)
    return text


def _write(path: Path, output, text: str) -> None:
    from vramtui.fsutil import atomic_write_text

    try:
        atomic_write_text(path, text)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SheetError(
            f"sheet: cannot write '{output}': {reason}; choose another -o path"
        ) from None


def write_sheet(
    spec_path: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    catalog_dir: str | os.PathLike[str] | None = None,
    today: datetime.date | None = None,
) -> str:
    """The sheet of `spec_path` as text; written atomically to `output` when given (format
    from its suffix), else Markdown for the caller to print. Output problems are reported
    before the spec is even read."""
    fmt = output_format(output)
    path = check_writable(output) if output is not None else None
    sheet = sheet_for_file(spec_path, catalog_dir=catalog_dir, today=today)
    text = render_sheet(sheet, fmt)
    if path is not None:
        _write(path, output, text)
    return text


def parse_today(text: str | None) -> datetime.date | None:
    if not text:
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise SheetError(
            f"sheet: --today must be a date such as 2026-12-02, got {text!r}"
        ) from None


def add_sheet_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "sheet",
        help="the one-page sizing sheet (Markdown or HTML)",
        description="One page with the model and revision, task, precision, lengths, batch or "
        "concurrency, memory per GPU (estimated and measured, with counters), measurement "
        "conditions, the shortlist decision with its evidence, the triage log and what would "
        "invalidate the conclusion. Without -o: Markdown on standard output.",
        epilog="Units: GB = 10^9 B, GiB = 2^30 B. The shortlist ranks; the choice is yours.",
    )
    p.add_argument("spec", help="workload spec (TOML)")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write FILE.md (Markdown) or FILE.html (printable HTML) atomically",
    )
    p.add_argument("--catalog", metavar="DIR", help="a catalogue directory over the built-ins")
    p.add_argument(
        "--today",
        metavar="YYYY-MM-DD",
        help="the date on the sheet and of the shortlist's schedule (default: today)",
    )


def cmd_sheet(args) -> int:
    today = parse_today(args.today)
    output_format(args.output)
    if args.output is not None:
        check_writable(args.output)
    sheet = sheet_for_file(args.spec, catalog_dir=args.catalog, today=today)
    from vramtui.safe_text import safe_line

    for problem in sheet.warnings:
        print(f"vramtui: warning: {safe_line(problem)}", file=sys.stderr)
    if args.output is None:
        from vramtui.sheet.markdown import render_markdown

        sys.stdout.write(render_markdown(sheet))
        return 0
    text = save_sheet(sheet, args.output)
    kind = "HTML" if output_format(args.output) == "html" else "Markdown"
    print(
        f"sizing sheet written to {safe_line(str(args.output))} ({kind}, "
        f"{text.count(chr(10))} lines)"
    )
    return 0
