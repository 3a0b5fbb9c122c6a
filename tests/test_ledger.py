"""The memory ledger against values worked by hand from published constants.

Every expected number here is written as arithmetic on the model's published config values
(config.json on the Hugging Face Hub) and the formulas of the project's memory-model reference
(`shared/reference/MEMORY-MODEL.md`), never copied from the ledger's output.
"""

from __future__ import annotations

from fractions import Fraction
from importlib.util import find_spec

import pytest

from vramtui.ledger import ESTIMATED, UNKNOWN, Estimate, GpuLayout, LedgerItem, estimate
from vramtui.ledger.items import Distribution
from vramtui.ledger.simple import simple_estimate
from vramtui.models.registry import find_model
from vramtui.spec import loads_spec, validate_against_architecture
from vramtui.units import GIB_BYTES, MIB_BYTES, format_bytes

LLAMA3_8B = "meta-llama/Meta-Llama-3-8B"
LLAMA3_70B = "meta-llama/Meta-Llama-3-70B"
LLAMA2_7B = "meta-llama/Llama-2-7b-hf"
MISTRAL_7B = "mistralai/Mistral-7B-v0.1"
GEMMA2_2B = "google/gemma-2-2b-it"
GEMMA3_1B = "google/gemma-3-1b-it"
DEEPSEEK_V2_LITE = "deepseek-ai/DeepSeek-V2-Lite"

# Published config.json values used below.
# Llama-3-8B: hidden 4096, intermediate 14336, 32 layers, 32 heads, 8 KV heads, head_dim 128,
# vocab 128256, untied lm_head, bf16.
L3_H, L3_I, L3_L, L3_KV, L3_D, L3_V = 4096, 14336, 32, 8, 128, 128256
# Parameters of one Llama-3-8B decoder layer: q,o 4096x4096; k,v 4096x1024; gate, up, down
# 4096x14336; two RMSNorms of 4096.
L3_ATTN_PER_LAYER = 2 * 4096 * 4096 + 2 * 4096 * 1024  # 41,943,040
L3_MLP_PER_LAYER = 3 * 4096 * 14336  # 176,160,768
L3_NORM_PER_LAYER = 2 * 4096
L3_EMBED = 128256 * 4096  # 525,336,576 (lm_head the same, untied)
# embed + lm_head + 32 layers + final norm = 8,030,261,248 (the published count)
L3_PARAMS = 2 * L3_EMBED + 32 * (L3_ATTN_PER_LAYER + L3_MLP_PER_LAYER + L3_NORM_PER_LAYER) + 4096
# KV per token (reference: 2 * L * n_kv * d * B): 131,072 B in bf16
L3_KV_PER_TOKEN_BF16 = 2 * 32 * 8 * 128 * 2


# --------------------------------------------------------------------------- spec builders


def _toml(
    model: str,
    *,
    task: str = "inference",
    weights: str = 'format = "bf16"',
    lengths: str,
    batch: str,
    runtime: str,
    placement: str = "gpus = 1",
    headroom: str = 'mode = "itemised"',
    training: str | None = None,
    lora: str | None = None,
) -> str:
    parts = [
        "schema_version = 1",
        f"[model]\n{model}",
        f'[task]\nkind = "{task}"',
    ]
    if lora is not None:
        parts.append(f"[task.lora]\n{lora}")
    parts += [
        f"[weights]\n{weights}",
        f"[lengths]\n{lengths}",
        f"[batch]\n{batch}",
    ]
    if training is not None:
        parts.append(f"[training]\n{training}")
    parts += [
        f"[runtime]\n{runtime}",
        f"[placement]\n{placement}",
        f"[headroom]\n{headroom}",
    ]
    return "\n\n".join(parts) + "\n"


def inference(
    model_id: str,
    *,
    prompt: int = 1000,
    generated: int = 0,
    concurrency: int = 1,
    kv_dtype: str = "bf16",
    block: int = 0,
    engine: str | None = None,
    attention: str = "flash",
    weights: str = 'format = "bf16"',
    placement: str = "gpus = 1",
    headroom: str = 'mode = "itemised"',
):
    """(spec, arch, estimate) for an inference workload on a catalogue model."""
    runtime = f'attention = "{attention}"\nkv_cache_dtype = "{kv_dtype}"\nkv_block_tokens = {block}'
    if engine is not None:
        runtime += f'\nengine = "{engine}"'
    text = _toml(
        f'id = "{model_id}"',
        weights=weights,
        lengths=f"prompt_tokens = {prompt}\ngenerated_tokens = {generated}",
        batch=f"concurrency = {concurrency}",
        runtime=runtime,
        placement=placement,
        headroom=headroom,
    )
    spec = loads_spec(text)
    arch = find_model(model_id)
    validate_against_architecture(spec, arch)
    return spec, arch, estimate(spec, arch)


def training(
    model_id: str,
    *,
    task: str = "full_finetune",
    seq_len: int = 512,
    micro_batch: int = 1,
    grad_accum: int = 1,
    weights: str = 'format = "bf16"',
    optimizer: str = "adamw",
    master: bool = True,
    grad_dtype: str = "bf16",
    checkpointing: str = "none",
    attention: str = "flash",
    placement: str = "gpus = 1",
    lora: str | None = None,
):
    text = _toml(
        f'id = "{model_id}"',
        task=task,
        lora=lora,
        weights=weights,
        lengths=f"seq_len = {seq_len}",
        batch=f"micro_batch = {micro_batch}\ngrad_accum = {grad_accum}",
        training=(
            f'optimizer = "{optimizer}"\nmaster_weights_fp32 = {"true" if master else "false"}\n'
            f'grad_dtype = "{grad_dtype}"\ngrad_checkpointing = "{checkpointing}"'
        ),
        runtime=f'attention = "{attention}"',
        placement=placement,
    )
    spec = loads_spec(text)
    arch = find_model(model_id)
    validate_against_architecture(spec, arch)
    return spec, arch, estimate(spec, arch)


def item(est: Estimate, key: str) -> LedgerItem:
    found = [i for i in est.items if i.key == key]
    assert len(found) == 1, f"{key} not in {[i.key for i in est.items]}"
    return found[0]


def weight_bytes(est: Estimate) -> int:
    return sum(i.max_bytes for i in est.items_in("weights"))


# --------------------------------------------------------------------------- 1. the seed

SEED_TOML = _toml(
    "params = 7e9",
    weights='format = "fp16"',
    lengths="prompt_tokens = 2048\ngenerated_tokens = 256",
    batch="concurrency = 1",
    runtime='attention = "sdpa"\nkv_cache_dtype = "fp16"',
    headroom='mode = "manual"\nreserve_gib = 6.0\nreason = "the seed\'s chosen reserve"',
)


def test_seed_bare_7b_fp16_with_6_gib_reserve():
    est = estimate(loads_spec(SEED_TOML))
    # 7e9 parameters x 16 bits / 8 = 14e9 bytes
    assert est.weights_only_bytes == 14_000_000_000
    # every stage: weights + the 6 GiB reserve, nothing else itemised in manual mode
    assert est.peak_bytes == 14 * 10**9 + 6 * 2**30
    assert format_bytes(est.peak_bytes) == "19.04 GiB"
    assert format_bytes(est.weights_only_bytes) == "13.04 GiB"
    assert all(i.status == ESTIMATED for i in est.items)
    assert est.unknown_items == []
    assert est.param_count == 7 * 10**9


def test_seed_unit_examples():
    # 24e9 / 2^30 = 22.3517...; 14e9 / 2^30 = 13.0385...
    assert format_bytes(24 * 10**9) == "22.35 GiB"
    assert format_bytes(14 * 10**9) == "13.04 GiB"


def test_seed_simple_mode_and_format_table():
    s = simple_estimate(7e9, 16, 6)
    assert s.weights_only_bytes == 14_000_000_000
    assert s.reserve_bytes == 6 * 2**30
    assert s.rough_total_bytes == 14_000_000_000 + 6 * 2**30
    assert format_bytes(s.rough_total_bytes) == "19.04 GiB"
    rows = {r.bits: r for r in s.table}
    assert sorted(rows) == [4, 8, 16, 32]
    # bits x 7e9 / 8 bytes; the same 6 GiB reserve on every row (the seed's table)
    expected = {32: 28 * 10**9, 16: 14 * 10**9, 8: 7 * 10**9, 4: 35 * 10**8}
    # weights GiB: 26.077, 13.039, 6.519, 3.260; + 6 GiB: 32.077, 19.039, 12.519, 9.260
    expected_total_text = {32: "32.08 GiB", 16: "19.04 GiB", 8: "12.52 GiB", 4: "9.26 GiB"}
    expected_weights_text = {32: "26.08 GiB", 16: "13.04 GiB", 8: "6.52 GiB", 4: "3.26 GiB"}
    for bits, row in rows.items():
        assert row.weights_only_bytes == expected[bits]
        assert row.reserve_bytes == 6 * 2**30
        assert row.rough_total_bytes == expected[bits] + 6 * 2**30
        assert format_bytes(row.rough_total_bytes) == expected_total_text[bits]
        assert format_bytes(row.weights_only_bytes) == expected_weights_text[bits]
    # the 4-bit row warns that it is not a peak (metadata, 16-bit modules)
    assert "not a peak" in rows[4].note


# --------------------------------------------------------------------------- 2. KV cache (GQA)


def test_llama3_8b_kv_per_token_contiguous():
    P, G = 1000, 30
    _, arch, est = inference(LLAMA3_8B, prompt=P, generated=G)
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim) == (L3_L, L3_KV, L3_D)
    assert L3_KV_PER_TOKEN_BF16 == 131_072
    kv = item(est, "kv_cache")
    assert kv.status == ESTIMATED
    assert kv.bytes_at("decode") == 131_072 * (P + G)
    assert kv.bytes_at("prefill") == 131_072 * P
    assert kv.bytes_at("load") == 0 and "load" not in kv.stages


def test_llama3_8b_kv_scales_with_concurrency():
    P, G, C = 700, 300, 3
    _, _, est = inference(LLAMA3_8B, prompt=P, generated=G, concurrency=C)
    assert item(est, "kv_cache").bytes_at("decode") == 131_072 * (P + G) * C


def test_llama3_8b_kv_paged_blocks_round_up():
    P, G = 1000, 30
    _, _, est = inference(LLAMA3_8B, prompt=P, generated=G, block=16)
    kv = item(est, "kv_cache")
    # ceil(1030 / 16) = 65 blocks = 1040 tokens; prefill ceil(1000 / 16) = 63 blocks = 1008
    assert kv.bytes_at("decode") == 131_072 * 65 * 16
    assert kv.bytes_at("prefill") == 131_072 * 63 * 16
    # already a multiple of the block: no rounding
    _, _, est = inference(LLAMA3_8B, prompt=1024, generated=0, block=16)
    assert item(est, "kv_cache").bytes_at("decode") == 131_072 * 1024


def test_llama3_8b_fp8_kv_halves():
    P, G = 1000, 30
    _, _, est = inference(LLAMA3_8B, prompt=P, generated=G, kv_dtype="fp8")
    assert item(est, "kv_cache").bytes_at("decode") == 2 * 32 * 8 * 128 * 1 * (P + G)
    assert item(est, "kv_cache").bytes_at("decode") * 2 == 131_072 * (P + G)


# --------------------------------------------------------------------------- 3. LoRA


def test_lora_r8_q_v_llama2_7b_trainable_count():
    _, _, est = training(LLAMA2_7B, task="lora", lora='rank = 8\ntargets = ["q_proj", "v_proj"]')
    # 32 layers x 2 modules x r 8 x (4096 + 4096) = 4,194,304 (what PEFT prints)
    n = 32 * 2 * 8 * (4096 + 4096)
    assert n == 4_194_304
    adapter = item(est, "adapter")
    assert adapter.max_bytes == n * 4  # PEFT keeps adapters in fp32
    grads = item(est, "gradients")
    assert grads.max_bytes == n * 4  # gradients of fp32 adapters are fp32
    # AdamW m and v in fp32 for the trainable parameters only
    assert item(est, "optimizer").max_bytes == 2 * n * 4
    # no fp32 master copy of a frozen base
    assert est.items_in("master_weights") == []
    # the frozen base stays bf16: 6,738,415,616 params (Llama-2-7B) x 2 B
    llama2_params = 2 * 32000 * 4096 + 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096) + 4096
    assert llama2_params == 6_738_415_616
    assert weight_bytes(est) == llama2_params * 2


def test_lora_dotted_target_matches_leaf_name():
    # The spec format lets a target be dotted ("self_attn.q_proj" matches on its last part).
    _, _, est = training(
        LLAMA2_7B, task="lora", lora='rank = 8\ntargets = ["self_attn.q_proj", "v_proj"]'
    )
    assert item(est, "adapter").max_bytes == 32 * 2 * 8 * (4096 + 4096) * 4


# --------------------------------------------------------------------------- 4. NF4


def test_nf4_double_quant_bytes_per_param_llama3_8b():
    _, _, est = inference(LLAMA3_8B, weights='format = "nf4"\ndouble_quant = true', prompt=16)
    n_linear = 32 * (L3_ATTN_PER_LAYER + L3_MLP_PER_LAYER)  # converted Linears (no lm_head)
    quant = (
        item(est, "weights.attention.nf4").max_bytes
        + item(est, "weights.mlp.nf4").max_bytes
        + item(est, "weights.quant_metadata").max_bytes
    )
    # N/2 data + N/64 8-bit absmax + 4 B per 256 blocks of 64 = 4N/(64*256)
    per_param = Fraction(1, 2) + Fraction(1, 64) + Fraction(4, 64 * 256)
    assert float(per_param) == pytest.approx(0.516, abs=1e-3)
    # at most (1 B data + 1 absmax + 4 B nested) of ceil rounding per module instance: 7 x 32
    assert abs(quant - n_linear * per_param) <= 7 * 32 * (1 + 1 + 4)
    assert quant / n_linear == pytest.approx(0.516, abs=1e-3)
    # every Llama-3-8B Linear has a multiple of 64 x 256 values, so here it is exact
    assert quant == n_linear * per_param
    # the data alone is N/2
    assert (
        item(est, "weights.attention.nf4").max_bytes + item(est, "weights.mlp.nf4").max_bytes
        == n_linear // 2
    )
    # not converted: embedding, lm_head and norms stay bf16, 2 B/param
    assert item(est, "weights.embedding.bf16").max_bytes == L3_EMBED * 2
    assert item(est, "weights.lm_head.bf16").max_bytes == L3_EMBED * 2
    assert item(est, "weights.norm.bf16").max_bytes == (32 * L3_NORM_PER_LAYER + 4096) * 2
    assert est.weights_only_bytes == quant + (2 * L3_EMBED + 32 * L3_NORM_PER_LAYER + 4096) * 2


def test_nf4_without_double_quant_is_0_5625():
    _, _, est = inference(LLAMA3_8B, weights='format = "nf4"\ndouble_quant = false', prompt=16)
    n_linear = 32 * (L3_ATTN_PER_LAYER + L3_MLP_PER_LAYER)
    # N/2 + one fp32 absmax per 64 values = N/2 + 4N/64 = 0.5625 N
    assert item(est, "weights.quant_metadata").max_bytes == n_linear * 4 // 64
    quant = weight_bytes(est) - (2 * L3_EMBED + 32 * L3_NORM_PER_LAYER + 4096) * 2
    assert quant + item(est, "weights.quant_metadata").max_bytes == n_linear * Fraction(9, 16)


# --------------------------------------------------------------------------- 5. model states


def test_mixed_precision_adamw_is_16_bytes_per_param():
    _, arch, est = training(LLAMA3_8B, master=True, grad_dtype="bf16")
    assert arch.param_count == L3_PARAMS == 8_030_261_248
    weights = weight_bytes(est)
    grads = item(est, "gradients").max_bytes
    master = item(est, "master_weights").max_bytes
    opt = item(est, "optimizer").max_bytes
    assert weights == 2 * L3_PARAMS
    assert grads == 2 * L3_PARAMS
    assert master == 4 * L3_PARAMS
    assert opt == (4 + 4) * L3_PARAMS
    assert Fraction(weights + grads + master + opt, arch.param_count) == 16


def test_fp32_grads_make_18_and_no_master_12():
    _, _, est = training(LLAMA3_8B, master=True, grad_dtype="fp32")
    states = sum(
        item(est, k).max_bytes for k in ("gradients", "master_weights", "optimizer")
    ) + weight_bytes(est)
    assert Fraction(states, L3_PARAMS) == 2 + 4 + 4 + 8
    # pure bf16 AdamW, no master, fp32 states: 2 + 2 + 8 = 12
    _, _, est = training(LLAMA3_8B, master=False, grad_dtype="bf16")
    assert est.items_in("master_weights") == []
    states = weight_bytes(est) + item(est, "gradients").max_bytes + item(est, "optimizer").max_bytes
    assert Fraction(states, L3_PARAMS) == 12


# --------------------------------------------------------------------------- 6. sliding window


def test_mistral_sliding_window_on_every_layer():
    # Mistral-7B-v0.1: 32 layers, 8 KV heads, head_dim 4096/32 = 128, window 4096 everywhere
    _, arch, est = inference(MISTRAL_7B, prompt=8000, generated=192)
    assert arch.num_sliding_layers == 32 and arch.sliding_window == 4096
    kv = item(est, "kv_cache")
    assert kv.bytes_at("decode") == 32 * (2 * 8 * 128 * 2) * 4096  # 8192 tokens -> 4096 kept
    assert kv.bytes_at("prefill") == 32 * (2 * 8 * 128 * 2) * 4096  # 8000 -> 4096 kept
    # below the window every token is kept
    _, _, est = inference(MISTRAL_7B, prompt=2000, generated=0)
    assert item(est, "kv_cache").bytes_at("decode") == 32 * (2 * 8 * 128 * 2) * 2000


def test_gemma2_alternating_sliding_layers():
    # Gemma-2-2B: 26 layers alternating sliding (layers 0, 2, ..., 24) and global;
    # 4 KV heads, head_dim 256, window 4096. 13 sliding + 13 full.
    _, arch, est = inference(GEMMA2_2B, prompt=8000, generated=192)
    assert arch.num_sliding_layers == 13
    assert arch.layer_attention[:4] == ("sliding", "full", "sliding", "full")
    per_layer_token = 2 * 4 * 256 * 2  # bf16 cache
    expected = 13 * per_layer_token * 4096 + 13 * per_layer_token * 8192
    assert item(est, "kv_cache").bytes_at("decode") == expected


def test_gemma3_five_sliding_to_one_full():
    # Gemma-3-1B: 26 layers, pattern 6 -> layers 5, 11, 17, 23 global (4), 22 sliding;
    # 1 KV head, head_dim 256, window 512.
    _, arch, est = inference(GEMMA3_1B, prompt=4000, generated=96)
    full = [i for i in range(26) if (i + 1) % 6 == 0]
    assert full == [5, 11, 17, 23]
    assert arch.num_sliding_layers == 22
    assert [i for i, k in enumerate(arch.layer_attention) if k == "full"] == full
    per_layer_token = 2 * 1 * 256 * 2
    expected = 22 * per_layer_token * 512 + 4 * per_layer_token * 4096
    assert item(est, "kv_cache").bytes_at("decode") == expected
    # paged: the window is rounded to blocks too (512 is already whole blocks), 4096 too
    _, _, est = inference(GEMMA3_1B, prompt=4000, generated=90, block=16)
    # 4090 tokens -> 256 blocks = 4096 on full layers, 512 on sliding layers
    assert item(est, "kv_cache").bytes_at("decode") == expected


# --------------------------------------------------------------------------- 7. MLA and TP


def test_deepseek_v2_lite_mla_latent_per_token():
    P, G = 1000, 24
    _, arch, est = inference(DEEPSEEK_V2_LITE, prompt=P, generated=G, engine="vllm")
    assert arch.num_layers == 27
    kv = item(est, "kv_cache")
    # (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B per layer per token, 27 layers
    assert kv.bytes_at("decode") == 27 * (512 + 64) * 2 * (P + G)


def test_deepseek_v2_lite_mla_latent_replicated_under_tp():
    P, G = 1000, 24
    _, _, est = inference(
        DEEPSEEK_V2_LITE,
        prompt=P,
        generated=G,
        engine="vllm",
        placement="gpus = 2\ntensor_parallel = 2",
    )
    kv = item(est, "kv_cache")
    total = 27 * (512 + 64) * 2 * (P + G)
    assert kv.gpu_bytes_at("decode", est.layout) == (total, total)  # not halved


def test_llama3_70b_tp2_halves_kv_and_weights():
    # Llama-3-70B: 80 layers, hidden 8192, intermediate 28672, 64 heads, 8 KV heads,
    # head_dim 128, vocab 128256, untied.
    P, G = 1000, 24
    _, _, est = inference(
        LLAMA3_70B, prompt=P, generated=G, placement="gpus = 2\ntensor_parallel = 2"
    )
    kv_total = 2 * 80 * 8 * 128 * 2 * (P + G)
    kv = item(est, "kv_cache")
    assert kv.bytes_at("decode") == kv_total
    assert kv.gpu_bytes_at("decode", est.layout) == (kv_total // 2, kv_total // 2)

    attn = 80 * (2 * 8192 * 8192 + 2 * 8192 * 1024)
    mlp = 80 * 3 * 8192 * 28672
    embed = 128256 * 8192
    norms = 80 * 2 * 8192 + 8192
    per_gpu = {
        "weights.attention.bf16": attn * 2 // 2,
        "weights.mlp.bf16": mlp * 2 // 2,
        "weights.embedding.bf16": embed * 2 // 2,
        "weights.lm_head.bf16": embed * 2 // 2,
        "weights.norm.bf16": norms * 2,  # replicated on both ranks
    }
    for key, b in per_gpu.items():
        assert item(est, key).gpu_bytes_at("load", est.layout) == (b, b), key
    assert sum(per_gpu.values()) == (attn + mlp + 2 * embed) + norms * 2
    # at decode each GPU holds its half of the weights and KV + replicated norms + the rest
    decode = est.stage_gpu_bytes("decode")
    assert decode[0] == decode[1]
    assert decode[0] >= sum(per_gpu.values()) + kv_total // 2


def test_tp16_on_8_kv_heads_replicates_one_head_per_rank():
    P, G = 1000, 24
    _, _, est = inference(
        LLAMA3_70B, prompt=P, generated=G, placement="gpus = 16\ntensor_parallel = 16"
    )
    kv = item(est, "kv_cache")
    kv_total = 2 * 80 * 8 * 128 * 2 * (P + G)
    assert kv.distribution.tp_share == Fraction(1, 8)  # max(8/16, 1) = 1 head of 8
    assert kv.gpu_bytes_at("decode", est.layout) == (kv_total // 8,) * 16


# --------------------------------------------------------------------------- 8. placement


def test_two_gpus_without_parallelism_are_two_full_replicas():
    _, _, est = inference(LLAMA3_8B, placement="gpus = 2")
    for w in est.items_in("weights"):
        assert w.gpu_bytes_at("load", est.layout) == (w.max_bytes, w.max_bytes)
    assert est.stage_gpu_bytes("load")[0] >= 2 * L3_PARAMS  # full bf16 weights on GPU 0
    assert est.stage_gpu_bytes("decode")[0] == est.stage_gpu_bytes("decode")[1]
    assert any("separate memories" in n for n in est.notes)
    # the per-GPU peak equals the single-GPU estimate: never pooled
    _, _, one = inference(LLAMA3_8B, placement="gpus = 1")
    assert est.peak_bytes == one.peak_bytes


def _per_gpu(est: Estimate, key: str, stage: str) -> tuple[int, ...]:
    return item(est, key).gpu_bytes_at(stage, est.layout)


def test_zero3_divides_weights_grads_optimizer_by_4():
    _, _, est = training(LLAMA3_8B, placement='gpus = 4\ndata_parallel_sharding = "zero3"')
    stage = "optimizer_step"
    for w in est.items_in("weights"):
        q = -(-w.max_bytes // 4)
        assert w.gpu_bytes_at(stage, est.layout) == (q,) * 4, w.key
    assert _per_gpu(est, "gradients", stage) == (2 * L3_PARAMS // 4,) * 4
    assert _per_gpu(est, "optimizer", stage) == (8 * L3_PARAMS // 4,) * 4
    assert _per_gpu(est, "master_weights", stage) == (4 * L3_PARAMS // 4,) * 4
    assert sum(sum(w.gpu_bytes_at(stage, est.layout)) for w in est.items_in("weights")) == (
        2 * L3_PARAMS
    )  # the four shards together are one copy


def test_zero1_divides_only_optimizer_and_master():
    _, _, est = training(LLAMA3_8B, placement='gpus = 4\ndata_parallel_sharding = "zero1"')
    stage = "optimizer_step"
    for w in est.items_in("weights"):
        assert w.gpu_bytes_at(stage, est.layout) == (w.max_bytes,) * 4, w.key
    assert _per_gpu(est, "gradients", stage) == (2 * L3_PARAMS,) * 4
    assert _per_gpu(est, "optimizer", stage) == (8 * L3_PARAMS // 4,) * 4
    assert _per_gpu(est, "master_weights", stage) == (4 * L3_PARAMS // 4,) * 4


def test_zero2_also_divides_gradients():
    _, _, est = training(LLAMA3_8B, placement='gpus = 4\ndata_parallel_sharding = "zero2"')
    stage = "backward"
    for w in est.items_in("weights"):
        assert w.gpu_bytes_at(stage, est.layout) == (w.max_bytes,) * 4, w.key
    assert _per_gpu(est, "gradients", stage) == (2 * L3_PARAMS // 4,) * 4


# --------------------------------------------------------------------------- 9. stages


def test_training_stage_liveness():
    _, _, est = training(LLAMA3_8B)
    opt = item(est, "optimizer")
    assert "load" not in opt.stages and opt.bytes_at("load") == 0
    assert "optimizer_step" in opt.stages
    grads = item(est, "gradients")
    assert {"backward", "optimizer_step"} <= set(grads.stages)
    assert "load" not in grads.stages
    # load: weights + master copy + CUDA context + the load transient, no optimiser states
    load = est.stage_gpu_bytes("load")[0]
    assert load < weight_bytes(est) + item(est, "master_weights").max_bytes + 8 * L3_PARAMS


def test_inference_kv_not_live_at_load():
    _, _, est = inference(LLAMA3_8B, prompt=1000, generated=30)
    kv = item(est, "kv_cache")
    assert "load" not in kv.stages
    assert kv.gpu_bytes_at("load", est.layout) == (0,)
    assert est.stage_gpu_bytes("decode")[0] - est.stage_gpu_bytes("load")[0] != 0


def test_conservative_bound_hand_constructed():
    layout = GpuLayout(1)
    a = LedgerItem(
        key="a",
        name="a",
        category="transient",
        status=ESTIMATED,
        basis="hand",
        stages=("load",),
        stage_bytes={"load": 10},
    )
    b = LedgerItem(
        key="b",
        name="b",
        category="kv_cache",
        status=ESTIMATED,
        basis="hand",
        stages=("prefill", "decode"),
        stage_bytes={"prefill": 5, "decode": 20},
    )
    c = LedgerItem(
        key="c",
        name="c",
        category="weights",
        status=ESTIMATED,
        basis="hand",
        stages=("load", "prefill", "decode"),
        stage_bytes={s: 100 for s in ("load", "prefill", "decode")},
    )
    u = LedgerItem(
        key="u",
        name="u",
        category="activations",
        status=UNKNOWN,
        basis="hand",
        stages=("prefill",),
    )
    est = Estimate(
        items=(a, b, c, u),
        stages=("load", "prefill", "decode"),
        layout=layout,
        model_label="hand",
        param_count=None,
    )
    # load 110, prefill 105, decode 120 -> peak 120 at decode
    assert est.stage_peak_bytes == {"load": 110, "prefill": 105, "decode": 120}
    assert est.peak_bytes == 120 and est.peak_stage == "decode"
    # bound: 10 + 20 + 100, items whose maxima fall in different stages
    assert est.conservative_bound_bytes == 130 > est.peak_bytes
    assert est.unknown_items == [u]


def test_conservative_bound_hand_constructed_two_gpus():
    layout = GpuLayout(2, pipeline_parallel=2)
    first = Distribution(stage_fractions=(Fraction(1), Fraction(0)))
    split = Distribution(stage_fractions=(Fraction(1, 4), Fraction(3, 4)))
    a = LedgerItem(
        key="a",
        name="a",
        category="weights",
        status=ESTIMATED,
        basis="hand",
        stages=("load", "decode"),
        stage_bytes={"load": 40, "decode": 40},
        distribution=first,
    )
    b = LedgerItem(
        key="b",
        name="b",
        category="kv_cache",
        status=ESTIMATED,
        basis="hand",
        stages=("decode",),
        stage_bytes={"decode": 100},
        distribution=split,
    )
    est = Estimate(
        items=(a, b),
        stages=("load", "decode"),
        layout=layout,
        model_label="hand",
        param_count=None,
    )
    assert est.stage_gpu_bytes("load") == (40, 0)
    assert est.stage_gpu_bytes("decode") == (40 + 25, 75)
    assert est.peak_bytes == 75
    assert est.conservative_bound_gpu_bytes == (65, 75)


def test_real_estimate_bound_exceeds_peak():
    # Llama-3-8B, 1000-token prompt, 30 generated. The prefill working set (1000 tokens x
    # (2 x 4096 + 3 x 14336) x 2 B ~ 102 MB) dwarfs the 30 extra tokens of KV that decode adds
    # (30 x 131,072 B ~ 3.9 MB), so the peak stage is prefill. The bound instead adds the KV
    # at its decode maximum and the load-only transient on top of it.
    P, G = 1000, 30
    _, _, est = inference(LLAMA3_8B, prompt=P, generated=G)
    assert est.peak_stage == "prefill"
    extra = 131_072 * G + item(est, "transient.load").max_bytes
    assert est.conservative_bound_bytes - est.peak_bytes == extra
    assert est.conservative_bound_bytes > est.peak_bytes


def test_bare_count_itemised_lists_unknowns_outside_totals():
    text = _toml(
        "params = 7e9",
        weights='format = "fp16"',
        lengths="prompt_tokens = 2048\ngenerated_tokens = 256",
        batch="concurrency = 1",
        runtime='attention = "sdpa"\nkv_cache_dtype = "fp16"',
        headroom='mode = "itemised"\ncuda_context_bytes = 1000000000',
    )
    est = estimate(loads_spec(text))
    unknown = {i.key: i for i in est.unknown_items}
    assert unknown["kv_cache"].status == UNKNOWN
    assert unknown["activations.inference"].status == UNKNOWN
    assert all(i.max_bytes == 0 for i in unknown.values())
    # known: 14e9 B of weights + the given 1e9 B context, live at every stage
    assert sum(i.max_bytes for i in est.known_items) == 14 * 10**9 + 10**9
    assert est.peak_bytes == 14 * 10**9 + 10**9
    assert est.conservative_bound_bytes == est.peak_bytes


# --------------------------------------------------------------------------- 10. activations


def test_eager_adds_score_term_flash_does_not():
    s, mb = 1024, 2
    _, _, flash = training(LLAMA3_8B, seq_len=s, micro_batch=mb, attention="flash")
    _, _, eager = training(LLAMA3_8B, seq_len=s, micro_batch=mb, attention="eager")
    f = item(flash, "activations.training").max_bytes
    e = item(eager, "activations.training").max_bytes
    # eager keeps b x a x s^2 scores per layer: the fp32 softmax output (4 B, for its backward)
    # and the bf16 probabilities fed to the PV matmul (2 B); flash keeps only the fp32
    # log-sum-exp, b x a x s x 4 B. Eager's matmuls also save K and V repeated to all 32 heads
    # (repeat_kv copies, 2 x 4096 values per token) where flash saves the grouped K and V
    # (2 x 8 x 128 = 2 x 1024 values per token): 2 x (4096 - 1024) x 2 B more per token.
    # (The dry run's trace of a tiny Llama gives exactly this difference.)
    a = 32
    repeat = mb * s * 2 * (a * L3_D - L3_KV * L3_D) * 2
    assert e - f == 32 * (mb * a * s * s * (4 + 2) - mb * a * s * 4 + repeat)


def test_flash_training_activations_are_linear_in_length():
    _, _, one = training(LLAMA3_8B, seq_len=512, attention="flash")
    _, _, two = training(LLAMA3_8B, seq_len=1024, attention="flash")
    f1 = item(one, "activations.training").max_bytes
    f2 = item(two, "activations.training").max_bytes
    assert f2 == 2 * f1  # no s^2 term
    _, _, e1 = training(LLAMA3_8B, seq_len=512, attention="eager")
    _, _, e2 = training(LLAMA3_8B, seq_len=1024, attention="eager")
    e1b = item(e1, "activations.training").max_bytes
    e2b = item(e2, "activations.training").max_bytes
    # the quadratic part: 32 layers x 32 heads x 6 B x ((1024^2) - 2 x 512^2)
    quad = 32 * 32 * 6 * (1024**2 - 2 * 512**2)
    assert (e2b - 2 * e1b) - (f2 - 2 * f1) == quad


def test_logits_training_size():
    s, mb = 1024, 2
    _, _, est = training(LLAMA3_8B, seq_len=s, micro_batch=mb)
    logits = item(est, "logits.training")
    n = s * mb * L3_V  # 262,668,288 logits
    # forward, at the loss: bf16 logits (2 B) + their fp32 upcast (4 B) + log-softmax (4 B)
    assert logits.bytes_at("forward") == n * (2 + 4 + 4) == 2_626_682_880
    # the loss backward: the saved log-softmax, the gradient nll_loss hands it and the logits'
    # gradient, 3 x 4 B (the dry run's trace holds exactly this at its first backward op);
    # here the backward's peak is at the loss backward (see the walk below)
    assert logits.bytes_at("backward") == n * (4 + 4 + 4) == 3_152_019_456
    # validation peaks at the loss (its hidden states are 2,048 x 4096 x 2 B = 16.8 MB, the
    # layer's working set 2,048 x (4 x 4096 + 3 x 14,336) x 2 B = 243 MB, the logits 2.6 GB)
    assert logits.bytes_at("validation") == n * 10
    # fp32 compute: logits.float() is a no-op, so the forward holds 4 B + 4 B per logit
    _, _, fp32 = training(
        LLAMA3_8B, seq_len=s, micro_batch=mb, weights='format = "fp32"', grad_dtype="fp32"
    )
    assert item(fp32, "logits.training").bytes_at("forward") == n * (4 + 4)


# Llama-3-8B, what one layer saves per token without checkpointing (worked in
# test_training_saved_set_per_layer_by_hand): norms 2 x (4h + 4 + 2h + 2h) = 65,544; rotated
# q, k and v 2 x (4096 + 2 x 1024) = 12,288; attention output 2 x 4096 = 8,192; gate, up, act,
# product 4 x 2 x 14,336 = 114,688; flash/SDPA log-sum-exp 32 x 4 = 128.
L3_SAVED_PER_TOKEN_LAYER = 65_544 + 12_288 + 8_192 + 114_688 + 128  # 200,840
# the final norm: fp32 input 4h + rsqrt 4 + normalised and scaled 2 x 2h
L3_FINAL_NORM_PER_TOKEN = 4 * L3_H + 4 + 4 * L3_H  # 32,772
L3_GRADS = 2 * L3_PARAMS  # bf16: 16,060,522,496 B
L3_HEAD_GRAD = 2 * L3_EMBED  # the LM head's (untied) weight gradient: 1,050,673,152 B
# one decoder layer's parameters: (all - embedding - LM head) / 32 = 218,112,128 (the final
# norm's 4,096 spread over the layers); its gradient in bf16
L3_LAYER_GRAD = 2 * ((L3_PARAMS - 2 * L3_EMBED) // 32)  # 436,224,256 B


def _backward(est):
    return {
        k: item(est, k).bytes_at("backward")
        for k in ("activations.training", "logits.training", "gradients")
    }


def test_backward_walk_without_accumulation_peaks_at_the_loss():
    # Llama-3-8B full fine-tune, 1 x 2,048 tokens, no checkpointing, no accumulation, 1 GPU:
    # zero_grad(set_to_none=True) leaves no gradient before the backward; gradients appear as
    # the backward reaches their parameters while the saved activations are freed.
    t = 2048
    _, _, est = training(LLAMA3_8B, seq_len=t)
    layers = 32 * t * L3_SAVED_PER_TOKEN_LAYER  # 13,162,250,240
    saved = layers + t * L3_FINAL_NORM_PER_TOKEN  # + 67,117,056 = 13,229,367,296
    n = t * L3_V  # 262,668,288 logits
    # the five points of the walk, by hand:
    loss = saved + 12 * n  # 13,229,367,296 + 3,152,019,456 = 16,381,386,752
    head = saved + 2 * n + L3_HEAD_GRAD  # + 525,336,576 + 1,050,673,152 = 14,805,377,024
    last_layer = layers + L3_HEAD_GRAD + L3_LAYER_GRAD  # 14,649,147,648
    first_layer = t * L3_SAVED_PER_TOKEN_LAYER + L3_GRADS - L3_HEAD_GRAD  # 15,421,169,664
    end = L3_GRADS  # 16,060,522,496
    assert loss == 16_381_386_752 and max(loss, head, last_layer, first_layer, end) == loss
    # at the loss backward no gradient exists yet: the three items hold what is live there
    assert _backward(est) == {
        "activations.training": saved,
        "logits.training": 12 * n,
        "gradients": 0,
    }
    # the gradients item still holds all of them at the optimiser step
    assert item(est, "gradients").bytes_at("optimizer_step") == L3_GRADS
    basis = item(est, "gradients").basis
    assert "the loss backward 16,381,386,752 B" in basis
    assert "the embedding's backward (the end) 16,060,522,496 B" in basis
    assert "the peak is the loss backward" in basis
    # the old additive sum would have been saved + 10 B per logit + all gradients
    assert sum(_backward(est).values()) == loss < saved + 10 * n + L3_GRADS
    # (the dry run's trace of this spec, with sdpa: 119.96 GiB at the backward's first
    # log-softmax op, parameters + optimiser states + exactly these 16,381,386,752 B)


def test_backward_walk_short_sequence_peaks_at_the_end():
    # 1 x 256 tokens: the activations are small, so every gradient at the end outweighs the
    # loss backward: loss = 256 x (32 x 200,840 + 32,772) + 12 x 256 x 128,256
    # = 1,653,670,912 + 394,002,432 = 2,047,673,344 < 16,060,522,496; the first decoder
    # layer: 256 x 200,840 + 16,060,522,496 - 1,050,673,152 = 15,061,264,384 < the end.
    _, _, est = training(LLAMA3_8B, seq_len=256)
    assert _backward(est) == {
        "activations.training": 0,
        "logits.training": 0,
        "gradients": L3_GRADS,
    }
    assert "the peak is the embedding's backward (the end)" in item(est, "gradients").basis


def test_backward_walk_with_held_gradients():
    # Gradient accumulation (2 steps) or data parallelism hold every gradient from before the
    # backward: each point carries all of them and the loss backward wins again.
    t = 2048
    saved = t * (32 * L3_SAVED_PER_TOKEN_LAYER + L3_FINAL_NORM_PER_TOKEN)
    expected = {
        "activations.training": saved,
        "logits.training": 12 * t * L3_V,
        "gradients": L3_GRADS,
    }
    _, _, accum = training(LLAMA3_8B, seq_len=t, grad_accum=2)
    assert _backward(accum) == expected
    assert "gradient accumulation (2 steps)" in item(accum, "gradients").basis
    _, _, ddp = training(LLAMA3_8B, seq_len=t, placement="gpus = 2")
    assert _backward(ddp) == expected
    assert "data parallelism (DP=2" in item(ddp, "gradients").basis


def test_backward_walk_tied_embeddings_by_hand():
    # Llama-3.2-1B ties the LM head to the embedding: vocab 128,256, hidden 2048, 16 layers,
    # 32 heads, 8 KV heads, head_dim 64, intermediate 8192. Parameters: embedding
    # 262,668,288 + 16 x (attention 2 x 2048^2 + 2 x 2048 x 512 = 10,485,760 + MLP
    # 3 x 2048 x 8192 = 50,331,648 + norms 4,096) + final norm 2,048 = 1,235,814,400.
    params = 262_668_288 + 16 * (10_485_760 + 50_331_648 + 4_096) + 2_048
    _, arch, est = training("meta-llama/Llama-3.2-1B-Instruct", seq_len=512)
    assert arch.param_count == params
    # The LM head's share of the shared weight's gradient (128,256 x 2048 x 2 B) is held from
    # the LM head's backward to the end, where the embedding's share is added to it out of
    # place: every gradient + the two shares = 2,471,628,800 + 2 x 525,336,576.
    share = 128_256 * 2048 * 2
    end = 2 * params + 2 * share  # 3,522,301,952
    # per token and layer: norms 2 x (4 x 2048 + 4 + 4 x 2048) = 32,776, q,k,v 2 x 3,072,
    # attention output 2 x 2048, MLP 4 x 2 x 8192, log-sum-exp 128 -> 108,680; final norm
    # 16,388. The loss backward: 512 x (16 x 108,680 + 16,388) + 12 x 512 x 128,256
    # = 898,697,216 + 788,004,864 = 1,686,702,080 < the end.
    loss = 512 * (16 * 108_680 + 16_388) + 12 * 512 * 128_256
    assert loss < end
    assert _backward(est) == {"activations.training": 0, "logits.training": 0, "gradients": end}
    # (the dry run's trace: exactly 3,522,301,952 B of gradients and the two shares at its
    # last op, aten.add)


def test_full_checkpointing_keeps_layer_inputs():
    s, mb = 1024, 1
    t = s * mb
    # Llama-3-8B 1 x 1,024 tokens, full checkpointing: the layers keep only their inputs,
    # 32 x 1,024 x 4096 x 2 B = 268,435,456 B; the final norm (outside the layers, never
    # checkpointed) saves 1,024 x 32,772 = 33,558,528 B; one layer recomputed in backward
    # saves 1,024 x 200,840 = 205,660,160 B; one layer's no-grad working set in the forward
    # holds 4 copies of the hidden states and the SwiGLU MLP's act, up and product:
    # 1,024 x (4 x 4096 + 3 x 14,336) x 2 B = 121,634,816 B.
    inputs = 32 * t * L3_H * 2
    final_norm = t * L3_FINAL_NORM_PER_TOKEN
    recomputed = t * L3_SAVED_PER_TOKEN_LAYER
    working = t * (4 * L3_H + 3 * L3_I) * 2
    n = t * L3_V  # 131,334,144 logits
    _, _, full = training(LLAMA3_8B, seq_len=s, micro_batch=mb, checkpointing="full")
    act = item(full, "activations.training")
    logits = item(full, "logits.training")
    # forward: inside the last layer 268,435,456 + 121,634,816 = 390,070,272 B; at the loss
    # 268,435,456 + 33,558,528 + 10 x 131,334,144 = 1,615,335,424 B: the loss wins, and the
    # working set (freed before the LM head runs) is not added to it
    assert inputs + working < inputs + final_norm + 10 * n
    assert act.bytes_at("forward") == inputs + final_norm == 301_993_984
    assert logits.bytes_at("forward") == 10 * n
    # backward with accumulation (gradients held at every point): the loss backward
    # 301,993,984 + 12 x 131,334,144 = 1,878,003,712 outweighs the recomputed last layer
    # 268,435,456 + 205,660,160 = 474,095,616, so the recomputed set is not live at the peak
    _, _, accum = training(LLAMA3_8B, seq_len=s, micro_batch=mb, checkpointing="full", grad_accum=2)
    assert _backward(accum) == {
        "activations.training": inputs + final_norm,
        "logits.training": 12 * n,
        "gradients": L3_GRADS,
    }
    assert "one layer recomputed (205,660,160 B" in item(accum, "activations.training").basis
    # without accumulation the gradients appear during the backward; the points:
    # loss 1,878,003,712; LM head 301,993,984 + 2 x 131,334,144 + 1,050,673,152
    # = 1,615,335,424; last layer 268,435,456 + 205,660,160 + 1,050,673,152 + 436,224,256
    # = 1,960,993,024; first layer 1,024 x 4096 x 2 + 205,660,160 + 16,060,522,496
    # - 1,050,673,152 = 15,223,898,112; the end 16,060,522,496: the end wins.
    first = t * L3_H * 2 + recomputed + L3_GRADS - L3_HEAD_GRAD
    assert first == 15_223_898_112 < L3_GRADS
    assert _backward(full) == {
        "activations.training": 0,
        "logits.training": 0,
        "gradients": L3_GRADS,
    }


def test_validation_peak_is_the_layer_or_the_loss_never_both():
    # QLoRA sample shape: Mistral-7B, 4 x 2,048 tokens, vocab 32,000, hidden 4096, MLP 14,336.
    # Inside a layer the no-grad working set is 8,192 x (4 x 4096 + max(4096 + 2048 + 4096,
    # 3 x 14,336)) x 2 B = 973,078,528 B; at the loss the final hidden states (8,192 x 4096 x
    # 2 B = 67,108,864) and the logits (8,192 x 32,000 x 10 B = 2,621,440,000) are live, the
    # layer's working set long freed. The loss wins: 2,688,548,864 B, not the sum 3,594,518,528.
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lora = "rank = 16\ntargets = [" + ", ".join(f'"{t}"' for t in targets) + "]"
    _, _, est = training(
        MISTRAL_7B,
        task="qlora",
        lora=lora,
        weights='format = "nf4"\ndouble_quant = true',
        seq_len=2048,
        micro_batch=4,
        grad_accum=4,
        optimizer="adamw_8bit",
        master=False,
        checkpointing="full",
        attention="sdpa",
    )
    t, h, v = 8192, 4096, 32_000
    assert item(est, "activations.validation").bytes_at("validation") == t * h * 2 == 67_108_864
    assert item(est, "logits.training").bytes_at("validation") == t * v * 10 == 2_621_440_000
    # (the dry run's trace of the sample: 67,108,864 B of activations and 2,621,571,112 B of
    # logits at its validation peak, nll_loss_forward)
    # The forward, full checkpointing: inside the last layer 32 x 8,192 x 4096 x 2 B
    # (2,147,483,648) + 973,078,528 = 3,120,562,176 B; at the loss 2,147,483,648 + the final
    # norm + the logits 2,621,440,000: the loss. The final norm's weight is frozen and the LM
    # head too, so it saves its fp32 input and rsqrt only: 8,192 x (4 x 4096 + 4) = 134,250,496
    # B (a full fine-tune's 4h + 4 + 2h + 2h was 268,468,224; the trace's forward activations
    # went from -5.5% to +0.1% of the ledger's).
    act = item(est, "activations.training")
    assert act.bytes_at("forward") == 2_147_483_648 + 134_250_496
    assert item(est, "logits.training").bytes_at("forward") == 2_621_440_000
    # LoRA with full checkpointing: the backward's peak is the larger of its points. The
    # recomputed layer, per token (Mistral-7B has Llama-3-8B's layer shapes; frozen base,
    # dropout 0, fp32 adapters): norms 2 x (4 x 4096 + 4) = 32,776; rotated q, k and v
    # 2 x (4096 + 2 x 1024) = 12,288; attention output 8,192; log-sum-exp 32 x 4 = 128; MLP
    # gate, up, act (the product is not saved: down_proj is frozen) 3 x 14,336 x 2 = 86,016;
    # adapters: each module's input cast to fp32, 4 B x (4 x 4096 + 2 x 4096 + 14,336 =
    # 38,912) = 155,648, and 7 lora_A outputs 7 x 16 x 4 B = 448: 295,496 B per token,
    # x 8,192 = 2,420,703,232 B. Inside down_proj's backward its input gradient exists twice
    # (fp32 adapter path + bf16 frozen path): 8,192 x 14,336 x 6 = 704,643,072 B.
    # The last decoder layer: 2,147,483,648 + 2,420,703,232 + 704,643,072 = 5,272,829,952 B.
    # The loss backward: 2,147,483,648 + 134,250,496 (final norm) = 2,281,734,144 B of
    # activations + 12 B x 8,192 x 32,000 = 3,145,728,000 B of logits = 5,427,462,144 B: the
    # loss wins (the dry run of the sample, dropout 0.05, puts its peak inside the layer).
    assert act.bytes_at("backward") == 2_147_483_648 + 134_250_496
    assert item(est, "logits.training").bytes_at("backward") == t * v * 12
    assert "LoRA" in act.basis


def test_validation_peak_inside_the_layer_with_eager_scores():
    # Llama-3-8B, 1 x 8,192 tokens, eager: the layer's working set holds the s x s scores,
    # 32 heads x 8,192^2 x (2 B + 4 B fp32 copy + 4 B softmax) = 21,474,836,480 B, with
    # repeat_kv's K and V copies 2 x 8,192 x 32 x 128 x 2 B = 134,217,728 B and
    # 8,192 x (4 x 4096 + 3 x 14,336) x 2 B = 973,078,528 B: 22,582,132,736 B. At the loss:
    # 8,192 x 4096 x 2 B + 8,192 x 128,256 x 10 B = 10,573,840,384 B. The layer wins, and
    # the logits are not live then.
    _, _, est = training(LLAMA3_8B, seq_len=8192, attention="eager")
    working = 8192 * (4 * L3_H + 3 * L3_I) * 2 + 32 * 8192**2 * 10 + 2 * 8192 * 32 * 128 * 2
    assert working == 22_582_132_736
    assert item(est, "activations.validation").bytes_at("validation") == working
    assert item(est, "logits.training").bytes_at("validation") == 0


def test_pipeline_parallel_keeps_the_additive_backward():
    # PP=2: the stages peak at different moments, so the sum stands: every saved activation,
    # the loss backward's 12 B per logit and all gradients at once.
    t = 1024
    _, _, est = training(LLAMA3_8B, seq_len=t, placement="gpus = 2\npipeline_parallel = 2")
    assert _backward(est) == {
        "activations.training": t * (32 * L3_SAVED_PER_TOKEN_LAYER + L3_FINAL_NORM_PER_TOKEN),
        "logits.training": 12 * t * L3_V,
        "gradients": L3_GRADS,
    }


def test_training_saved_set_per_layer_by_hand():
    # Llama-3-8B, 1 x 1024 tokens, flash, no checkpointing. Per token and layer, what the HF
    # code saves for backward: two RMSNorms x (fp32 input 4h + rsqrt 4 + normalised 2h +
    # output 2h); the rotated q (4096) and k (1024) and v (1024) in bf16 (cos and sin need no
    # gradient, so q and rotate_half(q) before rotation are not saved); the attention output
    # (4096); gate, act, up, product over 14,336; plus the log-sum-exp, 32 heads x 4 B.
    s = 1024
    _, _, est = training(LLAMA3_8B, seq_len=s, micro_batch=1, attention="flash")
    norms = 2 * (4 * L3_H + 4 + 2 * L3_H + 2 * L3_H)
    per_token = norms + 2 * (4096 + 2 * 1024) + 2 * 4096 + 2 * 4 * L3_I + 32 * 4
    final_norm = 4 * L3_H + 4 + 4 * L3_H
    assert item(est, "activations.training").max_bytes == s * (32 * per_token + final_norm)


def test_inference_working_set_transformers_vs_vllm():
    # prefill of 1 x 1000 tokens, flash: the MLP (3 x 14,336) outweighs q,k,v,out
    # (4096 + 2048 + 4096). transformers holds 4 copies of the hidden states, vLLM 2.
    _, _, hf = inference(LLAMA3_8B, prompt=1000, engine="transformers")
    _, _, vllm = inference(LLAMA3_8B, prompt=1000, engine="vllm")
    assert item(hf, "activations.inference").bytes_at("prefill") == 1000 * (4 * L3_H + 3 * L3_I) * 2
    assert (
        item(vllm, "activations.inference").bytes_at("prefill") == 1000 * (2 * L3_H + 3 * L3_I) * 2
    )


def test_eager_inference_scores_and_repeated_cache_by_hand():
    # prefill, 2 x 1000 tokens, eager, bf16: softmax(dtype=float32) of bf16 scores first makes
    # an fp32 copy (PyTorch fuses the upcast only for fp16 on CUDA), so each score holds
    # 2 B + 4 B copy + 4 B softmax at the peak; repeat_kv copies K and V to 32 heads.
    conc, p, g = 2, 1000, 24
    _, _, flash = inference(LLAMA3_8B, prompt=p, generated=g, concurrency=conc)
    _, _, eager = inference(LLAMA3_8B, prompt=p, generated=g, concurrency=conc, attention="eager")
    f, e = item(flash, "activations.inference"), item(eager, "activations.inference")
    heads, hd = 32, 128
    prefill = conc * heads * p * p * (2 + 4 + 4) + 2 * conc * p * heads * hd * 2
    assert e.bytes_at("prefill") - f.bytes_at("prefill") == prefill
    # decode: one query per sequence against the whole context (1024 tokens), and repeat_kv
    # copies the whole cache of the layer to all 32 heads
    ctx_len = p + g
    decode = conc * heads * 1 * ctx_len * 10 + 2 * conc * ctx_len * heads * hd * 2
    assert e.bytes_at("decode") - f.bytes_at("decode") == decode


# --------------------------------------------------------------------------- overheads


def test_overheads_are_labelled():
    _, _, est = inference(LLAMA3_8B)
    ctx = item(est, "overhead.cuda_context")
    assert ctx.max_bytes == 512 * MIB_BYTES and "assumption" in ctx.basis
    _, _, est = inference(LLAMA3_8B, headroom='mode = "itemised"\ncuda_context_bytes = 123456789')
    assert item(est, "overhead.cuda_context").max_bytes == 123456789
    assert GIB_BYTES == 2**30


def test_load_transient():
    # bf16 checkpoint loaded as bf16: copied straight into place, no conversion copy
    _, _, est = inference(LLAMA3_8B)
    assert item(est, "transient.load").max_bytes == 0
    # quantised at load: the largest converted linear (gate/up 4096 x 14336) in bf16 once more
    _, _, est = inference(LLAMA3_8B, weights='format = "nf4"\ndouble_quant = true')
    tl = item(est, "transient.load")
    assert tl.stages == ("load",)
    assert tl.max_bytes == 4096 * 14336 * 2


# A tiny Llama for LoRA's saved set by hand (the dry run's tests trace the same config): hidden
# 64, intermediate 128, 2 layers, 4 heads of 16, 2 KV heads, vocabulary 128, untied, bf16.
TINY_LLAMA = {
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


def _tiny_lora(targets: str, dropout: float, checkpointing: str = "none"):
    from vramtui.models.hf_config import architecture_from_hf_config

    arch = architecture_from_hf_config(dict(TINY_LLAMA), model_id="tiny", source="test config")
    text = _toml(
        'id = "tiny"',
        task="lora",
        lora=f"rank = 4\ntargets = {targets}\ndropout = {dropout}",
        weights='format = "bf16"',
        lengths="seq_len = 32",
        batch="micro_batch = 2\ngrad_accum = 1",
        training=(
            'optimizer = "adamw"\nmaster_weights_fp32 = false\ngrad_dtype = "bf16"\n'
            f'grad_checkpointing = "{checkpointing}"'
        ),
        runtime='attention = "sdpa"',
        placement="gpus = 1",
    )
    spec = loads_spec(text)
    global _LAST_TINY_LORA
    _LAST_TINY_LORA = (spec, arch)
    return estimate(spec, arch)


_LAST_TINY_LORA = None


@pytest.mark.parametrize(
    ("targets", "dropout", "expected"),
    [
        ('["q_proj", "k_proj", "v_proj", "o_proj"]', 0.0, 355_328),
        ('["q_proj", "k_proj", "v_proj", "o_proj"]', 0.05, 388_096),
        ('["all-linear"]', 0.0, 492_544),
        ('["all-linear"]', 0.05, 558_080),
    ],
)
def test_lora_saved_set_by_hand(targets, dropout, expected):
    # 2 x 32 = 64 tokens, no checkpointing, fp32 adapters on a bf16 base, r = 4. Per layer:
    #   norms (frozen weights, frozen linears after them: fp32 input + rsqrt only)
    #     2 x 64 x (4 x 64 + 4) = 33,280
    #   rotated q, k and v: 64 x 2 x (64 + 2 x 32) = 16,384; attention output 64 x 2 x 64 = 8,192
    #   log-sum-exp 2 x 4 heads x 32 x 4 B = 1,024
    #   MLP gate, act(gate), up (down is frozen: their product is not saved) 3 x 64 x 128 x 2
    #     = 49,152                                                  -> 108,032 without adapters
    #   adapters, per module: the input cast to fp32, 4 B x in_features, saved by lora_A
    #     (dropout 0), or a bool mask 1 B + the dropout output 4 B (dropout > 0, CUDA's fused
    #     dropout); lora_A's output 4 x 4 B, saved by lora_B
    #     q, k, v, o: in 64 each -> 64 x 4 x 64 x 4 = 65,536 (+ masks 16,384); 4 x 64 x 16 = 4,096
    #       -> 177,664 per layer (194,048 with dropout)
    #     all linears add gate, up (in 64) and down (in 128): inputs 64 x 512 x 4 = 131,072
    #       (+ masks 32,768), lora_A 7 x 64 x 16 = 7,168 -> 246,272 (279,040 with dropout)
    # Model: 2 layers - the first layer's input norm (the frozen embedding's output needs no
    # gradient: 16,640) + the final norm (fp32 input + rsqrt: 16,640) = 2 x per layer.
    # The dry run traces 2,048 B more (cos and sin, 2 x 1 x 32 x 16 x 2 B); its dropout runs as
    # CUDA's fused native_dropout (a 1 B bool mask), as the ledger counts it.
    est = _tiny_lora(targets, dropout)
    act = item(est, "activations.training")
    assert act.bytes_at("forward") == expected
    # the backward is the largest of its moments (no checkpointing): the loss backward, every
    # saved activation + 12 B per logit (64 x 128 x 12 = 98,304), no adapter gradient yet
    assert act.bytes_at("backward") == expected
    assert item(est, "logits.training").bytes_at("backward") == 64 * 128 * 12
    assert item(est, "gradients").bytes_at("backward") == 0
    assert "fp32" in act.basis and "autocast" in act.basis
    if find_spec("torch") and find_spec("transformers") and find_spec("peft"):
        from vramtui.dryrun.command import trace_spec

        spec, arch = _LAST_TINY_LORA
        traced = trace_spec(spec, arch, device="meta").stage("forward")
        saved = traced.end_categories_bytes["activations"]
        # With dropout, the first layer's q, k and v read the frozen embedding's normed output,
        # which needs no gradient: their masks are never kept. The ledger counts them (a known
        # over-count of 3 x 64 tokens x 64 x 1 B = 12,288 B, one layer of 32 on a real model).
        first_layer_masks = 3 * 64 * 64 if dropout else 0
        assert saved == expected + 2_048 - first_layer_masks


def test_lora_full_checkpointing_backward_peaks_inside_the_last_layer():
    # layer inputs 2 x 64 x 64 x 2 B = 16,384, the recomputed layer 177,664 (q, k, v, o,
    # dropout 0, worked above), and inside the widest adapted module's backward its input
    # gradient twice (fp32 adapter path + bf16 frozen path): 64 tokens x 64 x 6 = 24,576:
    # 218,624 B. The loss backward holds 16,384 + the final norm 16,640 of activations and
    # 64 x 128 x 12 = 98,304 B of logits: smaller, so the logits are not live at the peak.
    est = _tiny_lora('["q_proj", "k_proj", "v_proj", "o_proj"]', 0.0, "full")
    act = item(est, "activations.training")
    assert act.bytes_at("backward") == 16_384 + 177_664 + 24_576
    assert item(est, "logits.training").bytes_at("backward") == 0
    assert (
        "holds its input's gradient twice" in act.basis or "twice" in item(est, "gradients").basis
    )
