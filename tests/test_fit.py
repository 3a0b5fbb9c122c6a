"""`vramtui fit`: the search checked against brute force over the ledger for every sample spec,
two answers worked by hand, margins, bounds on the input, the CLI text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramtui.catalog import find_gpu, load_catalog
from vramtui.cli import _spec_and_estimate, build_parser, main
from vramtui.errors import SpecError
from vramtui.fit_capacity import (
    CANNOT_TELL,
    FITS,
    OVER,
    Capacity,
    Margin,
    card_capacity,
    parse_margin,
    spec_margin,
)
from vramtui.fit_search import INTEGER, fit_report
from vramtui.ledger import estimate
from vramtui.triage.single_change import edit_spec

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_specs"
GIB = 2**30

# Every sample spec, on a card where its answers are interesting (some variables bind).
CASES = [
    ("llama-3.1-8b-chat-8k-x16.toml", "rtx-4090"),
    ("llama-3.3-70b-awq-tp2.toml", "l40s"),
    ("mixtral-8x7b-moe.toml", "h100-sxm"),
    ("qwen1.5-7b-chat-32k-vllm.toml", "a10g"),
    ("qlora-7b.toml", "rtx-3060"),
    ("full-finetune-zero3-4gpu.toml", "a100-80gb-sxm"),
    ("seed-7b-fp16-inference.toml", "rtx-4090"),
]


def _load(name: str):
    args = build_parser().parse_args(["estimate", str(SAMPLES / name)])
    return _spec_and_estimate(args)


def _exact(n: int) -> Capacity:
    return Capacity(n, f"a card of exactly {n:,} B", n, n, "exact (test)")


def _peak(spec, arch, edits) -> int | None:
    after = edit_spec(spec, edits)
    if after is None:
        return None
    return estimate(after, arch).peak_bytes


def _values_to_check(low: int, best: int) -> list[int]:
    """Every value up to `best` where that is cheap; otherwise every value of the last 48 below
    it and a dense stride under them (the peak grows with the value: a hole would show)."""
    if best - low <= 600:
        return list(range(low, best + 1))
    stride = max(1, (best - 48 - low) // 150)
    return sorted(set(range(low, best - 48, stride)) | set(range(best - 48, best + 1)))


@pytest.mark.parametrize(("name", "card"), CASES)
def test_search_matches_brute_force(name, card):
    spec, arch, est = _load(name)
    catalog = load_catalog(None, use_user_config=False)
    cap = card_capacity(find_gpu(catalog, card))
    margin = spec_margin(spec)
    allowed = int(cap.bytes * (1 - spec.headroom.margin_fraction))  # the shortlist's rule
    report = fit_report(spec, arch, cap, margin, est=est)
    assert report.results, "no variable searched"
    for r in report.results:
        k = r.knob
        assert r.allowed_bytes == allowed
        if k.kind == INTEGER:
            if r.best is None:
                assert _peak(spec, arch, k.edits(k.low)) > allowed
                continue
            for v in _values_to_check(k.low, r.best.value):
                peak = _peak(spec, arch, k.edits(v))
                assert peak is not None and peak <= allowed, (k.key, v, peak, allowed)
            if r.next_up is None:
                assert r.best.value == k.high  # the top of the range fits
            else:
                assert r.next_up.value == r.best.value + 1
                nxt = _peak(spec, arch, k.edits(r.best.value + 1))
                assert nxt > allowed
                assert r.overflow_bytes == nxt - allowed
        else:
            values = list(k.choices)
            if r.best is not None:
                i = values.index(r.best.value)
                assert _peak(spec, arch, k.edits(r.best.value)) <= allowed
                # every choice with more memory before it either overflows or was left out
                for v in values[:i]:
                    peak = _peak(spec, arch, k.edits(v))
                    skipped = any(s.startswith(f"{k.show(v)}:") for s in r.skipped)
                    assert skipped or peak is None or peak > allowed, (k.key, v)


def test_the_search_stays_well_under_a_second():
    spec, arch, est = _load("llama-3.1-8b-chat-8k-x16.toml")
    report = fit_report(spec, arch, _exact(80 * GIB), Margin(fraction=0.0), est=est)
    # about 50 estimates of the ledger; under a second even on a loaded 2-core runner
    assert report.estimates < 120
    assert report.seconds < 1.0


def test_max_concurrency_of_the_8k_chat_worked_by_hand():
    """Llama 3.1 8B, bf16, vLLM, 8,000 + 192 tokens per sequence, on exactly 80 GiB, no margin.

    By hand, at decode (the binding stage at this concurrency):
      weights  8,030,261,248 params x 2 B                                = 16,060,522,496
      CUDA context (the ledger's labelled 512 MiB assumption)           =    536,870,912
      fragmentation: one 8,192-token x 14,336 x 2 B MLP block           =    234,881,024
      per sequence: KV 2 x 8 heads x 128 x 2 B x 32 layers = 131,072 B/token x 8,192
                    = 1,073,741,824; decode activations (2 x 4,096 + 3 x 14,336) x 2 B
                    = 102,400; logits 128,256 x (2 + 4) B = 769,536      =  1,074,613,760
      (85,899,345,920 - 16,832,274,432) / 1,074,613,760 = 64.27 -> 64 sequences
      at 65: 16,832,274,432 + 65 x 1,074,613,760 = 86,682,168,832, over by 782,822,912 B.
    """
    spec, arch, est = _load("llama-3.1-8b-chat-8k-x16.toml")
    report = fit_report(spec, arch, _exact(80 * GIB), Margin(fraction=0.0), est=est)
    r = report.result("concurrency")
    assert r.status == FITS
    assert r.best.value == 64
    assert r.best.peak_bytes == 16_832_274_432 + 64 * 1_074_613_760
    assert r.next_up.value == 65
    assert r.overflow_bytes == 782_822_912
    assert r.binding_stage == "decode"


def test_seed_example_weight_format_worked_by_hand():
    """The seed's 7e9 parameters with a manual 6 GiB reserve on a "24 GB" card of exactly
    24 x 10^9 B: fp16 needs 14e9 + 6 GiB = 20,442,450,944 B (19.04 GiB, the seed's figure) and
    fits; fp32 needs 28e9 + 6 GiB = 34,442,450,944 B, over by 10,442,450,944 B."""
    spec, arch, est = _load("seed-7b-fp16-inference.toml")
    report = fit_report(spec, arch, _exact(24 * 10**9), Margin(fraction=0.0), est=est)
    r = report.result("weight_format")
    assert r.best.value == "fp16"
    assert r.best.peak_bytes == 20_442_450_944
    assert r.next_up.value == "fp32"
    assert r.overflow_bytes == 10_442_450_944
    # a manual reserve says nothing of lengths or batch: they are not searched, and it is said
    assert report.result("concurrency") is None
    assert any("manual reserve" in n for n in report.notes)


def test_a_margin_in_bytes_lowers_the_answer_by_hand():
    """2 GiB kept free on 80 GiB: (85,899,345,920 - 2,147,483,648 - 16,832,274,432) /
    1,074,613,760 = 62.27 -> 62 sequences (same items as the worked case above)."""
    spec, arch, est = _load("llama-3.1-8b-chat-8k-x16.toml")
    report = fit_report(spec, arch, _exact(80 * GIB), parse_margin("2GiB"), est=est)
    assert report.result("concurrency").best.value == 62


def test_an_unknown_item_makes_the_answer_cannot_tell():
    spec, arch, est = _load("full-finetune-zero3-4gpu.toml")  # NCCL buffers are unknown
    assert est.unknown_items
    report = fit_report(spec, arch, _exact(80 * GIB), Margin(fraction=0.0), est=est)
    r = report.result("micro_batch")
    assert r.status == CANNOT_TELL
    assert "NCCL" in r.reason
    assert report.verdict.status == CANNOT_TELL


def test_an_unverified_card_total_that_could_change_the_answer_says_cannot_tell():
    # The H100 SXM's CUDA total is unverified (3 % either way on HBM): the largest concurrency
    # on the figure is not the largest everywhere in that range.
    spec, arch, est = _load("llama-3.1-8b-chat-8k-x16.toml")
    catalog = load_catalog(None, use_user_config=False)
    cap = card_capacity(find_gpu(catalog, "h100-sxm"))
    assert not cap.exact
    report = fit_report(spec, arch, cap, spec_margin(spec), est=est)
    r = report.result("concurrency")
    assert r.status == CANNOT_TELL
    assert "answer changes between" in r.reason


def test_single_changes_when_the_spec_does_not_fit_are_in_the_seed_order():
    spec, arch, est = _load("llama-3.1-8b-chat-8k-x16.toml")
    catalog = load_catalog(None, use_user_config=False)
    gpu = find_gpu(catalog, "rtx-4090")
    report = fit_report(spec, arch, card_capacity(gpu), spec_margin(spec), est=est, catalog=catalog)
    assert report.verdict.status == OVER
    groups = [c.group for c in report.changes]
    assert groups[0] == "capacity"
    order = ["capacity", "cache", "micro_batch", "activation", "precision", "adapter"]
    assert [order.index(g) for g in groups] == sorted(order.index(g) for g in groups)
    bigger = next(c for c in report.changes if c.gpu_id)
    assert catalog.gpus[bigger.gpu_id].usable().bytes > gpu.usable().bytes  # never smaller
    concurrency = next(c for c in report.changes if c.change.startswith("concurrency"))
    assert "coverage" in concurrency.cost and not concurrency.keeps_requirements
    for c in report.changes:  # every change named fits (or cannot tell), with a cost
        assert c.status in (FITS, CANNOT_TELL) and c.cost


def test_micro_batch_change_keeps_the_effective_batch():
    spec, arch, est = _load("qlora-7b.toml")  # micro-batch 4 x accumulation 4
    # a card just too small for micro-batch 4: at most 2 fit, by the ledger
    peak2 = _peak(spec, arch, {"batch.micro_batch": 2})
    peak3 = _peak(spec, arch, {"batch.micro_batch": 3})
    cap = _exact((peak2 + peak3) // 2)
    report = fit_report(spec, arch, cap, Margin(fraction=0.0), est=est)
    mb = next(c for c in report.changes if c.group == "micro_batch")
    assert mb.edits == {"batch.micro_batch": 2, "batch.grad_accum": 8}
    assert "same effective batch (16)" in mb.cost


@pytest.mark.parametrize(
    ("text", "fraction", "n_bytes"),
    [("5%", 0.05, None), ("2GiB", None, 2 * GIB), ("1500 MB", None, 1_500_000_000)],
)
def test_parse_margin(text, fraction, n_bytes):
    m = parse_margin(text)
    assert m.fraction == fraction and m.bytes == n_bytes


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("50%", "limit for a margin share"),
        ("nan%", "neither a share"),
        ("12", "no unit"),
        ("2 parsecs", "neither a share"),
        ("2000000 TiB", "limit of"),
    ],
)
def test_bad_margins_are_refused_with_the_limit(text, words):
    with pytest.raises(SpecError, match=words):
        parse_margin(text)


def test_cli_fit_text_and_json(capsys):
    spec = str(SAMPLES / "llama-3.1-8b-chat-8k-x16.toml")
    assert main(["fit", spec, "--gpu", "rtx-4090"]) == 0
    out = capsys.readouterr().out
    assert "does not fit" in out and "single changes" in out and "concurrency" in out
    assert main(["fit", spec, "--gpu", "rtx-4090", "--json", "--margin", "5%"]) == 0
    data = json.loads(capsys.readouterr().out)
    conc = next(v for v in data["variables"] if v["variable"] == "concurrency")
    assert conc["largest_fitting"]["value"] == 6
    assert isinstance(conc["overflow"]["bytes"], int) and conc["overflow"]["text"].endswith("GiB")
    assert data["single_changes"][0]["group"] == "capacity"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--gpu", "rtx-9999"], "'rtx-9999' is not in the GPU catalogue"),
        (["--gpu", "A100"], "matches several catalogue cards"),
        (["--gpu", "rtx-4090", "--gpus", "0"], "--gpus must be at least 1"),
        (["--gpu", "rtx-4090", "--gpus", "100001"], "limit of 100,000"),
        (["--gpu", "rtx-4090", "--margin", "75%"], "limit for a margin share"),
    ],
)
def test_cli_fit_bad_input_is_one_line(argv, words, capsys):
    spec = str(SAMPLES / "qlora-7b.toml")
    assert main(["fit", spec, *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_cli_fit_dry_run_without_the_extra_says_so_in_one_line(monkeypatch, capsys):
    from vramtui.dryrun import build
    from vramtui.dryrun.errors import missing_extra

    def no_torch():
        raise missing_extra()

    monkeypatch.setattr(build, "import_torch", no_torch)
    spec = str(SAMPLES / "qlora-7b.toml")
    assert main(["fit", spec, "--gpu", "rtx-4090", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "not installed" in captured.err and captured.err.count("\n") == 1
    assert "micro-batch" in captured.out  # the ledger's answer is still printed


@pytest.mark.parametrize(
    ("name", "card"),
    [
        # names as users and logs write them: vendor words, a size, a remark in parentheses
        ("NVIDIA A100 80GB", "a100-80gb-sxm"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb-sxm"),
        ("NVIDIA A100 40GB PCIe", "a100-40gb-pcie"),
        ("AMD MI300X", "mi300x"),
        ("Tesla V100-SXM2 16GB", "v100-16gb"),
        ("RTX 3090 24GB (power limited to 280W, no NVLink)", "rtx-3090"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ],
)
def test_fit_resolves_a_card_written_as_users_write_it(name, card, capsys):
    spec = str(SAMPLES / "qlora-7b.toml")
    assert main(["fit", spec, "--gpu", name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["capacity"]["gpu"] == card


def test_a_huge_card_name_is_refused_in_one_short_line(capsys):
    spec = str(SAMPLES / "qlora-7b.toml")
    assert main(["fit", spec, "--gpu", "rtx " * 30_000]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 300
    assert "120,000 characters is over vramtui's limit of 200" in err
