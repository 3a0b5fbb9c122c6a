"""Draft recovery against damaged draft files (hypothesis, fixed seed): byte flips, cuts,
inserted deep nesting, integers beyond tomllib's digit limit, non-UTF-8 bytes, and values of
the wrong type anywhere in the form or texts. Reading and listing never raise, a draft that
cannot be read is moved to unreadable/ and never lost, and `SizingSession.from_draft` on what
is read either gives a session whose every field can be shown and edited or raises DraftError
(which the app answers by setting the draft aside).

`check_draft_bytes` is the whole property for one file's bytes, for longer runs elsewhere.
"""

from __future__ import annotations

import copy
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vramtui.drafts import (
    UNREADABLE_DIR,
    DraftError,
    read_draft,
    recoverable_drafts,
    write_draft,
)
from vramtui.session import SizingSession
from vramtui.spec import load_spec, spec_to_dict

REPO = Path(__file__).resolve().parent.parent
SAMPLES = ("seed-7b-fp16-inference.toml", "llama-3.1-8b-chat-8k-x16.toml", "qlora-7b.toml")
DRAFT_NAME = "new-20261210-120000-abcdef.toml"
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def valid_draft_bytes(index: int) -> bytes:
    """A draft as the app writes it: a sample spec's form, one edit, one unparsed text."""
    spec = REPO / "sample_specs" / SAMPLES[index % len(SAMPLES)]
    form = spec_to_dict(load_spec(spec))
    form["name"] = "edited"
    texts = {"lengths.prompt_tokens": "8k"} if index % 2 else {}
    origin = spec if index % 3 else None
    data = {
        "draft": {"version": 1, "origin": str(origin or ""), "saved_at": "2026-12-10T12:00:00"},
        "form": form,
        "texts": texts,
    }
    return tomli_w.dumps(data).encode("utf-8")


BASES = [valid_draft_bytes(i) for i in range(6)]


def check_draft_bytes(data: bytes, state_dir: Path) -> None:
    """One damaged draft in a fresh drafts dir under `state_dir`: listing, reading and
    recovering it never raise anything but DraftError from from_draft, and its bytes are
    never lost (still listed, or kept in unreadable/)."""
    drafts = state_dir / "drafts"
    shutil.rmtree(drafts, ignore_errors=True)
    drafts.mkdir(parents=True)
    path = drafts / DRAFT_NAME
    path.write_bytes(data)

    entries, notes = recoverable_drafts(drafts, state_dir / "no-legacy-draft.toml")
    kept = list((drafts / UNREADABLE_DIR).glob("*")) if (drafts / UNREADABLE_DIR).is_dir() else []
    if entries:
        (entry,) = entries
        assert entry.path == path and path.read_bytes() == data and not kept
        line = entry.line()
        assert "\n" not in line and "\x1b" not in line and "\r" not in line
        check_recover(entry.draft)
    else:
        # moved aside as unreadable, byte for byte; one note says so
        assert not path.exists() and len(kept) == 1 and kept[0].read_bytes() == data
        assert len(notes) == 1 and "\n" not in notes[0]

    # read_draft (what the app calls on the chosen draft): the same verdict, never a raise
    path.write_bytes(data)
    draft = read_draft(path)
    assert (draft is None) == (not entries)


def check_recover(draft) -> None:
    try:
        session = SizingSession.from_draft(draft)
    except DraftError as exc:
        assert "\n" not in str(exc)
        return
    for f in session.fields():  # every field the form shows renders as text
        assert isinstance(session.text(f.path), str)
    session.set_field("name", "after recovery")  # and the form can be edited
    session.set_field("lengths.prompt_tokens", "4")


# ------------------------------------------------------------------------------ byte level

INSERTS = st.sampled_from(
    [
        b"[" * 2000,
        b"x = " + b"[" * 900 + b"]" * 900 + b"\n",
        b"n = " + b"9" * 5000 + b"\n",
        b"\xff\xfe\xfd",
        b"\x00",
        b"\x1b[2J\x1b]52;c;aGk=\x07",
        b"\n[form]\n",
        b"\n[texts]\nname = 1\n",
        b'"',
        b"{",
        b"}",
        b"\n[[form.triage]]\n",
        b"\nversion = 2\n",
        b"= 1e400\n",
    ]
)


@st.composite
def damaged_bytes(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete", "digit", "digit"]))
        pos = draw(st.integers(0, len(data)))
        if op == "flip" and pos < len(data):
            data[pos] = draw(st.integers(0, 255))
        elif op == "digit":  # a value changed, the TOML still valid: 4 -> 9, or 4 -> 40000000
            digits = [i for i, b in enumerate(data) if 48 <= b <= 57]
            if digits:
                at = digits[pos % len(digits)]
                data[at : at + 1] = draw(st.sampled_from([b"0", b"9", b"99999999", b"1" * 30]))
        elif op == "cut":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(INSERTS)
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 40))]
    return bytes(data)


@FUZZ
@given(data=damaged_bytes())
def test_damaged_draft_bytes_never_crash_recovery(data, tmp_path):
    check_draft_bytes(data, tmp_path)


# ------------------------------------------------------------------------------ wrong types

WRONG = st.sampled_from(
    [
        "x",
        "",
        -1,
        0,
        10**18,
        2**63,
        1e308,
        -1e308,
        True,
        [],
        [1, "a", []],
        {},
        {"a": {"b": 1}},
        [[[[[]]]]],
        "\x1b[2J",
        "a" * 600,
    ]
)


def _leaves(node, prefix=()):
    if isinstance(node, dict):
        yield prefix  # a table may be replaced whole
        for key, value in node.items():
            yield from _leaves(value, (*prefix, key))
    elif isinstance(node, list):
        yield prefix
        for i, value in enumerate(node):
            yield from _leaves(value, (*prefix, i))
    else:
        yield prefix


def _replace(doc, where, value):
    if not where:
        return value
    node = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    return doc


@st.composite
def mistyped_bytes(draw) -> bytes:
    doc = tomllib.loads(draw(st.sampled_from(BASES)).decode())
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(list(_leaves(doc))))
        doc = _replace(doc, where, copy.deepcopy(draw(WRONG)))  # never a shared object
        if not isinstance(doc, dict):
            doc = {"draft": doc}
    try:
        return tomli_w.dumps(doc).encode("utf-8")
    except (TypeError, ValueError):
        return b"[draft]\nversion = 1\n"


@FUZZ
@given(data=mistyped_bytes())
def test_wrong_types_anywhere_never_crash_recovery(data, tmp_path):
    check_draft_bytes(data, tmp_path)


def test_a_valid_draft_passes_the_check_and_recovers(tmp_path):
    """The property holds for the drafts the app writes (and they are listed, not set aside)."""
    for data in BASES:
        check_draft_bytes(data, tmp_path)
        entries, _ = recoverable_drafts(tmp_path / "drafts", tmp_path / "none.toml")
        assert len(entries) == 1
        session = SizingSession.from_draft(entries[0].draft)
        assert session.form["name"] == "edited" and session.dirty


@pytest.mark.parametrize(
    "data",
    [
        b"[draft]\nversion = 1\n[form]\nx = " + b"[" * 3000 + b"\n",
        b"[draft]\nversion = 1\n[form]\nx = " + b"7" * 5000 + b"\n",
        b"[draft]\nversion = 1\n[form]\nname = '\xff'\n",
        b"[draft]\nversion = 1\n[form]\nlengths = 5\n",
        b"[draft]\nversion = 1\n[texts]\nname = ['x']\n",
        b"[draft]\nversion = 1\n[form.task.lora]\ntargets = [1]\n",
        b"[draft]\nversion = 1\n[form]\nmodel = 7\n",
    ],
    ids=["deep", "digits", "utf8", "table-type", "text-type", "list-items", "model-type"],
)
def test_known_damage(data, tmp_path):
    check_draft_bytes(data, tmp_path)
    write_draft({}, {}, None, tmp_path / "ok.toml")  # the state dir is still writable
