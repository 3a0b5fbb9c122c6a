"""Bounds on every user-controlled size, and work that does not grow with them.

Regression tests: per-GPU figures grouped by pipeline stage (no quadratic report), campaign
costs in closed form, triage continuation gathering linear in the log, config.json values
typed and ranged, and overflows (huge or non-finite floats) as one-line errors.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from vramtui import limits
from vramtui.catalog import Plan
from vramtui.cli import main
from vramtui.errors import ModelError, SpecError
from vramtui.feed.record import Recorder, replay
from vramtui.feed.sample import Snapshot
from vramtui.ledger import estimate
from vramtui.ledger.items import GpuLayout, LedgerItem
from vramtui.ledger.report import estimate_to_dict
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.models.registry import find_model
from vramtui.render import totals_table
from vramtui.spec import loads_spec, spec_to_dict
from vramtui.spec_fields import FIELDS, FieldError, parse_text

REPO = Path(__file__).resolve().parent.parent
LLAMA_SPEC = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"


def _llama(gpus: int, tp: int = 1, pp: int = 1):
    text = LLAMA_SPEC.read_text()
    spec = loads_spec(text)
    d = spec_to_dict(spec)
    d["placement"] = {"gpus": gpus, "tensor_parallel": tp, "pipeline_parallel": pp}
    from vramtui.spec import spec_from_dict

    spec = spec_from_dict(d)
    arch = find_model(spec.model.id)
    return spec, estimate(spec, arch)


def _error(fn) -> str:
    with pytest.raises((SpecError, ModelError, FieldError)) as info:
        fn()
    msg = str(info.value)
    assert "\n" not in msg
    return msg


# --------------------------------------------------------------------------- placement


def test_gpus_at_each_pipeline_stage_by_hand():
    # 16 GPUs, TP 2, PP 4: DP 2; stage p holds GPUs 2p, 2p+1, 8+2p, 9+2p -> 4 each.
    layout = GpuLayout(16, 2, 4)
    assert [layout.gpus_at_rank(p) for p in range(4)] == [4, 4, 4, 4]
    assert [layout.pp_rank(g) for g in (0, 1, 2, 7, 8, 9, 15)] == [0, 0, 1, 3, 0, 0, 3]
    assert layout.group((1, 2)).gpus == 8
    assert layout.group((1, 2)).label == "8 GPUs of pipeline stages 1-2"
    # One replica (8 GPUs, TP 2, PP 4): stage p is GPUs 2p..2p+1.
    one = GpuLayout(8, 2, 4)
    assert one.group((0,)).label == "GPUs 0-1"
    assert one.group((1, 2)).label == "GPUs 2-5"
    assert one.group((0, 3)).label == "GPUs 0-1, 6-7"
    assert GpuLayout(100_000).group((0,)).label == "all 100,000 GPUs"


def test_grouped_figures_equal_the_per_gpu_ones():
    _, est = _llama(16, tp=2, pp=4)
    assert sum(g.gpus for g in est.gpu_groups) == 16
    for stage in est.stages:
        per_gpu = est.stage_gpu_bytes(stage)
        per_rank = est.stage_rank_bytes(stage)
        assert len(per_gpu) == 16 and len(per_rank) == 4
        assert all(per_gpu[g] == per_rank[(g // 2) % 4] for g in range(16))
        # Summed item by item, GPU by GPU: the same totals.
        for g in (0, 5, 15):
            assert per_gpu[g] == sum(
                i.gpu_bytes_at(stage, est.layout)[g] for i in est.known_items if stage in i.stages
            )
    # The embedding lives on the first stage only: stage 0 and the last differ from the middle.
    assert len(est.gpu_groups) >= 2


def test_per_gpu_work_does_not_grow_with_the_gpu_count(monkeypatch):
    calls = {"n": 0}
    real = LedgerItem.rank_distribution_bytes

    def counting(self, total, layout):
        calls["n"] += 1
        return real(self, total, layout)

    monkeypatch.setattr(LedgerItem, "rank_distribution_bytes", counting)
    counts = {}
    for gpus in (8, 100_000):
        calls["n"] = 0
        _, est = _llama(gpus)
        data = estimate_to_dict(est)
        totals_table(est)
        counts[gpus] = calls["n"]
        assert data["gpu_groups"] == [
            {"label": f"all {gpus:,} GPUs", "gpus": gpus, "pipeline_stages": [0]}
        ]
        assert all(
            len(i["per_gpu_group_max_bytes"]) == 1
            for i in data["items"]
            if i["per_gpu_group_max_bytes"] is not None
        )
    assert counts[100_000] == counts[8]


def test_gpu_counts_above_the_limit_are_refused():
    text = LLAMA_SPEC.read_text()
    msg = _error(lambda: loads_spec(text.replace("gpus = 1", "gpus = 100001")))
    assert "placement.gpus" in msg and "100,000" in msg
    msg = _error(lambda: loads_spec(text.replace("gpus = 1", "gpus = 1\ntensor_parallel = 200000")))
    assert "placement.tensor_parallel" in msg and "100,000" in msg


def test_gpus_flag_above_the_limit_is_one_line(capsys):
    assert main(["estimate", str(LLAMA_SPEC), "--gpus", "100001"]) == 2
    err = capsys.readouterr().err
    assert "placement.gpus" in err and "100,000" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- campaign


HOURLY = Plan("hour", "hourly", 1, 1.0, "USD")
DAILY = Plan("day", "daily", 24, 20.0, "USD")
WEEKLY = Plan("week", "multi_day", 168, 100.0, "USD")
MONTHLY = Plan("month", "multi_day", 720, 400.0, "USD")


def _reference_cover(plans, hours: int) -> float:
    """The cheapest cover by a plain table over every hour (the definition)."""
    best = [0.0] + [math.inf] * hours
    for h in range(1, hours + 1):
        best[h] = min(best[max(0, h - math.ceil(p.hours))] + p.price for p in plans)
    return best[hours]


def test_ten_year_campaign_cost_by_hand():
    from vramtui.campaign_cost import cheapest_cover

    # 3,650 days = 521 weeks + 3 days; 3 days cost 60 (3 x day) < 100 (a week).
    c = cheapest_cover((HOURLY, DAILY, WEEKLY), 3_650 * 24)
    assert c.total == 521 * 100 + 60
    assert dict(c.purchases) == {"week": 521, "day": 3}
    # 30 days 5 h with a month plan (400 < 30 x 20 = 600): 1 month... covers 720 h = 30 days;
    # 5 more hours at 1/h.
    c = cheapest_cover((HOURLY, DAILY, WEEKLY, MONTHLY), 725)
    assert c.total == 405.0 and dict(c.purchases) == {"hour": 5, "month": 1}


@pytest.mark.parametrize("table", [False, True])
def test_closed_form_cover_equals_the_hour_by_hour_table(monkeypatch, table):
    import vramtui.campaign_cost as sl

    if table:  # force the bounded-table path instead of the enumeration
        monkeypatch.setattr(sl, "_MAX_COMBINATIONS", 0)
    odd = Plan("odd", "multi_day", 50, 41.0, "USD")
    sets = [
        (HOURLY, DAILY, WEEKLY),
        (HOURLY, DAILY, WEEKLY, MONTHLY),
        (DAILY, odd),
        (HOURLY, odd, MONTHLY),
        (Plan("h", "hourly", 1, 2.0, "USD"), Plan("d", "daily", 24, 48.0, "USD")),  # ties
    ]
    for plans in sets:
        for hours in (1, 5, 23, 24, 25, 167, 169, 719, 721, 1_000, 2_017, 5_000):
            got = sl.cheapest_cover.__wrapped__(plans, hours)
            assert got.total == round(_reference_cover(plans, hours), 2), (plans, hours)
            assert got.covered_hours >= hours if hasattr(got, "covered_hours") else True


def test_cover_work_does_not_grow_with_days(monkeypatch):
    import vramtui.campaign_cost as sl

    monkeypatch.setattr(sl, "_MAX_COMBINATIONS", 0)
    seen = []
    real = sl._cover_table

    def spy(plans, steps, hours):
        seen.append(hours)
        return real(plans, steps, hours)

    monkeypatch.setattr(sl, "_cover_table", spy)
    sl.cheapest_cover.__wrapped__((HOURLY, DAILY, WEEKLY), 3_650 * 24)
    # spare = 23 x 1 (hours < a day) + 6 x 24 (days < a week) + 2 weeks: the table never
    # reaches the campaign's 87,600 hours.
    assert seen and max(seen) <= 23 + 6 * 24 + 2 * 168


def test_days_above_the_limit_are_refused(capsys):
    text = LLAMA_SPEC.read_text()
    for days in ("3651", "1e6", "inf", "nan"):
        msg = _error(lambda d=days: loads_spec(text + f"\n[campaign]\ndays = {d}\n"))
        assert "campaign.days" in msg
    assert "3,650" in _error(lambda: loads_spec(text + "\n[campaign]\ndays = 3651\n"))
    assert main(["shortlist", str(LLAMA_SPEC), "--days", "9999"]) == 2
    err = capsys.readouterr().err
    assert "--days" in err and "3,650" in err
    from vramtui.catalog import load_catalog
    from vramtui.shortlist import shortlist

    spec, est = _llama(1)
    catalog = load_catalog(use_user_config=False)
    assert "3,650" in _error(lambda: shortlist(spec, est, catalog, days=1e6))


# ------------------------------------------------------------------------------ triage


def _joined_chars(monkeypatch, text: str) -> int:
    from vramtui.triage import reader

    total = {"n": 0}
    real = reader._Reader._best_join

    def spy(self, pieces, form, terminal_wrap):
        total["n"] += sum(len(p) for p in pieces)
        return real(self, pieces, form, terminal_wrap)

    monkeypatch.setattr(reader._Reader, "_best_join", spy)
    result = reader.read_log(text)
    assert result.is_oom
    assert result.primary.figures["tried_to_allocate_bytes"] == 2 * 2**30
    return total["n"]


@pytest.mark.parametrize("line", ["CUDA out of memory. Tried to allocate 2.00 GiB"])
def test_repeated_oom_lines_without_end_marker_are_read_in_linear_work(monkeypatch, line):
    # Before: every line re-joined up to 40 following lines at every length (~800x the log).
    for n in (500, 2_000):
        text = "\n".join([line] * n)
        assert _joined_chars(monkeypatch, text) <= len(text)


def test_continuation_lines_are_not_gathered_again(monkeypatch):
    # One message, then 2,000 lines that each look like its continuation: gathered once.
    text = "\n".join(["CUDA out of memory."] + ["Tried to allocate 2.00 GiB"] * 2_000)
    assert _joined_chars(monkeypatch, text) <= len(text) // 2


# ------------------------------------------------------------------------- config.json


BASE_CONFIG = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 100,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [
        ("num_hidden_layers", 2**63, "10,000"),
        ("num_hidden_layers", 10_001, "10,000"),
        ("num_key_value_heads", "x", "must be an integer"),
        ("head_dim", 1e23, "must be an integer"),
        ("hidden_size", 64.5, "must be an integer"),
        ("hidden_size", -64, "at least 1"),
        ("num_attention_heads", True, "must be an integer"),
        ("vocab_size", 10**12, "100,000,000"),
        ("intermediate_size", None, "lacks required key"),
        ("sliding_window", "4096", "must be an integer"),
        ("max_position_embeddings", float("inf"), "must be an integer"),
        ("layer_types", 7, "layer_types"),
    ],
)
def test_config_values_are_typed_and_ranged(key, value, expect):
    config = {**BASE_CONFIG, key: value}
    msg = _error(lambda: architecture_from_hf_config(config, "acme/x", "/models/x/config.json"))
    assert key in msg and expect in msg and "/models/x/config.json" in msg


def test_config_moe_values_are_checked():
    config = {**BASE_CONFIG, "model_type": "mixtral", "num_local_experts": 10**9}
    config["num_experts_per_tok"] = 2
    msg = _error(lambda: architecture_from_hf_config(config, "acme/x", "c.json"))
    assert "num_local_experts" in msg and "100,000" in msg
    config = {**BASE_CONFIG, "model_type": "mixtral", "num_local_experts": 8}
    config["num_experts_per_tok"] = "two"
    assert "num_experts_per_tok" in _error(
        lambda: architecture_from_hf_config(config, "acme/x", "c.json")
    )
    config = {**BASE_CONFIG, "model_type": "qwen3_moe", "num_experts": 8}
    config.update(num_experts_per_tok=2, moe_intermediate_size=32, mlp_only_layers="0")
    assert "mlp_only_layers" in _error(
        lambda: architecture_from_hf_config(config, "acme/x", "c.json")
    )


def test_config_whole_floats_are_read_as_integers():
    arch = architecture_from_hf_config({**BASE_CONFIG, "hidden_size": 64.0}, "acme/x", "c")
    assert arch.hidden_size == 64 and isinstance(arch.hidden_size, int)
    assert arch.num_kv_heads == 2 and arch.head_dim == 16  # 64 / 4 heads


def test_local_config_with_huge_layer_count_is_one_line(tmp_path, capsys):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**BASE_CONFIG, "num_hidden_layers": 2**63}))
    assert main(["estimate", "--model", str(model)]) == 2
    err = capsys.readouterr().err
    assert "num_hidden_layers" in err and "10,000" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- overflow


@pytest.mark.parametrize(
    ("flags", "expect"),
    [
        (["--params", "7e9", "--bits", "16", "--headroom-gib", "1e300"], "--headroom-gib"),
        (["--params", "1e307", "--bits", "16", "--headroom-gib", "6"], "--params"),
        (["--params", "7e9", "--bits", "1e300", "--headroom-gib", "6"], "--bits"),
        (["--params", "7e9", "--bits", "16", "--headroom-gib", "inf"], "finite"),
        (["--params", "nan", "--bits", "16", "--headroom-gib", "6"], "finite"),
    ],
)
def test_simple_mode_overflows_are_one_line(capsys, flags, expect):
    assert main(["estimate", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert expect in err and "\n" not in err and "Traceback" not in err


def test_simple_mode_limit_is_named(capsys):
    assert main(["estimate", "--params", "7e9", "--bits", "16", "--headroom-gib", "1e300"]) == 2
    assert f"{limits.MAX_GIB:,}" in capsys.readouterr().err


def test_spec_sizes_above_their_limits_are_refused():
    text = LLAMA_SPEC.read_text()
    spec = loads_spec(text)
    cases = {
        ("model", "params"): (1e307, "1,000,000,000,000,000"),
        ("lengths", "prompt_tokens"): (10_000_001, "10,000,000"),
        ("lengths", "generated_tokens"): (10**30, "10,000,000"),
        ("batch", "concurrency"): (1_000_001, "1,000,000"),
        ("runtime", "kv_block_tokens"): (10**9, "1,000,000"),
    }
    from vramtui.spec import spec_from_dict

    for (table, key), (value, limit) in cases.items():
        d = spec_to_dict(spec)
        if table == "model":
            d["model"] = {}  # a bare parameter count replaces the model id
        d[table][key] = value
        msg = _error(lambda d=d: spec_from_dict(d))
        assert f"{table}.{key}" in msg and limit in msg, msg


FIELDS_BY_PATH = {f.path: f for f in FIELDS}


@pytest.mark.parametrize(
    ("path", "text", "expect"),
    [
        ("placement.gpus", "100001", "100,000"),
        ("placement.gpus", "9" * 5_000, "5000-digit"),
        ("model", "inf", "cannot read"),
        ("model", "1e307", "1,000,000,000,000,000"),
        ("campaign.days", "1e6", "3,650"),
        ("campaign.days", "nan", "cannot read"),
        ("headroom.reserve_gib", "1e300", "1,073,741,824"),
        ("headroom.cuda_context_bytes", "1e300 TiB", "cannot read"),
        ("lengths.seq_len", "10000001", "10,000,000"),
    ],
)
def test_form_fields_refuse_overflows_naming_the_limit(path, text, expect):
    assert expect in _error(lambda: parse_text(FIELDS_BY_PATH[path], text))


def test_form_fields_accept_values_at_the_limit():
    assert parse_text(FIELDS_BY_PATH["placement.gpus"], "100,000") == 100_000
    assert parse_text(FIELDS_BY_PATH["campaign.days"], "3650") == 3650.0


def test_replay_clamps_a_huge_gap(tmp_path):
    path = tmp_path / "feed.jsonl"
    with Recorder(path) as rec:
        for t in (0.0, 1e300, 1e300 + 5.0, 1.7e308):
            rec.write(Snapshot("box", t, (), None, error="no driver"))
    delays = [d for d, _ in replay(path)]
    assert delays == [0.0, limits.MAX_REPLAY_GAP_S, 0.0, limits.MAX_REPLAY_GAP_S]
    # 1e300 + 5 == 1e300 in floating point: the 5 s vanish, the gap is 0 (not negative).
    assert [d for d, _ in replay(path, speed=1e-300)][1] == limits.MAX_REPLAY_GAP_S


@pytest.mark.parametrize("value", ["1e300", "inf", "nan"])
def test_watch_intervals_are_bounded(value):
    from vramtui.feed.poller import check_interval
    from vramtui.feed.sample import FeedError

    with pytest.raises(FeedError) as info:
        check_interval(float(value), "--interval")
    assert "--interval" in str(info.value)
