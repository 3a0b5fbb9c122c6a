"""Every family transformers can build: parameter counts, LoRA names, labels, state, defaults.

Families vramtui does not hand-model are derived from transformers on the meta device. Each
count here is compared with the count of the model transformers itself builds from the same
config (`sum(p.numel())`, built independently below), never with vramtui's own output. The
configs in tests/data/configs/ follow the Hub repositories its README names; the README says
which were checked against a real copy and which were not. The hand-modelled families come from
catalog/models/*.toml.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from vramtui.cli import main
from vramtui.errors import ModelError, SpecError
from vramtui.ledger import ESTIMATED, UNKNOWN, estimate
from vramtui.models.hf_config import architecture_from_hf_config
from vramtui.models.registry import _apply_nulls
from vramtui.spec import loads_spec, validate_against_architecture

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "tests" / "data" / "configs"
CATALOG = ROOT / "catalog" / "models"
LLAMA_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _catalog_config(hub_id: str) -> dict:
    path = CATALOG / (hub_id.replace("/", "--") + ".toml")
    data = tomllib.loads(path.read_text())
    config = data["config"]
    _apply_nulls(config, data["meta"].get("null_keys", []), path)
    return config


# name -> (config, a real LoRA-adaptable module name, Llama names the family does not have)
FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "phi-1_5": ("file", "fc1", ("gate_proj", "o_proj")),
    "phi-2": ("file", "dense", ("gate_proj", "o_proj")),
    "phi3": ("microsoft/Phi-3-mini-4k-instruct", "qkv_proj", ("q_proj", "gate_proj")),
    "pythia-160m": ("file", "query_key_value", LLAMA_NAMES),
    "falcon": ("tiiuae/falcon-7b", "query_key_value", LLAMA_NAMES),
    "gpt2": ("file", "c_attn", LLAMA_NAMES),
    "gpt_bigcode-santacoder": ("file", "c_attn", LLAMA_NAMES),
    "stablelm-2-1_6b": ("file", "q_proj", ()),
    "gemma-2b": ("file", "gate_proj", ()),
    "gemma2": ("google/gemma-2-2b-it", "o_proj", ()),
    "gemma3-text": ("google/gemma-3-1b-it", "o_proj", ()),
    "gemma3-multimodal": ("google/gemma-3-4b-it", "out_proj", ()),
    "llama-4-scout": ("file", "q_proj", ()),
    "qwen2-vl-2b": ("file", "qkv", ()),
    "qwen2.5-vl-3b": ("file", "qkv", ()),
    "llama-3.2-11b-vision": ("file", "q_proj", ()),
    "mixtral": ("mistralai/Mixtral-8x7B-v0.1", "q_proj", ("gate_proj",)),
    "qwen3_moe": ("Qwen/Qwen3-30B-A3B", "q_proj", ()),
    "deepseek_v3": ("deepseek-ai/DeepSeek-V3", "kv_a_proj_with_mqa", ("k_proj", "v_proj")),
    "jamba-1.5-mini": ("file", "in_proj", ()),
    "mamba-130m": ("file", "in_proj", LLAMA_NAMES),
    "qwen3-next-80b-a3b": ("file", "in_proj_qkvz", ()),
    "bert-base-uncased": ("file", "query", LLAMA_NAMES),
    "t5-small": ("file", "wi", LLAMA_NAMES),
    "whisper-tiny": ("file", "fc1", ("gate_proj", "o_proj")),
}
# Catalogue entries whose text model vramtui hand-models: sized text-only, as the catalogue is.
TEXT_ONLY = {"phi3", "falcon", "gemma2", "gemma3-text", "mixtral", "qwen3_moe", "deepseek_v3"}


def config_of(name: str) -> dict:
    where = FAMILIES[name][0]
    if where == "file":
        return json.loads((CONFIGS / f"{name}.json").read_text())
    return _catalog_config(where)


@pytest.fixture(scope="module", autouse=True)
def cache_dir(session_cache_dir):
    """The run's cache directory (tests/conftest.py), set before the module-scoped fixtures."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VRAMTUI_CACHE_DIR", str(session_cache_dir))
        yield session_cache_dir


@pytest.fixture(scope="module")
def archs(cache_dir):
    out = {}
    for name in FAMILIES:
        config = config_of(name)
        out[name] = architecture_from_hf_config(
            config, name, f"{name}/config.json", whole_model=name not in TEXT_ONLY
        )
    return out


def transformers_count(name: str) -> int:
    """Parameters of the model transformers builds from the same config (independently)."""
    config = config_of(name)
    if name in TEXT_ONLY and "text_config" in config:
        config = {**config["text_config"]}
    kwargs = {k: v for k, v in config.items() if k not in ("quantization_config", "model_type")}
    hf_config = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    names = config.get("architectures") or []
    cls = getattr(transformers, names[0]) if names and name not in TEXT_ONLY else None
    with torch.device("meta"):
        if cls is None:
            model = transformers.AutoModelForCausalLM.from_config(hf_config)
        else:
            model = cls._from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_param_count_equals_transformers(archs, name):
    assert archs[name].param_count == transformers_count(name)


def test_phi2_published_count(archs):
    # microsoft/phi-2: 2,779,683,840 parameters (the ledger used to say 3.62B, Llama-like).
    assert archs["phi-2"].param_count == 2_779_683_840
    # GPT-2 small: 124,439,808 (12 x (4h^2+... ) worked in its model card: 124M).
    assert archs["gpt2"].param_count == 124_439_808


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_lora_targets_follow_the_real_module_names(archs, name):
    arch = archs[name]
    _, real, refused = FAMILIES[name]
    adaptable = {m.name for m in arch.modules() if m.lora_adaptable}
    assert real in adaptable
    for llama_name in refused:
        assert llama_name not in adaptable


def _lora_spec(model_ref: str, targets: list[str]):
    text = (
        "schema_version = 1\n[model]\n"
        f"{model_ref}\n"
        '[task]\nkind = "lora"\n[task.lora]\nrank = 8\n'
        f"targets = {json.dumps(targets)}\n"
        '[weights]\nformat = "bf16"\n[lengths]\nseq_len = 256\n[batch]\nmicro_batch = 1\n'
        '[training]\noptimizer = "adamw"\nmaster_weights_fp32 = true\ngrad_dtype = "bf16"\ngrad_checkpointing = "none"\n[runtime]\nattention = "flash"\n[placement]\ngpus = 1\n[headroom]\nmode = "itemised"\n'
    )
    return loads_spec(text)


def test_gpt_neox_lora_accepts_query_key_value_and_refuses_q_proj(archs):
    arch = archs["pythia-160m"]
    validate_against_architecture(_lora_spec("params = 160000000", ["query_key_value"]), arch)
    with pytest.raises(SpecError, match="'q_proj' matches no module") as info:
        validate_against_architecture(_lora_spec("params = 160000000", ["q_proj"]), arch)
    assert "query_key_value" in str(info.value)


def test_gpt2_conv1d_is_a_lora_target_but_not_an_nn_linear(archs):
    c_attn = next(m for m in archs["gpt2"].modules() if m.name == "c_attn")
    # transformers' Conv1D stores (in, out) = (768, 3 x 768); PEFT adapts it.
    assert (c_attn.in_features, c_attn.out_features, c_attn.count) == (768, 2304, 12)
    assert c_attn.is_conv1d and not c_attn.is_nn_linear and c_attn.lora_adaptable
    validate_against_architecture(_lora_spec("params = 124000000", ["c_attn"]), archs["gpt2"])


# ------------------------------------------------------------------- labels


@pytest.fixture(scope="module")
def phi2_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("phi-2")
    (d / "config.json").write_text((CONFIGS / "phi-2.json").read_text())
    return d


def test_label_is_visible_in_estimate_output(phi2_dir, capsys, cache_dir):
    assert main(["estimate", "--model", str(phi2_dir)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "structure of phi: derived from transformers" in out
    assert "on the meta device (PhiForCausalLM), not hand-modelled" in out
    assert "not checked against phi's own layers, nor for phi's parallel attention+MLP" in out
    assert main(["estimate", "--model", str(phi2_dir), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(n.startswith("structure of phi: derived from transformers") for n in notes)


def test_second_run_reads_the_cache_without_torch(phi2_dir, cache_dir):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tui"), "VRAMTUI_CACHE_DIR": str(cache_dir)}
    code = (
        "import sys; from vramtui.cli import main; "
        f"assert main(['estimate', '--model', {str(phi2_dir)!r}]) == 0; "
        "bad = {'torch', 'transformers'} & set(sys.modules); assert not bad, bad"
    )
    # The first run (in this process, above or here) fills the cache; the second reads it.
    architecture_from_hf_config(
        json.loads((phi2_dir / "config.json").read_text()), "x", "x", whole_model=True
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(list((cache_dir / "derived").glob("*.json"))) >= 1


def test_without_transformers_one_line_never_a_llama_guess(monkeypatch, tmp_path):
    monkeypatch.setenv("VRAMTUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("vramtui.models.derive.installed_transformers_version", lambda: None)
    with pytest.raises(ModelError) as info:
        architecture_from_hf_config(config_of("phi-2"), "microsoft/phi-2", "phi-2/config.json")
    message = str(info.value)
    assert "model_type 'phi'" in message and "not hand-modelled" in message
    assert "pip install 'vramtui[dryrun]'" in message and "--params" in message
    assert "\n" not in message


def test_hand_modelled_families_say_so_and_derived_ones_do_not(archs):
    assert archs["mixtral"].is_hand_modelled and archs["mixtral"].structure == "hand-modelled"
    assert not archs["phi-2"].is_hand_modelled
    assert archs["phi-2"].structure.startswith("derived from transformers ")


def test_catalogue_multimodal_text_only_is_labelled():
    from vramtui.models.registry import find_model

    arch = find_model("google/gemma-3-4b-it")
    assert arch.is_hand_modelled
    assert any("only the text model (gemma3_text)" in n for n in arch.ledger_notes)
    assert any("siglip_vision_model" in n for n in arch.ledger_notes)


# ------------------------------------------------------------------- defaults


def test_gemma_without_tie_word_embeddings_takes_transformers_default(archs):
    assert "tie_word_embeddings" not in config_of("gemma-2b")
    arch = archs["gemma-2b"]
    assert arch.tie_word_embeddings is True  # GemmaConfig's default
    assert not any(m.group == "lm_head" for m in arch.modules())


def test_hand_modelled_family_missing_key_takes_config_class_default():
    config = _catalog_config("microsoft/Phi-3-mini-4k-instruct")
    del config["max_position_embeddings"]
    arch = architecture_from_hf_config(config, "phi3", "phi3/config.json")
    assert arch.max_position_embeddings == 4096  # Phi3Config's default


# ------------------------------------------------------------------- KV and state


def _inference(arch, concurrency: int = 2, prompt: int = 1000, generated: int = 24):
    text = (
        'schema_version = 1\n[model]\nparams = 1000000000\n[task]\nkind = "inference"\n'
        '[weights]\nformat = "bf16"\n'
        f"[lengths]\nprompt_tokens = {prompt}\ngenerated_tokens = {generated}\n"
        f'[batch]\nconcurrency = {concurrency}\n[runtime]\nattention = "flash"\n'
        'kv_cache_dtype = "bf16"\n[placement]\ngpus = 1\n[headroom]\nmode = "itemised"\n'
    )
    est = estimate(loads_spec(text), arch)
    return {i.key: i for i in est.items}, est


def test_jamba_kv_counts_attention_layers_and_adds_the_mamba_state(archs):
    arch = archs["jamba-1.5-mini"]
    # attn_layer_offset 4, period 8 over 32 layers: layers 4, 12, 20, 28 are attention.
    assert [i for i, k in enumerate(arch.layer_attention) if k != "none"] == [4, 12, 20, 28]
    items, _ = _inference(arch)
    # 4 layers x 2 (K,V) x 8 KV heads x head_dim 128 x 2 B x 1024 tokens x 2 sequences
    assert items["kv_cache"].stage_bytes["decode"] == 4 * 2 * 8 * 128 * 2 * 1024 * 2
    # 28 Mamba layers x (conv 8192 x 4 + SSM 8192 x 16) x 2 B (bf16) x 2 sequences
    state = items["recurrent_state"]
    assert state.status == ESTIMATED
    assert state.stage_bytes["decode"] == 28 * (8192 * 4 + 8192 * 16) * 2 * 2
    assert state.stage_bytes["prefill"] == state.stage_bytes["decode"]


def test_qwen3_next_state_of_gated_deltanet_layers(archs):
    arch = archs["qwen3-next-80b-a3b"]
    assert sum(1 for k in arch.layer_attention if k == "full") == 12  # every 4th of 48
    items, _ = _inference(arch, concurrency=1)
    assert items["kv_cache"].stage_bytes["decode"] == 12 * 2 * 2 * 256 * 2 * 1024
    # 36 layers x (conv (2 x 16 x 128 + 32 x 128) x 4 + state 32 x 128 x 128) x 2 B
    conv = (2 * 16 * 128 + 32 * 128) * 4
    assert items["recurrent_state"].stage_bytes["decode"] == 36 * (conv + 32 * 128 * 128) * 2


def test_mamba_has_state_and_no_kv_cache_and_says_why_activations_are_unknown(archs):
    items, est = _inference(archs["mamba-130m"], concurrency=1)
    assert "kv_cache" not in items
    assert items["recurrent_state"].stage_bytes["decode"] == 24 * (1536 * 4 + 1536 * 16) * 2
    assert items["activations.inference"].status == UNKNOWN
    assert "not a standard decoder" in items["activations.inference"].basis
    assert any("mamba has no attention layer" in n for n in est.notes)


@pytest.mark.parametrize("name", ["bert-base-uncased", "t5-small", "whisper-tiny"])
def test_encoders_weights_and_activations_estimated_under_encoder_formulas(archs, name):
    items, est = _inference(archs[name], concurrency=1, prompt=128, generated=1)
    weights = [i for i in items.values() if i.category == "weights"]
    assert weights and all(i.status != UNKNOWN for i in weights)
    assert items["activations.inference"].status == ESTIMATED
    assert items["kv_cache"].status == ESTIMATED
    assert any("encoder formulas" in n for n in est.notes)


def test_mllama_cross_attention_layers_hold_no_text_kv(archs):
    arch = archs["llama-3.2-11b-vision"]
    cross = [3, 8, 13, 18, 23, 28, 33, 38]
    assert [i for i, k in enumerate(arch.layer_attention) if k == "none"] == cross
    assert any("cross-attention layers" in n for n in arch.ledger_notes)


def test_gpt_neox_standard_decoder_formula_is_labelled(archs):
    arch = archs["pythia-160m"]
    items, est = _inference(arch, concurrency=1)
    assert items["activations.inference"].status == ESTIMATED
    # 12 layers x 2 x 12 heads x 64 x 2 B x 1024 tokens
    assert items["kv_cache"].stage_bytes["decode"] == 12 * 2 * 12 * 64 * 2 * 1024
    assert any("parallel attention+MLP" in n for n in est.notes)


def test_missing_default_is_noted_and_a_missing_size_still_refused():
    config = _catalog_config("microsoft/Phi-3-mini-4k-instruct")
    del config["max_position_embeddings"]
    arch = architecture_from_hf_config(config, "phi3", "phi3/config.json")
    assert any("lacks 'max_position_embeddings'" in n for n in arch.ledger_notes)
    config = _catalog_config("microsoft/Phi-3-mini-4k-instruct")
    del config["intermediate_size"]
    with pytest.raises(ModelError, match="intermediate_size"):
        architecture_from_hf_config(config, "phi3", "phi3/config.json")


def test_multimodal_whose_whole_model_cannot_be_built_falls_back_to_its_text_model(tmp_path):
    config = _catalog_config("google/gemma-3-4b-it")
    config["vision_config"] = {**config["vision_config"], "hidden_size": 1151}  # not buildable
    arch = architecture_from_hf_config(config, "g", "g/config.json", whole_model=True)
    assert arch.is_hand_modelled and arch.model_type == "gemma3_text"
    assert any("the whole model could not be derived" in n for n in arch.ledger_notes)
