"""GGUF models (files written by the gguf package's GGUFWriter) and llama.cpp's ledger rules.

Every expected figure is worked by hand from ggml's block sizes: Q8_0 stores 32 values in 34
bytes, Q4_K 256 values in 144 bytes, F16 2 bytes and F32 4 bytes a value.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from vramtui.errors import ModelError, SpecError
from vramtui.ledger import estimate
from vramtui.ledger.formats import GGUF_BLOCKS
from vramtui.models.gguf_file import (
    MAX_GGUF_STRING_BYTES,
    MAX_GGUF_TENSORS,
    architecture_from_gguf,
    read_gguf,
)
from vramtui.models.resolve import resolve_model_ref
from vramtui.spec import GGUF_TYPES, ModelRef, spec_from_dict

T = gguf.GGMLQuantizationType
REPO = Path(__file__).resolve().parents[1]


def _quant(w, name: str, rows: int, cols: int, qtype) -> None:
    """A [rows, cols] tensor (cols values per row) stored as `qtype`, zero bytes."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    if qtype == T.F16:
        w.add_tensor(name, np.zeros((rows, cols), dtype=np.float16))
    elif qtype == T.F32:
        w.add_tensor(name, np.zeros((rows, cols), dtype=np.float32))
    else:
        w.add_tensor(name, np.zeros((rows, cols // block * size), dtype=np.uint8), raw_dtype=qtype)


def write_model(
    path: Path, arch: str = "llama", *, tied: bool = False, rope_freqs: bool = False
) -> Path:
    """2 layers, n_embd 256, 4 heads, 2 KV heads (key_length 64), ff 512, 1,000 tokens."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(2)
    w.add_embedding_length(256)
    w.add_feed_forward_length(512)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_context_length(4096)
    w.add_token_list([f"t{i}".encode() for i in range(1000)])
    _quant(w, "token_embd.weight", 1000, 256, T.Q8_0)  # 256,000 values / 32 x 34 = 272,000 B
    for i in range(2):
        _quant(w, f"blk.{i}.attn_q.weight", 256, 256, T.Q4_K)  # 65,536 / 256 x 144 = 36,864 B
        _quant(w, f"blk.{i}.attn_k.weight", 128, 256, T.Q8_0)  # 32,768 / 32 x 34 = 34,816 B
        if arch == "qwen2":
            w.add_tensor(f"blk.{i}.attn_q.bias", np.zeros(256, dtype=np.float32))  # 1,024 B
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(256, dtype=np.float32))  # 1,024 B
        _quant(w, f"blk.{i}.ffn_up.weight", 512, 256, T.F16)  # 131,072 x 2 = 262,144 B
    if not tied:
        _quant(w, "output.weight", 1000, 256, T.F16)  # 256,000 x 2 = 512,000 B
    if rope_freqs:  # Llama 3.1's rope factors: head_dim / 2 = 32 values, 128 B
        w.add_tensor("rope_freqs.weight", np.ones(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def llama_file(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("gguf") / "tiny-Q4_K_M.gguf")


@pytest.fixture(scope="module")
def qwen_file(tmp_path_factory) -> Path:
    return write_model(tmp_path_factory.mktemp("gguf") / "qwen.gguf", "qwen2", tied=True)


def _spec(model: dict, *, llama_cpp: dict | None = None, engine="llama.cpp", conc=1, prompt=900):
    d = {
        "schema_version": 1,
        "model": model,
        "task": {"kind": "inference"},
        "weights": {"format": "gguf", "gguf_type": "Q4_K"},
        "lengths": {"prompt_tokens": prompt, "generated_tokens": 100},
        "batch": {"concurrency": conc},
        "runtime": {"attention": "sdpa", "kv_cache_dtype": "fp16", "engine": engine},
        "placement": {"gpus": 1},
        "headroom": {"mode": "itemised"},
    }
    if llama_cpp is not None:
        d["llama_cpp"] = llama_cpp
    return spec_from_dict(d)


def _ledger(path: Path, **kw):
    spec = _spec({"path": str(path)}, **kw)
    found = resolve_model_ref(spec.model)
    return estimate(spec, found.arch, found.checkpoint)


def _item(est, key):
    return next(i for i in est.items if i.key == key)


# --- the header ---------------------------------------------------------------------------------


def test_block_table_matches_ggml():
    for name, (block, size) in GGUF_BLOCKS.items():
        assert gguf.GGML_QUANT_SIZES[T[name]] == (block, size), name
    assert set(GGUF_TYPES) <= set(GGUF_BLOCKS)


def test_exact_bytes_per_tensor(llama_file):
    model = read_gguf(llama_file)
    got = {t.name: (t.type_name, t.nbytes) for t in model.tensors}
    assert got["token_embd.weight"] == ("Q8_0", 272_000)
    assert got["blk.0.attn_q.weight"] == ("Q4_K", 36_864)
    assert got["blk.1.attn_k.weight"] == ("Q8_0", 34_816)
    assert got["blk.0.attn_norm.weight"] == ("F32", 1_024)
    assert got["blk.0.ffn_up.weight"] == ("F16", 262_144)
    assert got["output.weight"] == ("F16", 512_000)
    assert model.total_bytes == 272_000 + 2 * (36_864 + 34_816 + 1_024 + 262_144) + 512_000


def test_architecture_from_llama_metadata(llama_file):
    arch = architecture_from_gguf(read_gguf(llama_file))
    assert (arch.model_type, arch.num_layers, arch.hidden_size) == ("llama", 2, 256)
    assert (arch.num_attention_heads, arch.num_kv_heads, arch.head_dim) == (4, 2, 64)
    assert (arch.intermediate_size, arch.vocab_size, arch.max_position_embeddings) == (
        512,
        1000,
        4096,
    )
    assert not arch.tie_word_embeddings
    # 256,000 + 2 x (65,536 + 32,768 + 256 + 131,072) + 256,000
    assert arch.param_count == 971_264
    assert "GGUF header" in arch.structure


def test_rope_frequency_factors_are_a_buffer_not_parameters(tmp_path):
    """llama.cpp stores Llama 3.1's rope factors as `rope_freqs.weight`; transformers holds them
    in the `inv_freq` buffer, so they are no parameters (the count stays 971,264), while the
    file's bytes keep their 32 x 4 = 128 B."""
    plain = read_gguf(write_model(tmp_path / "plain.gguf"))
    with_rope = read_gguf(write_model(tmp_path / "rope.gguf", rope_freqs=True))
    assert architecture_from_gguf(with_rope).param_count == 971_264
    assert with_rope.total_bytes - plain.total_bytes == 128


def test_qwen2_tied_output_is_loaded_again_on_the_gpu(qwen_file):
    arch = architecture_from_gguf(read_gguf(qwen_file))
    assert arch.model_type == "qwen2" and arch.tie_word_embeddings
    est = _ledger(qwen_file)
    # token_embd stays on the CPU; the output layer is token_embd again, 272,000 B, on the GPU
    assert _item(est, "weights.embedding.gguf").max_bytes == 0
    assert _item(est, "weights.lm_head.gguf").max_bytes == 272_000
    # the q bias (2 x 1,024 B) is attention
    assert _item(est, "weights.attention.gguf").max_bytes == 2 * (36_864 + 34_816 + 1_024)


# --- llama.cpp's rules --------------------------------------------------------------------------


def test_full_offload_weights_and_kv(llama_file):
    est = _ledger(llama_file, llama_cpp={"n_ctx": 1000})
    assert _item(est, "weights.attention.gguf").max_bytes == 2 * (36_864 + 34_816)
    assert _item(est, "weights.mlp.gguf").max_bytes == 2 * 262_144
    assert _item(est, "weights.lm_head.gguf").max_bytes == 512_000
    assert _item(est, "weights.embedding.gguf").max_bytes == 0  # input layer on the CPU
    # n_ctx 1000 -> 1,024 cells; per layer per cell K 2 x 64 values f16 = 256 B + V 256 B
    assert _item(est, "kv_cache").max_bytes == 1024 * 2 * 512


def test_quantised_cache_types(llama_file):
    est = _ledger(
        llama_file, llama_cpp={"n_ctx": 1000, "cache_type_k": "q8_0", "cache_type_v": "q8_0"}
    )
    # 128 values of q8_0 = 4 blocks x 34 B = 136 B each for K and V
    assert _item(est, "kv_cache").max_bytes == 1024 * 2 * (136 + 136)


def test_slots_each_get_a_padded_stream(llama_file):
    est = _ledger(llama_file, llama_cpp={"n_ctx": 4096, "n_parallel": 3})
    # 4096 / 3 = 1365 -> padded to 1,536 cells per stream, x 3 = 4,608 cells
    assert _item(est, "kv_cache").max_bytes == 4608 * 2 * 512


def test_partial_offload(llama_file):
    # -ngl 2 on 2 blocks: i_gpu_start = 2 + 1 - 2 = 1: block 1 and the output layer
    est = _ledger(llama_file, llama_cpp={"n_ctx": 1000, "n_gpu_layers": 2})
    assert _item(est, "weights.attention.gguf").max_bytes == 36_864 + 34_816
    assert _item(est, "weights.lm_head.gguf").max_bytes == 512_000
    assert _item(est, "kv_cache").max_bytes == 1024 * 512
    assert any("1 of 2 layers on the GPU" in n for n in est.notes)
    # -ngl 0: nothing on the GPU
    est = _ledger(llama_file, llama_cpp={"n_ctx": 1000, "n_gpu_layers": 0})
    assert sum(i.max_bytes for i in est.items if i.category == "weights") == 0
    assert _item(est, "kv_cache").max_bytes == 0
    assert _item(est, "buffers.compute").max_bytes == 0


def test_compute_buffer(llama_file):
    no_fa = _ledger(llama_file, llama_cpp={"n_ctx": 1000, "flash_attn": False})
    # 512 tokens (n_ubatch); KQ = 1,024 cells x 512 x 4 heads x 4 B is the largest tensor
    assert _item(no_fa, "buffers.compute").max_bytes == 1024 * 512 * 4 * 4
    fa = _ledger(llama_file, llama_cpp={"n_ctx": 1000})
    # no KQ: MLP gate+up 2 x 512 x 512 x 4 B = 2,097,152 beats logits 1,000 x 512 x 4
    assert _item(fa, "buffers.compute").max_bytes == 2 * 512 * 512 * 4


def test_other_engine_keeps_every_weight_on_the_gpu(llama_file):
    est = _ledger(llama_file, engine="vllm")
    assert _item(est, "weights.embedding.gguf").max_bytes == 272_000


def test_llama_cpp_spec_rules(llama_file):
    with pytest.raises(SpecError, match="quantised V cache without Flash Attention"):
        _spec({"path": "x.gguf"}, llama_cpp={"cache_type_v": "q4_0", "flash_attn": False})
    with pytest.raises(SpecError, match="n_ctx = 1,000 gives each of 2 slot"):
        _spec({"path": "x.gguf"}, llama_cpp={"n_ctx": 1000}, conc=2)
    with pytest.raises(SpecError, match="applies to runtime.engine 'llama.cpp' only"):
        _spec({"path": "x.gguf"}, llama_cpp={"n_ctx": 1000}, engine="vllm")


# --- bad files ----------------------------------------------------------------------------------


def _one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_header_claiming_a_billion_tensors_is_refused(tmp_path):
    bad = tmp_path / "huge.gguf"
    bad.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 10**9, 0))
    with pytest.raises(ModelError) as exc:
        read_gguf(bad)
    assert f"{MAX_GGUF_TENSORS:,}" in _one_line(exc) and "MAX_GGUF_TENSORS" in str(exc.value)


def test_header_claiming_a_huge_string_is_refused(tmp_path):
    bad = tmp_path / "str.gguf"
    bad.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**40))
    with pytest.raises(ModelError) as exc:
        read_gguf(bad)
    assert f"{MAX_GGUF_STRING_BYTES:,}" in _one_line(exc)


def test_truncated_and_corrupt_files(tmp_path, llama_file):
    data = llama_file.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:-100])
    with pytest.raises(ModelError) as exc:
        read_gguf(cut)
    assert "truncated" in _one_line(exc)
    head = tmp_path / "head.gguf"
    head.write_bytes(data[:300])
    with pytest.raises(ModelError) as exc:
        read_gguf(head)
    assert "ends inside its header" in _one_line(exc)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"PK\x03\x04" + data[4:])
    with pytest.raises(ModelError) as exc:
        read_gguf(junk)
    assert "not a GGUF file" in _one_line(exc)


def test_tensor_data_is_not_read(tmp_path):
    """A 1 GiB tensor (a sparse file): the header is read, the data never is."""
    path = tmp_path / "big.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    rows = 2**18  # x 4,096 values a row in Q8_0: 128 blocks x 34 B = 4,352 B a row, ~1.1 GiB
    nbytes = rows * 4352
    w.add_tensor_info("blk.0.attn_q.weight", (rows, 4352), np.uint8, nbytes, T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size + 64 + nbytes)
    tracemalloc.start()
    model = read_gguf(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert model.tensors[0].nbytes == nbytes and model.tensors[0].n_elements == rows * 4096
    assert peak < 16 * 2**20


# --- ollama -------------------------------------------------------------------------------------


def test_ollama_store(tmp_path, monkeypatch, llama_file):
    digest = "ab" * 32
    store = tmp_path / "ollama"
    (store / "blobs").mkdir(parents=True)
    (store / "blobs" / f"sha256-{digest}").write_bytes(llama_file.read_bytes())
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "q4"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "layers": [
                    {
                        "mediaType": "application/vnd.ollama.image.template",
                        "digest": "sha256:" + "cd" * 32,
                    },
                    {
                        "mediaType": "application/vnd.ollama.image.model",
                        "digest": f"sha256:{digest}",
                    },
                ],
            }
        )
    )
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    for name in ("ollama:tiny:q4", "tiny:q4"):
        found = resolve_model_ref(ModelRef(id=name))
        assert found.origin == "ollama"
        assert found.checkpoint.total_bytes == read_gguf(llama_file).total_bytes
    with pytest.raises(ModelError, match="ollama store"):
        resolve_model_ref(ModelRef(id="ollama:tiny:q8"))
    manifest.write_text("{")
    with pytest.raises(ModelError, match="run `ollama pull`"):
        resolve_model_ref(ModelRef(id="ollama:tiny:q4"))


# --- the command line ---------------------------------------------------------------------------


def _run(*argv, cwd=None):
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['vramtui', *{list(argv)!r}]\n"
        "try:\n"
        "    runpy.run_module('vramtui', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        "print('GGUF_IMPORTED' if 'gguf' in sys.modules else 'GGUF_NOT_IMPORTED', file=sys.stderr)\n"
    )
    env = {"PYTHONPATH": str(REPO / "tui"), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def test_cli_estimate_of_a_gguf_file(llama_file):
    out = _run("estimate", "--model", str(llama_file), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    items = {i["key"]: i for i in data["items"]}
    assert "weights.attention.gguf" in items and "buffers.compute" in items


def test_catalogue_estimate_does_not_import_gguf():
    out = _run("estimate", "--model", "Qwen/Qwen1.5-7B-Chat", "--json")
    assert out.returncode == 0, out.stderr
    assert "GGUF_NOT_IMPORTED" in out.stderr
