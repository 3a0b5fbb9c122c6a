"""Round 7 of the training calibration (development + held_out_2 + held_out_3 + held_out_4):
each mechanism worked by hand from the framework's code (file and commit in each test's
docstring), and the corpus bench's reading of the settings a row states."""

from __future__ import annotations

import sys
from pathlib import Path

from vramtui.ledger import estimate
from vramtui.ledger.training_activations import training_saved

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import training_corpus_rows as tc
from test_training_frameworks import _arch, _ctx, _spec

GPT_OSS_20B = "openai/gpt-oss-20b"  # hidden 2,880, 24 layers, vocabulary 201,088


def _row(settings: dict, framework: str, version: str, n_gpus: int = 1, notes: str = ""):
    data = {
        "framework": framework,
        "framework_version": version,
        "n_gpus": n_gpus,
        "notes": notes,
        "settings": settings,
    }
    return tc.Row("synthetic.toml", data, "development")


# --------------------------------------------------------------------------- Axolotl


AXOLOTL_17FC747 = "axolotl commit 17fc747f99 (README asks axolotl>=0.16.1)"
GPT_OSS_ROW = {
    "model": GPT_OSS_20B,
    "seq_len": 4096,
    "precision": "bf16",
    "grad_checkpointing": True,
    "activation_offloading": True,
    "attention": "kernels-community/vllm-flash-attn3 (flash_attention: true)",
    "loss": "Cut Cross Entropy (CutCrossEntropyPlugin)",
    "micro_batch_size": 1,
    "quantize": "Mxfp4Config(dequantize=True) -> bf16 weights",
}


def test_axolotl_activation_offloading_keeps_two_layer_inputs_on_the_gpu_by_hand():
    """axolotl 17fc747f99, `activation_offloading: true` (trl==1.1.0 in pyproject.toml):
    loaders/model.py ModelLoader._apply_activation_checkpointing wraps every
    GradientCheckpointingLayer in torch's checkpoint_wrapper (ac_wrap_hf_model,
    core/trainers/mixins/activation_checkpointing.py), and ActivationOffloadingMixin runs each
    training_step under trl/models/activation_offloading.py OffloadActivations (v1.1.0): its
    pack hook copies every saved tensor of at least min_offload_size = 1,024 B that is not a
    parameter to pinned host memory, so what stays of each checkpointed layer is its input, on
    the host. The backward's unpack hook brings one back per autograd node and frees the
    previous node's tensors once the next node runs: one reloaded input and the last one.

    gpt-oss-20b, 1 x 4,096 tokens, bf16: a layer input is 4,096 x 2,880 x 2 B = 23,592,960 B;
    two on the GPU = 47,185,920 B, where torch's checkpointing keeps all 24 = 566,231,040 B."""
    row = _row({**GPT_OSS_ROW, "method": "lora", "lora_r": 8}, "axolotl", AXOLOTL_17FC747)
    d, _, _, approx, notes = tc.build_spec_dict(row, _arch(GPT_OSS_20B))
    assert d["training"]["offload_checkpoints"] is True
    assert d["training"]["grad_checkpointing"] == "full"
    assert not any(a.startswith("activation offloading") for a in approx)
    assert any("OffloadActivations" in n for n in notes)

    lora = 'rank = 8\ntargets = ["all-linear"]\ndropout = 0.0'
    common = dict(model=GPT_OSS_20B, seq=4096, mb=1, ckpt="full", lora=lora)
    offloaded = training_saved(
        _ctx(_spec(training='framework = "axolotl"\noffload_checkpoints = true', **common),
             model=GPT_OSS_20B)
    )
    assert offloaded.kept == 23_592_960
    assert offloaded.layers_saved == 47_185_920
    kept = training_saved(_ctx(_spec(training='framework = "axolotl"', **common), model=GPT_OSS_20B))
    assert kept.layers_saved == 566_231_040

    # Without gradient checkpointing Axolotl refuses the setting (utils/schemas/validation.py
    # check_activation_offloading_wo_gc): the bench leaves it as an approximation then.
    no_gc = _row(
        {**GPT_OSS_ROW, "grad_checkpointing": False, "method": "lora"}, "axolotl", AXOLOTL_17FC747
    )
    d, _, _, approx, _ = tc.build_spec_dict(no_gc, _arch(GPT_OSS_20B))
    assert "offload_checkpoints" not in d["training"]
    assert any(a.startswith("activation offloading") for a in approx)


def test_axolotl_cut_cross_entropy_plugin_is_the_fused_loss_by_hand():
    """axolotl 17fc747f99 integrations/cut_cross_entropy/args.py: `cut_cross_entropy:
    Optional[bool] = True`, so listing CutCrossEntropyPlugin enables it, and
    CutCrossEntropyPlugin.pre_model_load calls `cce_patch(cfg.model_config_type)`, which
    replaces the CausalLM forward by one that fuses the head and the loss. The rows write
    "Cut Cross Entropy (CutCrossEntropyPlugin)", which the bench read as no stated loss (the
    profile's full fp32 upcast). gpt-oss-20b at 4,096 tokens: 4,096 x 201,088 = 823,656,448
    logits; the upcast loss holds 2 + 4 + 4 = 10 B of each at the loss = 8,236,564,480 B; the
    fused loss none."""
    assert tc._loss_impl("Cut Cross Entropy (CutCrossEntropyPlugin)") == "fused"
    assert tc._loss_impl("Cut Cross Entropy") == "fused"
    assert tc._loss_impl("cut_cross_entropy (CutCrossEntropyPlugin)") == "fused"
    assert tc._loss_impl("torch.nn.CrossEntropyLoss") == "full-upcast"

    row = _row({**GPT_OSS_ROW, "method": "lora", "lora_r": 8}, "axolotl", AXOLOTL_17FC747)
    d, *_ = tc.build_spec_dict(row, _arch(GPT_OSS_20B))
    assert d["training"]["loss_impl"] == "fused"

    lora = 'rank = 8\ntargets = ["all-linear"]\ndropout = 0.0'
    common = dict(model=GPT_OSS_20B, seq=4096, mb=1, ckpt="full", lora=lora)
    arch = _arch(GPT_OSS_20B)
    upcast = estimate(_spec(training='framework = "axolotl"', **common), arch)
    fused = estimate(_spec(training='framework = "axolotl"\nloss_impl = "fused"', **common), arch)
    logits = [i for i in upcast.items if i.key == "logits.training"]
    assert logits and logits[0].stage_bytes["forward"] == 823_656_448 * 10
    assert [i for i in fused.items if i.key == "logits.training"][0].stage_bytes["forward"] == 0


def test_axolotl_fsdp2_offload_params_is_parameter_offload():
    """axolotl 17fc747f99 utils/trainer.py setup_fsdp_envs: `fsdp_config.offload_params` ->
    FSDP_OFFLOAD_PARAMS=true; accelerate 1.13.0 (axolotl's pin) reads it into
    FullyShardedDataParallelPlugin.cpu_offload, and set_cpu_offload makes it
    `CPUOffloadPolicy()` under fsdp_version 2, which "offloads parameters, gradients, and
    optimizer states to CPU" (torch.distributed.fsdp.CPUOffloadPolicy). The bench had moved the
    optimiser only, leaving gpt-oss-20b's 20,914,757,184 bf16 parameters (41.8 GB) and their
    gradients sharded on the GPUs."""
    row = _row(
        {
            **GPT_OSS_ROW,
            "method": "full",
            "optimizer": "adamw_torch_fused",
            "sharding": "fsdp2 (reshard_after_forward true, TRANSFORMER_BASED_WRAP GptOssDecoderLayer)",
            "cpu_offload": True,
        },
        "axolotl",
        AXOLOTL_17FC747,
        n_gpus=2,
    )
    d, _, _, approx, notes = tc.build_spec_dict(row, _arch(GPT_OSS_20B))
    assert d["placement"]["data_parallel_sharding"] == "fsdp"
    assert d["training"]["offload_params"] is True
    assert d["training"]["optimizer_placement"] == "cpu-offload"
    assert not any("parameters on the GPU" in a for a in approx)
    assert any("CPUOffloadPolicy" in n for n in notes)
    # Without FSDP (one GPU, DeepSpeed...), the row's cpu_offload stays the optimiser's.
    single = _row({**GPT_OSS_ROW, "method": "full", "cpu_offload": True}, "axolotl", AXOLOTL_17FC747)
    d, _, _, approx, _ = tc.build_spec_dict(single, _arch(GPT_OSS_20B))
    assert "offload_params" not in d["training"]
    assert any("parameters on the GPU" in a for a in approx)
