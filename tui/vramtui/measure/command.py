"""`vramtui measure import FILE [--spec SPEC.toml]`: probe files and vLLM logs into a spec."""

from __future__ import annotations

import argparse
import json
import sys

from vramtui.fsutil import user_path

MEASURE_EPILOG = """\
FILE is a vramtui probe file (JSON lines written by `vramtui.probe` or its Trainer callback)
or a vLLM server's start-up log (V0 and V1 formats). With --spec the figures are stored in the
spec as [[measured]] items (written atomically; repeats are skipped) and shown beside its
estimate; without --spec they are listed against the built-in example spec, nothing is saved.

A figure measured at a smaller batch, a shorter length or on part of the corpus is kept but
flagged "does not validate the required workload"; it never replaces the estimate.
"""


def add_measure_parser(sub) -> None:
    me = sub.add_parser(
        "measure",
        help="import measurements (probe runs, vLLM logs) and show them beside the estimate",
        description="Measured figures beside the estimate: import probe files and vLLM logs.",
    )
    msub = me.add_subparsers(dest="measure_command", metavar="ACTION")
    imp = msub.add_parser(
        "import",
        help="read a probe file or a vLLM log into measured items",
        description="Read a probe file (JSON lines) or a vLLM start-up log into measured items.",
        epilog=MEASURE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("file", help="probe JSON-lines file or vLLM log (- reads standard input)")
    imp.add_argument("--spec", metavar="SPEC.toml", help="store the figures in this spec")
    imp.add_argument("--catalog", metavar="DIR", help="a catalogue directory over the built-ins")
    imp.add_argument("--units", choices=("gib", "gb", "mib", "bytes"), default="gib")
    imp.add_argument("--json", action="store_true", help="machine-readable output (bytes)")
    me.set_defaults(measure_parser=me)


def cmd_measure(args, catalog_dir=None) -> int:
    from vramtui.errors import SpecError

    if args.measure_command != "import":
        args.measure_parser.print_help()
        return 0
    from vramtui.ledger import estimate
    from vramtui.measure.compare import compare
    from vramtui.measure.importer import (
        merge_measurements,
        read_measurements,
        read_measurements_text,
    )
    from vramtui.measure.plan import staged_plan
    from vramtui.models.resolve import pin_revision, resolve_model_ref
    from vramtui.spec import save_spec
    from vramtui.spec_overrides import load_base_spec

    spec, base_dir = load_base_spec(args.spec)
    if args.file == "-":
        from vramtui.guarded_read import read_log_text
        from vramtui.measure.importer import (
            MAX_MEASURE_FILE_BYTES,
            TOO_BIG_FIX,
            MeasureImportError,
        )

        text = read_log_text(
            "-",
            error=MeasureImportError,
            what="input",
            cap=MAX_MEASURE_FILE_BYTES,
            too_big_fix=TOO_BIG_FIX,
        )
        result = read_measurements_text(text, spec, source="standard input")
    else:
        result = read_measurements(user_path(args.file), spec)
    new_spec, added = merge_measurements(spec, result.measurements)
    found = resolve_model_ref(new_spec.model, base_dir, catalog_dir)
    arch, checkpoint = found.arch, found.checkpoint
    new_spec = pin_revision(new_spec, found)  # a saved spec names the commit it was sized at
    est = estimate(new_spec, arch, checkpoint)
    if args.spec:
        if added:
            kept = save_spec(new_spec, user_path(args.spec), warn=None)
            if kept:
                result.warnings.insert(0, kept)
    elif result.measurements:
        result.warnings.insert(
            0,
            "no --spec: compared with the built-in example spec and not saved; pass --spec "
            "SPEC.toml to store the figures",
        )
    if not result.measurements and result.skipped:
        # Everything was read and nothing applies: say why, do not save.
        hint = "" if args.spec else "; pass --spec SPEC.toml, the spec of the run"
        raise SpecError(
            f"{result.source}: nothing to import ({len(result.skipped)} record(s) skipped; "
            f"first: {result.skipped[0]}){hint}"
        )
    read = set(result.measurements)
    shown = [c for c in compare(new_spec, est) if c.measurement in read]
    if args.json:
        out = {
            "source": result.source,
            "kind": result.kind,
            "spec": args.spec,
            "imported": added,
            "repeats_skipped": len(result.measurements) - added,
            "skipped": result.skipped,
            "warnings": result.warnings,
            "measured_beside_estimated": [c.to_dict() for c in shown],
            "validation_plan": [s.to_dict() for s in staged_plan(new_spec)],
        }
        json.dump(out, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    from rich.console import Group
    from rich.text import Text

    from vramtui.render import SafeConsole
    from vramtui.render_measure import comparisons_table, plan_table

    head = Text(result.summary(), style="bold")
    if args.spec:
        head.append(
            f"\n{added} stored in {args.spec}"
            + (
                f" ({len(result.measurements) - added} already there)"
                if len(result.measurements) > added
                else ""
            )
        )
    parts = [head]
    for w in result.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    for s in result.skipped:
        parts.append(Text(f"skipped: {s}", style="dim"))
    if shown:
        parts.append(comparisons_table(shown, args.units))
    parts.append(plan_table(staged_plan(new_spec), args.units))
    SafeConsole().print(Group(*parts))
    return 0
