"""Round 9 of the training calibration (development + held_out_2 ... held_out_5): each
mechanism worked by hand from the framework's code (file and commit in each test's docstring),
and the corpus bench's reading of the settings a row states."""

from __future__ import annotations

import sys
from pathlib import Path

from vramtui.ledger import estimate

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import training_corpus_rows as tc  # noqa: F401  (the bench's mapping, used by later tests)
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
    fused = _spec(training='framework = "unsloth"\n[training.versions]\nunsloth = "2025.3.15"', **common)
    inplace = _spec(training='framework = "unsloth"\n[training.versions]\nunsloth = "2024.8"', **common)
    upcast = _spec(training='framework = "custom"', **common)
    assert _frag(fused, Q7B).stage_bytes["backward"] == 2_483_027_968
    assert _frag(inplace, Q7B).stage_bytes["backward"] == 19_931_332_608
    assert _frag(upcast, Q7B).stage_bytes["backward"] == 39_862_665_216
