"""The real OOM corpus (tests/triage_corpus): every report is well formed, sourced, labelled in
the agreed vocabulary, and sits in exactly one half of the split. The reader's figures on it
are measured by bench/bench_triage_corpus.py, not asserted here."""

from __future__ import annotations

import re
import tomllib
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent / "triage_corpus"
REPORTS = sorted((CORPUS / "reports").glob("*.toml"))

STAGES = {
    "load",
    "generate",
    "train_forward",
    "backward",
    "optimizer_step",
    "eval",
    "save",
    "other",
    "unknown",
}
STAGE_BASES = {"frames", "code", "log", "reporter", "none"}
BACKENDS = {"cuda", "rocm", "mps", "xpu", "cpu", "tpu", "unknown"}
URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|discussions)/\d+")


def _load(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _split() -> dict[str, str]:
    split = tomllib.loads((CORPUS / "split.toml").read_text(encoding="utf-8"))
    half_of: dict[str, str] = {}
    for half in (
        "development",
        "held_out",
        "held_out_2",
        "held_out_3",
        "held_out_4",
        "held_out_5",
        "held_out_6",
        "held_out_7",
        "held_out_8",
        "held_out_9",
        "held_out_10",
        "held_out_11",
        "held_out_12",
        "held_out_13",
    ):
        for repo in split.get(half, {}).get("repositories", []):
            assert repo not in half_of, f"{repo} is in both halves"
            half_of[repo] = half
    return half_of


_MULTIPLIERS = (2**10, 2**20, 2**30, 2**40, 10**3, 10**6, 10**9, 10**12)


def _assert_rounded_to_the_nearest_byte(fig: dict) -> None:
    """A printed "9.54 GiB" is 9.54 x 2^30 = 10,243,497,000.96 B: labelled 10,243,497,001.

    One convention for every label: the decimal as printed times the backend's unit, rounded to
    the nearest byte (half to even). Which unit is the labeller's call (GB can be 2^30 for MPS
    and vLLM); only the rounding is checked here.
    """
    m = re.fullmatch(r"\s*(\d[\d,]*\.\d+)\s*[A-Za-z]+\s*", fig["as_written"])
    if not m:
        return
    value = Decimal(m.group(1).replace(",", ""))
    near = [k for k in _MULTIPLIERS if abs(Decimal(fig["bytes"]) - value * k) <= 1]
    assert near, f"{fig}: bytes are not the printed value times a unit"
    assert any(fig["bytes"] == int((value * k).to_integral_value(ROUND_HALF_EVEN)) for k in near), (
        f"{fig}: round to the nearest byte"
    )


def test_the_corpus_is_large_enough():
    reports = [_load(p) for p in REPORTS]
    ooms = sum(1 for r in reports if r["is_oom"])
    near = len(reports) - ooms
    assert ooms >= 200 and near >= 60, (ooms, near)  # what the issue asks for


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_report_is_well_formed(path):
    r = _load(path)
    assert URL.match(r["source_url"]), r["source_url"]
    owner_repo = "/".join(r["source_url"].split("/")[3:5])
    assert owner_repo.lower() == r["repository"].lower()
    assert path.stem.startswith(r["repository"].replace("/", "__"))
    assert isinstance(r["is_oom"], bool)
    assert r["stage"] in STAGES
    assert r["stage_basis"] in STAGE_BASES
    if r["stage"] == "unknown":
        assert r["stage_basis"] in ("none", "reporter")
    assert r["backend"] in BACKENDS
    text = r["excerpt"]["text"]
    assert text.strip() and len(text) <= 6000 and text.count("\n") <= 80
    for fig in r.get("figures", []):
        # A figure's text is taken from the excerpt, and its bytes were worked by hand.
        if fig.get("split_across_lines"):  # a terminal wrapped the figure in two
            assert re.sub(r"\s+", "", fig["as_written"]) in re.sub(r"\s+", "", text), fig
        else:
            assert fig["as_written"] in text, fig
        assert isinstance(fig["bytes"], int), fig  # vLLM can print a negative KV budget
        assert fig["key"].endswith("_bytes"), fig
        _assert_rounded_to_the_nearest_byte(fig)
    if not r["is_oom"]:
        assert r["near_miss_kind"], "a near-miss says what it really is"


def test_every_repository_is_in_one_half_and_both_halves_hold_both_kinds():
    half_of = _split()
    halves = sorted(set(half_of.values()))
    counts = {(half, kind): 0 for half in halves for kind in (True, False)}
    for path in REPORTS:
        r = _load(path)
        assert r["repository"] in half_of, f"{r['repository']} missing from split.toml"
        counts[(half_of[r["repository"]], r["is_oom"])] += 1
    assert {"development", "held_out"} <= set(halves)
    assert all(n >= 15 for n in counts.values()), counts


def test_one_report_per_thread_unless_marked_as_a_second_error():
    seen: dict[str, str] = {}
    for path in REPORTS:
        url = _load(path)["source_url"].split("#")[0]
        if url in seen:
            assert path.stem.endswith(("-b", "-c")) or seen[url].endswith(("-b", "-c")), (
                path.stem,
                seen[url],
            )
        seen[url] = path.stem


def test_the_reader_holds_its_figures_on_the_spent_pool():
    """Floors just under the tuning pool's figures (every spent half; round 14, with
    held_out_13 in the pool: OOMs read 1183/1196, near-misses read as OOM 9/456 (onnxruntime#14942,
    bert-nmt#14, netket#711, weathernext#44, chineseocr_lite#355, PaddleOCR#15806,
    voltaML-fast-stable-diffusion#15, vibe#1168 and cog#960: each excerpt holds an allocator
    failure or an out-of-memory line that only the thread shows to be something else), stage
    right 1055/1196, figures exact 3796/3834, repeated keys matched as a multiset). The five
    halves of round 5 keep their near-miss ceiling of 2. A change that loses ground on real
    reports fails here; raise the floors when it gains."""
    import importlib.util

    path = CORPUS.parent.parent / "bench" / "bench_triage_corpus.py"
    spec = importlib.util.spec_from_file_location("bench_triage_corpus", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    reports, half_of = bench.load_corpus(CORPUS)
    pool = set(bench.POOLS["tuning"])
    s = bench.summarise([bench.score_one(r) for r in reports if half_of[r["repository"]] in pool])
    assert s["oom_read_as_oom"] >= 1182, s["oom_read_as_oom"]
    assert s["near_miss_read_as_oom"] <= 9, s["near_miss_read_as_oom"]
    assert s["stage_right"] >= 1052, s["stage_right"]
    assert s["figures_exact_first"] >= 3793, s["figures_exact_first"]
    round5 = pool - {"held_out_5", "held_out_6", "held_out_7", "held_out_8", "held_out_9",
        "held_out_10", "held_out_11", "held_out_12", "held_out_13"}
    near5 = sum(
        bench.score_one(r)["is_oom_read"]
        for r in reports
        if half_of[r["repository"]] in round5 and not r["is_oom"]
    )
    assert near5 <= 2, near5
