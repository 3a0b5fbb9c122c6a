"""Honest labels in the app, driven with the Pilot: the dry run's install hint keeps its extra,
figures follow the display unit (no GiB in GB mode, no raw bytes in a GiB sentence), and the
ledger's item column takes the width the pane has (80, 120 and 200 columns)."""

from __future__ import annotations

import datetime
import io
import shutil
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from textual.widgets import DataTable, Static

from vramtui.app.app import VramtuiApp
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.session import SizingSession
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
CHAT_SPEC = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
FINETUNE_SPEC = REPO / "sample_specs" / "full-finetune-zero3-4gpu.toml"
# The longest item names of the 4-GPU full fine-tune, 52 cells (with the logits item).
LONGEST = "Activations saved for backward (checkpointing: full)"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None, use_user_config=False)


def _text(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(renderable)
    return out.getvalue()


def _app(catalog, tmp_path: Path, spec: Path, units: str = "gib") -> VramtuiApp:
    spec_file = tmp_path / spec.name
    shutil.copy(spec, spec_file)
    session = SizingSession.from_spec(
        load_spec(spec_file), spec_file, catalog, today=datetime.date(2026, 12, 10)
    )
    return VramtuiApp(session, Config(units=units), draft_file=tmp_path / "draft.toml")


async def test_dry_run_hint_keeps_the_extra(catalog, tmp_path, monkeypatch):
    """The hint reads pip install '.[dryrun]' in the toast and in the pane: "[dryrun]" is text,
    not a markup tag to drop (the defect showed pip install 'vramtui')."""
    from textual.widgets._toast import Toast

    from vramtui.dryrun import command
    from vramtui.dryrun.errors import missing_extra

    def no_torch(spec, arch, **kw):
        raise missing_extra()

    monkeypatch.setattr(command, "run_dry_run", no_torch)
    app = _app(catalog, tmp_path, CHAT_SPEC)
    async with app.run_test(size=(140, 50), notifications=True) as pilot:
        app.ledger_pane.start_dry_run()
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        toasts = [" ".join(t.render().plain.split()) for t in app.query(Toast)]
        assert any(t.endswith("pip install '.[dryrun]'") for t in toasts), toasts
        pane = _text(app.query_one("#ledger-dryrun", Static).content)
        assert "pip install '.[dryrun]'" in pane


async def test_gb_mode_shows_no_gib_in_the_ledger_pane(catalog, tmp_path):
    app = _app(catalog, tmp_path, CHAT_SPEC, units="gb")
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()  # the start-up's shortlist highlight picks a card first
        await pilot.pause()
        app.ledger_pane.compare_with("l40s")
        await pilot.pause()
        bar = _text(app.query_one("#ledger-bar", Static).content)
        # the L40S's cuda total, 44.53 GiB = 44.53 x 2^30 B = 47,813,723,423 B = 47.81 GB,
        # said once in GB: its as-written "44.53 GiB" no longer rides along
        assert "of 47.81 GB (cuda total)" in bar
        shown = [bar]
        for wid in ("#ledger-totals", "#ledger-measured", "#ledger-plan"):
            shown.append(_text(app.query_one(wid, Static).content))
        table = app.query_one("#ledger-table", DataTable)
        shown += [str(c) for r in range(table.row_count) for c in table.get_row_at(r)]
        shown.append(str(table.columns["size"].label))
        text = "\n".join(shown)
        assert "GiB" not in text and "MiB" not in text
        assert " GB" in text and "MB" in text  # the logits, under 0.1 GB, are in MB


async def test_raw_bytes_stay_out_of_a_gib_sentence(catalog, tmp_path):
    """The MI300X's total is written "206141652992 B" in the catalogue: the bar says it in
    GiB (206,141,652,992 / 2^30 = 191.984375 -> 191.98 GiB), not as raw bytes."""
    app = _app(catalog, tmp_path, CHAT_SPEC)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()  # the start-up's shortlist highlight picks a card first
        await pilot.pause()
        app.ledger_pane.compare_with("mi300x")
        await pilot.pause()
        bar = _text(app.query_one("#ledger-bar", Static).content)
        assert "of 191.98 GiB (nvml total, unverified)" in bar
        assert "206141652992" not in bar and " B)" not in bar


async def test_item_column_takes_the_pane_width(catalog, tmp_path):
    app = _app(catalog, tmp_path, FINETUNE_SPEC)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.query_one("#ledger-table", DataTable)
        names = [i.name for i in app.session.results.estimate.items]
        assert LONGEST in names and max(map(cell_len, names)) == cell_len(LONGEST) == 52
        # 80 columns: the floor of 24 cells, so size and item show side by side
        assert table.columns["item"].width == 24
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        pane = app.ledger_pane.size.width
        # 120 columns: the pane less size 13, status 11, 4 x 2 padding and the scrollbar 2;
        # wider than the old fixed 32, narrower than the longest name
        assert table.columns["item"].width == pane - 34
        assert 32 < pane - 34 < 52
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        # 200 columns: every name whole, and every column on screen (no horizontal scroll)
        assert table.columns["item"].width == 52
        assert table.virtual_size.width <= table.size.width
        row = [str(c) for c in table.get_row_at(names.index(LONGEST))]
        assert row[1] == LONGEST
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert table.columns["item"].width == 24


async def test_triage_pane_figures_follow_gb_mode(catalog, tmp_path):
    """The capacity 'fits' is judged against, the figures table and the attempt log in GB:
    79.25 GiB = 79.25 x 2^30 B = 85,094,039,552 B = 85.09 GB."""
    log = REPO / "tests" / "triage_logs" / "pytorch_cuda_current_generate.log"
    app = _app(catalog, tmp_path, CHAT_SPEC, units="gb")
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("f7")
        app.triage_pane.set_log_text(log.read_text())
        await pilot.press("ctrl+r")
        await pilot.pause()
        summary = _text(app.query_one("#triage-summary", Static).content)
        assert "'fits' is judged against 85.09 GB" in summary
        figures = _text(app.query_one("#triage-figures", Static).content)
        # the figures in GB beside the log's own words (the "as written" column quotes it):
        # 79.25 GiB -> 85.09 GB; tried to allocate 1.96 GiB = 2,104,533,975 B -> 2.10 GB
        assert "│ 79.25 GiB             │ 85.09 GB │" in figures
        assert "2.10 GB" in figures
        recs = app.query_one("#triage-recs", DataTable)
        index = [r.change for r in app.session.triage_advice.recommendations].index(
            "concurrency 16 -> 8"
        )
        recs.focus()
        recs.move_cursor(row=index)
        await pilot.click("#triage-apply")
        await pilot.pause()
        logged = _text(app.query_one("#triage-log-view", Static).content)
        predicted = app.session.spec.triage[-1].predicted_peak_bytes
        assert f"{predicted / 1e9:.2f} GB" in logged and "GiB" not in logged
