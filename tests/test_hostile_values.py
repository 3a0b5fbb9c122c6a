"""Values a spec dict or a command line can carry that TOML files rarely do: None (the app's
form builds dicts in code), integers far past any real size, `~user` paths for unknown users.
Each gives the stated default or one line naming the problem, never a traceback."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.errors import SpecError
from vramtui.fsutil import user_path
from vramtui.spec import spec_from_dict

SAMPLES = Path(__file__).resolve().parent.parent / "sample_specs"


def _sample(name: str) -> dict:
    return tomllib.loads((SAMPLES / name).read_text(encoding="utf-8"))


def test_none_for_an_optional_key_means_absent():
    with_none = _sample("llama-3.3-70b-awq-tp2.toml")
    without = _sample("llama-3.3-70b-awq-tp2.toml")
    with_none["placement"]["pipeline_parallel"] = None
    without["placement"].pop("pipeline_parallel", None)
    # pipeline_parallel defaults to 1 (no pipeline): both parse to the same placement.
    assert spec_from_dict(with_none).placement == spec_from_dict(without).placement
    assert spec_from_dict(with_none).placement.pipeline_parallel == 1


def test_none_for_a_required_key_is_reported_missing():
    data = _sample("seed-7b-fp16-inference.toml")
    data["placement"]["gpus"] = None
    with pytest.raises(SpecError) as err:
        spec_from_dict(data)
    message = str(err.value)
    assert "placement.gpus is required" in message
    assert "\n" not in message


def test_a_5000_digit_integer_is_described_not_printed():
    data = _sample("seed-7b-fp16-inference.toml")
    data["name"] = 10**4999  # a string is expected
    with pytest.raises(SpecError) as err:
        spec_from_dict(data)
    message = str(err.value)
    # 10**4999 has 5000 digits; the message says so instead of converting it to text.
    assert "about 5000 digits" in message
    assert len(message) < 400 and "\n" not in message


def test_a_deeply_nested_value_is_described_without_recursing():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    data = _sample("seed-7b-fp16-inference.toml")
    data["name"] = deep
    with pytest.raises(SpecError) as err:
        spec_from_dict(data)
    assert "array of 1 items" in str(err.value)


def test_tilde_path_of_an_unknown_user_stays_as_typed():
    text = "~" + "x" * 300 + "/catalog"
    # Path.expanduser raises RuntimeError for an unknown user; user_path keeps the text.
    assert user_path(text) == Path(text)
    assert user_path("~") == Path.home()


def test_catalog_flag_with_unknown_user_is_one_line(capsys):
    code = main(["gpus", "--catalog", "~" + "q" * 300])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert code in (0, 2)


def test_an_unforeseen_exception_is_one_line_and_a_crash_file(monkeypatch, capsys, tmp_path):
    import vramtui.cli as cli

    monkeypatch.setenv("VRAMTUI_STATE_DIR", str(tmp_path / "state"))

    def boom(args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli, "cmd_gpus", boom)
    code = cli.main(["gpus"])
    err = capsys.readouterr().err
    assert code == 70
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramtui: internal error (ZeroDivisionError")
    crash = list((tmp_path / "state").glob("crash-*.txt"))
    assert len(crash) == 1
    assert "Traceback (most recent call last)" in crash[0].read_text()
    assert str(crash[0]) in lines[0]


def test_a_5000_digit_schema_version_is_refused_in_one_line():
    data = _sample("mixtral-8x7b-moe.toml")
    data["schema_version"] = 10**4999
    with pytest.raises(SpecError) as err:
        spec_from_dict(data)
    message = str(err.value)
    assert message.startswith("schema_version a number of over 300 digits is not supported")
    assert "\n" not in message
