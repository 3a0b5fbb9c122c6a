"""The app's model field: typing looks in the caches only; Enter asks the Hub."""

from __future__ import annotations

import datetime

import pytest
from test_model_resolution import C2, QWEN05, QWEN05_PARAMS, add_models
from textual.widgets import Input

from vramtui.app.app import VramtuiApp
from vramtui.app.widgets.spec_form import field_id
from vramtui.builtin_specs import seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.session import SizingSession

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_enter_in_the_model_field_fetches_from_the_hub(fake_hub, tmp_path):
    add_models(fake_hub)
    catalog = load_catalog(None, use_user_config=False)
    session = SizingSession.from_spec(
        seed_example_spec(), None, catalog, today=datetime.date(2026, 12, 10)
    )
    app = VramtuiApp(session, Config(), draft_dir=tmp_path / "drafts")
    async with app.run_test(size=(120, 40)) as pilot:
        field = app.query_one(f"#{field_id('model')}", Input)
        field.focus()
        await pilot.press("end", "ctrl+u", *QWEN05)
        await pilot.pause()
        assert "press Enter in the model field" in app.session.errors["model"]
        assert fake_hub.requests == []  # each key typed stayed off the network
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "model" not in app.session.errors
        assert app.session.results.arch.param_count == QWEN05_PARAMS
        assert app.session.form["model"]["revision"] == C2
