"""Encoder-only and encoder-decoder families: activations, KV caches and length limits.

Every figure is worked by hand from the config in tests/data/configs (bert-base-uncased:
hidden 768, 12 heads, intermediate 3072, 12 layers, vocab 30522; t5-small: d_model 512, 8 heads
of d_kv 64, 6 + 6 layers; whisper-tiny: d_model 384, 6 heads, 4 + 4 layers, 1500 source and
448 target positions). bench/encoder_activations_vs_torch.py compares the same formulas with
the tensors a real forward keeps on CPU (within 7%).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.ledger import ESTIMATED, UNKNOWN, estimate
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.spec import loads_spec

pytest.importorskip("torch")
pytest.importorskip("transformers")

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"


@pytest.fixture(scope="module", autouse=True)
def cache_dir(session_cache_dir):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VRAMTUI_CACHE_DIR", str(session_cache_dir))
        yield session_cache_dir


def _arch(name: str, **over):
    config = {**json.loads((CONFIGS / f"{name}.json").read_text()), **over}
    return architecture_from_hf_config(config, name, f"{name}/config.json", whole_model=True)


@pytest.fixture(scope="module")
def archs(cache_dir):
    return {
        "bert-mlm": _arch("bert-base-uncased"),
        "bert": _arch("bert-base-uncased", architectures=["BertModel"]),
        "t5": _arch("t5-small"),
        "whisper": _arch("whisper-tiny"),
    }


def _inference(arch, *, conc=1, prompt=128, generated=1, attention="eager"):
    text = (
        'schema_version = 1\n[model]\nparams = 1000000\n[task]\nkind = "inference"\n'
        '[weights]\nformat = "bf16"\n'
        f"[lengths]\nprompt_tokens = {prompt}\ngenerated_tokens = {generated}\n"
        f'[batch]\nconcurrency = {conc}\n[runtime]\nattention = "{attention}"\n'
        'kv_cache_dtype = "bf16"\n[placement]\ngpus = 1\n[headroom]\nmode = "itemised"\n'
    )
    est = estimate(loads_spec(text), arch)
    return {i.key: i for i in est.items}, est


def _training(arch, *, kind="full_finetune", mb=1, seq=128, ckpt="none", extra=""):
    text = (
        f'schema_version = 1\n[model]\nparams = 1000000\n[task]\nkind = "{kind}"\n{extra}'
        f'[weights]\nformat = "bf16"\n[lengths]\nseq_len = {seq}\n'
        f"[batch]\nmicro_batch = {mb}\n"
        '[training]\noptimizer = "adamw"\nmaster_weights_fp32 = true\ngrad_dtype = "bf16"\n'
        f'grad_checkpointing = "{ckpt}"\n[runtime]\nattention = "eager"\n'
        '[placement]\ngpus = 1\n[headroom]\nmode = "itemised"\n'
    )
    est = estimate(loads_spec(text), arch)
    return {i.key: i for i in est.items}, est


# bert-base at 8 x 512 tokens in bf16: T = 4096 tokens
T = 8 * 512
TH = T * 768 * 2  # one copy of the hidden states: 6,291,456 B
TF = T * 3072 * 2  # the intermediate: 25,165,824 B
SCORES = 8 * 12 * 512 * 512 * 2  # 50,331,648 B


def test_bert_base_eager_inference_peak_worked_by_hand(archs):
    items, _ = _inference(archs["bert"], conc=8, prompt=512)
    act = items["activations.inference"]
    # held: embedding output + layer input; attention: q, k, v + scores + a second copy of the
    # scores (larger than matmul's copies of q and k at 512 tokens)
    attention = 3 * TH + SCORES + SCORES
    # MLP: attention output + the kept probabilities + the intermediate + its GELU
    mlp = TH + SCORES + TF + TF
    assert attention == 119_537_664 and mlp == 106_954_752
    assert act.status == ESTIMATED
    assert act.stage_bytes == {"prefill": 2 * TH + attention}
    assert act.stage_bytes["prefill"] == 132_120_576
    assert "prompt_tokens = 512" in act.basis and "generated_tokens does not apply" in act.basis


def test_bert_base_sdpa_has_no_scores(archs):
    items, _ = _inference(archs["bert"], conc=8, prompt=512, attention="sdpa")
    # attention: q, k, v + output + its contiguous copy = 5 TH = 31,457,280 B; the MLP is
    # larger: TH + 2 TF = 56,623,104 B
    assert items["activations.inference"].stage_bytes["prefill"] == 2 * TH + TH + 2 * TF
    assert items["activations.inference"].stage_bytes["prefill"] == 69_206_016


def test_bert_masked_lm_head_peaks_at_the_logits(archs):
    items, _ = _inference(archs["bert-mlm"], conc=8, prompt=512)
    act = items["activations.inference"]
    # encoder output + transform + LayerNorm (3 TH) + 4096 x 30522 logits x 2 B
    head = 3 * TH + T * 30522 * 2
    assert head == 268_910_592
    assert act.stage_bytes["prefill"] == head
    assert "at the masked-LM head" in act.basis


def test_encoder_only_says_it_keeps_no_kv_cache(archs):
    items, est = _inference(archs["bert"], conc=8, prompt=512)
    kv = items["kv_cache"]
    assert kv.status == ESTIMATED and kv.max_bytes == 0
    assert "encoder-only: no KV cache" in kv.basis
    assert "logits.inference" not in items
    assert any("bert: an encoder-only model" in n for n in est.notes)


def test_bert_input_beyond_max_position_embeddings_is_one_warning(archs):
    _, est = _inference(archs["bert"], prompt=1024)
    warnings = [n for n in est.notes if n.startswith("warning:")]
    assert len(warnings) == 1
    assert "max_position_embeddings 512" in warnings[0] and "1,024" in warnings[0]
    _, est = _inference(archs["bert"], prompt=512)
    assert not [n for n in est.notes if n.startswith("warning:")]


def test_t5_small_cross_and_self_kv_worked_by_hand(archs):
    items, _ = _inference(archs["t5"], prompt=512, generated=64)
    cross = items["kv_cache.cross"]
    assert 2 * 6 * 1 * 512 * 8 * 64 * 2 == 6_291_456
    assert cross.stage_bytes == {"prefill": 6_291_456, "decode": 6_291_456}
    self_kv = items["kv_cache"]
    # 2 x 6 layers x 8 heads x d_kv 64 x 2 B per decoder position, 64 positions at the end
    assert self_kv.stage_bytes == {"prefill": 12_288, "decode": 786_432}
    assert "Cross-attention" in cross.name and "Decoder self-attention" in self_kv.name


def test_t5_inner_width_differs_from_d_model_and_the_cache_follows_it(cache_dir):
    # d_model 512 but 8 heads x d_kv 128 = 1024
    arch = _arch("t5-small", d_kv=128)
    items, _ = _inference(arch, prompt=100, generated=10)
    assert items["kv_cache.cross"].stage_bytes["decode"] == 2 * 6 * 100 * 8 * 128 * 2
    assert "d_kv 128 = 1024 (d_model is 512)" in items["kv_cache.cross"].basis


def test_whisper_tiny_decoder_and_cross_kv_worked_by_hand(archs):
    items, est = _inference(archs["whisper"], prompt=4, generated=444)
    # 2 x 4 layers x 6 heads x 64 x 2 B = 6,144 B per position x 448 positions
    assert items["kv_cache"].stage_bytes["decode"] == 2_752_512
    # cross: 1500 encoder frames whatever the spec says
    assert items["kv_cache.cross"].stage_bytes["decode"] == 2 * 4 * 1500 * 6 * 64 * 2 == 9_216_000
    assert "map onto the decoder" in items["kv_cache"].basis
    assert not [n for n in est.notes if n.startswith("warning:")]


def test_whisper_encoder_peak_worked_by_hand(archs):
    items, _ = _inference(archs["whisper"], prompt=4, generated=4)
    th = 1500 * 384 * 2  # 1,152,000 B
    tf = 1500 * 1536 * 2
    scores = 6 * 1500 * 1500 * 2  # 27,000,000 B
    encoder_layer = 2 * th + 3 * th + scores + scores  # held + attention point
    assert encoder_layer > 2 * th + 2 * th + scores + 2 * tf  # the MLP point is smaller
    assert items["activations.inference"].stage_bytes["prefill"] == encoder_layer == 59_760_000


def test_whisper_32k_context_is_refused_by_a_warning_naming_448(archs):
    _, est = _inference(archs["whisper"], prompt=32_000, generated=768)
    warnings = [n for n in est.notes if n.startswith("warning:")]
    assert len(warnings) == 1 and "max_target_positions 448" in warnings[0]


def test_bert_full_finetune_saved_tensors_worked_by_hand(archs):
    items, _ = _training(archs["bert"], mb=1, seq=128)
    t, th, tf = 128, 128 * 768 * 2, 128 * 3072 * 2
    scores = 12 * 128 * 128
    per_layer = (
        8 * th  # input, copies of q, k, v, out-proj input, LN1 in and out, LN2 in
        + 2 * scores * 2  # softmax output + attention-dropout output
        + scores  # its 1 B mask
        + 2 * tf  # GELU input and output
        + 2 * t * 8  # two LayerNorms' fp32 mean and rstd
        + 2 * t * 768  # two hidden-dropout masks, 1 B
    )
    assert per_layer == 4_327_424
    embeddings = th + t * 8 + t * 768  # LayerNorm input, statistics, dropout mask
    act = items["activations.training"]
    assert act.status == ESTIMATED
    assert act.stage_bytes["forward"] == 12 * per_layer + embeddings == 52_225_024
    # BertForMaskedLM's loss is not charged for a BertModel; the MLM model scores every token
    assert items["logits.training"].max_bytes == 0
    mlm, _ = _training(archs["bert-mlm"], mb=1, seq=128)
    assert mlm["logits.training"].stage_bytes["backward"] == 3 * 128 * 30522 * 2


def test_full_checkpointing_keeps_layer_inputs(archs):
    items, _ = _training(archs["bert"], mb=1, seq=128, ckpt="full")
    act = items["activations.training"]
    th = 128 * 768 * 2
    assert act.stage_bytes["backward"] == 12 * th + 4_327_424


def test_lora_on_an_encoder_is_unknown_and_says_why(archs):
    lora = '[task.lora]\nrank = 8\ntargets = ["query", "value"]\n'
    items, _ = _training(archs["bert"], kind="lora", extra=lora)
    act = items["activations.training"]
    assert act.status == UNKNOWN and "full fine-tune only" in act.basis


def test_t5_training_maps_seq_len_onto_both_stacks(archs):
    items, _ = _training(archs["t5"], mb=1, seq=128)
    act = items["activations.training"]
    assert act.status == ESTIMATED and act.max_bytes > 0
    assert "both the encoder input and the decoder target" in act.basis
    assert items["logits.training"].stage_bytes["forward"] == 2 * 128 * 32128 * 2


def test_estimate_cli_shows_and_serialises_the_items(tmp_path, capsys):
    (tmp_path / "config.json").write_text((CONFIGS / "whisper-tiny.json").read_text())
    assert main(["estimate", "--model", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Cross-attention KV cache" in out
    assert main(["estimate", "--model", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    items = {i["key"]: i for i in data["items"]}
    assert items["kv_cache.cross"]["status"] == "estimated"
    assert items["activations.inference"]["status"] == "estimated"
    assert any("encoder-decoder model" in n for n in data["notes"])
