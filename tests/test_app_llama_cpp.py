"""The app's form for engine llama.cpp: the [llama_cpp] fields, their defaults, their rules, the
ledger they drive, and the table a save writes (Textual's Pilot, headless).

The model is a small GGUF file written by the gguf package's GGUFWriter: llama, 2 blocks,
n_embd 256, 4 heads and 2 KV heads of 64, so a K (or V) row of one layer holds 2 x 64 = 128
values. Every KV figure below is worked by hand from llama.cpp's rules (ledger/llama_cpp.py's
docstring): cells = n_ctx padded to 256; bytes = cells x layers on the GPU x (K row + V row);
f16 stores 2 B a value, q8_0 32 values in 34 B (128 values: 4 x 34 = 136 B).
"""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path

import pytest
from textual.widgets import Input, Select, Static, Switch
from vramtui.app.app import VramtuiApp
from vramtui.app.widgets.spec_form import FieldRow, field_id, group_id, row_id
from vramtui.builtin_specs import seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.session import SizingSession
from vramtui.spec import load_spec

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

TODAY = datetime.date(2026, 12, 10)
SIZE = (120, 40)
LLAMA_CPP_FIELDS = [
    "llama_cpp.n_ctx",
    "llama_cpp.n_parallel",
    "llama_cpp.n_batch",
    "llama_cpp.n_ubatch",
    "llama_cpp.n_gpu_layers",
    "llama_cpp.cache_type_k",
    "llama_cpp.cache_type_v",
    "llama_cpp.flash_attn",
    "llama_cpp.kv_unified",
]
# The seed example: prompt 2,048 + generated 256 tokens, 1 sequence, fp16 KV cache. Its
# default n_ctx is 1 slot x 2,304 tokens = 2,304 cells (already a multiple of 256).
CELLS = 2304
F16_ROW = 128 * 2  # 256 B
Q8_0_ROW = 128 // 32 * 34  # 136 B

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None, use_user_config=False)


def write_gguf(path: Path) -> Path:
    """2 llama blocks stored as F16 (norms F32), 1,000 tokens, an output layer of its own."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_embedding_length(256)
    w.add_feed_forward_length(512)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_context_length(4096)
    w.add_token_list([f"t{i}".encode() for i in range(1000)])

    def f16(name: str, rows: int, cols: int) -> None:
        w.add_tensor(name, np.zeros((rows, cols), dtype=np.float16))

    f16("token_embd.weight", 1000, 256)
    for i in range(2):
        f16(f"blk.{i}.attn_q.weight", 256, 256)
        f16(f"blk.{i}.attn_k.weight", 128, 256)
        f16(f"blk.{i}.attn_v.weight", 128, 256)
        f16(f"blk.{i}.attn_output.weight", 256, 256)
        f16(f"blk.{i}.ffn_gate.weight", 512, 256)
        f16(f"blk.{i}.ffn_up.weight", 512, 256)
        f16(f"blk.{i}.ffn_down.weight", 256, 512)
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(256, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(256, dtype=np.float32))
    w.add_tensor("output_norm.weight", np.ones(256, dtype=np.float32))
    f16("output.weight", 1000, 256)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def seed_app(catalog, tmp_path: Path) -> VramtuiApp:
    session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    return VramtuiApp(session, Config(), draft_file=tmp_path / "state" / "draft.toml")


async def type_into(pilot, path: str, text: str) -> None:
    """Focus the field's input, clear it (End, then ctrl+u) and type `text` key by key."""
    widget = pilot.app.query_one(f"#{field_id(path)}", Input)
    widget.focus()
    await pilot.pause()
    await pilot.press("end", "ctrl+u", *text)
    await pilot.pause()


async def choose(pilot, path: str, option: str) -> None:
    """Pick `option` in a field's Select with the keyboard: open it, move to it, Enter. An
    optional field's list starts with its blank (the default)."""
    select = pilot.app.query_one(f"#{field_id(path)}", Select)
    values = [value for _, value in select._options]
    current = values.index(select.value)
    target = values.index(option)
    select.focus()
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()
    key = "down" if target > current else "up"
    await pilot.press(*[key] * abs(target - current), "enter")
    await pilot.pause()
    assert select.value == option


def kv_bytes(app) -> int:
    return next(i.max_bytes for i in app.session.results.estimate.items if i.key == "kv_cache")


def shown_paths(app) -> list[str]:
    return [r.field.path for r in app.query(FieldRow) if r.field.group == "llama_cpp"]


async def test_gguf_model_brings_llama_cpp_fields_that_drive_the_kv_cache(
    catalog, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # a short relative path to type (each key is a Pilot round)
    write_gguf(tmp_path / "m.gguf")
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        assert shown_paths(app) == []  # the seed names no engine: no llama.cpp fields
        await type_into(pilot, "model", "./m.gguf")
        # A GGUF file is sized as stored and for llama.cpp, as `--model m.gguf` does.
        assert app.session.is_valid, app.session.errors
        assert app.query_one(f"#{field_id('runtime.engine')}", Select).value == "llama.cpp"
        assert app.session.form["weights"] == {"format": "gguf", "gguf_type": "F16"}
        assert "engine set to llama.cpp" in app.sub_title
        assert shown_paths(app) == LLAMA_CPP_FIELDS
        assert app.query(f"#{group_id('llama_cpp')}")
        # Defaults shown as defaults: the inputs are empty, the spec sets no [llama_cpp] key.
        assert "llama_cpp" not in app.session.form
        n_ctx = app.query_one(f"#{field_id('llama_cpp.n_ctx')}", Input)
        assert n_ctx.value == "" and n_ctx.placeholder == "(default: 2304 = 1 slot(s) x 2304)"
        ngl = app.query_one(f"#{field_id('llama_cpp.n_gpu_layers')}", Input)
        assert ngl.value == "" and ngl.placeholder == "(default: -1 (all))"
        ctk = app.query_one(f"#{field_id('llama_cpp.cache_type_k')}", Select)
        assert ctk.value is Select.NULL and ctk.prompt == "(default: f16)"
        assert app.query_one(f"#{field_id('llama_cpp.flash_attn')}", Switch).value is True
        assert app.query_one(f"#{field_id('llama_cpp.kv_unified')}", Switch).value is False
        assert kv_bytes(app) == CELLS * 2 * (F16_ROW + F16_ROW)  # 2,359,296 B

        # -ctk q8_0: K rows of 136 B instead of 256 B, in both layers.
        await choose(pilot, "llama_cpp.cache_type_k", "q8_0")
        assert app.session.form["llama_cpp"] == {"cache_type_k": "q8_0"}
        assert kv_bytes(app) == CELLS * 2 * (Q8_0_ROW + F16_ROW)  # 1,806,336 B
        assert kv_bytes(app) == 2_359_296 - 552_960

        # -ngl 2 of 2 blocks: i_gpu_start = 2 + 1 - 2 = 1, so block 1 (and the output layer)
        # is on the GPU, and with it only block 1's cache.
        await type_into(pilot, "llama_cpp.n_gpu_layers", "2")
        assert app.session.form["llama_cpp"]["n_gpu_layers"] == 2
        assert kv_bytes(app) == CELLS * 1 * (Q8_0_ROW + F16_ROW)  # 903,168 B
        assert any("1 of 2 layers on the GPU" in n for n in app.session.results.estimate.notes)

        # A default that follows other fields follows them on screen too.
        await type_into(pilot, "batch.concurrency", "2")
        assert n_ctx.placeholder == "(default: 4608 = 2 slot(s) x 2304)"
        assert kv_bytes(app) == 2 * CELLS * 1 * (Q8_0_ROW + F16_ROW)

        # Another engine: the fields go, and so does the [llama_cpp] table.
        await choose(pilot, "runtime.engine", "vllm")
        assert shown_paths(app) == []
        assert "llama_cpp" not in app.session.form and app.session.is_valid
        assert app.session.spec.llama_cpp is None


async def test_a_bad_value_shows_one_line_and_keeps_the_previous_spec(
    catalog, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    write_gguf(tmp_path / "m.gguf")
    app = seed_app(catalog, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await type_into(pilot, "model", "./m.gguf")
        assert app.session.is_valid
        full = CELLS * 2 * (F16_ROW + F16_ROW)
        assert kv_bytes(app) == full

        # Flash Attention off is fine with an f16 V cache ...
        switch = app.query_one(f"#{field_id('llama_cpp.flash_attn')}", Switch)
        switch.focus()
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.session.form["llama_cpp"] == {"flash_attn": False} and app.session.is_valid
        good = app.session.spec

        # ... but not with a quantised one: llama.cpp refuses it, and so does the form.
        await choose(pilot, "llama_cpp.cache_type_v", "q4_0")
        assert not app.session.is_valid
        row = app.query_one(f"#{row_id('llama_cpp.cache_type_v')}", FieldRow)
        assert row.has_class("-invalid")
        error = str(row.query_one(".field-error", Static).content)
        assert "\n" not in error
        assert "quantised V cache without Flash Attention" in error
        assert "set flash_attn = true" in error
        assert [r.field.path for r in app.query(".-invalid")] == ["llama_cpp.cache_type_v"]
        assert app.session.spec is good and kv_bytes(app) == full
        assert "invalid field" in app.sub_title

        # Flash Attention back on: the q4_0 V cache stands (4 blocks of 18 B = 72 B a row).
        await pilot.click(f"#{field_id('llama_cpp.flash_attn')}")
        await pilot.pause()
        assert app.session.is_valid
        assert kv_bytes(app) == CELLS * 2 * (F16_ROW + 72)

        # An n_ctx too small for the sequence: each slot needs 2,304 tokens.
        good = app.session.spec
        await type_into(pilot, "llama_cpp.n_ctx", "1000")
        row = app.query_one(f"#{row_id('llama_cpp.n_ctx')}", FieldRow)
        error = str(row.query_one(".field-error", Static).content)
        assert "gives each of 1 slot(s) 1,000 tokens" in error
        assert "set n_ctx to at least 2,304" in error
        assert app.session.spec == good  # ctrl+u's empty text was the last valid edit
        # Out of range, before the spec is read: the limit is named.
        await type_into(pilot, "llama_cpp.n_gpu_layers", "-2")
        row = app.query_one(f"#{row_id('llama_cpp.n_gpu_layers')}", FieldRow)
        error = str(row.query_one(".field-error", Static).content)
        assert "llama_cpp.n_gpu_layers must be >= -1, got -2" in error
        await type_into(pilot, "llama_cpp.n_gpu_layers", "20000")
        error = str(row.query_one(".field-error", Static).content)
        assert "above vramtui's limit of 10,000" in error
        assert app.session.spec == good


async def test_save_writes_the_llama_cpp_table_and_it_round_trips(catalog, tmp_path):
    write_gguf(tmp_path / "m.gguf")
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(
        'schema_version = 1\nname = "tiny gguf"\n'
        '[model]\npath = "m.gguf"\n'
        '[task]\nkind = "inference"\n'
        '[weights]\nformat = "gguf"\ngguf_type = "F16"\n'
        "[lengths]\nprompt_tokens = 900\ngenerated_tokens = 100\n"
        "[batch]\nconcurrency = 1\n"
        '[runtime]\nattention = "sdpa"\nkv_cache_dtype = "fp16"\nengine = "llama.cpp"\n'
        "[placement]\ngpus = 1\n"
        '[headroom]\nmode = "itemised"\n'
    )
    session = SizingSession.open(spec_file, catalog)
    app = VramtuiApp(session, Config(), draft_file=tmp_path / "state" / "draft.toml")
    async with app.run_test(size=SIZE) as pilot:
        assert shown_paths(app) == LLAMA_CPP_FIELDS
        # 1,000 tokens -> 1,024 cells; 2 layers x (256 + 256) B
        assert kv_bytes(app) == 1024 * 2 * 512
        await type_into(pilot, "llama_cpp.n_ctx", "4096")
        await choose(pilot, "llama_cpp.cache_type_k", "q8_0")
        await choose(pilot, "llama_cpp.cache_type_v", "q8_0")
        await type_into(pilot, "llama_cpp.n_ubatch", "256")
        assert app.session.is_valid
        assert kv_bytes(app) == 4096 * 2 * (136 + 136)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not app.session.dirty

    table = tomllib.loads(spec_file.read_text())["llama_cpp"]
    # What the spec writer writes for a table: every setting the spec holds (n_parallel
    # follows concurrency and is left out, as None).
    assert table == {
        "n_ctx": 4096,
        "n_batch": 2048,
        "n_ubatch": 256,
        "n_gpu_layers": -1,
        "cache_type_k": "q8_0",
        "cache_type_v": "q8_0",
        "flash_attn": True,
        "kv_unified": False,
    }
    saved = load_spec(spec_file)
    assert saved == app.session.spec
    reopened = SizingSession.open(spec_file, catalog)
    assert reopened.spec == saved
    assert reopened.text("llama_cpp.cache_type_k") == "q8_0"
    assert reopened.text("llama_cpp.n_ubatch") == "256"
    # The settings the file holds at llama.cpp's defaults are shown as defaults again.
    assert reopened.form["llama_cpp"] == {"n_ctx": 4096, "n_ubatch": 256} | {
        "cache_type_k": "q8_0",
        "cache_type_v": "q8_0",
    }
    assert reopened.text("llama_cpp.n_batch") == "" and reopened.text("llama_cpp.flash_attn") == ""
    assert reopened.results.estimate.peak_bytes == app.session.results.estimate.peak_bytes


# --- the form's fields, without the app --------------------------------------------------------


def test_llama_cpp_fields_apply_to_llama_cpp_inference_only():
    from vramtui.spec import spec_to_dict
    from vramtui.spec_fields import fields_for

    form = spec_to_dict(seed_example_spec())
    assert not [f for f in fields_for(form) if f.group == "llama_cpp"]
    for engine in ("transformers", "vllm", "tgi", "other"):
        form["runtime"]["engine"] = engine
        assert not [f for f in fields_for(form) if f.group == "llama_cpp"], engine
    form["runtime"]["engine"] = "llama.cpp"
    assert [f.path for f in fields_for(form) if f.group == "llama_cpp"] == LLAMA_CPP_FIELDS
    form["task"]["kind"] = "full_finetune"
    assert not [f for f in fields_for(form) if f.group == "llama_cpp"]


def test_switching_to_training_drops_the_llama_cpp_table():
    session = SizingSession.from_spec(seed_example_spec())
    assert session.set_field("runtime.engine", "llama.cpp").valid
    assert session.set_field("llama_cpp.n_ctx", "8192").valid
    assert session.form["llama_cpp"] == {"n_ctx": 8192}
    assert session.spec.llama_cpp.n_ctx == 8192
    outcome = session.set_field("task.kind", "full_finetune")
    assert outcome.valid, outcome.message
    assert "llama_cpp" not in session.form and session.spec.llama_cpp is None
    # F3: back to inference, and the table with it
    assert session.undo().valid
    assert session.form["llama_cpp"] == {"n_ctx": 8192}


def test_fp8_kv_cache_names_the_cache_type_to_choose():
    """llama.cpp has no fp8 cache: the default cannot be shown, and the spec is refused on
    one line that says which key to set."""
    session = SizingSession.from_spec(seed_example_spec())
    assert session.set_field("runtime.engine", "llama.cpp").valid
    outcome = session.set_field("runtime.kv_cache_dtype", "fp8")
    assert not outcome.valid
    assert "has no llama.cpp cache type" in outcome.message and "\n" not in outcome.message
    assert "set llama_cpp.cache_type_k" in outcome.message
    from vramtui.spec_fields import FIELDS_BY_PATH

    ctk = FIELDS_BY_PATH["llama_cpp.cache_type_k"]
    assert ctk.default(session.form) == "none for kv_cache_dtype fp8: choose one"
    assert session.set_field("llama_cpp.cache_type_k", "q8_0").valid is False  # V still unset
    assert session.set_field("llama_cpp.cache_type_v", "q8_0").valid
