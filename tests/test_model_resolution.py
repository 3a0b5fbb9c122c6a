"""Where a model id is looked up: catalogue, local directory, Hugging Face cache, the Hub.

The Hub is `tests/fake_hub.py`, a local server reached through HF_ENDPOINT, serving real
config.json files and safetensors headers whose data is never sent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_hub import (
    FakeRepo,
    VirtualSafetensors,
    llama_cpp_gguf,
    llama_like_tensors,
    real_config,
    repo_from_config,
)

from vramtui.errors import ModelError
from vramtui.models.checkpoint import MAX_HEADER_BYTES
from vramtui.models.resolve import resolve_model_ref
from vramtui.spec import ModelRef

REPO = Path(__file__).resolve().parent.parent
QWEN7 = "Qwen/Qwen2-7B-Instruct"
QWEN05 = "Qwen/Qwen2.5-0.5B"
GEMMA = "google/gemma-2b"
C1 = "a" * 40  # commits
C2 = "b" * 40
C3 = "c" * 40

# Worked by hand from the config (hidden 3584, 28 layers, 28 heads of 128, 4 KV heads,
# MLP 18944, vocab 152064, q/k/v biases, untied): embeddings and lm_head 152064 x 3584 each;
# per layer q 3584x3584 + 3584, k and v 512x3584 + 512, o 3584x3584, gate/up/down
# 3 x 18944 x 3584, two norms of 3584 = 233,057,792; x 28, + 2 x 544,997,376, + final norm.
QWEN7_PARAMS = 28 * 233_057_792 + 2 * 544_997_376 + 3584
assert QWEN7_PARAMS == 7_615_616_512  # Qwen2-7B's published parameter count
# Qwen2.5-0.5B (hidden 896, 24 layers, 14 heads of 64, 2 KV heads, MLP 4864, tied vocab
# 151936): per layer 896x896+896 + 2 x (128x896+128) + 896x896 + 3 x 4864 x 896 + 2 x 896.
QWEN05_PARAMS = 24 * (803_712 + 2 * 114_816 + 802_816 + 13_074_432 + 1_792) + 151936 * 896 + 896
assert QWEN05_PARAMS == 494_032_768


def add_models(fake):
    """Qwen2-7B-Instruct (4 shards), Qwen2.5-0.5B (one file, tag v1) and a gated Gemma."""
    fake.add(repo_from_config(QWEN7, C1, shards=4))
    fake.add(repo_from_config(QWEN05, C2, refs={"v1": C2}))
    fake.add(repo_from_config(GEMMA, C3, gated=True))
    fake.tokens |= {"hf_granted", "hf_not_granted"}
    fake.granted.add(("hf_granted", GEMMA))
    return fake


@pytest.fixture
def hub(fake_hub):
    return add_models(fake_hub)


def ref(model_id: str, revision: str | None = None) -> ModelRef:
    return ModelRef(id=model_id, revision=revision)


def hf_cache_snapshot(root: Path, repo_id: str, commit: str, refs=("main",)) -> Path:
    """A Hugging Face cache entry as `hf download` leaves it (files as links to blobs)."""
    repo_dir = root / ("models--" + repo_id.replace("/", "--"))
    snap = repo_dir / "snapshots" / commit
    snap.mkdir(parents=True)
    blobs = repo_dir / "blobs"
    blobs.mkdir()
    (blobs / "cfg").write_bytes(real_config(repo_id))
    (snap / "config.json").symlink_to(Path("..", "..", "blobs", "cfg"))
    (repo_dir / "refs").mkdir()
    for name in refs:
        (repo_dir / "refs" / name).write_text(commit)
    return snap


# --- 1. catalogue -------------------------------------------------------------------------------


def test_catalogue_comes_first_and_needs_no_hub(hub):
    found = resolve_model_ref(ref("Qwen/Qwen2.5-7B-Instruct"))
    assert found.origin == "catalogue" and found.commit is None
    assert hub.requests == []


def test_catalogue_estimate_does_not_import_huggingface_hub():
    """A catalogue model on the command line: neither huggingface_hub nor Textual loaded."""
    code = (
        "import runpy, sys\n"
        "sys.argv = ['vramtui', 'estimate', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--json']\n"
        "try:\n"
        "    runpy.run_module('vramtui', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('huggingface_hub', 'httpx', 'httpx2', 'textual'))\n"
        "assert not bad, bad\n"
        "print('CLEAN')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "tui")}
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.rstrip().endswith("CLEAN")


# --- 2. local directory ---------------------------------------------------------------------------


def test_a_local_directory_named_like_an_id_comes_before_the_hub(hub, tmp_path, monkeypatch):
    local = tmp_path / "Qwen" / "Qwen2.5-0.5B"
    local.mkdir(parents=True)
    (local / "config.json").write_bytes(real_config(QWEN05))
    monkeypatch.chdir(tmp_path)
    found = resolve_model_ref(ref(QWEN05))
    assert found.origin == "local" and found.commit is None
    assert found.arch.param_count == QWEN05_PARAMS
    assert hub.requests == []


# --- 3. the Hugging Face cache --------------------------------------------------------------------


def test_hf_cache_at_the_default_revision(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    hf_cache_snapshot(tmp_path / "hf", QWEN05, C2)
    found = resolve_model_ref(ref(QWEN05))
    assert (found.origin, found.commit) == ("hf-cache", C2)
    assert found.arch.param_count == QWEN05_PARAMS
    assert found.checkpoint is None  # config.json only: sized from the config
    assert hub.requests == []


def test_hf_cache_found_through_hf_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    hf_cache_snapshot(tmp_path / "home" / "hub", QWEN05, C2)
    assert resolve_model_ref(ref(QWEN05)).origin == "hf-cache"


def test_hf_cache_honours_the_revision(tmp_path, monkeypatch):
    """A branch is looked up in refs/, a commit (or its prefix) names its snapshot, and a
    revision the cache lacks is not answered with another one."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    hf_cache_snapshot(tmp_path, QWEN05, C2, refs=("main", "v1"))
    assert resolve_model_ref(ref(QWEN05, "v1")).commit == C2
    assert resolve_model_ref(ref(QWEN05, C2)).commit == C2
    assert resolve_model_ref(ref(QWEN05, C2[:10])).commit == C2
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref(QWEN05, "v2"))
    assert "Hugging Face cache: no snapshot of Qwen/Qwen2.5-0.5B for revision v2" in str(info.value)
    with pytest.raises(ModelError):
        resolve_model_ref(ref(QWEN05, C1))


def test_hf_cache_with_complete_weights_reads_their_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snap = hf_cache_snapshot(tmp_path, QWEN05, C2)
    tensors = llama_like_tensors(json.loads(real_config(QWEN05)))
    stub = VirtualSafetensors.from_tensors(tensors)
    with open(snap / "model.safetensors", "wb") as f:  # sparse: the data is never read
        f.write(stub.prefix)
        f.truncate(stub.size)
    found = resolve_model_ref(ref(QWEN05))
    assert found.checkpoint is not None
    assert found.checkpoint.total_numel == QWEN05_PARAMS


# --- 4. the Hub -----------------------------------------------------------------------------------


def test_hub_sharded_model_reads_only_headers(hub):
    found = resolve_model_ref(ref(QWEN7))
    assert (found.origin, found.commit) == ("hub", C1)
    assert found.arch.model_id == QWEN7
    assert found.arch.param_count == QWEN7_PARAMS
    assert found.checkpoint.total_numel == QWEN7_PARAMS
    assert found.checkpoint.total_bytes == 2 * QWEN7_PARAMS  # bf16, from data_offsets
    assert len(found.checkpoint.files) == 4
    # Per shard: the 8-byte length, then exactly the header (the fixture checks no byte more).
    shard = "model-00002-of-00004.safetensors"
    ranges = [r.range for r in hub.file_requests(shard)]
    header_len = len(hub.repos[QWEN7].files[shard].prefix) - 8
    assert ranges == [(0, 7), (8, 8 + header_len - 1)]


def test_hub_fetch_is_cached_and_the_commit_answers_offline(hub, monkeypatch):
    resolve_model_ref(ref(QWEN05))
    asked = len(hub.requests)
    # At a commit: straight from vramtui's cache, no request at all.
    assert resolve_model_ref(ref(QWEN05, C2)).arch.param_count == QWEN05_PARAMS
    assert len(hub.requests) == asked
    # A branch: one model-info request for its commit, no file fetched again.
    resolve_model_ref(ref(QWEN05))
    assert [r.path for r in hub.requests[asked:]] == [f"/api/models/{QWEN05}/revision/main"]
    # Offline: the cached branch is used.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = len(hub.requests)
    assert resolve_model_ref(ref(QWEN05)).commit == C2
    assert len(hub.requests) == before


def test_hub_revision_branch_and_missing_revision(hub):
    assert resolve_model_ref(ref(QWEN05, "v1")).commit == C2
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref(QWEN05, "v9"))
    assert str(info.value).startswith("the Hub has no revision v9 of Qwen/Qwen2.5-0.5B")


def test_hf_hub_offline_lists_what_was_tried(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref(QWEN7))
    message = str(info.value)
    assert message.startswith(f"unknown model '{QWEN7}': catalogue: no match (close: ")
    assert "Qwen/Qwen2.5-7B-Instruct" in message  # a close match is offered
    assert "local directory: none of that name" in message
    assert f"Hugging Face cache: no {QWEN7} in " in message
    assert "Hub: not asked (HF_HUB_OFFLINE is set)" in message
    assert "\n" not in message
    assert hub.requests == []


def test_network_error_is_one_line(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref(QWEN7))
    message = str(info.value)
    assert "Hub: network error (ConnectError)" in message
    assert message.startswith(f"unknown model '{QWEN7}': catalogue: no match")


def test_missing_repository_is_listed_as_tried(hub):
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref("nobody/no-such-model"))
    message = str(info.value)
    assert "Hub: no repository nobody/no-such-model (or private: set HF_TOKEN)" in message
    assert message.startswith("unknown model 'nobody/no-such-model': catalogue: no match")


def test_gated_without_token_says_accept_the_licence_and_set_hf_token(hub):
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref(GEMMA))
    assert str(info.value) == (
        f"model {GEMMA} is gated on the Hub: accept its licence at {hub.url}/{GEMMA}, then set "
        "HF_TOKEN to an access token of that account (https://huggingface.co/settings/tokens)"
    )


def test_gated_with_a_token_not_granted(hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_not_granted")
    with pytest.raises(ModelError, match="with the account of HF_TOKEN"):
        resolve_model_ref(ref(GEMMA))
    assert hub.requests[-1].authorization == "hf_not_granted"


def test_wrong_token_is_named(hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(ModelError, match=r"refused the token in HF_TOKEN .*invalid credentials"):
        resolve_model_ref(ref(QWEN05))


def test_gated_with_a_granted_token_gets_the_config(hub, monkeypatch):
    """The token is sent. Gemma's config lacks tie_word_embeddings: transformers' GemmaConfig
    default (tied) applies, as when transformers loads it, and the commit is recorded."""
    monkeypatch.setenv("HF_TOKEN", "hf_granted")
    resolved = resolve_model_ref(ref(GEMMA))
    assert resolved.origin == "hub" and resolved.commit == C3
    assert resolved.arch.tie_word_embeddings is True
    assert b"tie_word_embeddings" not in real_config(GEMMA)
    assert {r.authorization for r in hub.requests} == {"hf_granted"}


def test_header_length_over_the_limit_is_refused_before_it_is_asked(hub):
    tensors = [("w", "BF16", [4, 4])]
    files = {
        "config.json": real_config(QWEN05),
        "model.safetensors": VirtualSafetensors.from_tensors(
            tensors, header_length=MAX_HEADER_BYTES + 1
        ),
    }
    hub.add(FakeRepo("evil/huge-header", C1, files))
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref("evil/huge-header"))
    message = str(info.value)
    assert f"header length {MAX_HEADER_BYTES + 1:,} bytes is over the 100 MB limit" in message
    assert [r.range for r in hub.file_requests("model.safetensors")] == [(0, 7)]


def test_repository_without_config_is_named(hub):
    hub.add(FakeRepo("someone/no-config", C1, {"README.md": b"# nothing to size"}))
    with pytest.raises(ModelError, match="someone/no-config on the Hub has no config.json"):
        resolve_model_ref(ref("someone/no-config"))


def test_gguf_only_repository_is_sized_from_its_gguf_header_not_its_config(hub):
    """A repository of GGUF files (with a config.json beside them) is sized from the GGUF
    file's header: its stored types, never the config's unquantised weights."""
    config = real_config(QWEN05)
    [q8] = llama_cpp_gguf(json.loads(config), "Q8_0")
    hub.add(FakeRepo("someone/gguf-only", C1, {"config.json": config, "model.Q8_0.gguf": q8}))
    found = resolve_model_ref(ref("someone/gguf-only"))
    assert (found.origin, found.commit) == ("hub-gguf", C1)
    assert found.arch.param_count == QWEN05_PARAMS
    assert found.checkpoint.bytes_by_type()["Q8_0"] == q8.tensor_bytes - 4 * sum(
        t.n_elements for t in found.checkpoint.tensors if t.type_name == "F32"
    )
    assert not hub.file_requests("config.json")  # the file list said what it holds
    assert hub.weight_requests() == []


def test_not_a_hub_id_is_said(hub):
    with pytest.raises(ModelError) as info:
        resolve_model_ref(ref("no such/model id"))
    assert "Hugging Face cache and Hub: not a Hub id (owner/name" in str(info.value)
    assert hub.requests == []


def test_a_crashed_fetch_leaves_no_snapshot(hub, monkeypatch):
    """A failure half-way (here a broken shard header) caches nothing: the next try fetches."""
    from vramtui.models import hub as hub_mod

    broken = VirtualSafetensors.from_tensors([("w", "BF16", [4, 4])])
    broken.prefix = broken.prefix[:8] + b"[" + broken.prefix[9:]  # not JSON any more
    hub.add(
        FakeRepo(
            "odd/broken", C1, {"config.json": real_config(QWEN05), "model.safetensors": broken}
        )
    )
    with pytest.raises(ModelError, match="header"):
        resolve_model_ref(ref("odd/broken"))
    assert hub_mod.cached_snapshot("odd/broken", C1) is None
    leftovers = list((hub_mod.hub_cache_root() / "models--odd--broken" / "snapshots").iterdir())
    assert leftovers == []


# --- the CLI, and the commit kept in a saved spec ---------------------------------------------------


def test_cli_estimate_of_a_hub_model(hub, capsys):
    from vramtui.cli import main

    assert main(["estimate", "--model", QWEN7, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["param_count"] == QWEN7_PARAMS
    notes = " ".join(data["notes"])
    assert f"architecture from {QWEN7}@{C1[:12]} on the Hub" in notes  # the commit sized
    assert "no model of its own" not in notes  # qwen2 is a family vramtui models
    assert data["weights_only_bytes"] == 2 * QWEN7_PARAMS  # bf16, one GPU
    weights = {i["key"]: i["bytes"] for i in data["items"] if i["key"].startswith("weights.")}
    assert weights["weights.embedding.bf16"] == 2 * 152064 * 3584
    assert weights["weights.lm_head.bf16"] == 2 * 152064 * 3584


def test_cli_unknown_model_offline_is_one_line(capsys, monkeypatch):
    from vramtui.cli import main

    code = main(["estimate", "--model", "someone/unknown-7b"])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and err.startswith(
        "vramtui: error: unknown model 'someone/unknown-7b'"
    )
    assert "Hub: not asked (HF_HUB_OFFLINE is set)" in err


def test_saved_spec_records_the_resolved_commit(hub, tmp_path):
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.session import SizingSession
    from vramtui.spec import load_spec

    session = SizingSession.from_spec(seed_example_spec())
    outcome = session.set_field("model", QWEN05)
    # Typing does not reach the Hub: the field says how to fetch.
    assert not outcome.valid
    assert "press Enter in the model field" in session.errors["model"]
    assert hub.requests == []
    outcome = session.fetch_model()
    assert outcome.valid, outcome.message
    assert session.results.arch.param_count == QWEN05_PARAMS
    target = tmp_path / "spec.toml"
    session.save(target)
    saved = load_spec(target)
    assert (saved.model.id, saved.model.revision) == (QWEN05, C2)
    assert f'revision = "{C2}"' in target.read_text()


def test_typing_finds_a_model_fetched_before(hub):
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.session import SizingSession

    resolve_model_ref(ref(QWEN05))
    session = SizingSession.from_spec(seed_example_spec())
    asked = len(hub.requests)
    assert session.set_field("model", QWEN05).valid
    assert len(hub.requests) == asked
    assert session.form["model"]["revision"] == C2


def test_hub_snapshot_copy_is_not_shared_with_the_hf_cache(hub, tmp_path, monkeypatch):
    """What vramtui fetched lives in its own cache, never in the user's Hugging Face cache."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    resolve_model_ref(ref(QWEN05))
    assert not (tmp_path / "hf").exists()
    from vramtui.models import hub as hub_mod

    snap = hub_mod.cached_snapshot(QWEN05, None)
    assert snap.commit == C2
    stub = snap.directory / "model.safetensors"
    assert stub.stat().st_size == len(hub.repos[QWEN05].files["model.safetensors"].prefix)
    shutil.rmtree(snap.directory)
    assert hub_mod.cached_snapshot(QWEN05, None) is None
