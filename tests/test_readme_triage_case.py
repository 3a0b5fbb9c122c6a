"""The README's real triage case, run as written: QwenLM/Qwen3#295 read against the Qwen1.5
spec, the context change applied, the outcome recorded. Keeps the README's figures true."""

from __future__ import annotations

import shutil
from pathlib import Path

from vramtui.cli import main
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "sample_specs" / "qwen1.5-7b-chat-32k-vllm.toml"
LOG = REPO / "sample_specs" / "logs" / "qwen1.5-7b-vllm-kv-too-small.log"


def test_the_readme_case_runs_as_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    readme = " ".join((REPO / "README.md").read_text().split())
    assert main(["triage", str(LOG), "--spec", str(SPEC)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for quoted in (
        "short by 12.41 GiB",
        "max_model_len 7,344 or less fits as the card is",
        "KV 3.59 GiB of 3.59 GiB room",
        "KV 8.00 GiB of 3.59 GiB room",
        "stage: load",
    ):
        assert quoted in out, quoted
        assert quoted.replace(" room", "") in readme.replace(" room", ""), quoted
    mine = tmp_path / "my-qwen.toml"
    shutil.copy(SPEC, mine)
    assert main(["triage", str(LOG), "--spec", str(mine), "--apply", "2"]) == 0
    assert main(["triage", "--spec", str(mine), "--outcome", "fixed"]) == 0
    spec = load_spec(mine)
    assert spec.lengths.prompt_tokens == 6_576 and spec.lengths.generated_tokens == 768
    assert [(a.variable, a.outcome) for a in spec.triage] == [("cache", "fixed")]
    before, after = SPEC.read_text().splitlines(), mine.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    assert changed == [("prompt_tokens = 32000", "prompt_tokens = 6576")]
    assert after[: len(before)][0].startswith("# A real case")  # the comments survive
