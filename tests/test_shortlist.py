"""The shortlist: classification per requirement, cost, ranking; values worked by hand."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from vramtui.builtin_specs import SEED_EXAMPLE_TOML
from vramtui.catalog import Catalog, Plan, load_catalog, parse_offer
from vramtui.cli import main
from vramtui.ledger import estimate
from vramtui.models.registry import find_model
from vramtui.shortlist import (
    EXCLUDED,
    FIT,
    VERIFY,
    cheapest_cover,
    shortlist,
)
from vramtui.spec import loads_spec

GIB = 2**30
TODAY = datetime.date(2026, 12, 2)


def _offer(tmp_path: Path, oid: str, body: str, gpus) -> object:
    path = tmp_path / f"{oid}.toml"
    path.write_text(f'id = "{oid}"\n' + body)
    import tomllib

    return parse_offer(tomllib.loads(path.read_text()), path, gpus)


def _plain_offer(
    gpu: str, count: int, hourly: float, *, ram=256, disk=2000, link=None, lead=1, extra=""
) -> str:
    link_line = f'interconnect = "{link}"' if link else ""
    return f"""
provider = "test"
title = "{count} x {gpu}"
gpu = "{gpu}"
gpu_count = {count}
{link_line}
host_ram_gb = {ram}
disk_gb = {disk}
{extra}
[[plans]]
name = "hour"
kind = "hourly"
hours = 1
price = {hourly}
currency = "USD"
[schedule]
lead_time_hours = {lead}
[[evidence]]
claim = "test offer"
source = "test"
version = "1"
scope = "test"
"""


def _spec(body: str):
    return loads_spec(body)


def _llama8b_inference(extra: str = "", gpus: int = 1, tp: int = 1, fmt: str = "bf16") -> str:
    return f"""
schema_version = 1
[model]
id = "meta-llama/Llama-3.1-8B-Instruct"
[task]
kind = "inference"
[weights]
format = "{fmt}"
[lengths]
prompt_tokens = 4096
generated_tokens = 0
[batch]
concurrency = 1
[runtime]
attention = "sdpa"
kv_cache_dtype = "bf16"
[placement]
gpus = {gpus}
tensor_parallel = {tp}
[headroom]
mode = "itemised"
{extra}
"""


@pytest.fixture(scope="module")
def builtin():
    return load_catalog(use_user_config=False)


# --------------------------------------------------------------------------------- cost


def test_cheapest_cover_by_hand():
    hourly = Plan("hour", "hourly", 1, 1.0, "USD")
    daily = Plan("day", "daily", 24, 20.0, "USD")
    weekly = Plan("week", "multi_day", 168, 100.0, "USD")
    plans = (hourly, daily, weekly)
    # 3 days: 3 x day = 60 < 72 x hour = 72 < week = 100
    assert cheapest_cover(plans, 72).total == 60.0
    # 30 h: 1 day + 6 hours = 26 < 2 days = 40
    c = cheapest_cover(plans, 30)
    assert c.total == 26.0 and dict(c.purchases) == {"hour": 6, "day": 1}
    # 6 days: one week (100) beats 6 x day (120)
    assert cheapest_cover(plans, 144).total == 100.0
    # 8 days: week + day = 120 < 2 weeks = 200 < 8 days = 160
    assert cheapest_cover(plans, 192).total == 120.0


# --------------------------------------------------------------------------------- seed


def test_seed_shortlist_lists_both_seed_offers_with_their_prices(builtin):
    spec = loads_spec(SEED_EXAMPLE_TOML)
    est = estimate(spec)
    sl = shortlist(spec, est, builtin, days=3, today=TODAY)
    by_id = {c.offer.id: c for c in sl.candidates}
    c4090, c6000 = by_id["seed-rtx-4090-x1"], by_id["seed-rtx-6000-ada-x1"]
    assert (c4090.cost.total, c4090.cost.currency) == (47.14, "USD")
    assert (c6000.cost.total, c6000.cost.currency) == (55.71, "USD")
    # 14e9 B + 6 GiB = 19.04 GiB fits under both cards' allocatable totals.
    for c in (c4090, c6000):
        mem = {r.key: r for r in c.requirements}["memory"]
        assert mem.status in (FIT, VERIFY)
        assert c.peak_gpu_bytes == 14_000_000_000 + 6 * GIB
        # The seed page documents card and price only: host RAM and disk stay to verify.
        reqs = {r.key: r for r in c.requirements}
        assert reqs["host_ram"].status == VERIFY and "not documented" in reqs["host_ram"].condition
        assert reqs["disk"].status == VERIFY
        assert c.status == VERIFY and c.rank is None


def test_seed_cli_json(capsys):
    assert main(["shortlist", "--days", "3", "--json", "--today", "2026-12-02"]) == 0
    data = json.loads(capsys.readouterr().out)
    cands = {c["offer"]: c for c in data["candidates"]}
    assert cands["seed-rtx-4090-x1"]["total_cost"] == 47.14
    assert cands["seed-rtx-6000-ada-x1"]["total_cost"] == 55.71
    for c in data["candidates"]:
        assert c["status"] in (FIT, VERIFY, EXCLUDED)
        assert {"total_cost", "currency", "effective_margin_bytes", "rank"} <= set(c)
        for r in c["requirements"]:
            assert r["status"] in (FIT, VERIFY, EXCLUDED) and isinstance(r["evidence"], list)
        assert (c["rank"] is not None) == (c["status"] == FIT)
    ranks = [c["rank"] for c in data["candidates"] if c["rank"] is not None]
    assert ranks == list(range(1, len(ranks) + 1))


# ------------------------------------------------------------------------------ ranking


def test_ranking_by_cost_then_margin_then_lead_time(tmp_path, builtin):
    gpus = builtin.gpus
    offers = {
        "a": _offer(tmp_path, "a", _plain_offer("rtx-4090", 1, 1.00), gpus),
        "b": _offer(tmp_path, "b", _plain_offer("rtx-4090", 1, 0.50, lead=5), gpus),
        "c": _offer(tmp_path, "c", _plain_offer("h100-nvl", 1, 0.50, lead=9), gpus),
        "d": _offer(tmp_path, "d", _plain_offer("rtx-4090", 1, 0.50, lead=2), gpus),
    }
    catalog = Catalog(gpus=gpus, offers=offers)
    spec = _spec(_llama8b_inference())
    arch = find_model("meta-llama/Llama-3.1-8B-Instruct")
    sl = shortlist(spec, estimate(spec, arch), catalog, arch=arch, days=2, today=TODAY)
    assert all(c.status == FIT for c in sl.candidates), [
        (c.offer.id, [(r.key, r.status, r.condition) for r in c.requirements])
        for c in sl.candidates
    ]
    # 2 days = 48 h: a costs 48.00, b/c/d 24.00. Among 24.00: the H100 NVL (c) has the larger
    # margin; b and d have the same card, so the shorter lead time (d, 2 h) ranks first.
    assert [c.offer.id for c in sl.candidates] == ["c", "d", "b", "a"]
    assert [c.cost.total for c in sl.candidates] == [24.0, 24.0, 24.0, 48.0]
    assert [c.rank for c in sl.candidates] == [1, 2, 3, 4]
    c = sl.candidates[0]
    assert c.effective_margin_bytes == c.usable_bytes - c.peak_gpu_bytes


# ----------------------------------------------------------------------- exclusion rules


def test_70b_bf16_on_one_24gb_card_is_excluded_for_memory(builtin):
    spec = _spec(_llama8b_inference().replace("Llama-3.1-8B", "Llama-3.1-70B"))
    arch = find_model("meta-llama/Llama-3.1-70B-Instruct")
    sl = shortlist(spec, estimate(spec, arch), builtin, arch=arch, days=1, today=TODAY)
    c = {c.offer.id: c for c in sl.candidates}["seed-rtx-4090-x1"]
    assert c.status == EXCLUDED
    assert [r.key for r in c.failing] == ["memory"]
    # 70,553,706,496 parameters x 2 B alone are 131.4 GiB > the card's 23.6 GiB.
    assert c.peak_gpu_bytes > 70_553_706_496 * 2


def test_two_cards_without_placement_are_not_one_memory(tmp_path, builtin):
    gpus = builtin.gpus
    offers = {"pair": _offer(tmp_path, "pair", _plain_offer("rtx-4090", 2, 1.0, link="pcie"), gpus)}
    catalog = Catalog(gpus=gpus, offers=offers)
    # Llama-3.1-8B in bf16 (about 15 GiB of weights) with a 32k context x 1: over 24 GB.
    body = _llama8b_inference().replace("prompt_tokens = 4096", "prompt_tokens = 65536")
    arch = find_model("meta-llama/Llama-3.1-8B-Instruct")
    spec = _spec(body)
    sl = shortlist(spec, estimate(spec, arch), catalog, arch=arch, days=1, today=TODAY)
    c = sl.candidates[0]
    mem = {r.key: r for r in c.requirements}["memory"]
    assert c.status == EXCLUDED and mem.status == EXCLUDED
    assert "2 separate memories" in mem.detail
    # The same workload with tensor parallelism over both cards: memory is judged per GPU.
    spec_tp = _spec(
        body.replace("gpus = 1", "gpus = 2").replace("tensor_parallel = 1", "tensor_parallel = 2")
    )
    sl_tp = shortlist(spec_tp, estimate(spec_tp, arch), catalog, arch=arch, days=1, today=TODAY)
    reqs = {r.key: r for r in sl_tp.candidates[0].requirements}
    assert reqs["memory"].status != EXCLUDED
    assert reqs["placement"].status == VERIFY  # tensor parallel across PCIe
    assert "PCIe" in reqs["placement"].condition


def test_fp8_on_ampere_is_excluded_for_the_format(tmp_path, builtin):
    gpus = builtin.gpus
    offers = {
        "ampere": _offer(tmp_path, "ampere", _plain_offer("a100-80gb-sxm", 1, 1.0), gpus),
        "hopper": _offer(tmp_path, "hopper", _plain_offer("h100-nvl", 1, 2.0), gpus),
    }
    catalog = Catalog(gpus=gpus, offers=offers)
    spec = _spec(_llama8b_inference(fmt="fp8"))
    arch = find_model("meta-llama/Llama-3.1-8B-Instruct")
    sl = shortlist(spec, estimate(spec, arch), catalog, arch=arch, days=1, today=TODAY)
    by_id = {c.offer.id: c for c in sl.candidates}
    fmt = {r.key: r for r in by_id["ampere"].requirements}["format"]
    assert by_id["ampere"].status == EXCLUDED and fmt.status == EXCLUDED
    assert "fp8" in fmt.detail
    assert {r.key: r for r in by_id["hopper"].requirements}["format"].status == FIT


def test_a_preference_cannot_rescue_an_excluded_candidate(tmp_path, builtin):
    gpus = builtin.gpus
    image = '[software]\nimage = "pytorch-2.5-cuda-12.4"\ncuda = "12.4"\ndriver = "550"\n'
    offers = {
        # Matches the preferred image, but a T4 (16 GB) cannot hold the workload.
        "preferred": _offer(tmp_path, "preferred", _plain_offer("t4", 1, 0.1, extra=image), gpus),
        "plain": _offer(tmp_path, "plain", _plain_offer("h100-nvl", 1, 2.0), gpus),
    }
    catalog = Catalog(gpus=gpus, offers=offers)
    extra = '[campaign.software]\nimage = "pytorch-2.5"\ncuda = "12.1"\n'
    spec = _spec(_llama8b_inference(extra=extra))
    arch = find_model("meta-llama/Llama-3.1-8B-Instruct")
    sl = shortlist(spec, estimate(spec, arch), catalog, arch=arch, days=1, today=TODAY)
    by_id = {c.offer.id: c for c in sl.candidates}
    preferred = by_id["preferred"]
    assert preferred.status == EXCLUDED and preferred.rank is None
    assert all(p.met for p in preferred.preferences)
    assert by_id["plain"].rank == 1
    assert [p.met for p in by_id["plain"].preferences] == [None, None]


def test_budget_schedule_and_currency(tmp_path, builtin):
    gpus = builtin.gpus
    later = "[schedule]\nlead_time_hours = 1\navailable_from = 2026-12-20\n"
    eur = _plain_offer("h100-nvl", 1, 1.0).replace('currency = "USD"', 'currency = "EUR"')
    offers = {
        "cheap": _offer(tmp_path, "cheap", _plain_offer("h100-nvl", 1, 1.0), gpus),
        "dear": _offer(tmp_path, "dear", _plain_offer("h100-nvl", 1, 3.0), gpus),
        "late": _offer(
            tmp_path,
            "late",
            _plain_offer("h100-nvl", 1, 1.0).replace("[schedule]\nlead_time_hours = 1\n", later),
            gpus,
        ),
        "eur": _offer(tmp_path, "eur", eur, gpus),
    }
    catalog = Catalog(gpus=gpus, offers=offers)
    extra = '[campaign]\ndays = 2\nbudget = 100.0\ncurrency = "USD"\nstart_by = 2026-12-10\n'
    spec = _spec(_llama8b_inference(extra=extra))
    arch = find_model("meta-llama/Llama-3.1-8B-Instruct")
    sl = shortlist(spec, estimate(spec, arch), catalog, arch=arch, today=TODAY)
    assert sl.days == 2.0
    by_id = {c.offer.id: {r.key: r for r in c.requirements} for c in sl.candidates}
    assert by_id["cheap"]["budget"].status == FIT  # 48 h x 1.00 = 48.00 <= 100
    assert by_id["dear"]["budget"].status == EXCLUDED  # 48 h x 3.00 = 144.00 > 100
    assert by_id["late"]["schedule"].status == EXCLUDED  # available from 12-20 > 12-10
    assert by_id["eur"]["budget"].status == VERIFY and "EUR" in by_id["eur"]["budget"].detail
    statuses = {c.offer.id: c.status for c in sl.candidates}
    assert statuses == {"cheap": FIT, "dear": EXCLUDED, "late": EXCLUDED, "eur": VERIFY}


# ---------------------------------------------------------------------------- catalogue


def test_every_builtin_entry_validates(builtin):
    assert len(builtin.gpus) >= 45 and len(builtin.offers) >= 20  # 45: issue 17's floor
    assert builtin.problems == ()
    for g in builtin.gpus.values():
        assert g.nominal.bytes > 0
        assert g.spec_source.strip(), g.id
        for fig in (g.nominal, g.nvml_total, g.cuda_total):
            if fig is not None:
                assert fig.source.strip(), (g.id, fig.quantity)
        if g.cuda_total and g.nvml_total:
            assert g.cuda_total.bytes < g.nvml_total.bytes, g.id
    for o in builtin.offers.values():
        assert o.gpu in builtin.gpus and o.plans and o.evidence
    assert {"seed-rtx-4090-x1", "seed-rtx-6000-ada-x1"} <= set(builtin.offers)
    assert any(o.gpu_count >= 8 for o in builtin.offers.values())


def test_names_people_rent_by_resolve_to_one_card_each(builtin):
    """Every alias and NVML name belongs to one card only, and the names offers and nvidia-smi
    use for the cards added for rented machines resolve to the right entry."""
    from vramtui.catalog import find_gpu

    owner: dict[str, str] = {}
    for g in builtin.gpus.values():
        for name in {*g.aliases, *(n.lower() for n in g.nvml_names)}:
            assert owner.setdefault(name, g.id) == g.id, (name, owner[name], g.id)
            assert name not in builtin.gpus or name == g.id, (name, g.id)
    expected = {
        "NVIDIA GH200 480GB": "gh200",
        "NVIDIA GB10": "gb10",
        "NVIDIA H20": "h20",
        "NVIDIA H800": "h800",
        "NVIDIA A800-SXM4-80GB": "a800-80gb-sxm",
        "NVIDIA A800 80GB PCIe": "a800-80gb-pcie",
        "NVIDIA L20": "l20",
        "NVIDIA B300 SXM6 AC": "b300",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000",
        "NVIDIA GeForce RTX 4070 Ti SUPER": "rtx-4070ti-super",
        "NVIDIA GeForce RTX 3080": "rtx-3080",  # the 10 GB card; the 12 GB shares the name
        "rtx 3080 12gb": "rtx-3080-12gb",
        "4060 ti 16gb": "rtx-4060ti-16gb",
        "AMD Instinct MI325X": "mi325x",
    }
    for name, gid in expected.items():
        g = find_gpu(builtin, name)
        assert g is not None and g.id == gid, (name, g and g.id)
    # 12 GB cards catalogue 12 GB nominal, not a rounded 11 or a binary 12 GiB.
    assert builtin.gpus["rtx-4070"].nominal.bytes == 12 * 10**9
    assert builtin.gpus["gb10"].nvml_total is None  # NVML says "Not Supported" on GB10


def test_user_catalogue_overrides_and_reports_broken_files(tmp_path):
    user = tmp_path / "catalog"
    (user / "offers").mkdir(parents=True)
    (user / "gpus").mkdir()
    (user / "offers" / "broken.toml").write_text('id = "broken"\nprovider = \n')
    (user / "offers" / "typo.toml").write_text(
        'id = "typo"\n' + _plain_offer("rtx-4090", 1, 1.0).replace("gpu_count", "gpu_cuont")
    )
    (user / "offers" / "seed-rtx-4090-x1.toml").write_text(
        'id = "seed-rtx-4090-x1"\n' + _plain_offer("rtx-4090", 1, 0.25)
    )
    cat = load_catalog(user)
    assert len(cat.problems) == 2
    broken, typo = sorted(cat.problems)
    assert "broken.toml" in broken and "malformed TOML" in broken
    assert "typo.toml" in typo and "gpu_cuont" in typo
    # Built-ins still load; the user's entry replaced the one with the same id.
    assert len(cat.offers) >= 20
    assert cat.offers["seed-rtx-4090-x1"].plans[0].price == 0.25


def test_cli_reports_a_broken_user_file_and_goes_on(tmp_path, capsys):
    user = tmp_path / "catalog"
    (user / "gpus").mkdir(parents=True)
    (user / "gpus" / "mine.toml").write_text('id = "mine"\nname = "x"\nvendor = "intel"\n')
    assert main(["shortlist", "--catalog", str(user), "--json", "--days", "3"]) == 0
    captured = capsys.readouterr()
    assert "mine.toml" in captured.err and "vendor" in captured.err
    assert len(json.loads(captured.out)["candidates"]) >= 20


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--today", "tomorrow"], "--today must be a date"),
        (["--days", "-2"], "--days must be a positive number"),
    ],
)
def test_shortlist_bad_arguments_get_one_line(args, needle, capsys):
    assert main(["shortlist", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vramtui: error:") and needle in err[0]


def test_detail_view_shows_the_offer_evidence(capsys):
    assert main(["shortlist", "--detail", "seed-rtx-4090-x1", "--today", "2026-12-02"]) == 0
    out = capsys.readouterr().out
    assert "offer evidence" in out and "47.14 USD" in out
    assert "[catalogue]" in out  # the card's capacity figure, with its source
