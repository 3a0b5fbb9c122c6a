"""The app as a newcomer meets it (Pilot): the manual-reserve trap on a task switch, F3 undo,
q / ctrl+q, the compare-with card that stays chosen, go-to-field, F1 in the footer at 80
columns, a focus ring on the focused field."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from textual.widgets import Footer, Input, Select

from vramtui.app.app import VramtuiApp
from vramtui.app.screens.dialogs import ConfirmDialog
from vramtui.app.widgets.spec_form import field_id
from vramtui.builtin_specs import seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.ledger import estimate
from vramtui.session import SizingSession
from vramtui.spec import loads_spec

TODAY = datetime.date(2026, 12, 10)
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None, use_user_config=False)


async def until(pilot, condition, seconds: float = 20.0) -> bool:
    """Let the app work until `condition()` holds (a rebuild of the form can take a while on a
    loaded machine); False when it never does."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return True
        await pilot.pause(0.05)
    return condition()


def seed_app(catalog, tmp_path: Path) -> VramtuiApp:
    session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    return VramtuiApp(session, Config(), draft_file=tmp_path / "state" / "draft.toml")


SEED_AS_LORA = """\
schema_version = 1
name = "lora by hand"
[model]
params = 7e9
[task]
kind = "lora"
[task.lora]
rank = 16
alpha = 32
targets = ["all-linear"]
[weights]
format = "fp16"
[lengths]
seq_len = 2304
[batch]
micro_batch = 1
grad_accum = 1
[runtime]
attention = "sdpa"
[placement]
gpus = 1
[headroom]
mode = "itemised"
[training]
optimizer = "adamw"
master_weights_fp32 = true
grad_dtype = "bf16"
optimizer_state_dtype = "fp32"
grad_checkpointing = "none"
"""


async def test_switching_the_seed_to_lora_leaves_the_manual_reserve_and_f3_undoes_it(
    catalog, tmp_path
):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        s = app.session
        assert s.spec.headroom.mode == "manual" and s.spec.headroom.reserve_gib == 6.0
        app.query_one(f"#{field_id('task.kind')}", Select).value = "lora"
        assert await until(pilot, lambda: "F3 undo" in app.sub_title)
        assert s.spec.task.kind == "lora"
        assert s.spec.headroom.mode == "itemised"  # the seed's 6 GiB no longer stands in
        assert await until(
            pilot,
            lambda: any(
                "headroom switched from a manual 6.0 GiB reserve" in n.message
                for n in app._notifications
            ),
        )
        assert "F3 undo" in app.sub_title
        # The ledger is the itemised one, with the training items it cannot size unknown.
        by_hand = estimate(loads_spec(SEED_AS_LORA, "by hand"))
        assert s.results.estimate.peak_bytes == by_hand.peak_bytes
        unknown = {i.name for i in s.results.estimate.unknown_items}
        assert {"Gradients", "Optimiser states"} <= unknown
        assert app.query_one(f"#{field_id('headroom.mode')}", Select).value == "itemised"
        await pilot.press("f3")
        assert await until(pilot, lambda: "F3 undo" not in app.sub_title)
        assert s.spec.task.kind == "inference" and s.spec.headroom.mode == "manual"
        assert s.spec.headroom.reserve_gib == 6.0
        assert await until(
            pilot,
            lambda: app.query_one(f"#{field_id('task.kind')}", Select).value == "inference",
        )


MANUAL_LLAMA = """\
schema_version = 1
name = "Llama 8B with a manual reserve"
[model]
id = "meta-llama/Llama-3.1-8B-Instruct"
[task]
kind = "inference"
[weights]
format = "bf16"
[lengths]
prompt_tokens = 8000
generated_tokens = 192
[batch]
concurrency = 16
[runtime]
attention = "flash"
kv_cache_dtype = "bf16"
[placement]
gpus = 1
[headroom]
mode = "manual"
reserve_gib = 6.0
reason = "a guess"
"""


async def test_a_reserve_smaller_than_the_itemised_items_is_flagged_first(catalog, tmp_path):
    seed = seed_app(catalog, tmp_path)
    async with seed.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        # 7e9 fp16 inference at 2k: the reserve covers what the itemised ledger knows
        assert not seed.query_one("#ledger-flag").display
    session = SizingSession.from_spec(loads_spec(MANUAL_LLAMA, "t"), None, catalog, today=TODAY)
    app = VramtuiApp(session, Config(), draft_file=tmp_path / "state" / "d2.toml")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        flag = app.query_one("#ledger-flag")
        assert flag.display
        shown = str(flag.render())
        # 16 x 8,192 tokens x 128 KiB of KV alone is 16 GiB, far above the 6 GiB reserve
        assert "manual reserve (6.00 GiB) is smaller" in shown and "itemised" in shown


async def test_ctrl_q_asks_when_there_are_unsaved_changes(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        app.session.set_field("batch.concurrency", "2")
        app.session.dirty = True
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDialog) and app.is_running
        await pilot.press("n")  # stay
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmDialog) and app.is_running
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
    assert "unsaved changes kept as a draft" in app.exit_note


async def test_q_quits_where_no_text_field_has_focus(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        field = app.query_one(f"#{field_id('name')}", Input)
        field.focus()
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running and field.value.endswith("q")  # a letter in a text field
        field.value = field.value[:-1]
        app.session.dirty = False
        app.query_one("#ledger-table").focus()
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
    assert not app.is_running and app.exit_note == ""


async def test_the_chosen_compare_card_stays_chosen(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        bar = app.query_one("#bar-gpu", Select)
        top = next(c for c in app.session.results.shortlist.candidates if c.rank == 1)
        await pilot.pause(0.3)
        assert bar.value == top.gpu.id  # the top-ranked fit, chosen once: no flicker
        bar.value = "a100-80gb-sxm"
        await pilot.pause()
        model = app.query_one(f"#{field_id('model')}", Input)
        model.focus()
        await pilot.press("end", "ctrl+u", *"13e9")
        await pilot.pause(0.3)
        assert app.session.spec.model.params == 13e9
        assert bar.value == "a100-80gb-sxm"


async def test_go_to_field_from_the_palette_and_f1_first_in_the_footer(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Go to field: Concurrent sequences (batch)" in titles or any(
            t.startswith("Go to field: Concurrent sequences") for t in titles
        )
        app.go_to_field("batch.concurrency")
        await pilot.pause()
        assert app.focused is app.query_one(f"#{field_id('batch.concurrency')}", Input)
        # F1 comes early in the footer, so an 80-column footer never cuts it off.
        footer = app.screen.query_one(Footer)
        assert await until(pilot, lambda: bool(footer.query("FooterKey")))
        def f1_shown() -> bool:
            f1 = [k for k in footer.query("FooterKey") if k.key == "f1"]
            return bool(f1) and f1[0].region.width > 0 and f1[0].region.right <= 80

        assert await until(pilot, f1_shown)


def test_a_real_model_in_place_of_the_seeds_parameter_count_switches_to_itemised(catalog):
    """As `--model` does on the command line: the reserve stood for a missing architecture."""
    session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    outcome = session.set_field("model", "meta-llama/Llama-3.1-8B-Instruct")
    assert outcome.valid and session.spec.headroom.mode == "itemised"
    assert outcome.notes and "itemised" in outcome.notes[0]
    names = {i.name for i in session.results.estimate.items}
    assert any(n.startswith("KV cache") for n in names)
    session.undo()
    assert session.spec.model.params == 7e9 and session.spec.headroom.reserve_gib == 6.0
