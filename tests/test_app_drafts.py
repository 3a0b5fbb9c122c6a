"""The app's drafts, driven as a user drives them (Textual's Pilot): one draft per instance,
a save that removes only its own, a start-up list of what earlier instances left, an autosave
that fails without taking the app down, a damaged draft set aside, a pasted long word in the
Model field."""

from __future__ import annotations

import datetime
import errno
import shutil
from pathlib import Path

import pytest
from textual import events
from textual.widgets import Input
from vramtui.app.app import VramtuiApp
from vramtui.app.screens.dialogs import RecoverDraft
from vramtui.app.widgets.spec_form import field_id
from vramtui.builtin_specs import seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.drafts import is_held, read_draft
from vramtui.session import SizingSession
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_specs" / "seed-7b-fp16-inference.toml"
TODAY = datetime.date(2026, 12, 10)
SIZE = (120, 40)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None, use_user_config=False)


def app_on(catalog, spec: Path | None, drafts: Path, **kwargs) -> VramtuiApp:
    if spec is None:
        session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    else:
        session = SizingSession.from_spec(load_spec(spec), spec, catalog, today=TODAY)
    return VramtuiApp(session, Config(), draft_dir=drafts, **kwargs)


async def type_into(pilot, path: str, text: str) -> None:
    widget = pilot.app.query_one(f"#{field_id(path)}", Input)
    widget.focus()
    await pilot.pause()
    await pilot.press("end", "ctrl+u", *text)
    await pilot.pause()


def warnings(app) -> list[str]:
    return [n.message for n in app._notifications if n.severity in ("warning", "error")]


def spec_copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copy(SEED, target)
    return target


async def test_save_in_one_instance_keeps_the_other_instances_draft(catalog, tmp_path):
    """Two instances on the same spec file: two drafts; ctrl+s in A removes A's only."""
    drafts = tmp_path / "state" / "drafts"
    spec = spec_copy(tmp_path, "seed.toml")
    a = app_on(catalog, spec, drafts)
    b = app_on(catalog, spec, drafts)
    assert a.draft_file != b.draft_file
    async with a.run_test(size=SIZE) as pa, b.run_test(size=SIZE) as pb:
        await type_into(pa, "name", "edit in a")
        await type_into(pb, "name", "edit in b")
        assert a.save_draft_now() and b.save_draft_now()
        assert read_draft(a.draft_file).form["name"] == "edit in a"
        await pa.press("ctrl+s")
        await pa.pause()
        assert not a.session.dirty and not a.draft_file.exists()
        assert load_spec(spec).name == "edit in a"
        assert read_draft(b.draft_file).form["name"] == "edit in b"
        # quitting A without changes removes nothing of B's either
        await pa.press("ctrl+q")
        await pa.pause()
        assert read_draft(b.draft_file).form["name"] == "edit in b"
        assert is_held(b.draft_file)


async def test_killed_instances_leave_their_drafts_and_each_is_recovered(catalog, tmp_path):
    """Instances on two specs and on a new spec end without quitting (their locks go, as a
    kill's would); the next start lists all three, and each recovers to its own edits."""
    drafts = tmp_path / "state" / "drafts"
    one, two = spec_copy(tmp_path, "one.toml"), spec_copy(tmp_path, "two.toml")
    apps = [app_on(catalog, s, drafts) for s in (one, two, None)]
    names = ["edit one", "edit two", "new three"]
    for app, name in zip(apps, names):
        async with app.run_test(size=SIZE) as pilot:
            await type_into(pilot, "name", name)
            assert app.save_draft_now()
        # leaving run_test without ctrl+q: the draft stays, the lock is gone
        assert not is_held(app.draft_file)
    assert len({app.draft_file for app in apps}) == 3

    app = app_on(catalog, None, drafts, offer_draft=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, RecoverDraft)
        lines = app.screen.lines
        assert len(lines) == 3
        assert [line.split(" (")[0] for line in lines] == ["new three", "edit two", "edit one"]
        assert "(two.toml)" in lines[1] and "1 field differs: name" in lines[1]
        await pilot.press("down", "r")  # the second line: the draft of two.toml
        await pilot.pause()
        assert not isinstance(app.screen, RecoverDraft)
        assert app.query_one(f"#{field_id('name')}", Input).value == "edit two"
        assert app.session.path == two and app.draft_file == apps[1].draft_file
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert load_spec(two).name == "edit two" and not apps[1].draft_file.exists()
    # the two others wait for the next start, as they were written
    for app, name in ((apps[0], "edit one"), (apps[2], "new three")):
        session = SizingSession.from_draft(read_draft(app.draft_file), catalog)
        assert session.form["name"] == name and session.dirty


async def test_failed_autosave_warns_once_and_ctrl_s_still_saves(catalog, tmp_path):
    blocker = tmp_path / "state"
    blocker.write_text("a regular file where the state directory should be")
    spec = spec_copy(tmp_path, "seed.toml")
    app = app_on(catalog, spec, blocker / "drafts")
    async with app.run_test(size=SIZE) as pilot:
        await type_into(pilot, "name", "first")
        await pilot.pause(1.3)  # the 1 s autosave timer fires, and fails
        await type_into(pilot, "name", "second")
        await pilot.pause(1.3)
        assert app.save_draft_now() is False
        drafty = [w for w in warnings(app) if "the draft cannot be saved" in w]
        assert len(drafty) == 1, warnings(app)
        assert "draft not saved" in app.sub_title
        assert app.is_running
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert load_spec(spec).name == "second" and not app.session.dirty
        assert "draft not saved" not in app.sub_title
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.exit_note == ""


async def test_disk_full_on_quit_asks_before_losing_edits(catalog, tmp_path, monkeypatch):
    app = app_on(catalog, None, tmp_path / "drafts")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("vramtui.drafts.atomic_write_text", full)
    async with app.run_test(size=SIZE) as pilot:
        await type_into(pilot, "name", "unsaved")
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert app.is_running  # the first ctrl+q warns instead of dropping the edits
        assert any("No space left on device" in w and "quit again" in w for w in warnings(app))
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.exit_note.startswith("unsaved changes lost: the draft could not be saved")


@pytest.mark.parametrize(
    "damage",
    [
        b"\xff\xfe\x00garbage",
        b"[draft]\nversion = 1\n[form]\nlengths = 5\n",
        b"[draft]\nversion = 1\n[form.task.lora]\ntargets = [1, 2]\n",
    ],
)
async def test_damaged_draft_at_start_up_and_on_recover_is_set_aside(catalog, tmp_path, damage):
    drafts = tmp_path / "drafts"
    path = drafts / "new-20261210-000000-aaaaaa.toml"
    drafts.mkdir()
    path.write_bytes(damage)
    app = app_on(catalog, None, drafts, offer_draft=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        if isinstance(app.screen, RecoverDraft):  # readable TOML, a form that cannot load
            await pilot.press("r")
            await pilot.pause()
        assert not isinstance(app.screen, RecoverDraft)
        assert not app.session.dirty  # started clean on the spec it was given
        assert any("draft" in w for w in warnings(app)), warnings(app)
        await type_into(pilot, "lengths.prompt_tokens", "4")
        assert app.session.is_valid
    (kept,) = (drafts / "unreadable").iterdir()
    assert kept.read_bytes() == damage
    assert not path.exists()


async def test_pasting_a_long_word_into_the_model_field(catalog, tmp_path):
    """A 300-character word once ended the app with OSError: File name too long."""
    app = app_on(catalog, None, tmp_path / "drafts")
    async with app.run_test(size=SIZE) as pilot:
        model = app.query_one(f"#{field_id('model')}", Input)
        model.focus()
        await pilot.press("end", "ctrl+u")
        model.post_message(events.Paste("a" * 300))
        await pilot.pause()
        assert app.is_running
        assert model.value == "a" * 300
        assert "unknown model" in app.session.errors["model"]
        await pilot.press("ctrl+u")
        model.post_message(events.Paste("b" * 600))
        await pilot.pause()
        assert app.session.errors["model"].startswith(
            "Model id, path or count is 600 characters long; the limit is 512 characters"
        )
        await pilot.press("ctrl+u", *"7e9")
        await pilot.pause()
        assert app.session.is_valid
