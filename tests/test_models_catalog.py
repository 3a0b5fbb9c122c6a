"""The model catalogue, the config reader and the structure against `transformers` itself.

Every catalogue entry is built by `transformers` on the meta device from the same config dict;
its parameter count, per group and per module name, must equal what `vramtui.models.structure`
computes by arithmetic.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path

import pytest

from vramtui.errors import ModelError
from vramtui.models.architecture import GROUPS
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.models.registry import find_model, load_catalog_models, model_catalog_problems

CATALOG = load_catalog_models()
IDS = sorted(CATALOG)


def test_catalogue_is_large_and_loads():
    assert len(CATALOG) >= 32
    for hub_id, arch in CATALOG.items():
        assert arch.model_id == hub_id
        assert arch.param_count > 0
        assert len(arch.layer_attention) == arch.num_layers
        assert len(arch.moe_layers) == arch.num_layers
        assert arch.default_dtype in ("bf16", "fp16", "fp32")


# ---------------------------------------------------------------- against transformers


def _build(config: dict):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    kwargs = {
        k: v
        for k, v in config.items()
        if k not in ("quantization_config", "model_type", "architectures")
    }
    hf_config = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(hf_config)


def _group_of(name: str) -> str:
    """Our grouping of a transformers parameter name (independent of structure.py)."""
    if "embed_tokens" in name or "word_embeddings" in name:
        return "embedding"
    if name.startswith("lm_head"):
        return "lm_head"
    if ".mlp.experts." in name:
        return "experts"
    if re.search(r"\.mlp\.(gate|router)\.|shared_expert_gate", name):
        return "router"
    if re.search(r"(norm|ln_f|ln_attn|ln_mlp)\.(weight|bias)$", name):
        return "norm"
    if ".self_attn." in name or ".self_attention." in name:
        return "attention"
    if ".mlp." in name:
        return "mlp"
    return "other"


def _leaf_of(name: str) -> str:
    parts = name.split(".")
    if parts[-1] in ("weight", "bias"):
        return parts[-2]
    return parts[-1].removesuffix("_bias")  # fused expert tensors and their biases, attention sinks


@pytest.mark.parametrize("hub_id", IDS)
def test_param_count_matches_transformers(hub_id):
    # Full size, every layer: on the meta device even Llama-3.1-405B and DeepSeek-V3 build in
    # well under a second, so no entry is shrunk.
    arch = CATALOG[hub_id]
    model = _build(arch.config)

    by_group: Counter[str] = Counter()
    by_leaf: Counter[tuple[str, str]] = Counter()
    for name, p in model.named_parameters():
        group = _group_of(name)
        by_group[group] += p.numel()
        by_leaf[(group, _leaf_of(name))] += p.numel()

    assert arch.param_count == sum(p.numel() for p in model.parameters())
    assert arch.params_by_group() == {g: by_group.get(g, 0) for g in GROUPS}
    ours: Counter[tuple[str, str]] = Counter()
    for m in arch.modules():
        ours[(m.group, m.name)] += m.total_params
    assert {k: v for k, v in ours.items() if v} == dict(by_leaf)

    # nn.Linear flags: bitsandbytes and PEFT act only on real nn.Linear modules.
    torch = pytest.importorskip("torch")
    linear_leaves = {
        n.split(".")[-1] for n, mod in model.named_modules() if isinstance(mod, torch.nn.Linear)
    }
    for m in arch.modules():
        if m.count:
            assert m.is_nn_linear == (
                m.name in linear_leaves and m.group != "experts" and m.name != "gate"
            ), m.name


# ---------------------------------------------------------------- hand-worked figures


def test_llama3_8b_published_count():
    assert find_model("meta-llama/Meta-Llama-3-8B").param_count == 8_030_261_248


def test_llama2_7b_published_count():
    arch = find_model("llama-2-7b")
    # 32 layers x (4 x 4096^2 attention + 3 x 4096 x 11008 MLP + 2 x 4096 norms)
    # + 2 x 32000 x 4096 (untied embeddings and lm_head) + 4096 final norm.
    per_layer = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    assert arch.param_count == 32 * per_layer + 2 * 32000 * 4096 + 4096 == 6_738_415_616


def test_other_published_counts():
    assert find_model("mistral-7b-v0.1").param_count == 7_241_732_096
    assert find_model("mixtral-8x7b").param_count == 46_702_792_704


def test_find_model_is_case_insensitive_and_takes_aliases():
    assert (
        find_model("META-LLAMA/LLAMA-3.1-8B-INSTRUCT").model_id
        == "meta-llama/Llama-3.1-8B-Instruct"
    )
    assert find_model("llama3.1-8b").model_id == "meta-llama/Llama-3.1-8B-Instruct"
    assert find_model("Llama-3.1-8B-Instruct").model_id == "meta-llama/Llama-3.1-8B-Instruct"


def test_unknown_model_lists_close_matches():
    with pytest.raises(ModelError) as info:
        find_model("llama-3-8x")
    message = str(info.value)
    assert "unknown model 'llama-3-8x'" in message
    assert "meta-llama/Meta-Llama-3-8B" in message
    assert "--model PATH" in message and "--params N" in message
    assert "\n" not in message


def test_broken_catalogue_file_is_named(tmp_path: Path):
    bad = tmp_path / "acme--broken-1b.toml"
    bad.write_text(
        '[meta]\nhub_id = "acme/broken-1b"\nsource = "test"\nlicense = "mit"\n'
        '[config]\nmodel_type = "llama"\nhidden_size = 64\nnum_hidden_layers = 2\n'
        "num_attention_heads = 4\nvocab_size = 100\nmax_position_embeddings = 128\n"
        "tie_word_embeddings = false\n"
    )
    # A user's directory: the broken file is skipped, its problem kept as one line.
    assert load_catalog_models(tmp_path) == {}
    (problem,) = model_catalog_problems(tmp_path)
    assert "acme--broken-1b.toml" in problem and "intermediate_size" in problem
    assert problem.endswith("(file skipped)") and "\n" not in problem

    other = tmp_path / "x"
    other.mkdir()
    (other / "acme--syntax.toml").write_text("[meta\n")
    assert load_catalog_models(other) == {}
    (problem,) = model_catalog_problems(other)
    assert "acme--syntax.toml" in problem and "malformed TOML" in problem


def test_missing_required_key_names_key_and_file():
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
        "max_position_embeddings": 128,
        "tie_word_embeddings": False,
    }
    with pytest.raises(ModelError) as info:
        architecture_from_hf_config(config, "acme/x", "/models/x/config.json")
    assert "num_attention_heads" in str(info.value)
    assert "/models/x/config.json" in str(info.value)


def test_unknown_family_is_refused_not_guessed_as_llama(tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMTUI_CACHE_DIR", str(tmp_path))
    config = {
        "model_type": "acme",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
        "max_position_embeddings": 128,
    }
    with pytest.raises(ModelError, match="model_type 'acme'.*--params N"):
        architecture_from_hf_config(config, "acme/x", "config.json")


def test_text_config_nesting():
    arch = find_model("google/gemma-3-27b-it")
    assert arch.model_type == "gemma3_text"
    assert (arch.hidden_size, arch.num_layers, arch.head_dim) == (5376, 62, 128)
    assert arch.num_kv_heads == 16
    assert arch.vocab_size == 262_208  # Gemma3TextConfig default: the text_config omits it
    assert arch.default_dtype == "bf16"  # top-level torch_dtype inherited
    assert arch.tie_word_embeddings is True
    assert arch.sliding_window == 1024
    assert arch.layer_attention[:6] == ("sliding",) * 5 + ("full",)
    assert arch.num_full_attention_layers == 10

    # Top-level keys fill in only what text_config lacks.
    config = {
        "model_type": "acme_vl",
        "torch_dtype": "float16",
        "tie_word_embeddings": True,
        "text_config": {
            "model_type": "llama",
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 128,
            "vocab_size": 100,
            "max_position_embeddings": 128,
            "tie_word_embeddings": False,
        },
    }
    arch = architecture_from_hf_config(config, "acme/vl", "config.json")
    assert arch.default_dtype == "fp16" and arch.tie_word_embeddings is False
    assert arch.config["model_type"] == "llama"


def test_layer_attention_rules():
    assert find_model("mistral-7b-v0.1").layer_attention == ("sliding",) * 32
    assert find_model("mistral-7b-v0.1").sliding_window == 4096
    v03 = find_model("mistral-7b-instruct-v0.3")
    assert v03.num_sliding_layers == 0 and v03.sliding_window is None
    assert find_model("qwen2.5-7b").num_sliding_layers == 0
    g2 = find_model("gemma-2-9b")
    assert g2.layer_attention[:2] == ("sliding", "full") and g2.num_sliding_layers == 21
    oss = find_model("gpt-oss-20b")
    assert oss.num_sliding_layers == 12 and oss.sliding_window == 128


def test_moe_and_mla_facts():
    ds = find_model("deepseek-v3")
    assert ds.moe_layers[:4] == (False, False, False, True) and sum(ds.moe_layers) == 58
    assert ds.mla is not None and ds.mla.kv_lora_rank == 512 and ds.mla.q_lora_rank == 1536
    assert ds.quantization_config["quant_method"] == "fp8"
    lite = find_model("deepseek-v2-lite")
    assert lite.mla.q_lora_rank is None and lite.shared_expert_intermediate_size == 2 * 1408
    q = find_model("qwen3-30b-a3b")
    assert q.num_experts == 128 and q.num_experts_per_tok == 8 and all(q.moe_layers)
    assert q.intermediate_size == 0 and q.moe_intermediate_size == 768
    mx = find_model("mixtral-8x7b")
    assert mx.num_experts == 8 and mx.moe_intermediate_size == 14336
    assert find_model("gpt-oss-120b").quantization_config["quant_method"] == "mxfp4"


def test_falcon_kv_heads():
    assert find_model("falcon-7b").num_kv_heads == 1
    assert find_model("falcon-40b").num_kv_heads == 8
    assert find_model("falcon-7b").gated_mlp is False


def test_lora_target_names_present():
    names = {m.name for m in find_model("llama-3.1-8b").modules()}
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} <= names
    phi = {m.name for m in find_model("phi-3-mini").modules() if m.is_nn_linear}
    assert {"qkv_proj", "gate_up_proj", "o_proj", "down_proj"} <= phi
    tied = find_model("llama-3.2-1b")
    assert "lm_head" not in {m.name for m in tied.modules()}
    assert tied.params_by_group()["lm_head"] == 0


def test_dataclass_is_frozen():
    arch = find_model("qwen3-8b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        arch.num_layers = 3  # type: ignore[misc]
