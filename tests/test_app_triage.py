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


# An OOM with no frames (stage unknown) on an 80 GB card; the job held 60 GiB and asked for
# 60 more, so every change from the error's figures is predicted not to fit.
HUGE_ASK = (
    "INFO 03-20 02:29:07 [core.py:58] Initializing a V1 LLM engine (v0.8.1) with config: "
    "model='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=4096, "
    "tensor_parallel_size=2\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 60.00 GiB. GPU 0 has a total "
    "capacity of 79.25 GiB of which 18.00 GiB is free. Including non-PyTorch memory, this "
    "process has 60.00 GiB memory in use. Of the allocated memory 59.00 GiB is allocated by "
    "PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.\n"
)


async def _read(app, pilot, text: str) -> None:
    await pilot.press("f7")
    app.triage_pane.set_log_text(text)
    await pilot.press("ctrl+r")
    await pilot.pause()


async def test_unknown_stage_asks_and_mismatches_are_named(tmp_path):
    app, _ = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await _read(app, pilot, HUGE_ASK)
        s = app.session
        assert s.triage_reading.phase.phase == "unknown"
        assert app.query_one("#triage-phase", Select).value == "unknown"
        summary = str(app.query_one("#triage-summary").render())
        assert "Which stage was running" in summary and "stage list above" in summary
        assert "mismatch: log: sequence length = 4096 (line 1)" in summary
        assert "mismatch: log: tensor-parallel size = 2 (line 1)" in summary
        unknown_changes = {r.change for r in s.triage_advice.recommendations}
        assert "KV cache dtype bf16 -> fp8" not in unknown_changes  # does not lower load
        # Answering the question with the select gives that stage's changes.
        app.query_one("#triage-phase", Select).value = "generate"
        await pilot.pause()
        assert s.triage_advice.stage_question == ""
        assert "KV cache dtype bf16 -> fp8" in {r.change for r in s.triage_advice.recommendations}
        recs = app.query_one("#triage-recs", DataTable)
        labels = [str(c.label) for c in recs.columns.values()]
        assert "from the error" in labels and "from the ledger" in labels


async def test_applying_a_change_predicted_not_to_fit_asks_first(tmp_path):
    from vramtui.app.screens.dialogs import ConfirmDialog

    app, spec_path = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await _read(app, pilot, HUGE_ASK)
        app.query_one("#triage-phase", Select).value = "generate"
        await pilot.pause()
        s = app.session
        index = [r.change for r in s.triage_advice.recommendations].index(
            "KV cache dtype bf16 -> fp8"
        )
        assert s.triage_advice.recommendations[index].fits is False
        recs = app.query_one("#triage-recs", DataTable)
        recs.focus()
        recs.move_cursor(row=index)
        await pilot.click("#triage-apply")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("n")  # no: nothing changes
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog)
        assert s.spec.runtime.kv_cache_dtype == "bf16" and not s.spec.triage
        await pilot.click("#triage-apply")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await pilot.pause()
        assert s.spec.runtime.kv_cache_dtype == "fp8"
        assert s.spec.triage[-1].outcome == "pending"
        await pilot.click("#triage-other")
        await pilot.pause()
        assert s.spec.triage[-1].outcome == "other error"


async def test_naming_the_failed_card_keeps_smaller_cards_out(tmp_path):
    """A CUDA error without figures: the failed card is unknown until the user names it."""
    app, _ = _app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f7")
        app.triage_pane.set_log_text((LOGS / "cuda_error_no_figures_load.log").read_text())
        await pilot.press("ctrl+r")
        await pilot.pause()
        s = app.session
        assert s.triage_advice.capacity_bytes is None
        summary = str(app.query_one("#triage-summary").render())
        assert "failed card is unknown" in summary
        app.query_one("#triage-failed-gpu", Select).value = "a100-80gb-sxm"
        await pilot.pause()
        a100 = s.catalog.gpus["a100-80gb-sxm"]
        assert s.triage_advice.capacity_bytes == a100.usable().bytes == round(79.14 * 2**30)
        for r in s.triage_advice.recommendations:
            if r.variable == "capacity":
                gpu = s.catalog.gpu_for(s.catalog.offers[r.offer_id])
                assert gpu.usable().bytes >= 0.98 * a100.usable().bytes
        assert "you named" in str(app.query_one("#triage-summary").render())
