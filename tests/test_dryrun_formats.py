"""The dry run honours the checkpoint's stored format, every family dry-runs, and a failed
dry run keeps the ledger.

Stored bytes are worked by hand for tiny configs. The tiny configs keep the structure keys of
the published ones (tests/tiny_configs.py): hidden 64, 2 layers, 4 heads of 16, vocabulary 128.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from vramtui.ledger import estimate
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.models.registry import _apply_nulls
from vramtui.spec import loads_spec

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tiny_configs import tiny

from vramtui.dryrun import DryRunError, run_dry_run

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "catalog" / "models"
CONFIGS = ROOT / "tests" / "data" / "configs"


def catalog_config(hub_id: str) -> dict:
    path = CATALOG / (hub_id.replace("/", "--") + ".toml")
    data = tomllib.loads(path.read_text())
    config = data["config"]
    _apply_nulls(config, data["meta"].get("null_keys", []), path)
    return config


def file_config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def arch_of(config: dict, name: str = "tiny"):
    return architecture_from_hf_config(dict(config), model_id=name, source=f"{name} config")


def _spec(text: str):
    return loads_spec("schema_version = 1\n\n" + text.strip() + "\n")


def infer_spec(attention: str = "sdpa", weights: str = 'format = "bf16"'):
    return _spec(
        f"""
[model]
id = "tiny"
[task]
kind = "inference"
[weights]
{weights}
[lengths]
prompt_tokens = 32
generated_tokens = 4
[batch]
concurrency = 2
[runtime]
attention = "{attention}"
kv_cache_dtype = "bf16"
engine = "transformers"
[placement]
gpus = 1
[headroom]
mode = "itemised"
"""
    )


def train_spec(attention: str = "eager", checkpointing: str = "selective"):
    return _spec(
        f"""
[model]
id = "tiny"
[task]
kind = "full_finetune"
[weights]
format = "bf16"
[lengths]
seq_len = 32
[batch]
micro_batch = 2
grad_accum = 1
[training]
optimizer = "adamw"
master_weights_fp32 = true
grad_dtype = "bf16"
optimizer_state_dtype = "fp32"
grad_checkpointing = "{checkpointing}"
[runtime]
attention = "{attention}"
engine = "transformers"
[placement]
gpus = 1
[headroom]
mode = "itemised"
"""
    )


def transformers_param_bytes(config: dict) -> tuple[int, int]:
    """(bytes of the parameters of the model transformers builds itself in bf16, values of
    those it keeps in fp32 all the same): no vramtui code involved."""
    kwargs = {k: v for k, v in config.items() if k not in ("model_type", "quantization_config")}
    hf_config = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch.bfloat16)
    params = list(model.parameters())
    fp32 = sum(p.numel() for p in params if p.dtype == torch.float32)
    return sum(p.numel() * p.element_size() for p in params), fp32


# ------------------------------------------------------------- every family dry-runs

# The hand-modelled families (vramtui.models.structure.HAND_MODELLED), from the catalogue's
# published configs, and derived families from the published configs in tests/data/configs.
FAMILY_CONFIGS = {
    "llama": lambda: catalog_config("meta-llama/Llama-3.1-8B-Instruct"),
    "mistral": lambda: catalog_config("mistralai/Mistral-7B-v0.1"),
    "mixtral": lambda: catalog_config("mistralai/Mixtral-8x7B-v0.1"),
    "qwen2": lambda: catalog_config("Qwen/Qwen2.5-7B-Instruct"),
    "qwen2_moe": lambda: {
        **catalog_config("Qwen/Qwen2.5-7B-Instruct"),
        "model_type": "qwen2_moe",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32,
        "decoder_sparse_step": 1,
    },
    "qwen3": lambda: catalog_config("Qwen/Qwen3-8B"),
    "qwen3_moe": lambda: catalog_config("Qwen/Qwen3-30B-A3B"),
    "gemma2": lambda: catalog_config("google/gemma-2-2b-it"),
    "gemma3_text": lambda: catalog_config("google/gemma-3-1b-it"),
    "phi3": lambda: catalog_config("microsoft/Phi-3-mini-4k-instruct"),
    "falcon-7b": lambda: catalog_config("tiiuae/falcon-7b"),
    "falcon-40b": lambda: catalog_config("tiiuae/falcon-40b"),
    "deepseek_v2": lambda: catalog_config("deepseek-ai/DeepSeek-V2-Lite"),
    "deepseek_v3": lambda: catalog_config("deepseek-ai/DeepSeek-V3"),
    "gpt_oss": lambda: catalog_config("openai/gpt-oss-20b"),
    "phi": lambda: file_config("phi-2"),
    "gpt_neox": lambda: file_config("pythia-160m"),
    "gpt2": lambda: file_config("gpt2"),
    "stablelm": lambda: file_config("stablelm-2-1_6b"),
}


def test_every_hand_modelled_family_is_covered():
    from vramtui.models.structure import HAND_MODELLED

    covered = {tiny(f())["model_type"] for f in FAMILY_CONFIGS.values()}
    assert HAND_MODELLED <= covered


@pytest.fixture(scope="module")
def family_archs(session_cache_dir):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VRAMTUI_CACHE_DIR", str(session_cache_dir))
        yield {name: (tiny(f()), arch_of(tiny(f()), name)) for name, f in FAMILY_CONFIGS.items()}


@pytest.mark.parametrize("name", sorted(FAMILY_CONFIGS))
def test_family_dry_runs_with_the_ledgers_weights(family_archs, name):
    config, arch = family_archs[name]
    spec = infer_spec()
    r = run_dry_run(spec, arch)
    # the weights built are transformers' own model's parameters, in bf16
    own_bytes, kept_fp32 = transformers_param_bytes(config)
    assert r.weights_bytes == own_bytes
    # and the ledger's weights, to the byte (no stored format here), except that the ledger
    # charges 2 B for the values transformers keeps in fp32 (DeepSeek's router: 4 B)
    est = estimate(spec, arch)
    ledger = sum(i.max_bytes for i in est.items if i.category in ("weights", "quant_metadata"))
    assert r.weights_bytes == ledger + 2 * kept_fp32
    assert (kept_fp32 > 0) == name.startswith("deepseek")
    assert [s.stage for s in r.stages] == ["prefill", "decode"]


@pytest.mark.parametrize("name", ["falcon-7b", "falcon-40b", "gpt2", "phi"])
def test_family_trains_with_eager_selective(family_archs, name):
    _, arch = family_archs[name]
    r = run_dry_run(train_spec("eager", "selective"), arch)
    assert r.stage_names[:3] == ("forward", "backward", "optimizer_step")


def test_falcon_routes_to_sdpa_and_traces_it_as_the_kernel(family_archs):
    """Falcon picks its attention class from a fixed table (no AttentionInterface): built with
    transformers' "sdpa", whose direct SDPA call is traced as the fused kernel."""
    _, arch = family_archs["falcon-7b"]
    sdpa = run_dry_run(infer_spec("sdpa"), arch)
    eager = run_dry_run(infer_spec("eager"), arch)
    assert sdpa.attn_implementation == "sdpa" and eager.attn_implementation == "eager"
    assert any("fixed table" in n and "fused kernel" in n for n in sdpa.notes)
    # Eager keeps the s x s scores, the kernel does not. Prefill of 2 x 32 tokens, 4 heads:
    # one layer's scores are 2 x 4 x 32 x 32 = 8,192 values; falcon-7b's eager path adds the
    # float mask to bf16 scores and softmaxes them in bf16 (2 B each): at least 16,384 B more
    # at the peak than the kernel, which keeps an fp32 log-sum-exp of 2 x 4 x 32 x 4 B = 1 KiB.
    gap = eager.stage("prefill").peak_bytes - sdpa.stage("prefill").peak_bytes
    assert gap >= 16_384 - 1_024


# ------------------------------------------------------ a failed dry run keeps the ledger


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """The CLI in a subprocess whose transformers cannot be imported (a real dry-run
    failure: the missing extra), the ledger's code unaffected."""
    blocker = tmp_path / "block"
    blocker.mkdir(exist_ok=True)
    (blocker / "transformers.py").write_text('raise ImportError("blocked by the test")\n')
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(blocker), str(ROOT / "tui"), env.get("PYTHONPATH", "")]
    )
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "vramtui", "estimate", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_failed_dry_run_prints_the_ledger_text(tmp_path):
    model = ["--model", "meta-llama/Llama-3.2-1B-Instruct", "--dry-run"]
    run = _cli(model, tmp_path)
    assert run.returncode == 0, run.stderr
    out = " ".join(run.stdout.split())
    assert "Weights" in out  # the ledger's items are there
    assert "dry run failed, the ledger stands without it: the dry run needs torch and " in out
    assert "pip install '.[dryrun]'" in out


def test_failed_dry_run_prints_the_ledger_json(tmp_path):
    model = ["--model", "meta-llama/Llama-3.2-1B-Instruct", "--dry-run", "--json"]
    run = _cli(model, tmp_path)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["dry_run"]["status"] == "failed"
    assert "needs torch and transformers" in data["dry_run"]["error"]
    assert [n for n in data["notes"] if n.startswith("dry run failed")]
    # Llama-3.2-1B-Instruct: 1,235,814,400 parameters, tied, bf16 = 2,471,628,800 B of weights
    weights = sum(i["bytes"] for i in data["items"] if i["category"] == "weights")
    assert weights == 2_471_628_800


def test_build_failure_keeps_the_ledger(monkeypatch, capsys):
    """A build failure (what Falcon hit) leaves the ledger and says why in its notes."""
    from vramtui.cli import main
    from vramtui.dryrun import build

    def cannot_build(*args, **kwargs):
        raise DryRunError("transformers cannot build this model (test); the ledger stands")

    monkeypatch.setattr(build, "build_model", cannot_build)
    argv = ["estimate", "--model", "Qwen/Qwen2.5-0.5B-Instruct", "--dry-run", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dry_run"] == {
        "status": "failed",
        "error": "transformers cannot build this model (test); the ledger stands",
    }
    assert data["items"]
