"""A KV cache too small for max_model_len, judged from the error in bytes.

Qwen1.5-7B-Chat has no grouped-query attention: 2 (K,V) x 32 KV heads x 128 x 2 B = 16,384 B
per layer per token, x 32 layers = 524,288 B (512 KiB) per token. vLLM v0 said its cache held
7,344 tokens (459 blocks of 16): 7,344 x 524,288 = 3,850,371,072 B; one sequence at 32,768
tokens needs 32,768 x 524,288 = 17,179,869,184 B (16 GiB). The report is real
(tests/triage_corpus/reports/QwenLM__Qwen3__295.toml); the maintainers' fix was
--max-model-len 7200.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from vramtui.catalog import load_catalog
from vramtui.cli import main
from vramtui.ledger import estimate
from vramtui.models.registry import find_model
from vramtui.spec import load_spec
from vramtui.triage.advice import advise
from vramtui.triage.kv_room import kv_room
from vramtui.triage.reader import read_log

REPO = Path(__file__).resolve().parents[1]
QWEN_REPORT = REPO / "tests" / "triage_corpus" / "reports" / "QwenLM__Qwen3__295.toml"
V1_LOG = REPO / "tests" / "triage_logs" / "vllm_v1_kv_needed.log"
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
GIB = 2**30

QWEN_SPEC = """\
schema_version = 1
name = "Qwen1.5 7B Chat, 32k context, vLLM"
[model]
id = "Qwen/Qwen1.5-7B-Chat"
[task]
kind = "inference"
[weights]
format = "bf16"
[lengths]
prompt_tokens = 32000
generated_tokens = 768
[batch]
concurrency = 1
[runtime]
attention = "flash"
kv_cache_dtype = "bf16"
kv_block_tokens = 16
engine = "vllm"
[placement]
gpus = 1
[headroom]
mode = "itemised"
"""


@pytest.fixture()
def qwen(tmp_path):
    path = tmp_path / "qwen.toml"
    path.write_text(QWEN_SPEC)
    text = tomllib.loads(QWEN_REPORT.read_text())["excerpt"]["text"]
    log = tmp_path / "oom.log"
    log.write_text(text)
    return path, log, text


def test_v0_token_counts_become_bytes_at_the_models_kv_per_token(qwen):
    path, _, text = qwen
    spec = load_spec(path)
    arch = find_model("Qwen/Qwen1.5-7B-Chat")
    reading = read_log(text)
    room = kv_room(reading, spec, arch, None, estimate(spec, arch))
    assert (room.need_tokens, room.room_tokens) == (32_768, 7_344)
    assert room.need_bytes == 32_768 * 524_288 == 16 * GIB
    assert room.room_bytes == 7_344 * 524_288 == 3_850_371_072
    assert not room.room_printed
    assert room.short_bytes == 13_329_498_112
    assert "estimated" in room.line() and "7,344" in room.line()


def test_each_change_is_judged_against_the_room_the_engine_had(qwen):
    path, _, text = qwen
    spec = load_spec(path)
    arch = find_model("Qwen/Qwen1.5-7B-Chat")
    advice = advise(read_log(text), spec, arch, catalog=load_catalog(use_user_config=False))
    by_change = {r.change.split(":")[0]: r for r in advice.recommendations}
    shorter = by_change["context 32,768 -> 7,344 tokens (prompt 32,000 -> 6,576)"]
    assert shorter.spec_after.lengths.prompt_tokens == 6_576  # 7,344 - 768 generated
    assert (shorter.error_kv_need_bytes, shorter.error_kv_room_bytes) == (3_850_371_072,) * 2
    assert shorter.fits_error is True
    fp8 = by_change["KV cache dtype bf16 -> fp8"]
    # Half the bytes per token: 8 GiB for 32,768 tokens, still more than the 3.59 GiB room.
    assert fp8.error_kv_need_bytes == 8 * GIB and fp8.error_kv_room_bytes == 3_850_371_072
    assert fp8.fits_error is False and fp8.fits is False
    assert "KV cache of 8.00 GiB" in fp8.why_not_fit
    # Smaller weights leave their bytes to the cache: the room grows by exactly what they free.
    nf4 = by_change["weights bf16 -> nf4"]
    bf16_w = estimate(spec, arch).weights_only_bytes
    nf4_w = estimate(nf4.spec_after, arch).weights_only_bytes
    assert nf4.error_kv_room_bytes == 3_850_371_072 + (bf16_w - nf4_w)
    assert nf4.error_kv_need_bytes == 16 * GIB and nf4.fits_error is False
    assert "short by 12.41 GiB" in advice.deviation  # 13,329,498,112 B / 2^30 = 12.414


def test_v1_prints_the_room_in_bytes(tmp_path):
    spec = load_spec(CHAT)
    arch = find_model("meta-llama/Llama-3.1-8B-Instruct")
    reading = read_log(V1_LOG.read_text())
    room = kv_room(reading, spec, arch, None, estimate(spec, arch))
    # Llama 3.1 8B: 2 x 8 KV heads x 128 x 2 B x 32 layers = 131,072 B per token.
    assert room.room_printed and room.room_bytes == round(9.50 * GIB)
    assert room.need_bytes == 16 * GIB == 131_072 * 131_072
    assert room.room_tokens == 77_824  # "the estimated maximum model length is 77824"
    advice = advise(reading, spec, arch, log_text=V1_LOG.read_text())
    fp8 = next(r for r in advice.recommendations if r.change == "KV cache dtype bf16 -> fp8")
    assert fp8.error_kv_need_bytes == 8 * GIB and fp8.fits_error is True


def test_cli_shows_kv_need_against_room_and_json_keeps_both(qwen, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path, log, _ = qwen
    assert main(["triage", str(log), "--spec", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    first = data["recommendations"][0]
    rows = {r["change"].split(":")[0]: r for r in data["recommendations"]}
    row = rows["context 32,768 -> 7,344 tokens (prompt 32,000 -> 6,576)"]
    assert row["from_error_kv_need_bytes"] == row["from_error_kv_room_bytes"] == 3_850_371_072
    assert row["fits_from_error"] is True
    assert first["variable"] in ("capacity", "cache")
    assert main(["triage", str(log), "--spec", str(path)]) == 0
    out = capsys.readouterr().out
    assert "KV 3.59 GiB of 3.59 GiB room" in " ".join(out.split())


def test_the_catalogue_entry_counts_qwen15_7b_parameters_by_hand():
    """embed 151,936 x 4,096 = 622,329,856, untied lm_head the same; per layer q,k,v,o
    4 x 4,096^2 = 67,108,864 + q/k/v biases 3 x 4,096 + MLP 3 x 4,096 x 11,008 = 135,266,304
    + 2 norms x 4,096 = 202,395,648, x 32 layers; + the final norm 4,096."""
    arch = find_model("Qwen/Qwen1.5-7B-Chat")
    per_layer = 67_108_864 + 12_288 + 135_266_304 + 8_192
    assert per_layer == 202_395_648
    assert arch.param_count == 2 * 622_329_856 + 32 * per_layer + 4_096 == 7_721_324_544
    assert (arch.num_kv_heads, arch.head_dim, arch.num_layers) == (32, 128, 32)


def test_a_kv_error_at_start_up_is_judged_on_the_serving_stages(qwen):
    """The engine raises before serving (the stage reads `load`), but the cache it could not
    fit lives in prefill/decode: those stages are judged, and halving the concurrency is not
    offered (the engine's check is for one sequence)."""
    path, _, text = qwen
    spec = load_spec(path)
    arch = find_model("Qwen/Qwen1.5-7B-Chat")
    reading = read_log(text)
    assert reading.phase.phase == "load"
    advice = advise(reading, spec, arch)
    assert set(advice.stages) == {"prefill", "decode"}
    changes = [r.change for r in advice.recommendations]
    assert "KV cache dtype bf16 -> fp8" in changes
    assert not any(c.startswith("concurrency") for c in changes)
