"""Dry run: trace the real `transformers` model code on PyTorch's meta device - shapes and
dtypes, no storage, no weights - and count the live tensor bytes of every stage: traced
estimates, shown beside the ledger, never measurements.

Importing this package does not import torch: torch, transformers (and peft, for LoRA/QLoRA)
are the optional `dryrun` extra (`pip install '.[dryrun]'`), imported when a dry run starts.

    from vramtui.dryrun import run_dry_run, dry_run_to_dict, dry_run_renderable
    result = run_dry_run(spec, arch)          # DryRunResult, or DryRunError (one line)
    data = dry_run_to_dict(result, estimate)  # JSON-ready, with the comparison to the ledger
    renderable = dry_run_renderable(result, estimate, unit="gib")
"""

from __future__ import annotations

from vramtui.dryrun.errors import INSTALL_HINT, DryRunError
from vramtui.dryrun.result import COUNTER, DryRunResult, StageResult

__all__ = [
    "COUNTER",
    "INSTALL_HINT",
    "DryRunError",
    "DryRunResult",
    "StageResult",
    "dry_run_available",
    "dry_run_renderable",
    "dry_run_to_dict",
    "run_dry_run",
]


def run_dry_run(spec, arch, *, local_config_dir=None) -> DryRunResult:
    from vramtui.dryrun.command import run_dry_run as run

    return run(spec, arch, local_config_dir=local_config_dir)


def dry_run_to_dict(result: DryRunResult, estimate=None) -> dict:
    from vramtui.dryrun.command import dry_run_to_dict as to_dict

    return to_dict(result, estimate)


def dry_run_renderable(result: DryRunResult, estimate=None, unit: str = "gib"):
    from vramtui.dryrun.render import dry_run_renderable as render

    return render(result, estimate, unit)


def dry_run_available() -> str | None:
    """None when torch and transformers can be imported, else the one-line install hint."""
    import importlib.util

    for name in ("torch", "transformers"):
        if importlib.util.find_spec(name) is None:
            return f"the dry run needs {name}; {INSTALL_HINT}"
    return None
