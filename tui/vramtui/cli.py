"""Command line: argument parsing and dispatch.

Headless commands import only the domain and rich; Textual is imported by the app alone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from vramtui import __version__
from vramtui.errors import VramtuiError
from vramtui.fsutil import is_dir, user_path

TASK_CHOICES = ("inference", "full_finetune", "lora", "qlora")
UNIT_CHOICES = ("gib", "gb", "mib", "bytes")

ESTIMATE_EPILOG = """\
quick overrides (applied to SPEC, or to the built-in seed example when no SPEC is given):
  Switching --task to a training task fills the training table with stated defaults
  (AdamW, fp32 master weights, bf16 gradients, no checkpointing, micro-batch 1, no
  accumulation; LoRA/QLoRA: rank 16 on all linear layers; QLoRA: NF4 with double quant).
  Save a spec (TOML) to make every choice explicit.

simple mode (the seed's formula, no spec):
  vramtui estimate --params 7e9 --bits 16 --headroom-gib 6

units: GB = 10^9 B, GiB = 2^30 B. Every figure is labelled estimated, measured or unknown.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vramtui",
        description="How much GPU memory does this workload need, which card should I rent, "
        "and what do I change after an out-of-memory error? `vramtui [SPEC.toml]` opens the "
        "terminal app; the commands below work headless.",
        epilog="Units: GB = 10^9 B, GiB = 2^30 B. Every figure is labelled estimated, measured "
        "or unknown. Config: <user config dir>/vramtui/config.toml (units, catalog_dir, "
        "[keymap]); drafts: one per app instance in <user state dir>/vramtui/drafts/, "
        "offered for recovery at the next start.",
    )
    parser.add_argument("--version", action="version", version=f"vramtui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    est = sub.add_parser(
        "estimate",
        help="itemised memory estimate of a workload spec",
        description="Itemised, stage-aware memory estimate of a workload spec.",
        epilog=ESTIMATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_spec_args(est)
    est.add_argument("--params", metavar="N", help="simple mode: bare parameter count (7e9)")
    est.add_argument("--bits", type=float, metavar="B", help="simple mode: bits per parameter")
    est.add_argument(
        "--headroom-gib",
        type=float,
        metavar="X",
        help="simple mode: a chosen reserve in GiB (an assumption to verify)",
    )
    est.add_argument("--json", action="store_true", help="machine-readable output (bytes)")
    est.add_argument("--explain", action="store_true", help="show the basis of every item")
    est.add_argument(
        "--dry-run",
        action="store_true",
        help="also trace the real transformers model code on the meta device (no GPU, no "
        "weights): traced estimates of the live tensor bytes per stage, beside the ledger "
        "(needs the dryrun extra: pip install '.[dryrun]')",
    )

    sl = sub.add_parser(
        "shortlist",
        help="classify rental offers: fit / needs verification / excluded, rank the fit",
        description="Every requirement of every catalogue offer is fit, needs verification or "
        "excluded, with its evidence; only all-fit candidates are ranked (total package cost, "
        "effective margin, documented lead time).",
        epilog=ESTIMATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_spec_args(sl)
    sl.add_argument(
        "--days",
        type=float,
        metavar="N",
        help="campaign length in days (default: campaign.days in the spec)",
    )
    sl.add_argument("--today", metavar="YYYY-MM-DD", help="plan from this date (default: today)")
    sl.add_argument("--detail", metavar="OFFER_ID", help="show one candidate's evidence")
    sl.add_argument("--json", action="store_true", help="machine-readable output (bytes)")
    sl.add_argument(
        "--allow-one-change",
        action="store_true",
        help="also rank offers that fit after one single change that keeps the length, "
        "concurrency and effective batch (KV cache in fp8, a smaller micro-batch with more "
        "accumulation...), the change named beside each",
    )
    sl.add_argument(
        "--price-max-age",
        type=float,
        metavar="DAYS",
        help="flag prices seen more than DAYS before --today as 'price to re-check' (default: "
        "config price_max_age_days, else 30)",
    )

    app = sub.add_parser(
        "app",
        help="the terminal app (the default: `vramtui [SPEC.toml]`)",
        description="Open the terminal app on SPEC, or on the built-in seed example; the "
        "start lists the drafts earlier instances left (unsaved edits: spec, age, fields "
        "that differ) to recover, set aside or skip. Keys: F1 help, ctrl+s save, F2 save as, "
        "ctrl+o open, F4 units, F5/F6 sizing/shortlist, ctrl+p command palette, ctrl+q quit.",
    )
    app.add_argument("spec", nargs="?", help="workload spec (TOML)")
    app.add_argument("--catalog", metavar="DIR", help="a catalogue directory over the built-ins")

    tr = sub.add_parser(
        "triage",
        help="read an out-of-memory error: the stage, the figures, one change to try",
        description="Read what a job printed after an out-of-memory error (a whole traceback or "
        "a log tail; - or no LOG reads standard input), localise the stage, convert every "
        "figure to bytes, compare with the spec's ledger and list single changes with their "
        "predicted peak. Exit 0 when an out-of-memory error was read, 3 when the text holds "
        "none.",
    )
    tr.add_argument("log", nargs="?", default="-", help="log file, or - for standard input")
    tr.add_argument("--spec", metavar="SPEC.toml", help="the spec of the job that failed")
    tr.add_argument("--catalog", metavar="DIR", help="a catalogue directory over the built-ins")
    tr.add_argument(
        "--apply",
        type=int,
        metavar="N",
        help="apply recommendation N to --spec (one variable) and log the attempt",
    )
    tr.add_argument(
        "--force",
        action="store_true",
        help="with --apply: apply a change even when it is predicted not to fit",
    )
    tr.add_argument(
        "--record-measured",
        action="store_true",
        help="store the error's figures in --spec as measured items",
    )
    tr.add_argument(
        "--stage",
        choices=("load", "generate", "train_forward", "backward", "optimizer_step", "other"),
        help="the stage that failed, when the reader could not tell (or told wrong)",
    )
    tr.add_argument(
        "--outcome",
        choices=("fixed", "still-oom", "other-error"),
        help="record the result of the last logged attempt in --spec (no log is read)",
    )
    tr.add_argument(
        "--attempt",
        type=int,
        metavar="N",
        help="with --outcome: the attempt to mark (1 = the first logged; default: the last)",
    )
    tr.add_argument(
        "--failed-gpu",
        metavar="GPU",
        help="the card that failed (id, alias or NVML name from `vramtui gpus`), when the "
        "error prints no capacity: no card with less memory is then proposed",
    )
    tr.add_argument(
        "--units", choices=UNIT_CHOICES, default="gib", help="display unit (--json keeps bytes)"
    )
    tr.add_argument("--json", action="store_true", help="machine-readable output (bytes)")

    gp = sub.add_parser(
        "gpus",
        help="list the GPU catalogue: one line per card (CUDA / NVML totals in GiB, formats)",
        description=LIST_DESCRIPTION,
    )
    gp.add_argument("--catalog", metavar="DIR", help="a catalogue directory (gpus/, offers/)")
    gp.add_argument(
        "--wide",
        action="store_true",
        help="every format, the nominal size, exact bytes and the figures as their sources wrote",
    )
    of = sub.add_parser(
        "offers",
        help="list the rental offers in the catalogue (prices per hour or per plan period)",
        description=LIST_DESCRIPTION,
    )
    of.add_argument("--catalog", metavar="DIR", help="a catalogue directory (gpus/, offers/)")
    _add_price_age_args(of)
    from vramtui.offer_import.command import add_import_parser

    add_import_parser(of.add_subparsers(dest="offers_command", metavar="ACTION"))

    _add_watch_parser(sub)

    from vramtui.fit_command import add_fit_parsers

    add_fit_parsers(sub, _add_spec_args)

    from vramtui.measure.command import add_measure_parser

    add_measure_parser(sub)

    from vramtui.sheet.command import add_sheet_parser

    add_sheet_parser(sub)

    from vramtui.metrics_export import add_export_parser

    add_export_parser(sub, _add_spec_args)

    models = sub.add_parser(
        "models",
        help="list the model catalogue by family, then parameter count",
        description=LIST_DESCRIPTION
        + " Models sort by family (the id without its size: Qwen/Qwen2.5-*-Instruct), then "
        "by parameter count (M = 10^6, B = 10^9 parameters).",
    )
    models.add_argument("query", nargs="?", help="substring to filter ids")
    models.add_argument("--catalog", metavar="DIR")
    models.add_argument(
        "--wide", action="store_true", help="also the exact parameter count of each model"
    )
    return parser


LIST_DESCRIPTION = (
    "Ids are printed in full on one line, to copy into other commands. In a narrow terminal the "
    "other columns wrap, and those that still do not fit are left out (models: head dim, KV "
    "heads, layers, dtype, notes; offers: link, host, provider, lead time; gpus: formats, name), "
    "said under the table."
)

WATCH_EPILOG = """\
headless:
  vramtui watch --once --json            one snapshot as JSON (bytes), exit 0; without an
                                         NVIDIA driver the "error" field says why
  vramtui watch --once                   the same as tables (memory in GiB, n/a = not reported)
  vramtui watch --json --record F.jsonl  JSON lines until Ctrl-C, also appended to F.jsonl
  vramtui watch --replay F.jsonl --once  the first recorded snapshot (--json: all, timed)
  vramtui watch --prometheus URL --once --json [--match 'namespace="a"']
                                         every GPU dcgm-exporter reports through Prometheus

Counters are measured by NVML: v2 memory info (driver R510+) reports the driver's reserved
carve-out apart from "used"; v1 counts it in "used". Devices are read every --interval,
processes every --process-interval (never below 0.25 s).
"""


def _add_watch_parser(sub) -> None:
    w = sub.add_parser(
        "watch",
        help="live GPU memory counters and processes (NVML), headless or in the app",
        description="Live GPU counters (NVML) and the processes holding memory, with the memory "
        "no listed process accounts for. Without --once/--json it opens the app's feed pane.",
        epilog=WATCH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument("--once", action="store_true", help="one snapshot, then exit")
    w.add_argument("--json", action="store_true", help="JSON (one compact line per snapshot)")
    w.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between device polls (default 1, at least 0.25)",
    )
    w.add_argument(
        "--process-interval",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds between process polls (default 2, at least 0.25)",
    )
    w.add_argument("--record", metavar="FILE", help="append each snapshot to FILE (JSON lines)")
    w.add_argument("--replay", metavar="FILE", help="read a recording instead of the driver")
    w.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="replay speed: 1 = as recorded, 10 = ten times faster",
    )
    w.add_argument(
        "--ssh",
        nargs="+",
        action="extend",  # --ssh a --ssh b and --ssh a b both watch a and b
        metavar="HOST",
        help="watch these hosts over SSH (each runs `python3 -m vramtui.agent`; repeatable)",
    )
    w.add_argument(
        "--remote-python",
        metavar="PATH",
        help="with --ssh: the Python that has vramtui on the hosts (default python3)",
    )
    w.add_argument("--ssh-config", metavar="FILE", help="with --ssh: an ssh_config file (-F)")
    w.add_argument(
        "--ssh-option",
        metavar="OPT",
        action="append",
        help="with --ssh: an extra ssh -o option, e.g. ProxyJump=bastion (repeatable)",
    )
    _add_prometheus_args(w)


def _add_prometheus_args(w) -> None:
    w.add_argument(
        "--prometheus",
        metavar="URL",
        help="read dcgm-exporter's framebuffer counters from this Prometheus (docs/prometheus.md)",
    )
    w.add_argument(
        "--match",
        metavar="LABELS",
        help='with --prometheus: label matchers, e.g. \'namespace="team-a",Hostname=~"node-1.*"\'',
    )
    w.add_argument(
        "--stale-after",
        type=float,
        metavar="S",
        help="with --prometheus: a GPU whose newest sample is older is stale (default "
        "max(3 x interval, 90))",
    )
    w.add_argument(
        "--bearer-token-file", metavar="FILE", help="with --prometheus: a bearer token file"
    )
    w.add_argument(
        "--basic-auth-user",
        metavar="NAME",
        help="with --prometheus: basic auth user (the password: --basic-auth-password-file or "
        "VRAMTUI_PROMETHEUS_PASSWORD)",
    )
    w.add_argument(
        "--basic-auth-password-file", metavar="FILE", help="with --prometheus: its password file"
    )
    w.add_argument("--ca-file", metavar="FILE", help="with --prometheus: a CA bundle for TLS")
    w.add_argument("--cert-file", metavar="FILE", help="with --prometheus: TLS client certificate")
    w.add_argument("--key-file", metavar="FILE", help="with --prometheus: its private key")
    w.add_argument(
        "--insecure-skip-verify",
        action="store_true",
        help="with --prometheus: do not verify the server's TLS certificate",
    )


def _add_price_age_args(p: argparse.ArgumentParser) -> None:
    """`vramtui offers`: the date prices are aged from, and the age that flags them."""
    p.add_argument("--today", metavar="YYYY-MM-DD", help="age prices from this date")
    p.add_argument(
        "--price-max-age",
        type=float,
        metavar="DAYS",
        help="flag prices seen more than DAYS ago as 'price to re-check' (default: config "
        "price_max_age_days, else 30)",
    )


def _price_max_age(args) -> float | None:
    """--price-max-age, else the config's price_max_age_days, else None (the default)."""
    from vramtui.price_age import check_max_age

    value = getattr(args, "price_max_age", None)
    if value is not None:
        return check_max_age(value, "--price-max-age")
    from vramtui.config import load_config

    return load_config().price_max_age_days


def _add_spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", nargs="?", help="workload spec (TOML); default: the seed example")
    p.add_argument("--model", help="catalogue/Hub id or a local Hugging Face directory")
    p.add_argument("--task", choices=TASK_CHOICES)
    p.add_argument(
        "--format",
        dest="weight_format",
        metavar="FORMAT",
        help="weight format: fp32 bf16 fp16 fp8 int8 nf4 fp4 gptq awq gguf",
    )
    p.add_argument("--kv-dtype", choices=("fp32", "bf16", "fp16", "fp8"))
    p.add_argument(
        "--seq",
        type=int,
        metavar="N",
        help="training sequence length, or the prompt length for inference",
    )
    p.add_argument("--generate", type=int, metavar="N", help="generated tokens (inference)")
    p.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help="concurrent sequences (inference) or micro-batch (training)",
    )
    p.add_argument("--grad-accum", type=int, metavar="N")
    p.add_argument("--gpus", type=int, metavar="N")
    p.add_argument("--tp", type=int, metavar="N", help="tensor-parallel degree")
    p.add_argument("--pp", type=int, metavar="N", help="pipeline-parallel degree")
    p.add_argument("--sharding", choices=("none", "zero1", "zero2", "zero3", "fsdp"))
    p.add_argument("--attention", choices=("flash", "sdpa", "eager"))
    p.add_argument("--engine", choices=("transformers", "vllm", "tgi", "llama.cpp", "other"))
    p.add_argument("--checkpointing", choices=("none", "full", "selective"))
    p.add_argument(
        "--optimizer", choices=("adamw", "adamw_8bit", "sgd", "sgd_momentum", "adafactor")
    )
    p.add_argument("--lora-rank", type=int, metavar="R")
    p.add_argument("--lora-targets", metavar="A,B", help="comma-separated module names")
    p.add_argument("--units", choices=UNIT_CHOICES, default="gib")
    p.add_argument(
        "--catalog",
        metavar="DIR",
        help="a catalogue directory (models/, gpus/, offers/) over the built-ins",
    )


COMMANDS = (
    "app",
    "estimate",
    "shortlist",
    "triage",
    "gpus",
    "offers",
    "models",
    "watch",
    "measure",
    "sheet",
    "fit",
    "check",
    "export-metrics",
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and not argv[0].startswith("-")):
        argv.insert(0, "app")  # `vramtui` and `vramtui SPEC.toml` open the app
    args = parser.parse_args(argv)
    try:
        if args.command == "app":
            from vramtui.app.run import run_app

            return run_app(args.spec, args.catalog)
        if args.command == "estimate":
            return cmd_estimate(args)
        if args.command == "models":
            return cmd_models(args)
        if args.command == "shortlist":
            return cmd_shortlist(args)
        if args.command == "triage":
            from vramtui.triage.command import cmd_triage

            return cmd_triage(args)
        if args.command == "gpus":
            return cmd_gpus(args)
        if args.command == "watch":
            from vramtui.feed.command import cmd_watch

            return cmd_watch(args, open_app=_watch_app)
        if args.command == "offers":
            if getattr(args, "offers_command", None) == "import":
                from vramtui.offer_import.command import cmd_offers_import

                return cmd_offers_import(args)
            return cmd_offers(args)
        if args.command == "fit":
            from vramtui.fit_command import cmd_fit

            return cmd_fit(args)
        if args.command == "check":
            from vramtui.fit_command import cmd_check

            return cmd_check(args)
        if args.command == "sheet":
            from vramtui.sheet.command import cmd_sheet

            return cmd_sheet(args)
        if args.command == "export-metrics":
            from vramtui.metrics_export import cmd_export_metrics

            return cmd_export_metrics(args)
        if args.command == "measure":
            from vramtui.measure.command import cmd_measure

            return cmd_measure(args, _catalog_dir(args))
        parser.print_help()
        return 0
    except VramtuiError as exc:
        from vramtui.safe_text import safe_line

        print(f"vramtui: error: {safe_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a bug, said in one line
        return _report_internal_error(exc)


EXIT_INTERNAL_ERROR = 70  # EX_SOFTWARE: a defect in vramtui, not in the input


def _report_internal_error(exc: BaseException) -> int:
    """An exception no check foresaw: one line on stderr, the traceback kept in a file."""
    import datetime
    import traceback

    from vramtui.safe_text import safe_line

    where = "it could not be saved"
    try:
        from vramtui.drafts import state_dir
        from vramtui.fsutil import atomic_write_text

        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        directory = state_dir()
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"crash-{stamp}.txt"
        atomic_write_text(target, "".join(traceback.format_exception(exc)))
        where = f"the details are in {target}"
    except Exception:  # noqa: BLE001, S110 - reporting must not fail in turn
        pass
    detail = safe_line(f"{type(exc).__name__}: {exc}")[:300]
    print(
        f"vramtui: internal error ({detail}); this is a bug in vramtui, not in your input: "
        f"{where}; please report it with that file",
        file=sys.stderr,
    )
    return EXIT_INTERNAL_ERROR


def _watch_app(args) -> int:
    """`vramtui watch` without --once/--json: the app, opened on its live feed pane."""
    from vramtui.app.run import run_app
    from vramtui.feed.runner import FeedSettings

    return run_app(None, getattr(args, "catalog", None), FeedSettings.from_args(args), "feed")


def _catalog_dir(args) -> Path | None:
    """The user's models/ directory, searched before the built-in model catalogue."""
    if not getattr(args, "catalog", None):
        return None
    models = user_path(args.catalog) / "models"
    return models if is_dir(models) else None


def _spec_and_estimate(args, with_checkpoint: bool = False):
    """The spec (file or built-in, with overrides), its architecture and its estimate (and
    the local checkpoint's CheckpointInfo, or None, when `with_checkpoint`)."""
    from vramtui.ledger import estimate
    from vramtui.models.resolve import pin_revision, resolve_model_ref
    from vramtui.spec import validate_against_architecture
    from vramtui.spec_overrides import apply_overrides, load_base_spec, use_model_dtype

    spec, base_dir = load_base_spec(args.spec)
    spec = apply_overrides(spec, args)
    found = resolve_model_ref(spec.model, base_dir, _catalog_dir(args))
    arch, checkpoint = found.arch, found.checkpoint
    spec = pin_revision(spec, found)
    if args.spec is None and arch is not None:
        spec = use_model_dtype(
            spec,
            arch,
            keep_weight_format=bool(args.weight_format),
            keep_kv_dtype=bool(args.kv_dtype),
            keep_engine=bool(args.engine),
        )
    if arch is not None:
        validate_against_architecture(spec, arch, args.spec or "the command line")
    if with_checkpoint:
        return spec, arch, estimate(spec, arch, checkpoint), checkpoint
    return spec, arch, estimate(spec, arch, checkpoint)


def cmd_estimate(args) -> int:
    if args.bits is not None or args.headroom_gib is not None or args.params is not None:
        if args.dry_run:
            from vramtui.errors import SpecError

            raise SpecError(
                "--dry-run needs a model architecture, not the simple mode's --params/--bits; "
                "give a spec or --model"
            )
        return _simple_mode(args)
    spec, arch, est = _spec_and_estimate(args)
    from vramtui.ledger.reserve_check import manual_reserve_shortfall

    shortfall = manual_reserve_shortfall(spec, arch)
    traced = dry_run_error = None
    if args.dry_run:
        from vramtui.dryrun.command import try_dry_run, with_dry_run_notes

        traced, dry_run_error = try_dry_run(spec, arch)
        est = with_dry_run_notes(est, traced, dry_run_error)
    if args.json:
        from vramtui.ledger.report import estimate_to_dict

        data = estimate_to_dict(est, spec)
        if shortfall is not None:
            data["manual_reserve_shortfall"] = {
                "reserve_bytes": shortfall.reserve_bytes,
                "itemised_besides_weights_bytes": shortfall.besides_weights_bytes,
                "stage": shortfall.stage,
                "itemised_peak_bytes": shortfall.itemised_peak_bytes,
                "unknown_items_not_counted": shortfall.unknown_items,
                "status": "estimated",
            }
        if traced is not None:
            from vramtui.dryrun.command import dry_run_to_dict

            data["dry_run"] = dry_run_to_dict(traced, est)
        elif dry_run_error is not None:
            from vramtui.dryrun.command import failure_to_dict

            data["dry_run"] = failure_to_dict(dry_run_error)
        _print_json(data)
        return 0
    from vramtui.render import estimate_renderable, print_renderable

    if shortfall is not None:
        from rich.text import Text

        print_renderable(Text(f"warning: {shortfall.line(args.units)}", style="bold yellow"))
    print_renderable(estimate_renderable(est, args.units, args.explain, spec=spec))
    if traced is not None:
        from vramtui.dryrun.command import dry_run_renderable

        print_renderable(dry_run_renderable(traced, est, args.units))
    return 0


def _print_json(data) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _load_catalog(args):
    from vramtui.catalog import load_catalog

    catalog = load_catalog(args.catalog)
    from vramtui.safe_text import safe_line

    for problem in catalog.problems:
        print(f"vramtui: warning: {safe_line(problem)}", file=sys.stderr)
    return catalog


def cmd_shortlist(args) -> int:
    import datetime

    from vramtui.errors import SpecError
    from vramtui.limits import MAX_DAYS
    from vramtui.shortlist import shortlist, shortlist_to_dict

    today = None
    if args.today:
        try:
            today = datetime.date.fromisoformat(args.today)
        except ValueError:
            raise SpecError(
                f"--today must be a date such as 2026-12-10, got {args.today!r}"
            ) from None
    if args.days is not None and not (0 < args.days <= MAX_DAYS):  # NaN fails too
        raise SpecError(
            f"--days must be a positive number of days, at most vramtui's limit of "
            f"{MAX_DAYS:,}, got {args.days:g}; give a campaign of 1 to {MAX_DAYS:,} days"
        )
    spec, arch, est, checkpoint = _spec_and_estimate(args, with_checkpoint=True)
    catalog = _load_catalog(args)
    sl = shortlist(
        spec,
        est,
        catalog,
        arch=arch,
        days=args.days,
        today=today,
        checkpoint=checkpoint,
        price_max_age_days=_price_max_age(args),
    )
    ranking = None
    if getattr(args, "allow_one_change", False):
        from vramtui.shortlist_one_change import rank_with_one_change

        ranking = rank_with_one_change(
            spec, sl, catalog, arch=arch, days=args.days, today=today, checkpoint=checkpoint
        )
    if args.json:
        data = shortlist_to_dict(sl)
        if ranking is not None:
            from vramtui.shortlist_one_change import one_change_to_dict

            data["one_change"] = one_change_to_dict(ranking)
        _print_json(data)
        return 0
    from vramtui.render import print_renderable, shortlist_renderable

    print_renderable(shortlist_renderable(sl, est, args.units, args.detail))
    if ranking is not None:
        from vramtui.shortlist_one_change import one_change_renderable

        print_renderable(one_change_renderable(ranking, args.units))
    return 0


def cmd_gpus(args) -> int:
    from vramtui.render import print_renderable
    from vramtui.render_lists import gpus_renderable

    print_renderable(gpus_renderable(_load_catalog(args), wide=args.wide))
    return 0


def cmd_offers(args) -> int:
    from vramtui.render import print_renderable
    from vramtui.render_lists import offers_renderable

    today = _date_arg(args.today, "--today")
    catalog = _load_catalog(args)
    print_renderable(offers_renderable(catalog, today, _price_max_age(args)))
    return 0


def _date_arg(text: str | None, flag: str):
    import datetime

    if text is None:
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        from vramtui.safe_text import safe_line

        raise VramtuiError(
            f"{flag} must be a date such as 2026-12-10, got {safe_line(text)[:40]!r}"
        ) from None


def _simple_mode(args) -> int:
    from vramtui.errors import SpecError
    from vramtui.ledger.simple import simple_estimate

    missing = [
        n
        for n, v in (
            ("--params", args.params),
            ("--bits", args.bits),
            ("--headroom-gib", args.headroom_gib),
        )
        if v is None
    ]
    if missing:
        raise SpecError(
            f"simple mode needs --params, --bits and --headroom-gib; missing {', '.join(missing)}"
            " (e.g. --params 7e9 --bits 16 --headroom-gib 6)"
        )
    try:
        params = float(args.params)
    except ValueError:
        raise SpecError(f"--params must be a number such as 7e9, got {args.params!r}") from None
    if not all(math.isfinite(v) for v in (params, args.bits, args.headroom_gib)):
        raise SpecError("--params, --bits and --headroom-gib must be finite numbers")
    if params <= 0 or args.bits <= 0 or args.headroom_gib < 0:
        raise SpecError("--params and --bits must be > 0 and --headroom-gib >= 0")
    from vramtui import limits

    for flag, value, limit in (
        ("--params", params, limits.MAX_PARAMS),
        ("--bits", args.bits, limits.MAX_BITS),
        ("--headroom-gib", args.headroom_gib, limits.MAX_GIB),
    ):
        if value > limit:
            raise SpecError(limits.above_limit(flag, value, limit))
    simple = simple_estimate(round(params), args.bits, args.headroom_gib)
    if args.json:
        from vramtui.ledger.report import simple_to_dict

        _print_json(simple_to_dict(simple))
        return 0
    from vramtui.render import print_renderable, simple_renderable

    print_renderable(simple_renderable(simple, args.units))
    return 0


def cmd_models(args) -> int:
    from vramtui.models.registry import load_catalog_models, model_catalog_problems
    from vramtui.render import print_renderable
    from vramtui.render_lists import models_renderable

    models = load_catalog_models(_catalog_dir(args))
    from vramtui.safe_text import safe_line

    for problem in model_catalog_problems(_catalog_dir(args)):
        print(f"vramtui: warning: {safe_line(problem)}", file=sys.stderr)
    print_renderable(models_renderable(models, args.query, wide=args.wide))
    return 0
