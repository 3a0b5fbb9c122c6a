"""The terminal app driven as a user drives it (Textual's Pilot, headless): typing into fields,
invalid values, task switches, units, the shortlist, save / save as / open, the autosaved
draft and its recovery, help, the keymap and the command palette.

Every figure the app shows is checked against the domain computed independently (the same spec
parsed with `loads_spec` and estimated with `vramtui.ledger.estimate`), not against itself.
"""

from __future__ import annotations

import datetime
import io
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w
from rich.console import Console
from textual.binding import Binding
from textual.widgets import DataTable, Input, Select, Static
from vramtui.app.app import VramtuiApp
from vramtui.app.screens.dialogs import HelpScreen, PathPrompt, RecoverDraft
from vramtui.app.widgets.spec_form import FieldRow, SpecForm, field_id, row_id
from vramtui.builtin_specs import SEED_EXAMPLE_TOML, seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.drafts import read_draft, write_draft
from vramtui.ledger import estimate
from vramtui.models.resolve import resolve_model
from vramtui.session import SizingSession
from vramtui.spec import load_spec, loads_spec

REPO = Path(__file__).resolve().parent.parent
CHAT_SPEC = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
TODAY = datetime.date(2026, 12, 10)
SIZE = (120, 40)
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None, use_user_config=False)


def seed_app(catalog, tmp_path: Path, **kwargs) -> VramtuiApp:
    session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    kwargs.setdefault("draft_file", tmp_path / "state" / "draft.toml")
    return VramtuiApp(session, kwargs.pop("config", Config()), **kwargs)


def file_app(catalog, path: Path, tmp_path: Path, **kwargs) -> VramtuiApp:
    session = SizingSession.from_spec(load_spec(path), path, catalog, today=TODAY)
    kwargs.setdefault("draft_file", tmp_path / "state" / "draft.toml")
    return VramtuiApp(session, kwargs.pop("config", Config()), **kwargs)


# ---------------------------------------------------------------------------------- helpers


def ledger_rows(app) -> dict[str, list[str]]:
    """Item name -> [size, name, status, stages] as shown."""
    t = app.query_one("#ledger-table", DataTable)
    rows = [[str(cell) for cell in t.get_row_at(i)] for i in range(t.row_count)]
    return {r[1]: r for r in rows}


def shown_text(renderable) -> str:
    """What a widget's content reads as, rendered wide enough not to wrap."""
    out = io.StringIO()
    Console(file=out, width=300, color_system=None, legacy_windows=False).print(renderable)
    return out.getvalue()


def static_text(app, selector: str) -> str:
    return shown_text(app.query_one(selector, Static).content)


async def type_into(pilot, path: str, text: str) -> None:
    """Focus the field's input, clear it (End, then ctrl+u) and type `text` key by key."""
    widget = pilot.app.query_one(f"#{field_id(path)}", Input)
    widget.focus()
    await pilot.pause()
    await pilot.press("end", "ctrl+u", *text)
    await pilot.pause()


async def choose(pilot, path: str, option: str) -> None:
    """Pick `option` in a field's Select with the keyboard: open it, move to it, Enter."""
    select = pilot.app.query_one(f"#{field_id(path)}", Select)
    options = [value for _, value in select._options if value is not Select.NULL]
    current = options.index(select.value)
    target = options.index(option)
    select.focus()
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()
    key = "down" if target > current else "up"
    await pilot.press(*[key] * abs(target - current), "enter")
    await pilot.pause()
    assert select.value == option


def independent_estimate(toml_text: str):
    spec = loads_spec(toml_text, "<test>")
    arch, checkpoint = resolve_model(spec.model, None)
    return estimate(spec, arch, checkpoint)


def assert_form_matches_session(app) -> None:
    """The form shows exactly the fields that apply, in order, each with the session's text."""
    form = app.query_one(SpecForm)
    assert [r.field.path for r in form.query(FieldRow)] == [f.path for f in app.session.fields()]
    for row in form.query(FieldRow):
        widget = row.query_one(f"#{field_id(row.field.path)}")
        text = app.session.text(row.field.path)
        # (a Select may show its first option where the form leaves a required choice unset)
        if isinstance(widget, Input) or (isinstance(widget, Select) and text):
            assert widget.value == text, row.field.path


def notifications(app) -> list[tuple[str, str]]:
    return [(n.severity, n.message) for n in app._notifications]


# ---------------------------------------------------------------------------------- (a) typing


async def test_typing_a_model_id_recomputes_the_ledger(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        assert "Weights: all parameters (fp16)" in ledger_rows(app)
        assert app.query_one("#f-model", Input).value == "7000000000"

        await type_into(pilot, "model", LLAMA)
        # Every key reached the field although the form gained a row (Revision) on the first.
        assert app.query_one("#f-model", Input).value == LLAMA
        assert app.focused is app.query_one("#f-model", Input)
        assert app.query(f"#{field_id('model.revision')}")
        assert app.session.form["model"] == {"id": LLAMA}
        assert app.session.is_valid
        rows = ledger_rows(app)
        assert "Weights: attention (fp16)" in rows and "Weights: MLP (fp16)" in rows
        assert LLAMA in static_text(app, "#ledger-title")
        # The seed's reserve stood for a missing architecture: a real model leaves it for the
        # itemised ledger (said in the title, F3 undoes it), as `--model` does.
        assert app.query_one(f"#{field_id('headroom.mode')}", Select).value == "itemised"
        assert "F3 undo" in app.sub_title

        # Itemised headroom: the KV cache, activations and overheads appear as their own rows.
        await choose(pilot, "headroom.mode", "itemised")
        rows = ledger_rows(app)
        assert "KV cache (fp16)" in rows
        assert "Manual reserve (6 GiB)" not in rows
        assert not app.query(f"#{field_id('headroom.reserve_gib')}")
        assert app.session.is_valid and app.session.dirty
        assert "modified" in app.sub_title

    toml = SEED_EXAMPLE_TOML.replace("params = 7e9", f'id = "{LLAMA}"')
    head, _, _ = toml.partition("[headroom]")
    expected = independent_estimate(head + '[headroom]\nmode = "itemised"\n')
    got = app.session.results.estimate
    assert got.peak_bytes == expected.peak_bytes
    assert [i.key for i in got.items] == [i.key for i in expected.items]
    kv = next(i for i in expected.items if i.name.startswith("KV cache"))
    assert kv.max_bytes == next(i for i in got.items if i.key == kv.key).max_bytes


# ---------------------------------------------------------------------------------- (b) invalid


@pytest.mark.parametrize(
    ("path", "prefix", "bad_key", "error_path", "reason", "good"),
    [
        # "8" is valid (8 prompt tokens), "8k" is not a number
        ("lengths.prompt_tokens", "8", "k", "lengths.prompt_tokens", "cannot read '8k'", "4000"),
        # "" is missing, "3" is a spec error: TP 3 does not divide 1 GPU; the message names
        # placement.gpus, so that is the field marked
        (
            "placement.tensor_parallel",
            "",
            "3",
            "placement.gpus",
            "not a multiple of tensor_parallel",
            "1",
        ),
    ],
)
async def test_invalid_value_is_marked_and_the_last_estimate_kept(
    catalog, tmp_path, path, prefix, bad_key, error_path, reason, good
):
    app = file_app(catalog, CHAT_SPEC, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        original = ledger_rows(app)
        await type_into(pilot, path, prefix)
        last_valid_rows = ledger_rows(app)
        last_valid_peak = chat_estimate(path, prefix).peak_bytes if prefix else None
        await pilot.press(bad_key)
        await pilot.pause()

        row = app.query_one(f"#{row_id(error_path)}", FieldRow)
        assert row.has_class("-invalid")
        error = row.query_one(".field-error", Static)
        assert error.display
        assert reason in shown_text(error.content)
        assert reason in app.session.errors[error_path]
        assert [r.field.path for r in app.query(".-invalid")] == [error_path]
        assert app.query_one(f"#{field_id(path)}", Input).value == prefix + bad_key
        assert "invalid field" in app.sub_title
        # the ledger keeps the last valid spec's estimate
        assert ledger_rows(app) == last_valid_rows
        if last_valid_peak is not None:
            assert app.session.results.estimate.peak_bytes == last_valid_peak
        else:
            assert ledger_rows(app) == original

        await type_into(pilot, path, good)
        assert not row.has_class("-invalid")
        assert not error.display
        assert app.session.is_valid
        assert "invalid" not in app.sub_title
        assert app.session.results.estimate.peak_bytes == chat_estimate(path, good).peak_bytes
        if path == "lengths.prompt_tokens":
            kv = "KV cache (bf16)"
            assert ledger_rows(app)[kv][0] != original[kv][0]  # 4000 + 192 tokens, not 8192
        else:
            assert ledger_rows(app) == original


def chat_estimate(path: str, text: str):
    """The chat sample with one integer key set, estimated without the app."""
    section, key = path.split(".")
    data = tomllib.loads(CHAT_SPEC.read_text())
    data[section][key] = int(text)
    return independent_estimate(tomli_w.dumps(data))


# ---------------------------------------------------------------------------------- (c) task kind


async def test_switching_task_to_qlora_rebuilds_the_form(catalog, tmp_path):
    app = file_app(catalog, CHAT_SPEC, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        assert not app.query("#f-task-lora-rank")
        await choose(pilot, "task.kind", "qlora")

        for fid in (
            "#f-task-lora-rank",
            "#f-task-lora-targets",
            "#f-lengths-seq_len",
            "#f-training-optimizer",
            "#f-weights-double_quant",
        ):
            assert app.query(fid), fid
        for fid in ("#f-lengths-prompt_tokens", "#f-runtime-kv_cache_dtype"):
            assert not app.query(fid), fid
        assert app.query_one("#f-weights-format", Select).value == "nf4"
        assert app.query_one("#f-task-lora-rank", Input).value == "16"
        assert_form_matches_session(app)
        assert app.session.is_valid
        names = list(ledger_rows(app))
        assert any(n.startswith("LoRA adapter") for n in names)
        assert any(n.startswith("Optimiser states") for n in names)
        assert any(n.startswith("Gradients") for n in names)
        assert not any(n.startswith("KV cache") for n in names)

        # back to inference, then lora: kept rows are refreshed (weights nf4 -> bf16), and a
        # required choice the switch leaves unset (ZeRO / FSDP) does not break the refresh
        for kind in ("inference", "lora"):
            await choose(pilot, "task.kind", kind)
            await pilot.pause()
            assert_form_matches_session(app)
        assert app.query_one("#f-weights-format", Select).value == "bf16"
        assert app.session.form["weights"]["format"] == "bf16"
        assert app.session.is_valid


# ---------------------------------------------------------------------------------- (d) units


# ---------------------------------------------------------------------------------- (e) shortlist


async def test_shortlist_tab_ranks_fits_first_and_shows_the_selected_candidate(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f6")
        for _ in range(100):  # a loaded machine can take a while to switch tabs
            await pilot.pause(0.05)
            if app.query_one("#tabs").active == "shortlist":
                break
        assert app.query_one("#tabs").active == "shortlist"
        table = app.query_one("#shortlist-table", DataTable)
        keys = [row.key.value for row in table.ordered_rows]
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        statuses = [r[1] for r in rows]  # columns: #, status, total cost, offer, why
        order = {"fit": 0, "needs verification": 1, "excluded": 2}
        assert statuses == sorted(statuses, key=order.__getitem__)
        fits = [r for r in rows if r[1] == "fit"]
        assert fits and [r[0] for r in fits] == [str(i) for i in range(1, len(fits) + 1)]
        assert {"seed-rtx-4090-x1", "seed-rtx-6000-ada-x1"} <= set(keys)
        sl = app.session.results.shortlist
        assert keys == [c.offer.id for c in sl.candidates]
        assert "campaign 3 day(s)" in static_text(app, "#shortlist-title")

        first = sl.candidates[0]
        assert first.offer.id in static_text(app, "#candidate-detail")
        table.focus()
        await pilot.pause()
        await pilot.press("down")
        await pilot.pause()
        second = sl.candidates[1]
        detail = static_text(app, "#candidate-detail")
        assert second.offer.id in detail and first.offer.id not in detail
        # the ledger's bar compares against the highlighted candidate's card
        assert app.query_one("#bar-gpu", Select).value == second.gpu.id

        # back to sizing with the focus in the shortlist table (it used to bounce back)
        await pilot.press("f5")
        await pilot.pause()
        assert app.query_one("#tabs").active == "sizing"
        assert app.focused is not None and app.query_one("#sizing") in app.focused.ancestors
        await pilot.press("f6")
        await pilot.pause()
        assert app.query_one("#tabs").active == "shortlist"
        assert app.focused is table


# ---------------------------------------------------------------------------------- (f) files


async def test_save_save_as_open_and_refused_save(catalog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths to type (each key is a Pilot round)
    spec_file = tmp_path / "spec.toml"
    shutil.copy(REPO / "sample_specs" / "seed-7b-fp16-inference.toml", spec_file)
    chat = tmp_path / "c.toml"
    shutil.copy(CHAT_SPEC, chat)
    app = file_app(catalog, spec_file, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        assert app.sub_title == str(spec_file)
        await type_into(pilot, "lengths.prompt_tokens", "4")
        assert "modified" in app.sub_title
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert load_spec(spec_file).lengths.prompt_tokens == 4
        assert "modified" not in app.sub_title and not app.session.dirty
        assert ("information", f"saved {spec_file}") in notifications(app)

        # an invalid field: save is refused, the file is left as it was
        saved = spec_file.read_bytes()
        await pilot.press("k")  # "4k"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert spec_file.read_bytes() == saved
        errors = [m for sev, m in notifications(app) if sev == "error"]
        assert errors and "invalid value (lengths.prompt_tokens)" in errors[-1]
        assert "modified" in app.sub_title

        # save as: F2, type a path, Enter
        await pilot.press("backspace", "2")  # "42"
        other = tmp_path / "o.toml"
        await pilot.press("f2")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        assert app.screen.query_one("#path-input", Input).value == str(spec_file)
        await pilot.press("end", "ctrl+u", *other.name, "enter")
        await pilot.pause()
        assert not isinstance(app.screen, PathPrompt)
        assert load_spec(other).lengths.prompt_tokens == 42
        assert load_spec(spec_file).lengths.prompt_tokens == 4
        assert app.session.path.resolve() == other
        assert "modified" not in app.sub_title

        # open a file that is not there: an error, the session stays
        before = app.session
        await pilot.press("ctrl+o")
        await pilot.pause()
        await pilot.press(*"n.toml", "enter")
        await pilot.pause()
        assert app.session is before
        assert any(sev == "error" and "not found" in m for sev, m in notifications(app))

        # open: ctrl+o, type a sample spec's path, Enter
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        await pilot.press(*chat.name, "enter")
        await pilot.pause()
        assert app.session.path.resolve() == chat
        assert app.query_one("#f-model", Input).value == LLAMA
        assert app.query_one("#f-lengths-prompt_tokens", Input).value == "8000"
        assert app.query_one("#f-batch-concurrency", Input).value == "16"
        assert app.query_one("#f-headroom-mode", Select).value == "itemised"
        assert_form_matches_session(app)
        assert "KV cache (bf16)" in ledger_rows(app)
        assert app.sub_title == "c.toml"


# ---------------------------------------------------------------------------------- (g) drafts


async def test_startup_edits_nothing_and_autosave_writes_the_draft(
    catalog, tmp_path, monkeypatch
):
    import vramtui.app.app as app_module

    app = seed_app(catalog, tmp_path)
    draft_file = app.draft_file
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # inputs report their text when mounted: that is no edit, and nothing is autosaved
        assert not app.session.dirty and app._autosave_timer is None
        assert app.sub_title == "unsaved spec"
        # Typing is no save: with a long delay (so that a slow machine's keystrokes cannot
        # outlast it) the draft waits for the timer...
        monkeypatch.setattr(app_module, "AUTOSAVE_DELAY_S", 60.0)
        await type_into(pilot, "lengths.prompt_tokens", "300")
        assert not draft_file.exists() and app._autosave_timer is not None
        # ...and the timer, restarted by the last keystroke, writes it.
        monkeypatch.setattr(app_module, "AUTOSAVE_DELAY_S", 0.3)
        await pilot.press("0")
        await pilot.pause(1.0)
        draft = read_draft(draft_file)
        assert draft is not None
        assert draft.form["lengths"]["prompt_tokens"] == 3000
        assert draft.origin == ""
        # a bad text is kept in the draft as typed (save_draft_now: what the timer calls)
        await pilot.press("k")
        await pilot.pause()
        app.save_draft_now()
        assert read_draft(draft_file).texts == {"lengths.prompt_tokens": "3000k"}
        await type_into(pilot, "lengths.prompt_tokens", "3")
        await pilot.press("ctrl+q")  # quitting with unsaved edits asks, and keeps the draft
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
    assert read_draft(draft_file).form["lengths"]["prompt_tokens"] == 3
    assert "unsaved changes kept as a draft" in app.exit_note


def write_seed_draft(catalog, draft_file: Path) -> None:
    """A draft as the app writes it: 4 concurrent sequences, and '8k' typed as prompt tokens."""
    session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    session.set_field("batch.concurrency", "4")
    session.set_field("lengths.prompt_tokens", "8k")
    write_draft(session.form, session.texts, session.path, draft_file)


def offering_app(catalog, tmp_path: Path) -> tuple[VramtuiApp, Path]:
    """A draft left by an earlier instance in the drafts dir, and a new app offering it."""
    drafts = tmp_path / "state" / "drafts"
    left = drafts / "new-20261210-101010-abcdef.toml"
    write_seed_draft(catalog, left)
    app = seed_app(catalog, tmp_path, offer_draft=True, draft_file=None, draft_dir=drafts)
    return app, left


async def test_draft_is_offered_and_recovered_with_an_invalid_text(catalog, tmp_path):
    app, left = offering_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, RecoverDraft)
        # one line: what, where, age, and the fields that differ from the seed example
        assert app.screen.lines == [
            "Seed example: 7B parameters, 16-bit inference (new spec), just now: "
            "2 fields differ: batch.concurrency, lengths.prompt_tokens"
        ]
        await pilot.press("r")
        await pilot.pause()
        assert not isinstance(app.screen, RecoverDraft)
        assert app.query_one("#f-lengths-prompt_tokens", Input).value == "8k"
        assert app.query_one("#f-batch-concurrency", Input).value == "4"
        assert app.query_one(f"#{row_id('lengths.prompt_tokens')}").has_class("-invalid")
        assert app.session.dirty and not app.session.is_valid
        assert "invalid field" in app.sub_title
        # the recovered draft is now this instance's own: its autosaves go there
        assert app.draft_file == left
        # fixing the field computes from the recovered form (4 concurrent sequences)
        await type_into(pilot, "lengths.prompt_tokens", "2")
        assert app.session.is_valid
        assert app.session.results.spec.batch.concurrency == 4
        assert app.session.results.spec.lengths.prompt_tokens == 2
        app.save_draft_now()
        assert read_draft(left).form["lengths"]["prompt_tokens"] == 2


async def test_draft_set_aside(catalog, tmp_path):
    app, left = offering_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, RecoverDraft)
        await pilot.press("d")
        await pilot.pause()
        assert not isinstance(app.screen, RecoverDraft)
        assert app.query_one("#f-lengths-prompt_tokens", Input).value == "2048"
        assert not app.session.dirty
    assert not left.exists()
    (aside,) = (left.parent / "set-aside").iterdir()
    assert aside.name.startswith(left.stem + "-")
    assert read_draft(aside).texts == {"lengths.prompt_tokens": "8k"}


async def test_draft_skipped_stays_for_the_next_start(catalog, tmp_path):
    app, left = offering_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, RecoverDraft)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, RecoverDraft)
        await type_into(pilot, "name", "another edit")
        app.save_draft_now()
        assert app.draft_file != left  # this instance's edits never go into the left draft
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert read_draft(left).texts == {"lengths.prompt_tokens": "8k"}


# ---------------------------------------------------------------------------------- (h) help, keys


async def test_help_keymap_and_config(catalog, tmp_path):
    config = Config(
        units="mib",
        keymap={"units": "f9"},
        warnings=("config.toml: unknown key 'colour' ignored",),
    )
    app = seed_app(catalog, tmp_path, config=config)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one("#ledger-table", DataTable)
        assert app.unit == "mib" and str(table.columns["size"].label) == "MiB"
        assert ("warning", "config.toml: unknown key 'colour' ignored") in notifications(app)
        await pilot.press("f4")
        await pilot.pause()
        assert app.unit == "mib"  # f4 no longer cycles the units
        await pilot.press("f9")
        await pilot.pause()
        assert app.unit == "bytes" and str(table.columns["size"].label) == "bytes"

        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = static_text(app.screen, "#help-keys")
        for b in VramtuiApp.BINDINGS:
            assert f"id: {b.id}" in keys
            assert b.description in keys
        units_line = next(ln for ln in keys.splitlines() if "id: units" in ln)
        assert units_line.split()[0] == "f9"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_units_key_palette_and_clean_quit(catalog, tmp_path):
    app = seed_app(catalog, tmp_path)
    app.draft_file.parent.mkdir(parents=True, exist_ok=True)
    app.draft_file.write_text("stale")  # a draft left from before: a clean quit removes it
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one("#ledger-table", DataTable)
        weights = "Weights: all parameters (fp16)"
        seen = []
        for _ in range(5):
            seen.append((str(table.columns["size"].label), ledger_rows(app)[weights][0]))
            await pilot.press("f4")
            await pilot.pause()
        assert [label for label, _ in seen] == ["GiB", "GB", "MiB", "bytes", "GiB"]
        # Each size carries its status mark ("~" estimated) so it shows at any width.
        assert seen[0][1] == "~ 13.04 GiB"  # 7e9 x 2 B / 2^30
        assert seen[1][1] == "~ 14.00 GB"
        assert seen[2][1].replace(",", "").startswith("~ 13351.")  # 14e9 / 2^20 MiB
        assert seen[3][1].replace(",", "").startswith("~ 14000000000")
        assert app.unit == "gb"

        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in (
            "Save spec",
            "Save spec as",
            "Open spec",
            "Cycle units",
            "Show sizing",
            "Show shortlist",
            "Help",
        ):
            assert title in titles
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Show shortlist"].callback()
        await pilot.pause()
        assert app.query_one("#tabs").active == "shortlist"
        commands["Cycle units"].callback()
        await pilot.pause()
        assert app.unit == "mib"

        await pilot.press("ctrl+q")
        await pilot.pause()
    assert not app.draft_file.exists()
    assert app.exit_note == ""


# ---------------------------------------------------------------------------------- (i) bindings


def test_every_binding_has_a_unique_id():
    from vramtui.app.screens import dialogs

    for owner in (VramtuiApp, dialogs.PathPrompt, dialogs.RecoverDraft, dialogs.HelpScreen):
        bindings = [b for b in owner.BINDINGS if isinstance(b, Binding)]
        assert len(bindings) == len(owner.BINDINGS), owner
        ids = [b.id for b in bindings]
        assert all(ids), f"{owner.__name__}: a binding without id"
        assert len(set(ids)) == len(ids), owner


# ---------------------------------------------------------------------------------- robustness


async def test_app_without_a_catalogue(tmp_path):
    session = SizingSession.from_spec(seed_example_spec(), None, None, today=TODAY)
    app = VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")
    async with app.run_test(size=SIZE) as pilot:
        assert "No catalogue loaded." in static_text(app, "#shortlist-title")
        await type_into(pilot, "lengths.prompt_tokens", "4")
        assert app.session.is_valid
        assert "Weights: all parameters (fp16)" in ledger_rows(app)
