"""The failed card: named by the user (--failed-gpu) or by the log itself, it bounds what
triage proposes; when nothing names it, a proposal to rent says it holds only if the failed
card was smaller. On every real report of the corpus, no proposal has less memory than the
card that failed, wherever that card is known."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from vramtui.catalog import load_catalog
from vramtui.cli import main
from vramtui.models.registry import find_model
from vramtui.spec import load_spec
from vramtui.triage.advice import advise
from vramtui.triage.failed_card import failed_card_capacity, gpus_named_in
from vramtui.triage.reader import read_log

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "tests" / "triage_logs"
CHAT = REPO / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml"
FT = REPO / "sample_specs" / "full-finetune-zero3-4gpu.toml"
CORPUS = REPO / "tests" / "triage_corpus" / "reports"
GIB = 2**30
A100_80_CUDA_TOTAL = round(79.14 * GIB)  # catalog/gpus/a100-80gb-sxm.toml: cuda_total 79.14 GiB
NO_FIGURES = (LOGS / "cuda_error_no_figures_load.log").read_text()

NVIDIA_SMI = """\
| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |
|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
| N/A   33C    P0              62W / 400W |      4MiB / 81920MiB |      0%      Default |
"""


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(use_user_config=False)


def _ids(gpus):
    return [g.id for g in gpus]


def test_the_log_names_a_card_by_its_nvml_name(catalog):
    assert _ids(gpus_named_in(NVIDIA_SMI, catalog)) == ["a100-80gb-sxm"]
    # "NVIDIA A10" is a prefix of "NVIDIA A100" and "NVIDIA A10G": neither names the A10.
    assert _ids(gpus_named_in("GPU 0: NVIDIA A100-PCIE-40GB", catalog)) == ["a100-40gb-pcie"]
    assert _ids(gpus_named_in("device: NVIDIA A10G (24 GB)", catalog)) == ["a10g"]
    assert _ids(gpus_named_in("Using NVIDIA A10.", catalog)) == ["a10"]
    # Without the vendor word, a specific name still counts; a bare "A10" or "H200" does not.
    assert _ids(gpus_named_in("on a GeForce RTX 3090 with 24GB", catalog)) == ["rtx-3090"]
    assert gpus_named_in("we tried an A10 and an H200", catalog) == []
    two = gpus_named_in("Tesla T4 ... later NVIDIA L4", catalog)
    assert _ids(two) == ["t4", "l4"]


def test_capacity_comes_from_the_error_first_then_the_user_then_the_log(catalog):
    spec = load_spec(CHAT)
    reading = read_log(NO_FIGURES)
    assert "total_capacity_bytes" not in reading.primary.figures
    assert failed_card_capacity(reading, spec, catalog) == (None, "")
    cap, source = failed_card_capacity(reading, spec, catalog, log_text=NVIDIA_SMI + NO_FIGURES)
    assert cap == A100_80_CUDA_TOTAL and "log names" in source and "A100" in source
    # Two different cards in the log: ambiguous, so none is taken from it.
    both = NVIDIA_SMI + "|   1  Tesla T4   Off |\n" + NO_FIGURES
    assert failed_card_capacity(reading, spec, catalog, log_text=both) == (None, "")
    t4 = catalog.gpus["t4"]
    cap, source = failed_card_capacity(reading, spec, catalog, failed_gpu=t4, log_text=both)
    assert cap == round(14.56 * GIB) and "you named" in source
    # The error's own figure wins over everything.
    printed = read_log(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 23.55 GiB of which 1.00 GiB is free."
    )
    cap, source = failed_card_capacity(printed, spec, catalog, failed_gpu=t4)
    assert cap == round(23.55 * GIB) and "error printed" in source


def _rent(data):
    return [r for r in data["recommendations"] if r["variable"] == "capacity"]


def test_cli_failed_gpu_keeps_smaller_cards_out(tmp_path, capsys, catalog):
    log = tmp_path / "oom.log"
    log.write_text(NO_FIGURES)
    assert main(["triage", str(log), "--spec", str(CHAT), "--json"]) == 0
    unknown = _rent(json.loads(capsys.readouterr().out))
    assert unknown and "failed card is unknown" in unknown[0]["note"]
    rc = main(["triage", str(log), "--spec", str(CHAT), "--failed-gpu", "a100-80gb-sxm", "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["failed_card_capacity_bytes"] == A100_80_CUDA_TOTAL
    assert _rent(data), "a card at least as large is proposed"
    for r in _rent(data):
        gpu = catalog.gpu_for(catalog.offers[r["offer"]])
        assert gpu.usable().bytes >= 0.98 * A100_80_CUDA_TOTAL, gpu.id
    # The cheapest card that holds the job when the failed card is unknown is a smaller one.
    first = catalog.gpu_for(catalog.offers[unknown[0]["offer"]])
    assert first.usable().bytes < 0.98 * A100_80_CUDA_TOTAL


def test_cli_failed_gpu_that_is_not_in_the_catalogue_is_one_line(tmp_path, capsys):
    log = tmp_path / "oom.log"
    log.write_text(NO_FIGURES)
    assert main(["triage", str(log), "--spec", str(CHAT), "--failed-gpu", "rtx-9999"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rtx-9999" in err[0] and "vramtui gpus" in err[0]
    assert main(["triage", str(log), "--failed-gpu", "t4"]) == 2
    assert "--spec" in capsys.readouterr().err


def _corpus_ooms():
    for path in sorted(CORPUS.glob("*.toml")):
        r = tomllib.loads(path.read_text(encoding="utf-8"))
        if r["is_oom"]:
            yield path.stem, r["excerpt"]["text"]


def test_no_reply_to_a_real_report_proposes_a_smaller_card(catalog):
    """Every OOM of the corpus, advised against an inference and a training spec."""
    arch_chat = find_model("meta-llama/Llama-3.1-8B-Instruct")
    specs = [(load_spec(CHAT), arch_chat), (load_spec(FT), None)]
    ft_spec = specs[1][0]
    specs[1] = (ft_spec, find_model(ft_spec.model.id))
    known = unknown = proposals = 0
    for stem, text in _corpus_ooms():
        reading = read_log(text)
        if not reading.is_oom:
            continue
        for spec, arch in specs:
            advice = advise(reading, spec, arch, catalog=catalog, log_text=text)
            rents = [r for r in advice.recommendations if r.variable == "capacity"]
            proposals += len(rents)
            if advice.capacity_bytes:
                known += 1
                for r in rents:
                    gpu = catalog.gpu_for(catalog.offers[r.offer_id])
                    assert gpu.usable().bytes >= 0.98 * advice.capacity_bytes, (stem, gpu.id)
            else:
                unknown += 1
                for r in rents:
                    assert "failed card is unknown" in r.note, stem
    print(f"known {known}, unknown {unknown}, proposals {proposals}")
    assert known > 200 and proposals > 100, (known, unknown, proposals)
