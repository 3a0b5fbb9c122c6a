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
        "and what do I change after an out-of-memory error?",
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
    est.add_argument("spec", nargs="?", help="workload spec (TOML); default: the seed example")
    est.add_argument("--model", help="catalogue/Hub id or a local Hugging Face directory")
    est.add_argument("--task", choices=TASK_CHOICES)
    est.add_argument(
        "--format",
        dest="weight_format",
        metavar="FORMAT",
        help="weight format: fp32 bf16 fp16 fp8 int8 nf4 fp4 gptq awq gguf",
    )
    est.add_argument("--kv-dtype", choices=("fp32", "bf16", "fp16", "fp8"))
    est.add_argument(
        "--seq",
        type=int,
        metavar="N",
        help="training sequence length, or the prompt length for inference",
    )
    est.add_argument("--generate", type=int, metavar="N", help="generated tokens (inference)")
    est.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help="concurrent sequences (inference) or micro-batch (training)",
    )
    est.add_argument("--grad-accum", type=int, metavar="N")
    est.add_argument("--gpus", type=int, metavar="N")
    est.add_argument("--tp", type=int, metavar="N", help="tensor-parallel degree")
    est.add_argument("--pp", type=int, metavar="N", help="pipeline-parallel degree")
    est.add_argument("--sharding", choices=("none", "zero1", "zero2", "zero3", "fsdp"))
    est.add_argument("--attention", choices=("flash", "sdpa", "eager"))
    est.add_argument("--engine", choices=("transformers", "vllm", "tgi", "llama.cpp", "other"))
    est.add_argument("--checkpointing", choices=("none", "full", "selective"))
    est.add_argument(
        "--optimizer", choices=("adamw", "adamw_8bit", "sgd", "sgd_momentum", "adafactor")
    )
    est.add_argument("--lora-rank", type=int, metavar="R")
    est.add_argument("--lora-targets", metavar="A,B", help="comma-separated module names")
    est.add_argument("--params", metavar="N", help="simple mode: bare parameter count (7e9)")
    est.add_argument("--bits", type=float, metavar="B", help="simple mode: bits per parameter")
    est.add_argument(
        "--headroom-gib",
        type=float,
        metavar="X",
        help="simple mode: a chosen reserve in GiB (an assumption to verify)",
    )
    est.add_argument("--units", choices=UNIT_CHOICES, default="gib")
    est.add_argument("--catalog", metavar="DIR", help="a catalogue directory with models/")
    est.add_argument("--json", action="store_true", help="machine-readable output (bytes)")
    est.add_argument("--explain", action="store_true", help="show the basis of every item")

    models = sub.add_parser("models", help="list the model catalogue")
    models.add_argument("query", nargs="?", help="substring to filter ids")
    models.add_argument("--catalog", metavar="DIR")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "estimate":
            return cmd_estimate(args)
        if args.command == "models":
            return cmd_models(args)
        # No command: the built-in seed example (the app takes this place when it lands).
        return cmd_estimate(parser.parse_args(["estimate"]))
    except VramtuiError as exc:
        print(f"vramtui: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _catalog_dir(args) -> Path | None:
    if not args.catalog:
        return None
    d = Path(args.catalog).expanduser()
    return d / "models" if (d / "models").is_dir() else d


def cmd_estimate(args) -> int:
    if args.params is not None or args.bits is not None or args.headroom_gib is not None:
        return _simple_mode(args)
    from vramtui.ledger import estimate
    from vramtui.models.resolve import resolve_model
    from vramtui.spec import validate_against_architecture
    from vramtui.spec_overrides import apply_overrides, load_base_spec, use_model_dtype

    spec, base_dir = load_base_spec(args.spec)
    spec = apply_overrides(spec, args)
    arch, checkpoint = resolve_model(spec.model, base_dir, _catalog_dir(args))
    if args.spec is None and arch is not None:
        spec = use_model_dtype(
            spec,
            arch,
            keep_weight_format=bool(args.weight_format),
            keep_kv_dtype=bool(args.kv_dtype),
        )
    if arch is not None:
        validate_against_architecture(spec, arch, args.spec or "the command line")
    est = estimate(spec, arch, checkpoint)
    if args.json:
        from vramtui.ledger.report import estimate_to_dict

        json.dump(estimate_to_dict(est, spec), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from vramtui.render import estimate_renderable, print_renderable

    print_renderable(estimate_renderable(est, args.units, args.explain))
    return 0


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
    simple = simple_estimate(round(params), args.bits, args.headroom_gib)
    if args.json:
        from vramtui.ledger.report import simple_to_dict

        json.dump(simple_to_dict(simple), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from vramtui.render import print_renderable, simple_renderable

    print_renderable(simple_renderable(simple))
    return 0


def cmd_models(args) -> int:
    from rich.table import Table

    from vramtui.models.registry import load_catalog_models
    from vramtui.render import print_renderable

    models = load_catalog_models(_catalog_dir(args))
    table = Table(title="model catalogue", title_justify="left")
    for col in ("id", "parameters", "layers", "KV heads", "head_dim", "dtype", "notes"):
        table.add_column(col, justify="right" if col in ("parameters", "layers") else "left")
    for mid in sorted(models, key=str.lower):
        if args.query and args.query.lower() not in mid.lower():
            continue
        a = models[mid]
        notes = []
        if a.is_moe:
            notes.append(f"MoE {a.num_experts}x top-{a.num_experts_per_tok}")
        if a.mla:
            notes.append("MLA")
        if a.num_sliding_layers:
            notes.append(f"{a.num_sliding_layers} sliding layers")
        table.add_row(
            mid,
            f"{a.param_count:,}",
            str(a.num_layers),
            str(a.num_kv_heads),
            str(a.head_dim),
            a.default_dtype,
            ", ".join(notes),
        )
    print_renderable(table)
    return 0
