"""Triage advice: one variable per change, predicted peaks, the attempt log, the CLI."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.ledger import estimate
from vramtui.models.registry import find_model
from vramtui.spec import load_spec, loads_spec
from vramtui.triage.advice import (
    TwoVariablesError,
    advise,
    check_single_change,
    record_attempt,
    set_outcome,
    variables_changed,
    with_measurements,
)
from vramtui.triage.reader import read_log
from vramtui.units import format_bytes

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "tests" / "triage_logs"
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
GIB = 2**30

TRAIN_SPEC = """
schema_version = 1
name = "8B full fine-tune"
[model]
id = "meta-llama/Llama-3.1-8B-Instruct"
[task]
kind = "full_finetune"
[weights]
format = "bf16"
[lengths]
seq_len = 4096
[batch]
micro_batch = 8
grad_accum = 2
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
[[quality]]
metric = "eval loss"
threshold = "<= 1.9"
"""


def _log(name: str):
    return read_log((LOGS / name).read_text())


@pytest.fixture(scope="module")
def arch():
    return find_model("meta-llama/Llama-3.1-8B-Instruct")


def test_generate_oom_proposes_cache_changes_with_predicted_peaks(arch):
    spec = load_spec(CHAT)
    reading = _log("pytorch_cuda_current_generate.log")
    assert reading.phase.phase == "generate"
    advice = advise(reading, spec, arch)
    assert advice.stages == ("prefill", "decode")
    by_change = {r.change: r for r in advice.recommendations}
    conc = by_change["concurrency 16 -> 8"]
    assert conc.variable == "cache"
    assert variables_changed(spec, conc.spec_after) == {"cache": ["batch.concurrency"]}
    # The KV cache after the change, by hand: 131,072 B/token x (8,000 + 192) tokens x 8.
    kv = {i.key: i for i in estimate(conc.spec_after, arch).items}["kv_cache"]
    assert kv.bytes_at("decode") == 131_072 * 8_192 * 8 == 8 * GIB
    new = estimate(conc.spec_after, arch)
    ledger_after = max(new.stage_peak_bytes[s] for s in ("prefill", "decode"))
    assert conc.ledger_peak_bytes == ledger_after
    # From the error: 74.36 GiB held + 1.96 GiB asked for, less what the ledger says it saves.
    saving = advice.estimated_stage_bytes - ledger_after
    # The peak stage is prefill: 8 fewer sequences of 8,000 prompt tokens at 131,072 B/token,
    # plus a few MiB of their activations.
    assert 131_072 * 8_000 * 8 <= saving < 131_072 * 8_000 * 8 + 64 * 2**20
    assert conc.error_peak_bytes == round(74.36 * GIB) + round(1.96 * GIB) - saving
    assert conc.predicted_peak_bytes == conc.error_peak_bytes  # the larger of the two
    assert "coverage" in conc.recheck
    fp8 = by_change["KV cache dtype bf16 -> fp8"]
    assert "quality" in fp8.recheck and "MMLU" in fp8.recheck
    # Changes that give up coverage come after those that keep the workload.
    order = [r.change for r in advice.recommendations]
    assert order.index("KV cache dtype bf16 -> fp8") < order.index("concurrency 16 -> 8")


def test_the_deviation_is_worked_out_from_the_figures(arch):
    spec = load_spec(CHAT)
    advice = advise(_log("pytorch_cuda_current_generate.log"), spec, arch)
    # 74.36 GiB in use + 1.96 GiB requested.
    in_use = round(74.36 * GIB)
    tried = round(1.96 * GIB)
    assert advice.observed_in_use_bytes == in_use
    assert advice.needed_at_failure_bytes == in_use + tried
    est = estimate(spec, arch)
    assert advice.estimated_stage_bytes == max(
        est.stage_peak_bytes["prefill"], est.stage_peak_bytes["decode"]
    )
    low_by = in_use + tried - advice.estimated_stage_bytes
    pct = low_by / advice.estimated_stage_bytes * 100
    assert advice.estimate_low_by_bytes == low_by and advice.estimate_low_by_percent == pct
    # One line, in bytes and percent.
    assert "\n" not in advice.deviation
    assert f"low by at least {format_bytes(low_by)} ({low_by:,} B, {pct:.0f}%)" in advice.deviation
    # 2.67 GiB reserved but unallocated >= 0.5 GiB: the allocator setting is proposed, with
    # the fragmentation taken off what was needed.
    alloc = [r for r in advice.recommendations if r.variable == "allocator"][0]
    assert alloc.spec_after is None and "expandable_segments" in alloc.change
    assert alloc.error_peak_bytes == in_use + tried - round(2.67 * GIB)
    assert alloc.ledger_peak_bytes is None  # the ledger does not model fragmentation
    assert any("other processes" in w for w in advice.warnings)


def test_backward_oom_halves_the_micro_batch_and_keeps_the_effective_batch(arch):
    spec = loads_spec(TRAIN_SPEC)
    reading = _log("pytorch_fraction_old_backward.log")
    assert reading.phase.phase == "backward"
    advice = advise(reading, spec, arch)
    mb = [r for r in advice.recommendations if r.variable == "micro_batch"][0]
    after = mb.spec_after
    assert (after.batch.micro_batch, after.batch.grad_accum) == (4, 4)
    assert after.batch.micro_batch * after.batch.grad_accum == 8 * 2
    assert check_single_change(spec, after) == "micro_batch"
    act = [r for r in advice.recommendations if r.variable == "activation"][0]
    assert act.spec_after.training.grad_checkpointing == "full"
    assert act.ledger_peak_bytes < advice.estimated_stage_bytes
    # Changes that keep the workload and its quality come before anything else.
    assert advice.recommendations[0].variable in ("micro_batch", "activation", "allocator")


def test_optimizer_state_oom_proposes_an_8bit_optimizer(arch):
    spec = loads_spec(TRAIN_SPEC)
    reading = _log("adamw_init_group_from_training_step.log")
    assert reading.phase.phase == "optimizer_step"
    advice = advise(reading, spec, arch)
    rec = [r for r in advice.recommendations if r.change == "optimizer adamw -> adamw_8bit"][0]
    assert rec.variable == "precision" and "eval loss" in rec.recheck
    before = {i.key: i for i in estimate(spec, arch).items}["optimizer"].max_bytes
    after = {i.key: i for i in estimate(rec.spec_after, arch).items}["optimizer"].max_bytes
    n = arch.param_count
    assert before == 2 * n * 4  # m and v in fp32
    assert after == 2 * n + 2 * 4 * -(-n // 256)  # 1 B each + one fp32 absmax per 256 values


def test_two_variables_at_once_are_refused_with_the_diff():
    spec = load_spec(CHAT)
    both = replace(
        spec,
        batch=replace(spec.batch, concurrency=8),
        runtime=replace(spec.runtime, kv_cache_dtype="fp8"),
    )
    assert (
        check_single_change(spec, replace(spec, batch=replace(spec.batch, concurrency=8)))
        == "cache"
    )
    fmt = replace(
        spec, batch=replace(spec.batch, concurrency=8), weights=replace(spec.weights, format="fp8")
    )
    with pytest.raises(TwoVariablesError) as err:
        check_single_change(spec, fmt)
    msg = str(err.value)
    assert "batch.concurrency: 16 -> 8" in msg and "weights.format: 'bf16' -> 'fp8'" in msg
    # Two fields of one variable (concurrency and KV dtype are both the cache) pass.
    assert check_single_change(spec, both) == "cache"
    with pytest.raises(TwoVariablesError):
        check_single_change(spec, spec)


def test_a_mismatched_phase_is_flagged(arch):
    spec = load_spec(CHAT)  # inference
    advice = advise(_log("pytorch_fraction_old_backward.log"), spec, arch)
    assert any("training phase" in w for w in advice.warnings)


def test_attempt_log_round_trips_through_toml(tmp_path, arch):
    spec = load_spec(CHAT)
    reading = _log("pytorch_cuda_current_generate.log")
    advice = advise(reading, spec, arch)
    rec = [r for r in advice.recommendations if r.change == "concurrency 16 -> 8"][0]
    new = record_attempt(spec, reading, advice, rec)
    new = with_measurements(new, advice.measurements)
    assert new.batch.concurrency == 8 and len(new.triage) == 1
    attempt = new.triage[0]
    assert (attempt.phase, attempt.variable, attempt.outcome) == ("generate", "cache", "pending")
    assert dict(attempt.figures)["tried_to_allocate_bytes"] == round(1.96 * GIB)
    assert any(
        m.quantity == "process_in_use" and m.bytes == round(74.36 * GIB) for m in new.measured
    )
    from vramtui.spec import save_spec

    path = tmp_path / "spec.toml"
    save_spec(set_outcome(new, 0, "fixed"), path)
    back = load_spec(path)
    assert back.triage[0].outcome == "fixed" and back.triage[0].change == "concurrency 16 -> 8"
    assert back.measured == new.measured
    # The measured figure shows beside the estimate, never added to it.
    est = estimate(back, arch)
    assert (
        est.measurements and est.peak_bytes == estimate(replace(back, measured=()), arch).peak_bytes
    )


# ------------------------------------------------------------------------------- CLI


def test_cli_json_fields(capsys):
    rc = main(
        ["triage", str(LOGS / "pytorch_cuda_current_generate.log"), "--spec", str(CHAT), "--json"]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["is_oom"] is True and data["phase"] == "generate"
    assert data["phase_evidence"]["line_no"] and data["framework"] == "pytorch"
    f = data["figures"]
    assert f["tried_to_allocate_bytes"] == round(1.96 * GIB)
    assert f["total_capacity_bytes"] == round(79.25 * GIB)
    for r in data["recommendations"]:
        assert {"variable", "change", "recheck", "fits"} <= set(r)
        assert {"predicted_from_error_bytes", "predicted_from_ledger_bytes"} <= set(r)
        assert "predicted_peak_bytes" not in r  # never one mixed column


def test_cli_exit_3_when_the_text_holds_no_oom(capsys):
    assert main(["triage", str(LOGS / "not_oom_valueerror.log")]) == 3
    out = capsys.readouterr().out
    assert "no out-of-memory error" in out


def test_cli_apply_changes_one_variable_and_logs_it(tmp_path, capsys):
    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    log = str(LOGS / "pytorch_cuda_current_generate.log")
    assert main(["triage", log, "--spec", str(spec_path), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)["recommendations"]
    n = [r["index"] for r in recs if r["change"] == "concurrency 16 -> 8"][0]
    assert main(["triage", log, "--spec", str(spec_path), "--apply", str(n)]) == 0
    capsys.readouterr()
    after = load_spec(spec_path)
    assert after.batch.concurrency == 8 and after.triage[-1].variable == "cache"
    assert check_single_change(load_spec(CHAT), replace(after, triage=())) == "cache"


def test_cli_bad_input_one_line(tmp_path, capsys):
    assert main(["triage", str(tmp_path / "missing.log")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]
    assert main(["triage", str(LOGS / "not_oom_valueerror.log"), "--apply", "1"]) == 2
