"""Round 9 of the training calibration (development + held_out_2 ... held_out_5): each
mechanism worked by hand from the framework's code (file and commit in each test's docstring),
and the corpus bench's reading of the settings a row states."""

from __future__ import annotations

import sys
from pathlib import Path

from vramtui.ledger import estimate

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import training_corpus_rows as tc
from test_training_frameworks import _arch, _spec

Q7B = "Qwen/Qwen2.5-7B-Instruct"  # hidden 3,584, MLP intermediate 18,944, vocabulary 152,064


def _frag(spec, model):
    items = estimate(spec, _arch(model)).items
    return next(i for i in items if i.key == "overhead.fragmentation")


# --------------------------------------------------------------------------- fused loss


def test_fused_loss_leaves_no_logits_block_for_the_allocator_by_hand():
    """Unsloth 2025.3.15 (unsloth/models/llama.py at 49eece4d94, CausalLM_fast_forward, which
    Qwen2ForCausalLM.forward is patched to): when the micro-batch has more than 1,024 tokens it
    calls unsloth_zoo's fused_linear_cross_entropy (loss_utils.py at 494cbb7a:
    cut_cross_entropy.linear_cross_entropy(hidden_states, lm_weight, targets=labels, shift=True))
    and returns EMPTY_LOGITS. Cut Cross-Entropy "computes the cross-entropy loss without
    materializing the logits for all tokens into global memory" (apple/ml-cross-entropy README):
    no logits-sized block is freed for the caching allocator to keep, so the fragmentation
    heuristic's block is the next largest transient, an MLP intermediate.

    The codeforces notebook's shapes: 2 x 32,768 = 65,536 tokens.
    Before: an fp32 logits block, 65,536 x 152,064 x 4 B = 39,862,665,216 B.
    Now: 65,536 x 18,944 x 2 B = 2,483,027,968 B.
    A full-upcast loss (the custom profile) keeps the fp32 block; Unsloth older than 2024.11
    (its in-place 16-bit loss) keeps the 2-byte logits block, 65,536 x 152,064 x 2 B =
    19,931,332,608 B."""
    assert 2 * 32768 * 152_064 * 4 == 39_862_665_216
    assert 2 * 32768 * 18_944 * 2 == 2_483_027_968
    common = dict(model=Q7B, kind="qlora", fmt="nf4", seq=32768, mb=2, ckpt="full")
    unsloth = 'framework = "unsloth"\n[training.versions]\nunsloth = '
    fused = _spec(training=unsloth + '"2025.3.15"', **common)
    inplace = _spec(training=unsloth + '"2024.8"', **common)
    upcast = _spec(training='framework = "custom"', **common)
    assert _frag(fused, Q7B).stage_bytes["backward"] == 2_483_027_968
    assert _frag(inplace, Q7B).stage_bytes["backward"] == 19_931_332_608
    assert _frag(upcast, Q7B).stage_bytes["backward"] == 39_862_665_216


# --------------------------------------------------------------------------- torchao optimisers

L2_7B = "meta-llama/Llama-2-7b"  # 6,738,415,616 parameters (32 layers, hidden 4,096, vocab 32,000)


def _torchao_row(optimizer: str):
    data = {
        "framework": "torchtune",
        "framework_version": "torchtune 52d1b838 (PyTorch 2.4)",
        "n_gpus": 1,
        "notes": "",
        "settings": {
            "model": L2_7B,
            "method": "full",
            "precision": "bf16 (full BF16)",
            "optimizer": optimizer,
        },
    }
    return tc.Row("synthetic.toml", data, "development")


def _optimizer_bytes(row) -> int:
    arch, _ = tc.resolve_arch(L2_7B)
    d, _, _, _, _ = tc.build_spec_dict(row, arch)
    from vramtui.spec import spec_from_dict

    items = estimate(spec_from_dict(d, source="synthetic"), arch).items
    return next(i for i in items if i.key == "optimizer").stage_bytes["optimizer_step"]


def test_torchao_8bit_and_fp8_adamw_are_the_specs_8bit_state_by_hand():
    """torchao/optim/subclass_8bit.py and subclass_fp8.py at ca17609a: `zeros(shape,
    block_size=256)` makes codes of 1 B a value (uint8, float8_e4m3fn) and
    `torch.zeros(codes.numel() // block_size)`, one fp32 scale per 256 values; adam.py quantises
    both AdamW states of every tensor of 4,096 values or more. That is the spec's adamw_8bit
    (1 B + one fp32 absmax per 256 values per state).

    Llama-2-7B, 6,738,415,616 parameters = 256 x 26,321,936: per state 6,738,415,616 +
    4 x 26,321,936 = 6,843,703,360 B; two states 13,687,406,720 B. The README's "full BF16"
    is pure bf16: torch's fused AdamW keeps its states in the bf16 parameters' dtype, 2 x 2 B
    x 6,738,415,616 = 26,953,662,464 B (it had been sized with fp32 states, twice that).
    torchao's AdamW4bit (subclass_4bit.py: two 4-bit codes per uint8 and one fp32 scale per 128
    values) has no spec value and stays sized as AdamW, listed as an approximation."""
    assert 256 * 26_321_936 == 6_738_415_616
    assert 2 * (6_738_415_616 + 4 * 26_321_936) == 13_687_406_720
    assert 2 * 2 * 6_738_415_616 == 26_953_662_464
    for name in ("torchao AdamW8bit", "torchao AdamWFp8", "bitsandbytes AdamW8bit"):
        assert _optimizer_bytes(_torchao_row(name)) == 13_687_406_720, name
    assert _optimizer_bytes(_torchao_row("torch.optim.AdamW (fused)")) == 26_953_662_464
    four = _torchao_row("torchao AdamW4bit")
    arch, _ = tc.resolve_arch(L2_7B)
    _, _, _, approx, _ = tc.build_spec_dict(four, arch)
    assert any("no 4-bit state" in a for a in approx)
    assert _optimizer_bytes(four) == 26_953_662_464
