"""Hostile text never reaches the terminal or a file as terminal commands.

A spec someone sends and a user catalogue offer carry an OSC 52 sequence (set the clipboard), a
CSI 2J (clear the screen), a C1 CSI (U+009B) and a bidi override (U+202E). Every command that
shows them is run as a user runs it, and its stdout, stderr and written files are checked for
the raw bytes; the app's screen is checked the same way.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomli_w

from vramtui.safe_text import has_unsafe, safe_line, safe_text

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
SEED = REPO / "sample_specs" / "seed-7b-fp16-inference.toml"
OFFER = REPO / "catalog" / "offers" / "sample-b-h100-sxm-x1.toml"
GPU = REPO / "catalog" / "gpus" / "h100-sxm.toml"
OOM_LOG = REPO / "tests" / "triage_logs" / "pytorch_cuda_current_generate.log"

OSC52_CSI2J = "\x1b]52;c;SGVsbG8=\x07evil\x1b[2J"
PAYLOAD = OSC52_CSI2J + "\x9b2J\u202eabc"
# What a terminal would obey: ESC, BEL, any C1 control, a bidi override.
FORBIDDEN = re.compile("[\x1b\x07\x80-\x9f\u202a-\u202e\u2066-\u2069]")


def forbidden_in(text: str) -> list[str]:
    return sorted({repr(m.group()) for m in FORBIDDEN.finditer(text)})


# ---------------------------------------------------------------------------- the cleaner


def test_safe_line_makes_every_control_visible():
    assert safe_line(OSC52_CSI2J) == "\\x1b]52;c;SGVsbG8=\\x07evil\\x1b[2J"
    assert safe_line("a\x9bb\u202ec\u2066d\x7fe\x00") == "a\\x9bb\\u202ec\\u2066d\\x7fe\\x00"
    assert safe_line("one\ttwo\nthree\r\nfour") == "one two three four"
    assert safe_line("plain, ünïcode and 中文 [bold]") == "plain, ünïcode and 中文 [bold]"


def test_safe_text_keeps_lines_and_tabs():
    assert safe_text("a\tb\nc\r\nd\re\x1b[2J") == "a\tb\nc\nd\ne\\x1b[2J"


def test_cleaning_twice_changes_nothing():
    once = safe_line(PAYLOAD)
    assert safe_line(once) == once and safe_text(once) == once
    assert not has_unsafe(once) and has_unsafe(PAYLOAD)
    assert not forbidden_in(once)


# ---------------------------------------------------------------------------- the commands


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A spec and a user catalogue (an offer and a GPU) carrying the payload."""
    root = tmp_path_factory.mktemp("hostile")
    spec = tomllib.loads(SEED.read_text())
    spec["name"] = PAYLOAD
    spec["description"] = "line one\n" + PAYLOAD
    spec["headroom"]["reason"] = PAYLOAD
    spec_path = root / "evil.toml"
    spec_path.write_text(tomli_w.dumps(spec))
    assert "\x1b" not in spec_path.read_text()  # TOML writes the payload as \u001b escapes

    config = root / "config"
    offers, gpus = config / "catalog" / "offers", config / "catalog" / "gpus"
    offers.mkdir(parents=True)
    gpus.mkdir(parents=True)
    offer = tomllib.loads(OFFER.read_text())
    offer.update(id="evil-offer", provider=PAYLOAD, title=PAYLOAD, notes=PAYLOAD)
    offer["plans"][0]["name"] = PAYLOAD
    offer["schedule"]["note"] = PAYLOAD
    (offers / "evil-offer.toml").write_text(tomli_w.dumps(offer))
    gpu = tomllib.loads(GPU.read_text())
    gpu.update(id="evil-gpu", name=PAYLOAD)
    (gpus / "evil-gpu.toml").write_text(tomli_w.dumps(gpu))

    bad = dict(spec)
    bad[PAYLOAD] = 1  # an unknown key, named in the error
    bad_path = root / "bad.toml"
    bad_path.write_text(tomli_w.dumps(bad))
    bad_kind = tomllib.loads(SEED.read_text())
    bad_kind["name"] = PAYLOAD
    bad_kind["task"]["kind"] = PAYLOAD  # an invalid choice after the name
    bad_kind_path = root / "bad-kind.toml"
    bad_kind_path.write_text(tomli_w.dumps(bad_kind))

    log = root / "oom.log"
    log.write_text(PAYLOAD + "\n" + OOM_LOG.read_text())
    return {
        "root": root,
        "spec": spec_path,
        "bad": bad_path,
        "bad_kind": bad_kind_path,
        "config": config,
        "log": log,
    }


def run_cli(hostile, *args: str, color: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "COLUMNS")}
    env.update(PYTHONPATH=str(SRC), VRAMTUI_CONFIG_DIR=str(hostile["config"]), COLUMNS="200")
    if color:
        env["FORCE_COLOR"] = "1"
        env["TERM"] = "xterm-256color"
    proc = subprocess.run(
        [sys.executable, "-m", "vramtui", *args],
        capture_output=True,
        env=env,
        cwd=hostile["root"],
        timeout=120,
    )
    for name, data in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        text = data.decode("utf-8")
        if color:  # Rich's own colours are SGR sequences; nothing else may remain
            text = re.sub(r"\x1b\[[0-9;]*m", "", text)
        assert not forbidden_in(text), (args, name, forbidden_in(text), text[-2000:])
    return proc


TODAY = ["--today", "2026-12-02"]


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", "{spec}"],
        ["estimate", "{spec}", "--explain"],
        ["shortlist", "{spec}", *TODAY],
        ["shortlist", "{spec}", *TODAY, "--detail", "evil-offer"],
        ["offers"],
        ["gpus"],
        ["sheet", "{spec}", *TODAY],
        ["triage", "{log}", "--spec", "{spec}"],
    ],
    ids=lambda a: " ".join(a[:1] + [x for x in a[1:] if x.startswith("--")]),
)
def test_no_command_prints_the_payload_raw(hostile, args):
    args = [a.format(**{k: str(v) for k, v in hostile.items()}) for a in args]
    proc = run_cli(hostile, *args)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    # The text is still there, readable, with the escape shown instead of obeyed.
    if args[0] in ("offers", "gpus") or "--detail" in args:
        assert "\\x1b]52;c;SGVsbG8=" in out.replace("\n", "")
    if args[0] in ("shortlist", "sheet"):
        assert "\\x1b" in out


def test_colour_output_has_only_rich_own_styles(hostile):
    for args in (["offers"], ["shortlist", str(hostile["spec"]), *TODAY]):
        proc = run_cli(hostile, *args, color=True)
        assert proc.returncode == 0
        assert b"\x1b[" in proc.stdout  # colours really were on


@pytest.mark.parametrize("which", ["bad", "bad_kind"])
def test_the_error_line_does_not_carry_the_payload(hostile, which):
    proc = run_cli(hostile, "estimate", str(hostile[which]))
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert err.startswith("vramtui: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_the_written_sheet_holds_no_raw_control(hostile, suffix):
    out = hostile["root"] / f"sheet{suffix}"
    run_cli(hostile, "sheet", str(hostile["spec"]), *TODAY, "-o", str(out))
    text = out.read_text(encoding="utf-8")
    assert not forbidden_in(text), forbidden_in(text)
    assert "\\x1b]52;c;SGVsbG8=" in text
    if suffix == ".html":
        assert "<script" not in text.lower()


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", "{spec}", "--json"],
        ["shortlist", "{spec}", *TODAY, "--json"],
        ["triage", "{log}", "--spec", "{spec}", "--json"],
    ],
    ids=lambda a: a[0],
)
def test_json_stays_valid_and_escaped(hostile, args):
    args = [a.format(**{k: str(v) for k, v in hostile.items()}) for a in args]
    proc = run_cli(hostile, *args)
    assert proc.returncode == 0, proc.stderr.decode()
    json.loads(proc.stdout)


def test_json_dumps_escapes_raw_controls():
    # The JSON writers rely on json.dumps escaping control characters (with or without ASCII).
    for ensure_ascii in (True, False):
        dumped = json.dumps({"name": OSC52_CSI2J}, ensure_ascii=ensure_ascii)
        assert "\x1b" not in dumped and "\x07" not in dumped
        assert json.loads(dumped) == {"name": OSC52_CSI2J}


# ---------------------------------------------------------------------------- entry points


def test_the_spec_parser_cleans_every_free_text_field(hostile):
    from vramtui.spec import load_spec

    spec = load_spec(hostile["spec"])
    assert spec.name == safe_line(PAYLOAD)
    assert spec.description == "line one\n" + safe_line(PAYLOAD)
    assert spec.headroom.reason == safe_line(PAYLOAD)


def test_the_catalogue_loader_cleans_user_offers(hostile):
    from vramtui.catalog import load_catalog

    catalog = load_catalog(hostile["config"] / "catalog")
    offer = catalog.offers["evil-offer"]
    assert offer.provider == offer.title == offer.notes == safe_line(PAYLOAD)
    assert offer.plans[0].name == safe_line(PAYLOAD)
    assert catalog.gpus["evil-gpu"].name == safe_line(PAYLOAD)


def test_the_console_shows_markup_and_controls_as_written():
    from rich.table import Table
    from rich.text import Text

    from vramtui.render import SafeConsole

    out = io.StringIO()
    t = Table("title")
    t.add_row("[/]closing [bold]x[/bold] \x1b[2J")  # "[/]" alone would be a MarkupError
    t.add_row(Text("a Text \x1b]52;c;SGVsbG8=\x07 too"))
    SafeConsole(file=out, width=120, color_system=None).print(t)
    shown = out.getvalue()
    assert "[/]closing [bold]x[/bold] \\x1b[2J" in shown
    assert "a Text \\x1b]52;c;SGVsbG8=" in shown  # (Rich's Text drops the BEL itself)
    assert not forbidden_in(shown)


# ---------------------------------------------------------------------------- the app


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_app_screen_shows_no_raw_payload(hostile, tmp_path, anyio_backend):
    from vramtui.app.app import VramtuiApp
    from vramtui.catalog import load_catalog
    from vramtui.config import Config
    from vramtui.session import SizingSession
    from vramtui.spec import load_spec

    catalog = load_catalog(hostile["config"] / "catalog")
    spec_path = hostile["spec"]
    session = SizingSession.from_spec(
        load_spec(spec_path), spec_path, catalog, today=datetime.date(2026, 12, 2)
    )
    app = VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")
    async with app.run_test(size=(160, 50)) as pilot:
        app.notify(PAYLOAD)
        app.sub_title = app.sub_title  # unchanged: a clean path
        screens = []
        for key in ("f5", "f6", "f7"):
            await pilot.press(key)
            await pilot.pause()
            screens.append(app.export_screenshot())
        text = "".join(screens)
        assert not forbidden_in(text), forbidden_in(text)
        assert "SGVsbG8=" in text  # the offer's title and the notification are on screen


def test_imported_measurements_and_triage_attempts_are_cleaned():
    # Built by the measure importers, the triage advice and the feed from logs and drivers.
    from vramtui.spec import Measurement, TriageAttempt

    m = Measurement(
        stage="load",
        quantity="peak_reserved",
        bytes=1,
        counter="torch.cuda" + OSC52_CSI2J,
        device="H100\x9b2J",
        error="OutOfMemoryError:\n" + OSC52_CSI2J,
        versions={"torch\x1b": "2.8\x07"},
    )
    assert m.counter == "torch.cuda\\x1b]52;c;SGVsbG8=\\x07evil\\x1b[2J"
    assert m.device == "H100\\x9b2J"
    assert m.error == "OutOfMemoryError:\n\\x1b]52;c;SGVsbG8=\\x07evil\\x1b[2J"
    assert m.versions == (("torch\\x1b", "2.8\\x07"),)
    t = TriageAttempt(
        time="2026-12-02T10:00:00",
        phase="load",
        variable="micro_batch",
        change="micro_batch 8 -> 4" + OSC52_CSI2J,
    )
    assert not forbidden_in(t.change) and t.change.startswith("micro_batch 8 -> 4\\x1b]52")


def test_a_user_model_file_with_a_hostile_key_is_skipped_in_one_clean_line(hostile, tmp_path):
    """Found by the long fuzz run: a quoted TOML key holding ESC reached stderr in the
    'unknown key' warning of `vramtui models --catalog DIR`."""
    models = tmp_path / "cat" / "models"
    models.mkdir(parents=True)
    builtin = SRC.parent / "catalog" / "models" / "01-ai--Yi-34B.toml"
    data = tomllib.loads(builtin.read_text())
    data["meta"][PAYLOAD] = "x"
    (models / builtin.name).write_text(tomli_w.dumps(data))
    proc = run_cli(hostile, "models", "--catalog", str(tmp_path / "cat"))
    assert proc.returncode == 0
    warnings = [line for line in proc.stderr.decode().splitlines() if "warning" in line]
    assert len(warnings) == 1 and "unknown key meta." in warnings[0], proc.stderr
    assert "(file skipped)" in warnings[0]


def test_a_user_model_file_whose_null_keys_is_not_a_list_is_skipped_in_one_line(hostile, tmp_path):
    """Found by the long fuzz run (seed 14): `meta.null_keys = true` crashed `vramtui models`
    (exit 70) instead of skipping the file with its reason."""
    models = tmp_path / "cat" / "models"
    models.mkdir(parents=True)
    builtin = SRC.parent / "catalog" / "models" / "Qwen--Qwen3-0.6B.toml"
    data = tomllib.loads(builtin.read_text())
    data["meta"]["null_keys"] = True
    (models / builtin.name).write_text(tomli_w.dumps(data))
    proc = run_cli(hostile, "models", "--catalog", str(tmp_path / "cat"))
    assert proc.returncode == 0, proc.stderr
    (warning,) = [ln for ln in proc.stderr.decode().splitlines() if "warning" in ln]
    assert "meta.null_keys must list config key names" in warning and "(file skipped)" in warning


def test_a_probe_file_error_does_not_carry_a_run_id_payload(tmp_path):
    """Found by the long fuzz run (seed 14): a stage record naming an unknown run whose id held
    CSI 2J put the raw ESC into the one-line error."""
    from vramtui.probe.records import ProbeFileError, parse_probe_lines

    stage = {
        "vramtui_probe": 1,
        "kind": "stage",
        "run_id": "\x1b[2J\x1b[H",
        "stage": "load",
        "time_start": "",
        "time_end": "",
        "seconds": 0,
        "dims": {},
        "measured": False,
        "reason": None,
        "error": None,
        "devices": [],
    }
    with pytest.raises(ProbeFileError) as info:
        parse_probe_lines(json.dumps(stage) + "\n", source="fuzz.jsonl")
    message = str(info.value)
    assert "\x1b" not in message and "\\x1b[2J" in message
