"""Over a hundred Hub model ids (tests/data/hub_models.toml) sized through the fake Hub.

Each repository serves its published config.json and safetensors headers of the tensors
transformers builds from that config on the meta device (for a quantised repository, the
names, dtypes and shapes that method stores). `vramtui estimate --model ID --json` must
answer, and the parameter count vramtui derives must equal the count of the model transformers
builds from the same config, independently of vramtui (`sum(p.numel())` on the meta device;
the logical count for a quantised repository). A GGUF repository serves its .gguf file as a
header written by the gguf package's GGUFWriter (llama.cpp's tensor names, the shapes of its
base config, the Q4_K_M type mix) whose data is never held: vramtui sizes it from that header
read by range requests, and its parameter count must equal transformers' for the base config.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest
from fake_hub import FakeHub, FakeRepo, VirtualGguf, VirtualSafetensors, llama_cpp_gguf, sharded

from vramtui.cli import main
from vramtui.models.registry import _apply_nulls
from vramtui.models.resolve import resolve_model_ref
from vramtui.spec import ModelRef

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
MODELS = tomllib.loads((ROOT / "tests" / "data" / "hub_models.toml").read_text())["model"]
BY_ID = {m["id"]: m for m in MODELS}
COMMIT = "d" * 40
KINDS = {"base", "instruct", "awq", "gptq", "fp8", "mxfp4", "bnb", "gguf"}
_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
_MAX_TENSORS_PER_FILE = 3000


def config_of(entry: dict, key: str = "config") -> dict | None:
    where = entry[key]
    if not where:
        return None
    path = ROOT / where
    if path.suffix == ".toml":
        data = tomllib.loads(path.read_text())
        config = data["config"]
        _apply_nulls(config, data["meta"].get("null_keys", []), path)
        return config
    return json.loads(path.read_text())


# --- what transformers builds (independently of vramtui) ------------------------------------

# Keys that change no tensor: configs differing only in them build the same model once.
_NOT_STRUCTURAL = {
    "_name_or_path", "transformers_version", "torch_dtype", "dtype", "bos_token_id",
    "eos_token_id", "pad_token_id", "unsloth_version", "use_cache", "quantization_config",
    "initializer_range", "rope_theta", "rope_scaling", "max_position_embeddings",
}  # fmt: skip
_BUILT: dict[str, tuple[int, list[tuple[str, tuple[int, ...], bool]]]] = {}


def built(config: dict) -> tuple[int, list[tuple[str, tuple[int, ...], bool]]]:
    """(parameter count, [(name, shape, is a Linear weight inside the decoder)]) of the model
    transformers builds from `config` on the meta device; cached for the session."""
    key = json.dumps({k: v for k, v in config.items() if k not in _NOT_STRUCTURAL}, sort_keys=True)
    if key in _BUILT:
        return _BUILT[key]
    kwargs = {k: v for k, v in config.items() if k not in ("quantization_config", "model_type")}
    hf_config = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    names = config.get("architectures") or []
    cls = getattr(transformers, names[0], None) if names else None
    with torch.device("meta"):
        if cls is None:
            model = transformers.AutoModelForCausalLM.from_config(hf_config)
        else:
            model = cls._from_config(hf_config)
    linear = {
        f"{name}.weight"
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and ".layers." in f".{name}"
    }
    tensors = [(n, tuple(p.shape), n in linear) for n, p in model.named_parameters()]
    _BUILT[key] = (sum(p.numel() for p in model.parameters()), tensors)
    return _BUILT[key]


def transformers_count(config: dict) -> int:
    return built(config)[0]


# --- the stored tensors of each format ----------------------------------------------------


def stored_tensors(config: dict) -> list[tuple[str, str, list[int]]]:
    """(name, dtype, shape) as the checkpoint stores them: the model's parameters in its
    torch_dtype, with each Linear weight of the decoder layers in the stored format of the
    config's quantization_config (AWQ GEMM, GPTQ, bitsandbytes NF4, FP8 block-scaled, MXFP4)."""
    qc = config.get("quantization_config") or {}
    method = qc.get("quant_method")
    dtype = _DTYPES.get(str(config.get("torch_dtype") or config.get("dtype")), "BF16")
    if method in ("awq", "gptq"):
        dtype = "F16"
    out: list[tuple[str, str, list[int]]] = []
    for name, shape, is_linear in built(config)[1]:
        base = name.removesuffix(".weight")
        if method == "mxfp4" and name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            experts, rows, cols = shape  # stored transposed: (experts, out, in/32 blocks of 16 B)
            out.append((name + "_blocks", "U8", [experts, cols, rows // 32, 16]))
            out.append((name + "_scales", "U8", [experts, cols, rows // 32]))
            continue
        if method == "fp8" and (is_linear or (len(shape) == 3 and ".experts." in name)):
            block = qc.get("weight_block_size") or [128, 128]
            *lead, rows, cols = shape
            out.append((name, "F8_E4M3", list(shape)))
            scale = [*lead, math.ceil(rows / block[0]), math.ceil(cols / block[1])]
            out.append((name + "_scale_inv", "F32", scale))
            continue
        if not is_linear or method not in ("awq", "gptq", "bitsandbytes"):
            out.append((name, dtype, list(shape)))
            continue
        rows, cols = shape  # nn.Linear weight: (out_features, in_features)
        if method == "awq":
            group = qc.get("group_size", 128)
            out.append((base + ".qweight", "I32", [cols, rows // 8]))
            out.append((base + ".qzeros", "I32", [cols // group, rows // 8]))
            out.append((base + ".scales", "F16", [cols // group, rows]))
        elif method == "gptq":
            # AutoGPTQ's QuantLinear: `bits`-bit values packed 32 // bits to an int32 along
            # in_features (qweight) and along out_features (qzeros); one fp16 scale per group
            # and output; g_idx maps each input row to its group.
            bits = qc.get("bits", 4)
            group = qc.get("group_size", 128)
            group = cols if group == -1 else group
            groups = math.ceil(cols / group)
            out.append((base + ".qweight", "I32", [cols // 32 * bits, rows]))
            out.append((base + ".qzeros", "I32", [groups, rows // 32 * bits]))
            out.append((base + ".scales", "F16", [groups, rows]))
            out.append((base + ".g_idx", "I32", [cols]))
        else:  # bitsandbytes 4-bit NF4, double-quantised: blocks of 64, absmax blocks of 256
            n = rows * cols
            out.append((name, "U8", [n // 2, 1]))
            out.append((name + ".absmax", "U8", [math.ceil(n / 64)]))
            out.append((name + ".nested_absmax", "F32", [math.ceil(n / 64 / 256)]))
            out.append((name + ".nested_quant_map", "F32", [256]))
            out.append((name + ".quant_map", "F32", [16]))
            out.append((name + ".quant_state.bitsandbytes__nf4", "U8", [117]))
    return out


def repo_for(entry: dict) -> FakeRepo:
    config = config_of(entry)
    files: dict[str, VirtualSafetensors | bytes] = {"README.md": b"# " + entry["id"].encode()}
    if config is not None:
        files["config.json"] = json.dumps(config, indent=2).encode()
    if entry["kind"] == "gguf":
        parts = llama_cpp_gguf(config_of(entry, "base_config"), parts=entry.get("gguf_parts", 1))
        first = entry["gguf_file"]
        for no, part in enumerate(parts, start=1):
            files[first.replace("-00001-of-", f"-{no:05d}-of-")] = part
        return FakeRepo(entry["id"], COMMIT, files)
    tensors = stored_tensors(config)
    shards = -(-len(tensors) // _MAX_TENSORS_PER_FILE)
    if shards == 1:
        files["model.safetensors"] = VirtualSafetensors.from_tensors(tensors)
    else:
        files.update(sharded(tensors, shards))
    return FakeRepo(entry["id"], COMMIT, files)


# --- the fake Hub, one for the module ------------------------------------------------------


@pytest.fixture(scope="module")
def module_hub():
    hub = FakeHub().start()
    yield hub
    hub.stop()
    assert hub.weight_requests() == [], "a byte of weights was asked of the Hub"


@pytest.fixture
def hub(module_hub, monkeypatch):
    """The module's fake Hub, reached through HF_ENDPOINT, with the catalogue bypassed so that
    a catalogue id is also fetched from the Hub."""
    monkeypatch.setenv("HF_ENDPOINT", module_hub.url)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("vramtui.models.resolve._from_catalogue", lambda name, catalog_dir: None)
    return module_hub


def _serve(hub: FakeHub, entry: dict) -> None:
    if entry["id"] not in hub.repos:
        hub.add(repo_for(entry))


# --- the list itself -------------------------------------------------------------------------


def test_the_list_spans_the_families_kinds_and_a_hundred_ids():
    assert len(MODELS) >= 100 and len(BY_ID) == len(MODELS)  # no id twice
    assert {m["kind"] for m in MODELS} <= KINDS
    kinds = {m["kind"] for m in MODELS}
    assert {"base", "instruct", "awq", "gptq", "bnb", "fp8", "mxfp4", "gguf"} <= kinds
    families = {m["family"] for m in MODELS}
    for family in (
        "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2",
        "gemma3", "phi", "phi3", "falcon", "gpt2", "gpt_neox", "stablelm", "gpt_bigcode",
        "deepseek_v3", "gpt_oss", "qwen2_vl", "qwen2_5_vl", "mllama", "llama4", "mamba", "jamba",
    ):  # fmt: skip
        assert family in families, family
    for m in MODELS:
        config = config_of(m)
        assert m["source"].startswith("https://huggingface.co/"), m["id"]
        if config is not None:
            assert config["model_type"] == m["family"], m["id"]
        if m["kind"] in ("awq", "gptq", "fp8", "mxfp4", "bnb"):
            assert config["quantization_config"]["quant_method"] in (
                m["kind"],
                "bitsandbytes" if m["kind"] == "bnb" else m["kind"],
            ), m["id"]


ESTIMATED = [m["id"] for m in MODELS if m.get("expect") is None]
GGUF = [m["id"] for m in MODELS if m.get("expect") == "gguf"]


def _param(model_id: str):
    entry = BY_ID[model_id]
    if "xfail" in entry:
        return pytest.param(model_id, marks=pytest.mark.xfail(reason=entry["xfail"], strict=True))
    return model_id


@pytest.mark.parametrize("model_id", [_param(i) for i in ESTIMATED])
def test_resolves_through_the_hub_with_transformers_parameter_count(hub, model_id, capsys):
    entry = BY_ID[model_id]
    _serve(hub, entry)
    found = resolve_model_ref(ModelRef(id=model_id))
    assert (found.origin, found.commit) == ("hub", COMMIT)
    assert found.arch.param_count == transformers_count(config_of(entry))
    assert found.checkpoint is not None
    # The stored size of every tensor was read from the headers: the checkpoint holds exactly
    # the bytes the fake Hub says its files hold.
    repo = hub.repos[model_id]
    data = sum(f.data_bytes for f in repo.files.values() if isinstance(f, VirtualSafetensors))
    assert found.checkpoint.total_bytes == data

    assert main(["estimate", "--model", model_id, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["items"] and out["weights_only_bytes"] > 0


@pytest.mark.parametrize("model_id", [_param(i) for i in GGUF])
def test_gguf_repositories_are_sized_from_the_gguf_header(hub, model_id, capsys):
    entry = BY_ID[model_id]
    _serve(hub, entry)
    found = resolve_model_ref(ModelRef(id=model_id))
    assert (found.origin, found.commit) == ("hub-gguf", COMMIT)
    # Sized from the GGUF file (never from a config.json beside it), and the source says which.
    assert entry["gguf_file"] in found.arch.source
    expected = transformers_count(config_of(entry, "base_config"))
    assert sum(t.n_elements for t in found.checkpoint.tensors) == expected
    assert found.arch.param_count == expected
    ggufs = [f for f in hub.repos[model_id].files.values() if isinstance(f, VirtualGguf)]
    assert len(ggufs) == entry.get("gguf_parts", 1)
    assert found.checkpoint.total_bytes == sum(f.tensor_bytes for f in ggufs)
    assert hub.weight_requests() == []  # every part's header, and not a byte past it
    # Q4_K_M: mostly Q4_K (Q5_0 where a row of 896 values is not whole 256-value blocks).
    assert found.checkpoint.main_type() == ("Q5_0" if expected < 10**9 else "Q4_K")

    assert main(["estimate", "--model", model_id, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    keys = [item["key"] for item in out["items"]]
    assert any(k.startswith("weights.") and k.endswith(".gguf") for k in keys), keys
    assert out["weights_only_bytes"] > 0


def test_catalogue_ids_still_come_from_the_catalogue_without_the_bypass():
    """Outside this module's bypass, an id of the catalogue never reaches the Hub."""
    for m in MODELS:
        if m["config"].startswith("catalog/"):
            assert resolve_model_ref(ModelRef(id=m["id"])).origin == "catalogue", m["id"]


# --- GPTQ, whose published config.json no searched source vendors ------------------------------


@pytest.mark.parametrize("bits", [4, 8])
def test_a_gptq_repository_is_sized_at_its_stored_bytes(hub, bits, capsys):
    """A GPTQ checkpoint of Qwen2.5-0.5B (its real config.json plus an AutoGPTQ
    quantization_config; the repository id is made up) is sized from the bytes its headers
    declare, 4-bit and 8-bit alike, with transformers' logical parameter count."""
    config = config_of(BY_ID["Qwen/Qwen2.5-0.5B"]) | {
        "torch_dtype": "float16",
        "quantization_config": {
            "bits": bits, "group_size": 128, "desc_act": False, "sym": True,
            "quant_method": "gptq",
        },
    }  # fmt: skip
    stored = {name: (dtype, shape) for name, dtype, shape in stored_tensors(config)}
    # q_proj is 896 -> 896 and k_proj 896 -> 128 (2 KV heads of 64): qweight packs 32 // bits
    # input rows per int32, qzeros 32 // bits outputs per int32, 896 / 128 = 7 groups.
    q = "model.layers.0.self_attn.q_proj."
    k = "model.layers.0.self_attn.k_proj."
    assert stored[q + "qweight"] == ("I32", [{4: 112, 8: 224}[bits], 896])
    assert stored[q + "qzeros"] == ("I32", [7, {4: 112, 8: 224}[bits]])
    assert stored[k + "qzeros"] == ("I32", [7, {4: 16, 8: 32}[bits]])
    assert stored[q + "scales"] == ("F16", [7, 896])
    assert stored[q + "g_idx"] == ("I32", [896])
    assert stored[k + "bias"] == ("F16", [128])

    model_id = f"vramtui-test/Qwen2.5-0.5B-GPTQ-Int{bits}"
    files: dict[str, VirtualSafetensors | bytes] = {
        "config.json": json.dumps(config).encode(),
        "model.safetensors": VirtualSafetensors.from_tensors(list(stored_tensors(config))),
    }
    hub.add(FakeRepo(model_id, COMMIT, files))
    found = resolve_model_ref(ModelRef(id=model_id))
    assert found.arch.param_count == transformers_count(config)
    data = files["model.safetensors"].data_bytes
    assert found.checkpoint.total_bytes == data
    assert main(["estimate", "--model", model_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["weights_only_bytes"] == data


def test_gptq_stored_bytes_match_the_published_file_size(hub):
    """Qwen/Qwen2.5-Coder-1.5B-Instruct-GPTQ-Int4 publishes one model.safetensors of
    1,149,862,960 B (the Hub's blob list, quoted with its URL in the TOML note). Worked by hand
    from AutoGPTQ's packing, per layer: qweight sum(in x out)/2 = 46,792,704 / 2 = 23,396,352 B,
    scales 731,136 B, qzeros 182,784 B, g_idx 18,176 x 4 = 72,704 B, q/k/v biases 4,096 B, two
    norms 6,144 B: 24,393,216 B x 28 = 683,010,048 B; plus the tied fp16 embedding 151,936 x
    1,536 x 2 = 466,747,392 B and the final norm 3,072 B = 1,149,760,512 B of tensors. The
    file's other 102,448 B are its 8-byte length and JSON header (926 tensor entries)."""
    entry = BY_ID["Qwen/Qwen2.5-Coder-1.5B-Instruct-GPTQ-Int4"]
    _serve(hub, entry)
    found = resolve_model_ref(ModelRef(id=entry["id"]))
    assert found.checkpoint.total_bytes == 1_149_760_512
    published = 1_149_862_960
    header = published - found.checkpoint.total_bytes
    assert 0 < header < 926 * 200  # a header of about 110 B per entry, never weights
    assert found.arch.param_count == transformers_count(config_of(entry))
