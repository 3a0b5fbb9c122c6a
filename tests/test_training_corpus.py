"""The training-memory corpus (tests/training_corpus/) and how the bench reads it as specs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import training_corpus_rows as tc
from bench_training_corpus import error_stats, p90

ROWS = tc.load_rows()
BY_FILE = {r.file: r for r in ROWS}

UNIT_BYTES = {"GiB": 2**30, "GB": 10**9, "MiB": 2**20, "MB": 10**6}
FIGURE = re.compile(r"(\d+(?:\.\d+)?)\s*\(?(?:memory\s*)?(GiB|GB|MiB|MB)\b")
EXACT = re.compile(r"^[A-Za-z_]+:\s*(\d+)$")


def test_corpus_size():
    # 200 rows in round 1, 98 in round 2, 77 in round 3, 43 in round 4, 93 in round 5, 84 in 6
    assert len(ROWS) == 731
    assert len({r.data["source_id"] for r in ROWS}) >= 99


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.file)
def test_row_is_well_formed(row):
    d = row.data
    missing_keys = [k for k in tc.REQUIRED_KEYS if k not in d]
    assert not missing_keys, f"{row.file} lacks {missing_keys}"
    assert d["framework"] in tc.FRAMEWORKS
    assert d["counter"] in tc.COUNTERS
    assert d["outcome"] in tc.OUTCOMES
    assert isinstance(d["bytes"], int) and d["bytes"] >= 0
    assert (d["bytes"] == 0) == (d["outcome"] == "oom"), "an OOM row has no figure, an ok row has"
    assert isinstance(d["n_gpus"], int) and d["n_gpus"] >= 1
    assert d["under_specified"] == bool(d["missing"]), "under_specified iff missing is non-empty"
    assert d["source_url"].startswith("https://")
    assert isinstance(d["settings"].get("model"), str) and d["settings"]["model"]
    assert row.half in tc.HALVES, f"{row.file}: source {d['source_id']} is in no half"


def _expected_bytes(as_written: str, notes: str) -> int | None:
    """The bytes `as_written` means, in the unit convention the notes give; None when the
    figure cannot be checked (an OOM)."""
    m = EXACT.match(as_written.strip())
    if m:
        return int(m.group(1))
    m = FIGURE.search(as_written)
    if m:
        value, unit = float(m.group(1)), m.group(2)
        if unit == "MB" and "MiB" in notes:
            unit = "MiB"  # the notes say the source's 'MB' is 2^20 (x // 1024**2)
        if unit == "GB" and re.search(r"(computed|read) as GiB|GB here is GiB|so the unit is GiB", notes):
            unit = "GiB"
        return round(value * UNIT_BYTES[unit])
    m = re.fullmatch(r"(\d+(?:\.\d+)?)G", as_written.strip())
    if m and re.search(r"read as GiB", notes):  # a bare 'G' the notes read as 2^30
        return round(float(m.group(1)) * 2**30)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)", as_written.strip())
    if m and "so the unit is GiB" in notes:  # a figure printed without its unit, in GiB
        return round(float(m.group(1)) * 2**30)
    m = re.match(r"(\d+(?:\.\d+)?)(\s+[a-z]|$)", as_written.strip())
    if m and re.search(r"GB = 10\^9|GB \(1e9\)", notes):  # a figure printed without its unit
        return round(float(m.group(1)) * 10**9)
    if re.fullmatch(r"\d+", as_written.strip()) and "MiB" in notes:
        return int(as_written) * 2**20
    return None


@pytest.mark.parametrize("row", [r for r in ROWS if not r.is_oom], ids=lambda r: r.file)
def test_bytes_match_the_figure_as_written(row):
    expected = _expected_bytes(row.data["as_written"], row.data["notes"])
    assert expected is not None, f"{row.file}: cannot read {row.data['as_written']!r}"
    assert abs(row.data["bytes"] - expected) <= 1


def test_unit_conventions_worked_by_hand():
    # 14949 MB from nvml //1024**2: MiB -> 14949 x 1,048,576
    assert _expected_bytes("14949 MB", "-> MiB (2^20)") == 15_675_162_624
    assert _expected_bytes("16.69 GB", "GB = 1e9 bytes") == 16_690_000_000
    assert _expected_bytes("8.76 GiB", "") == 9_405_978_378  # 8.76 x 2^30, rounded
    assert _expected_bytes("9404", "b2mb = int(x / 2**20) -> MiB") == 9404 * 1_048_576
    assert _expected_bytes("OOM", "") is None
    assert _expected_bytes("12.316 GB", "so GB here is GiB (2^30)") == 13_224_204_304
    assert _expected_bytes("69G", "'69G' is read as GiB (2^30)") == 69 * 2**30
    # torchtune's get_memory_stats divides by 1024**3 and W&B prints the bare number
    assert _expected_bytes("33.14453", "so the unit is GiB") == 35_588_668_098
    assert _expected_bytes("5.93 GB", "label 'GB', so the unit is GiB (2^30)") == 6_367_289_016
    assert _expected_bytes("20.2 peak memory allocated", "so GB = 10^9") == 20_200_000_000
    assert _expected_bytes("22.3", "torchtune's GB (1e9) of that time") == 22_300_000_000


def test_every_source_in_exactly_one_half():
    import tomllib

    split = tomllib.loads((tc.CORPUS / "split.toml").read_text(encoding="utf-8"))
    dev = split["development"]["sources"]
    held = (
        split["held_out"]["sources"]
        + split["held_out_2"]["sources"]
        + split["held_out_3"]["sources"]
        + split["held_out_4"]["sources"]
        + split["held_out_5"]["sources"]
        + split["held_out_6"]["sources"]
        + split["held_out_7"]["sources"]
        + split["held_out_8"]["sources"]
    )
    assert len(dev) == len(set(dev)) and len(held) == len(set(held))
    assert not set(dev) & set(held)
    used = {r.data["source_id"] for r in ROWS}
    assert used == set(dev) | set(held), (
        "every listed source has rows, every row's source is listed"
    )


# ------------------------------------------------------------------------------------------
# Rows as specs
# ------------------------------------------------------------------------------------------

SIZED = {r.file: tc.size_row(r) for r in ROWS}
NOT_SIZED_REASONS = (
    tc.NOT_AVAILABLE,
    "method ",  # a method vramtui does not size, or none stated
    "context parallelism ",  # a sequence split across GPUs: not in the spec
    "spec refused: ",  # the spec the row maps to breaks a rule (e.g. a LoRA target the model lacks)
)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.file)
def test_every_row_is_sized_or_says_why(row):
    s = SIZED[row.file]
    if s.status == "sized":
        assert s.spec_dict is not None
        if row.is_oom:
            assert s.estimate_bytes and s.estimate_bytes > 0
        else:
            assert s.error is not None and s.estimate_bytes > 0
    else:
        assert s.reason.startswith(NOT_SIZED_REASONS), s.reason


def test_available_models_are_sized():
    for row in ROWS:
        arch, _ = tc.resolve_arch(row.settings["model"])
        if arch is not None and row.settings.get("method") in tc.TASK_OF_METHOD:
            if SIZED[row.file].reason.startswith("context parallelism "):
                continue  # refused with its reason (test_every_row_is_sized_or_says_why)
            if SIZED[row.file].reason.startswith("spec refused: "):
                continue  # the row's settings break a spec rule, named in the reason
            assert SIZED[row.file].status == "sized", (row.file, SIZED[row.file].reason)


def test_unavailable_model_is_never_guessed():
    s = SIZED["axolotl-ministral__1.toml"]  # Ministral-8B: no config in the catalogue or tests
    assert (s.status, s.reason) == ("not sized", tc.NOT_AVAILABLE)


def test_falcon_7b_lora_4xa10g_worked_by_hand():
    # litgpt-config-hub__2: micro-batch 1, 512 tokens, r=32 alpha 16 on query+value, on a
    # 4xA10G machine. falcon-7b/lora.yaml sets devices: 1 and the config hub README says all
    # runs are single-GPU experiments: one GPU, strategy "auto" (no FSDP, no checkpointing),
    # global batch 8 / micro 1 -> 8 accumulation steps.
    s = SIZED["litgpt-config-hub__2.toml"]
    d = s.spec_dict
    assert d["batch"] == {"micro_batch": 1, "grad_accum": 8}
    assert d["lengths"] == {"seq_len": 512}
    # Falcon fuses q, k and v in one linear: query and value adapt query_key_value
    assert d["task"] == {
        "kind": "lora",
        "lora": {"rank": 32, "alpha": 16, "targets": ["query_key_value"], "dropout": 0.05},
    }
    assert d["placement"] == {
        "gpus": 1,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "data_parallel_sharding": "none",
    }
    assert d["training"]["grad_checkpointing"] == "none"
    assert d["weights"] == {"format": "bf16"}
    assert any("1 of the machine's 4 GPUs used" in n for n in s.notes)
    # the one setting neither the table nor the YAML states
    assert s.defaults == ["runtime.attention = sdpa"]
    # the same run as the 1xA10G row (litgpt-config-hub__1): the same estimate
    assert s.estimate_bytes == SIZED["litgpt-config-hub__1.toml"].estimate_bytes


def test_gemma_2_9b_lora_all_flags_worked_by_hand():
    # litgpt-config-hub__14: query, key, value, projection, mlp, head on Gemma 2 9B (OOM on
    # 4 x A10G). The head is tied to the embedding: no separate linear to adapt.
    s = SIZED["litgpt-config-hub__14.toml"]
    lora = s.spec_dict["task"]["lora"]
    assert lora["rank"] == 16
    assert lora["targets"] == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "down_proj",
        "gate_proj",
        "up_proj",
    ]
    assert s.spec_dict["batch"]["micro_batch"] == 1
    assert s.spec_dict["lengths"]["seq_len"] == 512
    assert any("tied" in n for n in s.notes)
    assert s.verdict in ("does_not_fit", "cannot_tell", "fits")


def test_torchtune_lora_llama2_worked_by_hand():
    # torchtune-lora-tutorial__2: lora_attn_modules q,k,v,output_proj + apply_lora_to_mlp +
    # apply_lora_to_output, rank 8 alpha 16, batch 2 x 64 accumulation, 512 tokens, bf16.
    s = SIZED["torchtune-lora-tutorial__2.toml"]
    d = s.spec_dict
    assert d["task"]["lora"]["targets"] == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "down_proj",
        "gate_proj",
        "up_proj",
        "lm_head",
    ]
    assert (d["task"]["lora"]["rank"], d["task"]["lora"]["alpha"]) == (8, 16)
    assert d["batch"] == {"micro_batch": 2, "grad_accum": 64}
    assert d["lengths"]["seq_len"] == 512
    # torchtune's dtype bf16 is pure bf16: no fp32 master copy, bf16 gradients and states
    assert d["training"]["master_weights_fp32"] is False
    assert d["training"]["optimizer_state_dtype"] == "bf16"
    assert any("maximum" in n for n in s.notes)  # a truncation cap, said so


def test_framework_field_follows_the_schema():
    d = SIZED["litgpt-config-hub__2.toml"].spec_dict
    if tc.SET_FRAMEWORK:
        assert d["training"]["framework"] == "litgpt"
    else:
        assert "framework" not in d["training"]


def test_unstated_settings_take_defaults_and_are_listed():
    # torchtune-readme-2024-05__7: Llama2-70B full fine-tune on 8 x A100, micro-batch 4,
    # 4,096 tokens and PagedAdamW stated; no recipe config for a 70B full fine-tune exists at
    # 0217d44c2e, so the rest takes vramtui's defaults, listed
    s = SIZED["torchtune-readme-2024-05__7.toml"]
    assert s.row.under_specified
    assert s.spec_dict["training"]["grad_checkpointing"] == "none"
    assert "training.grad_checkpointing = none" in s.defaults
    assert not any("recipes/configs" in x for x in s.defaults)
    # torchtune-readme-2024-05__2: Llama2-7B LoRA on one RTX 4090: the only such recipe
    # config, llama2/7B_lora_single_device.yaml, gives rank 8 on q_proj and v_proj and
    # activation checkpointing; the table's batch and length stay
    s = SIZED["torchtune-readme-2024-05__2.toml"]
    assert s.row.under_specified
    d = s.spec_dict
    assert d["task"]["lora"]["rank"] == 8 and d["task"]["lora"]["targets"] == ["q_proj", "v_proj"]
    assert d["training"]["grad_checkpointing"] == "full"
    assert (d["batch"]["micro_batch"], d["lengths"]["seq_len"]) == (4, 2048)
    assert any("llama2/7B_lora_single_device.yaml" in x for x in s.defaults)


def test_counter_slices_nest():
    # The same row read with each counter: nvml sees the CUDA context too, reserved adds
    # fragmentation, allocated sees tensors only.
    base = BY_FILE["litgpt-config-hub__17.toml"]
    got = {}
    for counter in ("max_memory_allocated", "max_memory_reserved", "nvml"):
        row = tc.Row(base.file, {**base.data, "counter": counter}, base.half)
        got[counter] = tc.size_row(row).estimate_bytes
    assert got["max_memory_allocated"] < got["max_memory_reserved"] < got["nvml"]
    # the CUDA context alone is hundreds of MB
    assert got["nvml"] - got["max_memory_reserved"] > 200 * 10**6


def test_error_sign_and_percentiles():
    s = SIZED["litgpt-config-hub__17.toml"]
    assert s.error == pytest.approx((s.estimate_bytes - 19_770_000_000) / 19_770_000_000)
    assert p90(list(range(1, 11))) == 9  # nearest rank: ceil(0.9 x 10) = 9th
    assert p90(list(range(1, 21))) == 18
    stats = error_stats([-0.2, 0.1, 0.05])
    assert stats["median_abs"] == pytest.approx(0.1)
    assert stats["signed_median"] == pytest.approx(0.05)


def test_parallel_settings_are_mapped_or_refused_never_dropped():
    """torchtitan rows state tensor, pipeline and context parallel degrees. Tensor and
    pipeline parallelism are placement fields of the spec (512 GPUs = 8 TP x 8 PP x 8 FSDP
    shards); context parallelism is not, so a row using it is not sized, with the reason; a
    float8 or async-TP setting the spec cannot express is listed as an approximation."""
    by_file = {r.file: r for r in ROWS}
    row = by_file["torchtitan-bench-h100-202412__13.toml"]
    arch, _ = tc.resolve_arch(row.settings["model"])
    d, why, _, approx, _ = tc.build_spec_dict(row, arch)
    assert why == ""
    p = d["placement"]
    assert (p["gpus"], p["tensor_parallel"], p["pipeline_parallel"]) == (512, 8, 8)
    assert any(a.startswith("float8_linear") for a in approx)
    assert any(a.startswith("async_tp") for a in approx)
    cp_row = by_file["torchtitan-bench-h100-202412__18.toml"]
    d, why, *_ = tc.build_spec_dict(cp_row, tc.resolve_arch(cp_row.settings["model"])[0])
    assert d is None and "context parallelism (8 GPUs" in why


def test_index_lists_every_row_as_the_rows_say():
    import importlib.util

    path = REPO / "bench" / "training_corpus_index.py"
    spec = importlib.util.spec_from_file_location("training_corpus_index", path)
    index = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(index)
    text = (tc.CORPUS / "INDEX.md").read_text(encoding="utf-8")
    assert text == index.render(), "run python bench/training_corpus_index.py"
    assert text.count("\n- ") == len(ROWS)


def test_sequence_parallelism_is_refused_like_context_parallelism():
    # ArcticTraining's Ulysses sequence parallelism splits each sequence over 32 GPUs
    row = BY_FILE["arctictraining-sp-h100-sp32-llama-70b__1.toml"]
    assert row.settings["sequence_parallel"].endswith("32")
    s = SIZED[row.file]
    assert s.status == "not sized" and "(32 GPUs split each sequence)" in s.reason


def test_a_single_string_lora_target_is_one_target():
    # LLaMA-Factory's lora_target: all is every linear layer, not the letters a, l, l
    row = BY_FILE["llamafactory-wiki-performance-comparison-long-context__1.toml"]
    assert row.settings["lora_targets"] == "all"
    s = SIZED[row.file]
    assert s.status == "sized", s.reason
    assert s.spec_dict["task"]["lora"]["targets"] == ["all-linear"]
