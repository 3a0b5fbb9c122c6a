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
