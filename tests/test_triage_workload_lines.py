"""Workload lines in a log (batch size, sequence length, model id, tensor-parallel size,
dtype) and their mismatches with the spec, named before any advice; hostile input stays
linear."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.spec import load_spec
from vramtui.triage.workload_lines import compare_with_spec, find_workload_lines

REPO = Path(__file__).resolve().parents[1]
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"  # 8000 + 192 tokens, TP 1, bf16
FT = REPO / "sample_specs" / "full-finetune-zero3-4gpu.toml"  # micro_batch 2, seq_len 4096

TRAINER_BANNER = """\
[INFO|trainer.py:2134] 2024-05-01 10:00:00,000 >> ***** Running training *****
[INFO|trainer.py:2135] 2024-05-01 10:00:00,000 >>   Num examples = 52,002
[INFO|trainer.py:2136] 2024-05-01 10:00:00,000 >>   Num Epochs = 3
[INFO|trainer.py:2137] 2024-05-01 10:00:00,000 >>   Instantaneous batch size per device = 4
[INFO|trainer.py:2140] 2024-05-01 10:00:00,000 >>   Total train batch size (w. parallel, distributed & accumulation) = 64
"""
VLLM_CONFIG = (
    "INFO 03-20 02:29:07 [core.py:58] Initializing a V1 LLM engine (v0.8.1) with config: "
    "model='meta-llama/Llama-3.1-70B-Instruct', speculative_config=None, "
    "tokenizer='meta-llama/Llama-3.1-70B-Instruct', dtype=torch.bfloat16, "
    "max_seq_len=32768, tensor_parallel_size=4, kv_cache_dtype=auto\n"
)


def _kinds(lines):
    return {(w.kind, w.value) for w in lines}


def test_trainer_banner():
    lines = find_workload_lines(TRAINER_BANNER)
    assert _kinds(lines) == {("examples", 52_002), ("micro_batch", 4)}
    mb = [w for w in lines if w.kind == "micro_batch"][0]
    assert mb.line_no == 4 and "Instantaneous batch size per device = 4" in mb.text
    mismatches = compare_with_spec(lines, load_spec(FT))
    assert [m.line for m in mismatches] == [
        "log: batch size per device = 4 (line 4); spec: batch.micro_batch = 2"
    ]


def test_vllm_engine_config_line():
    lines = find_workload_lines(VLLM_CONFIG)
    # kv_cache_dtype=auto is not the model's dtype; max_seq_len is the sequence length.
    assert _kinds(lines) == {
        ("model", "meta-llama/Llama-3.1-70B-Instruct"),
        ("dtype", "bfloat16"),
        ("seq_len", 32768),
        ("tensor_parallel", 4),
    }
    lines_by_kind = {m.kind: m.line for m in compare_with_spec(lines, load_spec(CHAT))}
    assert lines_by_kind == {
        "model": "log: model = meta-llama/Llama-3.1-70B-Instruct (line 1); "
        "spec: model.id = meta-llama/Llama-3.1-8B-Instruct",
        "seq_len": "log: sequence length = 32768 (line 1); "
        "spec: lengths.prompt_tokens + lengths.generated_tokens = 8192",
        "tensor_parallel": "log: tensor-parallel size = 4 (line 1); "
        "spec: placement.tensor_parallel = 1",
    }  # bfloat16 is the spec's bf16: no mismatch


@pytest.mark.parametrize(
    "line, kind, value",
    [
        ("vllm serve m --max-model-len 16384 --tensor-parallel-size 2", "max_model_len", 16384),
        ("vllm serve m --max-model-len 16384 --tensor-parallel-size 2", "tensor_parallel", 2),
        ("llm = LLM(model='Qwen/Qwen2-7B', tensor_parallel_size=8)", "tensor_parallel", 8),
        ("llm = LLM(model='Qwen/Qwen2-7B', tensor_parallel_size=8)", "model", "Qwen/Qwen2-7B"),
        (
            'tok = AutoTokenizer.from_pretrained("mistralai/Mistral-7B-v0.1")',
            "model",
            "mistralai/Mistral-7B-v0.1",
        ),
        (
            "model = AutoModel.from_pretrained('gpt2', torch_dtype=torch.float16)",
            "dtype",
            "float16",
        ),
        ("trainer = SFTTrainer(..., max_seq_length=1024)", "seq_len", 1024),
        ("out = model.generate(**inputs, max_length=512)", "seq_len", 512),
        ("args: per_device_train_batch_size: 16", "micro_batch", 16),
        ("engine args: max_model_len=4096, dtype='half'", "dtype", "half"),
    ],
)
def test_hand_written_lines(line, kind, value):
    assert (kind, value) in _kinds(find_workload_lines(line))


def test_lines_that_are_not_workload_lines():
    text = (
        "kv_cache_dtype=fp8\n"  # the cache's dtype, not the model's
        "my_model = 'x'\n"  # not model=
        "from_pretrained(path)\n"  # no literal id
        "max_length_warning = True\n"
        "batch size per device was not set\n"
    )
    assert find_workload_lines(text) == ()


def test_matching_lines_are_not_mismatches():
    text = (
        "model = AutoModelForCausalLM.from_pretrained('/models/Llama-3.1-8B-Instruct', "
        "dtype=torch.bfloat16)\n"
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 "
        "--tensor-parallel-size 1\n"
    )
    lines = find_workload_lines(text)
    assert {w.kind for w in lines} == {"model", "dtype", "max_model_len", "tensor_parallel"}
    assert compare_with_spec(lines, load_spec(CHAT)) == ()


def test_a_float_dtype_against_a_float_spec_only():
    lines = find_workload_lines("dtype=float16\n")
    assert [m.line for m in compare_with_spec(lines, load_spec(CHAT))] == [
        "log: dtype = float16 (line 1); spec: weights.format = bf16"
    ]
    awq = REPO / "sample_specs" / "llama-3.3-70b-awq-tp2.toml"
    assert compare_with_spec(lines, load_spec(awq)) == ()  # AWQ computes in fp16


def test_values_are_bounded_per_kind():
    text = "".join(f"Instantaneous batch size per device = {i}\n" for i in range(1, 50))
    lines = find_workload_lines(text)
    assert [w.value for w in lines] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "hostile",
    [
        "from_pretrained('" + "a/" * 2_000_000,  # an id that never closes
        "model=" * 1_000_000,
        ("dtype = " + " " * 3) * 500_000,
        "Instantaneous batch size per device = " + "9" * 3_000_000,
        "max_model_len " * 400_000 + "\n" * 200_000,
    ],
    ids=["open-id", "model-eq", "dtype", "digits", "many-lines"],
)
def test_hostile_input_is_linear(hostile):
    start = time.perf_counter()
    find_workload_lines(hostile)
    assert time.perf_counter() - start < 10.0  # a hang guard (quadratic would take minutes)


def test_cli_and_json_name_each_mismatch_before_the_advice(tmp_path, capsys):
    log = tmp_path / "job.log"
    log.write_text(
        TRAINER_BANNER
        + "  max_seq_length=2048\n"
        + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.25 GiB of which 1.00 GiB is free. Including non-PyTorch memory, "
        "this process has 78.00 GiB memory in use. Of the allocated memory 77.50 GiB is "
        "allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.\n"
    )
    assert main(["triage", str(log), "--spec", str(FT)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    first = "mismatch: log: batch size per device = 4 (line 4); spec: batch.micro_batch = 2"
    second = "mismatch: log: sequence length = 2048 (line 6); spec: lengths.seq_len = 4096"
    assert first in out and second in out
    assert out.index(first) < out.index("change exactly one variable")
    assert main(["triage", str(log), "--spec", str(FT), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(m["spec_field"], m["log_value"], m["spec_value"]) for m in data["mismatches"]] == [
        ("batch.micro_batch", 4, 2),
        ("lengths.seq_len", 2048, 4096),
    ]
    assert {w["kind"] for w in data["workload_lines"]} == {"examples", "micro_batch", "seq_len"}
    assert any("different workload" in w for w in data["warnings"])
