"""Prefixes and wrappers are stripped before the triage reader reads a paste, and every event
and verdict keeps the line number of the original paste.

Each fixture below was written by hand from the real format strings (named in its test);
its figures are worked out by hand in the comments (n.nn GiB = nnn x 10,737,418.24 bytes,
n.nn MiB = nnn x 10,485.76 bytes, rounded to the nearest byte)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from vramtui.triage import localise_phase, read_log
from vramtui.triage.log_prefixes import clean_log, strip_prefix

LOGS = Path(__file__).parent / "triage_logs"


def read(name: str):
    return read_log((LOGS / name).read_bytes().decode("utf-8"))


# ------------------------------------------------------------------------------ fixtures


def test_srun_label_two_tasks_backward():
    # srun --label puts "<task id>: " in front of every line of each task ("0: ", "1: ");
    # the two tasks' tracebacks arrive interleaved line by line. Task 0 runs out of memory in
    # loss.backward() (PyTorch 2.x message); task 1's frames (an optimizer step) must not mix.
    r = read("srun_label_two_tasks_backward.log")
    (ev,) = r.events
    assert (ev.framework, ev.kind, ev.gpu_index, ev.line_no) == ("pytorch", "allocation", 0, 23)
    # 1.50 GiB = 1,610,612,736; 23.64 GiB = 2364 x 10,737,418.24 = 25,383,256,719.36;
    # 1.12 GiB = 112 x ... = 1,202,590,842.88; 22.51 GiB = 2251 x ... = 24,169,928,458.24;
    # 21.87 GiB = 2187 x ... = 23,482,733,690.88; 402.35 MiB = 40235 x 10,485.76 = 421,894,553.6
    assert ev.figures == {
        "tried_to_allocate_bytes": 1_610_612_736,
        "total_capacity_bytes": 25_383_256_719,
        "free_bytes": 1_202_590_843,
        "process_in_use_bytes": 24_169_928_458,
        "allocated_by_pytorch_bytes": 23_482_733_691,
        "reserved_unallocated_bytes": 421_894_554,
    }
    assert ev.message.startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert (r.phase.phase, r.phase.line_no) == ("backward", 20)
    assert "_engine_run_backward" in r.phase.evidence and not r.phase.evidence.startswith("0:")


def test_vllm_worker_prefix_load():
    # vLLM V1: each worker's output gets "\x1b[1;36m(VllmWorker rank=1 pid=572)\x1b[0;0m "
    # (vllm's _add_prefix, CYAN/RESET), and its logger puts
    # "ERROR 03-20 02:29:07 [multiproc_executor.py:375] " on every line of a multi-line record.
    # Rank 0's lines are interleaved. Rank 1 runs out of memory creating weights at load.
    raw = (LOGS / "vllm_worker_prefix_load.log").read_text()
    assert "\x1b[1;36m(VllmWorker rank=1 pid=572)\x1b[0;0m ERROR" in raw
    r = read("vllm_worker_prefix_load.log")
    (ev,) = r.events
    assert (ev.framework, ev.gpu_index, ev.line_no) == ("vllm", 1, 27)
    # 448.00 MiB = 469,762,048; 23.54 GiB = 2354 x 10,737,418.24 = 25,275,882,536.96;
    # 311.06 MiB = 31106 x 10,485.76 = 326,170,050.56; 23.22 GiB = 2322 x ... = 24,932,285,153.28
    # 22.84 GiB = 2284 x ... = 24,524,263,260.16; 29.67 MiB = 2967 x 10,485.76 = 31,111,249.92
    assert ev.figures == {
        "tried_to_allocate_bytes": 469_762_048,
        "total_capacity_bytes": 25_275_882_537,
        "free_bytes": 326_170_051,
        "process_in_use_bytes": 24_932_285_153,
        "allocated_by_pytorch_bytes": 24_524_263_260,
        "reserved_unallocated_bytes": 31_111_250,
    }
    # the deepest frame's statement creates the layer's weights (create_weights:
    # Parameter(torch.empty(...))), below the model loader's frame on line 18
    assert (r.phase.phase, r.phase.line_no) == ("load", 22)
    assert r.phase.evidence.startswith("weight = Parameter(torch.empty(")


def test_python_logging_prefix_on_every_line_trainer_forward():
    # Python logging's "%(asctime)s - %(name)s - %(levelname)s - %(message)s" (the logging
    # HOWTO's example format), with stderr forwarded through the logger so that every
    # traceback line is its own record. Trainer.training_step -> forward runs out of memory.
    r = read("pylogging_every_line_trainer_forward.log")
    (ev,) = r.events
    assert (ev.framework, ev.gpu_index, ev.line_no) == ("pytorch", 0, 20)
    # 3.91 GiB = 391 x 10,737,418.24 = 4,198,330,531.84; 39.39 GiB = 3939 x ... =
    # 42,294,690,447.36; 2.62 GiB = 262 x ... = 2,813,203,578.88; 36.76 GiB = 3676 x ... =
    # 39,470,749,450.24; 33.05 GiB = 3305 x ... = 35,487,167,283.2; 3.20 GiB = 320 x ... =
    # 3,435,973,836.8
    assert ev.figures == {
        "tried_to_allocate_bytes": 4_198_330_532,
        "total_capacity_bytes": 42_294_690_447,
        "free_bytes": 2_813_203_579,
        "process_in_use_bytes": 39_470_749_450,
        "allocated_by_pytorch_bytes": 35_487_167_283,
        "reserved_unallocated_bytes": 3_435_973_837,
    }
    # decided by the training_step frame (line 12), not by the loss line of the log above it
    assert (r.phase.phase, r.phase.line_no) == ("train_forward", 12)
    assert "training_step" in r.phase.reason


def test_comfyui_error_report():
    # ComfyUI's "Show Report" text (frontend errorReportUtil: "# ComfyUI Error Report",
    # "- **Exception Type:** ", "- **Exception Message:** ", "## Stack Trace" with a ``` fence
    # around traceback.format_tb), the message followed by the tips execution.py appends to an
    # out-of-memory exception, the whole report pasted inside another ``` fence.
    r = read("comfyui_error_report_ksampler.log")
    (ev,) = r.events  # the tips line and the "Exception Type" line are not events of their own
    assert (ev.framework, ev.gpu_index, ev.line_no) == ("pytorch", 0, 9)
    assert ev.message.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
    # 2.25 GiB = 2,415,919,104; 11.99 GiB = 1199 x 10,737,418.24 = 12,874,164,469.76;
    # 0 bytes; 9.87 GiB = 987 x ... = 10,597,831,802.88; 1.02 GiB = 102 x ... = 1,095,216,660.48
    assert ev.figures == {
        "tried_to_allocate_bytes": 2_415_919_104,
        "total_capacity_bytes": 12_874_164_470,
        "free_bytes": 0,
        "allocated_by_pytorch_bytes": 10_597_831_803,
        "reserved_unallocated_bytes": 1_095_216_660,
    }
    # the stack trace comes after the message in the report: its frames are still read
    assert (r.phase.phase, r.phase.line_no) == ("generate", 33)
    assert "comfy\\sample.py" in r.phase.evidence


def test_markdown_quoted_fenced_paste():
    # A GitHub reply: "> " quote markers on every line, a ```python fence inside the quote,
    # and a <details><summary> wrapper around it.
    r = read("markdown_quoted_fenced_generate.log")
    (ev,) = r.events
    assert (ev.framework, ev.gpu_index, ev.line_no) == ("pytorch", 1, 21)
    # 3.91 GiB = 4,198,330,531.84; 79.15 GiB = 7915 x 10,737,418.24 = 84,986,665,369.6;
    # 1.27 GiB = 127 x ... = 1,363,652,116.48; 77.87 GiB = 7787 x ... = 83,612,275,834.88;
    # 74.02 GiB = 7402 x ... = 79,478,369,812.48; 3.34 GiB = 334 x ... = 3,586,297,692.16
    assert ev.figures == {
        "tried_to_allocate_bytes": 4_198_330_532,
        "total_capacity_bytes": 84_986_665_370,
        "free_bytes": 1_363_652_116,
        "process_in_use_bytes": 83_612_275_835,
        "allocated_by_pytorch_bytes": 79_478_369_812,
        "reserved_unallocated_bytes": 3_586_297_692,
    }
    assert (r.phase.phase, r.phase.line_no) == ("generate", 15)
    assert "_sample" in r.phase.evidence and not r.phase.evidence.startswith(">")


# ------------------------------------------------------------------------------ any fixture,
# any prefix: the same reading, at the same line numbers

PREFIXES = {
    "torchrun": "[rank0]: ",
    "torchrun_tee": "[default0]:",
    "srun": "0: ",
    "srun_wide": " 3: ",
    "pdsh": "worker-1: ",
    "mpirun": "[1,0]<stderr>:",
    "vllm_worker": "(VllmWorker rank=0 pid=571) ERROR 03-20 02:29:07 [multiproc_executor.py:375] ",
    "ray_train": "(RayTrainWorker pid=4111, ip=172.17.0.2) ",
    "pylog": "2024-05-01 12:03:10,456 - __main__ - ERROR - ",
    "hf_examples": "05/01/2024 12:03:10 - ERROR - __main__ - ",
    "loguru": "2024-05-01 12:03:10.456 | ERROR    | __main__:main:42 - ",
    "basic": "ERROR:root:",
    "deepspeed": "[2024-05-01 12:03:10,456] [ERROR] [engine.py:1:step] ",
    "docker_ts": "2024-05-01T12:03:10.456789012Z ",
    "tracing": "2024-05-01T12:03:10.456789Z ERROR shard-manager: ",
    "glog": "E0501 12:03:10.456789 140231 run.py:12] ",
    "syslog": "May  1 12:03:10 gpu-node-07 python3[4101]: ",
    "kubectl": "[pod/trainer-0/main] ",
    "compose": "trainer-1  | ",
    "quote": "> ",
    "nested": "worker-1: [rank9]: ",
}
PLAIN = [
    "pytorch_cuda_old_trainer_forward.log",
    "pytorch_cuda_current_generate.log",
    "pytorch_fraction_old_backward.log",
    "adamw_init_group_from_training_step.log",
    "jupyter_generate.log",
    "trainer_evaluate.log",
    "mps_diffusers.log",
    "llamacpp_model_load.log",
]


def _summary(r):
    p = r.primary
    return (
        r.is_oom,
        p.framework,
        p.kind,
        p.gpu_index,
        p.line_no,
        p.figures,
        r.phase.phase,
        r.phase.line_no,
        r.phase.evidence,
    )


@pytest.mark.parametrize("fmt", sorted(PREFIXES))
@pytest.mark.parametrize("name", PLAIN)
def test_every_prefix_reads_like_the_plain_log(name, fmt):
    plain = (LOGS / name).read_text()
    lines = plain.split("\n")
    prefixed = "\n".join(PREFIXES[fmt] + line if line else line for line in lines)
    got, want = _summary(read_log(prefixed)), _summary(read_log(plain))
    if fmt == "vllm_worker" and want[1] != "llama.cpp":
        # a vLLM worker's tag says who raised the allocator's error
        assert got[1] == "vllm"
        got, want = got[:1] + got[2:], want[:1] + want[2:]
    assert got == want


def test_fenced_and_coloured_reads_like_the_plain_log():
    plain = (LOGS / "pytorch_fraction_old_backward.log").read_text()
    body = plain.rstrip("\n").split("\n")
    fenced = "\n".join(["Here is the log:", "", "```shell", *body, "```", "", "thanks"])
    r, p = read_log(fenced), read_log(plain)
    assert r.primary.figures == p.primary.figures and r.phase.phase == p.phase.phase
    # three lines were added above the log: the line numbers are the fenced paste's
    assert (r.primary.line_no, r.phase.line_no) == (p.primary.line_no + 3, p.phase.line_no + 3)
    coloured = "\n".join(f"\x1b[0;31m[rank0]:\x1b[0m {line}" for line in body)
    assert _summary(read_log(coloured)) == _summary(p)


# ------------------------------------------------------------------------------ clean_log


def test_line_numbers_survive_dropped_fence_lines():
    log = clean_log("intro\n```\nTraceback (most recent call last):\n~~~python\nlast\n```")
    assert log.lines == ["intro", "Traceback (most recent call last):", "last"]
    assert log.line_nos == [1, 3, 5]
    # a fence glued to the text: the text is kept
    log = clean_log("```Traceback (most recent call last):\nRuntimeError: x```")
    assert log.lines == ["Traceback (most recent call last):", "RuntimeError: x"]


def test_loose_prefixes_need_a_majority_around_them():
    # a numbered list, "name: value" lines, a lone quote: left as they are
    text = "steps:\n1: load the model\nthen the run\nfails with\nthis error\n> a quote\nok"
    assert clean_log(text).lines == text.split("\n")
    # the same label on most lines: stripped, and the label kept as the line's tag
    log = clean_log("0: a\n0: b\n1: c\nplain\n0: d")
    assert log.lines == ["a", "b", "c", "plain", "d"]
    assert [log.tag(i) for i in range(5)] == ["0:", "0:", "1:", None, "0:"]
    # a host name must carry a digit: "RuntimeError: " and "loss: " are not hosts
    text = "RuntimeError: a\nRuntimeError: b\nloss: 1.0"
    assert clean_log(text).lines == text.split("\n")
    # llama.cpp's function-name lines are not prefixes (underscores are not in host names)
    text = "llm_load_print_meta: n_ctx = 4096\nllm_load_print_meta: n_embd = 4096"
    assert clean_log(text).lines == text.split("\n")


def test_indentation_after_a_prefix_is_kept():
    log = clean_log(
        '2024-05-01 12:03:10,456 - x - ERROR -   File "/a.py", line 1, in f\n'
        "2024-05-01 12:03:10,456 - x - ERROR -     f()\n"
        '2024-05-01T12:03:10.45Z   File "/a.py", line 1, in f\n'
        "[rank0]:     f()"
    )
    assert log.lines == [
        '  File "/a.py", line 1, in f',
        "    f()",
        '  File "/a.py", line 1, in f',
        "    f()",
    ]


def test_elisions_and_mid_line_starts_are_kept():
    text = "eturn Variable._execution_engine.run_backward(\n...\n  ...<3 lines>..."
    assert clean_log(text).lines == text.split("\n")


def test_strip_prefix_single_line():
    assert strip_prefix("E       torch.OutOfMemoryError: x") == "torch.OutOfMemoryError: x"
    assert strip_prefix("(EngineCore_0 pid=12) INFO 01-15 10:22:11 [x.py:1] hi") == "hi"


def test_localise_phase_takes_raw_lines_and_answers_in_their_numbers():
    lines = (LOGS / "markdown_quoted_fenced_generate.log").read_text().split("\n")
    v = localise_phase(lines, 21)
    assert (v.phase, v.line_no) == ("generate", 15)


def test_hostile_prefix_lookalikes_stay_linear():
    pieces = [
        "[rank" + "9" * 5_000,
        "(" + "VllmWorker " * 2_000 + "pid=",
        "2024-05-01 12:00:00,123" + " - name" * 3_000,
        "INFO 01-15 10:22:11 [" + "x" * 10_000,
        "worker-1" + "-1" * 5_000 + ": ",
        "a" * 60 + " " * 5_000 + "|",
        "> " * 5_000,
        "```" + "`" * 10_000 + "python",
        "E" + " " * 10_000,
    ]

    def timed(k: int) -> float:
        text = "\n".join(pieces * k)
        t0 = time.perf_counter()
        clean_log(text)
        return time.perf_counter() - t0

    small, big = timed(20), timed(80)
    assert big < max(8 * small, 0.5), (small, big)
