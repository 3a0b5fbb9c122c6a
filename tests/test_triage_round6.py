"""Round 6 of the real-report corpus: each other process's "Process N has X memory in use" line
as its own figure (and the bench's multiset match of repeated label keys), message shapes cut or
wrapped by a paste, an allocator's own words in engines without a form, host-memory failures
that are not GPU OOMs, and two log-line stage rules.

Each excerpt is written by hand in the shape the printing program gives it; bytes are worked by
hand in the printer's convention (KiB/MiB/GiB = 2^10/2^20/2^30), value x unit rounded to the
nearest byte. Every rule has a counter-case it must not fire on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from vramtui.triage.oom_forms import FORMS
from vramtui.triage.reader import read_log

MiB = 2**20
GiB = 2**30
TORCH_1X = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total "
    "capacity; 6.50 GiB already allocated; 10.00 MiB free; 6.60 GiB reserved in total by PyTorch)"
)


def reading(text: str):
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return r


def first_failure(text: str):
    return next(e for e in reading(text).events if e.kind != "startup")


def _bench():
    path = Path(__file__).resolve().parent.parent / "bench" / "bench_triage_corpus.py"
    spec = importlib.util.spec_from_file_location("bench_triage_corpus_r6", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ one figure per process

THREE_OTHERS = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
    "capacity of 23.65 GiB of which 3.06 MiB is free. Process 2063158 has 1.38 GiB memory in "
    "use. Process 1027252 has 94.00 MiB memory in use. Process 1027451 has 94.00 MiB memory in "
    "use. Including non-PyTorch memory, this process has 6.07 GiB memory in use. Of the "
    "allocated memory 5.50 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch "
    "but unallocated."
)


def test_each_other_process_is_its_own_figure_and_the_sum_is_derived():
    ev = first_failure(THREE_OTHERS)
    # 1.38 x 2^30 = 1,481,763,717.12 -> 1,481,763,717; 94 x 2^20 = 98,566,144
    assert ev.figure_lists["other_processes_bytes"] == (1_481_763_717, 98_566_144, 98_566_144)
    assert ev.lists_as_written["other_processes_bytes"] == ("1.38 GiB", "94.00 MiB", "94.00 MiB")
    # the sum of the three as read: 1,481,763,717 + 2 x 98,566,144 = 1,678,896,005
    assert ev.figures["other_processes_total_bytes"] == 1_678_896_005
    assert "other_processes_bytes" not in ev.figures
    # the job's own line: 6.07 x 2^30 = 6,517,612,871.68 -> 6,517,612,872
    assert ev.figures["process_in_use_bytes"] == 6_517_612_872


def test_no_process_line_no_list():
    ev = first_failure(TORCH_1X)
    assert ev.figure_lists == {}
    assert ev.figure_list("other_processes_bytes") == ()
    assert ev.figure_list("tried_to_allocate_bytes") == (20 * MiB,)


def test_the_advice_warns_with_the_sum_of_the_others():
    from vramtui.triage.command import triage_to_dict

    out = triage_to_dict(read_log(THREE_OTHERS), None)
    assert out["figure_lists"] == {"other_processes_bytes": [1_481_763_717, 98_566_144, 98_566_144]}
    assert out["figures"]["other_processes_total_bytes"] == 1_678_896_005


def _label(*figures: tuple[str, int]) -> dict:
    return {
        "id": "x",
        "source_url": "https://example.invalid/1",
        "repository": "o/r",
        "is_oom": True,
        "stage": "unknown",
        "stage_basis": "none",
        "excerpt": {"text": THREE_OTHERS},
        "figures": [{"key": k, "as_written": "", "bytes": b} for k, b in figures],
    }


def test_the_bench_matches_a_repeated_key_as_a_multiset():
    bench = _bench()
    # the label lists the others in another order: each still finds its equal
    out = bench.score_one(
        _label(
            ("other_processes_bytes", 98_566_144),
            ("other_processes_bytes", 1_481_763_717),
            ("other_processes_bytes", 98_566_144),
        )
    )
    assert [f["exact_first"] for f in out["figures"]] == [True, True, True]
    # a third 94 MiB the reader never printed: two match, the third does not
    out = bench.score_one(
        _label(
            ("other_processes_bytes", 98_566_144),
            ("other_processes_bytes", 98_566_144),
            ("other_processes_bytes", 98_566_144),
        )
    )
    assert [f["exact_first"] for f in out["figures"]] == [True, True, False]
    # a label that sums the others (the old convention) matches none of them
    out = bench.score_one(_label(("other_processes_bytes", 1_678_896_005)))
    assert [f["exact_first"] for f in out["figures"]] == [False]


def test_the_bench_first_oom_skips_a_heading_of_the_message():
    bench = _bench()
    text = "Exception has occurred: OutOfMemoryError\n" + TORCH_1X
    report = {**_label(("tried_to_allocate_bytes", 20 * MiB)), "excerpt": {"text": text}}
    out = bench.score_one(report)
    assert out["figures"][0]["exact_first"] is True


# ------------------------------------------------------------------ cut or wrapped pastes


def test_markdown_emphasis_around_the_message():
    text = (
        "_CUDA out of memory. Tried to allocate 32.00 MiB (GPU 0; 4.00 GiB total capacity; "
        "2.92 GiB already allocated; 3.60 MiB free; 8.01 MiB cached)_"
    )
    ev = first_failure(text)
    assert ev.figures["tried_to_allocate_bytes"] == 32 * MiB
    # 2.92 x 2^30 = 3,135,326,126.08 -> 3,135,326,126; 3.60 x 2^20 = 3,774,873.6 -> 3,774,874
    assert ev.figures["already_allocated_bytes"] == 3_135_326_126
    assert ev.figures["free_bytes"] == 3_774_874
    assert ev.figures["total_capacity_bytes"] == 4 * GiB


def test_a_letter_glued_to_the_message_is_still_not_it():
    torch_form = next(f for f in FORMS if f.name == "torch")
    assert torch_form.start.search("_CUDA out of memory. Tried to allocate 1.00 MiB")
    assert torch_form.start.search("*CUDA out of memory. Tried to allocate 1.00 MiB")
    assert not torch_form.start.search("xCUDA out of memory. Tried to allocate 1.00 MiB")
    assert not torch_form.start.search("9CUDA out of memory. Tried to allocate 1.00 MiB")


def test_a_paste_cut_right_after_the_allocated_figure():
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 172.00 MiB. GPU 0 has a "
        "total capacity of 47.49 GiB of which 67.62 MiB is free. Including non-PyTorch memory, "
        "this process has 46.95 GiB memory in use. Of the allocated memory 44.91 GiB i"
    )
    # 44.91 x 2^30 = 48,221,745,315.84 -> 48,221,745,316
    assert first_failure(text).figures["allocated_by_pytorch_bytes"] == 48_221_745_316
    # cut inside the figure: nothing read
    cut = text.removesuffix(" GiB i")
    assert "allocated_by_pytorch_bytes" not in first_failure(cut).figures


def test_bold_prose_before_the_message_is_not_the_first_oom():
    text = (
        "**Now the models are all installed. Result error: CUDA out of memory.** \n\n"
        'File "/x/modeling_llama.py", line 140, in forward\n'
        "    return self.down_proj(x)\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 86.00 MiB (GPU 0; "
        "21.99 GiB total capacity; 21.38 GiB already allocated; 17.00 MiB free; 21.66 GiB "
        "reserved in total by PyTorch)"
    )
    assert first_failure(text).figures["tried_to_allocate_bytes"] == 86 * MiB
    # a message in bold with its figures is the message
    bold = f"**{TORCH_1X}**"
    assert first_failure(bold).figures["tried_to_allocate_bytes"] == 20 * MiB


# ------------------------------------------------------------------ engines' own words


def test_the_driver_free_and_total_line_after_a_cuda_malloc_async_failure():
    text = (
        "E1103 18:23:55.103160 3413767 gpu_cudamallocasync_allocator.cc:361] gpu_async_1 "
        "cuMemAllocAsync failed to allocate 1225195446464 bytes: RESOURCE_EXHAUSTED: : "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
        " Reported by CUDA: Free memory/Total memory: 22635544576/85095874560\n"
    )
    ev = first_failure(text)
    assert ev.figures["tried_to_allocate_bytes"] == 1_225_195_446_464
    assert ev.figures["free_bytes"] == 22_635_544_576
    assert ev.figures["total_capacity_bytes"] == 85_095_874_560
    # the driver line far below (not the failure's own tail) is not read into it
    far = text.replace("\n Reported", "\nx\ny\nz\n Reported")
    assert "free_bytes" not in first_failure(far).figures


def test_an_allocators_own_words_near_an_out_of_memory_word():
    text = (
        "Failed to allocate memory of size 152.00 MiB (Device: 0, Capacity: 14.75 GiB, "
        "Allocated: 13.93 GiB, Cached: 721.55 MiB) with error 'ArrayFire Exception (Device out "
        "of memory:101):"
    )
    ev = first_failure(text)
    assert ev.figures["tried_to_allocate_bytes"] == 152 * MiB  # 159,383,552
    assert ev.figures["total_capacity_bytes"] == 15_837_691_904  # 14.75 x 2^30, exact
    # 13.93 x 2^30 = 14,957,223,608.32 -> 14,957,223,608
    assert ev.figures["already_allocated_bytes"] == 14_957_223_608
    # PyTorch's own message keeps its own reading ("allocated" is not "Allocated: ")
    assert "already_allocated_bytes" in first_failure(TORCH_1X).figures


def test_host_memory_failures_are_not_gpu_ooms():
    node = (
        "<--- Last few GCs --->\n"
        "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n"
        " 1: 0xb090e0 node::Abort() [node]\n"
    )
    r = read_log(node)
    assert not r.is_oom
    assert "system RAM" in r.not_oom_reason
    cpp = (
        "terminate called after throwing an instance of 'std::bad_alloc'\n"
        "  what():  std::bad_alloc\n"
        "Aborted (core dumped)\n"
    )
    assert not read_log(cpp).is_oom
    # a GPU OOM in the same paste as a word about host memory elsewhere is still an OOM
    assert read_log("note: the host has 64 GB of RAM\n" + TORCH_1X).is_oom


# ------------------------------------------------------------------ stage from log lines


def test_a_runner_prefill_error_is_generation():
    text = (
        "2026-06-01T23:51:26.569960Z ERROR xinfer::runner: Runner prefill error: "
        'Err(DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")\n'
    )
    assert reading(text).phase.phase == "generate"
    # the same line without the step's name says nothing of the stage
    assert reading(text.replace("Runner prefill error", "Runner error")).phase.phase == "unknown"


def test_an_inpainting_progress_bar_is_generation():
    bar = "Inpainting batch of images... " + "\u2501" * 40 + "   0% 0:00:03 \n"
    assert reading(bar + TORCH_1X).phase.phase == "generate"
    # a training bar of the same shape is not inference
    train = "Training epoch 1... " + "\u2501" * 40 + "   0% 0:00:03 \n"
    assert reading(train + TORCH_1X).phase.phase != "generate"


def test_the_inpainting_bar_needs_a_count_or_percentage():
    assert reading("Inpainting 3/50\n" + TORCH_1X).phase.phase == "generate"
    assert reading("Upscaling:  40%|####  | 4/10\n" + TORCH_1X).phase.phase == "generate"
    # a sentence that names the step with no progress is not a progress bar
    assert reading("Inpainting the masked region\n" + TORCH_1X).phase.phase == "unknown"
