"""GGUF repositories on the Hub: which file `OWNER/NAME[:QUANT]` names, its header read by range
requests (never a byte of tensor data), kept in vramtui's cache for the next, offline, run; and
the bounded header walker that reads it, checked against the gguf package's own GGUFReader."""

from __future__ import annotations

import dataclasses
import json

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from fake_hub import FakeRepo, VirtualGguf, llama_cpp_gguf

from vramtui.cli import main
from vramtui.errors import ModelError
from vramtui.models.gguf_file import _read_one
from vramtui.models.gguf_header import walk_header
from vramtui.models.hub_gguf import choose_gguf, quant_of
from vramtui.models.resolve import pin_revision, resolve_model_ref
from vramtui.spec import ModelRef
from vramtui.spec_overrides import load_base_spec

C1 = "a" * 40
# 2 layers, hidden 256, 4 heads / 2 KV heads of 64, intermediate 512, 1,000 tokens, untied.
TINY = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "tie_word_embeddings": False,
}
# embed 256,000 + 2 x (q 65,536 + k 32,768 + v 32,768 + o 65,536 + 3 x 131,072 + 2 norms 256)
# + output_norm 256 + output 256,000
TINY_PARAMS = 256_000 + 2 * (65_536 + 32_768 + 32_768 + 65_536 + 3 * 131_072 + 512) + 256 + 256_000
assert TINY_PARAMS == 1_692_928


def ref(model_id: str, revision: str | None = None) -> ModelRef:
    return ModelRef(id=model_id, revision=revision)


def one(file_type: str = "Q4_K_M") -> VirtualGguf:
    return llama_cpp_gguf(TINY, file_type)[0]


def gguf_requests(hub):
    return [r for r in hub.requests if r.path.endswith(".gguf")]


# --- which file --------------------------------------------------------------------------------

BARTOWSKI = [
    "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf",
    "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
    "Meta-Llama-3.1-8B-Instruct-Q4_K_S.gguf",
    "Meta-Llama-3.1-8B-Instruct-IQ4_XS.gguf",
    "Meta-Llama-3.1-8B-Instruct-f32.gguf",
    "README.md",
]


def test_without_a_quant_llama_cpp_default_q4_k_m_is_chosen():
    assert (
        choose_gguf("o/m", set(BARTOWSKI), None).first == "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    )


def test_the_quant_is_matched_case_insensitively_at_the_end_of_the_name():
    names = set(BARTOWSKI)
    assert choose_gguf("o/m", names, "q8_0").first == "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf"
    assert choose_gguf("o/m", names, "F32").first == "Meta-Llama-3.1-8B-Instruct-f32.gguf"
    # Q4_K matches no file: Q4_K_M and Q4_K_S end in more than "-Q4_K".
    with pytest.raises(ModelError, match="has no GGUF file for quant Q4_K; its quants are"):
        choose_gguf("o/m", names, "Q4_K")
    # TheBloke's "name.QUANT.gguf"
    assert choose_gguf("o/m", {"llama-2-7b.Q5_K_M.gguf", "llama-2-7b.Q8_0.gguf"}, "Q8_0").first == (
        "llama-2-7b.Q8_0.gguf"
    )


def test_split_files_in_a_quant_folder_and_mmproj_files():
    names = {
        "Q4_K_M/Big-Q4_K_M-00001-of-00002.gguf",
        "Q4_K_M/Big-Q4_K_M-00002-of-00002.gguf",
        "Q8_0/Big-Q8_0-00001-of-00003.gguf",
        "Q8_0/Big-Q8_0-00002-of-00003.gguf",
        "mmproj-Big-F16.gguf",
    }
    choice = choose_gguf("o/m", names, None)
    assert choice.parts == (
        "Q4_K_M/Big-Q4_K_M-00001-of-00002.gguf",
        "Q4_K_M/Big-Q4_K_M-00002-of-00002.gguf",
    )
    # A split model lacking a part is refused, naming it.
    with pytest.raises(ModelError, match="not Q8_0/Big-Q8_0-00003-of-00003.gguf"):
        choose_gguf("o/m", names, "Q8_0")
    # The vision projector is never the model: the only model file is chosen beside it.
    assert choose_gguf("o/m", {"mmproj-F16.gguf", "m-Q6_K.gguf"}, None).first == "m-Q6_K.gguf"


def test_unsloth_dynamic_quants_are_told_apart():
    names = {"M-Q4_K_XL.gguf", "M-UD-Q4_K_XL.gguf"}
    assert quant_of("M-UD-Q4_K_XL.gguf") == "UD-Q4_K_XL"
    assert choose_gguf("o/m", names, "Q4_K_XL").first == "M-Q4_K_XL.gguf"
    assert choose_gguf("o/m", names, "ud-q4_k_xl").first == "M-UD-Q4_K_XL.gguf"


# --- through the fake Hub -----------------------------------------------------------------------


def test_several_quants_and_no_q4_k_m_are_refused_in_one_line_listing_them(fake_hub):
    fake_hub.add(
        FakeRepo("o/tiny-GGUF", C1, {"tiny-Q8_0.gguf": one("Q8_0"), "tiny-F16.gguf": one("F16")})
    )
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref("o/tiny-GGUF"))
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "o/tiny-GGUF on the Hub holds 2 GGUF models and no Q4_K_M (llama.cpp's default); "
        "choose one: --model o/tiny-GGUF:QUANT, QUANT one of F16, Q8_0"
    )
    assert gguf_requests(fake_hub) == []  # nothing read before a file is chosen


def test_a_quant_picks_its_file_read_by_ranges_only(fake_hub, capsys):
    q8 = one("Q8_0")
    fake_hub.add(FakeRepo("o/tiny-GGUF", C1, {"tiny-Q8_0.gguf": q8, "tiny-F16.gguf": one("F16")}))
    found = resolve_model_ref(ref("o/tiny-GGUF:Q8_0"))
    assert (found.origin, found.commit) == ("hub-gguf", C1)
    assert "tiny-Q8_0.gguf of o/tiny-GGUF@aaaaaaaaaaaa on the Hub" in found.arch.source
    assert found.arch.param_count == TINY_PARAMS
    # Q8_0: 34 bytes per 32 values for every matrix; F32 norms (5 x 256 values x 4 bytes).
    matrices = TINY_PARAMS - 5 * 256
    assert found.checkpoint.bytes_by_type() == {"Q8_0": matrices // 32 * 34, "F32": 5 * 256 * 4}
    asked = gguf_requests(fake_hub)
    assert asked and all(r.range is not None for r in asked)
    assert all(r.path.endswith("/tiny-Q8_0.gguf") for r in asked)
    assert max(r.range[1] for r in asked) == len(q8.prefix) - 1  # the header, to its last byte
    assert fake_hub.weight_requests() == []
    # The estimate takes llama.cpp's defaults and the file's own type, as for a local file.
    assert main(["estimate", "--model", "o/tiny-GGUF:Q8_0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "o/tiny-GGUF:Q8_0"
    assert any(i["key"] == "weights.attention.gguf" for i in out["items"])
    assert any("llama.cpp" in i["name"] for i in out["items"] if i["key"].startswith("kv"))


def test_split_model_reads_the_header_of_every_part(fake_hub):
    first, second = llama_cpp_gguf(TINY, "Q4_K_M", parts=2)
    fake_hub.add(
        FakeRepo(
            "o/split-GGUF",
            C1,
            {
                "Q4_K_M/tiny-Q4_K_M-00001-of-00002.gguf": first,
                "Q4_K_M/tiny-Q4_K_M-00002-of-00002.gguf": second,
                "mmproj-tiny-f16.gguf": one("F16"),
            },
        )
    )
    found = resolve_model_ref(ref("o/split-GGUF:q4_k_m"))
    assert found.arch.param_count == TINY_PARAMS
    assert len(found.checkpoint.files) == 2
    assert found.checkpoint.total_bytes == first.tensor_bytes + second.tensor_bytes
    assert {r.path.rsplit("/", 1)[1] for r in gguf_requests(fake_hub)} == {
        "tiny-Q4_K_M-00001-of-00002.gguf",
        "tiny-Q4_K_M-00002-of-00002.gguf",
    }
    assert fake_hub.weight_requests() == []


def test_second_run_is_offline_from_the_cache_and_the_commit_is_pinned(fake_hub, monkeypatch):
    files = {"tiny-Q4_K_M.gguf": one(), "tiny-Q8_0.gguf": one("Q8_0"), "README.md": b"# t"}
    fake_hub.add(FakeRepo("o/tiny-GGUF", C1, files))
    first = resolve_model_ref(ref("o/tiny-GGUF"))
    spec = dataclasses.replace(load_base_spec(None)[0], model=ref("o/tiny-GGUF"))
    assert pin_revision(spec, first).model.revision == C1
    asked = len(fake_hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    again = resolve_model_ref(ref("o/tiny-GGUF"))
    assert again.origin == "hub-gguf" and again.arch.param_count == TINY_PARAMS
    assert resolve_model_ref(ref("o/tiny-GGUF:Q4_K_M", revision=C1)).commit == C1
    assert len(fake_hub.requests) == asked  # not a request more
    # A quant never fetched is not in the cache: the Hub was not asked, and it says so; one the
    # repository does not have is named as such from the cached file list.
    with pytest.raises(ModelError, match="Hub: not asked .HF_HUB_OFFLINE is set."):
        resolve_model_ref(ref("o/tiny-GGUF:Q8_0"))
    with pytest.raises(
        ModelError, match="no GGUF file for quant Q2_K; its quants are Q4_K_M, Q8_0"
    ):
        resolve_model_ref(ref("o/tiny-GGUF:Q2_K"))


def test_a_file_that_is_not_gguf_and_a_bad_quant_are_refused_in_one_line(fake_hub):
    fake_hub.add(FakeRepo("o/broken-GGUF", C1, {"model.Q4_K_M.gguf": b"GGUF"}))
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref("o/broken-GGUF"))
    assert str(info.value).startswith("GGUF file model.Q4_K_M.gguf of o/broken-GGUF on the Hub: ")
    assert "truncated or not a GGUF file" in str(info.value)
    with pytest.raises(ModelError, match="the GGUF quant of 'o/broken-GGUF:Q4 K' holds characters"):
        resolve_model_ref(ref("o/broken-GGUF:Q4 K"))


# --- the walker against GGUFReader ---------------------------------------------------------------


def _write(path, *, big_endian: bool = False):
    endian = gguf.GGUFEndian.BIG if big_endian else gguf.GGUFEndian.LITTLE
    w = gguf.GGUFWriter(str(path), "qwen2", endianess=endian)
    w.add_block_count(2)
    w.add_embedding_length(64)
    w.add_head_count(4)
    w.add_head_count_kv([2, 1])  # an array: one count per layer
    w.add_float32("qwen2.rope.freq_base", 1_000_000.0)
    w.add_bool("general.flag", True)
    w.add_int64("general.big", -(2**40))
    w.add_string("general.name", "tiny\x1b[31m model")  # control characters are stripped
    w.add_token_list([b"a", b"bc", "\u00e9".encode()])
    w.add_array("general.empty", [])
    w.add_array("tokenizer.ggml.scores", [0.5, -1.25, 3.0])
    w.add_tensor("token_embd.weight", np.zeros((3, 64), dtype=np.float16))
    w.add_tensor(
        "blk.0.attn_q.weight",
        np.zeros((64, 256 // 32 * 34), dtype=np.uint8),
        raw_dtype=gguf.GGMLQuantizationType.Q8_0,
    )
    w.add_tensor("blk.0.attn_norm.weight", np.ones(64, dtype=np.float32))
    w.add_tensor("blk.1.x.weight", np.zeros((2, 3, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("big_endian", [False, True])
def test_walker_reads_what_gguf_reader_reads(tmp_path, big_endian):
    path = _write(tmp_path / "t.gguf", big_endian=big_endian)
    data = path.read_bytes()
    header = walk_header(str(path), data, len(data))
    tensors, metadata, lengths = _read_one(path)  # GGUFReader
    assert header.tensors == tensors
    # GGUFReader adds its own GGUF.version / GGUF.tensor_count / GGUF.kv_count fields.
    assert header.metadata == {k: v for k, v in metadata.items() if not k.startswith("GGUF.")}
    assert header.array_lengths == lengths
    assert "\x1b" not in metadata["general.name"]  # shown escaped, never sent to a terminal
    assert metadata["qwen2.attention.head_count_kv"] == [2, 1]
    assert lengths["tokenizer.ggml.tokens"] == 3 and "tokenizer.ggml.tokens" not in metadata
    assert [t.shape for t in tensors] == [(64, 3), (256, 64), (64,), (32, 3, 2)]
    assert [t.nbytes for t in tensors] == [3 * 64 * 2, 64 * 256 // 32 * 34, 64 * 4, 192 * 4]
    reader = gguf.GGUFReader(path)
    assert header.data_offset == reader.data_offset


def test_walker_asks_for_no_byte_past_the_header(tmp_path):
    """Fed through `more`, the walk never asks for a byte of tensor data, however the file's
    tokens and tensor infos are laid out; and it needs no restart."""
    data = llama_cpp_gguf(TINY, "Q4_K_M")[0]
    asked = []

    def more(n: int) -> bytes:
        asked.append(n)
        return data.prefix[:n]

    header = walk_header("t", data.prefix[:24], data.size, more)
    assert max(asked) == header.header_bytes == len(data.prefix)
    assert header.data_offset == data.data_offset
    assert sum(t.n_elements for t in header.tensors) == TINY_PARAMS
    assert len(asked) < 30
