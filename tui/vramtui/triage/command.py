"""`vramtui triage`: read an out-of-memory log, advise one change, keep the attempt log."""

from __future__ import annotations

import json
import sys

from vramtui.errors import SpecError
from vramtui.fsutil import user_path
from vramtui.triage.advice import STAGE_CHOICES, fits_word
from vramtui.triage.event_list import headline, other_events, reported_event
from vramtui.unit_text import in_unit
from vramtui.units import format_bytes

EXIT_NO_OOM = 3
MAX_LOG_BYTES = 512 * 2**20


def read_log_text(source: str) -> str:
    """The log at `source` ("-": standard input) as text, at most MAX_LOG_BYTES: a larger file,
    or a pipe or device (/dev/zero) that runs past the cap, is refused with one line asking for
    its tail. Bytes that are not UTF-8 are read as U+FFFD."""
    from vramtui.guarded_read import read_log_text as read_capped

    cap = MAX_LOG_BYTES  # read at call time: tests lower it
    tail = "50M" if cap > 50 * 2**20 else str(cap // 2)
    if source == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise SpecError(
                "no log given: pass a file, or pipe the log in (vramtui triage - < job.log)"
            )
        fix = f"pipe its tail instead (... | tail -c {tail} | vramtui triage -)"
        return read_capped("-", error=SpecError, what="log", cap=cap, too_big_fix=fix)
    path = user_path(source)
    return read_capped(
        path,
        error=SpecError,
        what="log file",
        cap=cap,
        too_big_fix=f"pass its tail (tail -c {tail} {path} > tail.log)",
    )


def triage_to_dict(reading, advice) -> dict:
    ev = reading.primary
    out = {
        "schema_version": 1,
        "units": "bytes (1 GB = 10^9 B, 1 GiB = 2^30 B)",
        "is_oom": reading.is_oom,
        "not_oom_reason": reading.not_oom_reason or None,
        "phase": reading.phase.phase,
        "phase_evidence": {
            "line": reading.phase.evidence,
            "line_no": reading.phase.line_no,
            "reason": reading.phase.reason,
        },
        "framework": reading.framework,
        "message": ev.message if ev else None,
        "gpu_index": ev.gpu_index if ev else None,
        "figures": dict(ev.figures) if ev else {},
        "figures_as_written": dict(ev.as_written) if ev else {},
        "figure_lists": {k: list(v) for k, v in ev.figure_lists.items()} if ev else {},
        "tokens": dict(ev.tokens) if ev else {},
        "reported_event": reported_event(reading) or None,
        "events": [
            {
                "framework": e.framework,
                "kind": e.kind,
                "line_no": e.line_no,
                "reported": e is ev,
                "echo_of_line_no": e.echo_of,
                "message": e.message,
                "figures": dict(e.figures),
                "figure_lists": {k: list(v) for k, v in e.figure_lists.items()},
                "tokens": dict(e.tokens),
            }
            for e in reading.events
        ],
        "recommendations": [],
    }
    if advice is not None:
        out.update(advice_to_dict(advice))
    return out


def advice_to_dict(advice) -> dict:
    """The advice's keys of `vramtui triage --json`: the two predictions of each change are
    separate keys, never one mixed figure."""
    return {
        "stages": list(advice.stages),
        "estimated_stage_bytes": advice.estimated_stage_bytes,
        "needed_at_failure_bytes": advice.needed_at_failure_bytes,
        "failed_card_capacity_bytes": advice.capacity_bytes,
        "failed_card_capacity_source": advice.capacity_source or None,
        "estimate_low_by_bytes": advice.estimate_low_by_bytes,
        "estimate_low_by_percent": (
            round(advice.estimate_low_by_percent, 1)
            if advice.estimate_low_by_percent is not None
            else None
        ),
        "deviation": advice.deviation,
        "warnings": list(advice.warnings),
        "stage_question": advice.stage_question or None,
        "workload_lines": [
            {"kind": w.kind, "value": w.value, "line_no": w.line_no, "line": w.text}
            for w in advice.workload_lines
        ],
        "mismatches": [
            {
                "kind": m.kind,
                "log_value": m.log.value,
                "log_line_no": m.log.line_no,
                "spec_field": m.spec_field,
                "spec_value": m.spec_value,
                "line": m.line,
            }
            for m in advice.mismatches
        ],
        "recommendations": [
            {
                "index": i + 1,
                "variable": r.variable,
                "change": r.change,
                "predicted_from_error_bytes": r.error_peak_bytes,
                "from_error_kv_need_bytes": r.error_kv_need_bytes,
                "from_error_kv_room_bytes": r.error_kv_room_bytes,
                "predicted_from_ledger_bytes": r.ledger_peak_bytes,
                "fits_against_bytes": r.fits_against_bytes,
                "fits_from_error": r.fits_error,
                "fits_from_ledger": r.fits_ledger,
                "fits": r.fits,
                "recheck": r.recheck,
                "offer": r.offer_id,
                "note": r.note or None,
            }
            for i, r in enumerate(advice.recommendations)
        ],
    }


def cmd_triage(args) -> int:
    from vramtui.triage.reader import read_log

    if getattr(args, "outcome", None) or getattr(args, "attempt", None) is not None:
        return cmd_outcome(args)
    if args.force and not args.apply:
        raise SpecError("--force goes with --apply N (apply a change predicted not to fit)")
    text = read_log_text(args.log)
    reading = read_log(text)
    if reading.is_oom and getattr(args, "stage", None):
        from vramtui.triage.advice import override_stage

        reading = override_stage(reading, args.stage)
    spec = arch = checkpoint = catalog = None
    advice = None
    if args.spec:
        from vramtui.catalog import load_catalog
        from vramtui.models.resolve import resolve_model
        from vramtui.spec import load_spec
        from vramtui.triage.advice import advise

        spec_path = user_path(args.spec)
        spec = load_spec(spec_path)
        arch, checkpoint = resolve_model(spec.model, spec_path.resolve().parent)
        catalog = load_catalog(args.catalog)
        failed_gpu = None
        if getattr(args, "failed_gpu", None):
            from vramtui.triage.failed_card import resolve_failed_gpu

            failed_gpu = resolve_failed_gpu(args.failed_gpu, catalog)
        if reading.is_oom:
            advice = advise(
                reading, spec, arch, checkpoint, catalog, log_text=text, failed_gpu=failed_gpu
            )
    elif getattr(args, "failed_gpu", None):
        raise SpecError("--failed-gpu sets the card that advice is judged against: pass --spec")
    elif args.apply or args.record_measured:
        raise SpecError("--apply and --record-measured change a spec: pass it with --spec")
    if args.json:
        json.dump(triage_to_dict(reading, advice), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        _print(reading, advice, getattr(args, "units", "gib"))
    if not reading.is_oom:
        return EXIT_NO_OOM
    if advice is not None and (args.apply or args.record_measured):
        _update_spec(user_path(args.spec), spec, reading, advice, args)
    return 0


def cmd_outcome(args) -> int:
    """`vramtui triage --spec SPEC --outcome fixed|still-oom|other-error [--attempt N]`: mark
    a logged attempt's result, as the app's outcome buttons do, and save the spec atomically."""
    from vramtui.spec import load_spec, save_spec
    from vramtui.triage.attempts import record_outcome

    if not args.outcome:
        raise SpecError("--attempt N goes with --outcome fixed|still-oom|other-error")
    if not args.spec:
        raise SpecError(
            "--outcome records the result in the spec's triage log: pass it with --spec SPEC.toml"
        )
    if args.apply or args.record_measured:
        raise SpecError(
            "--outcome records the result of an attempt already made; --apply and "
            "--record-measured start a new one: run them separately"
        )
    if args.log != "-":
        raise SpecError(
            "--outcome reads no log: drop the log argument (vramtui triage --spec SPEC "
            "--outcome ...)"
        )
    path = user_path(args.spec)
    spec = load_spec(path)
    new, index = record_outcome(spec, args.outcome, args.attempt, source=str(path))
    before = spec.triage[index].outcome
    save_spec(new, path)
    a = new.triage[index]
    if args.json:
        json.dump(
            {
                "schema_version": 1,
                "spec": str(path),
                "attempt": index + 1,
                "variable": a.variable,
                "change": a.change,
                "outcome": a.outcome,
                "previous_outcome": before,
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        from rich.text import Text

        from vramtui.render import SafeConsole

        was = f" (was: {before})" if before != a.outcome else ""
        SafeConsole().print(
            Text(
                f"attempt {index + 1} of {len(new.triage)} ({a.variable}: {a.change}) "
                f"recorded as {a.outcome}{was}; saved {path}"
            ),
            soft_wrap=True,
        )
    return 0


def _update_spec(path, spec, reading, advice, args) -> None:
    from vramtui.spec import save_spec
    from vramtui.triage.advice import record_attempt, with_measurements

    new = spec
    if args.apply:
        recs = advice.recommendations
        if not 1 <= args.apply <= len(recs):
            raise SpecError(
                f"--apply {args.apply}: choose a recommendation between 1 and {len(recs)}"
            )
        rec = recs[args.apply - 1]
        if rec.fits is False and not args.force:
            unit = getattr(args, "units", "gib")
            raise SpecError(
                f"--apply {args.apply} ({in_unit(rec.change, unit)}): "
                f"{in_unit(rec.why_not_fit, unit)}; the spec is "
                "unchanged: pick a change that fits, or add --force to try it anyway"
            )
        new = record_attempt(spec, reading, advice, rec)
    if args.record_measured:
        new = with_measurements(new, advice.measurements)
    save_spec(new, path)
    print(
        f"vramtui: saved {path} ({'one change applied and logged' if args.apply else ''}"
        f"{'; ' if args.apply and args.record_measured else ''}"
        f"{'measured figures stored' if args.record_measured else ''})",
        file=sys.stderr,
    )


def _print(reading, advice, unit: str = "gib") -> None:
    """The reading and the advice as text, every figure vramtui worked out in `unit` (a
    figure as the error wrote it stays as written)."""
    from rich.table import Table
    from rich.text import Text

    from vramtui.render import SafeConsole, unit_label

    console = SafeConsole()
    if not reading.is_oom:
        console.print(Text(reading.not_oom_reason or "no out-of-memory error in this text"))
        return
    ev = reading.primary
    head = Text()
    head.append(headline(ev), style="bold red")
    if ev.gpu_index is not None:
        head.append(f" on GPU {ev.gpu_index}")
    if len(reading.events) > 1:
        head.append(f" ({reported_event(reading)})\n")
    else:
        head.append(f" (line {ev.line_no})\n")
    head.append(ev.message + "\n", style="dim")
    ph = reading.phase
    head.append("stage: ", style="bold")
    head.append(f"{ph.phase}")
    if ph.evidence:
        head.append(f" — decided by line {ph.line_no}: {ph.evidence!r} ({ph.reason})")
    else:
        head.append(f" — {ph.reason}")
    console.print(head)
    if ev.figures:
        t = Table(
            title="figures in the error (measured by the framework at the failure)",
            title_justify="left",
        )
        shown = "gib" if unit == "bytes" else unit  # exact bytes have their own column
        label = unit_label(shown)
        for col in ("figure", "as written", "bytes", label):
            t.add_column(col, justify="right" if col in ("bytes", label) else "left")
        for key, value in ev.figures.items():
            t.add_row(
                key.removesuffix("_bytes").replace("_", " "),
                ev.as_written.get(key, ""),
                f"{value:,}",
                format_bytes(value, shown),
            )
        for key, values in ev.figure_lists.items():
            name = key.removesuffix("_bytes").replace("_", " ").removesuffix("es")
            written = ev.lists_as_written.get(key, ())
            for k, value in enumerate(values):
                t.add_row(
                    f"{name} {k + 1}",
                    written[k] if k < len(written) else "",
                    f"{value:,}",
                    format_bytes(value, shown),
                )
        console.print(t)
    others = other_events(reading)
    if others:
        console.print(Text("other events in the text (not acted on):", style="bold"))
        for line in others:
            console.print(Text("  " + line, style="dim"))
    if advice is None:
        console.print(
            Text(
                "Pass --spec SPEC.toml to compare with the estimate and get single "
                "changes with their predicted peak.",
                style="dim",
            )
        )
        return
    if advice.stage_question:
        console.print(
            Text(
                f"stage unknown: {advice.stage_question}? Re-run with --stage "
                f"{'|'.join(STAGE_CHOICES)} for that stage's changes; meanwhile, the "
                "changes below hold whichever stage it was.",
                style="bold",
            )
        )
    if advice.workload_lines:
        console.print(
            Text(
                "workload in the log: "
                + "; ".join(f"{w.shown} (line {w.line_no})" for w in advice.workload_lines),
                style="dim",
            )
        )
    for line in advice.mismatch_lines:
        console.print(Text(f"mismatch: {line}", style="bold yellow"))
    console.print(Text(in_unit(advice.deviation, unit)))
    if advice.capacity_bytes:
        console.print(
            Text(
                f"'fits' is judged against {format_bytes(advice.capacity_bytes, unit)}, "
                f"{advice.capacity_source}",
                style="dim",
            )
        )
    else:
        console.print(
            Text(
                "the failed card is unknown (the error prints no capacity and the log names no "
                "catalogue card): a card to rent is proposed without the guarantee that it is "
                "larger; pass --failed-gpu GPU (see `vramtui gpus`)",
                style="yellow",
            )
        )
    for w in advice.warnings:
        console.print(Text(f"warning: {in_unit(w, unit)}", style="yellow"))
    console.print(recommendations_table(advice, unit))
    for i, r in enumerate(advice.recommendations, 1):
        if r.variable == "capacity" and r.note:
            console.print(Text(f"{i}: {in_unit(r.note, unit)}", style="dim"))
    kv = any(r.error_kv_need_bytes is not None for r in advice.recommendations)
    console.print(
        Text(
            "predicted peaks are estimated. from the error: the need the error showed at the "
            "failure, less what the change saves (a lower bound)"
            + (
                "; for a KV cache too small for max_model_len, the KV one sequence needs after "
                "the change against the room the engine has for it (weights a change frees go "
                "to the cache)"
                if kv
                else ""
            )
            + "; from the ledger: the spec's estimate after the change. "
            "--apply N changes the spec by that one variable and logs the attempt (a change "
            "predicted not to fit needs --force); --record-measured stores the error's figures "
            "as measured items; --outcome records how the attempt went.",
            style="dim",
        )
    )


def recommendations_table(advice, unit: str = "gib"):
    """The changes, with the two predictions in separate labelled columns, in `unit`."""
    from rich.table import Table
    from rich.text import Text

    t = Table(
        title="change exactly one variable, re-run, then re-check (predicted peaks: estimated)",
        title_justify="left",
    )
    for col in ("#", "variable", "change", "from the error", "from the ledger", "fits", "re-check"):
        t.add_column(col, overflow="fold", justify="right" if col.startswith("from") else "left")
    for i, r in enumerate(advice.recommendations, 1):
        t.add_row(
            str(i),
            r.variable,
            Text(in_unit(r.change, unit)),
            in_unit(r.error_column, unit),
            format_bytes(r.ledger_peak_bytes, unit) if r.ledger_peak_bytes is not None else "-",
            fits_word(r),
            Text(r.recheck),
        )
    return t
