"""The app's measurement import (F9) and sizing-sheet export (ctrl+e), driven with the Pilot.

A vLLM start-up log is imported into the chat spec: the figures appear beside the estimates
(weights measured by vLLM against the ledger's 8,030,261,248 x 2 B) and the spec is marked
modified; ctrl+s stores them as [[measured]] items. The sheet is written atomically as HTML.
"""

from __future__ import annotations

import datetime
import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from vramtui.app.app import VramtuiApp
from vramtui.app.screens.dialogs import PathPrompt
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.session import SizingSession
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
CHAT_SPEC = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
VLLM_LOG = Path(__file__).parent / "vllm_logs" / "v1_0.10.1_api_server.log"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _text(widget: Static) -> str:
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(widget.content)
    return out.getvalue()


def _app(tmp_path: Path) -> tuple[VramtuiApp, Path]:
    spec_file = tmp_path / "chat.toml"
    shutil.copy(CHAT_SPEC, spec_file)
    catalog = load_catalog(None, use_user_config=False)
    session = SizingSession.from_spec(
        load_spec(spec_file), spec_file, catalog, today=datetime.date(2026, 12, 10)
    )
    return VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml"), spec_file


async def test_f9_imports_a_vllm_log_beside_the_estimates(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(VLLM_LOG, tmp_path / "v.log")
    app, spec_file = _app(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        measured = app.query_one("#ledger-measured", Static)
        assert "No measurement yet" in _text(measured)
        await pilot.press("f9")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        await pilot.press(*"v.log", "enter")
        await pilot.pause()
        shown = _text(measured)
        assert "weights+quant_metadata" in shown
        assert "KV cache tokens" in shown and "413,200 tokens" in shown
        assert "131,072 tokens needed" in shown  # 16 x 8,192
        assert "modified" in app.sub_title
        await pilot.press("ctrl+s")
        await pilot.pause()
    saved = load_spec(spec_file)
    assert {m.quantity for m in saved.measured} >= {"item", "kv_cache_tokens", "max_concurrency"}
    weights = next(m for m in saved.measured if m.item == "weights+quant_metadata")
    assert weights.bytes == round(14.9889 * 2**30)


async def test_f9_with_a_file_that_is_not_a_log_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "n.txt").write_text("hello\n")
    app, _ = _app(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.press("f9")
        await pilot.pause()
        await pilot.press(*"n.txt", "enter")
        await pilot.pause()
        errors = [n.message for n in app._notifications if n.severity == "error"]
        assert errors and "neither a vramtui probe file" in errors[-1]
        assert not app.session.dirty


async def test_ctrl_e_exports_the_sheet_as_html(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app, _ = _app(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        await pilot.press("end", "ctrl+u", *"s.html", "enter")
        await pilot.pause()
    html = (tmp_path / "s.html").read_text()
    assert "meta-llama/Llama-3.1-8B-Instruct" in html and "@media print" in html
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") or "tmp" in p.name]


async def test_ctrl_e_exports_from_a_focused_text_field(tmp_path, monkeypatch):
    from textual.widgets import Input

    monkeypatch.chdir(tmp_path)
    app, _ = _app(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        field = app.screen.query(Input).first()
        field.focus()
        await pilot.pause()
        assert app.focused is field
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        # Inside the dialog ctrl+e is the field's end-of-line again: no second dialog.
        await pilot.press("home", "ctrl+e")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt) and len(app.screen_stack) == 2
        await pilot.press("ctrl+u", *"f.html", "enter")
        await pilot.pause()
    assert "@media print" in (tmp_path / "f.html").read_text()


async def test_dry_run_button_traces_in_the_background(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from textual.widgets import Button

    app, _ = _app(tmp_path)
    async with app.run_test(size=(140, 50)) as pilot:
        button = app.query_one("#dry-run", Button)
        button.press()
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = _text(app.query_one("#ledger-dryrun", Static))
        assert "dry-run live tensor bytes" in shown
        # a meta-device trace is a traced estimate, never labelled measured
        assert "≈ traced estimate (dry-run live tensor bytes)" in shown
        assert "= measured" not in shown
        assert "attention (flash)" in shown
        assert "prefill" in shown and "decode" in shown
        assert not button.disabled
        # an edit makes the trace stale, and says so
        app.session.set_field("batch.concurrency", "8")
        app._refresh_all()
        await pilot.pause()
        assert "earlier version of the spec" in _text(app.query_one("#ledger-dryrun", Static))
