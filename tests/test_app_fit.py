"""The Fit tab, driven with the Pilot: the fit search for the current spec on the compare card,
run in a worker only while the tab is shown, in the display unit the user chose.

The figures are checked against `fit_report` run here on the same spec and card, and against
the seed worked by hand: 7e9 parameters in fp16 (14e9 B) + the manual 6 GiB reserve, no margin;
fp32 weights are 28e9 B."""

from __future__ import annotations

import datetime
import io
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Input, Select, Static

import vramtui.fit_search
from vramtui.app.app import VramtuiApp
from vramtui.builtin_specs import seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.fit_capacity import card_capacity, spec_margin
from vramtui.fit_search import fit_report
from vramtui.models.resolve import resolve_model
from vramtui.session import SizingSession
from vramtui.units import format_bytes_readable

TODAY = datetime.date(2026, 12, 10)
SIZE = (120, 40)
GIB = 2**30
SEED_FP16_PEAK = 14 * 10**9 + 6 * GIB  # weights + the manual reserve
SEED_FP32_PEAK = 28 * 10**9 + 6 * GIB


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None, use_user_config=False)


def seed_app(catalog, tmp_path: Path) -> VramtuiApp:
    session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    return VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")


def direct_report(catalog, gpu_id: str):
    """The fit search on the seed and a card, run here without the app."""
    spec = seed_example_spec()
    arch, checkpoint = resolve_model(spec.model, None)
    gpu = catalog.gpus[gpu_id]
    return fit_report(
        spec, arch, card_capacity(gpu), spec_margin(spec), checkpoint, catalog=catalog
    )


def fit_rows(app) -> dict[str, list[str]]:
    t = app.fit_pane.query_one("#fit-table", DataTable)
    return {key.value: [str(c) for c in t.get_row(key)] for key in (r.key for r in t.ordered_rows)}


def shown(app, selector: str) -> str:
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(app.query_one(selector, Static).content)
    return out.getvalue()


async def settle(pilot) -> None:
    """Wait for the debounced search to run and its answer to be drawn."""
    pane = pilot.app.fit_pane
    deadline = time.monotonic() + 60  # a loaded machine (a parallel test run) is slow
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if not pane.computing:
            await pilot.pause()
            return
    raise AssertionError("the fit search never finished")


def usable(catalog, gpu_id: str) -> int:
    return catalog.gpus[gpu_id].usable().bytes


@pytest.mark.anyio
async def test_fit_tab_rows_follow_the_compare_card_and_the_unit(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        first = app.ledger_pane.compare_id
        assert first is not None
        await pilot.press("f10")
        await settle(pilot)
        assert app.query_one("#tabs").active == "fit"

        # The seed on the start-up compare card: fp16 fits, fp32 is the next value up.
        report = direct_report(catalog, first)
        r = report.result("weight_format")
        row = fit_rows(app)["weight_format"]
        assert row[2] == str(r.best.value) == "fp16"
        assert row[4] == str(r.next_up.value) == "fp32"
        assert r.next_up.peak_bytes == SEED_FP32_PEAK
        overflow = SEED_FP32_PEAK - usable(catalog, first)  # no margin on the seed
        assert r.overflow_bytes == overflow
        assert row[5] == f"+{format_bytes_readable(overflow, 'gib')}"
        assert row[3] == "load" and row[6] == "fits"
        assert set(fit_rows(app)) == {x.knob.key for x in report.results}
        assert "estimated" in shown(app, "#fit-status")

        # Another card in the Fit tab: the ledger compares with it too, and the rows follow.
        app.fit_pane.query_one("#fit-gpu", Select).value = "rtx-4080"
        await settle(pilot)
        assert app.ledger_pane.compare_id == "rtx-4080"
        report = direct_report(catalog, "rtx-4080")
        r = report.result("weight_format")
        row = fit_rows(app)["weight_format"]
        # 14e9 B + 6 GiB = 19.04 GiB is over a 4080's 15.70 GiB; fp8 halves the weights.
        assert report.verdict.status == "does_not_fit"
        assert row[2] == str(r.best.value) == "fp8"
        assert row[4] == str(r.next_up.value) == "fp16"
        overflow = SEED_FP16_PEAK - usable(catalog, "rtx-4080")
        assert r.overflow_bytes == overflow
        assert row[5] == f"+{format_bytes_readable(overflow, 'gib')}" == "+3.34 GiB"
        changes = shown(app, "#fit-changes")
        assert report.changes
        for ch in report.changes:
            assert str(ch.change).split(" (")[0] in changes
        assert "weights fp16 -> fp8" in changes

        # GB mode: the same bytes in GB, with no new search.
        calls = []
        real = vramtui.fit_search.fit_report
        vramtui.fit_search.fit_report = lambda *a, **k: calls.append(1) or real(*a, **k)
        try:
            await pilot.press("f4")
            await pilot.pause()
            assert app.unit == "gb"
            row = fit_rows(app)["weight_format"]
            assert row[5] == f"+{format_bytes_readable(overflow, 'gb')}"
            assert row[5] == f"+{overflow / 1e9:.2f} GB"
            assert "GB" in shown(app, "#fit-status") and "GiB" not in shown(app, "#fit-head")
            assert calls == []
        finally:
            vramtui.fit_search.fit_report = real


@pytest.mark.anyio
async def test_fit_searches_only_when_shown_and_says_computing(catalog, tmp_path, monkeypatch):
    app = seed_app(catalog, tmp_path)
    gate = threading.Event()
    calls = []
    real = vramtui.fit_search.fit_report

    def gated(*args, **kwargs):
        calls.append(args[2].gpu.id)
        gate.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(vramtui.fit_search, "fit_report", gated)
    async with app.run_test(size=SIZE) as pilot:
        # Edits and a new compare card on the Sizing tab: no search while the tab is hidden.
        app.ledger_pane.compare_with("rtx-4090")
        field = app.query_one("#f-headroom-reserve_gib", Input)
        field.focus()
        await pilot.press("end", "ctrl+u", *"4")
        await pilot.pause(0.5)
        assert calls == []
        assert app.session.spec.headroom.reserve_gib == 4

        await pilot.press("f10")
        for _ in range(200):
            await pilot.pause(0.02)
            if calls:
                break
        assert calls == ["rtx-4090"]
        assert "computing" in shown(app, "#fit-status")
        assert app.fit_pane.query_one("#fit-table", DataTable).row_count == 0
        gate.set()
        await settle(pilot)
        assert calls == ["rtx-4090"]  # one search, for the spec as typed
        row = fit_rows(app)["weight_format"]
        # 14e9 B + a 4 GiB reserve fits a 4090; fp32 (28e9 B + 4 GiB) does not.
        assert row[2] == "fp16" and row[4] == "fp32"
        over = 28 * 10**9 + 4 * GIB - usable(catalog, "rtx-4090")
        assert row[5] == f"+{format_bytes_readable(over, 'gib')}"


@pytest.mark.anyio
async def test_fit_palette_and_help(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Show fit"].callback()
        await settle(pilot)
        assert app.query_one("#tabs").active == "fit"
        assert app.focused is app.fit_pane.query_one("#fit-table")
        assert "tab.fit" in {b.id for b in VramtuiApp.BINDINGS}


def test_fit_tab_snapshot(snap_compare, catalog, tmp_path):
    """The Fit tab on the seed and an RTX 4080: it does not fit as it is; fp8 weights, two GPUs
    or a bigger card would."""

    async def show(pilot):
        for widget in pilot.app.query(Input):
            widget.cursor_blink = False
        await pilot.press("f10")
        pilot.app.fit_pane.query_one("#fit-gpu", Select).value = "rtx-4080"
        await settle(pilot)

    assert snap_compare(seed_app(catalog, tmp_path), terminal_size=SIZE, run_before=show)
