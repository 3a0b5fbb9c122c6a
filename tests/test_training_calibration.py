"""Mechanisms found by calibrating against published training peaks (tests/training_corpus/,
development half), each worked by hand from the framework's code (file and commit in each
test's docstring), and the corpus bench's reading of the settings a row states."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.ledger import estimate
from vramtui.ledger.training_activations import training_layer_bytes
from vramtui.training_profiles import SPEC_OVERRIDES, load_profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import training_corpus_rows as tc
from test_training_frameworks import L1B, L8B, _arch, _ctx, _item, _spec

LITGPT = 'framework = "litgpt"'
GEMMA2_2B = "google/gemma-2-2b-it"  # hidden 2304, 26 layers, 8 heads, soft-capped attention


# --------------------------------------------------------------------------- LM head


def test_litgpt_unties_the_head_of_a_tied_model_by_hand():
    """litgpt/model.py GPT.__init__: `self.lm_head = nn.Linear(n_embd, padded_vocab_size)`,
    its own parameter; litgpt/scripts/convert_hf_checkpoint.py copy_weights_hf_llama (commit
    00af8b0d9b): `state_dict["lm_head.weight"] = state_dict["transformer.wte.weight"]` when the
    checkpoint ties it. Llama-3.2-1B ties: one more 128,256 x 2,048 matrix in bf16 =
    525,336,576 B; PEFT keeps the tie, no copy."""
    arch = _arch(L1B)
    lit = estimate(_spec(training=LITGPT), arch)
    assert _item(lit, "weights.lm_head_untied").stage_bytes["forward"] == 525_336_576
    hf = estimate(_spec(), arch)
    assert not [i for i in hf.items if i.key == "weights.lm_head_untied"]
    # an untied model (Llama-3.1-8B has its own lm_head) gets no copy under LitGPT either
    lit8 = estimate(_spec(model=L8B, training=LITGPT), _arch(L8B))
    assert not [i for i in lit8.items if i.key == "weights.lm_head_untied"]


def test_litgpt_full_finetune_trains_the_untied_head_too_by_hand():
    """The untied head is a trainable parameter in litgpt/finetune/full.py (every parameter of
    GPT goes to the optimiser): Llama-3.2-1B's 1,235,814,400 parameters + 262,668,288 =
    1,498,482,688, bf16 gradients x 2 B = 2,996,965,376 B; AdamW fp32 states x 8 B =
    11,987,861,504 B (hf-trainer: 1,235,814,400 x 2 and x 8)."""
    arch = _arch(L1B)
    lit = estimate(_spec(kind="full_finetune", training=LITGPT), arch)
    hf = estimate(_spec(kind="full_finetune"), arch)
    assert _item(lit, "gradients").stage_bytes["optimizer_step"] == 2_996_965_376
    assert _item(hf, "gradients").stage_bytes["optimizer_step"] == 2_471_628_800
    assert _item(lit, "optimizer").stage_bytes["optimizer_step"] == 11_987_861_504


def test_litgpt_qlora_head_is_4bit_and_dequantised_whole_by_hand():
    """litgpt/finetune/lora.py (commit 00af8b0d9b) builds the model inside fabric.init_module
    with BitsandbytesPrecision, whose context replaces every torch.nn.Linear by the 4-bit class,
    the head included (transformers' bitsandbytes integration skips lm_head). Llama-3.1-8B head
    128,256 x 4,096 = 525,336,576 values: NF4 data 262,668,288 B, double-quant metadata
    8,208,384 absmax bytes + 4 x ceil(8,208,384 / 256) = 128,256 = 8,336,640 B more metadata.
    bitsandbytes 0.42.0 autograd/_functions.py MatMul4Bit.forward L516
    `F.dequantize_4bit(B, quant_state).to(A.dtype)`: the head whole in fp16 (Fabric's
    _Linear4bit.quantize quantises `weight.to(dtype=torch.half)`, so the quant state is fp16)
    and its bf16 copy for each chunk: 525,336,576 x (2 + 2) = 2,101,346,304 B at the forward's
    end and in the loss backward."""
    arch = _arch(L8B)
    lit = estimate(_spec(model=L8B, kind="qlora", fmt="nf4", training=LITGPT), arch)
    hf = estimate(_spec(model=L8B, kind="qlora", fmt="nf4"), arch)
    assert _item(lit, "weights.lm_head.nf4").stage_bytes["forward"] == 262_668_288
    assert _item(hf, "weights.lm_head.bf16").stage_bytes["forward"] == 1_050_673_152
    meta = "weights.quant_metadata"
    assert (
        _item(lit, meta).stage_bytes["forward"] - _item(hf, meta).stage_bytes["forward"]
        == 8_336_640
    )
    deq = _item(lit, "transient.dequantised_head")
    assert deq.stage_bytes == {"forward": 2_101_346_304, "backward": 2_101_346_304}
    assert not [i for i in hf.items if i.key == "transient.dequantised_head"]
    # LoRA on bf16 weights: nothing to dequantise
    lora = estimate(_spec(model=L8B, training=LITGPT), arch)
    assert not [i for i in lora.items if i.key == "transient.dequantised_head"]


def test_untied_copy_is_4bit_under_litgpt_qlora_by_hand():
    """Llama-3.2-1B under LitGPT QLoRA: the untied copy is an nn.Linear built in the same
    init_module, so 4-bit: 128,256 x 2,048 / 2 = 131,334,144 B data + double-quant metadata
    (4,104,192 blocks + 4 x 16,032 = 4,168,320 B) = 135,502,464 B."""
    lit = estimate(_spec(kind="qlora", fmt="nf4", training=LITGPT), _arch(L1B))
    assert _item(lit, "weights.lm_head_untied").stage_bytes["forward"] == 135_502_464


# --------------------------------------------------------------------------- bitsandbytes


def test_old_bitsandbytes_keeps_litgpts_reshaped_attention_output_by_hand():
    """litgpt/model.py CausalSelfAttention.forward (commit 00af8b0d9b): `y = y.reshape(B, T,
    head_size * n_head)` of scaled_dot_product_attention's `y.transpose(1, 2)` makes a new
    tensor, the 4-bit proj's input, which bitsandbytes 0.42.0 MatMul4Bit keeps
    (`ctx.tensors = (A, B)`). Llama-3.2-1B, 8 x 512 = 4,096 tokens, per layer: the normed
    attention and MLP inputs (2 x 2,048), down's input (8,192) and proj's input (32 heads x 64
    = 2,048), bf16: (4,096 + 8,192 + 2,048) x 2 x 4,096 = 117,440,512 B (the transformers
    model: 100,663,296 B, its o_proj input already saved)."""
    kw = {"kind": "qlora", "fmt": "nf4"}
    old_v = '\n[training.versions]\nbitsandbytes = "0.42.0"'
    new, _ = training_layer_bytes(_ctx(_spec(training=LITGPT, **kw)), 8, 512)
    old, why = training_layer_bytes(_ctx(_spec(training=LITGPT + old_v, **kw)), 8, 512)
    assert old - new == 117_440_512
    assert "reshaped into a new tensor by litgpt" in why
    hf_new, _ = training_layer_bytes(_ctx(_spec(**kw)), 8, 512)
    hf_old, _ = training_layer_bytes(_ctx(_spec(training=old_v.strip(), **kw)), 8, 512)
    assert hf_old - hf_new == 100_663_296


# --------------------------------------------------------------------------- loss


def test_fabric_casts_litgpts_logit_chunks_to_fp32_by_hand():
    """lightning/fabric/wrappers.py _FabricModule.forward: `output =
    precision.convert_output(output)`; HalfPrecision.convert_output casts every floating tensor
    to torch.get_default_dtype() (fp32). LitGPT's bf16 chunks become fp32 and
    chunked_cross_entropy keeps an fp32 log-softmax: Llama-3.2-1B, 1 x 512 tokens x 128,256 =
    65,667,072 logits x (4 + 4) = 525,336,576 B at the loss, forward and loss backward; an
    explicit loss_impl = "fused" still holds none."""
    arch = _arch(L1B)
    lit = estimate(_spec(mb=1, training=LITGPT), arch)
    item = _item(lit, "logits.training")
    assert item.stage_bytes["forward"] == 525_336_576
    assert item.stage_bytes["backward"] == 525_336_576
    fused = estimate(_spec(mb=1, training=LITGPT + '\nloss_impl = "fused"'), arch)
    assert _item(fused, "logits.training").stage_bytes["forward"] == 0


# --------------------------------------------------------------------------- attention


def _gemma2_ctx(training: str, softcap: bool = True):
    spec = _spec(model=GEMMA2_2B, training=training)
    ctx = _ctx(spec, model=GEMMA2_2B)
    if not softcap:
        config = {k: v for k, v in ctx.arch.config.items() if k != "attn_logit_softcapping"}
        ctx = replace(ctx, arch=replace(ctx.arch, config=config))
    return ctx


def test_litgpt_softcapped_attention_keeps_eager_scores_by_hand():
    """litgpt/model.py scaled_dot_product_attention (commit 00af8b0d9b): 'with softcapping we
    cannot use SDPA': tanh(scores / cap) * cap keeps tanh's bf16 output, softmax(dtype=float)
    its fp32 output, `.to(q.dtype)` the bf16 probabilities `scores @ v` keeps: 2 + 4 + 2 = 8 B
    per score. Gemma-2-2B, 2 sequences of 512, 8 heads: 2 x 8 x 512^2 x 8 = 33,554,432 B per
    layer, in place of SDPA's log-sum-exp 2 x 8 x 512 x 4 = 32,768 B."""
    with_cap, why = training_layer_bytes(_gemma2_ctx(LITGPT), 2, 512)
    without, _ = training_layer_bytes(_gemma2_ctx(LITGPT, softcap=False), 2, 512)
    assert with_cap - without == 33_554_432 - 32_768
    assert "soft-capped eager scores" in why
    # hf-trainer: the spec's runtime.attention (sdpa here) decides, soft-capping or not
    hf_cap, _ = training_layer_bytes(_gemma2_ctx(""), 2, 512)
    hf_without, _ = training_layer_bytes(_gemma2_ctx("", softcap=False), 2, 512)
    assert hf_cap == hf_without


def test_gemma2_four_norms_each_keep_their_fp32_input_by_hand():
    """Gemma 2 norms the attention and MLP outputs as well (transformers Gemma2DecoderLayer
    post_attention_layernorm / post_feedforward_layernorm; LitGPT Block post_attention_norm /
    post_mlp_norm), each RMSNorm keeping its fp32 input and rsqrt: LoRA (frozen norm weights)
    4 x 2,304 + 4 = 9,220 B per token, twice more than two norms: 2 x 1,024 tokens x 9,220 =
    18,882,560 B per layer."""
    ctx = _gemma2_ctx("")
    four, why = training_layer_bytes(ctx, 2, 512)
    two, _ = training_layer_bytes(replace(ctx, arch=replace(ctx.arch, model_type="llama")), 2, 512)
    assert four - two == 18_882_560
    assert "norms 4 x" in why


# --------------------------------------------------------------------------- profiles


def test_model_code_settings_are_not_spec_overrides():
    """unties_lm_head, quantizes_lm_head, softcap_attention_eager and fp32_model_output come
    with the framework's own code: LitGPT sets all four, hf-trainer none, and no spec field
    overrides them."""
    lit, hf = load_profile("litgpt"), load_profile("hf-trainer")
    for key in (
        "unties_lm_head",
        "quantizes_lm_head",
        "softcap_attention_eager",
        "fp32_model_output",
    ):
        assert lit.defaults[key] is True and hf.defaults[key] is False
        assert key not in SPEC_OVERRIDES
        assert "litgpt/" in lit.sources[key]


# --------------------------------------------------------------------------- the bench


def _row(settings: dict, framework: str = "litgpt", version: str = "commit 00af8b0d9b (x)"):
    data = {
        "framework": framework,
        "framework_version": version,
        "n_gpus": 1,
        "notes": "",
        "settings": {"model": L1B, "method": "qlora", "quantize": "bnb.nf4", **settings},
    }
    return tc.Row("synthetic.toml", data, "development")


def test_bench_maps_paged_optimiser_loss_and_pinned_bitsandbytes():
    """A LitGPT config-hub row: bnb.optim.PagedAdamW -> optimizer_placement = "paged"; the
    stated chunked loss -> chunked-bf16; bitsandbytes from LitGPT's pin at the row's commit
    (pyproject.toml bitsandbytes==0.42.0)."""
    row = _row(
        {
            "optimizer": "bnb.optim.PagedAdamW",
            "loss": "chunked (lm_head_chunk_size=128 + chunked_cross_entropy)",
        }
    )
    d, _, _, approx, notes = tc.build_spec_dict(row, _arch(L1B))
    t = d["training"]
    assert t["optimizer_placement"] == "paged"
    assert t["loss_impl"] == "chunked-bf16"
    assert t["versions"] == {"bitsandbytes": "0.42.0"}
    assert not any("paged" in a for a in approx)
    assert any("pins bitsandbytes==0.42.0" in n for n in notes)


def test_bench_stated_versions_win_and_other_losses_map():
    row = _row({"loss": "cut_cross_entropy (CutCrossEntropyPlugin)"})
    row.data["library_versions"] = {"bitsandbytes": "0.45.0", "torch": "2.5.0"}
    d, *_ = tc.build_spec_dict(row, _arch(L1B))
    assert d["training"]["versions"] == {"bitsandbytes": "0.45.0"}  # torch is not versioned
    assert d["training"]["loss_impl"] == "fused"
    plain = _row({"loss": "torch.nn.CrossEntropyLoss"}, framework="torchtune", version="0.1")
    d, *_ = tc.build_spec_dict(plain, _arch(L1B))
    assert d["training"]["loss_impl"] == "full-upcast"
    assert "versions" not in d["training"]  # no row versions, no pin known
    assert tc._loss_impl("") is None


def test_bench_in_backward_and_cpu_offload_use_the_spec_fields():
    row = _row({"optimizer_in_bwd": True}, framework="torchtune", version="0.1")
    row.data["settings"].update(method="lora", quantize="")
    d, *_ = tc.build_spec_dict(row, _arch(L1B))
    assert d["training"]["optimizer_placement"] == "in-backward"
    off = _row({"cpu_offload": True}, framework="deepspeed", version="0.14")
    off.data["settings"].update(method="lora", quantize="")
    d, *_ = tc.build_spec_dict(off, _arch(L1B))
    assert d["training"]["optimizer_placement"] == "cpu-offload"


def test_bench_sets_the_fsdp_wrap_of_the_rows_commit():
    """litgpt/finetune/lora.py at 00af8b0d9b: FSDPStrategy(auto_wrap_policy={Block}): every
    unit holds trainable LoRA parameters, so a frozen base is resharded ("sharded"), unlike
    the profile's 0.5.10 per-Linear wrap ("gathered"); other commits keep the profile's."""
    row = _row({"sharding": "fsdp"})
    row.data["n_gpus"] = 4
    row.data["settings"].update(method="lora", quantize="")
    d, _, _, _, notes = tc.build_spec_dict(row, _arch(L1B))
    assert d["training"]["fsdp_frozen_base"] == "sharded"
    assert any("auto_wrap_policy={Block}" in n for n in notes)
    other = _row({"sharding": "fsdp"}, version="0.5.10")
    other.data["n_gpus"] = 4
    other.data["settings"].update(method="lora", quantize="")
    d, *_ = tc.build_spec_dict(other, _arch(L1B))
    assert "fsdp_frozen_base" not in d["training"]
    assert load_profile("litgpt").defaults["fsdp_frozen_base"] == "gathered"


def test_bench_fills_what_torchtune_fixes_at_the_rows_commit():
    """torchtune at 0217d44c2e: every recipe config sets `dtype: bf16` (pure bf16, no fp32
    master) and the distributed recipes wrap the model in FSDP FULL_SHARD; a row that leaves
    precision or sharding unstated takes those, listed among its defaults. A stated value
    wins, and one GPU is not sharded."""
    row = _row({}, framework="torchtune", version="commit 0217d44c2e")
    row.data["n_gpus"] = 2
    row.data["settings"].update(method="lora", quantize="")
    d, _, defaults, _, _ = tc.build_spec_dict(row, _arch(L1B))
    assert d["training"]["master_weights_fp32"] is False
    assert d["training"]["optimizer_state_dtype"] == "bf16"
    assert d["placement"]["data_parallel_sharding"] == "fsdp"
    assert any(x.startswith("precision = bf16 (torchtune's default") for x in defaults)
    one = _row({"precision": "fp32"}, framework="torchtune", version="commit 0217d44c2e")
    one.data["settings"].update(method="lora", quantize="")
    d, _, defaults, _, _ = tc.build_spec_dict(one, _arch(L1B))
    assert d["placement"]["data_parallel_sharding"] == "none"
    assert d["weights"]["format"] == "fp32"
    assert not any("torchtune's default" in x for x in defaults)


def test_bench_sizes_a_config_hub_row_on_the_devices_its_yaml_sets():
    """LitGPT config hub at 00af8b0d9b: phi-2/lora.yaml sets `devices: 1` and the README says
    "All runs are single-GPU experiments", so a row of that YAML on a 4xA10G machine is the
    one-device run: lora.py's strategy is "auto" (FSDPStrategy and its activation_checkpointing
    _policy only when devices * num_nodes > 1): no sharding, no checkpointing, and the
    accumulation is global 8 / (micro 4 x 1 device) = 2. phi-2/full.yaml sets `devices: 2`:
    two GPUs of the four, still FSDP. A row of another source keeps its n_gpus."""
    hub = tc.LITGPT_HUB_00AF8B0
    row = _row({"sharding": "fsdp", "grad_checkpointing": True, "micro_batch_size": 4})
    row.data.update(n_gpus=4, settings_source=hub + "phi-2/lora.yaml")
    row.data["settings"].update(method="lora", quantize="", global_batch_size=8)
    d, _, _, _, notes = tc.build_spec_dict(row, _arch(L1B))
    assert d["placement"] == {
        "gpus": 1,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "data_parallel_sharding": "none",
    }
    assert d["training"]["grad_checkpointing"] == "none"
    assert d["batch"]["grad_accum"] == 2
    assert "fsdp_frozen_base" not in d["training"]
    assert any("1 of the machine's 4 GPUs used" in n for n in notes)
    full = _row({"sharding": "fsdp", "grad_checkpointing": True, "micro_batch_size": 4})
    full.data.update(n_gpus=4, settings_source=hub + "phi-2/full.yaml")
    full.data["settings"].update(method="full", quantize="", global_batch_size=16)
    d, *_ = tc.build_spec_dict(full, _arch(L1B))
    assert d["placement"] == {
        "gpus": 2,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "data_parallel_sharding": "fsdp",
    }
    assert d["training"]["grad_checkpointing"] == "full"
    assert d["batch"]["grad_accum"] == 2  # 16 / (4 x 2)
    other = _row({"sharding": "fsdp"})
    other.data.update(n_gpus=4, settings_source="https://example.org/phi-2/lora.yaml")
    other.data["settings"].update(method="lora", quantize="")
    d, *_ = tc.build_spec_dict(other, _arch(L1B))
    assert d["placement"] == {
        "gpus": 4,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "data_parallel_sharding": "fsdp",
    }


def test_bench_takes_torchtune_readme_settings_from_the_one_recipe_config():
    """torchtune README at 0217d44c2e: its table is of "recipes in torchtune" and names no
    config. For Llama2-7B LoRA on 2 GPUs the only config at that commit is
    recipes/configs/llama2/7B_lora.yaml: lora_attn_modules ['q_proj', 'v_proj'], rank 8,
    alpha 16, torch.optim.AdamW, torch.nn.CrossEntropyLoss, enable_activation_checkpointing
    False (FSDP from the distributed recipe). On one GPU the full fine-tune is
    7B_full_low_memory.yaml: PagedAdamW with optimizer_in_bwd True, checkpointing True.
    The table's batch and length stay; a row with a settings_source or another commit takes
    nothing."""
    model = "meta-llama/Llama-2-7b-hf"
    arch = _arch(model)
    row = _row({}, framework="torchtune", version="commit 0217d44c2e")
    row.data.update(n_gpus=2, settings_source="")
    row.data["settings"] = {
        "model": model,
        "method": "lora",
        "micro_batch_size": 4,
        "seq_len": 2048,
    }
    d, _, defaults, _, _ = tc.build_spec_dict(row, arch)
    assert d["task"]["lora"] == {"rank": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]}
    assert d["training"]["grad_checkpointing"] == "none"
    assert d["training"]["loss_impl"] == "full-upcast"
    assert d["placement"] == {
        "gpus": 2,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "data_parallel_sharding": "fsdp",
    }
    assert (d["batch"]["micro_batch"], d["lengths"]["seq_len"]) == (4, 2048)
    assert any("recipes/configs/llama2/7B_lora.yaml" in x for x in defaults)
    full = _row({}, framework="torchtune", version="commit 0217d44c2e")
    full.data.update(settings_source="")
    full.data["settings"] = {
        "model": model,
        "method": "full",
        "optimizer": "bitsandbytes PagedAdamW",
    }
    d, _, _, approx, _ = tc.build_spec_dict(full, arch)
    assert d["training"]["optimizer_placement"] == "in-backward"
    assert d["training"]["grad_checkpointing"] == "full"
    assert any("paged optimiser stepped in backward" in a for a in approx)
    other = _row({}, framework="torchtune", version="commit 5cbc196")
    other.data.update(n_gpus=2, settings_source="")
    other.data["settings"] = {"model": model, "method": "lora"}
    d, _, defaults, _, _ = tc.build_spec_dict(other, arch)
    assert not any("recipes/configs" in x for x in defaults)
    assert d["training"]["grad_checkpointing"] == "none"  # vramtui's default, listed


# --------------------------------------------------------------------------- transformers < 4.46


def test_transformers_before_4_46_copies_the_shifted_fp32_logits_by_hand():
    """transformers v4.36-v4.45 modeling_llama.py LlamaForCausalLM.forward: `logits =
    logits.float()` (returned in the output), `shift_logits = logits[..., :-1,
    :].contiguous()`, then CrossEntropyLoss (log_softmax saves its fp32 output). 4.46.0 moved
    the loss to loss/loss_utils.py ForCausalLMLoss (labels shifted with F.pad, no copy).
    Llama-3.2-1B, 1 x 512 tokens x 128,256 = 65,667,072 logits: at the loss the fp32 logits,
    the shifted copy and the log-softmax, 12 B = 788,004,864 B; the loss backward adds the
    log-softmax's gradient and the shifted logits' gradient to the output's logits and the saved
    log-softmax, 16 B = 1,050,673,152 B. Unstated or 4.46.0: the current 10 B and 12 B."""
    arch = _arch(L1B)
    old = estimate(_spec(mb=1, training='versions = { transformers = "4.37.2" }'), arch)
    item = _item(old, "logits.training")
    assert item.stage_bytes["forward"] == 788_004_864
    assert item.stage_bytes["backward"] == 1_050_673_152
    for training in ("", 'versions = { transformers = "4.46.0" }'):
        cur = _item(estimate(_spec(mb=1, training=training), arch), "logits.training")
        assert cur.stage_bytes["forward"] == 656_670_720  # 10 B per logit
        assert cur.stage_bytes["backward"] == 788_004_864  # 12 B per logit
    # LitGPT's own model code never ran transformers' loss: the version changes nothing.
    lit_old = estimate(
        _spec(mb=1, training=LITGPT + '\nversions = { transformers = "4.37.2" }'), arch
    )
    lit = estimate(_spec(mb=1, training=LITGPT), arch)
    assert (
        _item(lit_old, "logits.training").stage_bytes == _item(lit, "logits.training").stage_bytes
    )


def test_bench_pins_fsdp_qlora_rows_to_their_libraries():
    """answer.ai fsdp_qlora (e877dda): Linear4bit(quant_storage=...) needs bitsandbytes 0.43.0,
    README.md asks for bitsandbytes>=0.43.0; the March 2024 runs predate bitsandbytes 0.43.2 and
    transformers 4.46: both mechanisms of the older versions apply."""
    row = _row({}, framework="custom", version="fsdp_qlora train.py (Feb-Mar 2024; x)")
    d, _, _, _, notes = tc.build_spec_dict(row, _arch(L1B))
    assert d["training"]["versions"] == {"bitsandbytes": "0.43.0", "transformers": "4.37.2"}
    assert any("quant_storage" in n for n in notes)
    other = _row({}, framework="custom", version="torchtitan x")
    d, *_ = tc.build_spec_dict(other, _arch(L1B))
    assert "versions" not in d["training"]


# --------------------------------------------------------------------------- FSDP root, offload

EMBED_8B = 128_256 * 4_096 * 2  # Llama-3.1-8B embedding (and its untied head) in bf16


def _rank(est, key, stage):
    return _item(est, key).rank_bytes_at(stage, est.layout)[0]


def test_fsdp_root_unit_stays_whole_from_forward_to_backward_by_hand():
    """torch/distributed/fsdp/_runtime_utils.py _post_forward_reshard (torch 2.1-2.4):
    `free_unsharded_flat_param = not state._is_root and ...`: the root unit is not resharded
    after the forward (FSDP2: FSDPState._lazy_init sets the root's post_forward_mesh_info to
    None). With the decoder-layer wrap (accelerate TRANSFORMER_BASED_WRAP, fsdp_qlora
    train.py e877dda get_wrapping_policy, LitGPT FSDPStrategy(auto_wrap_policy={Block})) the
    root holds the embedding and the LM head. Llama-3.1-8B: 128,256 x 4,096 x 2 B =
    1,050,673,152 B each; on 4 ranks each already holds its quarter, 262,668,288 B, so
    1,050,673,152 - 262,668,288 = 788,004,864 B more per rank for each, at the forward and the
    backward."""
    kw = {"model": L8B, "kind": "full_finetune", "gpus": 4, "sharding": "fsdp", "mb": 1}
    est = estimate(_spec(**kw), _arch(L8B))
    for group in ("embedding", "lm_head"):
        key = f"transient.fsdp_root_unsharded.{group}"
        assert _rank(est, key, "forward") == 788_004_864
        assert _rank(est, key, "backward") == 788_004_864
        assert _rank(est, key, "optimizer_step") == 0
    # set off in the spec (a loop that wraps the embedding and head apart): no item
    off = estimate(_spec(training="fsdp_root_gathered = false", **kw), _arch(L8B))
    assert not any(i.key.startswith("transient.fsdp_root_unsharded") for i in off.items)
    # ZeRO-3 has no root unit
    z3 = estimate(_spec(**{**kw, "sharding": "zero3"}), _arch(L8B))
    assert not any(i.key.startswith("transient.fsdp_root_unsharded") for i in z3.items)


def test_fsdp_root_is_not_counted_twice_under_gathered_frozen_units():
    """LitGPT LoRA under FSDP: fsdp_frozen_items already holds every frozen weight whole at the
    backward (the root's embedding and head among them); the root item adds them at the
    forward only: 1,050,673,152 - 1,050,673,152 / 2 = 525,336,576 B each on 2 ranks."""
    kw = {"model": L8B, "gpus": 2, "sharding": "fsdp", "mb": 1, "ckpt": "full"}
    est = estimate(_spec(training=LITGPT, **kw), _arch(L8B))
    item = _item(est, "transient.fsdp_root_unsharded.embedding")
    assert "backward" not in item.stages
    assert _rank(est, "transient.fsdp_root_unsharded.embedding", "forward") == 525_336_576


def test_parameter_offload_leaves_only_gathered_units_on_the_gpu_by_hand():
    """fsdp_qlora train.py (e877dda) --use_cpu_offload: FSDP(cpu_offload=
    CPUOffload(offload_params=True)): each flat parameter's shard lives on the CPU, its
    gradient shard is copied to flat_param._cpu_grad (torch fsdp _runtime_utils.py
    _post_backward_hook), and the optimiser steps the CPU parameters. On the GPU: the gathered
    units and the root, whole (Llama-3.1-8B embedding and bf16 head, 1,050,673,152 B each),
    and the activations; the NF4 base, adapters, gradients and states hold 0 B there."""
    kw = {"model": L8B, "kind": "qlora", "fmt": "nf4", "gpus": 2, "sharding": "fsdp", "mb": 1}
    spec = _spec(training="offload_params = true", **kw)
    est = estimate(spec, _arch(L8B))
    for item in est.items:
        if item.category in ("weights", "quant_metadata", "adapter", "gradients", "optimizer"):
            assert item.max_bytes == 0, item.key
    for group in ("embedding", "lm_head"):
        key = f"transient.fsdp_root_unsharded.{group}"
        assert _rank(est, key, "backward") == 1_050_673_152
    on_gpu = estimate(_spec(**kw), _arch(L8B))
    assert _item(est, "transient.zero3_gather").max_bytes == pytest.approx(
        _item(on_gpu, "transient.zero3_gather").max_bytes
    )
    assert sum(i.max_bytes for i in on_gpu.items if i.category == "weights") > 4e9
    # without FSDP or ZeRO-3 there is nothing to offload: the field changes nothing
    single = estimate(_spec(training="offload_params = true", model=L8B), _arch(L8B))
    plain = estimate(_spec(model=L8B), _arch(L8B))
    assert single.peak_bytes == plain.peak_bytes


def test_bench_maps_fsdp_qlora_cpu_offload_to_parameter_offload():
    """fsdp_qlora's use_cpu_offload is CPUOffload(offload_params=True) (train.py e877dda)."""
    row = _row({"cpu_offload": True}, framework="custom", version="fsdp_qlora train.py (x)")
    row.data["framework_detail"] = "answer.ai fsdp_qlora"
    d, _, _, approx, _ = tc.build_spec_dict(row, _arch(L1B))
    assert d["training"]["offload_params"] is True
    assert d["training"]["optimizer_placement"] == "cpu-offload"
    assert not any("no parameter offload" in a for a in approx)


# --------------------------------------------------------------------------- fms-acceleration rows

MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"  # hidden 4096, 32 layers, 8 experts of width 14,336


def test_transformers_4_experts_are_linears_that_bitsandbytes_quantises_by_hand():
    """transformers 4.48.1 (and 4.57.1) modeling_mixtral.py MixtralSparseMoeBlock:
    `self.experts = nn.ModuleList([MixtralBlockSparseTop2MLP(config) ...])`, each with w1, w3
    (4096 -> 14,336) and w2 (14,336 -> 4096) nn.Linear layers, which a 4-bit load replaces by
    Linear4bit. 5.0.0 fused them (`MixtralExperts.gate_up_proj = nn.Parameter(...)`), which
    bitsandbytes leaves in bf16. Experts: 32 layers x 8 x 3 x 4096 x 14,336 =
    45,097,156,608 parameters: NF4 x 0.5 B = 22,548,578,304 B; bf16 x 2 B = 90,194,313,216 B."""
    arch = _arch(MIXTRAL)
    lora = 'rank = 16\ntargets = ["q_proj", "k_proj", "v_proj", "o_proj"]'
    old = estimate(
        _spec(
            model=MIXTRAL,
            kind="qlora",
            fmt="nf4",
            lora=lora,
            training='versions = { transformers = "4.48.1" }',
        ),
        arch,
    )
    assert _item(old, "weights.experts.nf4").stage_bytes["forward"] == 22_548_578_304
    assert not [i for i in old.items if i.key == "weights.experts.bf16"]
    for training in ("", 'versions = { transformers = "5.0.0" }'):
        cur = estimate(
            _spec(model=MIXTRAL, kind="qlora", fmt="nf4", lora=lora, training=training), arch
        )
        assert _item(cur, "weights.experts.bf16").stage_bytes["forward"] == 90_194_313_216
        assert not [i for i in cur.items if i.key == "weights.experts.nf4"]


def _fms_row(settings: dict) -> tc.Row:
    data = {
        "framework": "hf-trainer",
        "framework_version": "fms-acceleration @ 24bdadb228 (x)",
        "n_gpus": 1,
        "notes": "",
        "settings": {"model": L1B, "method": "full", **settings},
    }
    return tc.Row("synthetic.toml", data, "held_out_3")


def test_bench_reads_the_trainers_bf16_model_without_amp_as_pure_bf16():
    """fms-acceleration scenarios.yaml (24bdadb) full-finetuning: `torch_dtype: bfloat16` and no
    `bf16: True`; accelerate.yaml `mixed_precision: 'no'`. The Trainer (transformers 4.48.1)
    then runs no autocast and keeps no fp32 copy, and torch.optim.AdamW's states are
    `torch.zeros_like(p)` in bf16. Llama-3.2-1B, 1,235,814,400 parameters: no master weights,
    AdamW states 2 x 2 B = 4,943,257,600 B (mixed precision: 8 B = 9,886,515,200 B)."""
    pure = _fms_row(
        {"precision": "torch_dtype bfloat16 (pure bf16 weights; no mixed precision flag)"}
    )
    d, *_ = tc.build_spec_dict(pure, _arch(L1B))
    t = d["training"]
    assert (t["master_weights_fp32"], t["grad_dtype"], t["optimizer_state_dtype"]) == (
        False,
        "bf16",
        "bf16",
    )
    est = estimate(_spec_of(d), _arch(L1B))
    assert _item(est, "optimizer").stage_bytes["optimizer_step"] == 4_943_257_600
    assert not [i for i in est.items if i.key == "master_weights"]
    amp = _fms_row({"precision": "torch_dtype bfloat16 + bf16 True (autocast)"})
    d, *_ = tc.build_spec_dict(amp, _arch(L1B))
    assert d["training"]["master_weights_fp32"] is True


def _spec_of(d: dict):
    from vramtui.spec import spec_from_dict

    return spec_from_dict(d, source="synthetic.toml")


def test_bench_reads_the_library_versions_a_row_states_in_its_settings():
    """The corpus rows state their versions in [settings] library_versions (fms-acceleration's
    refs/requirements.txt at 24bdadb: transformers==4.48.1, bitsandbytes==0.43.3); a requirement
    range (PEFT's DeepSpeed doc: `bitsandbytes>=0.43.3`) names no version the run used."""
    row = _fms_row(
        {"library_versions": {"transformers": "4.48.1", "bitsandbytes": "0.43.3", "torch": "2.4.1"}}
    )
    d, *_ = tc.build_spec_dict(row, _arch(L1B))
    assert d["training"]["versions"] == {"transformers": "4.48.1", "bitsandbytes": "0.43.3"}
    ranged = _fms_row({"library_versions": {"bitsandbytes": ">=0.43.3", "peft": "0.13.2"}})
    d, _, _, _, notes = tc.build_spec_dict(ranged, _arch(L1B))
    assert d["training"]["versions"] == {"peft": "0.13.2"}
    assert any("'>=0.43.3' is a range" in n for n in notes)


# --------------------------------------------------------------------------- Unsloth

UNSLOTH = 'framework = "unsloth"'
LLAMA_TARGETS = (
    'rank = 16\ntargets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", '
    '"down_proj"]\ndropout = 0.0'
)


def test_unsloth_offloads_checkpointed_layer_inputs_to_the_host_by_hand():
    """unsloth/models/_utils.py Unsloth_Offloaded_Gradient_Checkpointer at 2024.5 (commit
    5cff582ccf): forward `saved_hidden_states = hidden_states.to("cpu", non_blocking = True)`,
    the layer under no_grad; backward copies it back and recomputes that layer. unsloth_zoo
    UnslothCheckpointFunction (a1899136) offloads every input but the last layer's and reloads
    into one GPU buffer. Llama-3.2-1B, 8 x 512 tokens x 2,048 x 2 B = 16,777,216 B a layer
    input: 2 on the GPU = 33,554,432 B, in place of torch's 16 layers = 268,435,456 B."""
    from vramtui.ledger.training_activations import training_saved

    offloaded = training_saved(_ctx(_spec(ckpt="full", training=UNSLOTH, lora=LLAMA_TARGETS)))
    assert offloaded.kept == 16_777_216
    assert offloaded.layers_saved == 33_554_432
    kept = training_saved(
        _ctx(
            _spec(
                ckpt="full",
                training=UNSLOTH + "\noffload_checkpoints = false",
                lora=LLAMA_TARGETS,
            )
        )
    )
    assert kept.layers_saved == 268_435_456
    # no checkpointing: nothing to offload, every layer's saved set stays
    plain = training_saved(_ctx(_spec(training=UNSLOTH, lora=LLAMA_TARGETS)))
    assert plain.kept == 0 and plain.layers_saved == 16 * plain.per_layer - plain.final_norm


def test_unsloth_lora_kernels_save_less_than_peft_by_hand():
    """unsloth/kernels/fast_lora.py at 2024.5 (commit 5cff582ccf): LoRA_QKV saves X once for
    q, k, v; LoRA_W (o) saves X, the attention output; LoRA_MLP saves X, e, g (act(e) * g is
    recomputed); kernels/rms_layernorm.py Fast_RMS_Layernorm saves the 16-bit X and the fp32
    rsqrt. Llama-3.2-1B (hidden 2,048, q 2,048, K/V 512, MLP 8,192), bf16, 2 x 512 tokens, per
    token: norms 2 x (2 x 2,048 + 4) = 8,200; q, k, v (2,048 + 2 x 512) x 2 = 6,144; attention
    output 4,096; e and g 2 x 8,192 x 2 = 32,768; the QKV and MLP kernels' X 2 x 2,048 x 2 =
    8,192: 59,400 x 1,024 = 60,825,600, + SDPA's log-sum-exp 2 x 32 x 512 x 4 = 131,072:
    60,956,672 B. PEFT (hf-trainer, dropout 0, fp32 adapters): norms 2 x (4 x 2,048 + 4) =
    16,392; 6,144; 4,096; gate, up, act 3 x 8,192 x 2 = 49,152; each module's fp32 input cast
    4 x (3 x 2,048 + 2,048 + 2 x 2,048 + 8,192) = 73,728 + lora_A outputs 7 x 16 x 4 = 448:
    158,152 x 1,024 + 131,072 = 162,078,720 B."""
    unsloth, why = training_layer_bytes(_ctx(_spec(training=UNSLOTH, lora=LLAMA_TARGETS)), 2, 512)
    peft, _ = training_layer_bytes(_ctx(_spec(lora=LLAMA_TARGETS)), 2, 512)
    assert unsloth == 60_956_672
    assert peft == 162_078_720
    assert "LoRA kernels" in why
    # dropout > 0: get_peft_model does not patch the layers, PEFT's path (fp32 adapters)
    dropout = LLAMA_TARGETS.replace("dropout = 0.0", "dropout = 0.05")
    with_dropout, _ = training_layer_bytes(_ctx(_spec(training=UNSLOTH, lora=dropout)), 2, 512)
    assert with_dropout > unsloth
    # the MLP kernel's backward holds one 16-bit gradient of the MLP width (DW):
    # 1,024 tokens x 8,192 x 2 B = 16,777,216 B
    from vramtui.ledger.training_activations import lora_layer_backward_temporary

    ctx = _ctx(_spec(training=UNSLOTH, lora=LLAMA_TARGETS))
    assert lora_layer_backward_temporary(ctx, 1024)[0] == 16_777_216


def test_unsloth_before_2024_11_keeps_16bit_logits_and_writes_their_gradient_in_place():
    """unsloth/models/llama.py CausalLM_fast_forward at 2024.5 (commit 5cff582ccf): `logits =
    logits.to(self.config.torch_dtype)`; kernels/cross_entropy_loss.py Fast_CrossEntropyLoss
    saves (logits, logsumexp, labels) and its backward returns `logits`, the gradient written
    in place. 2024.11 (commit fa8e59eb1b) fuses the head and the loss (no logits). Llama-3.2-1B,
    8 x 512 x 128,256 = 525,336,576 logits x 2 B = 1,050,673,152 B at the loss and at its
    backward; the fragmentation block is that 16-bit block, not the fp32 one (2,101,346,304 B).
    Unstated or 2024.11: no logits."""
    arch = _arch(L1B)
    old = estimate(
        _spec(training=UNSLOTH + '\nversions = { unsloth = "2024.5" }', lora=LLAMA_TARGETS), arch
    )
    logits = _item(old, "logits.training")
    assert logits.stage_bytes["forward"] == 1_050_673_152
    assert logits.stage_bytes["backward"] == 1_050_673_152
    assert _item(old, "overhead.fragmentation").stage_bytes["backward"] == 1_050_673_152
    for training in (UNSLOTH, UNSLOTH + '\nversions = { unsloth = "2024.11.6" }'):
        cur = estimate(_spec(training=training, lora=LLAMA_TARGETS), arch)
        assert _item(cur, "logits.training").stage_bytes["backward"] == 0
        # round 9: the fused loss leaves no logits block; an MLP intermediate,
        # 8 x 512 tokens x 8,192 x 2 B = 67,108,864 B (test_training_round9.py)
        assert _item(cur, "overhead.fragmentation").stage_bytes["backward"] == 67_108_864
    # another framework: the Unsloth version changes nothing
    hf = estimate(_spec(training='versions = { unsloth = "2024.5" }'), arch)
    assert (
        _item(hf, "logits.training").stage_bytes
        == _item(estimate(_spec(), arch), "logits.training").stage_bytes
    )


def test_bench_reads_unsloth_notebooks_banner_version_and_checkpointing_mode():
    """A notebook row: the banner's release becomes [training.versions] unsloth; the
    "unsloth" checkpointing mode keeps the profile's offload, use_gradient_checkpointing = True
    is torch's checkpointing (offload_checkpoints = false)."""
    base = {
        "method": "qlora",
        "quantize": "load_in_4bit",
        "lora_targets": ["q_proj", "v_proj"],
        "library_versions": {},
    }

    def row(gc):
        data = {
            "framework": "unsloth",
            "framework_version": "",
            "source_id": "unsloth-notebook-llama3-8b-alpaca",
            "n_gpus": 1,
            "notes": "",
            "settings": {"model": L1B, "grad_checkpointing": gc, **base},
        }
        return tc.Row("synthetic.toml", data, "held_out_3")

    d, *_ = tc.build_spec_dict(row("unsloth"), _arch(L1B))
    assert d["training"]["versions"] == {"unsloth": "2024.5"}
    assert d["training"]["grad_checkpointing"] == "full"
    assert "offload_checkpoints" not in d["training"]
    d, *_ = tc.build_spec_dict(row(True), _arch(L1B))
    assert d["training"]["offload_checkpoints"] is False
