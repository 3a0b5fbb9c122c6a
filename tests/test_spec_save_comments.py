"""Saving a spec keeps the file's comments, blank lines, key order and spellings: every path
that rewrites a spec (save_spec, save as, the app's ctrl+s, `triage --apply/--outcome`,
`measure import --spec`) edits the file in place and changes only the lines whose values
changed. When that cannot be done, the spec is written in full and one warning line says so."""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import json
import shutil
from pathlib import Path

import pytest

from vramtui.builtin_specs import SEED_EXAMPLE_TOML, seed_example_spec
from vramtui.cli import main
from vramtui.session import SizingSession
from vramtui.spec import load_spec, loads_spec, save_spec, spec_to_dict
from vramtui.spec_toml import edit_spec_text

REPO = Path(__file__).resolve().parent.parent
SAMPLES = sorted((REPO / "sample_specs").glob("*.toml"))
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
QLORA = REPO / "sample_specs" / "qlora-7b.toml"
AWQ = REPO / "sample_specs" / "llama-3.3-70b-awq-tp2.toml"
LOGS = Path(__file__).resolve().parent / "triage_logs"
VLLM_LOG = Path(__file__).resolve().parent / "vllm_logs" / "v1_0.10.1_api_server.log"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added) between two texts."""
    removed, added = [], []
    for line in difflib.ndiff(before.splitlines(), after.splitlines()):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def comment_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "#" in ln]


# ------------------------------------------------------------------ one value, one line


def _batch_change(spec):
    """The sample's batch size + 1: (the new spec, the line's key, old value, new value)."""
    b = spec.batch
    key = "micro_batch" if spec.is_training else "concurrency"
    old = getattr(b, key)
    return dataclasses.replace(spec, batch=dataclasses.replace(b, **{key: old + 1})), key, old


def _length_change(spec):
    le = spec.lengths
    key = "seq_len" if spec.is_training else "prompt_tokens"
    old = getattr(le, key)
    return dataclasses.replace(spec, lengths=dataclasses.replace(le, **{key: old + 1})), key, old


@pytest.mark.parametrize("change", [_batch_change, _length_change], ids=["batch", "length"])
@pytest.mark.parametrize("sample", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_every_sample_spec_changes_exactly_one_line(tmp_path, sample, change):
    original = sample.read_text(encoding="utf-8")
    target = tmp_path / sample.name
    target.write_text(original, encoding="utf-8")
    spec = load_spec(target)
    new, key, old = change(spec)

    assert save_spec(new, target) is None  # no warning: the comments were kept
    after = target.read_text(encoding="utf-8")
    removed, added = changed_lines(original, after)
    assert len(removed) == 1 and removed[0].startswith(f"{key} = {old}")
    # the same line with the number one higher, its trailing comment (if any) kept
    assert added == [removed[0].replace(f"= {old}", f"= {old + 1}", 1)]
    assert comment_lines(original)  # every sample is annotated: all its other lines stayed
    assert load_spec(target) == new


def test_unchanged_spec_saves_the_file_byte_for_byte(tmp_path):
    target = tmp_path / "seed.toml"
    target.write_text(SEED_EXAMPLE_TOML, encoding="utf-8")
    save_spec(load_spec(target), target)
    # `params = 7e9` stays as written (the spec holds the integer 7000000000)
    assert target.read_text(encoding="utf-8") == SEED_EXAMPLE_TOML


def test_removed_table_takes_the_comment_above_it_and_new_keys_sit_by_their_neighbours():
    text = AWQ.read_text(encoding="utf-8")
    spec = loads_spec(text)
    # bf16 weights: no bits / group_size and no per-group formats; one more GPU of pipeline
    new = dataclasses.replace(
        spec,
        weights=dataclasses.replace(
            spec.weights, format="bf16", bits=None, group_size=None, groups=()
        ),
        placement=dataclasses.replace(spec.placement, gpus=4, pipeline_parallel=2),
        quality=(),
    )
    after = edit_spec_text(text, new)
    weights = (
        '[weights]\nformat = "awq"\nbits = 4\ngroup_size = 128\n\n'
        "# AutoAWQ quantises the block linears only; the embedding and LM head stay in fp16.\n"
        '[weights.groups]\nembedding = "fp16"\nlm_head = "fp16"\n\n'
    )
    tp = (
        "tensor_parallel = 2             # 64 query heads and 8 KV heads both split evenly over 2\n"
    )
    placement = (
        f"[placement]\ngpus = 2\n{tp}\n[[quality]]\n"
        'metric = "MMLU 5-shot (or the team\'s own eval)"\n'
        'threshold = "within 1 point of the bf16 model"\n'
        'note = "4-bit AWQ usually loses under a point on 70B models; verify on the actual export"\n'
        "\n"
    )
    assert weights in text and placement in text
    # the removed table goes with the comment right above it; pipeline_parallel follows
    # tensor_parallel (and its comment) in [placement]
    assert after == text.replace(weights, '[weights]\nformat = "bf16"\n\n').replace(
        placement, f"[placement]\ngpus = 4\n{tp}pipeline_parallel = 2\n\n"
    )
    assert loads_spec(after) == new


def test_switching_task_adds_tables_in_their_place():
    from vramtui.spec import spec_from_dict
    from vramtui.spec_overrides import switch_task

    d = spec_to_dict(seed_example_spec())
    switch_task(d, "lora")
    new = spec_from_dict(d, "test")
    after = edit_spec_text(SEED_EXAMPLE_TOML, new)
    assert loads_spec(after) == new
    assert comment_lines(after) == comment_lines(SEED_EXAMPLE_TOML)
    headers = [ln for ln in after.splitlines() if ln.startswith("[")]
    assert headers == [
        "[model]",
        "[task]",
        "[task.lora]",
        "[weights]",
        "[lengths]",
        "[batch]",
        "[training]",
        "[runtime]",
        "[placement]",
        "[headroom]",
        "[campaign]",
    ]
    # each table after a blank line, as in the file
    lines = after.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("[") and ln != "[model]":
            assert lines[i - 1] == "", ln


# ------------------------------------------------------------------ save as


def test_save_as_with_a_template_keeps_its_comments(tmp_path):
    original = CHAT.read_text(encoding="utf-8")
    spec = loads_spec(original)
    new = dataclasses.replace(spec, lengths=dataclasses.replace(spec.lengths, prompt_tokens=4000))
    target = tmp_path / "copy.toml"
    assert save_spec(new, target, template_text=original) is None
    removed, added = changed_lines(original, target.read_text(encoding="utf-8"))
    assert (removed, added) == (["prompt_tokens = 8000"], ["prompt_tokens = 4000"])
    assert load_spec(target) == new


def test_session_save_as_carries_the_opened_files_comments(tmp_path):
    source = tmp_path / "chat.toml"
    shutil.copy(CHAT, source)
    session = SizingSession.open(source)
    assert session.set_field("batch.concurrency", "4").valid
    other = tmp_path / "other.toml"
    session.save(other)
    assert session.save_warning is None
    removed, added = changed_lines(CHAT.read_text(), other.read_text())
    assert removed == ["concurrency = 16                # sequences decoding at once"]
    assert added == ["concurrency = 4                # sequences decoding at once"]
    assert source.read_text() == CHAT.read_text()  # the opened file is untouched


def test_saving_the_seed_over_an_existing_file_writes_it_in_full(tmp_path):
    """A spec that did not come from a file takes no comments from the file it replaces."""
    target = tmp_path / "chat.toml"
    shutil.copy(CHAT, target)
    session = SizingSession.from_spec(seed_example_spec(), None)
    session.save(target)
    text = target.read_text()
    assert "sequences decoding at once" not in text
    assert text.startswith("# vramtui workload spec (schema_version 1)")
    assert load_spec(target) == seed_example_spec()


# ------------------------------------------------------------------ the command line


def test_triage_apply_and_outcome_keep_the_comments(tmp_path, capsys):
    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    original = spec_path.read_text()
    log = str(LOGS / "pytorch_cuda_current_generate.log")
    assert main(["triage", log, "--spec", str(spec_path), "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)["recommendations"]
    n = next(r["index"] for r in recs if r["change"] == "concurrency 16 -> 8")
    assert main(["triage", log, "--spec", str(spec_path), "--apply", str(n)]) == 0
    assert "warning" not in capsys.readouterr().err
    applied = spec_path.read_text()
    removed, added = changed_lines(original, applied)
    assert removed == ["concurrency = 16                # sequences decoding at once"]
    assert added[0] == "concurrency = 8                # sequences decoding at once"
    # the rest is the [[triage]] entry, appended after the file's last line
    assert applied.startswith(original.replace("concurrency = 16 ", "concurrency = 8 "))
    assert "[[triage]]" in added and 'outcome = "pending"' in added
    assert load_spec(spec_path).triage[-1].variable == "cache"

    assert main(["triage", "--spec", str(spec_path), "--outcome", "fixed"]) == 0
    assert "warning" not in capsys.readouterr().err
    removed, added = changed_lines(applied, spec_path.read_text())
    assert (removed, added) == (['outcome = "pending"'], ['outcome = "fixed"'])


def test_measure_import_keeps_the_comments(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    original = spec_path.read_text()
    assert main(["measure", "import", str(VLLM_LOG), "--spec", str(spec_path)]) == 0
    out = capsys.readouterr()
    assert "6 stored in" in out.out and "without its comments" not in out.out + out.err
    after = spec_path.read_text()
    assert after.startswith(original)  # every line kept; the figures appended after them
    assert after.count("[[measured]]") == 6
    assert len(load_spec(spec_path).measured) == 6


# ------------------------------------------------------------------ fallback: warned, never silent


SPLIT_TABLES = """\
# [task.lora] is written after the other tables: valid TOML, but tomlkit cannot edit it in place
schema_version = 1
[model]
params = 7e9
[task]
kind = "lora"  # adapters
[weights]
format = "bf16"
[lengths]
seq_len = 512
[batch]
micro_batch = 1
[training]
optimizer = "adamw"
master_weights_fp32 = true
grad_dtype = "bf16"
grad_checkpointing = "none"
[runtime]
attention = "sdpa"
[placement]
gpus = 1
[headroom]
mode = "itemised"
[task.lora]
rank = 8  # small
targets = ["all-linear"]
"""


def test_a_file_that_cannot_be_edited_in_place_is_saved_in_full_with_one_warning(tmp_path, capsys):
    target = tmp_path / "split.toml"
    target.write_text(SPLIT_TABLES)
    spec = load_spec(target)
    lora = dataclasses.replace(spec.task.lora, rank=16)
    new = dataclasses.replace(spec, task=dataclasses.replace(spec.task, lora=lora))

    warning = save_spec(new, target)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vramtui: warning: ")
    assert warning is not None and "\n" not in warning
    assert f"saved {target} in full, without its comments" in warning
    assert "[task] is split over the file" in warning
    assert err == f"vramtui: warning: {warning}\n"
    assert load_spec(target) == new  # the values are all there
    assert "# adapters" not in target.read_text()


def test_the_app_session_returns_the_warning_instead_of_printing_it(tmp_path, capsys):
    target = tmp_path / "split.toml"
    target.write_text(SPLIT_TABLES)
    session = SizingSession.open(target)
    assert session.set_field("task.lora.rank", "16").valid
    session.save()
    assert capsys.readouterr().err == ""
    assert "without its comments" in session.save_warning
    assert load_spec(target).task.lora.rank == 16
    # a save that keeps the comments clears the warning
    target.write_text(CHAT.read_text())
    session = SizingSession.open(target)
    session.set_field("batch.concurrency", "2")
    session.save()
    assert session.save_warning is None


def test_a_file_that_is_not_a_spec_is_replaced_with_a_warning(tmp_path):
    target = tmp_path / "notes.toml"
    target.write_text("just = 'notes' # mine\n")
    warnings: list[str] = []
    assert save_spec(seed_example_spec(), target, warn=warnings.append) == warnings[0]
    assert "the existing file could not be edited in place: it is not a valid spec" in warnings[0]
    assert load_spec(target) == seed_example_spec()


# ------------------------------------------------------------------ the seed's description


def test_the_seed_description_does_not_ride_along_into_another_spec():
    from vramtui.sheet.command import render_sheet
    from vramtui.sheet.model import build_sheet

    seed = seed_example_spec()
    assert seed.description  # the seed has one, and it is about 7e9 parameters at fp16
    session = SizingSession.from_spec(seed, None, today=datetime.date(2026, 12, 10))
    assert session.set_field("name", "my run").valid
    assert session.spec.description == seed.description  # renaming keeps the workload

    assert session.set_field("model", LLAMA).valid
    assert session.spec.description == ""
    res = session.results
    sheet = render_sheet(
        build_sheet(res.spec, res.arch, res.estimate, generated=datetime.date(2026, 12, 10)), "md"
    )
    assert seed.description not in sheet and "seed's worked example" not in sheet


def test_a_spec_with_its_own_description_keeps_it(tmp_path):
    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    session = SizingSession.open(spec_path)
    before = session.spec.description
    assert session.set_field("batch.concurrency", "4").valid
    assert session.spec.description == before != ""


# ------------------------------------------------------------------ the app: ctrl+s


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _app(path: Path, tmp_path: Path):
    from vramtui.app.app import VramtuiApp
    from vramtui.catalog import load_catalog
    from vramtui.config import Config

    catalog = load_catalog(None, use_user_config=False)
    session = SizingSession.from_spec(
        load_spec(path), path, catalog, today=datetime.date(2026, 12, 10)
    )
    return VramtuiApp(session, Config(), draft_file=tmp_path / "state" / "draft.toml")


def _notifications(app) -> list[tuple[str, str]]:
    return [(n.severity, n.message) for n in app._notifications]


@pytest.mark.anyio
async def test_app_ctrl_s_keeps_the_comments_and_says_when_it_cannot(tmp_path):
    from textual.widgets import Input

    from vramtui.app.widgets.spec_form import field_id

    spec_path = tmp_path / "chat.toml"
    shutil.copy(CHAT, spec_path)
    app = _app(spec_path, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        field = app.query_one(f"#{field_id('batch.concurrency')}", Input)
        field.focus()
        await pilot.pause()
        await pilot.press("end", "ctrl+u", "4")
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert ("information", f"saved {spec_path}") in _notifications(app)
        assert not [m for sev, m in _notifications(app) if sev != "information"]
        removed, added = changed_lines(CHAT.read_text(), spec_path.read_text())
        assert removed == ["concurrency = 16                # sequences decoding at once"]
        assert added == ["concurrency = 4                # sequences decoding at once"]

        # the file was replaced meanwhile by one that is not a spec: saved in full, and said
        spec_path.write_text("notes = 'not a spec'  # mine\n")
        await pilot.press("ctrl+s")
        await pilot.pause()
        warnings = [m for sev, m in _notifications(app) if sev == "warning"]
        assert len(warnings) == 1 and "\n" not in warnings[0]
        assert f"saved {spec_path} in full, without its comments and layout" in warnings[0]
    assert load_spec(spec_path).batch.concurrency == 4
