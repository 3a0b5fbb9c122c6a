"""`vramtui check`: exit 0 fits, 1 does not, 2 cannot tell (unknown items, a capacity not known
closely enough, no NVML, bad input), one line each; --local through the fake NVML."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pynvml as real_pynvml
import pytest
from fake_pynvml import H100_RESERVED, H100_TOTAL, FakeGpu, make_fake_pynvml

from vramtui.check_guard import visible_indices
from vramtui.cli import main
from vramtui.feed.sample import GpuSample

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_specs"
GIB = 2**30
CHAT = str(SAMPLES / "llama-3.1-8b-chat-8k-x16.toml")  # 32.09 GiB at prefill, 5 % margin
QLORA = str(SAMPLES / "qlora-7b.toml")  # 10.92 GiB at backward, no margin
ZERO3 = str(SAMPLES / "full-finetune-zero3-4gpu.toml")  # NCCL buffers unknown


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_exit_0_when_it_fits(capsys):
    code, out, _ = run(capsys, QLORA, "--gpu", "rtx-4090")
    assert code == 0
    assert out.startswith("fits:") and out.count("\n") == 1
    assert "backward" in out and "RTX 4090" in out and "source:" in out


def test_exit_1_when_it_does_not(capsys):
    code, out, _ = run(capsys, CHAT, "--gpu", "rtx-4090")
    assert code == 1
    assert out.startswith("does not fit:") and "prefill" in out and "5% margin" in out


def test_exit_2_when_an_unknown_item_could_change_the_answer(capsys):
    code, out, _ = run(capsys, ZERO3, "--gpu", "h200")
    assert code == 2
    assert out.startswith("cannot tell:") and "NCCL" in out


def test_a_margin_given_on_the_command_line_can_turn_fits_into_does_not(capsys):
    # 10.92 GiB on a verified 11.76 GiB RTX 3060: fits with no margin, not with 1 GiB kept
    assert run(capsys, QLORA, "--gpu", "rtx-3060")[0] == 0
    code, out, _ = run(capsys, QLORA, "--gpu", "rtx-3060", "--margin", "1GiB")
    assert code == 1 and "a margin of 1.00 GiB" in out


@pytest.mark.parametrize(
    "argv",
    [
        [QLORA, "--gpu", "no-such-card"],
        [QLORA, "--offer", "no-such-offer"],
        [QLORA, "--gpu", "rtx-4090", "--margin", "ten"],
        [str(SAMPLES / "missing.toml"), "--gpu", "rtx-4090"],
    ],
)
def test_exit_2_on_bad_input_with_one_line(argv, capsys):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == "" and err.startswith("vramtui: error:") and err.count("\n") == 1


def test_offer_with_fewer_cards_than_the_placement_does_not_fit(capsys):
    code, out, _ = run(capsys, ZERO3, "--offer", "sample-b-h100-sxm-x1")
    assert code == 1 and "4 GPUs" in out


def test_json(capsys):
    code, out, _ = run(capsys, QLORA, "--gpu", "rtx-4090", "--json")
    data = json.loads(out)
    assert code == 0 and data["exit_code"] == 0 and data["status"] == "fits"
    assert isinstance(data["peak_bytes"], int) and data["stage"] == "backward"


# --- --local through the fake NVML ------------------------------------------------------


def install(monkeypatch, gpus, **kw):
    fake = make_fake_pynvml(gpus, **kw)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def test_local_fits_on_the_free_memory(monkeypatch, capsys):
    # free = 85,520,809,984 - 547,356,672 reserved - 60 GiB used = 20,548,943,872 B = 19.14 GiB
    install(monkeypatch, [FakeGpu(used=60 * GIB)])
    code, out, _ = run(capsys, QLORA, "--local")
    assert H100_TOTAL - H100_RESERVED - 60 * GIB == 20_548_943_872
    assert code == 0
    assert "NVML free on GPU 0" in out and "19.14 GiB" in out and "v2" in out


def test_local_does_not_fit_when_the_card_is_busy(monkeypatch, capsys):
    # free = 85,520,809,984 - 547,356,672 - 70 GiB = 9,811,525,632 B = 9.14 GiB < 10.92 GiB
    install(monkeypatch, [FakeGpu(used=70 * GIB)])
    code, out, _ = run(capsys, QLORA, "--local")
    assert code == 1 and "9.14 GiB" in out


def test_local_margin_share_is_of_the_card_total(monkeypatch, capsys):
    # 19.14 GiB free less 10 % of the 79.65 GiB total (7.97 GiB) = 11.18 GiB >= 10.92: fits;
    # less 12 % (9.56 GiB) = 9.58 GiB < 10.92: does not
    install(monkeypatch, [FakeGpu(used=60 * GIB)])
    assert run(capsys, QLORA, "--local", "--margin", "10%")[0] == 0
    assert run(capsys, QLORA, "--local", "--margin", "12%")[0] == 1


def test_local_uses_the_gpus_cuda_would_show(monkeypatch, capsys):
    install(monkeypatch, [FakeGpu(used=10 * GIB), FakeGpu(used=70 * GIB, uuid="GPU-busy")])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    code, out, _ = run(capsys, QLORA, "--local")
    assert code == 1 and "GPU 1" in out and "CUDA_VISIBLE_DEVICES=1" in out


def test_local_without_nvml_cannot_tell(monkeypatch, capsys):
    install(monkeypatch, [FakeGpu()], init_error=real_pynvml.NVMLError_LibraryNotFound)
    code, out, _ = run(capsys, QLORA, "--local")
    assert code == 2 and out.startswith("cannot tell:") and "NVML not available" in out


def test_local_without_memory_figures_cannot_tell(monkeypatch, capsys):
    refused = real_pynvml.NVMLError_NoPermission
    gpu = FakeGpu(
        raises={"nvmlDeviceGetMemoryInfo_v2": refused, "nvmlDeviceGetMemoryInfo": refused}
    )
    install(monkeypatch, [gpu])
    code, out, _ = run(capsys, QLORA, "--local")
    assert code == 2 and "no memory figures" in out


def test_visible_indices_by_index_and_uuid():
    samples = [GpuSample(index=0, uuid="GPU-aaa"), GpuSample(index=1, uuid="GPU-bbb")]
    assert [s.index for s in visible_indices(samples, None)[0]] == [0, 1]
    assert [s.index for s in visible_indices(samples, "1,0")[0]] == [1, 0]
    assert [s.index for s in visible_indices(samples, "GPU-bbb")[0]] == [1]
    # CUDA stops at the first entry it cannot match
    assert [s.index for s in visible_indices(samples, "0,7,1")[0]] == [0]
