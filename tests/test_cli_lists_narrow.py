"""The catalogue lists (`vramtui models`, `offers`, `gpus`, and the shortlist's fit table) at
80 and 200 columns: every id printed whole on one line, other columns wrapped or left out."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

from vramtui.catalog import load_catalog
from vramtui.cli import main
from vramtui.models.registry import load_catalog_models
from vramtui.render_lists import (
    FittedTable,
    ListColumn,
    compact_count,
    formats_cell,
    model_family,
    plan_price,
)

REPO = Path(__file__).resolve().parents[1]
TODAY = ["--today", "2026-12-02"]


def run(monkeypatch, capsys, columns: int, *argv: str) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    for name in ("FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    assert main(list(argv)) == 0
    out = capsys.readouterr().out
    return out.splitlines()


def line_with(lines: list[str], word: str) -> str | None:
    """The first line holding `word` as a whole (space-separated) token."""
    pattern = re.compile(rf"(?<![^\s│┃(]){re.escape(word)}(?![^\s│┃)])")
    return next((line for line in lines if pattern.search(line)), None)


def fits(lines: list[str], columns: int) -> None:
    too_long = [line for line in lines if len(line.rstrip()) > columns]
    assert not too_long, too_long[:3]
    assert not any("…" in line for line in lines), "a cell was cut with an ellipsis"


# ------------------------------------------------------------------------------- models

QWEN25 = [  # the Hub's parameter counts of the Qwen2.5 Instruct models, smallest first
    ("Qwen/Qwen2.5-0.5B-Instruct", 494_032_768, "494 M"),
    ("Qwen/Qwen2.5-1.5B-Instruct", 1_543_714_304, "1.54 B"),
    ("Qwen/Qwen2.5-3B-Instruct", 3_085_938_688, "3.09 B"),
    ("Qwen/Qwen2.5-7B-Instruct", 7_615_616_512, "7.62 B"),
    ("Qwen/Qwen2.5-14B-Instruct", 14_770_033_664, "14.77 B"),
    ("Qwen/Qwen2.5-32B-Instruct", 32_763_876_352, "32.76 B"),
    ("Qwen/Qwen2.5-72B-Instruct", 72_706_203_648, "72.71 B"),
]


@pytest.mark.parametrize("columns", [80, 200])
def test_models_every_id_whole_and_sorted_by_size_in_a_family(monkeypatch, capsys, columns):
    lines = run(monkeypatch, capsys, columns, "models")
    fits(lines, columns)
    models = load_catalog_models()
    assert len(models) >= 40
    where = {}
    for mid in models:
        line = line_with(lines, mid)
        assert line is not None, f"{mid} is not printed whole at {columns} columns"
        where[mid] = lines.index(line)
    # The catalogue holds the real counts, and the rows follow them: 3B before 14B.
    for mid, count, shown in QWEN25:
        assert models[mid].param_count == count
        assert shown in lines[where[mid]]
    rows = [where[mid] for mid, _, _ in QWEN25]
    assert rows == sorted(rows) and len(set(rows)) == len(rows)
    # The family is contiguous: nothing else sits between its first and last row.
    assert rows[-1] - rows[0] == len(QWEN25) - 1
    qwen3 = [
        "Qwen/Qwen3-0.6B",
        "Qwen/Qwen3-1.7B",
        "Qwen/Qwen3-4B",
        "Qwen/Qwen3-8B",
        "Qwen/Qwen3-14B",
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-32B",
        "Qwen/Qwen3-235B-A22B",
    ]
    assert [where[m] for m in qwen3] == sorted(where[m] for m in qwen3)


def test_models_at_80_columns_say_what_was_left_out(monkeypatch, capsys):
    narrow = run(monkeypatch, capsys, 80, "models")
    assert any(line.startswith("left out to fit 80 columns: head dim, KV heads") for line in narrow)
    wide = run(monkeypatch, capsys, 200, "models")
    assert not any("left out" in line for line in wide)
    header = next(line for line in wide if line.startswith("id "))
    assert header.split() == [
        "id",
        "params",
        "layers",
        "KV",
        "heads",
        "head",
        "dim",
        "dtype",
        "notes",
    ]


def test_models_wide_shows_the_exact_count(monkeypatch, capsys):
    lines = run(monkeypatch, capsys, 200, "models", "--wide", "Qwen2.5")
    row = line_with(lines, "Qwen/Qwen2.5-7B-Instruct")
    assert "7.62 B" in row and "7,615,616,512" in row
    assert line_with(lines, "Qwen/Qwen3-8B") is None  # the query filters


def test_models_query_without_a_match(monkeypatch, capsys):
    lines = run(monkeypatch, capsys, 80, "models", "no-such-model-anywhere")
    assert lines == ["No catalogue model id contains 'no-such-model-anywhere'."]


@pytest.mark.parametrize(
    "model_id, family",
    [
        ("Qwen/Qwen2.5-7B-Instruct", "qwen/qwen2.5-instruct"),
        ("Qwen/Qwen2.5-0.5B-Instruct", "qwen/qwen2.5-instruct"),
        ("Qwen/Qwen3-235B-A22B", "qwen/qwen3"),
        ("Qwen/Qwen3-0.6B", "qwen/qwen3"),
        ("google/gemma-2-27b-it", "google/gemma-2-it"),
        ("mistralai/Mixtral-8x22B-v0.1", "mistralai/mixtral-v0.1"),
        ("meta-llama/Llama-3.1-405B-Instruct", "meta-llama/llama-3.1-instruct"),
        ("microsoft/Phi-3-mini-4k-instruct", "microsoft/phi-3-mini-4k-instruct"),
        ("tiiuae/falcon-7b", "tiiuae/falcon"),
        ("local-model", "local-model"),
    ],
)
def test_model_family(model_id, family):
    assert model_family(model_id) == family


@pytest.mark.parametrize(
    "count, text",
    [
        (7_615_616_512, "7.62 B"),
        (494_032_768, "494 M"),
        (999_885_952, "1.00 B"),  # gemma-3-1b: rounds up into B, never "1000 M"
        (671_026_404_352, "671.03 B"),
        (1_200_000_000_000, "1.20 T"),
        (125_000, "125,000"),
    ],
)
def test_compact_count(count, text):
    assert compact_count(count) == text


# ------------------------------------------------------------------------------- offers


@pytest.mark.parametrize("columns", [80, 200])
def test_offers_every_id_whole(monkeypatch, capsys, columns):
    lines = run(monkeypatch, capsys, columns, "offers")
    fits(lines, columns)
    offers = load_catalog(None).offers
    assert len(offers) >= 20
    for oid in offers:
        assert line_with(lines, oid) is not None, f"{oid} is not printed whole"
    text = " ".join(" ".join(lines).split())
    # Hourly prices carry /h; longer plans their period and the hourly equivalent
    # (25.92 / 24 = 1.08, 604.80 / 720 = 0.84).
    assert "on demand: 0.22 USD/h" in text
    assert "1-day commitment: 25.92 USD/24 h (1.08 USD/h)" in text
    assert "30-day commitment: 604.80 USD/720 h (0.84 USD/h)" in text


def test_offers_at_200_columns_keep_every_column(monkeypatch, capsys):
    lines = run(monkeypatch, capsys, 200, "offers")
    row = line_with(lines, "sample-a-rtx-3090-x1")
    for cell in ("1 x rtx-3090", "pcie", "on demand: 0.22 USD/h", "1 h", "sample-cloud-a"):
        assert cell in row
    assert not any("left out" in line for line in lines)


@pytest.mark.parametrize(
    "hours, price, text",
    [
        (1, 0.22, "on demand: 0.22 USD/h"),
        (168, 907.2, "on demand: 907.20 USD/168 h (5.40 USD/h)"),
    ],
)
def test_plan_price(hours, price, text):
    from vramtui.catalog import Plan

    assert plan_price(Plan("on demand", "hourly", hours, price, "USD")) == text


# --------------------------------------------------------------------------------- gpus


def test_gpus_compact_view_fits_80_columns_and_is_short(monkeypatch, capsys):
    compact = run(monkeypatch, capsys, 80, "gpus")
    wide = run(monkeypatch, capsys, 80, "gpus", "--wide")
    fits(compact, 80)
    fits(wide, 80)
    gpus = load_catalog(None).gpus
    n = len(gpus)
    assert n >= 25
    for gid in gpus:
        assert line_with(compact, gid) is not None, gid
        assert line_with(wide, gid) is not None, gid
    # One line per card (a long name may take two), a title, a header, a rule and a legend
    # of at most 4 lines; --wide spends at least 3 lines on each card (GiB, exact bytes, gap).
    assert len(compact) <= n + 10
    assert len(wide) >= 3 * n
    # a10: CUDA 23,611,582,710 B = 21.99 GiB, NVML 24,146,608,128 B = 22.49 GiB, both verified.
    assert "21.99 / 22.49 GiB" in line_with(compact, "a10")
    # mi300x: no CUDA figure; NVML 206,141,652,992 B = 191.98 GiB, unverified.
    assert "- / 191.98? GiB" in line_with(compact, "mi300x")
    assert "bf16 fp8 fp4" in line_with(compact, "b200")
    assert line_with(compact, "t4").rstrip().endswith("fp16")
    # No raw byte string anywhere, cut or whole; exact bytes only in --wide, with separators.
    assert not any(re.search(r"\d{7,}", line) for line in compact)
    assert not any(re.search(r"\d{7,}", line) for line in wide)
    assert any("= 206,141,652,992 B" in line for line in wide)


def test_gpus_at_200_columns(monkeypatch, capsys):
    compact = run(monkeypatch, capsys, 200, "gpus")
    assert "NVIDIA RTX 6000 Ada Generation" in line_with(compact, "rtx-6000-ada")
    wide = run(monkeypatch, capsys, 200, "gpus", "--wide")
    row = line_with(wide, "a10")
    for cell in (
        "NVIDIA A10",
        "ampere",
        "24 GB",
        "22.49 GiB",
        "21.99 GiB",
        "fp32 tf32 fp16 bf16 int8 int4",
    ):
        assert cell in row
    # The NVML figure of the A100 40GB PCIe as its source wrote it, and its status.
    block = wide[wide.index(line_with(wide, "a100-40gb-pcie")) :][:5]
    assert any("(source: 40960 MiB)" in line for line in block)
    assert any("unverified" in line for line in block)


@pytest.mark.parametrize(
    "formats, cell",
    [
        (("fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8"), "bf16 fp8 fp4"),
        (("fp32", "fp16", "int8", "int4"), "fp16"),
        (("fp32",), "fp32"),
    ],
)
def test_formats_cell(formats, cell):
    assert formats_cell(formats) == cell


# ------------------------------------------------------------------------ the fitted table


def test_an_id_wider_than_the_terminal_folds_but_is_printed_whole():
    long_id = "org/" + "x" * 40 + "-model"
    table = FittedTable(
        "t", [ListColumn("id"), ListColumn("size")], [[long_id, "7 B"]], drop_order=("size",)
    )
    console = Console(width=20, record=True, file=io.StringIO())
    console.print(table)
    text = console.export_text()
    assert all(len(line) <= 20 for line in text.splitlines())
    assert long_id in "".join(line.strip() for line in text.splitlines())
    assert "left out to fit 20 columns: size" in " ".join(text.split())


def test_a_bad_drop_order_is_a_programming_error():
    with pytest.raises(ValueError):
        FittedTable("t", [ListColumn("id"), ListColumn("a")], [], drop_order=("id",))


# -------------------------------------------------------------------- the shortlist's ids


def test_shortlist_fit_table_prints_every_id_whole_at_80(monkeypatch, capsys):
    lines = run(monkeypatch, capsys, 80, "shortlist", *TODAY)
    fits(lines, 80)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["shortlist", "--json", *TODAY]) == 0
    data = json.loads(capsys.readouterr().out)
    ids = [c["offer"] for c in data["candidates"]]
    assert len(ids) >= 20
    for oid in ids:
        assert line_with(lines, oid) is not None, f"{oid} is not printed whole"


# ----------------------------------------------------------------------- small defects


def test_watch_once_without_nvml_says_so_once(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["watch", "--once"]) == 0
    out, err = capsys.readouterr()
    both = " ".join((out + err).split())
    assert both.count("NVML not available") == 1, out + err
    assert err == ""


def test_remote_install_hint_matches_the_readme():
    from vramtui.feed.ssh import explain_failure

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "pip install . && vramtui" in readme  # the README's Set up installs from a checkout
    for stderr in (
        "bash: line 1: python3: command not found",
        "ModuleNotFoundError: No module named 'vramtui.agent'",
        "ModuleNotFoundError: No module named 'psutil'",
    ):
        line = explain_failure("n1", stderr, 1)
        assert "`pip install .`" in line and "pip install vramtui" not in line, line
        assert "pip install -U" not in line
