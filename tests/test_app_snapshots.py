"""SVG snapshots of the app's main screens (pytest-textual-snapshot), at 80x24 and 120x40.

Deterministic by construction: a fixed planning date for the shortlist, the built-in catalogue
only (no user config), spec paths relative to the repository (the title shows them), and no
cursor blink. Regenerate after a deliberate change to the look with

    PYTHONPATH=tui python -m pytest tests/test_app_snapshots.py --snapshot-update

and read the SVGs (tests/__snapshots__/test_app_snapshots/) before committing them.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from textual.widgets import Input, TextArea
from vramtui.app.app import VramtuiApp
from vramtui.builtin_specs import seed_example_spec
from vramtui.catalog import load_catalog
from vramtui.config import Config
from vramtui.session import SizingSession
from vramtui.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
CHAT_SPEC = Path("sample_specs") / "llama-3.1-8b-chat-8k-x16.toml"  # relative: shown in titles
TODAY = datetime.date(2026, 12, 10)
SMALL, LARGE = (80, 24), (120, 40)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(None, use_user_config=False)


def make_app(catalog, tmp_path: Path, spec_path: Path | None = None) -> VramtuiApp:
    if spec_path is None:
        session = SizingSession.from_spec(seed_example_spec(), None, catalog, today=TODAY)
    else:
        session = SizingSession.from_spec(
            load_spec(REPO / spec_path), spec_path, catalog, today=TODAY
        )
    return VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")


async def no_blink(pilot) -> None:
    for widget in pilot.app.query(Input):
        widget.cursor_blink = False
    for area in pilot.app.query(TextArea):  # the triage paste box blinks too
        area.cursor_blink = False
    await pilot.pause()


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "120x40"])
def test_sizing_seed(snap_compare, catalog, tmp_path, size):
    """Sizing tab on the built-in seed example: 7e9 parameters, fp16, manual 6 GiB reserve."""
    assert snap_compare(make_app(catalog, tmp_path), terminal_size=size, run_before=no_blink)


def test_sizing_llama_chat(snap_compare, catalog, tmp_path):
    """Sizing tab on the Llama 3.1 8B chat sample: itemised ledger with the KV cache."""
    app = make_app(catalog, tmp_path, CHAT_SPEC)
    assert snap_compare(app, terminal_size=LARGE, run_before=no_blink)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "120x40"])
def test_shortlist(snap_compare, catalog, tmp_path, size):
    """Shortlist tab on the seed: ranked fits first with the total cost on screen, the sample
    data banner, the first candidate's evidence."""
    app = make_app(catalog, tmp_path)
    assert snap_compare(app, press=["f6"], terminal_size=size, run_before=no_blink)


def test_invalid_field(snap_compare, catalog, tmp_path):
    """'8k' typed as prompt tokens: the field is marked with its reason, the title says the
    ledger shows the last valid estimate."""

    async def type_bad_value(pilot):
        await no_blink(pilot)
        pilot.app.query_one("#f-lengths-prompt_tokens", Input).focus()
        await pilot.pause()
        await pilot.press("end", "ctrl+u", "8", "k")
        await pilot.pause()
        # the field that lost focus scrolls its text back; on a loaded machine that can still
        # be under way at the first pause, so wait for it to settle before the snapshot
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    app = make_app(catalog, tmp_path)
    assert snap_compare(app, terminal_size=LARGE, run_before=type_bad_value)


def test_help(snap_compare, catalog, tmp_path):
    """The help screen: what the statuses and units mean, and every key with its binding id."""
    app = make_app(catalog, tmp_path)
    assert snap_compare(app, press=["f1"], terminal_size=LARGE, run_before=no_blink)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "120x40"])
def test_triage_tab(snap_compare, catalog, tmp_path, size):
    """Triage tab after reading a current-form PyTorch OOM against the chat spec."""
    log = (REPO / "tests" / "triage_logs" / "pytorch_cuda_current_generate.log").read_text()

    async def read(pilot) -> None:
        await no_blink(pilot)
        await pilot.press("f7")
        pilot.app.triage_pane.set_log_text(log)
        await pilot.press("ctrl+r")
        await no_blink(pilot)
        await pilot.pause()

    assert snap_compare(make_app(catalog, tmp_path, CHAT_SPEC), terminal_size=size, run_before=read)


def test_triage_mismatch_and_unknown_stage(snap_compare, catalog, tmp_path):
    """Triage tab on an OOM with no frames whose log ran another workload than the chat spec:
    the stage question, the mismatch lines, and the two prediction columns."""
    log = (
        "INFO 03-20 02:29:07 [core.py:58] Initializing a V1 LLM engine (v0.8.1) with config: "
        "model='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=4096, "
        "tensor_parallel_size=2\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.25 GiB of which 1.00 GiB is free. Including non-PyTorch memory, "
        "this process has 76.00 GiB memory in use. Of the allocated memory 75.50 GiB is "
        "allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.\n"
    )

    async def read(pilot) -> None:
        await no_blink(pilot)
        await pilot.press("f7")
        pilot.app.triage_pane.set_log_text(log)
        await pilot.press("ctrl+r")
        await no_blink(pilot)
        await pilot.pause()

    assert snap_compare(
        make_app(catalog, tmp_path, CHAT_SPEC), terminal_size=LARGE, run_before=read
    )


LLAMA_CPP_SPEC = """schema_version = 1
name = "Llama 3.1 8B in llama.cpp"
[model]
id = "meta-llama/Llama-3.1-8B-Instruct"
[task]
kind = "inference"
[weights]
format = "bf16"
[lengths]
prompt_tokens = 4000
generated_tokens = 96
[batch]
concurrency = 2
[runtime]
attention = "flash"
kv_cache_dtype = "bf16"
engine = "llama.cpp"
[llama_cpp]
cache_type_k = "q8_0"
n_gpu_layers = 20
[placement]
gpus = 1
[headroom]
mode = "itemised"
"""


def test_sizing_llama_cpp_fields(snap_compare, catalog, tmp_path, monkeypatch):
    """Sizing tab with engine llama.cpp: the llama.cpp group, the two settings the spec sets
    (-ctk q8_0, -ngl 20) as values and the others as their defaults (n_ctx 2 slots x 4,096)."""
    monkeypatch.chdir(tmp_path)  # the title shows the spec's path: keep it relative
    spec_path = Path("llama-cpp.toml")
    spec_path.write_text(LLAMA_CPP_SPEC)
    session = SizingSession.from_spec(load_spec(spec_path), spec_path, catalog, today=TODAY)
    app = VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")

    async def show_fields(pilot) -> None:
        await no_blink(pilot)
        pilot.app.query_one("#f-llama_cpp-n_ctx", Input).focus()
        await pilot.pause()

    assert snap_compare(app, terminal_size=LARGE, run_before=show_fields)
