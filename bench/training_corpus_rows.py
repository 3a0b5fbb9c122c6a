"""The training-memory corpus (`tests/training_corpus/`) read as vramtui specs.

Each row is a published peak-memory figure with the settings its source states. `size_row`
turns one row into a spec through the public spec API (`spec_from_dict`, the TOML schema of
docs/spec-format.md), runs the ledger, and compares the estimate with the figure through
`vramtui.measure.compare` (the slice of the ledger the row's counter sees), and, for an
out-of-memory row, judges the estimate against the card that failed the way `vramtui fit` and
the shortlist do (`vramtui.fit_capacity`).

Rules:
- The model is the catalogue's when the catalogue has it (by Hub id or alias), else a real
  `config.json` kept in the test data; `MODEL_SOURCES` names, for each row model that is not
  found under its own name, the file used and why it is the same architecture. A model with
  neither is "not sized: model config unavailable offline", never guessed.
- A setting the row states is used as stated. A setting it leaves out takes vramtui's default
  (`spec_overrides.TRAINING_DEFAULTS`, `LORA_DEFAULTS`, a 2,048-token sequence, micro-batch 1,
  sdpa attention, no sharding); every default taken is listed in the row's result, and rows
  the corpus marks under-specified are reported apart from fully specified ones.
- Settings the spec cannot express (4-bit optimisers, activation offloading, a ZeRO stage left
  unstated) are sized with the nearest spec value and listed as approximations. A paged
  optimiser is `optimizer_placement = "paged"`, torchtune's optimizer_in_bwd "in-backward",
  CPU offload "cpu-offload" (and `offload_params` where the framework offloads the FSDP
  parameters: fsdp_qlora, Axolotl under FSDP), Axolotl's `activation_offloading: true`
  `offload_checkpoints`, a stated loss the matching `loss_impl` (`_loss_impl`; torchtitan
  at e7c0cae with `compile` the compiled loss, `TORCHTITAN_COMPILED_LOSS`), fp32 norms where
  the framework leaves them fp32 before 4-bit linears (fms-hf-tuning's single-GPU QLoRA,
  Axolotl at `AXOLOTL_NORMS_LEFT_FP32`).
- Library versions: the row's `library_versions`, else what the framework pins at the commit
  the row names (`FRAMEWORK_PINS`, with its source), else none (the current behaviour). A
  framework setting that differs at that commit from the profile's version is set from
  `FRAMEWORK_AT_COMMIT` (with its source), every other one is the profile's default.
- The sequence length is the row's max_seq_length (LitGPT: `model.max_seq_length =
  min(longest sample, train.max_seq_length)`, batches padded to their longest sample), so the
  estimate is the run's peak, at the longest (truncated) sample; rows whose notes say samples
  are shorter are noted. Where the framework caps the stated length (`SEQ_LEN_CAPS`:
  fms-hf-tuning at the tokenizer's model_max_length) the cap is used.
- The figure is compared through the counter the row names; LitGPT's scripts print
  `torch.cuda.max_memory_allocated()`, the allocated slice (no CUDA context, no cache).

The data tables named above (`MODEL_SOURCES`, `FRAMEWORK_PINS`, `FRAMEWORK_AT_COMMIT`, the recipe
configs, Unsloth banner versions...) live in `training_corpus_sources`, each with its source.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from training_corpus_sources import (
    ATTENTION_INPUTS,
    AXOLOTL_NORMS_LEFT_FP32,
    FRAMEWORK_AT_COMMIT,
    FRAMEWORK_DEFAULTS,
    FRAMEWORK_PINS,
    FUSED_QKV,
    GPU_NAMES,
    HUB_DEVICES_NOT_ONE,
    LITGPT_HUB_00AF8B0,
    MODEL_SOURCES,
    PURE_BF16,
    RECIPE_CONFIGS,
    SEQ_LEN_CAPS,
    TARGET_ROLE,
    TASK_OF_METHOD,
    TORCHTITAN_COMPILED_LOSS,
    UNMODELLED_SETTINGS,
    UNSLOTH_BANNER_VERSIONS,
)

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "training_corpus"
HALVES = (
    "development",
    "held_out",
    "held_out_2",
    "held_out_3",
    "held_out_4",
    "held_out_5",
    "held_out_6",
    "held_out_7",
    "held_out_8",
)

FRAMEWORKS = (
    "litgpt",
    "torchtune",
    "axolotl",
    "hf-trainer",
    "unsloth",
    "deepspeed",
    "accelerate-fsdp",
    "custom",
)
COUNTERS = ("max_memory_allocated", "max_memory_reserved", "peak_memory_active", "nvml", "unknown")
OUTCOMES = ("ok", "oom")
REQUIRED_KEYS = (
    "source_url",
    "source_id",
    "framework",
    "framework_version",
    "outcome",
    "counter",
    "as_written",
    "bytes",
    "gpu",
    "n_gpus",
    "under_specified",
    "missing",
    "settings_source",
    "notes",
    "settings",
    "excerpt",
)

# The spec quantity each counter is compared as (vramtui.measure.compare picks the ledger
# slice): torchtune's peak_memory_active is the allocator's active bytes, which track
# allocated; a counter the source does not name is compared as allocated and marked.
COUNTER_QUANTITY = {
    "max_memory_allocated": "max_memory_allocated",
    "peak_memory_active": "max_memory_allocated",
    "max_memory_reserved": "max_memory_reserved",
    "nvml": "nvml_used",
    "unknown": "max_memory_allocated",
}


NOT_AVAILABLE = "model config unavailable offline"


SEQ_CAP = re.compile(r"\bcap\b|truncat|may be shorter|samples are truncated", re.IGNORECASE)


@dataclass
class Row:
    file: str  # file name in rows/
    data: dict
    half: str

    @property
    def settings(self) -> dict:
        return self.data["settings"]

    @property
    def framework(self) -> str:
        return self.data["framework"]

    @property
    def counter(self) -> str:
        return self.data["counter"]

    @property
    def under_specified(self) -> bool:
        return bool(self.data["under_specified"])

    @property
    def is_oom(self) -> bool:
        return self.data["outcome"] == "oom"


@dataclass
class Sized:
    """One row's result. `status`: "sized" or "not sized" (`reason` says why)."""

    row: Row
    status: str
    reason: str = ""
    spec_dict: dict | None = None
    model_source: str = ""
    defaults: list[str] = field(default_factory=list)  # settings taken from vramtui's defaults
    approximations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    estimate_bytes: int | None = None  # the counter's slice at the worst stage, per GPU
    estimate_stage: str = ""
    error: float | None = None  # (estimate - measured) / measured
    verdict: str = ""  # OOM rows: fits | does_not_fit | cannot_tell | "" (no card)
    verdict_reason: str = ""

    def to_dict(self) -> dict:
        r = self.row
        return {
            "file": r.file,
            "half": r.half,
            "source_id": r.data["source_id"],
            "framework": r.framework,
            "counter": r.counter,
            "counter_compared_as": COUNTER_QUANTITY[r.counter],
            "outcome": r.data["outcome"],
            "under_specified": r.under_specified,
            "measured_bytes": r.data["bytes"],
            "as_written": r.data["as_written"],
            "status": self.status,
            "reason": self.reason,
            "model_source": self.model_source,
            "defaults": self.defaults,
            "approximations": self.approximations,
            "notes": self.notes,
            "estimate_bytes": self.estimate_bytes,
            "estimate_stage": self.estimate_stage,
            "error": self.error,
            "verdict": self.verdict,
            "verdict_reason": self.verdict_reason,
        }


def load_split(root: Path = CORPUS) -> dict[str, str]:
    """source_id -> half."""
    split = tomllib.loads((root / "split.toml").read_text(encoding="utf-8"))
    return {s: half for half in HALVES for s in split.get(half, {}).get("sources", [])}


def load_rows(root: Path = CORPUS) -> list[Row]:
    half_of = load_split(root)
    rows = []
    for path in sorted((root / "rows").glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        rows.append(Row(path.name, data, half_of.get(data.get("source_id", ""), "")))
    return rows


# ------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------


@cache
def resolve_arch(model: str):
    """(Architecture, where it came from) or (None, why not)."""
    from vramtui.models.hf_config import architecture_from_hf_config
    from vramtui.models.registry import lookup_model

    arch = lookup_model(model)
    if arch is not None:
        return arch, f"catalogue {arch.model_id}"
    if model not in MODEL_SOURCES:
        # a collector's remark after the model id ("meta-llama/Llama-2-7b-hf (as written:
        # Llama 2 7B)", "(LitGPT config Llama-2-7b-hf, random init)": random weights, the same
        # shapes): the id alone
        bare = re.sub(r"\s*\([^()]*\)\s*$", "", model)
        if bare != model and bare:
            arch, where = resolve_arch(bare)
            if arch is not None:
                return arch, f"{where}; the remark after the id dropped"
        return None, NOT_AVAILABLE
    kind, ref, why = MODEL_SOURCES[model]
    if kind == "catalogue":
        arch = lookup_model(ref)
        if arch is None:
            return None, NOT_AVAILABLE
        return arch, f"catalogue {ref} ({why})"
    config = json.loads((REPO / ref).read_text(encoding="utf-8"))
    arch = architecture_from_hf_config(config, model_id=model, source=f"{ref} ({why})")
    return arch, f"{ref} ({why})"


def _linear_names(arch) -> dict[str, str]:
    """Linear module leaf name -> group."""
    return {m.name: m.group for m in arch.modules() if m.lora_adaptable}


def map_targets(targets: list[str], arch) -> tuple[list[str], list[str]]:
    """The row's LoRA targets as the model's module leaf names, and notes on the mapping.

    LitGPT's flags (query, key, value, projection, mlp, head) and torchtune's names (q_proj,
    k_proj, v_proj, output_proj, mlp, output) become the Hugging Face modules they adapt: a
    model with fused qkv adapts that one module, `mlp` every MLP linear, `head` / `output`
    the LM head (none when the head is tied to the embedding). Other names are kept."""
    if any(t.startswith(("all-linear", "all linear")) for t in targets):
        return ["all-linear"], []
    linear = _linear_names(arch)
    out: list[str] = []
    notes: list[str] = []

    def add(name: str) -> None:
        if name not in out:
            out.append(name)

    for t in targets:
        role = TARGET_ROLE.get(t)
        if role in ("q", "k", "v"):
            name = {"q": "q_proj", "k": "k_proj", "v": "v_proj"}[role]
            if name in linear:
                add(name)
            else:
                fused = [f for f in FUSED_QKV if f in linear]
                if fused:
                    add(fused[0])
                    notes.append(f"LoRA target {t!r} is part of the fused {fused[0]}")
                else:
                    add(t)
        elif role == "attn_out":
            outs = [
                n
                for n, g in linear.items()
                if g == "attention" and n not in ATTENTION_INPUTS and n not in FUSED_QKV
            ]
            for n in sorted(outs):
                add(n)
            if not outs:
                add(t)
        elif role == "mlp":
            mlps = sorted(n for n, g in linear.items() if g == "mlp")
            for n in mlps:
                add(n)
            if not mlps:
                add(t)
        elif role in ("gate", "up", "down"):
            name = f"{role}_proj"
            add(name if name in linear else t)
        elif role == "head":
            heads = [n for n, g in linear.items() if g == "lm_head"]
            if heads:
                add(heads[0])
            else:
                notes.append(f"LoRA target {t!r}: the LM head is tied to the embedding here")
        else:
            add(t)
    return out, notes


# ------------------------------------------------------------------------------------------
# Spec
# ------------------------------------------------------------------------------------------


def spec_has_framework_field() -> bool:
    """Does the spec schema know `[training] framework` (framework profiles)?"""
    from vramtui.errors import SpecError
    from vramtui.spec import spec_from_dict

    probe = {
        "schema_version": 1,
        "model": {"params": 1_000_000},
        "task": {"kind": "full_finetune"},
        "weights": {"format": "bf16"},
        "lengths": {"seq_len": 8},
        "batch": {"micro_batch": 1},
        "training": {
            "optimizer": "adamw",
            "master_weights_fp32": False,
            "grad_dtype": "bf16",
            "grad_checkpointing": "none",
            "framework": "custom",
        },
        "runtime": {"attention": "sdpa"},
        "placement": {"gpus": 1},
        "headroom": {"mode": "itemised"},
    }
    try:
        spec_from_dict(probe)
    except SpecError:
        return False
    return True


# Set `training.framework` from the row when the schema has the field (framework profiles).
SET_FRAMEWORK = spec_has_framework_field()


def _weights(s: dict, task: str, approx: list[str], defaults: list[str]) -> dict:
    quantize = str(s.get("quantize", "")).lower()
    precision = str(s.get("precision", "")).lower()
    if "nf4" in quantize or "4-bit" in quantize or "4bit" in quantize:
        w = {"format": "nf4"}
        if "dq" in quantize or "double" in quantize or "nf4-dq" in quantize:
            w["double_quant"] = True
        elif quantize.startswith("bnb.nf4"):
            w["double_quant"] = False  # LitGPT's bnb.nf4 (without -dq)
        else:
            w["double_quant"] = True
            defaults.append("weights.double_quant = true")
        return w
    if "8-bit" in quantize or "int8" in quantize or "8bit" in quantize:
        return {"format": "int8"}
    if not precision:
        defaults.append("weights.format = bf16")
        return {"format": "bf16"}
    if precision.startswith(("fp32", "fp16 mixed")):
        return {"format": "fp32"}
    if precision.startswith("fp16"):
        return {"format": "fp16"}
    return {"format": "bf16"}


def _training(s: dict, weights: dict, approx: list[str], defaults: list[str]) -> dict:
    from vramtui.spec_overrides import TRAINING_DEFAULTS

    t = dict(TRAINING_DEFAULTS)
    precision = str(s.get("precision", "")).lower()
    # LitGPT / Fabric's "bf16-true" names pure bf16 whatever the remark after it
    if (
        precision in PURE_BF16
        or precision.startswith("bf16-true (")
        or (precision.startswith("bf16") and "no fp32 master" in precision)
    ):
        t.update(master_weights_fp32=False, grad_dtype="bf16", optimizer_state_dtype="bf16")
    elif weights["format"] == "fp32":
        t.update(master_weights_fp32=False, grad_dtype="fp32", optimizer_state_dtype="fp32")
    elif not precision:
        defaults.append("precision (fp32 master weights, bf16 gradients, fp32 states)")
    opt = str(s.get("optimizer", "")).lower()
    if not opt:
        defaults.append("training.optimizer = adamw")
    elif "8bit" in opt or "8-bit" in opt or "adamwfp8" in opt:
        # torchao's AdamW8bit and AdamWFp8 (torchao/optim/subclass_8bit.py and subclass_fp8.py
        # at ca17609a: `zeros(shape, block_size=256)` -> uint8 / float8_e4m3fn codes, 1 B a
        # value, and `torch.zeros(codes.numel() // block_size)`, one fp32 scale per 256; adam.py
        # quantises both states of every tensor of >= 4,096 values) hold what bitsandbytes'
        # 8-bit AdamW does, 1 B + 4 / 256 B a state value: the spec's adamw_8bit.
        t["optimizer"] = "adamw_8bit"
        t.pop("optimizer_state_dtype", None)
    elif "adafactor" in opt:
        t["optimizer"] = "adafactor"
    elif "paged" in opt:
        t["optimizer"] = "adamw"
        if SET_FRAMEWORK:
            t["optimizer_placement"] = "paged"
        else:
            approx.append(f"optimizer {s['optimizer']!r} sized as adamw (no paged field)")
    elif "4bit" in opt:
        # torchao's AdamW4bit (subclass_4bit.py at ca17609a: two 4-bit codes packed per uint8,
        # one fp32 scale per 128 values: 0.5 + 4 / 128 B a state value) has no spec value:
        # optimizer_state_dtype is fp32 or bf16, adamw_8bit is 1 B + 4 / 256.
        t["optimizer"] = "adamw"
        approx.append(f"optimizer {s['optimizer']!r} sized as adamw (no 4-bit state)")
    elif "adam" in opt:
        t["optimizer"] = "adamw"
    elif "sgd" in opt:
        # torch.optim.SGD keeps a momentum buffer per parameter only when momentum != 0
        # ("no momentum" / "momentum 0": no state at all)
        plain = "no momentum" in opt or re.search(r"momentum\s*[=:]?\s*0(?:\.0+)?(?![\d.])", opt)
        t["optimizer"] = "sgd" if plain or "momentum" not in opt else "sgd_momentum"
        if t["optimizer"] == "sgd":
            t.pop("optimizer_state_dtype", None)
    else:
        approx.append(f"optimizer {s['optimizer']!r} sized as adamw")
    if "optimizer_state_dtype" in t and t["optimizer"] not in (
        "adamw",
        "sgd_momentum",
        "adafactor",
    ):
        t.pop("optimizer_state_dtype")
    if "grad_checkpointing" in s:
        t["grad_checkpointing"] = "full" if s["grad_checkpointing"] else "none"
    else:
        defaults.append("training.grad_checkpointing = none")
    if s.get("optimizer_in_bwd"):
        if SET_FRAMEWORK:
            if t.get("optimizer_placement") == "paged":
                approx.append(
                    "paged optimiser stepped in backward: sized as in-backward, its states in "
                    "PyTorch's allocator (one optimizer_placement in the spec)"
                )
            t["optimizer_placement"] = "in-backward"
        else:
            approx.append("optimizer_in_bwd: sized with a full set of gradients")
    loss = _loss_impl(str(s.get("loss", "")))
    if loss and SET_FRAMEWORK:
        t["loss_impl"] = loss
    if s.get("activation_offloading"):
        approx.append("activation offloading: not in the spec")
    return t


def _loss_impl(text: str) -> str | None:
    """The spec's loss_impl for a row's stated loss (None: not stated, the profile's default).

    LitGPT's finetune scripts chunk the head (lm_head_chunk_size=128) and run cross-entropy on
    the bf16 chunks (litgpt/utils.py chunked_cross_entropy, no .float()); a fused kernel (Liger,
    Cut Cross-Entropy) never holds the logits; a plain torch.nn.CrossEntropyLoss on a model that
    returns fp32 logits (torchtune's TransformerDecoder before chunked output) is the full
    upcast."""
    t = text.lower()
    if not t:
        return None
    # Axolotl's CutCrossEntropyPlugin (rows write "Cut Cross Entropy (CutCrossEntropyPlugin)"):
    # integrations/cut_cross_entropy/args.py at 17fc747f99 `cut_cross_entropy: Optional[bool] =
    # True`, and pre_model_load's `cce_patch(cfg.model_config_type)` replaces the CausalLM
    # forward: the head and the loss fused, no logits.
    if (
        "cut_cross_entropy" in t
        or "cut cross entropy" in t
        or "cutcrossentropy" in t
        or "liger" in t
        or "fused" in t
    ):
        return "fused"
    if "chunked_cross_entropy" in t or "lm_head_chunk_size" in t:
        return "chunked-bf16"
    if "crossentropyloss" in t or "cross_entropy" in t:
        return "full-upcast"
    return None


def settings_source_devices(row: Row) -> tuple[int | None, str]:
    """(devices the row's config file sets, why) or (None, "") where it is not known here."""
    src = str(row.data.get("settings_source", ""))
    if not src.startswith(LITGPT_HUB_00AF8B0) or not src.endswith(".yaml"):
        return None, ""
    name = src[len(LITGPT_HUB_00AF8B0) :]
    devices = HUB_DEVICES_NOT_ONE.get(name, 1)
    why = (
        f"{name} at 00af8b0d9b sets devices: {devices}, and the config hub README says "
        "'All runs are single-GPU experiments, use --devices 4 to utilize more than one GPU' "
        "(the runs used the YAML as it is)"
    )
    return devices, why


def run_devices(row: Row, notes: list[str]) -> int:
    """The number of GPUs the row's run used: its config file's `devices` where that is known
    and fewer than the machine's GPUs, else the row's n_gpus."""
    n_gpus = int(row.data["n_gpus"])
    devices, why = settings_source_devices(row)
    if devices is not None and devices < n_gpus:
        notes.append(f"{devices} of the machine's {n_gpus} GPUs used: {why}")
        return devices
    return n_gpus


def _with_recipe_config(row: Row, s: dict, defaults: list[str]) -> dict:
    """The row's settings, with its recipe config's where it states none (RECIPE_CONFIGS)."""
    if row.data.get("settings_source"):
        return s
    version = str(row.data.get("framework_version", ""))
    distributed = int(row.data["n_gpus"]) > 1
    for (fw, prefix, model, method, multi), (config, values) in RECIPE_CONFIGS.items():
        if (
            row.framework != fw
            or not version.startswith(prefix)
            or s.get("model") != model
            or s.get("method") != method
            or multi != distributed
        ):
            continue
        taken = [k for k in values if k not in s]
        s = {**s, **{k: values[k] for k in taken}}
        if taken:
            defaults.append(
                f"{', '.join(taken)} from {config} at {prefix.split()[-1]} (the only recipe "
                "config for this model, method and device count; the README's table is of "
                "'recipes in torchtune')"
            )
        break
    return s


def _with_framework_defaults(row: Row, defaults: list[str]) -> dict:
    """The row's settings, with what its framework fixes at its commit where it states none."""
    s = dict(row.settings)
    version = str(row.data.get("framework_version", ""))
    for (fw, prefix), entries in FRAMEWORK_DEFAULTS.items():
        if row.framework != fw or not version.startswith(prefix):
            continue
        for key, value, multi_gpu, why in entries:
            if key in s or (multi_gpu and int(row.data["n_gpus"]) < 2):
                continue
            s[key] = value
            defaults.append(f"{key} = {value} ({fw}'s default: {why})")
    return s


def _framework_at_commit(row: Row, notes: list[str]) -> dict[str, str]:
    for (fw, prefix), (values, why) in FRAMEWORK_AT_COMMIT.items():
        if row.framework == fw and str(row.data.get("framework_version", "")).startswith(prefix):
            notes.append(f"framework settings at the row's commit: {why}")
            return dict(values)
    return {}


EXACT_VERSION = re.compile(r"\d+(\.\d+)*([.-]?(a|b|rc|post|dev)\d*)?")


def _versions(row: Row, notes: list[str]) -> dict[str, str]:
    """[training.versions] for a row: its library_versions, else its framework's pins."""
    from vramtui.spec import VERSIONED_LIBRARIES

    # The corpus states a row's versions in its [settings] (the settings the source states);
    # a top-level table is read too.
    stated = row.settings.get("library_versions") or row.data.get("library_versions") or {}
    out = {}
    for k, v in stated.items():
        if k not in VERSIONED_LIBRARIES:
            continue
        if EXACT_VERSION.fullmatch(str(v).strip()):
            out[k] = str(v).strip()
        else:  # a requirement range (">=0.43.3") names no version the run used
            notes.append(f"library version {k} {v!r} is a range, not a version: not used")
    banner = UNSLOTH_BANNER_VERSIONS.get(row.data.get("source_id", ""))
    if row.framework == "unsloth" and banner and "unsloth" not in out:
        out["unsloth"] = banner
        notes.append(f"unsloth {banner}: the release the notebook's banner printed")
    if out:
        return out
    for (fw, prefix), (pins, why) in FRAMEWORK_PINS.items():
        if row.framework == fw and str(row.data.get("framework_version", "")).startswith(prefix):
            notes.append(f"library versions from the framework's pins: {why}")
            return dict(pins)
    return {}


def _sharding(s: dict, n_gpus: int, approx: list[str], defaults: list[str]) -> str:
    text = str(s.get("sharding", "")).lower()
    if text.startswith("fsdp"):
        return "fsdp"
    if "zero3" in text or "zero-3" in text or "stage 3" in text:
        return "zero3"
    if "zero2" in text:
        return "zero2"
    if "zero" in text:
        approx.append("ZeRO stage not stated: sized as zero3")
        return "zero3"
    if n_gpus > 1:
        defaults.append("placement.data_parallel_sharding = none (not stated)")
    return "none"


def build_spec_dict(row: Row, arch) -> tuple[dict | None, str, list[str], list[str], list[str]]:
    """(spec dict or None, why not, defaults, approximations, notes) for one row."""
    from vramtui.spec_overrides import LORA_DEFAULTS

    defaults: list[str] = []
    approx: list[str] = []
    notes: list[str] = []
    s = _with_framework_defaults(row, defaults)
    s = _with_recipe_config(row, s, defaults)
    method = s.get("method")
    if method is None:
        return None, "method not stated (vramtui has no default task)", [], [], []
    task = TASK_OF_METHOD.get(method)
    if task is None:
        return None, f"method {method!r} is not one vramtui sizes", [], [], []
    weights = _weights(s, task, approx, defaults)
    if task == "lora" and weights["format"] == "nf4":
        task = "qlora"
        notes.append("LoRA on 4-bit weights: sized as qlora")
    if task == "qlora" and weights["format"] != "nf4":
        weights = {"format": "nf4", "double_quant": True}
        defaults.append("weights.format = nf4 (qlora without a stated quantisation)")
    if task == "full_finetune" and weights["format"] not in ("fp32", "bf16", "fp16"):
        return None, f"full fine-tune of {weights['format']} weights", [], [], []
    cp = int(s.get("context_parallel") or 1)
    # Ulysses / DeepSpeed sequence parallelism splits each sequence across GPUs as context
    # parallelism does ("ulysses sp 64", sequence_parallel_size: 64)
    sp = re.search(r"\d{1,6}", str(s.get("sequence_parallel") or ""))
    if sp and int(sp.group(0)) > 1:
        cp = max(cp, int(sp.group(0)))
    if cp > 1:
        return (
            None,
            f"context parallelism ({cp} GPUs split each sequence) is not in vramtui's spec",
            [],
            [],
            [],
        )
    for key, what in UNMODELLED_SETTINGS.items():
        value = s.get(key)
        if value and not str(value).lower().startswith(("none", "false", "no ", "off")):
            approx.append(f"{key} = {value!r}: {what}")
    n_gpus = run_devices(row, notes)
    if n_gpus < int(row.data["n_gpus"]) and n_gpus == 1:
        # lora.py / full.py at 00af8b0d9b: FSDPStrategy(..., activation_checkpointing_policy=
        # {Block}) only when devices * num_nodes > 1, else strategy "auto": no sharding and no
        # activation checkpointing (the row's FSDP settings are those of the larger machine).
        s.pop("sharding", None)
        s["grad_checkpointing"] = False
    if "seq_len" in s:
        seq = int(s["seq_len"])
        if SEQ_CAP.search(row.data.get("notes", "")):
            notes.append(f"seq_len {seq} is a maximum: real samples are shorter")
        # The framework's cap on the row's max_seq_length (SEQ_LEN_CAPS, e.g. fms-hf-tuning
        # 2.5.0 tuning/data/setup_dataprocessor.py: `max_seq_length =
        # min(train_args.max_seq_length, tokenizer.model_max_length)`).
        version = str(row.data.get("framework_version", ""))
        for (fw, marker, model), (cap, why) in SEQ_LEN_CAPS.items():
            if row.framework == fw and marker in version and s.get("model") == model:
                if cap < seq:
                    notes.append(f"seq_len {seq} capped at {cap}: {why}")
                    seq = cap
                break
    else:
        seq = 2048
        defaults.append("lengths.seq_len = 2048")
    micro = s.get("micro_batch_size")
    if micro is None:
        micro = 1
        defaults.append("batch.micro_batch = 1")
    grad_accum = s.get("grad_accum")
    if grad_accum is None:
        gbs = s.get("global_batch_size")
        if gbs and gbs % (micro * n_gpus) == 0:
            grad_accum = gbs // (micro * n_gpus)
        else:
            grad_accum = 1
    attention = str(s.get("attention", "")).lower()
    if "flash" in attention:
        attn = "flash"
    elif "eager" in attention:
        attn = "eager"
    else:
        attn = "sdpa"
        if not attention:
            defaults.append("runtime.attention = sdpa")
    d = {
        "schema_version": 1,
        "name": f"training corpus {row.file}",
        "model": {"id": s["model"]},
        "task": {"kind": task},
        "weights": weights,
        "lengths": {"seq_len": seq},
        "batch": {"micro_batch": int(micro), "grad_accum": int(max(1, grad_accum))},
        "training": _training(s, weights, approx, defaults),
        "runtime": {"attention": attn},
        "placement": {
            "gpus": n_gpus,
            # torchtitan's name for it is tensor_parallel_degree
            "tensor_parallel": int(
                s.get("tensor_parallel") or s.get("tensor_parallel_degree") or 1
            ),
            "pipeline_parallel": int(s.get("pipeline_parallel") or 1),
            "data_parallel_sharding": "none",
        },
        "headroom": {"mode": "itemised"},
    }
    d["placement"]["data_parallel_sharding"] = _sharding(s, n_gpus, approx, defaults)
    if SET_FRAMEWORK:
        d["training"]["framework"] = row.framework
        versions = _versions(row, notes)
        if versions:
            d["training"]["versions"] = versions
        if d["placement"]["data_parallel_sharding"] != "none":
            d["training"].update(_framework_at_commit(row, notes))
        if (
            task == "qlora"
            and "fms-hf-tuning" in str(row.data.get("framework_version", ""))
            and n_gpus == 1
        ):
            # fms-acceleration 24bdadb framework_plugin_bnb.py model_loader loads the 4-bit
            # model on the one GPU and, with no_peft_model (baseline-peft-bnb), warns "PEFT
            # preparation will be managed by SFTTrainer and will cause a slowdown in training
            # speed due to extraneous dtype casting": TRL 0.13.0 SFTTrainer.__init__ runs
            # PEFT 0.13.2 prepare_model_for_kbit_training (16-bit parameters to fp32) and, under
            # bf16, peft_module_casting_to_bf16 (the embedding and LM head back to bf16, the
            # norms left fp32). Under FSDP the plugin loads with low_cpu_mem_usage and TRL skips
            # both for a sharded QLoRA model whose 4-bit parameters are on the CPU or meta
            # device (not checked for these rows): left unset there.
            d["training"]["fp32_norms"] = True
            notes.append(
                "fms-hf-tuning's SFTTrainer runs prepare_model_for_kbit_training on a 4-bit "
                "model on one GPU (norms in fp32): fp32_norms = true"
            )
        if (
            task == "qlora"
            and row.framework == "axolotl"
            and str(row.data.get("framework_version", "")).startswith(AXOLOTL_NORMS_LEFT_FP32)
            and d["placement"]["data_parallel_sharding"] == "none"
        ):
            # axolotl src/axolotl/utils/models.py load_model at dc71d8872a (2023-08-03 12:22):
            # `prepare_model_for_kbit_training(model, ...)` for adapter qlora with load_in_4bit
            # and nothing after it converts the norms back (78b9efb7f, the same evening, first
            # did so for flash attention on llama-derived models; from v0.5.0 for every LoRA /
            # QLoRA adapter). PEFT main on that date (src/peft/utils/other.py at ec267c644a)
            # casts every float16/bfloat16 parameter to float32, the embedding and LM head too.
            d["training"]["fp32_norms"] = True
            notes.append(
                "axolotl at dc71d8872a runs prepare_model_for_kbit_training and leaves the "
                "norms fp32: fp32_norms = true"
            )
            approx.append(
                "PEFT's prepare_model_for_kbit_training of 2023-08 also casts the embedding "
                "and LM head to fp32: not itemised (sized in bf16)"
            )
        ckpt_text = str(s.get("grad_checkpointing", "")).lower()
        if "torchtitan" in str(row.data.get("framework_detail", "")) and ckpt_text.startswith(
            "selective"
        ):
            # torchtitan's train_configs/llama3_8b.toml at 9dec370 (and
            # models/llama3/train_configs/llama3_8b.toml at e7c0cae): [activation_checkpoint]
            # mode = 'selective', selective_ac_option = 'op': parallelize_llama.py
            # _apply_ac_to_transformer_block keeps the outputs of _save_list's ops (every
            # second mm recomputed), not only each block's input (training_mechanisms.
            # torchtitan_op_layer_bytes); the bench had sized it as full checkpointing.
            if "op" not in ckpt_text:
                approx.append(f"grad_checkpointing {s['grad_checkpointing']!r}: sized as full")
            else:
                d["training"]["grad_checkpointing"] = "selective"
                d["training"]["selective_policy"] = "torchtitan-op"
                notes.append(
                    "torchtitan's selective_ac_option = 'op': grad_checkpointing = selective, "
                    "selective_policy = torchtitan-op"
                )
        if (
            "torchtitan" in str(row.data.get("framework_detail", ""))
            and str(row.data.get("framework_version", "")).startswith(TORCHTITAN_COMPILED_LOSS)
            and s.get("compile") is True
            and "loss" not in s
        ):
            # torchtitan components/loss.py at e7c0cae: build_cross_entropy_loss wraps
            # cross_entropy(pred.flatten(0, 1).float(), ...) in torch.compile under
            # training.compile (9dec370's train.py leaves it eager: "compiling loss function
            # causes CUDA errors"): loss_impl = "compiled" (training_mechanisms.COMPILED_LOSS_REF).
            d["training"]["loss_impl"] = "compiled"
            notes.append(
                "torchtitan at e7c0cae compiles its loss under training.compile: "
                "loss_impl = compiled"
            )
        if (
            row.framework == "axolotl"
            and s.get("activation_offloading") is True
            and d["training"]["grad_checkpointing"] == "full"
        ):
            # activation_offloading: true at axolotl 17fc747f99 (trl==1.1.0 in pyproject.toml):
            # loaders/model.py _apply_activation_checkpointing wraps every
            # GradientCheckpointingLayer in torch's checkpoint_wrapper, and
            # core/trainers/mixins/activation_checkpointing.py runs each training_step under
            # trl/models/activation_offloading.py OffloadActivations, whose pack hook copies
            # every saved tensor of 1,024 B or more (not a parameter) to pinned host memory:
            # outside the checkpointed layers that is each layer's input; the backward brings
            # one back per autograd node and frees the previous node's. The same two layer
            # inputs on the GPU as Unsloth's offloaded checkpointing (the forward's stash,
            # max_fwd_stash_size = 5 tensors in flight, is below the backward's peak).
            d["training"]["offload_checkpoints"] = True
            approx[:] = [a for a in approx if not a.startswith("activation offloading")]
            notes.append(
                "activation_offloading: true is checkpointed layers whose inputs TRL's "
                "OffloadActivations copies to host memory: offload_checkpoints = true"
            )
        if row.framework == "unsloth" and s.get("grad_checkpointing") is True:
            # get_peft_model(use_gradient_checkpointing = True): torch's checkpointing, the
            # layer inputs stay on the GPU (the profile's default is the "unsloth" mode)
            d["training"]["offload_checkpoints"] = False
    if s.get("cpu_offload"):
        if SET_FRAMEWORK:
            d["training"]["optimizer_placement"] = "cpu-offload"
            axolotl_fsdp = row.framework == "axolotl" and d["placement"][
                "data_parallel_sharding"
            ] == "fsdp"
            if axolotl_fsdp:
                # axolotl 17fc747f99 utils/trainer.py setup_fsdp_envs: fsdp_config.offload_params
                # -> FSDP_OFFLOAD_PARAMS=true; accelerate 1.13.0 (axolotl's pin)
                # FullyShardedDataParallelPlugin.set_cpu_offload: fsdp_version 2 and True ->
                # CPUOffloadPolicy(), which "offloads parameters, gradients, and optimizer
                # states to CPU. Sharded parameters are copied host-to-device before
                # all-gather" (torch.distributed.fsdp.CPUOffloadPolicy).
                d["training"]["offload_params"] = True
                notes.append(
                    "Axolotl's FSDP offload_params is accelerate's CPUOffloadPolicy under FSDP2 "
                    "(parameters, gradients and the optimizer step on the CPU): "
                    "offload_params = true"
                )
            if "fsdp_qlora" in str(row.data.get("framework_detail", "")):
                # train.py at e877dda: FSDP(..., cpu_offload=CPUOffload(offload_params=True)):
                # the sharded parameters and gradients live on the CPU too.
                d["training"]["offload_params"] = True
                notes.append(
                    "fsdp_qlora's use_cpu_offload is FSDP CPUOffload(offload_params=True) "
                    "(train.py at e877dda): offload_params = true"
                )
            if not d["training"].get("offload_params"):
                approx.append(
                    "CPU offload: the optimiser states and step on the CPU; parameters on the GPU"
                )
        else:
            approx.append("CPU offload: not in the spec, sized on the GPU")
    if task in ("lora", "qlora"):
        lora: dict = {}
        if "lora_r" in s:
            lora["rank"] = int(s["lora_r"])
        else:
            lora["rank"] = LORA_DEFAULTS["rank"]
            defaults.append(f"task.lora.rank = {LORA_DEFAULTS['rank']}")
        if "lora_alpha" in s:
            lora["alpha"] = s["lora_alpha"]
        if "lora_targets" in s:
            raw = s["lora_targets"]
            # one string ("all", LLaMA-Factory's lora_target: all) is one target, not characters
            raw = [raw] if isinstance(raw, str) else list(raw)
            if raw == ["all"]:
                raw = ["all-linear"]
                notes.append("lora_targets 'all' (LLaMA-Factory: every linear layer) as all-linear")
            targets, tnotes = map_targets(raw, arch)
            notes += tnotes
        else:
            targets = list(LORA_DEFAULTS["targets"])
            defaults.append("task.lora.targets = all-linear")
        lora["targets"] = targets
        if "lora_dropout" in s:
            lora["dropout"] = float(s["lora_dropout"])
        d["task"]["lora"] = lora
    return d, "", defaults, approx, notes


# ------------------------------------------------------------------------------------------
# Sizing and comparison
# ------------------------------------------------------------------------------------------


@cache
def find_card(name: str):
    from vramtui.catalog import load_catalog
    from vramtui.gpu_match import GpuMatchError, match_gpu

    if not name:
        return None
    catalog = load_catalog(use_user_config=False)
    try:
        gpu = match_gpu(catalog.gpus, name)  # as `vramtui fit --gpu` resolves it
    except GpuMatchError:
        gpu = None
    if gpu is None and name.strip().lower() in GPU_NAMES:
        gpu = catalog.gpus.get(GPU_NAMES[name.strip().lower()])
    return gpu


def size_row(row: Row) -> Sized:
    from vramtui.errors import VramtuiError
    from vramtui.fit_capacity import Margin, card_capacity, estimate_verdict
    from vramtui.ledger import estimate
    from vramtui.measure.compare import compare
    from vramtui.spec import Measurement, spec_from_dict, validate_against_architecture

    arch, where = resolve_arch(row.settings["model"])
    if arch is None:
        return Sized(row, "not sized", reason=where)
    d, why, defaults, approx, notes = build_spec_dict(row, arch)
    out = Sized(row, "sized", model_source=where, defaults=defaults, approximations=approx)
    out.notes = notes
    if d is None:
        out.status, out.reason = "not sized", why
        return out
    out.spec_dict = d
    try:
        spec = spec_from_dict(d, source=row.file)
        validate_against_architecture(spec, arch, source=row.file)
        est = estimate(spec, arch)
    except VramtuiError as exc:
        out.status, out.reason = "not sized", f"spec refused: {exc}"
        return out
    if row.is_oom:
        gpu = find_card(row.data.get("gpu", ""))
        if gpu is None:
            out.verdict_reason = f"card {row.data.get('gpu')!r} not in the GPU catalogue"
        else:
            v = estimate_verdict(est, card_capacity(gpu), Margin(fraction=0.0))
            out.verdict, out.verdict_reason = v.status, str(v.reason)
        out.estimate_bytes, out.estimate_stage = est.peak_bytes, est.peak_stage
        return out
    quantity = COUNTER_QUANTITY[row.counter]
    measured = tuple(
        Measurement(
            stage=stage,
            quantity=quantity,
            bytes=int(row.data["bytes"]),
            counter=row.counter,
            as_written=str(row.data["as_written"]),
            source=row.file,
        )
        for stage in est.stages
    )
    with_figures = replace(spec, measured=measured)
    comparisons = compare(with_figures, estimate(with_figures, arch))
    known = [c for c in comparisons if c.estimate_bytes is not None]
    if not known:
        out.status, out.reason = "not sized", "no ledger slice to compare with"
        return out
    worst = max(known, key=lambda c: c.estimate_bytes)
    out.estimate_bytes, out.estimate_stage = worst.estimate_bytes, worst.measurement.stage
    measured_bytes = int(row.data["bytes"])
    out.error = (worst.estimate_bytes - measured_bytes) / measured_bytes
    if row.counter == "unknown":
        out.notes.append("counter not named: compared with the allocated slice")
    return out
