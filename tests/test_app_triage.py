"""The triage wizard in the app, driven with the Pilot: read, correct the stage, apply one
change, report its outcome, save; the spec on disk keeps the attempt log."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Select

from vramtui.app.app import VramtuiApp
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.session import SizingSession
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
LOGS = REPO / "tests" / "triage_logs"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _app(tmp_path: Path) -> tuple[VramtuiApp, Path]:
    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    session = SizingSession.from_spec(
        load_spec(spec_path),
        spec_path,
        load_catalog(use_user_config=False),
        today=datetime.date(2026, 12, 10),
    )
    return VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml"), spec_path


async def test_read_apply_outcome_and_save(tmp_path):
    app, spec_path = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f7")
        assert app.tabs.active == "triage"
        app.triage_pane.set_log_text((LOGS / "pytorch_cuda_current_generate.log").read_text())
        await pilot.press("ctrl+r")
        await pilot.pause()
        s = app.session
        assert s.triage_reading.is_oom and s.triage_reading.phase.phase == "generate"
        recs = app.query_one("#triage-recs", DataTable)
        assert recs.row_count == len(s.triage_advice.recommendations) > 0
        assert app.query_one("#triage-phase", Select).value == "generate"
        # Pick the concurrency change and apply it.
        index = [r.change for r in s.triage_advice.recommendations].index("concurrency 16 -> 8")
        recs.focus()
        recs.move_cursor(row=index)
        await pilot.click("#triage-apply")
        await pilot.pause()
        assert s.spec.batch.concurrency == 8
        assert s.spec.triage[-1].variable == "cache" and s.spec.triage[-1].outcome == "pending"
        # The form shows the changed value.
        assert app.form.query_one("#f-batch-concurrency").value == "8"
        await pilot.click("#triage-still")
        await pilot.pause()
        assert s.spec.triage[-1].outcome == "still out of memory"
        await pilot.click("#triage-measured")
        await pilot.pause()
        assert any(m.quantity == "process_in_use" for m in s.spec.measured)
        await pilot.press("ctrl+s")
        await pilot.pause()
    saved = load_spec(spec_path)
    assert saved.batch.concurrency == 8
    assert [a.outcome for a in saved.triage] == ["still out of memory"]
    assert saved.measured


async def test_the_stage_can_be_corrected_and_the_advice_follows(tmp_path):
    app, _ = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f7")
        app.triage_pane.set_log_text((LOGS / "pytorch_cuda_current_generate.log").read_text())
        await pilot.press("ctrl+r")
        await pilot.pause()
        app.query_one("#triage-phase", Select).value = "load"
        await pilot.pause()
        s = app.session
        assert s.triage_reading.phase.phase == "load"
        assert "set by hand" in s.triage_reading.phase.reason
        assert s.triage_advice.stages == ("load",)
        assert all(r.variable != "micro_batch" for r in s.triage_advice.recommendations)


async def test_text_without_an_oom_says_so(tmp_path):
    app, _ = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f7")
        app.triage_pane.set_log_text((LOGS / "not_oom_valueerror.log").read_text())
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.session.triage_reading.is_oom is False
        assert app.session.triage_advice is None
        assert app.query_one("#triage-recs", DataTable).row_count == 0
