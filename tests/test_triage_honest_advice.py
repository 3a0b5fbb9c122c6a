"""Honest triage advice: never a smaller card than the one that failed, the error's and the
ledger's predictions in separate columns judged against the failed card, the estimate's
shortfall in bytes and percent, a refusal to apply a change predicted not to fit, and the
advice that holds for every stage when the stage is unknown."""

from __future__ import annotations

import datetime
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from vramtui.catalog import find_gpu, load_catalog
from vramtui.cli import main
from vramtui.ledger import estimate
from vramtui.models.registry import find_model
from vramtui.spec import Measurement, load_spec
from vramtui.triage.advice import advise, failed_card_capacity, override_stage
from vramtui.triage.reader import read_log

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "tests" / "triage_logs"
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
FT = REPO / "sample_specs" / "full-finetune-zero3-4gpu.toml"
GIB = 2**30
CAP_80 = round(79.25 * GIB)  # "total capacity of 79.25 GiB": an 80 GB card

# An OOM on an 80 GB card where another process held 40 GiB: the job itself needed only
# 36 + 2 = 38 GiB, which a 48 GB card would hold on paper.
SHARED_80 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.25 GiB of which 1.00 GiB is free. Process 77 has 40.00 GiB memory in use. "
    "Including non-PyTorch memory, this process has 36.00 GiB memory in use. Of the allocated "
    "memory 35.50 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but "
    "unallocated.\n"
)
# The job held 60 GiB and asked for 60 more on the same card: 120 GiB needed.
HUGE_ASK = SHARED_80.replace("Tried to allocate 2.00 GiB", "Tried to allocate 60.00 GiB")
HUGE_ASK = HUGE_ASK.replace(" Process 77 has 40.00 GiB memory in use.", "").replace(
    "this process has 36.00 GiB", "this process has 60.00 GiB"
)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(use_user_config=False)


@pytest.fixture(scope="module")
def arch():
    return find_model("meta-llama/Llama-3.1-8B-Instruct")


def _capacity_recs(advice):
    return [r for r in advice.recommendations if r.variable == "capacity"]


# --------------------------------------------------------------------- never a smaller card


def test_an_oom_on_an_80gb_card_never_gets_a_48gb_proposal(catalog, arch):
    spec = load_spec(CHAT)
    reading = read_log(SHARED_80)
    assert reading.primary.figures["total_capacity_bytes"] == CAP_80
    advice = advise(reading, spec, arch, catalog=catalog)
    recs = _capacity_recs(advice)
    assert recs, "a card that holds the job is proposed"
    for r in recs:
        offer = catalog.offers[r.offer_id]
        gpu = catalog.gpu_for(offer)
        assert gpu.usable().bytes >= 0.98 * CAP_80, gpu.id
        assert "l40s" not in gpu.id and "48" not in offer.title
    # The same workload with the failed card unknown: the 48 GB card is the cheapest that
    # holds 38 GiB, so the rule above is what keeps it out.
    bare = replace(
        reading.primary,
        figures={k: v for k, v in reading.primary.figures.items() if k != "total_capacity_bytes"},
    )
    unknown_card = advise(replace(reading, primary=bare), spec, arch, catalog=catalog)
    smallest = catalog.gpu_for(catalog.offers[_capacity_recs(unknown_card)[0].offer_id])
    assert smallest.usable().bytes < 0.98 * CAP_80


def test_the_spec_measured_card_stands_in_when_the_error_prints_no_capacity(catalog, arch):
    reading = read_log((LOGS / "cuda_error_no_figures_load.log").read_text())
    assert "total_capacity_bytes" not in reading.primary.figures
    a100 = find_gpu(catalog, "NVIDIA A100-SXM4-80GB")
    spec = replace(
        load_spec(CHAT),
        measured=(
            Measurement(
                stage="load",
                quantity="process_in_use",
                bytes=10 * GIB,
                counter="nvidia-smi",
                device="NVIDIA A100-SXM4-80GB",
                date=datetime.date(2026, 1, 1),
            ),
        ),
    )
    cap, source = failed_card_capacity(reading, spec, catalog)
    assert cap == a100.usable().bytes and "A100" in source
    advice = advise(reading, spec, arch, catalog=catalog)
    for r in _capacity_recs(advice):
        gpu = catalog.gpu_for(catalog.offers[r.offer_id])
        assert gpu.usable().bytes >= 0.98 * a100.usable().bytes, gpu.id
    # Without the measured card nothing is known: (None, "").
    assert failed_card_capacity(reading, load_spec(CHAT), catalog) == (None, "")


# --------------------------------------------------------------------- two columns


def test_two_prediction_columns_judged_against_the_failed_card(arch):
    spec = load_spec(CHAT)
    reading = override_stage(read_log(HUGE_ASK), "generate")
    advice = advise(reading, spec, arch)
    assert advice.capacity_bytes == CAP_80
    needed = 120 * GIB
    assert advice.needed_at_failure_bytes == needed
    est = estimate(spec, arch)
    stage = max(est.stage_peak_bytes["prefill"], est.stage_peak_bytes["decode"])
    assert advice.estimate_low_by_bytes == needed - stage
    fp8 = [r for r in advice.recommendations if r.change == "KV cache dtype bf16 -> fp8"][0]
    after = estimate(fp8.spec_after, arch)
    ledger_after = max(after.stage_peak_bytes["prefill"], after.stage_peak_bytes["decode"])
    assert fp8.ledger_peak_bytes == ledger_after
    assert fp8.error_peak_bytes == needed - (stage - ledger_after)
    assert fp8.fits_against_bytes == CAP_80
    # The ledger says ~24 GiB fits; the error says ~112 GiB does not: no mixing, and "no".
    assert fp8.fits_ledger is True and fp8.fits_error is False and fp8.fits is False
    assert "from the error's figures" in fp8.why_not_fit and "79.25 GiB" in fp8.why_not_fit
    # Changes predicted not to fit come after those that fit.
    verdicts = [r.fits is False for r in advice.recommendations]
    assert verdicts == sorted(verdicts)


def test_json_keeps_the_columns_apart(tmp_path, capsys):
    log = tmp_path / "huge.log"
    log.write_text(HUGE_ASK)
    rc = main(["triage", str(log), "--spec", str(CHAT), "--stage", "generate", "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["phase"] == "generate"
    assert data["failed_card_capacity_bytes"] == CAP_80
    assert data["estimate_low_by_bytes"] == 120 * GIB - data["estimated_stage_bytes"]
    pct = data["estimate_low_by_bytes"] / data["estimated_stage_bytes"] * 100
    assert data["estimate_low_by_percent"] == round(pct, 1)
    fp8 = [r for r in data["recommendations"] if r["change"] == "KV cache dtype bf16 -> fp8"][0]
    assert fp8["predicted_from_error_bytes"] > CAP_80 > fp8["predicted_from_ledger_bytes"]
    assert (fp8["fits_from_error"], fp8["fits_from_ledger"], fp8["fits"]) == (False, True, False)
    assert fp8["fits_against_bytes"] == CAP_80


def test_cli_table_has_two_labelled_columns(capsys):
    rc = main(["triage", str(LOGS / "pytorch_cuda_current_generate.log"), "--spec", str(CHAT)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "from the error" in out and "from the ledger" in out
    assert "low by at least" in out and "judged against 79.25 GiB" in out


# --------------------------------------------------------------------- apply, refuse, force


def test_apply_a_change_predicted_not_to_fit_needs_force(tmp_path, capsys):
    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    log = tmp_path / "huge.log"
    log.write_text(HUGE_ASK)
    base = ["triage", str(log), "--spec", str(spec_path), "--stage", "generate"]
    assert main(base + ["--json"]) == 0
    recs = json.loads(capsys.readouterr().out)["recommendations"]
    n = [r["index"] for r in recs if r["change"] == "KV cache dtype bf16 -> fp8"][0]
    before = spec_path.read_bytes()
    assert main(base + ["--apply", str(n)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "predicted" in err[0] and "--force" in err[0]
    assert spec_path.read_bytes() == before
    assert main(base + ["--apply", str(n), "--force"]) == 0
    capsys.readouterr()
    saved = load_spec(spec_path)
    assert saved.runtime.kv_cache_dtype == "fp8" and saved.triage[-1].outcome == "pending"
    # The attempt logs the larger (error-side) prediction.
    assert saved.triage[-1].predicted_peak_bytes == recs[n - 1]["predicted_from_error_bytes"]
    assert main(["triage", str(log), "--force"]) == 2
    assert "--force goes with --apply" in capsys.readouterr().err


def test_a_change_that_fits_applies_without_force(tmp_path, capsys):
    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    log = str(LOGS / "pytorch_cuda_current_generate.log")
    assert main(["triage", log, "--spec", str(spec_path), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)["recommendations"]
    conc = [r for r in recs if r["change"] == "concurrency 16 -> 8"][0]
    assert conc["fits"] is True
    assert main(["triage", log, "--spec", str(spec_path), "--apply", str(conc["index"])]) == 0
    assert load_spec(spec_path).batch.concurrency == 8


# --------------------------------------------------------------------- unknown stage


def test_unknown_stage_gives_the_advice_for_every_stage_and_asks(arch, catalog):
    spec = load_spec(CHAT)
    reading = read_log(SHARED_80)  # no frames, no context: the stage is unknown
    assert reading.phase.phase == "unknown"
    advice = advise(reading, spec, arch, catalog=catalog)
    assert advice.stage_question and "load" in advice.stage_question
    assert advice.recommendations, "never empty"
    before = estimate(spec, arch).stage_peak_bytes
    for r in advice.recommendations:
        if r.spec_after is None:
            continue
        after = estimate(r.spec_after, arch).stage_peak_bytes
        assert all(after[s] < before[s] for s in before), r.change
    changes = {r.change for r in advice.recommendations}
    # Weights precision lowers load, prefill and decode; the KV cache does not lower load.
    assert "weights bf16 -> nf4" in changes
    assert "KV cache dtype bf16 -> fp8" not in changes
    assert "concurrency 16 -> 8" not in changes
    # Answering the question gives that stage's changes and drops the question.
    answered = advise(override_stage(reading, "generate"), spec, arch, catalog=catalog)
    assert not answered.stage_question
    assert "KV cache dtype bf16 -> fp8" in {r.change for r in answered.recommendations}


def test_cli_unknown_stage_prints_the_question_and_the_option(tmp_path, capsys):
    log = tmp_path / "bare.log"
    log.write_text(SHARED_80)
    assert main(["triage", str(log), "--spec", str(CHAT)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "stage unknown: Which stage was running" in out
    assert "--stage load|generate|train_forward|backward|optimizer_step|other" in out
    assert main(["triage", str(log), "--spec", str(CHAT), "--stage", "load", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["phase"] == "load" and data["stage_question"] is None
    assert "set by hand" in data["phase_evidence"]["reason"]


def test_training_spec_unknown_stage_still_offers_a_larger_card(arch, catalog):
    spec = load_spec(FT)
    reading = read_log(SHARED_80)
    advice = advise(reading, spec, arch, catalog=catalog)
    assert advice.stage_question
    assert advice.recommendations
    before = estimate(spec, arch).stage_peak_bytes
    for r in advice.recommendations:
        if r.spec_after is not None:
            after = estimate(r.spec_after, arch).stage_peak_bytes
            assert all(after[s] < before[s] for s in before), r.change
