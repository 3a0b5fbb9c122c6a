"""Round 10 of the training corpus bench (after held_out_7's clean run): a collector's remark
after a model id, torchtune's FeedForward names as LoRA targets, and Thunder's pure-bf16
precision. Each with a counter-case."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import training_corpus_rows as tc


def test_a_remark_after_the_model_id_is_dropped():
    arch, where = tc.resolve_arch("meta-llama/Llama-2-7b-hf (as written: Llama 2 7B)")
    assert arch is not None and arch.model_id == "meta-llama/Llama-2-7b-hf"
    assert "remark after the id dropped" in where


def test_a_remark_does_not_make_an_unknown_model_known():
    arch, why = tc.resolve_arch("example/not-a-model-7b (as written: not a model)")
    assert arch is None and why == tc.NOT_AVAILABLE


def test_torchtunes_feed_forward_names_are_the_gate_down_and_up_projections():
    # torchtune/modules/feed_forward.py: self.w1 = gate_proj, self.w2 = down_proj,
    # self.w3 = up_proj
    arch, _ = tc.resolve_arch("meta-llama/Meta-Llama-3-8B")
    targets, _ = tc.map_targets(["q_proj", "w1", "w2", "w3"], arch)
    assert targets == ["q_proj", "gate_proj", "down_proj", "up_proj"]


def test_an_unknown_target_name_is_kept_for_the_spec_to_refuse():
    arch, _ = tc.resolve_arch("meta-llama/Meta-Llama-3-8B")
    targets, _ = tc.map_targets(["w9"], arch)
    assert targets == ["w9"]


def _spec_dict(stem: str) -> dict:
    row = next(r for r in tc.load_rows() if r.file == f"{stem}.toml")
    arch, _ = tc.resolve_arch(row.settings["model"])
    d, why, *_ = tc.build_spec_dict(row, arch)
    assert d is not None, why
    return d


def test_thunders_stated_pure_bf16_keeps_no_fp32_copy():
    # benchmark_litgpt.py: model.to(torch.bfloat16), fused AdamW on bf16 parameters: weights,
    # gradients and both moments in bf16
    t = _spec_dict("thunder-docs-benchmarking-litgpt__1")["training"]
    assert t["master_weights_fp32"] is False
    assert t["grad_dtype"] == "bf16" and t["optimizer_state_dtype"] == "bf16"


def test_a_mixed_precision_row_is_not_read_as_pure_bf16():
    # Axolotl's "bf16: true" is the Trainer's autocast over fp32 parameters
    t = _spec_dict("axolotl-examples-llama-2-readme__1")["training"]
    assert t["master_weights_fp32"] is True and t["optimizer_state_dtype"] == "fp32"


def _with_settings(stem: str, **changes):
    """The spec dict of row `stem` with some of its settings changed (a hand-made variant)."""
    import copy

    row = next(r for r in tc.load_rows() if r.file == f"{stem}.toml")
    data = copy.deepcopy(row.data)
    data["settings"].update(changes)
    variant = tc.Row(row.file, data, row.half)
    arch, _ = tc.resolve_arch(variant.settings["model"])
    return tc.build_spec_dict(variant, arch)


THUNDER = "thunder-examples-lit-gpt-readme__3"  # SGD without momentum, bf16-true, eager


def test_plain_sgd_has_no_state_and_bf16_true_keeps_no_fp32_copy():
    # torch.optim.SGD with momentum 0 keeps no buffer; Fabric's "bf16-true" is pure bf16
    d, _, _, approx, _ = _with_settings(THUNDER)
    t = d["training"]
    assert t["optimizer"] == "sgd" and "optimizer_state_dtype" not in t
    assert t["master_weights_fp32"] is False and t["grad_dtype"] == "bf16"
    assert not any(a.startswith("compile") for a in approx)  # "none (eager PyTorch)"


def test_sgd_with_momentum_keeps_its_buffer():
    d, *_ = _with_settings(THUNDER, optimizer="torch.optim.SGD (momentum 0.9)")
    assert d["training"]["optimizer"] == "sgd_momentum"


def test_a_compiled_model_is_listed_as_sized_eager():
    _, _, _, approx, _ = _with_settings(THUNDER, compile="torch.compile(model) (default mode)")
    assert any(a.startswith("compile = ") and "sized as the eager one" in a for a in approx)


def test_a_stated_bf16_without_fp32_master_is_pure_bf16():
    d, *_ = _with_settings(THUNDER, precision="bf16 (model.to(torch.bfloat16), no fp32 master)")
    assert d["training"]["master_weights_fp32"] is False


def test_bf16_mixed_with_an_fp32_master_is_not_pure():
    d, *_ = _with_settings(THUNDER, precision="bf16-mixed (fp32 master weights)")
    assert d["training"].get("master_weights_fp32") is not False


def test_torchtitans_tensor_parallel_degree_is_the_specs_tensor_parallel():
    # torchtitan's [parallelism] tensor_parallel_degree; 64 GPUs = FSDP 8 x TP 8
    row = next(r for r in tc.load_rows() if r.file == "torchtitan-pr1690-qwen3-32b-configs__4.toml")
    arch, _ = tc.resolve_arch(row.settings["model"])
    d, *_ = tc.build_spec_dict(row, arch)
    assert d["placement"]["tensor_parallel"] == 8 and d["placement"]["gpus"] == 64


def test_a_row_without_tensor_parallelism_stays_at_one():
    d, *_ = _with_settings(THUNDER)
    assert d["placement"]["tensor_parallel"] == 1
