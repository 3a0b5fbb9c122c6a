"""The display unit reaches every text vramtui builds: item names and bases, shortlist
evidence, triage deviation lines, in the CLI (`--units`) and in the app (the unit key).

In GB mode no text the code built says GiB (or MiB); what a source wrote (a catalogue's
"14.56 GiB", an error's "79.25 GiB") is quoted as written. Every figure below is worked by
hand: 1 GiB = 2^30 B = 1,073,741,824 B, 1 GB = 10^9 B.
"""

from __future__ import annotations

import copy
import datetime
import pickle
import re
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from vramtui.builtin_specs import seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.cli import main
from vramtui.ledger import estimate
from vramtui.models.resolve import resolve_model
from vramtui.shortlist import shortlist
from vramtui.spec import load_spec
from vramtui.triage.advice import advise
from vramtui.triage.reader import read_log
from vramtui.unit_text import Figure, SmallUnit, UnitText, in_unit

REPO = Path(__file__).resolve().parent.parent
SAMPLES = sorted((REPO / "sample_specs").glob("*.toml"))
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
QWEN = REPO / "sample_specs" / "qwen1.5-7b-chat-32k-vllm.toml"
QWEN_LOG = REPO / "sample_specs" / "logs" / "qwen1.5-7b-vllm-kv-too-small.log"
PYTORCH_LOG = REPO / "tests" / "triage_logs" / "pytorch_cuda_current_generate.log"
TODAY = datetime.date(2026, 12, 10)
GIB = 2**30
BINARY = re.compile(r"\b(GiB|MiB)\b")


@pytest.fixture
def wide(monkeypatch):
    """A terminal wide enough that no line the tests look for wraps."""
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None, use_user_config=False)


def _estimate(path: Path | None):
    if path is None:
        return seed_example_spec(), estimate(seed_example_spec())
    spec = load_spec(path)
    arch, checkpoint = resolve_model(spec.model, path.parent)
    return spec, estimate(spec, arch, checkpoint)


# ---------------------------------------------------------------------------- the text type


def test_figure_in_each_unit():
    six = Figure(6 * GIB, trim=True)
    assert six.render("gib") == "6 GiB"
    assert six.render("gb") == "6.44 GB"  # 6,442,450,944 B
    assert six.render("mib") == "6,144 MiB"
    assert six.render("bytes") == "6,442,450,944 B"
    # 512 MiB = 536,870,912 B = 537 MB
    small = Figure(512 * 2**20, decimals=0, small=True)
    assert [small.render(u) for u in ("gib", "gb", "mib")] == ["512 MiB", "537 MB", "512 MiB"]
    # 0.4 GiB = 429,496,730 B = 0.43 GB; 1 GiB = 1.07 GB; a rough range stays in GiB for bytes
    rough = Figure(round(0.4 * GIB), high=GIB, trim=True, gib_in_bytes_mode=True)
    assert rough.render("gib") == "0.4-1 GiB"
    assert rough.render("gb") == "0.43-1.07 GB"
    assert rough.render("bytes") == "0.4-1 GiB"
    assert SmallUnit().render("gb") == "MB" and SmallUnit().render("gib") == "MiB"


def test_unit_text_reads_as_gib_and_keeps_its_figures():
    name = UnitText("Manual reserve (", Figure(6 * GIB, trim=True), ")")
    assert name == "Manual reserve (6 GiB)" and isinstance(name, str)
    assert name.render("gb") == "Manual reserve (6.44 GB)"
    # `+` from either side and `join` keep the figures; a plain string renders as it is
    joined = UnitText("; ").join(["a", "x " + name + " y"])
    assert isinstance(joined, UnitText)
    assert joined.render("gb") == "a; x Manual reserve (6.44 GB) y"
    assert in_unit("plain 6 GiB", "gb") == "plain 6 GiB"
    for copied in (pickle.loads(pickle.dumps(joined)), copy.deepcopy(joined)):
        assert copied.render("gb") == joined.render("gb") and copied == joined


# ---------------------------------------------------------------------------- the ledger


@pytest.mark.parametrize("path", [None, *SAMPLES], ids=lambda p: p.stem if p else "seed")
def test_item_names_and_bases_follow_the_unit(path):
    _, est = _estimate(path)
    for item in est.items:
        for text in (item.name, item.basis):
            gb = in_unit(text, "gb")
            assert not BINARY.search(gb), (item.key, gb)
            # GiB mode shows the text as before: the str of a UnitText is its GiB rendering
            assert in_unit(text, "gib") == str(text)


def test_seed_ledger_texts_in_gb_and_gib():
    _, est = _estimate(None)
    items = {i.key: i for i in est.items}
    reserve = items["reserve.manual"]
    # 6 GiB = 6,442,450,944 B = 6.44 GB
    assert in_unit(reserve.name, "gb") == "Manual reserve (6.44 GB)"
    assert in_unit(reserve.name, "gib") == "Manual reserve (6 GiB)"
    weights = next(i for i in est.items if i.category == "weights")
    # 7e9 x 16 bits / 8 = 14e9 B = 14.00 GB = 13.04 GiB
    assert "= 14,000,000,000 B (14.00 GB)" in in_unit(weights.basis, "gb")
    assert "= 14,000,000,000 B (13.04 GiB)" in in_unit(weights.basis, "gib")
    # bytes mode: the exact bytes are already there, the companion stays in GiB
    assert "= 14,000,000,000 B (13.04 GiB)" in in_unit(weights.basis, "bytes")


def test_chat_ledger_texts_in_gb():
    _, est = _estimate(CHAT)
    items = {i.key: i for i in est.items}
    kv = in_unit(items["kv_cache"].basis, "gb")
    # 16 sequences x 8,192 tokens x 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B
    # = 17,179,869,184 B = 17.18 GB (16.00 GiB)
    assert "= 17,179,869,184 B (17.18 GB) at the end of decode" in kv
    ctx = in_unit(items["overhead.cuda_context"].basis, "gb")
    # 512 MiB = 536,870,912 B = 537 MB; typically 0.4-1 GiB = 0.43-1.07 GB
    assert ctx.startswith("assumption: 537 MB per process per GPU")
    assert "(typically 0.43-1.07 GB)" in ctx
    assert str(items["overhead.cuda_context"].basis).startswith("assumption: 512 MiB per")


def test_estimate_cli_gb_has_no_gib(capsys, wide):
    for path in [None, *SAMPLES]:
        args = ["estimate", *([str(path)] if path else []), "--units", "gb", "--explain"]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert not BINARY.search(out), (path, BINARY.search(out))
    assert main(["estimate", "--units", "gb", "--explain"]) == 0
    gb = capsys.readouterr().out
    assert "Manual reserve (6.44 GB)" in gb and "(14.00 GB)" in gb
    assert main(["estimate", "--units", "gib", "--explain"]) == 0
    gib = capsys.readouterr().out
    assert "Manual reserve (6 GiB)" in gib and "(13.04 GiB)" in gib and " GB" not in gib


# ---------------------------------------------------------------------------- the shortlist


def _candidate_texts(c):
    """(built text, what the catalogue wrote for the card) for one candidate."""
    texts = []
    for r in c.requirements:
        texts += [r.detail, r.condition, *(e["claim"] for e in r.evidence)]
    if c.placement_hint:
        texts.append(c.placement_hint.text)
    return texts, c.gpu.usable().as_written.strip()


@pytest.mark.parametrize("path", [None, *SAMPLES], ids=lambda p: p.stem if p else "seed")
def test_shortlist_evidence_follows_the_unit(path, catalog):
    spec, est = _estimate(path)
    arch = resolve_model(spec.model, path.parent)[0] if path else None
    sl = shortlist(spec, est, catalog, arch=arch, today=TODAY)
    for c in sl.candidates:
        texts, as_written = _candidate_texts(c)
        for text in texts:
            gb = in_unit(text, "gb").replace(as_written, "")
            assert not BINARY.search(gb), (c.offer.id, gb)


def test_shortlist_cli_gb_and_gib(capsys, wide):
    # the seed's peak: 14e9 B + 6 GiB = 20,442,450,944 B = 20.44 GB = 19.04 GiB
    assert main(["shortlist", "--units", "gb"]) == 0
    gb = capsys.readouterr().out
    assert "20.44 GB per GPU at load" in gb and "19.04 GiB per GPU" not in gb
    assert main(["shortlist", "--units", "gib"]) == 0
    gib = capsys.readouterr().out
    assert "19.04 GiB per GPU at load" in gib


def test_shortlist_detail_cli_gb(capsys, wide):
    # the RTX A6000's total is unverified: its bound and the comparison, in GB
    assert main(["shortlist", str(CHAT), "--units", "gb", "--detail", "sample-a-rtx-a6000-x1"]) == 0
    out = capsys.readouterr().out
    detail = out[out.index("sample-a-rtx-a6000-x1):") :]
    claims = [ln for ln in detail.splitlines() if "[estimate]" in ln or "[bound]" in ln]
    assert claims and not any(BINARY.search(ln) for ln in claims), claims
    # the chat spec's worst stage is prefill at 34.46 GB (as the estimate prints it)
    assert "34.46 GB on the most loaded GPU" in detail


# ---------------------------------------------------------------------------- triage


def _advice(log: Path, spec_path: Path, catalog):
    spec = load_spec(spec_path)
    arch, checkpoint = resolve_model(spec.model, spec_path.parent)
    text = log.read_text()
    return advise(read_log(text), spec, arch, checkpoint, catalog, log_text=text)


def test_triage_kv_room_line_in_gb(catalog):
    advice = _advice(QWEN_LOG, QWEN, catalog)
    gb = in_unit(advice.deviation, "gb")
    # Qwen1.5-7B, bf16 KV: 32 layers x 32 KV heads x 128 x 2 (K, V) x 2 B = 524,288 B/token;
    # 32,768 tokens = 17,179,869,184 B = 17.18 GB (16.00 GiB); 7,344 tokens = 3,850,371,072 B
    # = 3.85 GB; short by 13,329,498,112 B = 13.33 GB
    assert "7,344 tokens, about 3.85 GB" in gb
    assert "needs 17.18 GB per GPU: short by 13.33 GB" in gb
    assert not BINARY.search(gb)
    assert "needs 16.00 GiB per GPU" in in_unit(advice.deviation, "gib")
    for r in advice.recommendations:
        for text in (r.change, r.note, r.error_column, r.why_not_fit):
            assert not BINARY.search(in_unit(text, "gb")), text


def test_triage_deviation_in_gb(catalog):
    advice = _advice(PYTORCH_LOG, CHAT, catalog)
    gb = in_unit(advice.deviation, "gb")
    # held 74.36 GiB = 79.84 GB; asked 1.96 GiB = 2.10 GB
    assert "(79.84 GB held + 2.10 GB asked for)" in gb and not BINARY.search(gb)
    # other processes: 3.20 GiB + 512 MiB = 3.70 GiB = 3,972,844,749 B = 3.97 GB
    assert any("held 3.97 GB on the same GPU" in in_unit(w, "gb") for w in advice.warnings)


def test_triage_cli_units(capsys, wide):
    args = ["triage", str(PYTORCH_LOG), "--spec", str(CHAT)]
    assert main([*args, "--units", "gb"]) == 0
    gb = capsys.readouterr().out
    # total capacity 79.25 GiB = 85,094,047,006 B = 85.09 GB
    assert "'fits' is judged against 85.09 GB, the total capacity the error printed" in gb
    built = [ln for ln in gb.splitlines() if ln.startswith(("the error proves", "warning:"))]
    assert built and not any(BINARY.search(ln) for ln in built), built
    assert main(args) == 0
    gib = capsys.readouterr().out
    assert "'fits' is judged against 79.25 GiB" in gib
    assert main(["triage", str(QWEN_LOG), "--spec", str(QWEN), "--units", "gb"]) == 0
    out = capsys.readouterr().out
    assert not BINARY.search(out), BINARY.search(out)  # this log writes no unit of its own


# ---------------------------------------------------------------------------- the app


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_app_unit_key_re_renders_built_texts(catalog, tmp_path, anyio_backend):
    from rich.console import Console

    from vramtui.app.app import VramtuiApp
    from vramtui.config import Config
    from vramtui.session import SizingSession

    def shown(app, selector):
        console = Console(width=400, record=True)
        console.print(app.query_one(selector, Static).content)
        return console.export_text()

    def names(app):
        t = app.query_one("#ledger-table", DataTable)
        return [str(t.get_row_at(i)[1]) for i in range(t.row_count)]

    session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    app = VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")
    async with app.run_test(size=(120, 40)) as pilot:
        assert "Manual reserve (6 GiB)" in names(app)
        assert "(13.04 GiB)" in shown(app, "#ledger-basis")
        await pilot.press("f4")
        await pilot.pause()
        assert app.unit == "gb"
        assert "Manual reserve (6.44 GB)" in names(app)
        basis = shown(app, "#ledger-basis")
        assert "(14.00 GB)" in basis and not BINARY.search(basis)
        detail = shown(app, "#candidate-detail")
        assert "20.44 GB on the most loaded GPU" in detail
        app.triage_pane.set_log_text(PYTORCH_LOG.read_text())
        await pilot.press("f7")
        await pilot.press("ctrl+r")
        await pilot.pause()
        summary = shown(app, "#triage-summary")
        # seed: 14e9 B + 6 GiB = 20.44 GB estimated; held 79.84 GB + asked 2.10 GB
        assert "(79.84 GB held + 2.10 GB asked for), the ledger estimated 20.44 GB" in summary
