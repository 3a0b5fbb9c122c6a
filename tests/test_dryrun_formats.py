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


def _falcon_dispatches_through_the_interface() -> bool:
    """transformers 5.24's Falcon picks its attention class from a fixed table; 5.25's calls
    AttentionInterface. Read from the modeling file, as the dry run decides."""
    import transformers.models.falcon.modeling_falcon as falcon

    return "ALL_ATTENTION_FUNCTIONS" in Path(falcon.__file__).read_text(encoding="utf-8")


def test_falcon_routes_to_sdpa_and_traces_it_as_the_kernel(family_archs):
    """Where Falcon picks its attention class from a fixed table (no AttentionInterface), it is
    built with transformers' "sdpa", whose direct SDPA call is traced as the fused kernel;
    where it dispatches through AttentionInterface, the trace's own functions run. Either way
    Falcon dry-runs, and eager keeps the scores the kernel does not."""
    _, arch = family_archs["falcon-7b"]
    sdpa = run_dry_run(infer_spec("sdpa"), arch)
    eager = run_dry_run(infer_spec("eager"), arch)
    if _falcon_dispatches_through_the_interface():
        assert sdpa.attn_implementation.startswith("vramtui_")
        assert eager.attn_implementation.startswith("vramtui_")
        assert not any("fixed table" in n for n in sdpa.notes)
    else:
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


# ------------------------------------------------------------ stored formats, by hand


def test_fp8_block_scaled_linear_by_hand():
    from vramtui.dryrun.stored import fp8_tensors, tensor_bytes

    # 256 x 256 e4m3 = 65,536 B; 2 x 2 blocks of 128 x 128, one fp32 scale each = 16 B
    assert tensor_bytes(fp8_tensors(256, 256, (128, 128))) == 65_552
    # 300 x 200: ceil(300/128) = 3 x ceil(200/128) = 2 scales -> 60,000 + 24 B
    assert tensor_bytes(fp8_tensors(300, 200, (128, 128))) == 60_024
    # per tensor: one fp32 scalar
    assert tensor_bytes(fp8_tensors(256, 256, None)) == 65_540


def test_mxfp4_by_hand():
    from vramtui.dryrun.stored import mxfp4_tensors, tensor_bytes

    # 256 x 256: 256 rows x 8 blocks of 32 values, 16 B + a 1 B scale per block
    assert tensor_bytes(mxfp4_tensors(256, 256)) == 256 * 8 * 17 == 34_816


def _ct(weights: dict, fmt: str, activations: dict | None = None):
    from vramtui.dryrun.stored import _ct_scheme

    group = {"targets": ["Linear"], "weights": weights, "format": fmt}
    if activations is not None:
        group["input_activations"] = activations
    return _ct_scheme(group, fmt)


def test_compressed_tensors_schemes_by_hand():
    from vramtui.dryrun.stored import ct_tensors, tensor_bytes

    def size(scheme):
        return tensor_bytes(ct_tensors(scheme, 256, 256, "bfloat16"))

    w4a16 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}
    # packed int32: 256 rows x 256/8 words x 4 B = 32,768; bf16 scales 256 x 2 = 1,024 B;
    # weight_shape: 2 int64 = 16 B
    assert size(_ct({**w4a16, "symmetric": True}, "pack-quantized")) == 33_808
    # asymmetric: zero points packed along the rows, ceil(256/8) = 32 x 2 int32 = 256 B
    assert size(_ct({**w4a16, "symmetric": False}, "pack-quantized")) == 34_064
    # w8a8 int8, per channel: 65,536 B + bf16 scale per row 512 B (dynamic tokens: no input
    # scale)
    int8 = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}
    dyn = {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}
    assert size(_ct(int8, "int-quantized", dyn)) == 66_048
    # fp8 per channel, static per-tensor input scale: 65,536 + 512 + 2 B
    fp8 = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
    static = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}
    assert size(_ct(fp8, "float-quantized", static)) == 66_050
    # NVFP4: 256 x 128 B packed + e4m3 scale per 16 values (256 x 16 B) + fp32 global scale
    nvfp4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}
    assert size(_ct(nvfp4, "nvfp4-pack-quantized")) == 32_768 + 4_096 + 4


def test_bnb_nf4_double_quant_by_hand():
    from vramtui.ledger.formats import QuantParams, linear_bytes

    # 256 x 256 = 65,536 values: 32,768 B of 4-bit pairs; 1,024 blocks of 64 with a 1 B absmax
    # each, and ceil(1,024 / 256) = 4 fp32 second-level scales
    fb = linear_bytes("nf4", 256, 256, False, QuantParams(double_quant=True))
    assert fb.total_bytes == 32_768 + 1_024 + 16


# Tiny Llama used below: hidden 64, intermediate 128, 2 layers, 4 heads of 16, 2 KV heads,
# vocabulary 128, untied head. Per layer q, o 64 x 64 (4,096 values each), k, v 32 x 64 (2,048
# each), gate, up 128 x 64 and down 64 x 128 (8,192 each): 36,864 values in 7 linears; two
# RMSNorms of 64. Embedding and lm_head 128 x 64 = 8,192 values each, final norm 64.
TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
}
# bf16: embedding + lm_head 2 x 16,384 B, norms (2 x 2 x 64 + 64) x 2 B = 640 B
TINY_LLAMA_BF16_REST = 2 * 16_384 + 640


def test_fp8_block_scaled_tiny_model_by_hand():
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    arch = arch_of({**TINY_LLAMA, "quantization_config": qc})
    r = run_dry_run(infer_spec(weights='format = "fp8"'), arch)
    # per layer 36,864 B of e4m3 and one 128 x 128 block (fp32 scale, 4 B) per linear: every
    # matrix is at most 128 x 128 -> 7 scales = 28 B; lm_head stays bf16
    assert r.weights_bytes == 2 * (36_864 + 28) + TINY_LLAMA_BF16_REST
    assert any("fp32 scales per 128x128 block" in n for n in r.notes)
    assert r.weights_gap == ""  # the ledger models fp8


def test_mxfp4_experts_tiny_gpt_oss_by_hand():
    config = tiny(catalog_config("openai/gpt-oss-20b"))
    qc = catalog_config("openai/gpt-oss-20b")["quantization_config"]
    arch = arch_of({**config, "quantization_config": qc}, "gpt-oss-tiny")
    plain, _ = transformers_param_bytes(config)
    r = run_dry_run(infer_spec(), arch)
    # 4 experts per layer; bf16 gate_up 64 x 256 and down 128 x 64: 24,576 values = 49,152 B
    # per expert. Stored: gate_up 256 rows x 2 blocks x 17 B = 8,704 B, down 64 rows x 4
    # blocks x 17 B = 4,352 B -> 13,056 B per expert. Biases stay bf16.
    per_layer_bf16 = 4 * 49_152
    per_layer_mxfp4 = 4 * 13_056
    assert r.weights_bytes == plain - 2 * per_layer_bf16 + 2 * per_layer_mxfp4
    assert "does not model mxfp4" in r.weights_gap


def test_bnb_prequantised_tiny_model_by_hand():
    qc = {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
        "llm_int8_skip_modules": ["down_proj"],
    }
    arch = arch_of({**TINY_LLAMA, "quantization_config": qc})
    spec = infer_spec(weights='format = "nf4"\ndouble_quant = true')
    r = run_dry_run(spec, arch)
    # nf4 + double quant per linear: n/2 B + one 1 B absmax per 64 values + 4 B per 256 blocks
    # q, o (4,096): 2,048 + 64 + 4 = 2,116; k, v (2,048): 1,024 + 32 + 4 = 1,060;
    # gate, up (8,192): 4,096 + 128 + 4 = 4,228; down skipped: bf16 8,192 x 2 = 16,384
    per_layer = 2 * 2_116 + 2 * 1_060 + 2 * 4_228 + 16_384
    assert r.weights_bytes == 2 * per_layer + TINY_LLAMA_BF16_REST
    assert any("pre-quantised checkpoint" in n and "down_proj" in n for n in r.notes)


def test_compressed_tensors_w4a16_tiny_model_by_hand():
    qc = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "ignore": ["lm_head", "re:.*down_proj$"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 4,
                    "type": "int",
                    "strategy": "group",
                    "group_size": 32,
                    "symmetric": True,
                },
            }
        },
    }
    arch = arch_of({**TINY_LLAMA, "quantization_config": qc})
    r = run_dry_run(infer_spec(), arch)
    # packed int32 rows of in/8 words; bf16 scales per 32 inputs; weight_shape 16 B
    # q, o (64 x 64): 64 x 8 x 4 = 2,048 + 64 x 2 x 2 = 256 + 16 = 2,320
    # k, v (32 x 64): 1,024 + 128 + 16 = 1,168; gate, up (128 x 64): 4,096 + 512 + 16 = 4,624
    # down ignored: bf16 16,384
    per_layer = 2 * 2_320 + 2 * 1_168 + 2 * 4_624 + 16_384
    assert r.weights_bytes == 2 * per_layer + TINY_LLAMA_BF16_REST
    assert "does not model compressed-tensors" in r.weights_gap


@pytest.mark.parametrize(
    ("qc", "why"),
    [
        ({"quant_method": "hqq", "nbits": 4}, "stored as hqq"),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "sparse-24-bitmask",
                "sparsity_config": {"format": "sparse-24-bitmask"},
                "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8}}},
            },
            "sparse-24-bitmask sparsity",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {
                    "g": {"targets": ["Linear"], "weights": {"num_bits": 3, "type": "int"}}
                },
            },
            "int3",
        ),
    ],
)
def test_a_format_it_cannot_build_is_refused_with_the_reason(qc, why):
    arch = arch_of({**TINY_LLAMA, "quantization_config": qc})
    with pytest.raises(DryRunError) as info:
        run_dry_run(infer_spec(), arch)
    text = str(info.value)
    assert why in text and "stored size" in text and "ledger still stands" in text


# ------------------------------------------------ dry run and ledger disagree: both say so


def test_weights_disagreement_is_said_by_both():
    """gpt-oss's MXFP4 experts: the ledger charges bf16 (it does not model MXFP4), the dry
    run builds them stored; the estimate's notes and the dry-run report name both figures."""
    from rich.console import Console

    from vramtui.dryrun import dry_run_renderable, dry_run_to_dict
    from vramtui.dryrun.command import with_dry_run_notes

    config = tiny(catalog_config("openai/gpt-oss-20b"))
    qc = catalog_config("openai/gpt-oss-20b")["quantization_config"]
    arch = arch_of({**config, "quantization_config": qc}, "gpt-oss-tiny")
    spec = infer_spec()
    r = run_dry_run(spec, arch)
    est = estimate(spec, arch)
    ledger = sum(i.max_bytes for i in est.items if i.category in ("weights", "quant_metadata"))
    assert r.weights_bytes < 0.9 * ledger
    note = with_dry_run_notes(est, r).notes[-1]
    assert note.startswith("dry run and ledger disagree on the weights")
    assert f"({r.weights_bytes:,} B)" in note and f"({ledger:,} B)" in note
    assert "does not model mxfp4" in note
    check = dry_run_to_dict(r, est)["weights_check"]
    assert check["disagrees"] and check["ledger_bytes"] == ledger
    assert check["trace_bytes"] == r.weights_bytes
    console = Console(width=200, record=True)
    console.print(dry_run_renderable(r, est))
    shown = " ".join(console.export_text().split())
    assert "warning: dry run and ledger disagree on the weights" in shown
    assert f"({ledger:,} B)" in shown


def test_weights_that_agree_add_no_note():
    arch = arch_of(TINY_LLAMA)
    spec = infer_spec()
    r = run_dry_run(spec, arch)
    est = estimate(spec, arch)
    from vramtui.dryrun.command import with_dry_run_notes

    assert with_dry_run_notes(est, r).notes == est.notes


def test_the_route_does_not_depend_on_what_the_process_imported(tmp_path, monkeypatch):
    """Whether a family dispatches through AttentionInterface is read from its modeling file:
    a module object that merely carries the name (another import added it) does not count."""
    import sys
    import types

    from vramtui.dryrun.attention import uses_attention_interface

    source = tmp_path / "modeling_fixed_table.py"
    source.write_text("ATTENTION_CLASSES = {'eager': object}\n")
    module = types.ModuleType("modeling_fixed_table")
    module.__file__ = str(source)
    module.ALL_ATTENTION_FUNCTIONS = object()  # put there by someone else
    monkeypatch.setitem(sys.modules, "modeling_fixed_table", module)
    model_class = type("FixedTableForCausalLM", (), {"__module__": "modeling_fixed_table"})
    assert uses_attention_interface(model_class) is False
    import transformers.models.llama.modeling_llama as llama

    assert uses_attention_interface(llama.LlamaForCausalLM) is True
