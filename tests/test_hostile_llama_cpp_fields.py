"""Hostile values in the spec's new fields: [llama_cpp] (n_ctx 2^63, negative, strings, floats,
unknown cache types), encoder families with a 10^9-token prompt or a Whisper decoder past its
448 positions, and `[model] id = "owner/name:" + "Q" * 10000`; through `vramtui estimate FILE`
(one `vramtui:` line each, exit 2) and through the app's form (one line under the field, the
last valid spec kept)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from vramtui.cli import main

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"


def spec_text(model: str, *, lengths=(900, 100), engine="llama.cpp", table: str = "") -> str:
    weights = 'format = "gguf"\ngguf_type = "F16"' if engine == "llama.cpp" else 'format = "bf16"'
    runtime = f'engine = "{engine}"\n' if engine else ""
    return (
        f'schema_version = 1\nname = "t"\n[model]\n{model}\n[task]\nkind = "inference"\n'
        f"[weights]\n{weights}\n"
        f"[lengths]\nprompt_tokens = {lengths[0]}\ngenerated_tokens = {lengths[1]}\n"
        '[batch]\nconcurrency = 1\n[runtime]\nattention = "sdpa"\nkv_cache_dtype = "fp16"\n'
        f'{runtime}[placement]\ngpus = 1\n[headroom]\nmode = "itemised"\n{table}'
    )


def estimate(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["estimate", str(path)])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def gguf_file(tmp_path) -> Path:
    from test_app_llama_cpp import write_gguf

    return write_gguf(tmp_path / "m.gguf")


LLAMA_CPP_CASES = {
    "n_ctx 2^63 - 1": (
        "n_ctx = 9223372036854775807",
        "llama_cpp.n_ctx = 9.22337e+18 is above vramtui's limit of 10,000,000",
    ),
    "n_ctx negative": ("n_ctx = -5", "llama_cpp.n_ctx must be >= 1, got -5"),
    "n_ctx string": ('n_ctx = "4096"', "llama_cpp.n_ctx must be an integer, got string '4096'"),
    "n_ctx float": ("n_ctx = 4096.5", "llama_cpp.n_ctx must be an integer, got float 4096.5"),
    "n_ctx inf": ("n_ctx = inf", "llama_cpp.n_ctx must be an integer, got float inf"),
    "n_ubatch 2^63 - 1": ("n_ubatch = 9223372036854775807", "above vramtui's limit of 10,000,000"),
    "n_parallel 2^63 - 1": (
        "n_parallel = 9223372036854775807",
        "llama_cpp.n_parallel = 9.22337e+18 is above vramtui's limit of 1,000,000",
    ),
    "n_gpu_layers -2": ("n_gpu_layers = -2", "llama_cpp.n_gpu_layers must be >= -1, got -2"),
    "cache type unknown": (
        'cache_type_k = "q9_9"',
        (
            "llama_cpp.cache_type_k must be one of f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, "
            "q5_0, q5_1, got string 'q9_9'"
        ),
    ),
    "cache type escape": ('cache_type_v = "\\u001b[2J"', "got string '\\x1b[2J'"),
    "flash_attn string": ('flash_attn = "yes"', "llama_cpp.flash_attn must be true or false"),
    "unknown key": ("n_ctxx = 5", "did you mean 'llama_cpp.n_ctx'?"),
}


@pytest.mark.parametrize("name", sorted(LLAMA_CPP_CASES))
def test_hostile_llama_cpp_values_are_one_line(tmp_path, gguf_file, name):
    line, expected = LLAMA_CPP_CASES[name]
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(f'path = "{gguf_file}"', table=f"[llama_cpp]\n{line}\n"))
    rc, out, err = estimate(path)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("vramtui: error: ")
    assert expected in err and "\x1b" not in err


@pytest.mark.parametrize("family", ["bert-base-uncased", "whisper-tiny", "t5-small"])
def test_a_billion_token_prompt_for_an_encoder_is_one_line(tmp_path, family):
    model = tmp_path / family
    model.mkdir()
    (model / "config.json").write_text((CONFIGS / f"{family}.json").read_text())
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(f'path = "{model}"', lengths=(10**9, 1), engine=""))
    rc, _, err = estimate(path)
    assert rc == 2
    assert err == (
        "vramtui: error: lengths.prompt_tokens = 1,000,000,000 is above vramtui's limit of "
        f"10,000,000 ({path}); set it to 10,000,000 or less\n"
    )


def test_a_whisper_decoder_past_448_positions_is_said_once(tmp_path):
    """100 + 349 = 449 target tokens, one past whisper-tiny's max_target_positions 448: the
    estimate stands (the spec is valid) with one warning naming the limit."""
    pytest.importorskip("transformers")
    model = tmp_path / "whisper"
    model.mkdir()
    (model / "config.json").write_text((CONFIGS / "whisper-tiny.json").read_text())
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(f'path = "{model}"', lengths=(100, 349), engine=""))
    rc, out, err = estimate(path)
    assert rc == 0 and err == ""
    flat = " ".join(out.split())
    assert flat.count("= 449 is beyond whisper's max_target_positions 448") == 1


@pytest.mark.parametrize(
    "model_id, expected",
    [
        ("owner/name:" + "Q" * 10_000, "model.id is 10011 characters long"),
        ("owner/name:", "the GGUF quant of 'owner/name:' is empty after the ':'"),
        ("owner/name:Q4\\u001b[2J", "the GGUF quant of 'owner/name:Q4\\x1b[2J' holds characters"),
    ],
    ids=["10000 Qs", "empty", "escape"],
)
def test_hostile_gguf_model_ids_are_one_line(tmp_path, model_id, expected):
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(f'id = "{model_id}"', engine=""))
    rc, _, err = estimate(path)
    assert rc == 2 and err.count("\n") == 1 and len(err) < 400
    assert expected in err and "\x1b" not in err


def test_an_unreadable_form_value_is_cut_in_its_message():
    """A 5,000-character value typed in a choice or switch field was echoed whole."""
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.session import SizingSession

    session = SizingSession.from_spec(seed_example_spec())
    assert session.set_field("runtime.engine", "llama.cpp").valid
    good = session.spec
    for path in ("llama_cpp.cache_type_k", "llama_cpp.flash_attn", "llama_cpp.kv_unified"):
        outcome = session.set_field(path, "9" * 5000)
        assert not outcome.valid
        assert f"cannot read '{'9' * 57}...'" in outcome.message
        assert len(outcome.message) < 300 and session.spec == good


# --- the app ----------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_hostile_values_typed_in_the_llama_cpp_fields_keep_the_last_valid_spec(
    tmp_path, gguf_file, monkeypatch
):
    """Each value arrives whole, as a paste does (typed key by key, a prefix such as 9223372
    of 2^63 - 1 is a valid edit of its own and becomes the last valid spec)."""
    from test_app_llama_cpp import seed_app, type_into
    from textual.widgets import Input, Static

    from vramtui.app.widgets.spec_form import FieldRow, field_id, row_id
    from vramtui.catalog import load_catalog

    async def paste(pilot, path: str, text: str) -> str:
        app.query_one(f"#{field_id(path)}", Input).value = text
        await pilot.pause()
        return str(
            app.query_one(f"#{row_id(path)}", FieldRow).query_one(".field-error", Static).content
        )

    monkeypatch.chdir(tmp_path)
    app = seed_app(load_catalog(None, use_user_config=False), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_into(pilot, "model", "./m.gguf")
        await paste(pilot, "llama_cpp.n_ctx", "4096")
        assert app.session.is_valid
        good = app.session.spec
        assert good.llama_cpp.n_ctx == 4096
        for path, text, expected in [
            ("llama_cpp.n_ctx", "9223372036854775807", "above vramtui's limit of 10,000,000"),
            ("llama_cpp.n_ctx", "-5", "must be >= 1, got -5"),
            ("llama_cpp.n_ctx", "4096.5", "write a whole number"),
            ("llama_cpp.n_batch", "1e400", "write a whole number"),
            (
                "llama_cpp.n_ubatch",
                "9" * 5000,
                "a 5000-digit number is above every limit of vramtui",
            ),
            ("llama_cpp.n_gpu_layers", "\x1b[2J", "write a whole number"),
            ("model", "owner/name:" + "Q" * 10_000, "is 10011 characters long; the limit is 512"),
        ]:
            error = await paste(pilot, path, text)
            assert expected in error, (path, text[:20], error)
            assert "\n" not in error and "\x1b" not in error and len(error) < 300
            assert app.session.spec == good, (path, text[:20])
            assert app.query(".-invalid")
            await paste(
                pilot,
                path,
                "./m.gguf" if path == "model" else "4096" if path == "llama_cpp.n_ctx" else "",
            )
            assert app.session.is_valid and app.session.spec == good, (path, app.session.errors)
