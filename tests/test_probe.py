"""The stage probe (`vramtui.probe`), its reader and the Hugging Face Trainer callback.

On this CPU machine a real stage measures nothing and says why; a scripted stand-in for
`torch.cuda` (and the project's fake NVML) checks that the figures written are exactly the
counters' values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from fake_pynvml import GIB, H100_TOTAL, FakeGpu, FakeProcess, make_fake_pynvml

import vramtui.probe as probe_mod
from vramtui.errors import VramtuiError
from vramtui.probe import NO_CUDA_WARNING, Probe
from vramtui.probe.records import ProbeFileError, parse_probe_lines, read_probe_file

TUI = str(Path(__file__).resolve().parents[1] / "tui")
MIB = 2**20


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


# ------------------------------------------------------------------ a scripted torch.cuda


class FakeCuda:
    """torch.cuda's memory counters with a caching allocator's semantics, scripted by hand."""

    def __init__(self, n: int = 2, name: str = "NVIDIA H100 80GB HBM3", total: int = H100_TOTAL):
        self.n = n
        self.name = name
        self.total = total
        self.allocated = [0] * n
        self.reserved = [0] * n
        self.peak_allocated = [0] * n
        self.peak_reserved = [0] * n
        self.resets = [0] * n
        self.syncs = [0] * n
        self.raise_on_read: type[BaseException] | None = None

    def alloc(self, d: int, nbytes: int, reserve_extra: int = 0) -> None:
        self.allocated[d] += nbytes
        self.reserved[d] = max(self.reserved[d], self.allocated[d] + reserve_extra)
        self.peak_allocated[d] = max(self.peak_allocated[d], self.allocated[d])
        self.peak_reserved[d] = max(self.peak_reserved[d], self.reserved[d])

    def free(self, d: int, nbytes: int) -> None:
        self.allocated[d] -= nbytes

    # the torch.cuda API the probe calls
    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return self.n

    def current_device(self) -> int:
        return 0

    def synchronize(self, d=None) -> None:
        self.syncs[d] += 1

    def reset_peak_memory_stats(self, d) -> None:
        self.resets[d] += 1
        self.peak_allocated[d] = self.allocated[d]
        self.peak_reserved[d] = self.reserved[d]

    def max_memory_allocated(self, d) -> int:
        if self.raise_on_read:
            raise self.raise_on_read("CUDA error: an illegal memory access was encountered")
        return self.peak_allocated[d]

    def max_memory_reserved(self, d) -> int:
        return self.peak_reserved[d]

    def memory_allocated(self, d) -> int:
        return self.allocated[d]

    def memory_reserved(self, d) -> int:
        return self.reserved[d]

    def get_device_properties(self, d):
        return types.SimpleNamespace(name=self.name, total_memory=self.total, uuid=None)

    API = (
        "is_available",
        "device_count",
        "current_device",
        "synchronize",
        "reset_peak_memory_stats",
        "max_memory_allocated",
        "max_memory_reserved",
        "memory_allocated",
        "memory_reserved",
        "get_device_properties",
    )


@pytest.fixture
def fake_cuda(monkeypatch):
    """The real torch.cuda module with its memory functions replaced by a FakeCuda."""
    torch = pytest.importorskip("torch")
    fake = FakeCuda()
    for name in FakeCuda.API:
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    return fake


@pytest.fixture
def fake_nvml(monkeypatch):
    gpus = [
        FakeGpu(used=3 * GIB, compute=[FakeProcess(os.getpid(), 2 * GIB)]),
        FakeGpu(used=5 * GIB, compute=[FakeProcess(os.getpid() + 1, GIB)]),
    ]
    nvml = make_fake_pynvml(gpus, driver_version="570.86.15")
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    return nvml


# ------------------------------------------------------------------ (a) CPU: nothing measured


def test_cpu_stage_writes_run_and_unmeasured_stage(tmp_path, capsys):
    pytest.importorskip("torch")
    path = tmp_path / "sub" / "probe.jsonl"
    probe = Probe(path, run_name="cpu")
    ran = []
    with probe.stage("backward", batch=8, seq_len=4096) as st:
        ran.append(True)
        st.dims["samples"] = 8
    with probe.stage("validation", batch=2):
        pass
    assert ran == [True]

    err = capsys.readouterr().err
    assert err.count(NO_CUDA_WARNING) == 1  # warned once, not per stage

    run, stage, _ = _lines(path)
    assert run["vramtui_probe"] == 1 and run["kind"] == "run"
    assert run["run_name"] == "cpu" and run["pid"] == os.getpid()
    assert run["cuda_available"] is False and run["devices"] == []
    assert run["versions"]["python"] and run["versions"]["torch"]
    assert len(run["run_id"]) == 32 and run["time"].endswith("Z")
    assert stage["kind"] == "stage" and stage["run_id"] == run["run_id"]
    assert stage["stage"] == "backward"
    assert stage["dims"] == {"batch": 8, "seq_len": 4096, "samples": 8}
    assert stage["measured"] is False and stage["devices"] == []
    assert stage["reason"].startswith("nothing was measured: torch.cuda.is_available() is False")
    assert stage["error"] is None and stage["seconds"] >= 0

    (r,) = read_probe_file(path)
    assert r.run_id == run["run_id"] and r.run_name == "cpu" and r.cuda_available is False
    assert [s.stage for s in r.stages] == ["backward", "validation"]
    assert r.stages[0].dims == {"batch": 8, "seq_len": 4096, "samples": 8}
    assert r.stages[0].measured is False and "nothing was measured" in r.stages[0].reason
    assert r.stages[1].dims == {"batch": 2}


def test_module_level_stage_uses_env_file(tmp_path, monkeypatch):
    path = tmp_path / "env.jsonl"
    monkeypatch.setenv(probe_mod.ENV_FILE, str(path))
    monkeypatch.setattr(probe_mod, "_default", None)
    with probe_mod.stage("decode", concurrency=4, generated_tokens=1):
        pass
    assert probe_mod.default_probe().path == str(path)
    assert [s.stage for s in read_probe_file(path)[0].stages] == ["decode"]
    other = tmp_path / "configured.jsonl"
    probe_mod.configure(other, run_name="second")
    with probe_mod.stage("load"):
        pass
    assert read_probe_file(other)[0].run_name == "second"


def test_without_torch_the_stage_runs_and_says_why(tmp_path):
    path = tmp_path / "p.jsonl"
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        from vramtui.probe import Probe
        with Probe({str(path)!r}).stage("load"):
            print("user code ran")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=False,
        text=True,
        env={**os.environ, "PYTHONPATH": TUI},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "user code ran" in out.stdout
    assert NO_CUDA_WARNING in out.stderr
    run, stage = _lines(path)
    assert "torch" not in run["versions"] and run["cuda_available"] is False
    assert stage["reason"] == "nothing was measured: torch is not installed"


def test_probe_failures_never_break_the_script(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    probe = Probe(blocker / "probe.jsonl")  # its folder cannot be created
    with probe.stage("load"):
        value = 42
    assert value == 42
    assert "cannot write" in capsys.readouterr().err


# ------------------------------------------------------------------ (b) scripted CUDA + NVML


def test_fake_cuda_figures_are_written_exactly(tmp_path, fake_cuda, fake_nvml, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    transformers_stub = types.SimpleNamespace(__version__="5.24.0")
    monkeypatch.setitem(sys.modules, "transformers", transformers_stub)
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.11.0"))
    # Libraries other tests in this process may have imported are recorded too: not here.
    for name in ("peft", "accelerate", "deepspeed", "bitsandbytes", "flash_attn"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    fake_cuda.alloc(0, 1000 * MIB, reserve_extra=24 * MIB)  # weights, before the stage
    fake_cuda.alloc(1, 10 * MIB)
    path = tmp_path / "p.jsonl"
    probe = Probe(path)
    with probe.stage("backward", batch=8, seq_len=4096):
        fake_cuda.alloc(0, 3000 * MIB, reserve_extra=100 * MIB)  # activations: the peak
        fake_cuda.free(0, 2500 * MIB)
        fake_cuda.alloc(1, 7 * MIB)
    assert fake_cuda.resets == [1, 1]
    assert fake_cuda.syncs == [2, 2]

    run, stage = _lines(path)
    assert run["cuda_available"] is True
    assert run["devices"] == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "total_bytes": H100_TOTAL},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "total_bytes": H100_TOTAL},
    ]
    import torch

    assert run["versions"] == {
        "python": run["versions"]["python"],
        "torch": torch.__version__,
        "cuda": "12.8",
        "driver": "570.86.15",
        "transformers": "5.24.0",
        "vllm": "0.11.0",
    }
    assert stage["measured"] is True and stage["reason"] is None and stage["error"] is None
    assert stage["dims"] == {"batch": 8, "seq_len": 4096}
    d0, d1 = stage["devices"]
    assert d0 == {
        "index": 0,
        "max_memory_allocated_bytes": 4000 * MIB,
        "max_memory_reserved_bytes": 4100 * MIB,
        "memory_allocated_bytes": 1500 * MIB,
        "memory_reserved_bytes": 4100 * MIB,
        "nvml_used_bytes": 3 * GIB,
        "nvml_process_used_bytes": 2 * GIB,
        "nvml_total_bytes": H100_TOTAL,
    }
    assert d1["max_memory_allocated_bytes"] == 17 * MIB
    assert d1["nvml_used_bytes"] == 5 * GIB and d1["nvml_process_used_bytes"] is None
    assert any("not in NVML's process list" in w for w in stage["warnings"])
    assert fake_nvml.calls.get("nvmlDeviceGetMemoryInfo_v2") == 2  # the v2 constant was used

    (r,) = read_probe_file(path)
    fig = r.stages[0].device(0)
    assert fig.max_memory_allocated_bytes == 4000 * MIB and fig.nvml_process_used_bytes == 2 * GIB
    assert r.device(1).total_bytes == H100_TOTAL and r.versions["driver"] == "570.86.15"


def test_fake_cuda_devices_argument_and_visible_devices(
    tmp_path, fake_cuda, fake_nvml, monkeypatch
):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # torch's device 0 is NVML's GPU 1
    fake_cuda.alloc(0, 5 * MIB)
    path = tmp_path / "p.jsonl"
    with Probe(path, devices=["cuda:0"]).stage("decode", concurrency=16):
        pass
    run, stage = _lines(path)
    assert [d["index"] for d in run["devices"]] == [0]
    assert fake_cuda.resets == [1, 0]
    (d0,) = stage["devices"]
    assert d0["nvml_used_bytes"] == 5 * GIB  # GPU 1 of the fake NVML


def test_nvml_v1_fallback_and_missing_pynvml(tmp_path, fake_cuda, monkeypatch):
    nvml = make_fake_pynvml([FakeGpu(used=GIB), FakeGpu()], has_v2_constant=False)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    fake_cuda.alloc(0, MIB)
    path = tmp_path / "p.jsonl"
    with Probe(path, devices=[0]).stage("load"):
        pass
    v1_used = _lines(path)[1]["devices"][0]["nvml_used_bytes"]
    assert v1_used == GIB + nvml.gpus[0].reserved  # v1 counts the reserved carve-out as used

    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    path2 = tmp_path / "p2.jsonl"
    with Probe(path2, devices=[0]).stage("load"):
        pass
    run, stage = _lines(path2)
    assert stage["measured"] is True and stage["devices"][0]["nvml_used_bytes"] is None
    assert "driver" not in run["versions"]
    assert any("pynvml" in w for w in stage["warnings"])


def test_load_without_reset_and_nested_stages_keep_peaks(tmp_path, fake_cuda, fake_nvml):
    fake_cuda.alloc(0, 900 * MIB)
    fake_cuda.free(0, 800 * MIB)  # a transient at load time: peak 900, now 100
    path = tmp_path / "p.jsonl"
    probe = Probe(path, devices=[0])
    probe.start("load", reset_peak=False).finish()
    with probe.stage("forward"):
        fake_cuda.alloc(0, 700 * MIB)  # outer peak 800 before the inner reset
        fake_cuda.free(0, 700 * MIB)
        with probe.stage("inner"):
            fake_cuda.alloc(0, 50 * MIB)
    load, inner, forward = (r for r in _lines(path) if r["kind"] == "stage")
    assert load["devices"][0]["max_memory_allocated_bytes"] == 900 * MIB
    assert inner["devices"][0]["max_memory_allocated_bytes"] == 150 * MIB
    assert forward["devices"][0]["max_memory_allocated_bytes"] == 800 * MIB


def test_counter_failure_is_recorded_not_raised(tmp_path, fake_cuda, fake_nvml, capsys):
    fake_cuda.raise_on_read = RuntimeError
    path = tmp_path / "p.jsonl"
    with Probe(path, devices=[0]).stage("forward"):
        pass
    stage = _lines(path)[1]
    assert stage["measured"] is False
    assert "reading torch.cuda's counters failed: RuntimeError: CUDA error" in stage["reason"]
    assert "reading torch.cuda's counters failed" in capsys.readouterr().err


# ------------------------------------------------------------------ (c) exceptions


def test_exception_is_recorded_and_reraised(tmp_path, fake_cuda, fake_nvml):
    import torch

    path = tmp_path / "p.jsonl"
    probe = Probe(path, devices=[0])
    oom_message = "CUDA out of memory. Tried to allocate 20.00 GiB.\nGPU 0 has a total capacity..."
    with pytest.raises(torch.OutOfMemoryError), probe.stage("backward", batch=64, seq_len=8192):
        fake_cuda.alloc(0, 70 * GIB)
        raise torch.OutOfMemoryError(oom_message)
    with pytest.raises(ValueError, match="bad"), probe.stage("export"):
        raise ValueError("bad\nsecond line")
    _, oom, bad = _lines(path)
    assert (
        oom["error"] == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB."
    )
    assert oom["measured"] is True  # the figures up to the failure are kept
    assert oom["devices"][0]["max_memory_allocated_bytes"] == 70 * GIB
    assert bad["error"] == "ValueError: bad"
    assert read_probe_file(path)[0].stages[0].error.startswith("torch.OutOfMemoryError")


def test_open_stage_is_written_at_exit_with_the_uncaught_exception(tmp_path):
    path = tmp_path / "p.jsonl"
    code = textwrap.dedent(
        f"""
        from vramtui.probe import Probe
        probe = Probe({str(path)!r})
        probe.start("backward", batch=4)
        raise MemoryError("out of memory in the backward pass")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=False,
        text=True,
        env={**os.environ, "PYTHONPATH": TUI},
        timeout=60,
    )
    assert out.returncode == 1
    (run,) = read_probe_file(path)
    (st,) = run.stages
    assert st.stage == "backward" and st.dims == {"batch": 4}
    assert st.error == "MemoryError: out of memory in the backward pass"


# ------------------------------------------------------------------ (d) the reader


def _write_two_stages(path: Path) -> None:
    probe = Probe(path)
    with probe.stage("load"):
        pass
    with probe.stage("forward", batch=1):
        pass


def test_truncated_last_line_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "p.jsonl"
    _write_two_stages(path)
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # killed while writing the last record
    (run,) = read_probe_file(path)
    assert [s.stage for s in run.stages] == ["load"]
    assert run.warnings == (
        "line 3 was skipped: a record cut short (the process stopped while writing it)",
    )

    # the next launch appends to the same file: it starts on a new line, both runs read
    with Probe(path).stage("decode"):
        pass
    first, second = read_probe_file(path)
    assert first.warnings and [s.stage for s in first.stages] == ["load"]
    assert [s.stage for s in second.stages] == ["decode"] and not second.warnings


def test_corrupted_line_inside_a_run_is_an_error(tmp_path):
    path = tmp_path / "p.jsonl"
    _write_two_stages(path)
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:30]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ProbeFileError) as e:
        read_probe_file(path)
    msg = str(e.value)
    assert "\n" not in msg and "p.jsonl, line 2:" in msg and "delete that line" in msg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("\n\n", "the file is empty"),
        (
            (
                "INFO 05-02 12:00:01 [api_server.py:1] vLLM API server version 0.8.5\n"
                "INFO 05-02 12:00:02 [config.py:1] This model supports multiple tasks\n"
            ),
            "line 1: not a vramtui probe file (the line is not JSON: a log file?)",
        ),
        ('{"hello": 1}\n', 'line 1: not a vramtui probe record (no "vramtui_probe" key)'),
        (
            '{"vramtui_probe": 2, "kind": "run"}\n',
            "line 1: probe record version 2, this vramtui reads version 1; upgrade vramtui",
        ),
        ('{"vramtui_probe": 1, "kind": "run", "run_id": "a"}\n', "lacks the key 'run_name'"),
        ('{"vramtui_probe": 1, "kind": "sample"}\n', "unknown record kind 'sample'"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path, text, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(ProbeFileError) as e:
        read_probe_file(path)
    msg = str(e.value)
    assert isinstance(e.value, VramtuiError)
    assert "\n" not in msg and str(path) in msg and expected in msg
    assert "; " in msg  # the problem, then the fix


def test_stage_before_its_run_record_is_an_error(tmp_path):
    path = tmp_path / "p.jsonl"
    _write_two_stages(path)
    run, load, forward = path.read_text().splitlines()
    with pytest.raises(ProbeFileError, match=r"line 1: a stage record of run '\w+' before"):
        parse_probe_lines(f"{load}\n{run}\n{forward}\n", "p.jsonl")
    with pytest.raises(ProbeFileError, match="no such file"):
        read_probe_file(tmp_path / "missing.jsonl")


def test_interleaved_runs_of_two_processes_are_grouped(tmp_path):
    path = tmp_path / "p.jsonl"
    a, b = Probe(path, run_name="rank0"), Probe(path, run_name="rank1")
    with a.stage("forward"), b.stage("forward"):
        pass
    with a.stage("backward"):
        pass
    ra, rb = read_probe_file(path)
    assert (ra.run_name, rb.run_name) == ("rank0", "rank1")
    assert [s.stage for s in ra.stages] == ["forward", "backward"]
    assert [s.stage for s in rb.stages] == ["forward"]


# ------------------------------------------------------------------ (e) import cost


def test_import_loads_only_the_standard_library():
    code = textwrap.dedent(
        """
        import json, sys
        before = set(sys.modules)
        import vramtui.probe
        import vramtui.probe.records
        new = sorted(set(sys.modules) - before)
        print(json.dumps(new))
        """
    )
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        check=False,
        text=True,
        env={**os.environ, "PYTHONPATH": TUI},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    new = json.loads(out.stdout)
    third_party = [
        m
        for m in new
        if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "vramtui"
    ]
    assert third_party == []
    ours = sorted(m for m in new if m.startswith("vramtui"))
    assert ours == [
        "vramtui",
        "vramtui.errors",
        "vramtui.guarded_read",  # standard library only, as the check above shows
        "vramtui.probe",
        "vramtui.probe.records",
    ]
    # -X importtime lists every module imported: none of the heavy ones
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in out.stderr.splitlines() if "|" in ln}
    for heavy in ("torch", "rich", "textual", "tomli_w", "psutil", "pynvml", "transformers"):
        assert heavy not in imported


# ------------------------------------------------------------------ (f) the Trainer callback


def _tiny_trainer(tmp_path, callback, *, grad_accum=1):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = transformers.AutoModelForCausalLM.from_config(config)

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n, seq_len):
            self.ids = torch.randint(0, 128, (n, seq_len))

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            ids = self.ids[i]
            return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=3,
        per_device_eval_batch_size=2,
        gradient_accumulation_steps=grad_accum,
        eval_strategy="steps",
        eval_steps=2,
        save_strategy="steps",
        save_steps=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    return transformers.Trainer(
        model=model,
        args=args,
        train_dataset=Tokens(12, 16),
        eval_dataset=Tokens(4, 16),
        callbacks=[callback],
    )


def test_hf_callback_on_a_real_tiny_trainer(tmp_path):
    pytest.importorskip("transformers")
    from vramtui.probe.hf import VramtuiProbeCallback

    path = tmp_path / "probe.jsonl"
    trainer = _tiny_trainer(tmp_path, VramtuiProbeCallback(str(path)), grad_accum=2)
    trainer.train()
    assert (tmp_path / "out" / "checkpoint-2").is_dir()
    (run,) = read_probe_file(path)
    assert [s.stage for s in run.stages] == [
        "load",
        "forward",
        "backward",
        "optimizer_step",
        "validation",
        "export",
    ]
    assert all(s.measured is False and "nothing was measured" in s.reason for s in run.stages)
    by = {s.stage: s for s in run.stages}
    assert by["forward"].dims == {"batch": 3, "seq_len": 16}
    assert by["backward"].dims == {"batch": 3, "seq_len": 16, "grad_accum": 2}
    assert by["validation"].dims == {"batch": 2}
    assert run.versions["transformers"] and run.versions["accelerate"]


def test_hf_callback_with_scripted_cuda(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    import torch

    from vramtui.probe.hf import VramtuiProbeCallback

    fake = FakeCuda(n=1)
    fake.alloc(0, 900 * MIB)
    fake.free(0, 400 * MIB)  # loaded: 500 MiB held, peak 900 MiB since the start
    fake_torch = types.SimpleNamespace(
        __version__=torch.__version__, version=types.SimpleNamespace(cuda="12.8"), cuda=fake
    )
    # Only the probe sees a GPU: the Trainer itself keeps running on the CPU.
    monkeypatch.setattr(probe_mod, "_load_torch", lambda: fake_torch)
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([FakeGpu(used=7 * GIB)]))
    path = tmp_path / "probe.jsonl"
    callback = VramtuiProbeCallback(str(path), every_step=True)
    trainer = _tiny_trainer(tmp_path, callback)
    trainer.train()
    (run,) = read_probe_file(path)
    names = [s.stage for s in run.stages]
    assert names == [
        "load",
        "forward",
        "backward",
        "optimizer_step",
        "forward",
        "backward",
        "optimizer_step",
        "validation",
        "export",
    ]
    assert all(s.measured for s in run.stages)
    load = run.stages[0].device(0)
    assert load.max_memory_allocated_bytes == 900 * MIB  # not reset before "load"
    assert load.memory_allocated_bytes == 500 * MIB
    assert run.stages[1].device(0).max_memory_allocated_bytes == 500 * MIB  # reset at forward
    assert all(s.device(0).nvml_used_bytes == 7 * GIB for s in run.stages)
    assert fake.resets == [len(names) - 1]
    assert run.devices[0].name == "NVIDIA H100 80GB HBM3"


def test_the_run_record_names_the_framework_given_or_loaded(tmp_path, monkeypatch):
    """Given, it is written as is; otherwise the most specific framework module the script has
    imported names it (Axolotl before the transformers it runs on); none: no key at all."""
    given = tmp_path / "given.jsonl"
    with Probe(given, framework="torchtune").stage("load"):
        pass
    assert _lines(given)[0]["framework"] == "torchtune"
    assert read_probe_file(given)[0].framework == "torchtune"

    for name in ("axolotl", "unsloth", "litgpt", "torchtune", "lightning.fabric"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    bare = tmp_path / "bare.jsonl"
    with Probe(bare).stage("load"):
        pass
    assert "framework" not in _lines(bare)[0]
    assert read_probe_file(bare)[0].framework == ""

    monkeypatch.setitem(sys.modules, "axolotl", types.ModuleType("axolotl"))
    monkeypatch.setitem(sys.modules, "litgpt", types.ModuleType("litgpt"))
    detected = tmp_path / "detected.jsonl"
    with Probe(detected).stage("load"):
        pass
    assert _lines(detected)[0]["framework"] == "axolotl"
