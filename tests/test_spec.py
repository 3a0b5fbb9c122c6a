"""The workload spec: schema, validation messages, TOML round trip, atomic save."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from vramtui import spec as spec_module
from vramtui import spec_toml
from vramtui.builtin_specs import SEED_EXAMPLE_TOML, seed_example_spec
from vramtui.errors import SpecError
from vramtui.models.architecture import Architecture, ModuleShape
from vramtui.spec import (
    Headroom,
    LoraConfig,
    Placement,
    Spec,
    Task,
    Training,
    Weights,
    dumps_spec,
    load_spec,
    loads_spec,
    save_spec,
    spec_from_dict,
    spec_to_dict,
    validate_against_architecture,
    validate_spec,
)

REPO = Path(__file__).resolve().parent.parent

QLORA_FULL = """\
schema_version = 1
name = "Llama-3.1-8B QLoRA, 4k x 4"
description = "every table of the schema"

[model]
id = "meta-llama/Llama-3.1-8B-Instruct"
revision = "0e9e39f249a16976918f6564b8830bc894c89659"

[task]
kind = "qlora"
[task.lora]
rank = 16
alpha = 32
targets = ["q_proj", "v_proj"]
dropout = 0.05

[weights]
format = "nf4"
double_quant = true
[weights.groups]
lm_head = "bf16"
embedding = "bf16"

[lengths]
seq_len = 4096

[batch]
micro_batch = 4
grad_accum = 8

[training]
optimizer = "adamw"
master_weights_fp32 = true
grad_dtype = "bf16"
optimizer_state_dtype = "fp32"
grad_checkpointing = "full"

[runtime]
attention = "flash"
engine = "transformers"

[placement]
gpus = 4
tensor_parallel = 1
pipeline_parallel = 2
data_parallel_sharding = "zero2"

[[quality]]
metric = "MMLU 5-shot"
threshold = ">= 0.66"
note = "must match the bf16 baseline within 1 point"

[[quality]]
metric = "HumanEval pass@1"
threshold = ">= 0.60"

[headroom]
mode = "itemised"
cuda_context_bytes = 500000000
margin_fraction = 0.05
"""

INFERENCE_FULL = """\
schema_version = 1
name = "Llama-3.1-8B chat, 8k x 16"

[model]
path = "./models/llama-gptq"

[task]
kind = "inference"

[weights]
format = "gptq"
bits = 4
group_size = 128
[weights.groups]
lm_head = "fp16"

[lengths]
prompt_tokens = 8000
generated_tokens = 192

[batch]
concurrency = 16

[runtime]
attention = "sdpa"
kv_cache_dtype = "fp8"
kv_block_tokens = 16
engine = "vllm"

[placement]
gpus = 2
tensor_parallel = 2

[[quality]]
metric = "MMLU 5-shot"
threshold = ">= 0.66"

[headroom]
mode = "manual"
reserve_gib = 6
reason = "measured peak on the previous release plus 1 GiB"
margin_fraction = 0.05
"""

# A small valid inference spec to mutate in the error tests.
BASE = """\
schema_version = 1

[model]
params = 7e9

[task]
kind = "inference"

[weights]
format = "bf16"

[lengths]
prompt_tokens = 2048
generated_tokens = 256

[batch]
concurrency = 1

[runtime]
attention = "sdpa"
kv_cache_dtype = "bf16"

[placement]
gpus = 1

[headroom]
mode = "itemised"
"""


def error_of(text: str, source: str = "spec.toml") -> str:
    with pytest.raises(SpecError) as info:
        loads_spec(text, source)
    message = str(info.value)
    assert "\n" not in message
    assert source in message
    return message


def replace_line(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# --------------------------------------------------------------------------------------------
# Round trip and atomic save
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", [QLORA_FULL, INFERENCE_FULL, BASE], ids=["qlora", "inference", "base"]
)
def test_round_trip_load_save_load(tmp_path: Path, text: str) -> None:
    original = tmp_path / "in.toml"
    original.write_text(text)
    first = load_spec(original)

    saved = tmp_path / "out.toml"
    save_spec(first, saved)
    second = load_spec(saved)
    assert second == first

    again = tmp_path / "again.toml"
    save_spec(second, again)
    assert again.read_text() == saved.read_text()
    assert dumps_spec(second) == saved.read_text()


def test_full_spec_fields() -> None:
    s = loads_spec(QLORA_FULL)
    assert s.is_training
    assert s.task.lora == LoraConfig(rank=16, alpha=32, targets=("q_proj", "v_proj"), dropout=0.05)
    assert s.weights.format_for("lm_head") == "bf16"
    assert s.weights.format_for("attention") == "nf4"
    assert s.weights.groups == (("embedding", "bf16"), ("lm_head", "bf16"))  # GROUPS order
    assert s.placement.data_parallel == 2
    assert s.runtime.kv_cache_dtype is None and s.runtime.kv_block_tokens is None
    assert [q.metric for q in s.quality] == ["MMLU 5-shot", "HumanEval pass@1"]
    assert s.quality[1].note == ""
    assert s.headroom.cuda_context_bytes == 500_000_000
    assert s.lengths.context_tokens == 4096
    hash(s)  # frozen and hashable

    i = loads_spec(INFERENCE_FULL)
    assert not i.is_training
    assert i.training is None
    assert i.lengths.context_tokens == 8192
    assert i.headroom.reserve_gib == 6.0 and isinstance(i.headroom.reserve_gib, float)
    assert i.batch.grad_accum is None


def test_documented_defaults_are_filled_and_written() -> None:
    s = loads_spec(BASE)
    assert s.name == "" and s.description == ""
    assert s.model.params == 7_000_000_000 and isinstance(s.model.params, int)
    assert s.placement == Placement(
        gpus=1, tensor_parallel=1, pipeline_parallel=1, data_parallel_sharding="none"
    )
    assert s.runtime.kv_block_tokens == 0 and s.runtime.engine is None
    assert s.headroom.margin_fraction == 0.0 and s.headroom.cuda_context_bytes is None
    assert s.quality == ()
    text = dumps_spec(s)
    assert "kv_block_tokens = 0" in text and 'data_parallel_sharding = "none"' in text


def test_training_defaults() -> None:
    text = replace_line(QLORA_FULL, "grad_accum = 8\n", "")
    text = replace_line(text, 'optimizer_state_dtype = "fp32"\n', "")
    s = loads_spec(text)
    assert s.batch.grad_accum == 1
    assert s.training.optimizer_state_dtype == "fp32"


def test_replace_friendly_edit_and_revalidate() -> None:
    s = loads_spec(BASE)
    edited = dataclasses.replace(s, weights=Weights(format="fp16", groups={"lm_head": "fp32"}))
    assert edited.weights.groups == (("lm_head", "fp32"),)
    assert validate_spec(edited) == edited
    assert loads_spec(dumps_spec(edited)) == edited

    bad = dataclasses.replace(
        s, placement=dataclasses.replace(s.placement, gpus=3, tensor_parallel=2)
    )
    with pytest.raises(SpecError, match="placement.gpus = 3 is not a multiple"):
        dumps_spec(bad)


def test_save_is_atomic_and_replaces_existing(tmp_path: Path) -> None:
    target = tmp_path / "spec.toml"
    target.write_text("old contents\n")
    target.chmod(0o640)
    s = loads_spec(BASE)
    save_spec(s, target)
    assert load_spec(target) == s
    assert os.listdir(tmp_path) == ["spec.toml"]
    assert target.stat().st_mode & 0o777 == 0o640


def test_failing_serialisation_leaves_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "spec.toml"
    target.write_text("old contents\n")
    s = loads_spec(BASE)

    invalid = dataclasses.replace(s, placement=Placement(gpus=0))
    with pytest.raises(SpecError, match="placement.gpus must be >= 1"):
        save_spec(invalid, target)
    assert target.read_text() == "old contents\n"

    def boom(*args, **kwargs):
        raise RuntimeError("serialiser exploded")

    monkeypatch.setattr(spec_toml.tomli_w, "dumps", boom)
    with pytest.raises(RuntimeError):
        save_spec(s, target)
    assert target.read_text() == "old contents\n"
    assert os.listdir(tmp_path) == ["spec.toml"]


def test_failing_replace_cleans_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "spec.toml"
    target.write_text("old contents\n")

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(spec_module.os, "replace", refuse)
    with pytest.raises(SpecError) as info:
        save_spec(loads_spec(BASE), target)
    assert "cannot save spec" in str(info.value) and "Permission denied" in str(info.value)
    assert target.read_text() == "old contents\n"
    assert os.listdir(tmp_path) == ["spec.toml"]


def test_save_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        save_spec(loads_spec(BASE), tmp_path / "nope" / "spec.toml")


# --------------------------------------------------------------------------------------------
# Seed example
# --------------------------------------------------------------------------------------------


def test_seed_example_file_and_builtin_agree() -> None:
    sample = REPO / "sample_specs" / "seed-7b-fp16-inference.toml"
    assert load_spec(sample) == seed_example_spec()
    assert sample.read_text() == SEED_EXAMPLE_TOML


def test_seed_example_content() -> None:
    s = seed_example_spec()
    assert s.model.params == 7_000_000_000
    assert s.weights.format == "fp16"
    assert s.task.kind == "inference"
    assert (s.lengths.prompt_tokens, s.lengths.generated_tokens) == (2048, 256)
    assert s.batch.concurrency == 1 and s.placement.gpus == 1
    assert s.headroom == Headroom(
        mode="manual", reserve_gib=6.0, reason="the seed's chosen reserve, an assumption to verify"
    )


# --------------------------------------------------------------------------------------------
# Error messages: one line, key path, file, problem, fix
# --------------------------------------------------------------------------------------------


def test_unknown_key_with_suggestion() -> None:
    msg = error_of(replace_line(BASE, "prompt_tokens", "prompt_tokes"))
    assert msg.startswith(
        "unknown key 'lengths.prompt_tokes' in spec.toml; did you mean 'lengths.prompt_tokens'?"
    )


def test_unknown_key_in_wrong_table_points_to_right_one() -> None:
    msg = error_of(replace_line(BASE, "concurrency = 1", "concurrency = 1\nseq_len = 9"))
    assert "unknown key 'batch.seq_len'" in msg and "'lengths.seq_len'" in msg


def test_unknown_top_level_table_and_group() -> None:
    assert "unknown key 'weight'" in error_of(BASE + "\n[weight]\nformat = 'bf16'\n")
    msg = error_of(
        replace_line(BASE, 'format = "bf16"', 'format = "bf16"\n[weights.groups]\nlm_haed = "fp32"')
    )
    assert "did you mean 'weights.groups.lm_head'?" in msg


def test_wrong_type() -> None:
    text = replace_line(QLORA_FULL, "seq_len = 4096", 'seq_len = "4k"')
    assert "lengths.seq_len must be an integer, got string '4k' (spec.toml)" in error_of(text)


def test_bool_is_not_an_integer_and_float_is_not_an_integer() -> None:
    assert "placement.gpus must be an integer, got boolean true" in error_of(
        replace_line(BASE, "gpus = 1", "gpus = true")
    )
    assert "batch.concurrency must be an integer, got float 1.0" in error_of(
        replace_line(BASE, "concurrency = 1", "concurrency = 1.0")
    )


def test_negative_length() -> None:
    msg = error_of(replace_line(BASE, "prompt_tokens = 2048", "prompt_tokens = -5"))
    assert "lengths.prompt_tokens must be >= 1, got -5 (spec.toml)" in msg


def test_zero_gpus() -> None:
    assert "placement.gpus must be >= 1, got 0" in error_of(
        replace_line(BASE, "gpus = 1", "gpus = 0")
    )


def test_tp_not_dividing_gpus() -> None:
    msg = error_of(replace_line(BASE, "gpus = 1", "gpus = 3\ntensor_parallel = 2"))
    assert (
        "placement.gpus = 3 is not a multiple of tensor_parallel x pipeline_parallel = 2 x 1 = 2"
        in msg
    )
    assert "set gpus to a multiple of 2" in msg


def test_malformed_toml_reports_line() -> None:
    msg = error_of(replace_line(BASE, "gpus = 1", "gpus = = 1"))
    line = BASE.splitlines().index("gpus = 1") + 1
    assert f"malformed TOML in spec.toml at line {line}, column" in msg
    assert msg.endswith("fix the TOML syntax at that line")


def test_malformed_toml_at_end_of_document() -> None:
    msg = error_of(BASE + "x = [1,")
    assert "end of the document" in msg


def test_missing_required_key() -> None:
    msg = error_of(replace_line(BASE, 'format = "bf16"', "double = 1").replace("double = 1", ""))
    assert msg.startswith("weights.format is required but missing in spec.toml; add format = ")
    msg = error_of(replace_line(BASE, "schema_version = 1\n", ""))
    assert "schema_version is required" in msg
    msg = error_of(replace_line(BASE, 'kv_cache_dtype = "bf16"\n', ""))
    assert "runtime.kv_cache_dtype is required for task.kind 'inference'" in msg


def test_missing_required_table() -> None:
    text = QLORA_FULL.split("[training]")[0] + "[runtime]" + QLORA_FULL.split("[runtime]")[1]
    msg = error_of(text)
    assert "[training] table is required for task.kind 'qlora'" in msg
    assert "add a [training] table with optimizer" in msg
    assert "[placement] table is required" in error_of(
        replace_line(BASE, "[placement]\ngpus = 1\n", "")
    )


def test_manual_headroom_without_reason() -> None:
    text = BASE.replace('mode = "itemised"', 'mode = "manual"\nreserve_gib = 6.0')
    msg = error_of(text)
    assert "headroom.reason is required for headroom.mode 'manual'" in msg
    assert "a margin without a reason is refused" in msg
    assert "headroom.reason is empty" in error_of(text + 'reason = "  "\n')


def test_lora_table_missing_for_lora() -> None:
    text = QLORA_FULL.split("[task.lora]")[0] + "[weights]" + QLORA_FULL.split("[weights]")[1]
    msg = error_of(
        text.replace('kind = "qlora"', 'kind = "lora"')
        .replace('format = "nf4"', 'format = "bf16"')
        .replace("double_quant = true\n", "")
    )
    assert "[task.lora] table is required for task.kind 'lora'" in msg


def test_lora_table_forbidden_for_full_finetune() -> None:
    text = QLORA_FULL.replace('kind = "qlora"', 'kind = "full_finetune"')
    msg = error_of(text)
    assert "task.lora applies to task.kind 'lora' or 'qlora' only" in msg


def test_seq_len_forbidden_on_inference() -> None:
    msg = error_of(
        replace_line(BASE, "generated_tokens = 256", "generated_tokens = 256\nseq_len = 10")
    )
    assert "lengths.seq_len does not apply to task.kind 'inference'" in msg
    assert "remove it" in msg


def test_zero3_on_inference() -> None:
    msg = error_of(replace_line(BASE, "gpus = 1", 'gpus = 2\ndata_parallel_sharding = "zero3"'))
    assert "placement.data_parallel_sharding = 'zero3'" in msg and "inference" in msg


def test_qlora_needs_4bit_linear_groups() -> None:
    text = QLORA_FULL.replace('lm_head = "bf16"', 'lm_head = "bf16"\nmlp = "bf16"')
    msg = error_of(text)
    assert "task.kind 'qlora' needs nf4 or fp4" in msg and "mlp group" in msg


def test_gptq_without_bits() -> None:
    msg = error_of(INFERENCE_FULL.replace("bits = 4\n", ""))
    assert "weights.bits is required for gptq/awq weights" in msg


def test_format_specific_key_on_wrong_format() -> None:
    msg = error_of(replace_line(BASE, 'format = "bf16"', 'format = "bf16"\ndouble_quant = true'))
    assert "weights.double_quant applies only to nf4/fp4 weights" in msg


def test_nf4_requires_double_quant() -> None:
    msg = error_of(QLORA_FULL.replace("double_quant = true\n", ""))
    assert "weights.double_quant is required for nf4/fp4 weights" in msg


def test_full_finetune_refuses_quantised_weights() -> None:
    text = QLORA_FULL.split("[task.lora]")[0] + "[weights]" + QLORA_FULL.split("[weights]")[1]
    msg = error_of(text.replace('kind = "qlora"', 'kind = "full_finetune"'))
    assert "cannot update nf4 weights" in msg


def test_bad_choice_with_suggestion() -> None:
    msg = error_of(replace_line(BASE, 'format = "bf16"', 'format = "BF16"'))
    assert "weights.format must be one of fp32, bf16" in msg and "did you mean 'bf16'?" in msg


def test_model_one_of() -> None:
    assert "none given" in error_of(replace_line(BASE, "params = 7e9", ""))
    msg = error_of(replace_line(BASE, "params = 7e9", 'params = 7e9\nid = "x/y"'))
    assert "model.id and model.params are set together" in msg
    assert "model.params must be > 0" in error_of(replace_line(BASE, "params = 7e9", "params = -1"))


def test_unsupported_schema_version() -> None:
    assert "schema_version 2 is not supported" in error_of(
        replace_line(BASE, "schema_version = 1", "schema_version = 2")
    )


def test_optimizer_state_dtype_forbidden_for_sgd() -> None:
    msg = error_of(QLORA_FULL.replace('optimizer = "adamw"', 'optimizer = "sgd"'))
    assert "training.optimizer_state_dtype does not apply to optimizer 'sgd'" in msg


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "absent.toml")
    assert "not found" in str(info.value) and "absent.toml" in str(info.value)
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(binary)


def test_spec_from_dict_and_to_dict_agree() -> None:
    s = loads_spec(QLORA_FULL)
    d = spec_to_dict(s)
    assert "kv_cache_dtype" not in d["runtime"]  # None omitted
    assert spec_from_dict(d, "x") == s


# --------------------------------------------------------------------------------------------
# Architecture checks
# --------------------------------------------------------------------------------------------


class FakeArch(Architecture):
    """A tiny llama-like model; modules() is given here, not by models/structure.py."""

    def modules(self) -> list[ModuleShape]:
        n = self.num_layers
        linear = [
            ModuleShape(
                name=name, kind="linear", group=group, params=10, count=n, is_nn_linear=True
            )
            for name, group in [
                ("q_proj", "attention"),
                ("k_proj", "attention"),
                ("v_proj", "attention"),
                ("o_proj", "attention"),
                ("gate_proj", "mlp"),
                ("up_proj", "mlp"),
                ("down_proj", "mlp"),
            ]
        ]
        return [
            ModuleShape(
                name="embed_tokens", kind="embedding", group="embedding", params=100, count=1
            ),
            *linear,
            ModuleShape(name="input_layernorm", kind="norm", group="norm", params=64, count=n),
            ModuleShape(
                name="lm_head",
                kind="linear",
                group="lm_head",
                params=100,
                count=1,
                is_nn_linear=True,
            ),
        ]


def fake_arch(**overrides) -> FakeArch:
    values = {
        "model_id": "tiny/fake-llama",
        "model_type": "llama",
        "num_layers": 4,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 32,
        "num_kv_heads": 8,
        "head_dim": 2,
        "vocab_size": 100,
        "tie_word_embeddings": False,
        "default_dtype": "bf16",
        "max_position_embeddings": 4096,
    }
    values.update(overrides)
    return FakeArch(**values)


def with_placement(s: Spec, **kw) -> Spec:
    return dataclasses.replace(s, placement=dataclasses.replace(s.placement, **kw))


def test_architecture_ok() -> None:
    s = loads_spec(QLORA_FULL)
    validate_against_architecture(with_placement(s, pipeline_parallel=2), fake_arch(), "spec.toml")


def test_tp_must_divide_heads() -> None:
    s = with_placement(loads_spec(BASE), gpus=3, tensor_parallel=3)
    with pytest.raises(SpecError) as info:
        validate_against_architecture(s, fake_arch(), "spec.toml")
    msg = str(info.value)
    assert "placement.tensor_parallel = 3 does not divide the 32 attention heads" in msg
    assert "use one of 1, 2, 4, 8, 16, 32" in msg and "spec.toml" in msg


def test_tp_must_split_kv_heads() -> None:
    s = with_placement(loads_spec(BASE), gpus=4, tensor_parallel=4)
    with pytest.raises(
        SpecError, match="cannot split the 6 key/value heads.*use one of 1, 2, 3, 6, 12"
    ):
        validate_against_architecture(s, fake_arch(num_attention_heads=12, num_kv_heads=6))


def test_pipeline_deeper_than_layers() -> None:
    s = with_placement(loads_spec(BASE), gpus=8, pipeline_parallel=8)
    with pytest.raises(SpecError, match="pipeline_parallel = 8 exceeds the 4 layers"):
        validate_against_architecture(s, fake_arch())


def test_lora_targets_must_exist() -> None:
    s = loads_spec(QLORA_FULL)
    lora = dataclasses.replace(s.task.lora, targets=("q_proj", "qkv_proj"))
    bad = dataclasses.replace(s, task=Task(kind="qlora", lora=lora))
    with pytest.raises(SpecError) as info:
        validate_against_architecture(bad, fake_arch(), "spec.toml")
    msg = str(info.value)
    assert "task.lora.targets entry 'qkv_proj' matches no module of tiny/fake-llama" in msg
    assert "q_proj" in msg and "\n" not in msg

    norm = dataclasses.replace(
        s, task=Task(kind="qlora", lora=dataclasses.replace(lora, targets=("input_layernorm",)))
    )
    with pytest.raises(SpecError, match="is a norm module"):
        validate_against_architecture(norm, fake_arch())

    dotted = dataclasses.replace(
        s, task=Task(kind="qlora", lora=dataclasses.replace(lora, targets=("self_attn.q_proj",)))
    )
    validate_against_architecture(dotted, fake_arch())
    every = dataclasses.replace(
        s, task=Task(kind="qlora", lora=dataclasses.replace(lora, targets=("all-linear",)))
    )
    validate_against_architecture(every, fake_arch())


def test_training_dataclass_keyword_order() -> None:
    t = Training(
        optimizer="adamw", master_weights_fp32=True, grad_dtype="bf16", grad_checkpointing="none"
    )
    s = dataclasses.replace(loads_spec(QLORA_FULL), training=t)
    assert validate_spec(s).training.optimizer_state_dtype == "fp32"
