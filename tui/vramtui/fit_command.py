"""The `fit` and `check` commands: argument parsing and dispatch (headless, no Textual)."""

from __future__ import annotations

import sys

from vramtui.errors import SpecError
from vramtui.limits import MAX_GPUS, above_limit

FIT_EPILOG = """\
what fits:
  For each variable of the spec's task (micro-batch, sequence length or context, concurrency,
  KV-cache dtype, weight format, LoRA rank, activation checkpointing, GPUs), the others held:
  the largest value whose worst stage + the margin fits the card's usable capacity (the
  shortlist's figure: CUDA total, else NVML total, else nominal), the stage that binds, and
  the next value up with its overflow. "cannot tell" when the card's figure is not known
  closely enough, or an unknown ledger item could change the answer.
  When the spec does not fit: the single changes that make it fit, with their cost, in the
  seed's order (capacity, cache, micro-batch, precision).

  vramtui fit spec.toml --gpu rtx-4090 --margin 5%
  vramtui fit spec.toml --gpu l40s --margin 2GiB --json
"""

CHECK_EPILOG = """\
exit status: 0 the worst stage fits with the margin; 1 it does not; 2 cannot tell (unknown
items that could change the answer, a capacity not known closely enough, no NVML for --local,
bad input). One line says why.

  vramtui check spec.toml --local && torchrun --nproc-per-node 1 train.py
"""


def _margin_arg(p) -> None:
    p.add_argument(
        "--margin",
        metavar="X",
        help="memory kept free per GPU: a share (5%%) or a quantity with its unit (2GiB); "
        "default: the spec's headroom.margin_fraction",
    )


def add_fit_parsers(sub, add_spec_args) -> None:
    import argparse

    fit = sub.add_parser(
        "fit",
        help="what fits on a card: the largest micro-batch, length, concurrency... and the "
        "single changes that make a spec fit",
        description="For each workload variable, holding the others: the largest value that "
        "fits the card with the margin, the stage that binds, the next value up and its "
        "overflow.",
        epilog=FIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_spec_args(fit)
    fit.add_argument(
        "--gpu", required=True, metavar="CARD", help="catalogue card (id, alias or NVML name)"
    )
    _margin_arg(fit)
    fit.add_argument("--json", action="store_true", help="machine-readable output (bytes)")
    fit.add_argument(
        "--dry-run",
        action="store_true",
        help="trace the answer for micro-batch (training) or concurrency (inference) with the "
        "real model code on the meta device (needs the dryrun extra)",
    )
    check = sub.add_parser(
        "check",
        help="a guard for launch scripts: exit 0 fits, 1 does not, 2 cannot tell",
        description="Does the worst stage fit with the margin? One line says why; the exit "
        "status says it to the shell.",
        epilog=CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_spec_args(check)
    where = check.add_mutually_exclusive_group(required=True)
    where.add_argument("--gpu", metavar="CARD", help="catalogue card (id, alias or NVML name)")
    where.add_argument("--offer", metavar="OFFER_ID", help="catalogue offer (`vramtui offers`)")
    where.add_argument(
        "--local",
        action="store_true",
        help="this node's GPUs: the free memory NVML reads now (CUDA_VISIBLE_DEVICES honoured)",
    )
    _margin_arg(check)
    check.add_argument("--json", action="store_true", help="machine-readable output (bytes)")


def _check_gpus_flag(args) -> None:
    gpus = getattr(args, "gpus", None)
    if gpus is None:
        return
    if gpus < 1:
        raise SpecError(f"--gpus must be at least 1, got {gpus}")
    if gpus > MAX_GPUS:
        raise SpecError(above_limit("--gpus", gpus, MAX_GPUS))


def _margin(args, spec):
    from vramtui.fit_capacity import parse_margin, spec_margin

    return parse_margin(args.margin) if args.margin is not None else spec_margin(spec)


def _card(catalog, name: str, flag: str = "--gpu"):
    from vramtui.gpu_match import GpuMatchError, match_gpu
    from vramtui.safe_text import safe_line

    try:
        return match_gpu(catalog.gpus, name)
    except GpuMatchError as exc:
        raise SpecError(f"{flag}: {safe_line(str(exc))}") from None


def cmd_fit(args) -> int:
    from vramtui.cli import _load_catalog, _print_json, _spec_and_estimate
    from vramtui.fit_capacity import card_capacity
    from vramtui.fit_search import fit_report

    _check_gpus_flag(args)
    if args.margin is not None:
        from vramtui.fit_capacity import parse_margin

        parse_margin(args.margin)  # bad input is said before the model is resolved
    catalog = _load_catalog(args)
    gpu = _card(catalog, args.gpu)
    spec, arch, est, checkpoint = _spec_and_estimate(args, with_checkpoint=True)
    margin = _margin(args, spec)
    report = fit_report(
        spec, arch, card_capacity(gpu), margin, checkpoint=checkpoint, est=est, catalog=catalog
    )
    trace = None
    if args.dry_run:
        from vramtui.fit_trace import confirm_with_trace

        trace = confirm_with_trace(report, checkpoint)
        if trace is not None and trace.error and not args.json:
            from vramtui.safe_text import safe_line

            print(f"vramtui: note: {safe_line(trace.line)}", file=sys.stderr)
    if args.json:
        from vramtui.fit_render import fit_to_dict

        _print_json(fit_to_dict(report, args.units, trace))
        return 0
    from vramtui.fit_render import fit_renderable
    from vramtui.render import print_renderable

    print_renderable(
        fit_renderable(report, args.units, trace if trace is None or not trace.error else None)
    )
    return 0


def cmd_check(args) -> int:
    from vramtui.check_guard import check_card, check_local, check_offer
    from vramtui.cli import _load_catalog, _print_json, _spec_and_estimate
    from vramtui.unit_text import in_unit

    _check_gpus_flag(args)
    if args.margin is not None:
        from vramtui.fit_capacity import parse_margin

        parse_margin(args.margin)
    catalog = _load_catalog(args) if not args.local else None
    gpu = offer = None
    if args.gpu is not None:
        gpu = _card(catalog, args.gpu)
    elif args.offer is not None:
        offer = catalog.offers.get(args.offer.strip())
        if offer is None:
            from vramtui.safe_text import safe_line

            raise SpecError(
                f"--offer {safe_line(args.offer)[:80]!r} is not a catalogue offer: use an id "
                "from `vramtui offers`"
            )
        gpu = catalog.gpu_for(offer)
    spec, _arch, est = _spec_and_estimate(args)
    margin = _margin(args, spec)
    if args.local:
        result = check_local(spec, est, margin)
    elif offer is not None:
        result = check_offer(spec, est, offer, gpu, margin)
    else:
        result = check_card(est, gpu, margin)
    if args.json:
        _print_json(result.to_dict(args.units))
    else:
        from vramtui.safe_text import safe_line

        print(safe_line(in_unit(result.line, args.units)))
    return result.exit_code
