"""Check the ledger against a real GPU: estimate versus measured, stage by stage.

Real model architectures from the catalogue, built with RANDOM weights (no download:
`AutoModelForCausalLM.from_config` on the device, bf16, attention "sdpa"), run through:

* inference: prefill (`logits_to_keep=1`, as `generate` does) and one decode step, at several
  prompt lengths and concurrencies;
* training: two steps of a full fine-tune with torch AdamW (bf16 parameters, so bf16 gradients
  and bf16 AdamW moments) and of LoRA r=16 on every block linear (peft; fp32 adapters), each
  with and without gradient checkpointing; the SECOND step is measured (steady state: the
  optimiser states exist, the gradients of the previous step were freed), then one validation
  forward under no_grad.

`vramtui.probe` measures every stage into a JSON-lines file (one probe run per case). For each
case the equivalent spec is built (`spec_from_dict`) and estimated (`vramtui.ledger.estimate`).
Like is compared with like, per stage, on the one GPU:

* torch `max_memory_allocated` vs the ledger's tensor items (every item but the `overhead.*`
  ones: the CUDA context and the allocator's fragmentation are not allocations);
* torch `max_memory_reserved` vs tensor items + `overhead.fragmentation`;
* NVML's used memory of this process (read at the stage end, not a peak) vs every item.

error % = (estimate - measured) / measured: positive = the ledger over-estimates.

    PYTHONPATH=tui python bench/gpu_validate.py                      # one CUDA GPU, <= 5 min
    PYTHONPATH=tui python bench/gpu_validate.py --budget-s 120 --models Qwen/Qwen2.5-0.5B-Instruct
    PYTHONPATH=tui python bench/gpu_validate.py --device cpu --small # proves it runs, no GPU

Writes bench/results/gpu-validate-<date>-<gpu name slug>.{json,md} and the probe's .jsonl
(`--device cpu`: gpu-validate-cpu-smoke-<date>.*; `--out-dir` to write elsewhere).
`--budget-s` (default 270) stops starting new cases when the time is spent and writes what it
has; a case the estimate says will not fit on the card is skipped with that reason.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import os
import platform
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from vramtui.ledger import estimate
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.models.registry import find_model
from vramtui.probe import Probe
from vramtui.probe.records import read_probe_file
from vramtui.spec import spec_from_dict, spec_to_dict

GIB = 2**30
NOT_MEASURED = "not measured (no CUDA)"
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# Full size, on one GPU (H100 80 GB): ids from catalog/models.
GPU_MODELS = [
    "Qwen/Qwen2.5-0.5B-Instruct",
    "meta-llama/Llama-3.2-1B-Instruct",
    "Qwen/Qwen2.5-1.5B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct",
]
GPU_INFERENCE = [(512, 1), (2048, 8), (8192, 4), (4096, 32)]  # (prompt_tokens, concurrency)
GPU_TRAINING = (4, 1024)  # (micro_batch, seq_len)
# --small: the same architectures shrunk to a few MB, for a CPU.
SMALL_MODELS = ["Qwen/Qwen2.5-0.5B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"]
SMALL_INFERENCE = [(32, 1), (64, 4)]
SMALL_TRAINING = (2, 64)
SMALL_SHAPE = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
}

COMPARISON_BASIS = [
    (
        "max_memory_allocated vs the ledger's tensor items at that stage (all items but overhead.*: "
        "overhead.cuda_context and overhead.fragmentation are excluded)"
    ),
    "max_memory_reserved vs tensor items + overhead.fragmentation",
    (
        "NVML process used (at the stage end, not a peak) vs every item, CUDA context included; "
        "where NVML cannot see this process (a container's PID namespace) the device's used memory "
        "minus its used memory before this script touched CUDA stands in, marked *"
    ),
    "error % = (estimate - measured) / measured; positive = over-estimate",
    (
        "weights are random (from_config), bf16, attention sdpa; inference runs prefill with "
        "logits_to_keep=1 and one decode step (generated_tokens=1); training measures the second "
        "of two steps (optimiser states present, previous gradients freed with set_to_none)"
    ),
]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


MIB = 2**20
CASE_STAGES = {
    "load": ("load",),
    "inference": ("prefill", "decode"),
    "full_finetune": ("forward", "backward", "optimizer_step", "validation"),
    "lora": ("forward", "backward", "optimizer_step", "validation"),
}


def fmt(n: int | None, unit: int) -> str:
    return "-" if n is None else f"{n / unit:,.3f}" if unit == GIB else f"{n / unit:,.1f}"


def pct(est: int | None, measured: int | None) -> float | None:
    if est is None or not measured:
        return None
    return round((est - measured) / measured * 100, 1)


# ------------------------------------------------------------------ models


@dataclass
class ModelUnderTest:
    model_id: str
    config: dict  # the HF config dict the model is built from
    arch: object  # vramtui Architecture of that same config
    label: str


def model_under_test(model_id: str, small: bool) -> ModelUnderTest:
    arch = find_model(model_id)
    if not small:
        return ModelUnderTest(model_id, dict(arch.config), arch, model_id)
    config = dict(arch.config)
    config.update(SMALL_SHAPE)
    if "head_dim" in config:
        config["head_dim"] = SMALL_SHAPE["hidden_size"] // SMALL_SHAPE["num_attention_heads"]
    config.pop("layer_types", None)
    if "max_window_layers" in config:
        config["max_window_layers"] = SMALL_SHAPE["num_hidden_layers"]
    label = f"{model_id} (shrunk)"
    small_arch = architecture_from_hf_config(
        config, model_id, f"{model_id}, shrunk by gpu_validate"
    )
    return ModelUnderTest(model_id, config, small_arch, label)


def build_model(torch, mut: ModelUnderTest, device: str):
    import transformers

    kwargs = {
        k: v
        for k, v in mut.config.items()
        if k not in ("quantization_config", "model_type", "architectures", "torch_dtype", "dtype")
    }
    hf_config = transformers.AutoConfig.for_model(mut.config["model_type"], **kwargs)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(
            hf_config, dtype=torch.bfloat16, attn_implementation="sdpa"
        )
    return model


# ------------------------------------------------------------------ specs


def inference_spec(mut: ModelUnderTest, prompt: int, concurrency: int) -> dict:
    return {
        "schema_version": 1,
        "name": f"{mut.label}: prefill {prompt} x {concurrency} + 1 decode step",
        "model": {"id": mut.model_id},
        "task": {"kind": "inference"},
        "weights": {"format": "bf16"},
        "lengths": {"prompt_tokens": prompt, "generated_tokens": 1},
        "batch": {"concurrency": concurrency},
        "runtime": {"attention": "sdpa", "kv_cache_dtype": "bf16", "engine": "transformers"},
        "placement": {"gpus": 1},
        "headroom": {"mode": "itemised"},
    }


def training_spec(
    mut: ModelUnderTest, kind: str, micro_batch: int, seq_len: int, checkpointing: bool
) -> dict:
    task: dict = {"kind": kind}
    if kind == "lora":
        task["lora"] = {"rank": 16, "alpha": 32, "targets": list(LORA_TARGETS)}
        training = {  # PEFT keeps the adapters in fp32: fp32 gradients and AdamW moments
            "optimizer": "adamw",
            "master_weights_fp32": False,
            "grad_dtype": "fp32",
            "optimizer_state_dtype": "fp32",
        }
    else:
        training = {  # bf16 parameters straight into torch AdamW: everything bf16
            "optimizer": "adamw",
            "master_weights_fp32": False,
            "grad_dtype": "bf16",
            "optimizer_state_dtype": "bf16",
        }
    training["grad_checkpointing"] = "full" if checkpointing else "none"
    return {
        "schema_version": 1,
        "name": f"{mut.label}: {kind} {micro_batch} x {seq_len}"
        + (", checkpointing" if checkpointing else ""),
        "model": {"id": mut.model_id},
        "task": task,
        "weights": {"format": "bf16"},
        "lengths": {"seq_len": seq_len},
        "batch": {"micro_batch": micro_batch},
        "training": training,
        "runtime": {"attention": "sdpa", "engine": "transformers"},
        "placement": {"gpus": 1},
        "headroom": {"mode": "itemised"},
    }


def estimate_by_stage(est) -> dict[str, dict[str, int]]:
    """Per stage: tensor items, tensor + fragmentation, everything (GPU 0 of one)."""
    out = {}
    for stage in est.stages:
        tensors = fragmentation = overhead = 0
        for item in est.known_items:
            if stage not in item.stages:
                continue
            b = item.gpu_bytes_at(stage, est.layout)[0]
            if item.category == "overhead":
                overhead += b
                if item.key == "overhead.fragmentation":
                    fragmentation += b
            else:
                tensors += b
        out[stage] = {
            "tensor_bytes": tensors,
            "reserved_bytes": tensors + fragmentation,
            "total_bytes": est.stage_peak_bytes[stage],
            "overhead_bytes": overhead,
        }
    return out


# ------------------------------------------------------------------ cases


@dataclass
class Case:
    case_id: str
    model: str
    kind: str  # load | inference | full_finetune | lora
    dims: dict
    spec: dict
    checkpointing: bool | None = None
    status: str = "pending"
    stages: list = field(default_factory=list)
    estimate: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


class Runner:
    def __init__(self, args, torch, probe_path: Path) -> None:
        self.args = args
        self.torch = torch
        self.device = args.device
        self.cuda = args.device == "cuda"
        self.probe_path = probe_path
        self.t0 = time.monotonic()
        self.cases: list[Case] = []
        self.card_total_bytes = None
        self.nvml_baseline = None
        self.gpu_name = "CPU"
        try:
            import peft  # noqa: F401

            self.peft_missing = None
        except ImportError:
            self.peft_missing = "peft is not installed (pip install peft): LoRA cases skipped"

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def out_of_time(self) -> bool:
        return self.elapsed() > self.args.budget_s

    def probe(self, case: Case) -> Probe:
        return Probe(self.probe_path, devices=[0] if self.cuda else None, run_name=case.case_id)

    def free(self) -> None:
        gc.collect()
        if self.cuda and not self.args.dry_run:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()

    def add(self, case: Case, arch) -> bool:
        """Estimate the case; False when it must not run (time, or it cannot fit)."""
        self.cases.append(case)
        spec = spec_from_dict(case.spec, case.case_id)
        case.spec = spec_to_dict(spec)
        est = estimate(spec, arch)
        case.estimate = estimate_by_stage(est)
        if self.args.dry_run:
            case.status = "not run (--dry-run): estimate only"
            return False
        if self.out_of_time():
            case.status = f"skipped: time budget of {self.args.budget_s:.0f} s spent"
            return False
        if self.card_total_bytes and est.peak_bytes > self.card_total_bytes:
            case.status = (
                f"skipped: the estimate ({est.peak_bytes / GIB:.1f} GiB at {est.peak_stage}) "
                f"exceeds the card ({self.card_total_bytes / GIB:.1f} GiB)"
            )
            return False
        return True

    def record(self, case: Case, st) -> None:
        rec = st.record or {}
        row = {"stage": st.name, "seconds": rec.get("seconds"), "error": rec.get("error")}
        row.update({f"estimate_{k}": v for k, v in case.estimate.get(st.name, {}).items()})
        dev = (rec.get("devices") or [None])[0] if rec.get("measured") else None
        if dev is None:
            row["measured"] = False
            row["reason"] = rec.get("reason")
        else:
            row["measured"] = True
            row["max_allocated_bytes"] = dev["max_memory_allocated_bytes"]
            row["max_reserved_bytes"] = dev["max_memory_reserved_bytes"]
            proc = dev.get("nvml_process_used_bytes")
            row["nvml_process_estimated"] = False
            if proc is None and dev.get("nvml_used_bytes") is not None and self.nvml_baseline:
                proc = dev["nvml_used_bytes"] - self.nvml_baseline
                row["nvml_process_estimated"] = True
            row["nvml_process_bytes"] = proc
            row["error_allocated_pct"] = pct(
                row.get("estimate_tensor_bytes"), row["max_allocated_bytes"]
            )
            row["error_reserved_pct"] = pct(
                row.get("estimate_reserved_bytes"), row["max_reserved_bytes"]
            )
            row["error_nvml_pct"] = pct(row.get("estimate_total_bytes"), proc)
        case.stages.append(row)

    def finish_case(self, case: Case, failure: BaseException | None = None) -> None:
        if failure is not None:
            oom = type(failure).__name__ == "OutOfMemoryError"
            first = (str(failure).strip().splitlines() or [""])[0]
            case.status = ("OOM: " if oom else "failed: ") + f"{type(failure).__name__}: {first}"
        elif any(r["measured"] for r in case.stages):
            case.status = "measured"
        else:
            case.status = NOT_MEASURED if not self.cuda else "not measured (see the probe file)"

    # -------------------------------------------------------------- the runs

    def run_load(self, mut: ModelUnderTest):
        spec = inference_spec(mut, *self.inference_dims()[0])
        case = Case(f"{slug(mut.label)}-load", mut.label, "load", {}, spec)
        if not self.add(case, mut.arch):
            return None
        probe = self.probe(case)
        model = None
        try:
            with probe.stage("load") as st:
                model = build_model(self.torch, mut, self.device)
            model.eval()
            self.record(case, st)
            self.finish_case(case)
        except Exception as exc:  # noqa: BLE001 - one failed case must not end the run
            self.finish_case(case, exc)
        return model

    def inference_dims(self):
        return SMALL_INFERENCE if self.args.small else GPU_INFERENCE

    def run_inference(self, mut: ModelUnderTest, model, prompt: int, concurrency: int) -> None:
        torch = self.torch
        spec = inference_spec(mut, prompt, concurrency)
        case = Case(
            f"{slug(mut.label)}-infer-p{prompt}-c{concurrency}",
            mut.label,
            "inference",
            {"prompt_tokens": prompt, "generated_tokens": 1, "concurrency": concurrency},
            spec,
        )
        if not self.add(case, mut.arch):
            return
        if model is None:
            case.status = "skipped: the model did not load (see its load case)"
            return
        probe = self.probe(case)
        vocab = int(mut.config["vocab_size"])
        out = past = None
        try:
            ids = torch.randint(0, vocab, (concurrency, prompt), device=self.device)
            with torch.inference_mode():
                with probe.stage("prefill", concurrency=concurrency, prompt_tokens=prompt) as st:
                    out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
                self.record(case, st)
                past = out.past_key_values
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                out = None
                with probe.stage(
                    "decode", concurrency=concurrency, prompt_tokens=prompt, generated_tokens=1
                ) as st:
                    out = model(
                        input_ids=nxt, past_key_values=past, use_cache=True, logits_to_keep=1
                    )
                self.record(case, st)
            self.finish_case(case)
        except Exception as exc:  # noqa: BLE001 - an OOM is a result, the run goes on
            self.finish_case(case, exc)
        finally:
            out = past = ids = nxt = None
            self.free()

    def run_training(self, mut: ModelUnderTest, kind: str, checkpointing: bool) -> None:
        torch = self.torch
        micro_batch, seq_len = SMALL_TRAINING if self.args.small else GPU_TRAINING
        spec = training_spec(mut, kind, micro_batch, seq_len, checkpointing)
        case = Case(
            f"{slug(mut.label)}-{kind}-b{micro_batch}-s{seq_len}"
            + ("-gc" if checkpointing else ""),
            mut.label,
            kind,
            {"batch": micro_batch, "seq_len": seq_len},
            spec,
            checkpointing=checkpointing,
        )
        if kind == "lora" and self.peft_missing:
            self.cases.append(case)
            case.estimate = estimate_by_stage(estimate(spec_from_dict(spec), mut.arch))
            case.status = f"skipped: {self.peft_missing}"
            return
        if not self.add(case, mut.arch):
            return
        model = opt = ids = None
        try:
            model = build_model(torch, mut, self.device)
            model.config.use_cache = False
            if checkpointing:
                model.gradient_checkpointing_enable(
                    gradient_checkpointing_kwargs={"use_reentrant": False}
                )
            if kind == "lora":
                import peft

                lora = peft.LoraConfig(
                    r=16, lora_alpha=32, target_modules=LORA_TARGETS, task_type="CAUSAL_LM"
                )
                model = peft.get_peft_model(model, lora)
            model.train()
            params = [p for p in model.parameters() if p.requires_grad]
            opt = torch.optim.AdamW(params, lr=1e-5)
            vocab = int(mut.config["vocab_size"])
            ids = torch.randint(0, vocab, (micro_batch, seq_len), device=self.device)
            dims = {"batch": micro_batch, "seq_len": seq_len}
            probe = self.probe(case)
            for step in range(2):
                measure = step == 1  # the steady state: states exist, old grads freed

                def stage(name, measure=measure):
                    return probe.stage(name, **dims) if measure else contextlib.nullcontext()

                with stage("forward") as st:
                    out = model(input_ids=ids, labels=ids, use_cache=False)
                    loss = out.loss
                if measure:
                    self.record(case, st)
                with stage("backward") as st:
                    loss.backward()
                if measure:
                    self.record(case, st)
                out = loss = None
                with stage("optimizer_step") as st:
                    opt.step()
                if measure:
                    self.record(case, st)
                opt.zero_grad(set_to_none=True)
            model.eval()
            with torch.no_grad(), probe.stage("validation", **dims) as st:
                model(input_ids=ids, labels=ids, use_cache=False)
            self.record(case, st)
            self.finish_case(case)
        except Exception as exc:  # noqa: BLE001 - an OOM is a result, the run goes on
            self.finish_case(case, exc)
        finally:
            model = opt = ids = out = loss = None
            self.free()

    def run(self, model_ids: list[str]) -> None:
        torch = self.torch
        if self.cuda and not self.args.dry_run:
            self.nvml_baseline = nvml_used_before_cuda()
            torch.zeros(1, device="cuda")  # the CUDA context, before any case
            props = torch.cuda.get_device_properties(0)
            self.card_total_bytes = int(props.total_memory)
            self.gpu_name = str(props.name)
        for model_id in model_ids:
            mut = model_under_test(model_id, self.args.small)
            model = self.run_load(mut)
            for prompt, concurrency in self.inference_dims():
                self.run_inference(mut, model, prompt, concurrency)
            model = None
            self.free()
            for kind, checkpointing in (
                ("full_finetune", False),
                ("full_finetune", True),
                ("lora", False),
                ("lora", True),
            ):
                self.run_training(mut, kind, checkpointing)


def nvml_used_before_cuda() -> int | None:
    """Device 0's used memory before this process creates its CUDA context."""
    try:
        import pynvml

        pynvml.nvmlInit()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
        handle = (
            pynvml.nvmlDeviceGetHandleByUUID(visible)
            if visible.startswith(("GPU-", "MIG-"))
            else pynvml.nvmlDeviceGetHandleByIndex(int(visible or 0))
        )
        v2 = getattr(pynvml, "nvmlMemory_v2", None)
        info = (
            pynvml.nvmlDeviceGetMemoryInfo(handle, version=v2)
            if v2 is not None
            else pynvml.nvmlDeviceGetMemoryInfo(handle)
        )
        return int(info.used)
    except Exception:  # noqa: BLE001 - no NVML: the process figure alone
        return None


# ------------------------------------------------------------------ reports


def summary(cases: list[Case]) -> dict:
    out = {}
    for key in ("error_allocated_pct", "error_reserved_pct", "error_nvml_pct"):
        errors = [r[key] for c in cases for r in c.stages if r.get(key) is not None]
        if not errors:
            out[key] = None
            continue
        out[key] = {
            "n": len(errors),
            "mean_abs_pct": round(sum(abs(e) for e in errors) / len(errors), 1),
            "max_abs_pct": round(max(abs(e) for e in errors), 1),
            "within_10_pct": sum(abs(e) <= 10 for e in errors),
            "under_estimates": sum(e < 0 for e in errors),
        }
    return out


def markdown(report: dict) -> str:
    unit_name = report["unit"]
    unit = GIB if unit_name == "GiB" else MIB

    def gib(n):
        return fmt(n, unit)

    lines = [
        f"# vramtui estimate versus measured: {report['gpu']}",
        "",
        f"* date: {report['date']}",
        f"* device: {report['gpu']}"
        + (f", {report['card_total_bytes'] / GIB:.1f} GiB" if report["card_total_bytes"] else ""),
        f"* driver: {report['versions'].get('driver', '-')}",
        "* versions: "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items() if k != "driver"),
        (
            f"* mode: {report['mode']}; budget {report['budget_s']:.0f} s, "
            f"took {report['elapsed_s']:.1f} s; {len(report['cases'])} cases"
        ),
        f"* probe file: `{report['probe_file']}`",
        "",
        "Comparison basis:",
        "",
        *[f"* {b}" for b in report["basis"]],
        "",
        (
            f"| case | stage | est. tensors {unit_name} | max_allocated {unit_name} | err % "
            f"| est. +frag {unit_name} | max_reserved {unit_name} | err % "
            f"| est. total {unit_name} | NVML process {unit_name} | err % |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in report["cases"]:
        rows = case["stages"] or [
            {"stage": st, "measured": False, "not_run": True}
            | {f"estimate_{k}": v for k, v in case["estimate"].get(st, {}).items()}
            for st in CASE_STAGES[case["kind"]]
        ]
        for r in rows:
            if r["measured"]:
                star = "*" if r.get("nvml_process_estimated") else ""
                measured = [
                    gib(r["max_allocated_bytes"]),
                    _pct_text(r["error_allocated_pct"]),
                    gib(r["max_reserved_bytes"]),
                    _pct_text(r["error_reserved_pct"]),
                    gib(r["nvml_process_bytes"]) + star,
                    _pct_text(r["error_nvml_pct"]),
                ]
            else:
                what = NOT_MEASURED if report["mode"].startswith("cpu") else "not measured"
                if r.get("not_run"):
                    what = "not run"
                measured = [what, "-", what, "-", what, "-"]
            stage = r["stage"] + (f" ({r['error']})" if r.get("error") else "")
            lines.append(
                f"| {case['case_id']} | {stage} | {gib(r.get('estimate_tensor_bytes'))} "
                f"| {measured[0]} | {measured[1]} | {gib(r.get('estimate_reserved_bytes'))} "
                f"| {measured[2]} | {measured[3]} | {gib(r.get('estimate_total_bytes'))} "
                f"| {measured[4]} | {measured[5]} |"
            )
    lines += ["", "## Cases", "", "| case | kind | dims | status |", "|---|---|---|---|"]
    for case in report["cases"]:
        dims = ", ".join(f"{k}={v}" for k, v in case["dims"].items()) or "-"
        kind = case["kind"] + (" + checkpointing" if case.get("checkpointing") else "")
        lines.append(f"| {case['case_id']} | {kind} | {dims} | {case['status']} |")
    lines += ["", "## Summary (absolute error %)", ""]
    for key, label in (
        ("error_allocated_pct", "tensors vs max_memory_allocated"),
        ("error_reserved_pct", "tensors + fragmentation vs max_memory_reserved"),
        ("error_nvml_pct", "everything vs NVML process used"),
    ):
        s = report["summary"].get(key)
        if s is None:
            lines.append(f"* {label}: {NOT_MEASURED if report['mode'].startswith('cpu') else '-'}")
        else:
            lines.append(
                f"* {label}: {s['n']} stages, mean {s['mean_abs_pct']} %, max {s['max_abs_pct']} %, "
                f"{s['within_10_pct']} within 10 %, {s['under_estimates']} under-estimates"
            )
    return "\n".join(lines) + "\n"


def _pct_text(value) -> str:
    return "-" if value is None else f"{value:+.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--small", action="store_true", help="shrunk models (for a CPU)")
    parser.add_argument("--budget-s", type=float, default=270.0, help="stop starting cases after")
    parser.add_argument("--models", nargs="+", help="catalogue ids (default: the built-in list)")
    parser.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument(
        "--dry-run", action="store_true", help="build the cases and their estimates, run nothing"
    )
    args = parser.parse_args(argv)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available() and not args.dry_run:
        print("gpu_validate: CUDA is not available; use --device cpu --small", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    date = dt.date.today().isoformat()
    model_ids = args.models or (SMALL_MODELS if args.small else GPU_MODELS)
    if args.dry_run:
        stem = f"gpu-validate-dry-run-{date}"
    elif args.device == "cpu":
        stem = f"gpu-validate-cpu-smoke-{date}"
    else:
        stem = f"gpu-validate-{date}-{slug(torch.cuda.get_device_name(0))}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    probe_path = args.out_dir / f"{stem}.jsonl"
    probe_path.unlink(missing_ok=True)

    runner = Runner(args, torch, probe_path)
    runner.run(model_ids)

    runs = read_probe_file(probe_path) if probe_path.exists() else []
    versions = dict(runs[0].versions) if runs else {"python": platform.python_version()}
    for r in runs[1:]:
        versions.update(r.versions)
    report = {
        "date": date,
        "gpu": runner.gpu_name,
        "card_total_bytes": runner.card_total_bytes,
        "versions": versions,
        "mode": "cpu, shrunk models"
        if args.device == "cpu"
        else "cuda" + (", shrunk models" if args.small else ""),
        "budget_s": args.budget_s,
        "elapsed_s": round(runner.elapsed(), 1),
        "nvml_baseline_bytes": runner.nvml_baseline,
        "probe_file": probe_path.name,
        "unit": "MiB" if args.small else "GiB",
        "basis": COMPARISON_BASIS,
        "cases": [vars(c) for c in runner.cases],
        "summary": summary(runner.cases),
    }
    (args.out_dir / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out_dir / f"{stem}.md").write_text(markdown(report))
    print(markdown(report))
    print(f"wrote {args.out_dir / stem}.{{json,md,jsonl}}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
