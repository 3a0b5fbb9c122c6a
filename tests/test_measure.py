"""Measurements beside estimates: the spec's [[measured]] schema, coverage of the required
workload, the comparison with the matching slice of the ledger, the staged plan, and import
of probe files through `vramtui measure import`.

Expected figures are worked by hand from a bare 1e9-parameter bf16 full fine-tune with mixed-
precision AdamW (16 B/param of model states, plus the update's fp32 temporary):
weights 2e9 B, gradients 2e9 B, fp32 master weights 4e9 B, Adam m and v 8e9 B, the update's
fp32 temporary 4e9 B; the CUDA context is the ledger's stated 512 MiB = 536,870,912 B.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.errors import SpecError, VramtuiError
from vramtui.ledger import estimate
from vramtui.measure.compare import compare
from vramtui.measure.coverage import DOES_NOT_VALIDATE, coverage, required_dims
from vramtui.measure.importer import (
    MeasureImportError,
    merge_measurements,
    read_measurements_text,
)
from vramtui.measure.plan import FAILED, NOT_RUN, PARTIAL, PASSED, staged_plan
from vramtui.models.registry import find_model
from vramtui.spec import Measurement, dumps_spec, load_spec, loads_spec

BARE = """
schema_version = 1
name = "bare 1e9 full fine-tune"
[model]
params = 1000000000
[task]
kind = "full_finetune"
[weights]
format = "bf16"
[lengths]
seq_len = 2048
[batch]
micro_batch = 4
grad_accum = 1
[training]
optimizer = "adamw"
master_weights_fp32 = true
grad_dtype = "bf16"
optimizer_state_dtype = "fp32"
grad_checkpointing = "none"
[runtime]
attention = "sdpa"
[placement]
gpus = 1
[headroom]
mode = "itemised"
"""

CTX = 536_870_912


def _m(**kw) -> Measurement:
    base = {
        "stage": "optimizer_step",
        "quantity": "max_memory_allocated",
        "counter": "test counter",
    }
    base.update(kw)
    return Measurement(**base)


def _bare(*measured) -> object:
    return replace(loads_spec(BARE, "bare.toml"), measured=tuple(measured))


# ------------------------------------------------------------------ spec schema


def test_measured_fields_round_trip_through_toml():
    text = (
        BARE
        + """
[[measured]]
stage = "backward"
quantity = "max_memory_reserved"
bytes = 21000000000
counter = "torch.cuda.max_memory_reserved (peak since the stage started)"
gpu = 0
device = "NVIDIA H100 80GB HBM3"
date = 2026-12-01
run = "3f2a"
error = "OutOfMemoryError: CUDA out of memory"
[measured.dims]
batch = 4
seq_len = 1024
corpus_fraction = 0.5
[measured.versions]
torch = "2.13.0"
driver = "570.86.15"
"""
    )
    spec = loads_spec(text, "t.toml")
    (m,) = spec.measured
    assert m.bytes == 21_000_000_000
    assert m.dims_map == {"batch": 4, "seq_len": 1024, "corpus_fraction": 0.5}
    assert m.versions_map == {"torch": "2.13.0", "driver": "570.86.15"}
    assert m.device == "NVIDIA H100 80GB HBM3" and m.run == "3f2a"
    again = loads_spec(dumps_spec(spec, "t.toml"), "t.toml")
    assert again == spec
    assert dumps_spec(again, "t.toml") == dumps_spec(spec, "t.toml")


def test_count_quantities_take_a_value_not_bytes():
    spec = loads_spec(
        BARE.replace('kind = "full_finetune"', 'kind = "inference"')
        .replace("seq_len = 2048", "prompt_tokens = 1000\ngenerated_tokens = 24")
        .replace("micro_batch = 4\ngrad_accum = 1", "concurrency = 2")
        .split("[training]")[0]
        + '[runtime]\nattention = "sdpa"\nkv_cache_dtype = "bf16"\n[placement]\ngpus = 1\n'
        '[headroom]\nmode = "itemised"\n'
        + '[[measured]]\nstage = "decode"\nquantity = "kv_cache_tokens"\nvalue = 444576\n'
        'counter = "vLLM GPU KV cache size"\n',
        "t.toml",
    )
    assert spec.measured[0].value == 444_576 and spec.measured[0].bytes is None
    bad = BARE + '[[measured]]\nstage = "forward"\nquantity = "kv_cache_tokens"\nbytes = 5\n'
    bad += 'counter = "x"\n'
    with pytest.raises(SpecError, match=r"measured\[0\]\.bytes does not apply.*value = N"):
        loads_spec(bad, "t.toml")


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        ('[measured.dims]\nbatch = "eight"\n', r"measured\[0\]\.dims must be a table of"),
        ("[measured.dims]\ncorpus_fraction = 2.0\n", r"corpus_fraction between 0 and 1"),
        ("[measured.versions]\ntorch = 2\n", r"measured\[0\]\.versions must be a table"),
    ],
)
def test_bad_measured_tables_give_one_line_errors(extra, pattern):
    text = BARE + '[[measured]]\nstage = "forward"\nquantity = "allocated"\nbytes = 5\n'
    text += 'counter = "x"\n' + extra
    with pytest.raises(SpecError, match=pattern) as info:
        loads_spec(text, "t.toml")
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ coverage


def test_required_dims_follow_the_task():
    assert required_dims(_bare()) == {"batch": 4, "seq_len": 2048}


def test_smaller_dimensions_do_not_validate_and_say_why():
    spec = _bare()
    m = _m(stage="backward", bytes=1, dims={"batch": 2, "seq_len": 2048})
    cov = coverage(m, spec)
    assert not cov.validates
    assert cov.note == f"{DOES_NOT_VALIDATE}: micro-batch 2 < required 4"
    part = _m(
        stage="backward", bytes=1, dims={"batch": 4, "seq_len": 4096, "corpus_fraction": 0.25}
    )
    assert coverage(part, spec).shortfalls == ("only 25% of the corpus was run",)
    assert coverage(_m(stage="backward", bytes=1), spec).shortfalls == (
        "the dimensions executed were not recorded",
    )
    full = _m(stage="backward", bytes=1, dims={"micro_batch": 8, "seq_len": 2048})
    assert coverage(full, spec).validates


def test_dimension_free_figures_validate_whatever_the_dimensions():
    spec = _bare()
    weights = _m(stage="forward", quantity="item", item="weights", bytes=1, dims={"batch": 1})
    ctx = _m(stage="forward", quantity="item", item="overhead.cuda_context", bytes=1)
    at_load = _m(stage="load", quantity="max_memory_allocated", bytes=1)
    for m in (weights, ctx, at_load):
        assert coverage(m, spec).validates and coverage(m, spec).dimension_free


def test_a_failed_stage_never_validates():
    m = _m(stage="backward", bytes=1, dims={"batch": 4, "seq_len": 2048}, error="OOM: x")
    assert coverage(m, _bare()).shortfalls == ("the stage failed (OOM: x)",)


# ------------------------------------------------------------------ item replacement


def test_a_covering_item_measurement_replaces_the_estimate_and_keeps_it():
    m = _m(stage="load", quantity="item", item="overhead.cuda_context", bytes=600_000_000)
    est = estimate(_bare(m))
    ctx = next(i for i in est.items if i.key == "overhead.cuda_context")
    assert ctx.status == "measured" and ctx.max_bytes == 600_000_000
    assert ctx.replaced_estimate.max_bytes == CTX
    (c,) = compare(_bare(m), est)
    assert c.estimate_bytes == CTX
    assert c.difference_bytes == 600_000_000 - CTX


def test_an_activation_figure_at_a_smaller_batch_never_replaces_the_estimate():
    spec = loads_spec(Path("sample_specs/qlora-7b.toml").read_text(), "qlora-7b.toml")
    arch = find_model(spec.model.id)
    before = next(i for i in estimate(spec, arch).items if i.key == "activations.training")
    small = _m(
        stage="backward",
        quantity="item",
        item="activations.training",
        bytes=1_000,
        dims={"batch": 1, "seq_len": 512},
    )
    after = estimate(replace(spec, measured=(small,)), arch)
    act = next(i for i in after.items if i.key == "activations.training")
    assert act == before  # still the estimate, untouched
    (c,) = compare(replace(spec, measured=(small,)), after)
    assert not c.coverage.validates
    assert "micro-batch 1 < required 4" in c.coverage.note
    assert "tokens per sequence 512 < required 2,048" in c.coverage.note


# ------------------------------------------------------------------ comparisons (hand-worked)


def test_stage_counters_compare_with_the_slice_they_see():
    dims = {"batch": 4, "seq_len": 2048}
    alloc = _m(bytes=21_000_000_000, dims=dims)
    reserved = _m(quantity="max_memory_reserved", bytes=22_000_000_000, dims=dims)
    used = _m(quantity="nvml_used", bytes=23_000_000_000, dims=dims, gpu=0)
    spec = _bare(alloc, reserved, used)
    c_alloc, c_res, c_used = compare(spec, estimate(spec))
    # tensors at the first optimiser step: 2e9 + 2e9 + 4e9 + 8e9 + 4e9 (fp32 update temporary)
    assert c_alloc.estimate_bytes == 20_000_000_000
    assert c_alloc.difference_bytes == 1_000_000_000
    assert c_alloc.difference_fraction == pytest.approx(0.05)
    assert "CUDA context" in c_alloc.scope and c_alloc.coverage.validates
    # no activations are known, so no fragmentation item: the same tensors
    assert c_res.estimate_bytes == 20_000_000_000
    # NVML: everything, the CUDA context included
    assert c_used.estimate_bytes == 20_000_000_000 + CTX
    assert "other processes" in c_used.scope
    assert c_used.label == "first optimiser step: device memory used (NVML), GPU 0"


def test_category_and_multi_key_items_sum_their_items():
    m = _m(stage="load", quantity="item", item="weights+master_weights", bytes=6_100_000_000)
    spec = _bare(m)
    (c,) = compare(spec, estimate(spec))
    assert c.estimate_bytes == 2_000_000_000 + 4_000_000_000
    assert c.difference_bytes == 100_000_000
    unknown = _m(stage="load", quantity="item", item="cuda_graphs", bytes=5)
    (c,) = compare(_bare(unknown), estimate(_bare(unknown)))
    assert c.estimate_bytes is None and "not in the ledger: cuda_graphs" in c.scope


def test_kv_tokens_against_the_required_tokens():
    spec = load_spec("sample_specs/llama-3.1-8b-chat-8k-x16.toml")
    need = spec.batch.concurrency * spec.lengths.context_tokens
    ok = Measurement(
        stage="decode",
        quantity="kv_cache_tokens",
        value=float(need),
        counter="vLLM",
        dims={"max_model_len": spec.lengths.context_tokens},
    )
    short = replace(ok, value=float(need - 1))
    too_short_window = replace(ok, dims={"max_model_len": 4096})
    spec = replace(spec, measured=(ok, short, too_short_window))
    c_ok, c_short, c_window = compare(spec, estimate(spec, find_model(spec.model.id)))
    assert c_ok.coverage.validates and c_ok.estimate_value == need
    assert not c_short.coverage.validates
    assert f"{need - 1:,} KV cache tokens < {need:,} required" in c_short.coverage.note
    assert "max_model_len 4,096 < required" in c_window.coverage.note


# ------------------------------------------------------------------ staged plan


def test_plan_steps_and_their_dimensions():
    load, smoke, typical, required = staged_plan(_bare())
    assert [s.key for s in (load, smoke, typical, required)] == [
        "load",
        "smoke",
        "typical",
        "required",
    ]
    assert smoke.dims == {"batch": 1, "seq_len": 512}
    assert typical.dims == {"batch": 2, "seq_len": 1024}
    assert required.dims == {"batch": 4, "seq_len": 2048}
    assert all(s.status == NOT_RUN for s in (load, smoke, typical, required))
    assert required.stages == ("forward", "backward", "optimizer_step", "validation", "export")


def test_plan_statuses_from_measurements():
    stages = ("forward", "backward", "optimizer_step", "validation", "export")
    smoke = [_m(stage=s, bytes=10, dims={"batch": 1, "seq_len": 512}) for s in stages]
    typical = [_m(stage=s, bytes=20, dims={"batch": 2, "seq_len": 1024}) for s in stages[:2]]
    oom = _m(stage="backward", bytes=30, dims={"batch": 4, "seq_len": 2048}, error="OOM at 4")
    load = _m(stage="load", bytes=5)
    plan = staged_plan(_bare(*smoke, *typical, oom, load))
    by = {s.key: s for s in plan}
    assert by["load"].status == PASSED and by["load"].peak_bytes == 5
    assert by["smoke"].status == PASSED
    assert by["smoke"].peak_bytes == 20  # the typical run covers the smoke dimensions too
    assert by["typical"].status == PARTIAL
    assert by["typical"].missing_stages == ("optimizer_step", "validation", "export")
    assert by["required"].status == FAILED
    assert by["required"].failures == ("backward at 4 x 2,048 tokens: OOM at 4",)


# ------------------------------------------------------------------ probe import


def _probe_lines(stages) -> str:
    run = {
        "vramtui_probe": 1,
        "kind": "run",
        "run_id": "a" * 32,
        "run_name": "",
        "pid": 1,
        "time": "2026-12-01T10:00:00+00:00",
        "host": "node",
        "cuda_available": True,
        "versions": {"python": "3.11.7", "torch": "2.13.0", "cuda": "12.8", "driver": "570.86.15"},
        "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85_029_158_912}],
    }
    lines = [json.dumps(run)]
    for name, dims, alloc, error, measured in stages:
        lines.append(
            json.dumps(
                {
                    "vramtui_probe": 1,
                    "kind": "stage",
                    "run_id": "a" * 32,
                    "stage": name,
                    "time_start": "2026-12-01T10:00:01+00:00",
                    "time_end": "2026-12-01T10:00:02+00:00",
                    "seconds": 1.0,
                    "dims": dims,
                    "measured": measured,
                    "reason": None if measured else "CUDA is not available: nothing was measured",
                    "error": error,
                    "devices": [
                        {
                            "index": 0,
                            "max_memory_allocated_bytes": alloc,
                            "max_memory_reserved_bytes": alloc + 1_000_000,
                            "memory_allocated_bytes": alloc // 2,
                            "memory_reserved_bytes": alloc,
                            "nvml_used_bytes": alloc + 900_000_000,
                            "nvml_process_used_bytes": None,
                            "nvml_total_bytes": 85_520_809_984,
                        }
                    ]
                    if measured
                    else [],
                }
            )
        )
    return "\n".join(lines) + "\n"


def test_probe_records_become_measurements_with_their_conditions():
    text = _probe_lines(
        [
            ("load", {}, 2_100_000_000, None, True),
            ("backward", {"batch": 2, "seq_len": 2048}, 9_000_000_000, None, True),
            ("eval", {"batch": 4, "seq_len": 2048}, 3_000_000_000, None, True),
            ("prefill", {}, 1, None, True),
            ("optimizer_step", {}, 0, None, False),
        ]
    )
    result = read_measurements_text(text, _bare(), source="run.jsonl")
    assert result.kind == "probe"
    # 3 usable stages x 3 counters (allocated peak, reserved peak, NVML used; no process figure)
    assert len(result.measurements) == 9
    back = [m for m in result.measurements if m.stage == "backward"]
    assert {m.quantity: m.bytes for m in back} == {
        "max_memory_allocated": 9_000_000_000,
        "max_memory_reserved": 9_001_000_000,
        "nvml_used": 9_900_000_000,
    }
    m = back[0]
    assert m.dims_map == {"batch": 2, "seq_len": 2048}
    assert m.versions_map["driver"] == "570.86.15"
    assert m.device == "NVIDIA H100 80GB HBM3" and m.gpu == 0
    assert str(m.date) == "2026-12-01"
    assert {m.stage for m in result.measurements} == {"load", "backward", "validation"}
    assert any("no prefill stage" in s for s in result.skipped)
    assert any("nothing measured" in s for s in result.skipped)
    spec, added = merge_measurements(_bare(), result.measurements)
    assert added == 9
    again, added_again = merge_measurements(spec, result.measurements)
    assert added_again == 0 and again is spec


def test_not_a_measurement_file_is_a_clear_error():
    with pytest.raises(VramtuiError, match="neither a vramtui probe file") as info:
        read_measurements_text("hello\nworld\n", _bare(), source="notes.txt")
    assert "\n" not in str(info.value)
    with pytest.raises(VramtuiError, match="is empty"):
        read_measurements_text("  \n", _bare(), source="empty.log")


def test_cli_measure_import_stores_figures_atomically(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # one table row per line
    spec_path = tmp_path / "bare.toml"
    spec_path.write_text(BARE)
    probe = tmp_path / "run.jsonl"
    probe.write_text(
        _probe_lines([("backward", {"batch": 2, "seq_len": 2048}, 9_000_000_000, None, True)])
    )
    assert main(["measure", "import", str(probe), "--spec", str(spec_path)]) == 0
    out = capsys.readouterr().out
    assert "3 stored in" in out
    assert DOES_NOT_VALIDATE in out
    saved = load_spec(spec_path)
    assert len(saved.measured) == 3
    assert [p.name for p in tmp_path.iterdir()] and not list(tmp_path.glob("*.tmp*"))
    # importing again adds nothing
    assert main(["measure", "import", str(probe), "--spec", str(spec_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["imported"] == 0 and data["repeats_skipped"] == 3
    back = [c for c in data["measured_beside_estimated"] if c["quantity"] == "max_memory_allocated"]
    # at backward: weights 2e9 + gradients 2e9 + master 4e9 + Adam states 8e9 (activations unknown)
    assert back[0]["estimated_bytes"] == 16_000_000_000
    assert back[0]["validates_required_workload"] is False
    assert len(load_spec(spec_path).measured) == 3


def test_cli_measure_import_bad_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.log"
    bad.write_text("just some text\n")
    assert main(["measure", "import", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vramtui: error: x.log is neither") and err.count("\n") == 1
    assert main(["measure", "import", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


# ------------------------------------------------------------------ vLLM import

VLLM_LOGS = Path(__file__).parent / "vllm_logs"


def test_vllm_v1_log_becomes_measured_items_of_an_inference_spec():
    spec = load_spec("sample_specs/llama-3.1-8b-chat-8k-x16.toml")
    text = (VLLM_LOGS / "v1_0.10.1_api_server.log").read_text()
    result = read_measurements_text(text, spec, source="serve.log")
    by = {(m.quantity, m.item): m for m in result.measurements}
    weights = by[("item", "weights+quant_metadata")]
    # "Model loading took 14.9889 GiB": vLLM divides by 2**30
    assert weights.bytes == round(14.9889 * 2**30) and weights.stage == "load"
    assert weights.as_written == "14.9889 GiB"
    assert weights.versions_map == {"vllm": "0.10.1.1"}
    pool = by[("kv_cache_pool", None)]
    assert pool.bytes == round(50.44 * 2**30)
    tokens = by[("kv_cache_tokens", None)]
    assert tokens.value == 413_200 and tokens.bytes is None
    conc = by[("max_concurrency", None)]
    assert conc.value == 50.44 and conc.dims_map["tokens_per_request"] == 8192
    assert by[("item", "cuda_graphs")].bytes == round(0.55 * 2**30)
    # 16 sequences x 8,192 tokens = 131,072 tokens needed; 413,200 held: validates
    spec2, _ = merge_measurements(spec, result.measurements)
    comparisons = compare(spec2, estimate(spec2, find_model(spec.model.id)))
    c_tokens = next(c for c in comparisons if c.measurement.quantity == "kv_cache_tokens")
    assert c_tokens.estimate_value == 131_072 and c_tokens.coverage.validates
    c_weights = next(c for c in comparisons if c.measurement.item == "weights+quant_metadata")
    # the ledger's bf16 weights of Llama-3.1-8B: 8,030,261,248 parameters x 2 B
    assert c_weights.estimate_bytes == 16_060_522_496
    assert c_weights.difference_bytes == round(14.9889 * 2**30) - 16_060_522_496


def test_vllm_log_into_a_training_spec_is_refused():
    text = (VLLM_LOGS / "v1_0.10.1_api_server.log").read_text()
    with pytest.raises(VramtuiError, match="vLLM serving log but the spec is a full_finetune"):
        read_measurements_text(text, _bare(), source="serve.log")


def test_vllm_tp2_figures_keep_one_per_rank():
    spec = load_spec("sample_specs/llama-3.3-70b-awq-tp2.toml")
    text = (VLLM_LOGS / "v1_0.8.3_tp2_rank_prefix.log").read_text()
    result = read_measurements_text(text, spec, source="tp2.log")
    weights = [m for m in result.measurements if m.item == "weights+quant_metadata"]
    assert sorted(m.gpu for m in weights) == sorted({m.gpu for m in weights})
    assert all(m.gpu is not None for m in weights)
    assert any("serves 'Qwen/Qwen2.5-Coder-7B-Instruct'" in w for w in result.warnings)


def test_a_probe_run_under_another_framework_is_said_and_kept():
    """The probe records the training framework; the import keeps it with the versions and
    says when the spec's framework (here absent: the hf-trainer default) differs."""
    text = _probe_lines([("backward", {"batch": 2}, 9_000_000_000, None, True)])
    first, rest = text.split("\n", 1)
    run = json.loads(first)
    run["framework"] = "litgpt"
    text = json.dumps(run) + "\n" + rest
    spec = _bare()
    if spec.task.kind == "inference":
        pytest.skip("the bare spec is an inference spec")
    result = read_measurements_text(text, spec, source="run.jsonl")
    assert {m.versions_map.get("framework") for m in result.measurements} == {"litgpt"}
    (warning,) = [w for w in result.warnings if "framework" in w]
    assert "ran under litgpt" in warning and "hf-trainer (the default)" in warning
    assert 'framework = "litgpt"' in warning


def test_a_probe_framework_that_is_not_text_is_refused_in_one_line():
    text = _probe_lines([("backward", {"batch": 2}, 9_000_000_000, None, True)])
    first, rest = text.split("\n", 1)
    run = json.loads(first)
    run["framework"] = 7
    with pytest.raises(MeasureImportError) as info:
        read_measurements_text(json.dumps(run) + "\n" + rest, _bare(), source="run.jsonl")
    assert "'framework' is not a short text" in str(info.value)
