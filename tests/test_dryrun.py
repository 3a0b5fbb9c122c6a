"""The dry run: a meta-device trace of the real transformers code, checked by hand, against
the ledger, and against a real run of the same tiny model on the CPU.

Tiny Llama used throughout: hidden 64, intermediate 128, 2 layers, 4 heads of 16, 2 KV heads,
vocabulary 128, untied head, bf16. Its parameters, counted by hand:
  embedding 128 x 64 = 8,192; lm_head 8,192; final norm 64;
  per layer: q, o 64 x 64 = 4,096 each; k, v 64 x 32 = 2,048 each (12,288);
             gate, up, down 64 x 128 = 8,192 each (24,576); two norms 2 x 64 = 128
             -> 36,992; two layers 73,984;
  total 8,192 + 8,192 + 64 + 73,984 = 90,432 parameters = 180,864 B in bf16.
"""

from __future__ import annotations

import builtins
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.dryrun import DryRunError, dry_run_renderable, dry_run_to_dict, run_dry_run
from vramtui.dryrun.compare import compare
from vramtui.errors import VramtuiError
from vramtui.ledger import estimate
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.spec import loads_spec

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from vramtui.dryrun.command import trace_spec

TINY_PARAMS = 90_432
TINY_BYTES = TINY_PARAMS * 2

LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
}
# Qwen2: biases on q, k, v; tied embeddings.
QWEN2 = {**LLAMA, "model_type": "qwen2", "tie_word_embeddings": True}
# Qwen3: per-head q and k RMSNorms; explicit head_dim.
QWEN3 = {**LLAMA, "model_type": "qwen3", "head_dim": 16}
# Mixtral: 4 experts, top-2, fused expert tensors and a router.
MIXTRAL = {**LLAMA, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}


def _arch(config: dict, name: str = "tiny"):
    return architecture_from_hf_config(dict(config), model_id=name, source="test config")


def _spec(text_parts: list[str]):
    return loads_spec("\n\n".join(["schema_version = 1", *text_parts]) + "\n")


def train_spec(
    *,
    task: str = "full_finetune",
    attention: str = "sdpa",
    checkpointing: str = "none",
    seq_len: int = 32,
    micro_batch: int = 2,
    optimizer: str = "adamw",
    grad_accum: int = 1,
    weights: str = 'format = "bf16"',
    lora: str | None = None,
    master: bool = True,
):
    state = '\noptimizer_state_dtype = "fp32"' if optimizer in ("adamw", "sgd_momentum") else ""
    parts = [
        '[model]\nid = "tiny"',
        f'[task]\nkind = "{task}"',
    ]
    if lora:
        parts.append(f"[task.lora]\n{lora}")
    parts += [
        f"[weights]\n{weights}",
        f"[lengths]\nseq_len = {seq_len}",
        f"[batch]\nmicro_batch = {micro_batch}\ngrad_accum = {grad_accum}",
        (
            f'[training]\noptimizer = "{optimizer}"\nmaster_weights_fp32 = '
            f'{"true" if master else "false"}\ngrad_dtype = "bf16"{state}\n'
            f'grad_checkpointing = "{checkpointing}"'
        ),
        f'[runtime]\nattention = "{attention}"\nengine = "transformers"',
        "[placement]\ngpus = 1",
        '[headroom]\nmode = "itemised"',
    ]
    return _spec(parts)


def infer_spec(*, attention: str = "sdpa", prompt: int = 32, generated: int = 8, conc: int = 2):
    return _spec(
        [
            '[model]\nid = "tiny"',
            '[task]\nkind = "inference"',
            '[weights]\nformat = "bf16"',
            f"[lengths]\nprompt_tokens = {prompt}\ngenerated_tokens = {generated}",
            f"[batch]\nconcurrency = {conc}",
            (
                f'[runtime]\nattention = "{attention}"\nkv_cache_dtype = "bf16"\n'
                'engine = "transformers"'
            ),
            "[placement]\ngpus = 1",
            '[headroom]\nmode = "itemised"',
        ]
    )


def _ledger_group(est, stage: str, categories: tuple[str, ...]) -> int:
    return sum(i.bytes_at(stage) for i in est.known_items if i.category in categories)


# ------------------------------------------------------------------------- the package


def test_importing_the_package_does_not_import_torch():
    code = "import sys, vramtui.dryrun; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(Path(__file__).resolve().parent.parent / "tui")},
        check=True,
    )
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------- by hand


def test_tiny_llama_full_finetune_by_hand():
    arch = _arch(LLAMA)
    assert arch.param_count == TINY_PARAMS
    r = run_dry_run(train_spec(), arch)
    # a meta-device trace is a traced estimate, never "measured"; the counter keeps its name
    assert r.status == "traced_estimate" and r.counter == "dry-run live tensor bytes"
    assert r.device == "meta"
    assert r.trainable_params == TINY_PARAMS
    step = r.stage("optimizer_step")
    cats = step.peak_categories_bytes
    assert cats["parameters"] == TINY_BYTES
    assert cats["gradients"] == TINY_PARAMS * 2  # bf16 gradients
    assert cats["master_weights"] == TINY_PARAMS * 4  # fp32 master copy
    assert cats["optimizer_states"] == 2 * TINY_PARAMS * 4  # AdamW m and v in fp32
    assert cats["temporaries"] == TINY_PARAMS * 4  # foreach sqrt(v)
    assert step.peak_op == "aten._foreach_sqrt.default"
    # the forward holds no gradients (no accumulation), the states exist before it
    fwd = r.stage("forward").peak_categories_bytes
    assert "gradients" not in fwd
    assert fwd["optimizer_states"] == 2 * TINY_PARAMS * 4
    # every storage rounded up to 512 B never shrinks the figure
    assert all(s.peak_rounded_bytes >= s.peak_bytes for s in r.stages)
    assert r.baseline_bytes == TINY_BYTES + sum(
        b.numel() * b.element_size() for b in _rotary_buffers(LLAMA)
    )


def _rotary_buffers(config):
    import transformers

    cfg = transformers.AutoConfig.for_model(
        config["model_type"], **{k: v for k, v in config.items() if k != "model_type"}
    )
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    seen, out = set(), []
    for b in model.buffers():
        key = b.untyped_storage()._cdata
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


@pytest.mark.parametrize("config", [LLAMA, QWEN2, QWEN3, MIXTRAL], ids=lambda c: c["model_type"])
def test_model_states_match_the_ledger_exactly(config):
    arch = _arch(config)
    spec = train_spec()
    est = estimate(spec, arch)
    r = run_dry_run(spec, arch)
    step = r.stage("optimizer_step").peak_categories_bytes
    stage = "optimizer_step"
    assert step["parameters"] == _ledger_group(est, stage, ("weights", "quant_metadata"))
    assert step["gradients"] == _ledger_group(est, stage, ("gradients",))
    assert step["master_weights"] == _ledger_group(est, stage, ("master_weights",))
    assert step["optimizer_states"] == _ledger_group(est, stage, ("optimizer",))
    assert step.get("temporaries", 0) == _ledger_group(est, stage, ("transient",))


def test_lora_adapters_gradients_and_states_match_the_ledger():
    pytest.importorskip("peft")
    arch = _arch(LLAMA)
    spec = train_spec(task="lora", lora='rank = 4\ntargets = ["q_proj", "v_proj"]', master=False)
    est = estimate(spec, arch)
    r = run_dry_run(spec, arch)
    # r x (d_in + d_out): q 4 x (64 + 64), v 4 x (64 + 32), 2 layers = 2 x (512 + 384) = 1,792
    lora_params = 2 * (4 * (64 + 64) + 4 * (64 + 32))
    assert r.trainable_params == lora_params
    cats = r.stage("optimizer_step").peak_categories_bytes
    assert cats["parameters"] == TINY_BYTES  # frozen base
    assert cats["adapter"] == lora_params * 4 == _ledger_group(est, "optimizer_step", ("adapter",))
    assert (
        cats["gradients"] == lora_params * 4 == _ledger_group(est, "optimizer_step", ("gradients",))
    )
    assert cats["optimizer_states"] == 2 * lora_params * 4
    assert cats["optimizer_states"] == _ledger_group(est, "optimizer_step", ("optimizer",))


def test_qlora_base_weights_are_the_ledgers_packed_bytes():
    pytest.importorskip("peft")
    arch = _arch(LLAMA)
    spec = train_spec(
        task="qlora",
        weights='format = "nf4"\ndouble_quant = true',
        lora='rank = 4\ntargets = ["all-linear"]',
        master=False,
    )
    est = estimate(spec, arch)
    r = run_dry_run(spec, arch)
    cats = r.stage("forward").peak_categories_bytes
    # packed NF4 data + absmax of every block linear, the embedding, norms and head in bf16
    ledger = _ledger_group(est, "forward", ("weights", "quant_metadata"))
    assert cats["parameters"] == ledger
    # NF4 with double quant, per linear: n/2 B of data, one 8-bit absmax per 64 values and one
    # fp32 per 256 blocks: q, o (4,096 values) 2,048 + 64 + 4 = 2,116 B; k, v (2,048) 1,024 +
    # 32 + 4 = 1,060 B; gate, up, down (8,192) 4,096 + 128 + 4 = 4,228 B; with the two bf16
    # norms (256 B) 19,292 B per layer. Embedding and lm_head stay bf16 (2 x 16,384 B), final
    # norm 128 B: 2 x 19,292 + 32,896 = 71,480 B.
    assert cats["parameters"] == 71_480
    assert cats["adapter"] == _ledger_group(est, "forward", ("adapter",))
    assert any("nf4" in n and "stand-ins" in n for n in r.notes)


def test_kv_cache_matches_the_ledger_by_hand():
    arch = _arch(LLAMA)
    spec = infer_spec(prompt=32, generated=8, conc=2)
    r = run_dry_run(spec, arch)
    # 2 (K, V) x 2 layers x 2 KV heads x head_dim 16 x 2 B = 256 B per token
    per_token = 2 * 2 * 2 * 16 * 2
    assert r.stage("prefill").end_categories_bytes["kv_cache"] == 2 * 32 * per_token
    assert r.stage("decode").end_categories_bytes["kv_cache"] == 2 * 40 * per_token
    est = estimate(spec, arch)
    kv = next(i for i in est.items if i.key == "kv_cache")
    assert kv.bytes_at("prefill") == 2 * 32 * per_token
    assert kv.bytes_at("decode") == 2 * 40 * per_token


# ------------------------------------------------------------------------- attention kernels


def test_flash_vs_eager_saved_activations_by_hand():
    arch = _arch(LLAMA)
    sdpa = run_dry_run(train_spec(attention="sdpa"), arch)
    eager = run_dry_run(train_spec(attention="eager"), arch)
    assert "no s x s scores" in sdpa.attention_used and "eager" in eager.attention_used
    b, a, s, d, kv, layers = 2, 4, 32, 16, 2, 2
    # per layer, eager saves the b x a x s x s scores as fp32 softmax output (4 B) and bf16
    # probabilities (2 B), and K and V repeated to all heads (repeat_kv copies) instead of the
    # grouped K and V; flash saves the fp32 log-sum-exp b x a x s x 4 B instead.
    scores = b * a * s * s * (4 + 2)
    repeated = 2 * b * s * a * d * 2
    grouped = 2 * b * s * kv * d * 2
    lse = b * a * s * 4
    expected = layers * (scores + repeated - grouped - lse)
    assert expected == 112_640
    assert eager.saved_activations_bytes - sdpa.saved_activations_bytes == expected


def test_flash_kernel_never_materialises_scores():
    # one sequence of 512 tokens, inference: the scores would be 4 heads x 512^2 x 2 B = 2 MiB
    arch = _arch(LLAMA)
    flash = run_dry_run(infer_spec(attention="flash", prompt=512, conc=1), arch)
    eager = run_dry_run(infer_spec(attention="eager", prompt=512, conc=1), arch)
    scores_bf16 = 4 * 512 * 512 * 2
    assert flash.stage("prefill").peak_bytes < TINY_BYTES + scores_bf16
    # eager at its softmax: bf16 scores + fp32 copy + fp32 softmax (10 B per score)
    assert eager.stage("prefill").peak_bytes > TINY_BYTES + 4 * 512 * 512 * 10
    assert eager.stage("prefill").peak_categories_bytes.get("attention_mask", 0) == (
        512 * 512 * 2  # the float causal mask, 1 x 1 x 512 x 512 in bf16
    )


# ------------------------------------------------------------------------- against a real run


@pytest.mark.parametrize(
    "spec",
    [
        train_spec(),
        train_spec(attention="eager", checkpointing="full", grad_accum=2),
        infer_spec(),
        infer_spec(attention="eager"),
    ],
    ids=["train-sdpa", "train-eager-ckpt-accum", "infer-sdpa", "infer-eager"],
)
def test_meta_trace_equals_a_real_cpu_run(spec):
    """The same tiny model run for real on the CPU, storages counted the same way: every
    stage's peak and every category at the peak and at the end are identical."""
    arch = _arch(LLAMA)
    meta = trace_spec(spec, arch, device="meta")
    real = trace_spec(spec, arch, device="cpu")
    assert meta.stage_names == real.stage_names
    for m, c in zip(meta.stages, real.stages):
        assert m.peak_bytes == c.peak_bytes, m.stage
        assert dict(m.peak_categories_bytes) == dict(c.peak_categories_bytes), m.stage
        assert dict(m.end_categories_bytes) == dict(c.end_categories_bytes), m.stage
    assert meta.saved_activations_bytes == real.saved_activations_bytes


# ------------------------------------------------------------------------- against the ledger


def test_activations_are_compared_with_the_ledger_formula():
    arch = _arch(LLAMA)
    spec = train_spec()
    est = estimate(spec, arch)
    r = run_dry_run(spec, arch)
    fwd = next(c for c in compare(r, est) if c.stage == "forward")
    act = next(k for k in fwd.categories if k.group == "activations")
    ledger_act = next(i for i in est.items if i.key == "activations.training").bytes_at("forward")
    assert act.ledger_bytes == ledger_act
    assert act.difference_bytes == act.trace_peak_bytes - ledger_act
    # the saved set the trace measured is the ledger's formula within a few percent (the
    # input ids and labels and the rotary tables are on the trace's side only)
    saved = r.saved_activations_bytes
    assert abs(saved - ledger_act) / ledger_act < 0.05
    # parameters, gradients and optimiser states agree exactly at the optimiser step
    step = next(c for c in compare(r, est) if c.stage == "optimizer_step")
    for k in step.categories:
        if k.group in ("gradients", "optimizer"):
            assert k.difference_bytes == 0, k.group


# ------------------------------------------------------------------------- output


def test_to_dict_and_render():
    from rich.console import Console

    arch = _arch(LLAMA)
    spec = train_spec()
    est = estimate(spec, arch)
    r = run_dry_run(spec, arch)
    data = dry_run_to_dict(r, est)
    json.dumps(data)
    assert data["counter"] == "dry-run live tensor bytes"
    assert "tensor bytes only" in data["scope"]
    assert {s["stage"] for s in data["stages"]} == {
        "forward",
        "backward",
        "optimizer_step",
        "validation",
    }
    assert data["status"] == "traced_estimate"
    assert "measured_items" not in data
    assert {(i["status"], i["counter"]) for i in data["traced_items"]} == {
        ("traced_estimate", "dry-run live tensor bytes"),
        (
            "traced_estimate",
            "dry-run live tensor bytes, each storage rounded up to 512-byte blocks",
        ),
    }
    assert any(i["key"] == "overhead.cuda_context" for i in data["not_in_trace"])
    assert data["comparison"][0]["stage"] == "forward"
    # the traced items add up to each stage's peak
    items = r.traced_items()
    for s in r.stages:
        total = sum(i.bytes_at(s.stage) for i in items if i.key != "dryrun.rounding")
        assert total == s.peak_bytes
    console = Console(record=True, width=160)
    console.print(dry_run_renderable(r, est, unit="mib"))
    text = console.export_text()
    assert "≈ traced estimate (dry-run live tensor bytes)" in text
    assert "measured" not in text.replace("not measured on a GPU", "")
    assert "Not in the trace" in text
    assert "CUDA context" in text


# ------------------------------------------------------------------------- clear failures


def test_op_without_meta_kernel_names_the_op(monkeypatch):
    """An op with no meta kernel (simulated by overriding aten::rsqrt's Meta kernel) stops
    the trace with one line naming the op; the ledger is unaffected."""
    lib = torch.library.Library("aten", "IMPL")

    def no_kernel(*args, **kwargs):
        raise NotImplementedError(
            "Could not run 'aten::rsqrt' with arguments from the 'Meta' backend"
        )

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.impl("rsqrt", no_kernel, "Meta")
    try:
        with pytest.raises(DryRunError) as info:
            run_dry_run(infer_spec(), _arch(LLAMA))
    finally:
        lib._destroy()
    message = str(info.value)
    assert "aten.rsqrt" in message
    assert "analytic ledger still stands" in message
    assert "\n" not in message
    assert isinstance(info.value, VramtuiError)
    # and the trace works again once the kernel is back
    assert run_dry_run(infer_spec(), _arch(LLAMA)).stage("prefill").peak_bytes > 0


def test_missing_torch_explains_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.split(".")[0] in ("torch", "transformers"):
            raise ImportError(f"No module named '{name}'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(DryRunError) as info:
        run_dry_run(infer_spec(), _arch(LLAMA))
    message = str(info.value)
    # the README's install, from the source directory, with the extra's name kept
    assert "install the dry-run extra from the vramtui source directory: " in message
    assert message.endswith("pip install '.[dryrun]'")
    assert "\n" not in message


def test_model_transformers_cannot_build():
    config = {**LLAMA, "model_type": "llama"}
    arch = _arch(config)
    broken = {**config, "model_type": "no_such_model_type"}
    arch = arch.__class__(**{**arch.__dict__, "config": broken})
    with pytest.raises(DryRunError) as info:
        run_dry_run(infer_spec(), arch)
    assert "cannot build model_type 'no_such_model_type'" in str(info.value)
    assert "analytic ledger still stands" in str(info.value)


def test_bare_parameter_count_has_nothing_to_trace():
    with pytest.raises(DryRunError) as info:
        run_dry_run(infer_spec(), None)
    assert "bare parameter count" in str(info.value)


def test_local_config_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    r = run_dry_run(infer_spec(), None, local_config_dir=tmp_path)
    assert r.stage("prefill").peak_categories_bytes["parameters"] == TINY_BYTES


# ------------------------------------------------------------------ the CLI


def test_cli_estimate_dry_run_json(capsys):
    from vramtui.cli import main

    rc = main(
        [
            "estimate",
            "--model",
            "Qwen/Qwen2.5-0.5B-Instruct",
            "--seq",
            "256",
            "--generate",
            "16",
            "--batch",
            "2",
            "--dry-run",
            "--json",
        ]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    traced = data["dry_run"]
    assert traced["counter"] == "dry-run live tensor bytes"
    assert traced["status"] == "traced_estimate"
    assert {i["status"] for i in traced["traced_items"]} == {"traced_estimate"}
    # the ledger beside it is the ledger without a dry run: no traced figure replaced an
    # item or became measured
    args = ["estimate", "--model", "Qwen/Qwen2.5-0.5B-Instruct", "--seq", "256"]
    assert main([*args, "--generate", "16", "--batch", "2", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert data["items"] == plain["items"] and data["peak_bytes"] == plain["peak_bytes"]
    assert data["measured_beside_estimated"] == plain["measured_beside_estimated"] == []
    assert {i["status"] for i in data["items"]} <= {"estimated", "unknown"}
    assert [s["stage"] for s in traced["stages"]] == ["prefill", "decode"]
    # Qwen2.5-0.5B-Instruct: 494,032,768 parameters in bf16 (tied embeddings) = 988,065,536 B
    prefill = traced["stages"][0]["peak_categories_bytes"]
    assert prefill["parameters"] == 988_065_536
    # KV cache after a 2 x 256-token prefill: 2 (K, V) x 24 layers x 2 KV heads x 64 x 2 B
    # = 12,288 B per token, x 512 tokens
    assert prefill["kv_cache"] == 12_288 * 512 == 6_291_456
    assert data["param_count"] == 494_032_768


def test_cli_dry_run_without_torch_keeps_the_ledger(monkeypatch, capsys):
    """No torch: the ledger is printed all the same, the dry run's failure a note in it."""
    from vramtui.cli import main

    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    spec = "sample_specs/llama-3.1-8b-chat-8k-x16.toml"
    assert main(["estimate", spec, "--dry-run", "--json"]) == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert data["dry_run"]["status"] == "failed"
    assert "pip install '.[dryrun]'" in data["dry_run"]["error"]
    assert any(
        n.startswith("dry run failed") and "pip install '.[dryrun]'" in n for n in data["notes"]
    )
    assert data["items"] and out.err == ""


def test_cli_dry_run_refuses_the_simple_mode(capsys):
    from vramtui.cli import main

    assert main(["estimate", "--params", "7e9", "--bits", "16", "--dry-run"]) == 2
    assert "--dry-run needs a model architecture" in capsys.readouterr().err
