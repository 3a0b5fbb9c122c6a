"""`vramtui triage --spec SPEC --outcome ...`: record a logged attempt's result headless, as
the app's outcome buttons do; one line for every wrong use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
LOG = REPO / "tests" / "triage_logs" / "pytorch_cuda_current_generate.log"
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"


@pytest.fixture
def spec_path(tmp_path):
    path = tmp_path / "chat.toml"
    shutil.copy(CHAT, path)
    return path


def _apply_change(spec_path: Path, change: str, capsys) -> None:
    assert main(["triage", str(LOG), "--spec", str(spec_path), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)["recommendations"]
    n = [r["index"] for r in recs if r["change"] == change][0]
    assert main(["triage", str(LOG), "--spec", str(spec_path), "--apply", str(n), "--force"]) == 0
    capsys.readouterr()


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_outcome_marks_the_last_attempt_and_saves(spec_path, capsys):
    _apply_change(spec_path, "concurrency 16 -> 8", capsys)
    _apply_change(spec_path, "KV cache dtype bf16 -> fp8", capsys)
    assert [a.outcome for a in load_spec(spec_path).triage] == ["pending", "pending"]
    assert main(["triage", "--spec", str(spec_path), "--outcome", "still-oom"]) == 0
    out = capsys.readouterr().out
    assert "attempt 2 of 2" in out and "still out of memory" in out and "was: pending" in out
    assert [a.outcome for a in load_spec(spec_path).triage] == ["pending", "still out of memory"]
    # --attempt N marks the N-th (1-based), here the first.
    assert main(["triage", "--spec", str(spec_path), "--outcome", "fixed", "--attempt", "1"]) == 0
    capsys.readouterr()
    saved = load_spec(spec_path)
    assert [a.outcome for a in saved.triage] == ["fixed", "still out of memory"]
    # The rest of the spec is untouched: the second change (fp8 KV cache) is still applied.
    assert saved.runtime.kv_cache_dtype == "fp8" and saved.batch.concurrency == 8


def test_outcome_json_and_other_error(spec_path, capsys):
    _apply_change(spec_path, "concurrency 16 -> 8", capsys)
    assert main(["triage", "--spec", str(spec_path), "--outcome", "other-error", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["attempt"] == 1 and data["outcome"] == "other error"
    assert data["previous_outcome"] == "pending" and data["change"] == "concurrency 16 -> 8"
    assert load_spec(spec_path).triage[0].outcome == "other error"


def test_outcome_without_spec_or_attempt_is_one_line(spec_path, capsys):
    assert main(["triage", "--outcome", "fixed"]) == 2
    assert "pass it with --spec" in _one_error_line(capsys)
    before = spec_path.read_bytes()
    assert main(["triage", "--spec", str(spec_path), "--outcome", "fixed"]) == 2
    assert "no triage attempt yet" in _one_error_line(capsys)
    assert spec_path.read_bytes() == before  # nothing written


@pytest.mark.parametrize("n", ["0", "2", "-1", "99999999999999999999"])
def test_outcome_bad_attempt_number_is_one_line(spec_path, capsys, n):
    _apply_change(spec_path, "concurrency 16 -> 8", capsys)
    before = spec_path.read_bytes()
    assert main(["triage", "--spec", str(spec_path), "--outcome", "fixed", "--attempt", n]) == 2
    line = _one_error_line(capsys)
    assert f"--attempt {n}" in line and "logs 1 attempt; choose 1" in line
    assert spec_path.read_bytes() == before


def test_outcome_misuse_is_one_line(spec_path, capsys):
    assert main(["triage", "--spec", str(spec_path), "--attempt", "1"]) == 2
    assert "goes with --outcome" in _one_error_line(capsys)
    assert main(["triage", str(LOG), "--spec", str(spec_path), "--outcome", "fixed"]) == 2
    assert "reads no log" in _one_error_line(capsys)
    args = ["triage", "--spec", str(spec_path), "--outcome", "fixed", "--apply", "1"]
    assert main(args) == 2
    assert "run them separately" in _one_error_line(capsys)
    with pytest.raises(SystemExit):  # argparse: not one of the three outcomes
        main(["triage", "--spec", str(spec_path), "--outcome", "maybe"])
