"""Drafts without Textual: one per instance, named from the spec's path, locked while the
instance lives; set-aside and unreadable drafts moved under names that never collide; the
start-up list with age and a one-line diff; model references bounded before any file probe."""

from __future__ import annotations

import datetime
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from vramtui import drafts
from vramtui.builtin_specs import seed_example_spec
from vramtui.drafts import (
    DraftSlot,
    is_held,
    load_draft,
    name_for_spec,
    read_draft,
    recoverable_drafts,
    set_aside,
    write_draft,
)
from vramtui.errors import ModelError, SpecError
from vramtui.models.resolve import looks_like_path, resolve_model
from vramtui.session import SizingSession
from vramtui.spec import loads_spec, spec_to_dict
from vramtui.spec_fields import FIELDS_BY_PATH, FieldError, parse_text

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "sample_specs" / "seed-7b-fp16-inference.toml"
NOW = datetime.datetime(2026, 12, 10, 12, 0, 0, tzinfo=datetime.timezone.utc)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="advisory locks (fcntl)")


def seed_form(**changes) -> dict:
    form = spec_to_dict(seed_example_spec())
    for dotted, value in changes.items():
        table, key = dotted.split("__")
        form[table][key] = value
    return form


# ------------------------------------------------------------------------------ names, locks


def test_draft_name_comes_from_the_spec_path(tmp_path):
    a = tmp_path / "one" / "llama chat.toml"
    b = tmp_path / "two" / "llama chat.toml"
    assert re.fullmatch(r"llama-chat-[0-9a-f]{10}", name_for_spec(a))
    assert name_for_spec(a) == name_for_spec(tmp_path / "one" / ".." / "one" / "llama chat.toml")
    assert name_for_spec(a) != name_for_spec(b)  # same file name, other directory


def test_two_instances_on_one_spec_get_two_drafts(tmp_path):
    spec = tmp_path / "seed.toml"
    first = DraftSlot.claim(spec, tmp_path / "drafts")
    second = DraftSlot.claim(spec, tmp_path / "drafts")
    try:
        assert first.path.name == f"{name_for_spec(spec)}.toml"
        assert second.path.name.startswith(name_for_spec(spec) + "-")
        assert first.path != second.path
        assert is_held(first.path) and is_held(second.path)
        first.write({"name": "a"}, {}, spec)
        second.write({"name": "b"}, {}, spec)
        # a save in the first removes its own draft only
        first.discard()
        assert not first.path.exists()
        assert read_draft(second.path).form == {"name": "b"}
    finally:
        first.release()
        second.release()
    assert not is_held(second.path)


def test_a_left_draft_is_never_claimed_again(tmp_path):
    """An instance killed with edits leaves its draft; the next instance on the same spec
    writes elsewhere, so the left edits survive until recovered or set aside."""
    spec = tmp_path / "seed.toml"
    killed = DraftSlot.claim(spec, tmp_path / "drafts")
    killed.write({"name": "left"}, {}, spec)
    killed.release()  # what the kernel does when the process dies
    later = DraftSlot.claim(spec, tmp_path / "drafts")
    try:
        assert later.path != killed.path
        entries, notes = recoverable_drafts(tmp_path / "drafts", tmp_path / "none.toml", NOW)
        assert [e.path for e in entries] == [killed.path] and notes == []
    finally:
        later.release()


def test_new_specs_get_unique_drafts_and_held_ones_are_not_listed(tmp_path):
    slots = [DraftSlot.claim(None, tmp_path / "drafts") for _ in range(3)]
    try:
        assert len({s.path for s in slots}) == 3
        assert all(s.path.name.startswith("new-") for s in slots)
        for i, s in enumerate(slots):
            s.write({"name": f"n{i}"}, {}, None)
        assert recoverable_drafts(tmp_path / "drafts", tmp_path / "none.toml", NOW) == ([], [])
        slots[1].release()
        entries, _ = recoverable_drafts(tmp_path / "drafts", tmp_path / "none.toml", NOW)
        assert [e.draft.form["name"] for e in entries] == ["n1"]
    finally:
        for s in slots:
            s.release()


def test_a_lock_held_by_another_process_is_seen(tmp_path):
    draft = tmp_path / "drafts" / "x.toml"
    draft.parent.mkdir()
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(draft) + '.lock'!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        assert is_held(draft)
        assert DraftSlot.adopt(draft) is None
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert not is_held(draft)  # the kernel released it with the process


def test_claim_in_an_unusable_state_dir_does_not_raise(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a regular file where the state dir should be")
    slot = DraftSlot.claim(None, blocker / "drafts")
    assert not slot.held and slot.problem
    with pytest.raises(OSError):
        slot.write({"name": "x"}, {}, None)
    assert recoverable_drafts(blocker / "drafts", blocker / "draft.toml", NOW) == ([], [])
    slot.release()


# ------------------------------------------------------------------------------ set aside


class _FrozenDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


def test_set_aside_twice_in_the_same_second_keeps_both(tmp_path, monkeypatch):
    monkeypatch.setattr(drafts.datetime, "datetime", _FrozenDatetime)
    draft = tmp_path / "drafts" / "seed-0123456789.toml"
    write_draft({"name": "first"}, {}, None, draft)
    one = set_aside(draft)
    write_draft({"name": "second"}, {}, None, draft)
    two = set_aside(draft)
    write_draft({"name": "third"}, {}, None, draft)
    three = set_aside(draft)
    assert one.name == "seed-0123456789-20261210T120000Z.toml"
    assert two.name == "seed-0123456789-20261210T120000Z-2.toml"
    assert three.name == "seed-0123456789-20261210T120000Z-3.toml"
    assert [read_draft(p).form["name"] for p in (one, two, three)] == ["first", "second", "third"]
    assert not draft.exists()


def test_unreadable_draft_is_moved_aside_not_deleted(tmp_path):
    directory = tmp_path / "drafts"
    directory.mkdir()
    bad = directory / "new-1.toml"
    bad.write_bytes(b"[draft\nversion = 1\n")
    entries, notes = recoverable_drafts(directory, tmp_path / "none.toml", NOW)
    assert entries == []
    assert len(notes) == 1 and "new-1.toml is not valid TOML" in notes[0]
    (kept,) = (directory / "unreadable").iterdir()
    assert kept.read_bytes() == b"[draft\nversion = 1\n"
    # read_draft on a damaged file: None, and the file moved under a second unique name
    bad.write_bytes(b"\xff\xfe not utf-8")
    assert read_draft(bad) is None
    assert len(list((directory / "unreadable").iterdir())) == 2


@pytest.mark.parametrize(
    "text, reason",
    [
        ("[draft]\nversion = 1\norigin = 3\n[form]\n", "origin is not a file path"),
        ('[draft]\nversion = 1\n[texts]\n"name" = 5\n', "texts is not a table of strings"),
        ('form = "x"\n[draft]\nversion = 1\n', "form is not a table"),
        ('[draft]\nversion = "1"\n', "version is not 1"),
        ("version = 1\n", "no [draft] table"),
        ("[draft]\nversion = 1\n[form]\nx = " + "[" * 40 + "]" * 40 + "\n", "nests deeper"),
        ("[draft]\nversion = 1\n[form]\nx = " + "9" * 5000 + "\n", "cannot be parsed"),
    ],
)
def test_wrong_shapes_are_unreadable(tmp_path, text, reason):
    path = tmp_path / "d.toml"
    path.write_text(text)
    with pytest.raises(drafts.DraftError, match=re.escape(reason)):
        load_draft(path)


# ------------------------------------------------------------------------------ the list


def test_listed_draft_has_spec_age_and_one_line_diff(tmp_path):
    spec = tmp_path / "seed.toml"
    shutil.copy(SEED, spec)
    base = spec_to_dict(loads_spec(SEED.read_text()))
    form = {**base, "name": "edited", "batch": {**base["batch"], "concurrency": 4}}
    path = tmp_path / "drafts" / f"{name_for_spec(spec)}.toml"
    write_draft(form, {"lengths.prompt_tokens": "8k"}, spec, path)
    twelve_min = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=12)
    (entry,), _ = recoverable_drafts(tmp_path / "drafts", tmp_path / "none.toml", twelve_min)
    assert entry.age == "12 min ago"
    assert entry.diff == "3 fields differ: batch.concurrency, lengths.prompt_tokens, name"
    assert entry.line() == (
        "edited (seed.toml), 12 min ago: "
        "3 fields differ: batch.concurrency, lengths.prompt_tokens, name"
    )
    spec.unlink()
    (entry,), _ = recoverable_drafts(tmp_path / "drafts", tmp_path / "none.toml", twelve_min)
    assert entry.diff == "its spec file is gone"


def test_diff_stays_one_line(tmp_path):
    form = seed_form(lengths__prompt_tokens=1, lengths__output_tokens=2, batch__concurrency=3)
    form["name"] = "x\x1b]52;c;aGk=\x07y"  # an OSC 52 in the name never reaches the list
    texts = {"placement.gpus": "two", "weights.format": "?"}
    write_draft(form, texts, None, tmp_path / "d" / "new-1.toml")
    (entry,), _ = recoverable_drafts(tmp_path / "d", tmp_path / "none.toml", NOW)
    assert entry.diff == (
        "6 fields differ: batch.concurrency, lengths.output_tokens, lengths.prompt_tokens, "
        "name, +2 more"
    )
    assert "\x1b" not in entry.line() and "\x07" not in entry.line()
    assert "\n" not in entry.line()


def test_legacy_draft_is_offered(tmp_path):
    legacy = tmp_path / "draft.toml"
    write_draft(seed_form(batch__concurrency=4), {}, None, legacy)
    (entry,), _ = recoverable_drafts(tmp_path / "drafts", legacy, NOW)
    assert entry.path == legacy and entry.diff == "1 field differs: batch.concurrency"


# ------------------------------------------------------------------------------ from_draft


def test_from_draft_rejects_a_form_it_cannot_show(tmp_path):
    for form in ({"lengths": 5}, {"model": "x"}, {"task": {"lora": {"targets": [1, 2]}}}):
        draft = drafts.Draft(form=form, texts={}, origin="", saved_at="")
        with pytest.raises(drafts.DraftError):
            SizingSession.from_draft(draft)
    # a NUL byte or escape in the origin: not a path this version wrote
    path = tmp_path / "d.toml"
    write_draft(seed_form(), {}, Path("a\x1b[2Jb"), path)
    with pytest.raises(drafts.DraftError, match="origin is not a file path"):
        load_draft(path)


# ------------------------------------------------------------------------------ model refs


LONG = "a" * 300  # longer than a file name may be (255): probing it raised ENAMETOOLONG


def test_long_model_word_is_no_local_directory():
    assert looks_like_path(LONG) is False
    assert looks_like_path("org/" + LONG) is False
    assert looks_like_path("bad\0name") is False
    spec = loads_spec(SEED.read_text().replace("params = 7e9", f'id = "{LONG}"'))
    with pytest.raises(ModelError, match="unknown model"):
        resolve_model(spec.model)


def test_model_reference_is_bounded_where_it_enters(tmp_path):
    word = "m" * 513
    with pytest.raises(
        SpecError,
        match=r"model.id is 513 characters long \(<string>\); the limit is 512 characters",
    ):
        loads_spec(SEED.read_text().replace("params = 7e9", f'id = "{word}"'))
    with pytest.raises(FieldError, match="Model id, path or count is 513 characters long; the limit is 512"):
        parse_text(FIELDS_BY_PATH["model"], word)
    assert parse_text(FIELDS_BY_PATH["model"], "m" * 512) == ("id", "m" * 512)
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", "estimate", "--model", word],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO / "tui")},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "vramtui: error: --model is 513 characters long; the limit is 512 characters: give a "
        "catalogue or Hub id, or the path of a local model directory"
    )
