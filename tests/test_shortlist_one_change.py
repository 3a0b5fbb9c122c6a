"""`vramtui shortlist --allow-one-change`: offers that fit after one change that keeps the
requirements are ranked by price with the offers that fit as they are, the change named."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from vramtui.catalog import Catalog, Plan, load_catalog
from vramtui.cli import _spec_and_estimate, build_parser, main
from vramtui.ledger import estimate
from vramtui.shortlist import FIT, shortlist
from vramtui.shortlist_one_change import rank_with_one_change
from vramtui.triage.single_change import edit_spec

ROOT = Path(__file__).resolve().parents[1]
CHAT = str(ROOT / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml")


def _chat():
    return _spec_and_estimate(build_parser().parse_args(["estimate", CHAT]))


def _daily(offer, price: float):
    return replace(offer, plans=(Plan("1-day", "daily", 24, price, "USD"),))


def _two_offers():
    """An L40S at 20 USD a day and an A100 80 GB at 30 USD a day."""
    cat = load_catalog(None, use_user_config=False)
    l40s = _daily(cat.offers["sample-b-l40s-x1"], 20.0)
    a100 = _daily(cat.offers["sample-b-a100-80gb-pcie-x1"], 30.0)
    return Catalog(cat.gpus, {l40s.id: l40s, a100.id: a100})


def _fits(spec, arch, catalog, offer_id) -> bool:
    sl = shortlist(spec, estimate(spec, arch), catalog, arch=arch, days=1)
    return any(c.offer.id == offer_id and c.status == FIT for c in sl.candidates)


def test_l40s_with_an_fp8_kv_cache_beats_the_a100_as_is_on_price():
    spec, arch, _ = _chat()
    catalog = _two_offers()
    # The concurrency at which the L40S no longer holds the bf16 cache but holds it in fp8.
    for c in range(16, 200):
        s = edit_spec(spec, {"batch.concurrency": c})
        if not _fits(s, arch, catalog, "sample-b-l40s-x1"):
            break
    assert _fits(s, arch, catalog, "sample-b-a100-80gb-pcie-x1")
    assert _fits(edit_spec(s, {"runtime.kv_cache_dtype": "fp8"}), arch, catalog, "sample-b-l40s-x1")
    est = estimate(s, arch)
    sl = shortlist(s, est, catalog, arch=arch, days=1)
    assert [c.offer.id for c in sl.with_status(FIT)] == ["sample-b-a100-80gb-pcie-x1"]
    ranking = rank_with_one_change(s, sl, catalog, arch=arch, days=1)
    first, second = ranking.rows
    assert first.candidate.offer.id == "sample-b-l40s-x1" and first.rank == 1
    assert not first.as_is and first.change == "KV cache bf16 -> fp8"
    assert first.edits == {"runtime.kv_cache_dtype": "fp8"}
    assert "quality" in first.cost
    assert second.candidate.offer.id == "sample-b-a100-80gb-pcie-x1" and second.as_is
    # dearer L40S: the A100 as it is ranks first
    pricey = Catalog(
        catalog.gpus,
        {**catalog.offers, "sample-b-l40s-x1": _daily(catalog.offers["sample-b-l40s-x1"], 40.0)},
    )
    sl = shortlist(s, est, pricey, arch=arch, days=1)
    ranking = rank_with_one_change(s, sl, pricey, arch=arch, days=1)
    assert [r.as_is for r in ranking.rows] == [True, False]


def test_built_in_catalogue_ranking_keeps_the_as_is_order_and_sorts_by_price():
    spec, arch, est = _chat()
    catalog = load_catalog(None, use_user_config=False)
    sl = shortlist(spec, est, catalog, arch=arch)
    ranking = rank_with_one_change(spec, sl, catalog, arch=arch)
    as_is = [r.candidate.offer.id for r in ranking.rows if r.as_is]
    assert as_is == [c.offer.id for c in sl.with_status(FIT)]
    costs = [r.candidate.cost.total for r in ranking.rows]
    assert costs == sorted(costs)
    assert [r.rank for r in ranking.rows] == list(range(1, len(ranking.rows) + 1))
    changed = [r for r in ranking.rows if not r.as_is]
    assert changed, "no offer fits after one change"
    fit_before = {c.offer.id for c in sl.with_status(FIT)}
    for r in changed:
        assert r.candidate.offer.id not in fit_before
        # never a change that gives up length or concurrency
        assert not r.change.startswith(("concurrency", "context"))


def test_cli_marks_one_change_rows(capsys):
    assert main(["shortlist", CHAT, "--allow-one-change"]) == 0
    out = capsys.readouterr().out
    assert "one change:" in out and "as is" in out
    assert main(["shortlist", CHAT, "--allow-one-change", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["one_change"]["ranked"]
    assert any(not r["as_is"] and r["change"] for r in rows)
    assert main(["shortlist", CHAT, "--json"]) == 0
    assert "one_change" not in json.loads(capsys.readouterr().out)
