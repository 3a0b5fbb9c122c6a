"""Triage reader: every fixture log gives its figures in bytes (worked out by hand below), its
framework, GPU and phase; wrapped, coloured, CRLF and multi-error pastes read the same; text
that is not an out-of-memory error says so in one line; nothing a user can paste raises."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramtui.triage import (
    FIGURE_KEYS,
    PHASES,
    OomEvent,
    PhaseVerdict,
    TriageReading,
    localise_phase,
    read_log,
)

LOGS = Path(__file__).parent / "triage_logs"
KiB, MiB, GiB = 2**10, 2**20, 2**30


def read(name: str) -> TriageReading:
    # bytes -> str keeps CRLF and ANSI exactly as the file has them
    return read_log((LOGS / name).read_bytes().decode("utf-8"))


# Hand arithmetic. n.nn GiB = n.nn x 1,073,741,824; n.nn MiB = n.nn x 1,048,576; rounded to
# the nearest byte (a two-decimal figure x 2^30 / 100 = k x 10,737,418.24 never ends in .5).
#   20.00 MiB  = 20 x 1,048,576                   = 20,971,520
#   23.65 GiB  = 2365 x 10,737,418.24             = 25,393,994,137.6   -> 25,393,994,138
#   22.78 GiB  = 2278 x 10,737,418.24             = 24,459,838,750.72  -> 24,459,838,751
#    3.06 MiB  = 306 x 10,485.76                  = 3,208,642.56       -> 3,208,643
#   22.85 GiB  = 2285 x 10,737,418.24             = 24,535,000,678.4   -> 24,535,000,678
OLD_FORM = {
    "tried_to_allocate_bytes": 20_971_520,
    "total_capacity_bytes": 25_393_994_138,
    "already_allocated_bytes": 24_459_838_751,
    "free_bytes": 3_208_643,
    "reserved_total_bytes": 24_535_000_678,
}
#    1.96 GiB  = 196 x 10,737,418.24  = 2,104,533,975.04  -> 2,104,533,975
#   79.25 GiB  = 79.25 x 2^30         = 85,094,039,552 (exact)
#    1.16 GiB  = 116 x 10,737,418.24  = 1,245,540,515.84  -> 1,245,540,516
#   74.36 GiB  = 7436 x 10,737,418.24 = 79,843,442,032.64 -> 79,843,442,033
#   71.69 GiB  = 7169 x 10,737,418.24 = 76,976,551,362.56 -> 76,976,551,363
#    2.67 GiB  = 267 x 10,737,418.24  = 2,866,890,670.08  -> 2,866,890,670
#   other processes: 3.20 GiB + 512.00 MiB = 3,435,973,836.8 + 536,870,912 -> 3,972,844,749
CURRENT_FORM = {
    "tried_to_allocate_bytes": 2_104_533_975,
    "total_capacity_bytes": 85_094_039_552,
    "free_bytes": 1_245_540_516,
    "process_in_use_bytes": 79_843_442_033,
    "allocated_by_pytorch_bytes": 76_976_551_363,
    "reserved_unallocated_bytes": 2_866_890_670,
    "other_processes_total_bytes": round(3.20 * GiB) + 512 * MiB,
}
assert CURRENT_FORM["other_processes_total_bytes"] == 3_972_844_749

# name -> (framework, kind of the primary, gpu, phase, figures of the primary, tokens)
CASES = {
    "pytorch_cuda_old_trainer_forward.log": (
        "pytorch",
        "allocation",
        0,
        "train_forward",
        OLD_FORM,
        {},
    ),
    "wrapped_hard_newlines.log": ("pytorch", "allocation", 0, "train_forward", OLD_FORM, {}),
    "pytorch_cuda_current_generate.log": ("pytorch", "allocation", 0, "generate", CURRENT_FORM, {}),
    "wrapped_terminal_80col.log": ("pytorch", "allocation", 0, "generate", CURRENT_FORM, {}),
    # 512.00 MiB = 536,870,912; 39.39 GiB = 3939 x 10,737,418.24 = 42,294,690,447.36;
    # 3.50 GiB = 3,758,096,384; 35.12 GiB = 3512 x 10,737,418.24 = 37,709,812,858.88;
    # 4.00 GiB = 4,294,967,296; 3.52 GiB = 352 x 10,737,418.24 = 3,779,571,220.48
    "pytorch_fraction_old_backward.log": (
        "pytorch",
        "allocation",
        1,
        "backward",
        {
            "tried_to_allocate_bytes": 536_870_912,
            "total_capacity_bytes": 42_294_690_447,
            "already_allocated_bytes": 3_758_096_384,
            "free_bytes": 37_709_812_859,
            "allowed_bytes": 4_294_967_296,
            "reserved_total_bytes": 3_779_571_220,
        },
        {},
    ),
    # 64.00 MiB = 67,108,864; 39.49 GiB = 3949 x 10,737,418.24 = 42,402,064,629.76;
    # 35.21 GiB = 3521 x 10,737,418.24 = 37,806,449,623.04; 4.27 GiB = 427 x 10,737,418.24 =
    # 4,584,877,588.48; 3.95 GiB = 395 x 10,737,418.24 = 4,241,280,204.8; 3.90 GiB = 390 x
    # 10,737,418.24 = 4,187,593,113.6; 1.25 MiB = 1,310,720
    "pytorch_fraction_current_load.log": (
        "pytorch",
        "allocation",
        0,
        "load",
        {
            "tried_to_allocate_bytes": 67_108_864,
            "total_capacity_bytes": 42_402_064_630,
            "free_bytes": 37_806_449_623,
            "process_in_use_bytes": 4_584_877_588,
            "allowed_bytes": 4_241_280_205,
            "allocated_by_pytorch_bytes": 4_187_593_114,
            "reserved_unallocated_bytes": 1_310_720,
        },
        {},
    ),
    # 256.00 MiB = 268,435,456; 23.55 GiB = 2355 x 10,737,418.24 = 25,286,619,955.2;
    # 201.44 MiB = 20144 x 10,485.76 = 211,225,149.44; 23.34 GiB = 2334 x 10,737,418.24 =
    # 25,061,134,172.16; 22.91 GiB = 2291 x 10,737,418.24 = 24,599,425,187.84;
    # 40.12 MiB = 4012 x 10,485.76 = 42,068,869.12
    "adamw_init_group_from_training_step.log": (
        "pytorch",
        "allocation",
        0,
        "optimizer_step",
        {
            "tried_to_allocate_bytes": 268_435_456,
            "total_capacity_bytes": 25_286_619_955,
            "free_bytes": 211_225_149,
            "process_in_use_bytes": 25_061_134_172,
            "allocated_by_pytorch_bytes": 24_599_425_188,
            "reserved_unallocated_bytes": 42_068_869,
        },
        {},
    ),
    "cuda_error_no_figures_load.log": ("cuda", "allocation", None, "load", {}, {}),
    "cublas_alloc_failed_forward.log": ("cublas", "allocation", None, "train_forward", {}, {}),
    # 1.50 GiB = 1,610,612,736; 191.98 GiB = 19198 x 10,737,418.24 = 206,136,955,371.52;
    # 189.23 GiB = 18923 x 10,737,418.24 = 203,184,165,355.52; 1.02 GiB = 102 x 10,737,418.24
    # = 1,095,216,660.48; 190.10 GiB = 19010 x 10,737,418.24 = 204,118,320,742.4
    "rocm_hip_old_generate.log": (
        "rocm",
        "allocation",
        0,
        "generate",
        {
            "tried_to_allocate_bytes": 1_610_612_736,
            "total_capacity_bytes": 206_136_955_372,
            "already_allocated_bytes": 203_184_165_356,
            "free_bytes": 1_095_216_660,
            "reserved_total_bytes": 204_118_320_742,
        },
        {},
    ),
    # 3.00 GiB = 3,221,225,472; 2.47 GiB = 247 x 10,737,418.24 = 2,652,142,305.28;
    # 185.31 GiB = 18531 x 10,737,418.24 = 198,975,097,405.44; 3.15 GiB = 315 x
    # 10,737,418.24 = 3,382,286,745.6
    "rocm_hip_current_load.log": (
        "rocm",
        "allocation",
        2,
        "load",
        {
            "tried_to_allocate_bytes": 3_221_225_472,
            "total_capacity_bytes": 206_136_955_372,
            "free_bytes": 2_652_142_305,
            "allocated_by_pytorch_bytes": 198_975_097_405,
            "reserved_unallocated_bytes": 3_382_286_746,
        },
        {},
    ),
    # 2.00 GiB = 2,147,483,648; 15.11 GiB = 1511 x 10,737,418.24 = 16,224,238,960.64;
    # 12.84 GiB = 1284 x 10,737,418.24 = 13,786,845,020.16; 544.00 MiB = 570,425,344
    "xpu_current_generate.log": (
        "xpu",
        "allocation",
        0,
        "generate",
        {
            "tried_to_allocate_bytes": 2_147_483_648,
            "total_capacity_bytes": 16_224_238_961,
            "free_bytes": 1_095_216_660,
            "allocated_by_pytorch_bytes": 13_786_845_020,
            "reserved_unallocated_bytes": 570_425_344,
        },
        {},
    ),
    "xpu_ur_out_of_device_memory.log": ("xpu", "allocation", None, "generate", {}, {}),
    # MPS's "GB"/"MB" are powers of two (its format_size divides by 1024^3 / 1024^2):
    # 9.01 GB = 901 x 10,737,418.24 = 9,674,413,834.24; 1.23 GB = 123 x 10,737,418.24 =
    # 1,320,702,443.52; 18.13 GB = 1813 x 10,737,418.24 = 19,466,939,269.12; 256.00 MB =
    # 268,435,456
    "mps_diffusers.log": (
        "mps",
        "allocation",
        None,
        "generate",
        {
            "allocated_by_pytorch_bytes": 9_674_413_834,
            "non_torch_bytes": 1_320_702_444,
            "allowed_bytes": 19_466_939_269,
            "tried_to_allocate_bytes": 268_435_456,
        },
        {},
    ),
    # An inference engine's start-up (KV-cache sizing, profiling run, warm-up, llama.cpp's
    # context) is "load": no request has been served yet (the corpus labels' convention).
    "vllm_v0_no_cache_blocks.log": ("vllm", "kv_cache", None, "load", {}, {}),
    "vllm_v0_max_seq_len.log": (
        "vllm",
        "kv_cache",
        None,
        "load",
        {},
        {"max_model_len": 131072, "kv_cache_tokens": 54000},
    ),
    # 16.00 GiB = 17,179,869,184; 9.50 GiB = 10,200,547,328
    "vllm_v1_kv_needed.log": (
        "vllm",
        "kv_cache",
        None,
        "load",
        {
            "tried_to_allocate_bytes": 17_179_869_184,
            "kv_cache_bytes": 10_200_547_328,
        },
        {"max_model_len": 131072, "estimated_max_model_len": 77824},
    ),
    # 4.64 GiB = 464 x 10,737,418.24 = 4,982,162,063.36; 44.34 GiB = 4434 x 10,737,418.24 =
    # 47,609,712,476.16; 3.01 GiB = 301 x 10,737,418.24 = 3,231,962,890.24; 41.32 GiB = 4132
    # x 10,737,418.24 = 44,367,012,167.68; 40.11 GiB = 4011 x 10,737,418.24 =
    # 43,067,784,560.64; 692.05 MiB = 69205 x 10,485.76 = 725,667,020.8
    "vllm_v0_profile_run_oom.log": (
        "vllm",
        "allocation",
        0,
        "load",
        {
            "tried_to_allocate_bytes": 4_982_162_063,
            "total_capacity_bytes": 47_609_712_476,
            "free_bytes": 3_231_962_890,
            # "Process 3309 has 41.32 GiB" >= the 40.11 GiB PyTorch allocated: the job itself
            "process_in_use_bytes": 44_367_012_168,
            "allocated_by_pytorch_bytes": 43_067_784_561,
            "reserved_unallocated_bytes": 725_667_021,
        },
        {},
    ),
    # 1.95 GiB = 195 x 10,737,418.24 = 2,093,796,556.8; 23.68 GiB = 2368 x 10,737,418.24 =
    # 25,426,206,392.32; 1.01 GiB = 101 x 10,737,418.24 = 1,084,479,242.24; 22.66 GiB = 2266
    # x 10,737,418.24 = 24,330,989,731.84; 21.90 GiB = 2190 x 10,737,418.24 =
    # 23,514,945,945.6; 452.31 MiB = 45231 x 10,485.76 = 474,281,410.56
    "tgi_warmup_prefill.log": (
        "tgi",
        "allocation",
        0,
        "load",
        {
            "tried_to_allocate_bytes": 2_093_796_557,
            "total_capacity_bytes": 25_426_206_392,
            "free_bytes": 1_084_479_242,
            # "Process 4242 has 22.66 GiB" with 21.90 GiB allocated by PyTorch: the job itself
            # (in a container its PID differs), not another process
            "process_in_use_bytes": 24_330_989_732,
            "allocated_by_pytorch_bytes": 23_514_945_946,
            "reserved_unallocated_bytes": 474_281_411,
        },
        {},
    ),
    "accelerate_offload_8bit.log": ("accelerate", "offload", None, "load", {}, {}),
    # 5.42 GiB = 542 x 10,737,418.24 = 5,819,680,686.08; 39.39 GiB = 42,294,690,447.36;
    # 3.86 GiB = 386 x 10,737,418.24 = 4,144,643,440.64; 35.52 GiB = 3552 x 10,737,418.24 =
    # 38,139,309,588.48; 34.88 GiB = 3488 x 10,737,418.24 = 37,452,114,821.12;
    # 126.00 MiB = 132,120,576
    "deepspeed_zero3_fp32_partitions.log": (
        "deepspeed",
        "allocation",
        0,
        "optimizer_step",
        {
            "tried_to_allocate_bytes": 5_819_680_686,
            "total_capacity_bytes": 42_294_690_447,
            "free_bytes": 4_144_643_441,
            "process_in_use_bytes": 38_139_309_588,
            "allocated_by_pytorch_bytes": 37_452_114_821,
            "reserved_unallocated_bytes": 132_120_576,
        },
        {},
    ),
    # 4096.00 MiB = 4,294,967,296 (the following line's "buffer of size 4294967296" agrees)
    "llamacpp_model_load.log": (
        "llama.cpp",
        "allocation",
        0,
        "load",
        {"tried_to_allocate_bytes": 4_294_967_296},
        {},
    ),
    # 16384.00 MiB = 17,179,869,184
    "llamacpp_kv_cache.log": (
        "llama.cpp",
        "kv_cache",
        1,
        "load",
        {"tried_to_allocate_bytes": 17_179_869_184},
        {},
    ),
    "llamacpp_compute_buffers.log": (
        "llama.cpp",
        "allocation",
        0,
        "load",
        {"tried_to_allocate_bytes": 1_234_567_890},
        {},
    ),
    # 1536.00 MiB = 1,610,612,736
    "ollama_runner.log": (
        "ollama",
        "allocation",
        0,
        "load",
        {"tried_to_allocate_bytes": 1_610_612_736},
        {},
    ),
    # 768.00 MiB = 805,306,368; 14.74 GiB = 1474 x 10,737,418.24 = 15,826,954,485.76;
    # 437.12 MiB = 43712 x 10,485.76 = 458,353,541.12; 14.31 GiB = 1431 x 10,737,418.24 =
    # 15,365,245,501.44; 13.92 GiB = 1392 x 10,737,418.24 = 14,946,486,190.08;
    # 275.44 MiB = 27544 x 10,485.76 = 288,819,773.44
    "jupyter_generate.log": (
        "pytorch",
        "allocation",
        0,
        "generate",
        {
            "tried_to_allocate_bytes": 805_306_368,
            "total_capacity_bytes": 15_826_954_486,
            "free_bytes": 458_353_541,
            "process_in_use_bytes": 15_365_245_501,
            "allocated_by_pytorch_bytes": 14_946_486_190,
            "reserved_unallocated_bytes": 288_819_773,
        },
        {},
    ),
    # 7.83 GiB = 783 x 10,737,418.24 = 8,407,398,481.92; 47.53 GiB = 4753 x 10,737,418.24 =
    # 51,034,948,894.72; 5.12 GiB = 512 x 10,737,418.24 = 5,497,558,138.88; 42.40 GiB = 4240
    # x 10,737,418.24 = 45,526,653,337.6; 36.75 GiB = 39,460,012,032 (exact); 5.33 GiB = 533
    # x 10,737,418.24 = 5,723,043,921.92
    "trainer_evaluate.log": (
        "pytorch",
        "allocation",
        0,
        "other",
        {
            "tried_to_allocate_bytes": 8_407_398_482,
            "total_capacity_bytes": 51_034_948_895,
            "free_bytes": 5_497_558_139,
            "process_in_use_bytes": 45_526_653_338,
            "allocated_by_pytorch_bytes": 39_460_012_032,
            "reserved_unallocated_bytes": 5_723_043_922,
        },
        {},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_facts(name):
    framework, kind, gpu, phase, figures, tokens = CASES[name]
    r = read(name)
    assert r.is_oom and r.not_oom_reason == ""
    ev = r.primary
    assert ev is not None
    assert (r.framework, ev.framework, ev.kind, ev.gpu_index) == (framework, framework, kind, gpu)
    assert ev.figures == figures
    assert set(ev.as_written) == set(ev.figures)
    for key, value in tokens.items():
        assert ev.tokens[key] == value
    assert r.phase.phase == phase, r.phase
    assert r.phase.phase in PHASES
    if phase != "unknown":
        assert r.phase.line_no is not None and r.phase.evidence and r.phase.reason
        assert "\n" not in r.phase.reason


def test_every_fixture_is_covered():
    names = {p.name for p in LOGS.glob("*.log")}
    others = {
        "ansi_crlf_backward.log",
        "several_errors.log",
        "not_oom_valueerror.log",
        "deepspeed_overflow_not_oom.log",
        "vllm_v1_startup_only.log",
        "torchrun_backward_two_ranks.log",
        # prefixed and wrapped pastes: tests/test_triage_log_prefixes.py
        "srun_label_two_tasks_backward.log",
        "vllm_worker_prefix_load.log",
        "pylogging_every_line_trainer_forward.log",
        "comfyui_error_report_ksampler.log",
        "markdown_quoted_fenced_generate.log",
    }
    assert names == set(CASES) | others


def test_as_written_keeps_the_text():
    ev = read("pytorch_cuda_old_trainer_forward.log").primary
    assert ev.as_written["tried_to_allocate_bytes"] == "20.00 MiB"
    assert ev.as_written["total_capacity_bytes"] == "23.65 GiB"
    ev = read("pytorch_cuda_current_generate.log").primary
    assert ev.as_written["other_processes_total_bytes"] == "3.20 GiB + 512.00 MiB"
    # each process its own figure: 3.20 x 2^30 = 3,435,973,836.8 -> ...837; 512 x 2^20
    assert ev.figure_lists["other_processes_bytes"] == (3_435_973_837, 536_870_912)
    assert ev.lists_as_written["other_processes_bytes"] == ("3.20 GiB", "512.00 MiB")
    ev = read("mps_diffusers.log").primary
    assert ev.as_written["allocated_by_pytorch_bytes"] == "9.01 GB"
    ev = read("llamacpp_compute_buffers.log").primary
    assert ev.as_written == {"tried_to_allocate_bytes": "1234567890"}
    assert all(k in FIGURE_KEYS for k in ev.figures)


def test_message_is_one_line_from_the_exception_name():
    r = read("pytorch_cuda_old_trainer_forward.log")
    assert r.primary.line_no == 29
    assert r.primary.message.startswith("torch.cuda.OutOfMemoryError: CUDA out of memory.")
    assert r.primary.message.endswith("PYTORCH_CUDA_ALLOC_CONF")


def test_terminal_wrap_at_80_columns_cut_mid_number_is_rejoined():
    text = (LOGS / "wrapped_terminal_80col.log").read_text()
    assert "Process 12345 has 3.2\n0 GiB" in text  # the cut really splits a number
    r = read_log(text)
    flat = read("pytorch_cuda_current_generate.log")
    assert r.primary.message == flat.primary.message
    assert r.primary.line_no == 26 and len(r.events) == 1


def test_hard_newlines_at_word_boundaries_are_rejoined():
    r = read("wrapped_hard_newlines.log")
    assert "\n" not in r.primary.message
    assert r.primary.message == read("pytorch_cuda_old_trainer_forward.log").primary.message


def test_ansi_and_crlf():
    raw = (LOGS / "ansi_crlf_backward.log").read_bytes().decode()
    assert "\x1b[" in raw and "\r\n" in raw
    r = read_log(raw)
    plain = read("pytorch_fraction_old_backward.log")
    assert r.primary.figures == plain.primary.figures
    assert r.primary.message == plain.primary.message and "\x1b" not in r.primary.message
    assert (r.phase.phase, r.phase.line_no) == (plain.phase.phase, plain.phase.line_no)
    assert "\r" not in r.phase.evidence and "\x1b" not in r.phase.evidence
    # CRLF alone, on another fixture
    crlf = read_log(
        (LOGS / "adamw_init_group_from_training_step.log").read_text().replace("\n", "\r\n")
    )
    assert crlf.phase.phase == "optimizer_step"
    assert crlf.primary.figures == CASES["adamw_init_group_from_training_step.log"][4]


def test_adamw_state_init_reached_from_training_step_is_the_optimizer_step():
    r = read("adamw_init_group_from_training_step.log")
    assert r.phase.phase == "optimizer_step"
    assert "_init_group" in r.phase.evidence and "adamw.py" in r.phase.evidence
    assert "_init_group" in r.phase.reason


def test_several_errors_primary_is_the_first_failure():
    r = read("several_errors.log")
    assert [(e.framework, e.kind, e.line_no) for e in r.events] == [
        ("pytorch", "allocation", 7),
        ("cuda", "allocation", 14),
        ("vllm", "kv_cache", 18),
    ]
    # three runs, three failures of their own (each after its own command): none repeats another
    assert [e.echo_of for e in r.events] == [None, None, None]
    assert r.primary is r.events[0]
    # the first run died in train_epoch's "outputs = model(**batch)" (line 5's frame)
    assert (r.phase.phase, r.phase.line_no) == ("train_forward", 5)
    assert r.events[2].tokens == {"max_model_len": 32768, "kv_cache_tokens": 21344}
    # 2.00 GiB, 23.69 GiB = 2369 x 10,737,418.24 = 25,436,943,810.56
    assert r.events[0].figures["tried_to_allocate_bytes"] == 2 * GiB
    assert r.events[0].figures["total_capacity_bytes"] == 25_436_943_811


def test_interleaved_ranks_keep_their_own_frames():
    r = read("torchrun_backward_two_ranks.log")
    assert [(e.gpu_index, e.line_no) for e in r.events] == [(1, 23), (0, 24)]
    assert r.events[1].echo_of is None  # rank 0 failed too: not a repeat of rank 1's error
    # the primary is rank 1's (the first): it failed in a forward, rank 0 in the autograd
    # engine; frames of the two ranks must not mix, so rank 0's backward frames are not used
    assert r.primary.gpu_index == 1 and r.phase.phase != "backward"
    assert "_engine_run_backward" not in r.phase.evidence
    rank0 = localise_phase((LOGS / "torchrun_backward_two_ranks.log").read_text().split("\n"), 24)
    assert rank0.phase == "backward" and "_engine_run_backward" in rank0.evidence


def test_vllm_startup_lines_carry_figures():
    r = read("vllm_v0_no_cache_blocks.log")
    startup = [e for e in r.events if e.kind == "startup"]
    assert len(startup) == 1 and startup[0].framework == "vllm"
    f = startup[0].figures
    # vLLM's "14.9888 GB" is GiB (it divides by 2^30): 14.9888 x 2^30 = 16,094,101,451.57
    assert f["model_weights_bytes"] == 16_094_101_452
    assert f["total_capacity_bytes"] == 25_383_256_719  # 23.64 GiB = 2364 x 10,737,418.24
    assert f["allowed_bytes"] == 17_770_427_187  # 16.55 GiB = 1655 x 10,737,418.24
    assert f["non_torch_bytes"] == 118_111_601  # 0.11 GiB = 11 x 10,737,418.24
    assert f["activation_peak_bytes"] == 2_351_494_595  # 2.19 GiB = 219 x 10,737,418.24
    assert "kv_cache_bytes" not in f  # "-0.74GiB": a negative budget is not a size
    r = read("vllm_v0_max_seq_len.log")
    s = r.events[0]
    assert s.kind == "startup"
    assert s.tokens == {"gpu_blocks": 3375, "cpu_blocks": 2048, "max_model_len": 131072}
    assert s.figures["kv_cache_bytes"] == 4_423_816_315  # 4.12 GiB = 412 x 10,737,418.24


def test_vllm_startup_only_is_not_an_oom_but_keeps_its_figures():
    r = read("vllm_v1_startup_only.log")
    assert not r.is_oom and "start-up" in r.not_oom_reason
    (ev,) = r.events
    assert ev.kind == "startup" and ev.line_no == 1
    assert ev.figures == {
        "kv_cache_bytes": 55_544_664_556,  # 51.73 x 2^30 = 55,544,664,555.52
        "model_weights_bytes": 16_095_389_942,
    }  # 14.99 x 2^30 = 16,095,389,941.76
    assert ev.tokens == {"kv_cache_tokens": 423_760, "max_model_len": 131_072}


def test_tgi_warmup_echoes_are_one_event_with_tokens():
    r = read("tgi_warmup_prefill.log")
    kinds = [(e.framework, e.kind) for e in r.events]
    assert kinds == [("tgi", "allocation"), ("tgi", "kv_cache")]
    assert r.events[1].tokens == {
        "prefill_tokens": 4096,
        "max_input_length": 4095,
        "max_prefill_tokens": 4096,
        "max_total_tokens": 4096,
    }
    total = read_log(
        "RuntimeError: Not enough memory to handle 16000 total tokens with 4096 "
        "prefill tokens. You need to decrease `--max-batch-total-tokens` or "
        "`--max-batch-prefill-tokens`"
    )
    assert total.primary.tokens == {"total_tokens": 16000, "prefill_tokens": 4096}
    assert total.primary.framework == "tgi" and total.phase.phase == "load"


def test_ollama_startup_line_and_runner_error():
    r = read("ollama_runner.log")
    startup = r.events[0]
    assert (startup.framework, startup.kind) == ("ollama", "startup")
    assert startup.figures["free_bytes"] == round(23.2 * GiB)
    assert startup.figures["kv_cache_bytes"] == round(2.5 * GiB)
    assert startup.tokens["layers_offload"] == 38
    assert len(r.events) == 2  # the ggml line and the two "runner terminated" lines: one event
    assert "llama runner process has terminated" in r.primary.message
    only = read_log("Error: llama runner process has terminated: cudaMalloc failed: out of memory")
    assert (only.primary.framework, only.primary.kind) == ("ollama", "allocation")
    assert not read_log("Error: llama runner process has terminated: exit status 2").is_oom
    # ollama's host-RAM check before loading: system memory, not the GPU's
    sysmem = read_log(
        "Error: model requires more system memory (21.5 GiB) than is available (15.2 GiB)"
    )
    assert not sysmem.is_oom and "system RAM" in sysmem.not_oom_reason


@pytest.mark.parametrize(
    ("text", "framework", "kind", "phase"),
    [
        (
            "ggml_gallocr_reserve_n_impl: failed to allocate CUDA0 buffer of size 11488208896\n"
            "graph_reserve: failed to allocate compute buffers",
            "llama.cpp",
            "allocation",
            "load",
        ),
        (
            "ggml_vulkan: Device memory allocation of size 6442450944 failed.\n"
            "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
            "llama.cpp",
            "allocation",
            "unknown",
        ),
        (
            "CUDA error: out of memory\n  current device: 0, in function "
            "ggml_backend_cuda_buffer_type_alloc_buffer at ggml-cuda.cu:512",
            "llama.cpp",
            "allocation",
            "unknown",
        ),
        (
            "Some parameters are on the meta device because they were offloaded to the cpu.",
            "accelerate",
            "offload",
            "load",
        ),
        (
            "Some parameters are on the meta device device because they were offloaded to the disk "
            "and cpu.",
            "accelerate",
            "offload",
            "load",
        ),
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "cublas",
            "allocation",
            "unknown",
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
            "vllm",
            "kv_cache",
            "load",
        ),
        (
            "ValueError: Free memory on device (37.95/79.25 GiB) on startup is less than desired GPU "
            "memory utilization (0.9, 71.33 GiB). Decrease GPU memory utilization or reduce GPU "
            "memory used by other processes.",
            "vllm",
            "allocation",
            "load",
        ),
        ("RuntimeError: Invalid buffer size: 12.00 GB", "mps", "allocation", "unknown"),
    ],
)
def test_one_line_forms(text, framework, kind, phase):
    r = read_log(text)
    assert r.is_oom
    assert (r.primary.framework, r.primary.kind, r.phase.phase) == (framework, kind, phase)


def test_vllm_free_memory_figures():
    r = read_log(
        "ValueError: Free memory on device (37.95/79.25 GiB) on startup is less than "
        "desired GPU memory utilization (0.9, 71.33 GiB). Decrease GPU memory "
        "utilization or reduce GPU memory used by other processes."
    )
    assert r.primary.figures == {
        "total_capacity_bytes": 85_094_039_552,  # 79.25 x 2^30
        "free_bytes": 40_748_502_221,  # 3795 x 10,737,418.24
        "allowed_bytes": 76_590_004_306,
    }  # 7133 x 10,737,418.24 = ...305.92


def test_llamacpp_buffer_of_size_and_device():
    r = read("llamacpp_model_load.log")
    (ev,) = r.events
    assert ev.line_no == 5 and "unable to allocate CUDA0 buffer" in ev.message
    assert r.phase.evidence.startswith("alloc_tensor_range")


def test_phase_rules_on_small_tracebacks():
    def tb(*frames: tuple[str, str, str]) -> list[str]:
        lines = ["Traceback (most recent call last):"]
        for file, func, code in frames:
            lines += [f'  File "{file}", line 1, in {func}', f"    {code}"]
        return lines + ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB."]

    sp = "/v/lib/python3.11/site-packages/"
    cases = [
        (
            [
                ("/a/train.py", "main", "trainer.save_model()"),
                (sp + "transformers/trainer.py", "save_model", "self._save(output_dir)"),
            ],
            "other",
        ),
        ([("/a/m.py", "<module>", "merged = model.merge_and_unload()")], "other"),
        (
            [
                ("/a/m.py", "<module>", "model = DDP(model, device_ids=[rank])"),
                (sp + "torch/nn/parallel/distributed.py", "__init__", "_sync_module_states("),
            ],
            "load",  # set-up before the first step (round 8; was "other")
        ),
        (
            [
                ("/a/m.py", "<module>", "out = model(x)"),
                (
                    sp + "bitsandbytes/autograd/_functions.py",
                    "forward",
                    "out = F.dequantize_4bit(B)",
                ),
            ],
            # the whole traceback, a model call and nothing anywhere that says training:
            # inference (the whole-paste fallback, tests/test_triage_round5.py)
            "generate",
        ),
        (
            [
                ("/a/m.py", "train", "loss.backward()"),
                (sp + "torch/autograd/function.py", "apply", "return user_fn(self, *args)"),
                (
                    sp + "torch/utils/checkpoint.py",
                    "backward",
                    "outputs = ctx.run_function(*inputs)",
                ),
            ],
            "backward",
        ),
        # a custom autograd Function's forward (apply during forward) is not a backward
        (
            [
                ("/a/m.py", "train", "out = model(x)"),
                (
                    sp + "torch/autograd/function.py",
                    "apply",
                    "return super().apply(*args, **kwargs)",
                ),
            ],
            "train_forward",
        ),
        (
            [
                ("/a/m.py", "<module>", "model = AutoModel.from_pretrained(p, load_in_4bit=True)"),
                (
                    sp + "bitsandbytes/nn/modules.py",
                    "_quantize",
                    "w_4bit, quant_state = bnb.functional.quantize_4bit(",
                ),
            ],
            "load",
        ),
        (
            [
                ("/a/m.py", "fit", "opt.step()"),
                (
                    sp + "bitsandbytes/optim/optimizer.py",
                    "step",
                    "self.init_state(group, p, gindex, pindex)",
                ),
            ],
            "optimizer_step",
        ),
        ([("/a/m.py", "training_step", "loss = self(batch)")], "train_forward"),
    ]
    for frames, phase in cases:
        v = localise_phase(tb(*frames), len(frames) * 2 + 2)
        assert isinstance(v, PhaseVerdict)
        assert v.phase == phase, (frames, v)


def test_not_oom_valueerror_says_why_in_one_line():
    r = read("not_oom_valueerror.log")
    assert not r.is_oom and r.events == () and r.primary is None and r.framework is None
    assert r.not_oom_reason.startswith(
        "no out-of-memory error in this text: it ends with ValueError: Tokenizer class"
    )
    assert r.not_oom_reason.endswith("paste the traceback of the failing run")
    assert "\n" not in r.not_oom_reason


def test_deepspeed_overflow_is_not_an_oom():
    r = read("deepspeed_overflow_not_oom.log")
    assert (
        not r.is_oom and "OVERFLOW" in r.not_oom_reason and "not a memory error" in r.not_oom_reason
    )


@pytest.mark.parametrize("text", ["", "   \n\n\t  ", "\r\n"])
def test_empty_text(text):
    r = read_log(text)
    assert not r.is_oom and r.events == () and r.phase.phase == "unknown"
    assert "empty" in r.not_oom_reason


def test_binary_garbage():
    rng = random.Random(7)
    blob = bytes(rng.randrange(256) for _ in range(200_000))
    r = read_log(blob.decode("latin-1"))
    assert not r.is_oom and "not text" in r.not_oom_reason
    r = read_log(blob.decode("utf-8", errors="replace"))
    assert not r.is_oom and "\n" not in r.not_oom_reason
    assert read_log(blob).is_oom is False  # bytes are decoded, not refused


def test_killed_by_the_host_oom_killer():
    r = read_log("step 10 loss 2.1\nKilled\n")
    assert not r.is_oom and "system RAM" in r.not_oom_reason


def test_code_lines_quoting_the_message_are_not_events():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/a/server.py", line 3, in warmup\n'
        '    if "CUDA out of memory" in str(e) or isinstance(e, torch.cuda.OutOfMemoryError):\n'
        "KeyError: 'x'\n"
    )
    r = read_log(text)
    assert not r.is_oom and "KeyError" in r.not_oom_reason


def test_prefixed_log_lines():
    text = (LOGS / "pytorch_cuda_current_generate.log").read_text()
    prefixed = "\n".join(f"vllm-1  | {line}" for line in text.split("\n"))
    r = read_log(prefixed)
    assert r.primary.figures == CURRENT_FORM and r.phase.phase == "generate"
    pytest_style = "E       " + text.split("\n")[-2]
    assert read_log(pytest_style).primary.figures == CURRENT_FORM


def test_very_long_lines_are_cut_not_choked_on():
    text = "x" * 1_000_000 + "\n" + (LOGS / "pytorch_fraction_old_backward.log").read_text()
    t0 = time.perf_counter()
    r = read_log(text)
    assert time.perf_counter() - t0 < 2
    assert r.primary.line_no == 12


def test_public_types():
    r = read("pytorch_cuda_old_trainer_forward.log")
    assert isinstance(r, TriageReading) and isinstance(r.primary, OomEvent)
    assert isinstance(r.events, tuple) and isinstance(r.phase, PhaseVerdict)
    assert all(isinstance(v, int) for v in r.primary.figures.values())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3_000))
def test_fuzz_arbitrary_text_never_raises(text):
    r = read_log(text)
    assert isinstance(r, TriageReading) and r.phase.phase in PHASES
    assert r.is_oom == (r.not_oom_reason == "")


_PIECES = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ",
    "20.00 MiB",
    " (GPU 0; ",
    "23.65 GiB total capacity; ",
    "Process 1 has ",
    "9" * 30,
    " GB",
    "\x1b[31m",
    "\r\n",
    "\n",
    'File "/x/trainer.py", line 3, in training_step',
    "    optimizer.step()",
    "[rank0]: ",
    "The model's max seq len (",
    "Not enough memory to handle ",
    "failed to allocate CUDA0 ",
    "buffer of size ",
    "MPS backend out of memory (MPS allocated: ",
    "# GPU blocks: ",
    "Traceback (most recent call last):",
    "ValueError: ",
    "-1.5GiB",
    ",,,",
    "(",
    ")",
    " ",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=60))
def test_fuzz_near_misses_never_raise(pieces):
    r = read_log("".join(pieces))
    for ev in r.events:
        assert set(ev.figures) <= set(FIGURE_KEYS) and set(ev.as_written) == set(ev.figures)
        assert all(isinstance(v, int) and v >= 0 for v in ev.figures.values())
        assert ev.line_no >= 1 and "\n" not in ev.message
