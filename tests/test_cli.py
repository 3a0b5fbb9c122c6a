"""The `vramtui estimate` command line: sample specs, simple mode, the headless import rule, bad
input (exit code 2, one line, no traceback) and a real local checkpoint.

Expected figures are worked by hand: bytes = params x bits / 8, GiB = bytes / 2^30.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vramtui.cli import main

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tui"
PKG = SRC / "vramtui"
SAMPLES = sorted((REPO / "sample_specs").glob("*.toml"))
ENV = {**os.environ, "PYTHONPATH": str(SRC)}
STATUSES = {"estimated", "measured", "unknown"}
ITEM_KEYS = {"name", "bytes", "status", "stages", "basis"}
TOP_KEYS = {
    "weights_only_bytes",
    "items",
    "stage_peak_bytes",
    "peak_bytes",
    "conservative_bound_bytes",
    "unknown_items",
}


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vramtui", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd or REPO,
        timeout=120,
    )


def check_estimate_json(d: dict) -> None:
    assert TOP_KEYS <= set(d), TOP_KEYS - set(d)
    assert d["items"], "an estimate lists at least the weights"
    for item in d["items"]:
        assert ITEM_KEYS <= set(item), (item.get("name"), ITEM_KEYS - set(item))
        assert item["status"] in STATUSES, item
        assert item["stages"], item
        assert item["basis"], item
        if item["status"] == "unknown":
            assert item["bytes"] is None
            assert item["name"] in d["unknown_items"]
        else:
            assert isinstance(item["bytes"], int) and item["bytes"] >= 0, item
    assert set(d["unknown_items"]) == {i["name"] for i in d["items"] if i["status"] == "unknown"}
    assert d["weights_only_bytes"] > 0
    assert d["peak_bytes"] == max(d["stage_peak_bytes"].values())
    assert d["conservative_bound_bytes"] >= d["peak_bytes"] > 0


# ---- sample specs ----------------------------------------------------------------------------


def test_the_five_workload_samples_are_there():
    names = {p.name for p in SAMPLES}
    assert {
        "seed-7b-fp16-inference.toml",
        "llama-3.1-8b-chat-8k-x16.toml",
        "qlora-7b.toml",
        "llama-3.3-70b-awq-tp2.toml",
        "full-finetune-zero3-4gpu.toml",
        "mixtral-8x7b-moe.toml",
    } <= names


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_spec_json_subprocess(path):
    r = run_cli("estimate", str(path), "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    check_estimate_json(json.loads(r.stdout))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_spec_loads_and_renders_in_process(path, capsys):
    from vramtui.spec import load_spec

    spec = load_spec(path)
    assert spec.name, f"{path.name} has no name"
    assert spec.description, f"{path.name} has no description"
    assert main(["estimate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "conservative bound" in out
    assert "GiB" in out


def test_sample_workloads_say_what_they_claim(capsys):
    """Spot checks of the samples against figures worked by hand."""

    def est(name):
        assert main(["estimate", str(REPO / "sample_specs" / name), "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    chat = est("llama-3.1-8b-chat-8k-x16.toml")
    kv = next(i for i in chat["items"] if i["key"] == "kv_cache")
    # 2 (K,V) x 32 layers x 8 KV heads x 128 x 2 B x 16 sequences x 8192 tokens = 16 GiB
    assert kv["bytes"] == 2 * 32 * 8 * 128 * 2 * 16 * 8192 == 16 * 2**30
    assert chat["gpus"] == 1

    awq = est("llama-3.3-70b-awq-tp2.toml")
    assert (awq["gpus"], awq["tensor_parallel"]) == (2, 2)
    # 4-bit weights: far below the 141 GB of bf16, above the bare 4-bit 35 GB
    assert 35e9 < awq["weights_only_bytes"] < 45e9

    moe = est("mixtral-8x7b-moe.toml")
    assert any(i["category"] == "weights" and "expert" in i["name"].lower() for i in moe["items"])
    assert moe["weights_only_bytes"] == pytest.approx(moe["param_count"] * 2, rel=1e-6)

    zero3 = est("full-finetune-zero3-4gpu.toml")
    assert zero3["gpus"] == 4
    names = " ".join(i["name"] for i in zero3["items"])
    assert "master" in names and "Optimiser states" in names


# ---- simple mode (the seed's formula) --------------------------------------------------------

SIMPLE = ["estimate", "--params", "7e9", "--bits", "16", "--headroom-gib", "6"]


def test_simple_mode_text_subprocess():
    r = run_cli(*SIMPLE)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # 7e9 x 16 / 8 = 14e9 B = 13.04 GiB; + 6 GiB = 19.04 GiB
    for s in ("14,000,000,000 B", "13.04 GiB", "19.04 GiB"):
        assert s in out, s
    rows = {
        # bits: (bytes, GiB, rough range GiB), worked by hand
        32: ("28,000,000,000 B", "26.08 GiB", "32.08 GiB"),
        16: ("14,000,000,000 B", "13.04 GiB", "19.04 GiB"),
        8: ("7,000,000,000 B", "6.52 GiB", "12.52 GiB"),
        4: ("3,500,000,000 B", "3.26 GiB", "9.26 GiB"),
    }
    lines = out.splitlines()
    for bits, cells in rows.items():
        hit = [ln for ln in lines if all(c in ln for c in cells)]
        assert hit, f"no format-table row for {bits} bits: {cells}"
        assert hit[0].split("│")[1].strip() == str(bits), hit[0]


def test_simple_mode_json_in_process(capsys):
    assert main([*SIMPLE, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["weights_only_bytes"] == 14_000_000_000
    assert d["rough_range_bytes"] == 14_000_000_000 + 6 * 2**30
    table = {r["bits"]: r["weights_only_bytes"] for r in d["format_table"]}
    assert {b: table[b] for b in (32, 16, 8, 4)} == {
        32: 28_000_000_000,
        16: 14_000_000_000,
        8: 7_000_000_000,
        4: 3_500_000_000,
    }


# ---- no arguments: the built-in seed example -------------------------------------------------


def test_estimate_without_arguments_runs_the_seed(tmp_path):
    r = run_cli("estimate", cwd=tmp_path)  # no sample_specs/ around: the built-in copy
    assert r.returncode == 0, r.stderr
    assert "7,000,000,000 parameters" in r.stdout
    assert "13.04 GiB" in r.stdout and "19.04 GiB" in r.stdout


def test_estimate_without_arguments_json_in_process(capsys):
    assert main(["estimate", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    check_estimate_json(d)
    assert d["weights_only_bytes"] == 14_000_000_000
    assert d["peak_bytes"] == 14_000_000_000 + 6 * 2**30


# ---- the headless command never imports Textual ----------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["vramtui", "estimate", "--json"],
        ["vramtui", "estimate"],
        ["vramtui", "estimate", str(REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml")],
        ["vramtui", "estimate", *SIMPLE[1:]],
        ["vramtui", "sheet", str(REPO / "sample_specs" / "qlora-7b.toml")],
        [
            "vramtui",
            "measure",
            "import",
            str(REPO / "tests" / "vllm_logs" / "v1_0.10.1_api_server.log"),
        ],
    ],
    ids=["seed-json", "seed-text", "llama-spec", "simple", "sheet", "measure-import"],
)
def test_headless_estimate_never_imports_textual(argv):
    code = (
        "import runpy, sys\n"
        f"sys.argv = {argv!r}\n"
        "try:\n"
        "    runpy.run_module('vramtui', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'huggingface_hub'))\n"
        "assert not bad, bad\n"
        "print('NO-TEXTUAL')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("NO-TEXTUAL")


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def test_only_the_app_package_imports_textual():
    app = PKG / "app"
    files = [p for p in PKG.rglob("*.py") if app not in p.parents]
    assert len(files) > 10
    offenders = {
        str(p.relative_to(REPO)): sorted(
            m for m in _imported_modules(p) if m == "textual" or m.startswith("textual.")
        )
        for p in files
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, offenders


# ---- bad input: exit 2, one line on stderr, no traceback -------------------------------------


def assert_one_line_error(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("vramtui: error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_malformed_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('schema_version = 1\nname = "x"\n[model\nid = "x"\n')
    r = run_cli("estimate", str(bad))
    msg = assert_one_line_error(r, "bad.toml", "line 3")
    assert "TOML" in msg


def test_unknown_key_with_suggestion(tmp_path):
    text = (REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml").read_text()
    assert "prompt_tokens = 8000" in text
    spec = tmp_path / "typo.toml"
    spec.write_text(text.replace("prompt_tokens = 8000", "prompt_tokes = 8000"))
    r = run_cli("estimate", str(spec))
    assert_one_line_error(
        r, "unknown key 'lengths.prompt_tokes'", "did you mean 'lengths.prompt_tokens'"
    )


def test_unknown_model_lists_close_matches(tmp_path):
    text = (REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml").read_text()
    spec = tmp_path / "unknown-model.toml"
    spec.write_text(
        text.replace(
            'id = "meta-llama/Llama-3.1-8B-Instruct"', 'id = "meta-llama/Llama-3.1-8B-Instrukt"'
        )
    )
    r = run_cli("estimate", str(spec))
    assert_one_line_error(r, "Llama-3.1-8B-Instrukt", "meta-llama/Llama-3.1-8B-Instruct")


def test_unknown_model_on_the_command_line():
    r = run_cli("estimate", "--model", "llama-3.1-8bb")
    assert_one_line_error(r, "llama-3.1-8bb", "meta-llama/Llama-3.1-8B-Instruct")


def test_missing_spec_file(tmp_path):
    r = run_cli("estimate", str(tmp_path / "nope.toml"))
    assert_one_line_error(r, "nope.toml")


def test_model_directory_without_config_json(tmp_path):
    (tmp_path / "empty-model").mkdir()
    r = run_cli("estimate", "--model", "./empty-model", cwd=tmp_path)
    assert_one_line_error(r, "config.json")


def test_tensor_parallel_must_divide_the_heads():
    r = run_cli(
        "estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "3", "--tp", "3"
    )
    msg = assert_one_line_error(r, "tensor_parallel", "3", "1, 2, 4, 8")
    assert "<spec>" not in msg  # names where the choice came from


def test_tensor_parallel_on_a_sample_spec_names_the_file():
    spec = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
    r = run_cli("estimate", str(spec), "--gpus", "3", "--tp", "3")
    assert_one_line_error(r, "tensor_parallel", "llama-3.1-8b-chat-8k-x16.toml")


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--bits", "16"], ["--params", "--headroom-gib"]),
        (["--bits", "16", "--headroom-gib", "6"], ["--params"]),
        (["--params", "7e9"], ["--bits", "--headroom-gib"]),  # not silently ignored
        (["--params", "seven", "--bits", "16", "--headroom-gib", "6"], ["--params"]),
        (["--params", "inf", "--bits", "16", "--headroom-gib", "6"], ["finite"]),
        (["--params", "7e9", "--bits", "nan", "--headroom-gib", "6"], ["finite"]),
        (["--params", "7e9", "--bits", "16", "--headroom-gib", "-1"], ["--headroom-gib"]),
        (["--params", "7e9", "--bits", "0", "--headroom-gib", "6"], ["--bits"]),
    ],
    ids=[
        "bits-only",
        "no-params",
        "params-only",
        "not-a-number",
        "inf",
        "nan",
        "negative",
        "zero-bits",
    ],
)
def test_simple_mode_bad_arguments(args, needles, capsys):
    assert main(["estimate", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramtui: error:"), captured.err
    for needle in needles:
        assert needle in lines[0]


def test_simple_mode_without_params_subprocess():
    r = run_cli("estimate", "--bits", "16")
    assert_one_line_error(r, "--params")


@pytest.mark.parametrize("spec", [None, "llama-3.1-8b-chat-8k-x16.toml"])
def test_units_toggle(spec, capsys):
    base = ["estimate"] + ([str(REPO / "sample_specs" / spec)] if spec else [])
    assert main([*base, "--units", "gb"]) == 0
    gb = capsys.readouterr().out
    assert main([*base, "--units", "gib"]) == 0
    gib = capsys.readouterr().out
    figure = re.compile(r"\d\.\d\d (GB|GiB)\b")
    assert {m.group(1) for m in figure.finditer(gb)} == {"GB"}
    assert {m.group(1) for m in figure.finditer(gib)} == {"GiB"}
    assert re.search(r"┃\s+GB\b", gb) and re.search(r"┃\s+GiB\b", gib)  # column headers
    # 14e9 B of seed weights = 14.00 GB = 13.04 GiB
    if spec is None:
        assert "14.00 GB" in gb and "13.04 GiB" in gib


# ---- a real local checkpoint -----------------------------------------------------------------


def tiny_llama_dir(path: Path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path, safe_serialization=True)
    assert (path / "config.json").is_file()
    assert (path / "model.safetensors").is_file()
    return model


def test_local_model_directory_exact_weight_bytes(tmp_path):
    model_dir = tmp_path / "tiny-llama"
    model = tiny_llama_dir(model_dir)
    # Exact bytes by hand from the tensors in the file: numel x 2 for bf16.
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
        file_bytes = sum(_numel(f.get_slice(k).get_shape()) for k in f.keys()) * 2
    params = sum(p.numel() for p in model.parameters())
    assert file_bytes == 2 * params == 180_864

    r = run_cli("estimate", "--model", "./tiny-llama", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_estimate_json(d)
    weights = [i for i in d["items"] if i["category"] == "weights"]
    assert weights
    assert sum(i["bytes"] for i in weights) == file_bytes
    assert d["weights_only_bytes"] == file_bytes
    assert d["param_count"] == params
    for item in weights:
        assert "safetensors header" in item["basis"], item["basis"]
    # groups worked by hand: embedding 128x64, lm_head 64x128, attention per layer q,o 64x64 +
    # k,v 32x64, MLP per layer 3 x 64x128, norms 2 per layer + final, x 2 B
    by_key = {i["key"]: i["bytes"] for i in weights}
    assert by_key == {
        "weights.embedding.bf16": 128 * 64 * 2,
        "weights.lm_head.bf16": 128 * 64 * 2,
        "weights.attention.bf16": 2 * (2 * 64 * 64 + 2 * 32 * 64) * 2,
        "weights.mlp.bf16": 2 * 3 * 64 * 128 * 2,
        "weights.norm.bf16": (2 * 2 + 1) * 64 * 2,
    }


def test_local_model_directory_in_a_spec_relative_path(tmp_path, capsys):
    """model.path in a spec is read relative to the spec file's directory."""
    tiny_llama_dir(tmp_path / "tiny")
    text = (REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml").read_text()
    spec = tmp_path / "specs" / "local.toml"
    spec.parent.mkdir()
    spec.write_text(text.replace('id = "meta-llama/Llama-3.1-8B-Instruct"', 'path = "../tiny"'))
    assert main(["estimate", str(spec), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["weights_only_bytes"] == 180_864


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
