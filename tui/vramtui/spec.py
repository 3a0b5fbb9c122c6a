"""The workload spec: what is being sized, as a frozen, validated, TOML-backed record.

A spec states the seed's "starting specification" - model and revision, task, weight format,
lengths, concurrency or micro-batch, placement, quality criteria and headroom - so the ledger can
itemise memory and the app can compare plans under the same requirements.

Rules this module enforces:

* Nothing is silently defaulted. A required key that is missing is an error naming its key path;
  every optional key has one documented default (see docs/spec-format.md), and `save_spec`
  writes the defaulted values out so the saved file states the whole workload.
* Every error is a `SpecError` whose text is ONE line: the key path, the file, the problem and
  the fix. Only the first problem is reported.
* `spec_from_dict` holds all the checks. `validate_spec` re-runs them on a `Spec` built or edited
  in code (`dataclasses.replace`), and `dumps_spec`/`save_spec` refuse a spec that would not
  load back.
* load -> save -> load gives an equal `Spec`, and a second save gives identical text.

Where the parts live (this module re-exports their public names, so `from vramtui.spec import
...` stays the one import callers need):

* `spec_types` - the vocabularies and the frozen records (`Spec`, `Task`, `Measurement`...);
* `spec_table` - reading one table of the raw TOML dict, and the one-line message wording;
* `spec_parse` (with `spec_parse_measured`) - `spec_from_dict`, one parser per table;
* `spec_architecture` - `validate_against_architecture`, the checks that need the model;
* `spec_toml` - `spec_to_dict`, `dumps_spec`, `save_spec`;
* here - `validate_spec` and the file loaders.
"""

from __future__ import annotations

import os

from vramtui.spec_architecture import validate_against_architecture
from vramtui.spec_parse import spec_from_dict
from vramtui.spec_table import _fail
from vramtui.spec_toml import dumps_spec, save_spec, spec_to_dict
from vramtui.spec_types import (
    ADAPTER_DTYPES,
    ALL_LINEAR,
    ATTENTION_IMPLS,
    BNB_4BIT_FORMATS,
    COUNT_QUANTITIES,
    DEFAULT_FRAMEWORK,
    ENGINES,
    FRAMEWORKS,
    FROZEN_ONLY_FORMATS,
    FSDP_FROZEN_BASE,
    GGUF_TYPES,
    GPTQ_BITS,
    GRAD_CHECKPOINTING,
    GRAD_DTYPES,
    HEADROOM_MODES,
    KV_CACHE_DTYPES,
    LLAMA_CPP_CACHE_TYPES,
    LLAMA_CPP_DEFAULT_N_BATCH,
    LLAMA_CPP_DEFAULT_N_UBATCH,
    LOSS_IMPLS,
    MAX_VERSION_CHARS,
    MEASURED_DIMS,
    MEASURED_QUANTITIES,
    OPTIMIZER_PLACEMENTS,
    OPTIMIZER_STATE_DTYPES,
    OPTIMIZERS,
    OPTIMIZERS_WITH_STATE_DTYPE,
    PACKED_FORMATS,
    SCHEMA_KEYS,
    SCHEMA_VERSION,
    SELECTIVE_POLICIES,
    SHARDING,
    STAGES,
    TASK_KINDS,
    TRAINING_KINDS,
    TRIAGE_PHASES,
    TRIAGE_VARIABLES,
    VERSIONED_LIBRARIES,
    WEIGHT_FORMATS,
    Batch,
    Campaign,
    Headroom,
    Lengths,
    LlamaCpp,
    LoraConfig,
    Measurement,
    ModelRef,
    Placement,
    QualityCriterion,
    Runtime,
    SoftwareRequest,
    Spec,
    Task,
    Training,
    TriageAttempt,
    Weights,
)

__all__ = [
    "ADAPTER_DTYPES",
    "ALL_LINEAR",
    "ATTENTION_IMPLS",
    "BNB_4BIT_FORMATS",
    "COUNT_QUANTITIES",
    "DEFAULT_FRAMEWORK",
    "ENGINES",
    "FRAMEWORKS",
    "FROZEN_ONLY_FORMATS",
    "FSDP_FROZEN_BASE",
    "GGUF_TYPES",
    "GPTQ_BITS",
    "GRAD_CHECKPOINTING",
    "GRAD_DTYPES",
    "HEADROOM_MODES",
    "KV_CACHE_DTYPES",
    "LLAMA_CPP_CACHE_TYPES",
    "LLAMA_CPP_DEFAULT_N_BATCH",
    "LLAMA_CPP_DEFAULT_N_UBATCH",
    "LOSS_IMPLS",
    "MAX_SPEC_BYTES",
    "MAX_VERSION_CHARS",
    "MEASURED_DIMS",
    "MEASURED_QUANTITIES",
    "OPTIMIZERS",
    "OPTIMIZERS_WITH_STATE_DTYPE",
    "OPTIMIZER_PLACEMENTS",
    "OPTIMIZER_STATE_DTYPES",
    "PACKED_FORMATS",
    "SCHEMA_KEYS",
    "SCHEMA_VERSION",
    "SELECTIVE_POLICIES",
    "SHARDING",
    "STAGES",
    "TASK_KINDS",
    "TRAINING_KINDS",
    "TRIAGE_PHASES",
    "TRIAGE_VARIABLES",
    "VERSIONED_LIBRARIES",
    "WEIGHT_FORMATS",
    "Batch",
    "Campaign",
    "Headroom",
    "Lengths",
    "LlamaCpp",
    "LoraConfig",
    "Measurement",
    "ModelRef",
    "Placement",
    "QualityCriterion",
    "Runtime",
    "SoftwareRequest",
    "Spec",
    "Task",
    "Training",
    "TriageAttempt",
    "Weights",
    "dumps_spec",
    "load_spec",
    "loads_spec",
    "read_spec_text",
    "save_spec",
    "spec_from_dict",
    "spec_to_dict",
    "validate_against_architecture",
    "validate_spec",
]


# --------------------------------------------------------------------------------------------
# Re-checks
# --------------------------------------------------------------------------------------------


def validate_spec(spec: Spec, source: str = "<spec>") -> Spec:
    """Re-run every check on a Spec built or edited in code; return it with defaults filled in.

    Raises SpecError (one line) for the first problem, exactly as loading the saved file would.
    """
    try:
        data = spec_to_dict(spec)
    except AttributeError as exc:  # a field replaced by something that is not the right record
        raise _fail(
            f"spec from {source} is malformed: {exc}; build it from the vramtui.spec dataclasses"
        ) from exc
    return spec_from_dict(data, source)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------

MAX_SPEC_BYTES = 8 * 2**20  # a spec with thousands of [[measured]] items is under 1 MiB


def loads_spec(text: str, source: str = "<string>") -> Spec:
    """Parse TOML text into a validated Spec."""
    from vramtui.guarded_read import parse_toml

    data = parse_toml(text, error=_fail, source=source, fix="fix the spec file")
    return spec_from_dict(data, source)


def read_spec_text(path: str | os.PathLike[str]) -> str:
    """The text of a spec file, bounded by MAX_SPEC_BYTES; SpecError (one line) otherwise."""
    from vramtui.guarded_read import decode_utf8, read_bytes

    source = os.fspath(path)
    raw = read_bytes(
        path,
        error=_fail,
        what="spec file",
        cap=MAX_SPEC_BYTES,
        too_big_fix="a spec is a few KiB of TOML; check it is the right file",
        missing="not found",
        missing_fix="check the path, or start from sample_specs/seed-7b-fp16-inference.toml",
    )
    return decode_utf8(raw, error=_fail, source=f"spec file {source}")


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and validate a spec file."""
    return loads_spec(read_spec_text(path), os.fspath(path))
