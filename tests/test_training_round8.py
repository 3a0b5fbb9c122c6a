"""Round 8 of the training calibration (development + held_out_2 + held_out_3 + held_out_4):
each mechanism worked by hand from the framework's code (file and commit in each test's
docstring), and the corpus bench's reading of the settings a row states."""

from __future__ import annotations

import sys
from pathlib import Path

from vramtui.ledger import estimate
from vramtui.ledger.training_activations import backward_walk

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import training_corpus_rows as tc
from test_training_frameworks import _arch, _ctx, _spec

L8B = "meta-llama/Llama-3.1-8B-Instruct"  # hidden 4,096, 32 layers, vocabulary 128,256


def _row(settings: dict, framework: str, version: str, n_gpus: int = 1, notes: str = ""):
    data = {
        "framework": framework,
        "framework_version": version,
        "n_gpus": n_gpus,
        "notes": notes,
        "settings": settings,
    }
    return tc.Row("synthetic.toml", data, "development")


# --------------------------------------------------------------------------- torchtitan


def test_compiled_loss_keeps_16bit_logits_and_their_gradient_by_hand():
    """torchtitan components/loss.py at e7c0cae: build_cross_entropy_loss wraps
    `cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))` in torch.compile under
    training.compile, and train.py deletes `pred` before `loss.backward()`. The compiled graph
    fuses the upcast, the log-softmax and its backward: AOTAutograd's min-cut partitioner saves
    the bf16 input and the per-row max and sum (a reduction 4x smaller than its input is never
    recomputed), not the fp32 log-softmax; nll_loss's full + scatter becomes a pointwise where
    (inductor's scatter_upon_const_tensor), and the backward writes the bf16 gradient.

    Llama 3.1 8B, bf16, 2 x 8,192 = 16,384 tokens x vocabulary 128,256 = 2,101,346,304 logits.
    Eager upcast: at the loss 2 + 4 + 4 = 10 B a logit = 21,013,463,040 B; at the loss
    backward 3 x 4 B = 12 B = 25,216,155,648 B. Compiled: the bf16 logits, 2 B =
    4,202,692,608 B at the loss; the saved logits and their bf16 gradient, 2 + 2 = 4 B =
    8,405,385,216 B at the loss backward; the fragmentation heuristic's block is the 2-byte
    gradient, 4,202,692,608 B, not an fp32 one (8,405,385,216 B)."""
    logits = 2 * 8192 * 128_256
    assert logits == 2_101_346_304
    common = dict(model=L8B, kind="full_finetune", seq=8192, mb=2, ckpt="full")
    eager = _spec(training='framework = "custom"', **common)
    compiled = _spec(training='framework = "custom"\nloss_impl = "compiled"', **common)
    arch = _arch(L8B)

    def logits_item(spec):
        return next(i for i in estimate(spec, arch).items if i.key == "logits.training")

    def frag(spec):
        return next(i for i in estimate(spec, arch).items if i.key == "overhead.fragmentation")

    assert logits_item(eager).stage_bytes["forward"] == 21_013_463_040
    assert logits_item(compiled).stage_bytes["forward"] == 4_202_692_608

    def loss_point(spec):
        walk = backward_walk(_ctx(spec, model=L8B))
        return next(p for p in walk.points if p.label == "the loss backward")

    assert loss_point(eager).logits == 25_216_155_648
    assert loss_point(compiled).logits == 8_405_385_216
    assert frag(eager).stage_bytes["backward"] == 8_405_385_216
    assert frag(compiled).stage_bytes["backward"] == 4_202_692_608


TITAN_ROW = {
    "model": "Llama 3.1 8B (torchtitan llama3 flavor 8B)",
    "method": "full",
    "precision": "bf16 (FSDP2 mixed precision: param bf16, reduce fp32)",
    "micro_batch_size": 2,
    "seq_len": 8192,
    "grad_checkpointing": "selective (op policy per TOML)",
    "optimizer": "AdamW",
    "sharding": "fsdp2 (FSDP 32)",
    "compile": True,
}


def test_bench_maps_torchtitan_e7c0cae_compile_to_the_compiled_loss():
    """At e7c0cae training.compile compiles the loss too; at 9dec370 train.py leaves it eager
    ("# TODO: compiling loss function causes CUDA errors, turning off for now")."""
    arch = _arch(L8B)
    row = _row(TITAN_ROW, "custom", "torchtitan e7c0cae", n_gpus=32)
    row.data["framework_detail"] = "torchtitan"
    d, _, _, _, notes = tc.build_spec_dict(row, arch)
    assert d["training"]["loss_impl"] == "compiled"
    assert any("compiles its loss" in n for n in notes)
    old = _row(TITAN_ROW, "custom", "torchtitan 9dec370", n_gpus=32)
    old.data["framework_detail"] = "torchtitan"
    assert "loss_impl" not in tc.build_spec_dict(old, arch)[0]["training"]
    eager = _row({**TITAN_ROW, "compile": False}, "custom", "torchtitan e7c0cae", n_gpus=32)
    eager.data["framework_detail"] = "torchtitan"
    assert "loss_impl" not in tc.build_spec_dict(eager, arch)[0]["training"]


# --------------------------------------------------------------------------- QLoRA, fp32 norms

MISTRAL = "mistralai/Mistral-7B-v0.1"  # hidden 4,096, 32 layers, MLP 14,336
QLORA_TARGETS = 'rank = 16\ntargets = ["q_proj", "k_proj", "v_proj", "o_proj"]\ndropout = 0.1'


def _layers_saved(training: str, **kw) -> int:
    from vramtui.ledger.training_activations import training_saved

    common = dict(model=MISTRAL, kind="qlora", fmt="nf4", seq=4096, mb=4, ckpt="full")
    common.update(kw)
    return training_saved(
        _ctx(_spec(lora=QLORA_TARGETS, training=training, **common), model=MISTRAL)
    ).layers_saved


def test_trl_before_0_26_keeps_the_norms_fp32_under_the_hf_trainer_profile_by_hand():
    """TRL SFTTrainer.__init__ (trl/trainer/sft_trainer.py at v0.13.0, L168-233; through
    trl/models/utils.py prepare_peft_model at v0.25.0) runs prepare_model_for_kbit_training on
    a 4-bit model whose Params4bit are on the GPU (norms to fp32) and, under bf16,
    peft_module_casting_to_bf16, which keeps every "norm" module fp32. v0.26.0 (commit
    2af35fb0d, "Clean up model preparation") calls get_peft_model only. QLoRA under FSDP keeps
    the Params4bit off the GPU and TRL skips both.

    Mistral-7B, QLoRA, 4 x 4,096 = 16,384 tokens, full checkpointing: 32 layer inputs x 16,384
    x 4,096 x 2 B = 4,294,967,296 B; with fp32 norms the stream is fp32 after the first layer:
    + 31 x 16,384 x 4,096 x 2 B = 4,160,749,568 B, 8,455,716,864 B."""
    plain, fp32 = 4_294_967_296, 4_294_967_296 + 31 * 16_384 * 4_096 * 2
    assert fp32 == 8_455_716_864
    hf = 'framework = "hf-trainer"'
    assert _layers_saved(hf) == plain  # TRL unstated: a plain Trainer script
    assert _layers_saved(hf + '\n[training.versions]\ntrl = "0.13.0"') == fp32
    assert _layers_saved(hf + '\n[training.versions]\ntrl = "0.25.1"') == fp32
    assert _layers_saved(hf + '\n[training.versions]\ntrl = "0.26.0"') == plain
    # an explicit fp32_norms wins over the version rule
    no = hf + '\nfp32_norms = false\n[training.versions]\ntrl = "0.13.0"'
    assert _layers_saved(no) == plain
    # sharded QLoRA: TRL skips prepare_model_for_kbit_training (Params4bit on the CPU or meta)
    fsdp = dict(gpus=2, sharding="fsdp")
    assert _layers_saved(hf + '\n[training.versions]\ntrl = "0.13.0"', **fsdp) == plain
    # Axolotl converts the norms back to the 16-bit dtype for any LoRA/QLoRA adapter (v0.5.0
    # utils/models.py, 17fc747f99 loaders/model.py): its profile stays false, whatever TRL
    ax = 'framework = "axolotl"\n[training.versions]\ntrl = "0.13.0"'
    assert _layers_saved(ax) == plain
    # a bf16 base (LoRA): no 4-bit linears, no fp32 stream
    lora = _layers_saved(hf + '\n[training.versions]\ntrl = "0.13.0"', kind="lora", fmt="bf16")
    assert lora == plain


def test_trl_version_round_trips_in_the_spec():
    from vramtui.spec import dumps_spec, loads_spec

    spec = _spec(training='framework = "hf-trainer"\n[training.versions]\ntrl = "0.13.0"')
    assert dict(spec.training.versions)["trl"] == "0.13.0"
    again = loads_spec(dumps_spec(spec))
    assert dict(again.training.versions)["trl"] == "0.13.0"


def test_bench_sets_fp32_norms_for_axolotl_dc71d8872a_qlora_only():
    """axolotl src/axolotl/utils/models.py load_model at dc71d8872a: prepare_model_for_kbit_
    training for adapter qlora + load_in_4bit and no conversion back (78b9efb7f added it later
    that day for flash attention on llama-derived models); PEFT src/peft/utils/other.py at
    ec267c644a (main on that date) casts every float16/bfloat16 parameter to float32."""
    llama2 = {
        "model": "meta-llama/Llama-2-7b-hf",
        "method": "qlora",
        "quantize": "bnb 4-bit (load_in_4bit: true)",
        "precision": "bf16: true (fp16 false, tf32 false)",
        "micro_batch_size": 2,
        "seq_len": 4096,
        "grad_accum": 4,
        "lora_r": 32,
        "lora_targets": ["all linear (lora_target_linear: true)"],
        "grad_checkpointing": True,
        "optimizer": "paged_adamw_32bit",
    }
    arch = _arch("meta-llama/Llama-2-7b-hf")
    old = _row(llama2, "axolotl", "commit dc71d8872a (2023-08-03)")
    d, _, _, approx, notes = tc.build_spec_dict(old, arch)
    assert d["training"]["fp32_norms"] is True
    assert any("embedding and LM head" in a for a in approx)
    new = _row(llama2, "axolotl", "axolotl commit 17fc747f99 (README asks axolotl>=0.16.1)")
    assert "fp32_norms" not in tc.build_spec_dict(new, arch)[0]["training"]
    lora = _row({**llama2, "method": "lora", "quantize": ""}, "axolotl", "commit dc71d8872a")
    assert "fp32_norms" not in tc.build_spec_dict(lora, arch)[0]["training"]
