"""Round 7 of the training calibration (development + held_out_2 + held_out_3 + held_out_4):
each mechanism worked by hand from the framework's code (file and commit in each test's
docstring), and the corpus bench's reading of the settings a row states."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

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
    axolotl_offload = 'framework = "axolotl"\noffload_checkpoints = true'
    offloaded = training_saved(_ctx(_spec(training=axolotl_offload, **common), model=GPT_OSS_20B))
    assert offloaded.kept == 23_592_960
    assert offloaded.layers_saved == 47_185_920
    axolotl = 'framework = "axolotl"'
    kept = training_saved(_ctx(_spec(training=axolotl, **common), model=GPT_OSS_20B))
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
            "sharding": "fsdp2 (reshard_after_forward true, TRANSFORMER_BASED_WRAP)",
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
    one_gpu = {**GPT_OSS_ROW, "method": "full", "cpu_offload": True}
    single = _row(one_gpu, "axolotl", AXOLOTL_17FC747)
    d, _, _, approx, _ = tc.build_spec_dict(single, _arch(GPT_OSS_20B))
    assert "offload_params" not in d["training"]
    assert any("parameters on the GPU" in a for a in approx)


# --------------------------------------------------------------------------- torchtitan

L8B = "meta-llama/Llama-3.1-8B-Instruct"  # hidden 4,096, 32 (8 K/V) heads of 128, MLP 14,336
TORCHTITAN_OP = 'framework = "custom"\nselective_policy = "torchtitan-op"'


def test_torchtitan_op_selective_checkpointing_keeps_every_other_matmul_by_hand():
    """torchtitan parallelisms/parallelize_llama.py at 9dec370 (models/llama3/ at e7c0cae, the
    same policy): _apply_ac_to_transformer_block with selective_ac_option = "op" wraps each
    TransformerBlock in checkpoint_wrapper(context_fn=create_selective_checkpoint_contexts(
    policy)), MUST_SAVE for _save_list's ops "except every second mm". models/llama/model.py
    runs wq, wk, wv, SDPA, wo, w1, w3, w2: mm 1, 3, 5, 7 (wq, wv, w1, w2) are kept, 2, 4, 6
    (wk, wo, w3) recomputed; the flash SDPA's output and its fp32 log-sum-exp are kept.

    Llama-3.1-8B, bf16, 2 x 8,192 = 16,384 tokens. Per token: the block input 4,096 + wq 4,096
    + wv 8 x 128 = 1,024 + w1 14,336 + w2 4,096 = 27,648 values x 2 B = 55,296 B; SDPA output
    4,096 x 2 B = 8,192 B and log-sum-exp 32 heads x 4 B = 128 B: 63,616 B. A layer: 63,616 x
    16,384 = 1,042,284,544 B; 32 layers: 33,353,105,408 B, where full checkpointing keeps 32 x
    16,384 x 4,096 x 2 B = 4,294,967,296 B.

    In the backward a layer's saved set is rebuilt: norms 2 x (fp32 input 16,384 + rsqrt 4 +
    normalised 8,192 + scaled 8,192) = 65,544 B, rotated q, k and v (4,096 + 2 x 1,024) x 2 B =
    12,288 B, attention output 8,192 B, gate, up, act, product 4 x 14,336 x 2 B = 114,688 B:
    200,712 B x 16,384 = 3,288,465,408 B + the SDPA log-sum-exp 2 x 32 x 8,192 x 4 B =
    2,097,152 B: 3,290,562,560 B, of which v, the attention output and the gate are the kept
    tensors themselves: 16,384 x 2 B x (1,024 + 4,096 + 14,336) = 637,534,208 B; rebuilt
    beside them 2,653,028,352 B."""
    common = dict(model=L8B, kind="full_finetune", seq=8192, mb=2)
    op = training_saved(_ctx(_spec(ckpt="selective", training=TORCHTITAN_OP, **common), model=L8B))
    assert op.kept == 1_042_284_544
    assert op.layers_saved == 33_353_105_408
    assert op.per_layer == 3_290_562_560
    assert op.recompute == 3_290_562_560 - 637_534_208 == 2_653_028_352
    custom = 'framework = "custom"'
    full = training_saved(_ctx(_spec(ckpt="full", training=custom, **common), model=L8B))
    assert full.layers_saved == 4_294_967_296
    # the default policy ("attention"): with SDPA it keeps every layer's saved set
    attn = training_saved(_ctx(_spec(ckpt="selective", training=custom, **common), model=L8B))
    assert attn.layers_saved == 32 * 3_290_562_560
    # the backward's first layer (last in backward) holds what it kept + the rebuilt set
    from vramtui.ledger.training_activations import backward_walk

    walk = backward_walk(_ctx(_spec(ckpt="selective", training=TORCHTITAN_OP, **common), L8B))
    points = {p.label: p for p in walk.points}
    assert points["the first decoder layer (last in backward)"].activations == (
        1_042_284_544 + 2_653_028_352
    )


def test_bench_maps_torchtitan_op_policy_to_selective_torchtitan_op():
    """The rows' grad_checkpointing = "selective (op policy per TOML)": train_configs/
    llama3_8b.toml at 9dec370 sets [activation_checkpoint] mode = 'selective',
    selective_ac_option = 'op'. It was sized as full checkpointing."""
    settings = {
        "model": L8B,
        "method": "full",
        "precision": "bf16 (FSDP2 mixed precision: param bf16, reduce fp32)",
        "optimizer": "AdamW",
        "micro_batch_size": 2,
        "seq_len": 8192,
        "grad_checkpointing": "selective (op policy per TOML)",
        "sharding": "fsdp2 (FSDP 8)",
    }
    row = _row(settings, "custom", "torchtitan 9dec370", n_gpus=8)
    row.data["framework_detail"] = "torchtitan"
    d, _, _, _, notes = tc.build_spec_dict(row, _arch(L8B))
    assert d["training"]["grad_checkpointing"] == "selective"
    assert d["training"]["selective_policy"] == "torchtitan-op"
    assert any("selective_ac_option" in n for n in notes)
    # full checkpointing rows stay full
    row = _row({**settings, "grad_checkpointing": "full"}, "custom", "torchtitan 9dec370", n_gpus=8)
    row.data["framework_detail"] = "torchtitan"
    d, *_ = tc.build_spec_dict(row, _arch(L8B))
    assert d["training"]["grad_checkpointing"] == "full"
    assert "selective_policy" not in d["training"]


def test_selective_policy_round_trips_and_refuses_unknown_values():
    from vramtui.errors import SpecError
    from vramtui.spec import dumps_spec, loads_spec

    spec = _spec(ckpt="selective", training=TORCHTITAN_OP)
    assert spec.training.selective_policy == "torchtitan-op"
    assert loads_spec(dumps_spec(spec)).training.selective_policy == "torchtitan-op"
    with pytest.raises(SpecError):
        _spec(ckpt="selective", training='selective_policy = "every-op"')


# --------------------------------------------------------------------------- fms-hf-tuning

SANTACODER = "bigcode/gpt_bigcode-santacoder"  # hidden 2,048, 24 layers, vocabulary 49,280
FMS = "fms-acceleration @ 24bdadb228 (2025-02-07); fms-hf-tuning sft_trainer"
FMS_ROW = {
    "method": "full",
    "precision": "torch_dtype bfloat16 (pure bf16 weights; no mixed precision flag)",
    "micro_batch_size": 4,
    "seq_len": 4096,
    "packing": True,
    "grad_checkpointing": True,
    "optimizer": "adamw_torch (TrainingArguments default, optim not set; transformers 4.48.1)",
    "attention": "flash_attention_2 (use_flash_attn: True)",
    "library_versions": {"transformers": "4.48.1"},
}


def test_fms_hf_tuning_caps_max_seq_length_at_the_tokenizers_by_hand():
    """fms-hf-tuning 2.5.0 (fms-acceleration refs/requirements.txt at 24bdadb) tuning/data/
    setup_dataprocessor.py process_dataargs: `max_seq_length = min(train_args.max_seq_length,
    tokenizer.model_max_length)`, returned into train_args.max_seq_length by
    tuning/sft_trainer.py train() before SFTConfig packs to it. The benchmark passes
    max_seq_len 4,096; the reference CSV's train_tokens_per_second / train_samples_per_second
    on one GPU is 17,188.262 / 8.393 = 2,048 for santacoder and 3,062.694 / 0.748 = 4,094.5
    (4,096) for Mistral-7B.

    Santacoder, 4 x 2,048 tokens: 24 checkpointed layer inputs 24 x 4 x 2,048 x 2,048 x 2 B =
    805,306,368 B (1,610,612,736 B at 4,096); logits 4 x 2,048 x 49,280 = 403,701,760, at 10 B
    each in the forward (2 B + the 4 B fp32 upcast + 4 B log-softmax, transformers 4.48.1) =
    4,037,017,600 B."""
    arch, _ = tc.resolve_arch(SANTACODER)  # tests/data/configs/gpt_bigcode-santacoder.json
    row = _row({**FMS_ROW, "model": SANTACODER}, "hf-trainer", FMS)
    d, _, _, _, notes = tc.build_spec_dict(row, arch)
    assert d["lengths"]["seq_len"] == 2048
    assert any("tokenizer.model_max_length" in n for n in notes)
    fsdp = _row({**FMS_ROW, "model": SANTACODER, "sharding": "fsdp"}, "accelerate-fsdp", FMS, 2)
    assert tc.build_spec_dict(fsdp, arch)[0]["lengths"]["seq_len"] == 2048
    # Mistral-7B keeps 4,096 (its tokenizer does not cap it: 4,096 tokens a sample in the CSV)
    mistral = "mistralai/Mistral-7B-v0.1"
    m_row = _row({**FMS_ROW, "model": mistral}, "hf-trainer", FMS)
    assert tc.build_spec_dict(m_row, _arch(mistral))[0]["lengths"]["seq_len"] == 4096
    # other frameworks' santacoder rows are not capped by fms-hf-tuning
    other = _row({**FMS_ROW, "model": SANTACODER}, "hf-trainer", "transformers 4.48.1")
    assert tc.build_spec_dict(other, arch)[0]["lengths"]["seq_len"] == 4096

    from vramtui.ledger import GpuLayout
    from vramtui.ledger.context import LedgerContext
    from vramtui.spec import spec_from_dict

    d = tc.build_spec_dict(row, arch)[0]
    assert d["batch"]["micro_batch"] == 4
    spec = spec_from_dict(d)
    est = estimate(spec, arch)
    sv = training_saved(LedgerContext(spec=spec, arch=arch, checkpoint=None, layout=GpuLayout(1)))
    assert sv.layers_saved == 805_306_368
    logits = [i for i in est.items if i.key == "logits.training"][0]
    assert logits.stage_bytes["forward"] == 4_037_017_600


# --------------------------------------------------------------------------- QLoRA, fp32 norms

MISTRAL = "mistralai/Mistral-7B-v0.1"  # hidden 4,096, 32 layers, MLP 14,336
QLORA_TARGETS = 'rank = 16\ntargets = ["q_proj", "k_proj", "v_proj", "o_proj"]\ndropout = 0.1'


def test_fp32_norms_before_4bit_linears_make_the_residual_stream_fp32_by_hand():
    """TRL 0.13.0 trl/trainer/sft_trainer.py SFTTrainer.__init__: a 4-bit model whose Params4bit
    are on the GPU goes through PEFT 0.13.2 src/peft/utils/other.py
    prepare_model_for_kbit_training (`param.data = param.data.to(torch.float32)` for every
    float16/bfloat16 parameter that is not Params4bit), then, with args.bf16,
    trl/trainer/utils.py peft_module_casting_to_bf16 casts lm_head and embed_tokens back to bf16
    and keeps every "norm" module in fp32. RMSNorm returns `self.weight * hidden_states.to(
    input_dtype)`: fp32. bitsandbytes 0.43.3 Linear4bit.forward: `x = x.to(self.compute_dtype)`
    ... `out = out.to(inp_dtype)`: gate and up return fp32, the product and down_proj too, and
    the residual add makes the stream fp32 after the first layer's MLP.

    Mistral-7B, QLoRA on q, k, v, o, 4 x 4,096 = 16,384 tokens, full checkpointing: the 32
    layer inputs 32 x 16,384 x 4,096 x 2 B = 4,294,967,296 B become 1 x 2 B + 31 x 4 B:
    + 31 x 16,384 x 4,096 x 2 B = 4,160,749,568 B = 8,455,716,864 B. The recomputed layer's
    frozen MLP saves gate, up and act (3 x 14,336 values a token) at 4 B instead of 2:
    + 16,384 x 14,336 x 3 x 2 B = 1,409,286,144 B."""
    common = dict(model=MISTRAL, kind="qlora", fmt="nf4", seq=4096, mb=4, ckpt="full")
    plain = training_saved(_ctx(_spec(lora=QLORA_TARGETS, **common), model=MISTRAL))
    fp32 = training_saved(
        _ctx(_spec(lora=QLORA_TARGETS, training="fp32_norms = true", **common), model=MISTRAL)
    )
    assert plain.layers_saved == 4_294_967_296
    assert fp32.layers_saved == 4_294_967_296 + 4_160_749_568 == 8_455_716_864
    assert fp32.per_layer - plain.per_layer == 1_409_286_144
    # 16-bit linears (LoRA on a bf16 base) run under autocast: no fp32 stream
    bf16 = dict(common, kind="lora", fmt="bf16")
    lora_spec = _spec(lora=QLORA_TARGETS, training="fp32_norms = true", **bf16)
    lora = training_saved(_ctx(lora_spec, model=MISTRAL))
    assert lora.layers_saved == 4_294_967_296


def test_bench_sets_fp32_norms_for_fms_single_gpu_qlora_rows_only():
    """fms-acceleration 24bdadb plugins/accelerated-peft framework_plugin_bnb.py model_loader:
    on one device with no_peft_model (baseline-peft-bnb) "PEFT preparation will be managed by
    SFTTrainer and will cause a slowdown in training speed due to extraneous dtype casting"."""
    qlora = {
        "model": MISTRAL,
        "method": "qlora",
        "precision": "torch_dtype bfloat16 + bf16 True (autocast)",
        "quantize": "bnb nf4 (BitsAndBytesConfig via baseline-peft-bnb)",
        "micro_batch_size": 4,
        "seq_len": 4096,
        "lora_r": 16,
        "lora_targets": ["q_proj", "k_proj", "v_proj", "o_proj"],
        "grad_checkpointing": True,
        "library_versions": {"transformers": "4.48.1", "peft": "0.13.2"},
    }
    d, _, _, _, notes = tc.build_spec_dict(_row(qlora, "hf-trainer", FMS), _arch(MISTRAL))
    assert d["training"]["fp32_norms"] is True
    assert any("prepare_model_for_kbit_training" in n for n in notes)
    fsdp = _row({**qlora, "sharding": "fsdp"}, "accelerate-fsdp", FMS, n_gpus=2)
    assert "fp32_norms" not in tc.build_spec_dict(fsdp, _arch(MISTRAL))[0]["training"]
    lora = _row({**qlora, "method": "lora", "quantize": ""}, "hf-trainer", FMS)
    assert "fp32_norms" not in tc.build_spec_dict(lora, _arch(MISTRAL))[0]["training"]
