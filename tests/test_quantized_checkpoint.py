"""A GPTQ checkpoint on disk: its quantization_config is honoured and the safetensors headers
give the exact weight bytes (worked by hand from the tensor shapes below)."""

from __future__ import annotations

import json

import pytest

from vramtui.cli import main

torch = pytest.importorskip("torch")
st = pytest.importorskip("safetensors.torch")

H, I, V, HEADS, KV, GROUP = 64, 128, 128, 4, 2, 32
LINEARS = {  # name: (in_features, out_features)
    "self_attn.q_proj": (H, H),
    "self_attn.k_proj": (H, KV * H // HEADS),
    "self_attn.v_proj": (H, KV * H // HEADS),
    "self_attn.o_proj": (H, H),
    "mlp.gate_proj": (H, I),
    "mlp.up_proj": (H, I),
    "mlp.down_proj": (I, H),
}


def _write_gptq_dir(tmp_path):
    tensors = {
        "model.embed_tokens.weight": torch.zeros(V, H, dtype=torch.float16),
        "lm_head.weight": torch.zeros(V, H, dtype=torch.float16),
        "model.norm.weight": torch.zeros(H, dtype=torch.float16),
        "model.layers.0.input_layernorm.weight": torch.zeros(H, dtype=torch.float16),
        "model.layers.0.post_attention_layernorm.weight": torch.zeros(H, dtype=torch.float16),
    }
    for name, (fin, fout) in LINEARS.items():
        p = f"model.layers.0.{name}"
        tensors[f"{p}.qweight"] = torch.zeros(fin // 8, fout, dtype=torch.int32)
        tensors[f"{p}.scales"] = torch.zeros(fin // GROUP, fout, dtype=torch.float16)
        tensors[f"{p}.qzeros"] = torch.zeros(fin // GROUP, fout // 8, dtype=torch.int32)
        tensors[f"{p}.g_idx"] = torch.zeros(fin, dtype=torch.int32)
    st.save_file(tensors, str(tmp_path / "model.safetensors"))
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": H,
        "intermediate_size": I,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "vocab_size": V,
        "max_position_embeddings": 256,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": GROUP},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_gptq_checkpoint_uses_stored_format_and_header_bytes(tmp_path, capsys):
    model_dir = _write_gptq_dir(tmp_path)
    assert main(["estimate", "--model", str(model_dir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    items = {i["key"]: i for i in out["items"]}
    # 16-bit tensors: embedding and lm_head 128 x 64 x 2 B each, three norms 64 x 2 B.
    assert items["weights.embedding.gptq"]["bytes"] == V * H * 2 == 16_384
    assert items["weights.lm_head.gptq"]["bytes"] == V * H * 2
    assert items["weights.norm.gptq"]["bytes"] == 3 * H * 2
    # qweight: in/8 x out int32 = in x out / 2 bytes per linear.
    attn_q = sum(fin * fout // 2 for n, (fin, fout) in LINEARS.items() if "attn" in n)
    mlp_q = sum(fin * fout // 2 for n, (fin, fout) in LINEARS.items() if "mlp" in n)
    assert items["weights.attention.gptq"]["bytes"] == attn_q == (64 * 64 * 2 + 64 * 32 * 2) // 2
    assert items["weights.mlp.gptq"]["bytes"] == mlp_q == (64 * 128 * 2 + 128 * 64) // 2
    # metadata: scales (in/32 x out x 2 B) + qzeros (in/32 x out/8 x 4 B) + g_idx (in x 4 B)
    meta = sum(
        fin // GROUP * fout * 2 + fin // GROUP * fout // 8 * 4 + fin * 4
        for fin, fout in LINEARS.values()
    )
    assert items["weights.quant_metadata"]["bytes"] == meta
    assert out["weights_only_bytes"] == (tmp_path / "model.safetensors").stat().st_size - (
        8 + int.from_bytes((tmp_path / "model.safetensors").read_bytes()[:8], "little")
    )
    assert all("safetensors headers" in items[k]["basis"] for k in items if k.startswith("weights"))


def test_spec_format_differing_from_checkpoint_is_noted(tmp_path, capsys):
    model_dir = _write_gptq_dir(tmp_path)
    assert main(["estimate", "--model", str(model_dir), "--format", "bf16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any("stored as gptq" in note for note in out["notes"])
