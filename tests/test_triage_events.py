"""Which out-of-memory event triage acts on when a paste holds several, the line shapes the
reader strips before reading, and what it says when the text is not a GPU out-of-memory error.

Each excerpt below is short and written by hand from the framework's format (named in its
test). Figures are worked out by hand in the comments (PyTorch's GiB = 2^30 bytes:
n.nn GiB = nnn x 10,737,418.24 bytes, rounded to the nearest byte)."""

from __future__ import annotations

import json
import time

import pytest

from vramtui.cli import main
from vramtui.triage import read_log
from vramtui.triage.event_list import other_events, reported_event
from vramtui.triage.log_prefixes import clean_log, strip_prefix
from vramtui.triage.not_oom import near_miss

GiB = 2**30


def torch2(tried: str, gpu: int = 0) -> str:
    """PyTorch 2.x's message (c10/cuda/CUDACachingAllocator.cpp), its first three figures."""
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. GPU {gpu} has "
        "a total capacity of 23.65 GiB of which 1.06 GiB is free."
    )


# 23.65 GiB = 2365 x 10,737,418.24 = 25,393,994,137.6 -> 25,393,994,138
# 1.06 GiB = 106 x 10,737,418.24 = 1,138,166,333.44 -> 1,138,166,333
CAPACITY, FREE = 25_393_994_138, 1_138_166_333


def tb(*frames: tuple[str, str, str]) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for file, func, code in frames:
        lines += [f'  File "{file}", line 1, in {func}', f"    {code}"]
    return lines


TRAIN = ("/w/train.py", "train_step", "outputs = model(**batch)")
BACKWARD = ("/w/train.py", "train_step", "loss.backward()")
SAVE = ("/w/train.py", "save", "torch.save(model.state_dict(), path)")


# ------------------------------------------------------------------------------ the first OOM


def test_first_of_several_failures_is_reported_with_its_own_stage():
    # two attempts in one paste: a forward that ran out of memory, then (a new traceback of
    # its own) a backward that did too. The first is acted on; its stage comes from its own
    # frames (line 3, train_step's forward), not from the second traceback's backward.
    lines = tb(TRAIN) + [torch2("2.00 GiB")] + tb(BACKWARD) + [torch2("4.00 GiB")]
    r = read_log("\n".join(lines))
    assert [e.line_no for e in r.events] == [4, 8]
    assert [e.echo_of for e in r.events] == [None, None]
    assert r.primary is r.events[0]
    assert r.primary.figures["tried_to_allocate_bytes"] == 2 * GiB  # 2.00 x 2^30
    assert r.events[1].figures["tried_to_allocate_bytes"] == 4 * GiB
    assert (r.phase.phase, r.phase.line_no) == ("train_forward", 2)
    assert reported_event(r) == "first of 2 out-of-memory errors, at line 4"
    assert other_events(r) == [
        # the message's first 97 characters: 24 + 20 + 28 + 25 ("GPU 0 has a total capacit")
        "line 8: another pytorch out-of-memory error: torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacit..."
    ]


def test_chained_cleanup_oom_repeats_the_first():
    # Python's chained traceback: the OOM in the forward, then "During handling of the above
    # exception, another exception occurred:" and the clean-up's own OOM (a checkpoint save
    # in an except block). The clean-up error is listed as a repeat of the first, not a new
    # failure; the stage stays the forward's.
    lines = (
        tb(TRAIN)
        + [
            torch2("2.00 GiB"),
            "",
            "During handling of the above exception, another exception occurred:",
            "",
        ]
        + tb(SAVE)
        + [torch2("20.00 MiB")]
    )
    r = read_log("\n".join(lines))
    assert [(e.line_no, e.echo_of) for e in r.events] == [(4, None), (11, 4)]
    assert r.primary is r.events[0] and r.phase.phase == "train_forward"
    assert r.primary.figures == {
        "tried_to_allocate_bytes": 2 * GiB,
        "total_capacity_bytes": CAPACITY,
        "free_bytes": FREE,
    }
    assert reported_event(r) == "the out-of-memory error at line 4; 1 repeat listed below"
    assert other_events(r)[0].startswith("line 11: repeats the error at line 4: ")


def test_wrapper_reraise_with_direct_cause_repeats_the_first():
    # "The above exception was the direct cause of the following exception:" then a wrapper's
    # RuntimeError quoting the message: one failure.
    msg = torch2("2.00 GiB")
    lines = (
        tb(TRAIN)
        + [msg, "", "The above exception was the direct cause of the following exception:", ""]
        + tb(("/w/run.py", "main", "trainer.fit()"))
        + ["RuntimeError: training failed: " + msg.split(": ", 1)[1]]
    )
    r = read_log("\n".join(lines))
    assert [(e.line_no, e.echo_of) for e in r.events] == [(4, None), (11, 4)]
    assert "first of" not in reported_event(r)


def test_a_logger_repeating_the_message_is_an_echo():
    # no traceback between: a logger's line repeats the exception's text (same figures)
    msg = torch2("2.00 GiB")
    lines = tb(TRAIN) + [msg, "ERROR:root:step 12 failed: " + msg.split(": ", 1)[1]]
    r = read_log("\n".join(lines))
    assert [(e.line_no, e.echo_of) for e in r.events] == [(4, None), (5, 4)]


def test_a_launcher_relaying_the_whole_traceback_is_an_echo_a_new_run_is_not():
    # A fresh traceback with the very same message and figures: printed again (a launcher
    # relaying a shard's stderr). A fresh traceback with other figures: a failure of its own.
    first = tb(TRAIN) + [torch2("2.00 GiB")]
    same = read_log("\n".join(first + first))
    assert [(e.line_no, e.echo_of) for e in same.events] == [(4, None), (8, 4)]
    other = read_log("\n".join(first + tb(TRAIN) + [torch2("1.00 GiB")]))
    assert [(e.line_no, e.echo_of) for e in other.events] == [(4, None), (8, None)]


def test_two_ranks_failing_are_two_failures():
    # torchrun's "[rankN]: " prefix: rank 1 and rank 0 both run out (GPU 1, GPU 0)
    text = "[rank1]: " + torch2("2.00 GiB", gpu=1) + "\n" + "[rank0]: " + torch2("2.00 GiB", gpu=0)
    r = read_log(text)
    assert [(e.gpu_index, e.echo_of) for e in r.events] == [(1, None), (0, None)]
    assert r.primary.gpu_index == 1
    assert reported_event(r) == "first of 2 out-of-memory errors, at line 1"


def test_a_figureless_mention_above_the_message_is_the_same_failure():
    # the reporter's sentence above the pasted message (Markdown inline code): the message,
    # which has the figures, is acted on; the mention is listed as a repeat of it
    text = (
        "but am now getting CUDA out of memory error:\n"
        "`RuntimeError: CUDA out of memory. Tried to allocate 4.00 GiB (GPU 0; 47.54 GiB total "
        "capacity; 30.76 GiB already allocated; 1.22 GiB free; 33.29 GiB reserved in total by "
        "PyTorch)`"
    )
    r = read_log(text)
    # The sentence is prose, not a message (the message families do not read it as one): the
    # pasted message is the one event.
    assert [(e.line_no, e.echo_of) for e in r.events] == [(2, None)]
    assert r.primary is r.events[0]
    # 4.00 GiB = 4 x 2^30; 47.54 GiB = 4754 x 10,737,418.24 = 51,045,686,312.96
    assert r.primary.figures["tried_to_allocate_bytes"] == 4 * GiB
    assert r.primary.figures["total_capacity_bytes"] == 51_045_686_313
    # a traceback between them: two failures, the first (without figures) acted on
    apart = read_log(
        "RuntimeError: CUDA out of memory.\nTraceback (most recent call last):\n"
        + torch2("2.00 GiB")
    )
    assert [e.echo_of for e in apart.events] == [None, None]
    assert apart.primary is apart.events[0]


def test_offload_warning_is_primary_only_when_nothing_failed():
    warn = "Some parameters are on the meta device because they were offloaded to the cpu."
    r = read_log(warn + "\n" + torch2("2.00 GiB"))
    assert [e.kind for e in r.events] == ["offload", "allocation"]
    assert r.primary is r.events[1]
    assert reported_event(r) == "the out-of-memory error at line 2"
    assert other_events(r) == ["line 1: accelerate offloading warning: " + warn]
    alone = read_log(warn)
    assert alone.is_oom and alone.primary.kind == "offload"
    assert reported_event(alone) == "the offloading warning at line 1 (no out-of-memory error)"


def test_echo_marking_stays_linear():
    # 3,000 chained clean-up errors: compared with the previous failure and its original only
    chunk = [
        torch2("2.00 GiB"),
        "During handling of the above exception, another exception occurred:",
        "Traceback (most recent call last):",
    ]
    text = "\n".join(tb(TRAIN) + chunk * 3_000)
    start = time.perf_counter()
    r = read_log(text)
    assert time.perf_counter() - start < 15.0  # a hang guard; linearity is measured in bench/
    assert len(r.events) == 3_000 and r.events[0].echo_of is None
    assert all(e.echo_of == 4 for e in r.events[1:])
    assert len(other_events(r)) == 21 and other_events(r)[-1] == "... and 2979 more events"


def test_cli_names_the_reported_event_and_lists_the_others(tmp_path, capsys):
    log = tmp_path / "two.log"
    log.write_text(
        "\n".join(tb(TRAIN) + [torch2("2.00 GiB")] + tb(BACKWARD) + [torch2("4.00 GiB")])
    )
    assert main(["triage", str(log)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(first of 2 out-of-memory errors, at line 4)" in out
    assert "other events in the text (not acted on): line 8: another pytorch out-of-memory" in out
    assert main(["triage", str(log), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reported_event"] == "first of 2 out-of-memory errors, at line 4"
    assert [(e["line_no"], e["reported"], e["echo_of_line_no"]) for e in data["events"]] == [
        (4, True, None),
        (8, False, None),
    ]
    assert data["figures"]["tried_to_allocate_bytes"] == 2 * GiB


# ------------------------------------------------------------------------------ line shapes


@pytest.mark.parametrize(
    ("line", "rest"),
    [
        # TensorFlow / XLA C++ logging (tsl/platform/default/logging.cc): time stamp, level
        # letter, file:line]
        (
            "2019-01-08 19:06:11.303639: E tensorflow/stream_executor/rocm/rocm_driver.cc:601] "
            "failed to allocate 7.35G",
            "failed to allocate 7.35G",
        ),
        # a process number before it (JAX multi-process output)
        (
            "[1] 2019-06-13 01:17:08.886805: E external/xla/local_client.cc:672] Execution of",
            "Execution of",
        ),
        (
            "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] W",
            "[Rank 0] W",
        ),
        # older c10 logging, no date
        ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog", "[Rank 1] Watchdog"),
        # Elixir Logger / CLIs "[info] ", "[error] "; "[INFO 2020-05-26 20:08:23] "
        ("[error] Execution of replica 0 failed", "Execution of replica 0 failed"),
        (
            "[INFO 2020-05-26 20:08:23] Creating fp16 ZeRO stage 2 optimizer",
            "Creating fp16 ZeRO stage 2 optimizer",
        ),
        # uvicorn / loguru level padded to ten columns: the code's indentation is kept
        ("ERROR:        self.scratch =", "    self.scratch ="),
        # "ts LEVEL pid [file:line] " (vLLM's async engine logger)
        (
            "2024-12-19 21:40:35 ERROR 56542 [async_llm_engine.py:64]     result = f()",
            "    result = f()",
        ),
    ],
)
def test_prefixes_stripped(line, rest):
    assert strip_prefix(line) == rest


@pytest.mark.parametrize(
    "line",
    [
        "ERROR: out of memory",  # not the padded form: the level is the message's own word
        "[1] see the first note",  # a numbered note, no time stamp or rank after it
        "[E] something",  # no file:line
    ],
)
def test_lookalikes_are_kept(line):
    assert strip_prefix(line) == line


def test_tf_log_prefix_keeps_line_numbers():
    text = (
        "2019-01-08 19:06:10.822532: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1189] "
        "Created TensorFlow device\n"
        "2019-01-08 19:06:11.303639: E tensorflow/stream_executor/cuda/cuda_driver.cc:601] "
        "failed to allocate 7.35G (7889485824 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: "
        "out of memory"
    )
    log = clean_log(text)
    assert log.lines[1].startswith("failed to allocate 7.35G") and log.line_nos == [1, 2]
    r = read_log(text)
    assert r.is_oom and r.primary.line_no == 2


def test_exception_right_under_a_stdin_frame_is_read():
    # the interactive interpreter's frame has no source line: the exception follows the
    # header directly (intel-extension-for-pytorch's XPU message, PyTorch 1.x form)
    text = (
        ">>> x = torch.rand(46000, 10000, device='xpu')\n"
        "Traceback (most recent call last):\n"
        '  File "<stdin>", line 1, in <module>\n'
        "RuntimeError: XPU out of memory. Tried to allocate 1.71 GiB (GPU 0; 15.56 GiB total "
        "capacity; 0 bytes already allocated; 0 bytes reserved in total by PyTorch)"
    )
    r = read_log(text)
    assert r.is_oom and r.primary.framework == "xpu" and r.primary.line_no == 4
    # 1.71 GiB = 171 x 10,737,418.24 = 1,836,098,519.04; 15.56 GiB = 1556 x ... =
    # 16,707,422,781.44
    assert r.primary.figures["tried_to_allocate_bytes"] == 1_836_098_519
    assert r.primary.figures["total_capacity_bytes"] == 16_707_422_781
    assert r.primary.figures["already_allocated_bytes"] == 0


def test_exception_under_another_ranks_frame_is_read():
    # interleaved output: one rank's frame header, then another's exception line at column 0
    text = (
        '  File "/d/deepspeed/runtime/zero/stage3.py", line 947, in _optimizer_step\n'
        + torch2("3.39 GiB", gpu=1)
        + "\n    self._optimizer_step(sub_group_id)"
    )
    r = read_log(text)
    assert r.is_oom and r.primary.line_no == 2
    # 3.39 GiB = 339 x 10,737,418.24 = 3,639,984,783.36
    assert r.primary.figures["tried_to_allocate_bytes"] == 3_639_984_783


def test_code_line_under_a_frame_is_still_code():
    # the source line under a header is code, even when it quotes an OOM
    text = (
        "Traceback (most recent call last):\n"
        '  File "/w/x.py", line 3, in f\n'
        '    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")\n'
        "ValueError: bad"
    )
    assert not read_log(text).is_oom


def test_wrapped_record_continues_under_a_launcher_only_prefix():
    # docker compose prefixes every line ("tabbyapi-1  | "); the logger's record header
    # ("2025-03-14 11:05:29.634 ERROR:    ") is only on the record's first line, the wrapped
    # rest carries the compose prefix alone: still the same record.
    text = (
        "tabbyapi-1  | 2025-03-14 11:05:29.634 ERROR:    torch.OutOfMemoryError: CUDA out of "
        "memory.\n"
        "tabbyapi-1  | Tried to allocate 260.00 MiB. GPU 1 has a total capacity of 23.53 GiB "
        "of which\n"
        "tabbyapi-1  | 190.50 MiB is free.\n"
        "tabbyapi-1  | 2025-03-14 11:05:29.635 INFO:     shutting down"
    )
    r = read_log(text)
    ev = r.primary
    assert ev.line_no == 1 and ev.gpu_index == 1
    # 260.00 MiB = 260 x 1,048,576 = 272,629,760; 23.53 GiB = 2353 x 10,737,418.24 =
    # 25,265,145,118.72; 190.50 MiB = 190.5 x 1,048,576 = 199,753,728
    assert ev.figures == {
        "tried_to_allocate_bytes": 272_629_760,
        "total_capacity_bytes": 25_265_145_119,
        "free_bytes": 199_753_728,
    }
    assert "shutting down" not in ev.message  # the next record is not part of it


# ------------------------------------------------------------------------------ not an OOM


@pytest.mark.parametrize(
    ("text", "kind", "says"),
    [
        (
            "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not "
            "enough memory: you tried to allocate 34359738368 bytes.",
            "host_ram",
            "the host ran out of system RAM (CPU memory), not GPU memory",
        ),
        (
            "Loading checkpoint shards:  75%|######   | 3/4 [01:34<00:31, 31.54s/it]Killed",
            "killed",
            "the process was killed",
        ),
        (
            "RuntimeError: DataLoader worker (pid 629) is killed by signal: Killed.",
            "killed",
            "the process was killed",
        ),
        ("died with <Signals.SIGKILL: 9>", "killed", "the process was killed"),
        (
            "RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call",
            "illegal_access",
            "a GPU kernel accessed memory out of its bounds",
        ),
        (  # a terminal cut inside "illegal"
            "RuntimeError: CUDA error: an illeg\nal memory access was encountered",
            "illegal_access",
            "a GPU kernel accessed memory out of its bounds (an illegal memory access)",
        ),
        (
            "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, "
            "Timeout(ms)=600000) ran for 600059 milliseconds before timing out.",
            "nccl_timeout",
            "an NCCL collective timed out",
        ),
        (
            "terminate called after throwing an instance of 'std::runtime_error'\n"
            "  what():   NCCL Error 1: unhandled cuda error",
            "nccl_error",
            "an NCCL error",
        ),
        (
            "RuntimeError: CUDA error: device-side assert triggered",
            "gpu_error",
            "a GPU error other than out of memory (CUDA error: device-side assert triggered",
        ),
        (
            "warning: failed to mlock 139264000-byte buffer (after previously locking 0 bytes): "
            "Cannot allocate memory",
            "notice",
            "only a warning or a notice that mentions memory",
        ),
        (
            "[Low VRAM Warning] You just set Forge to use 100% GPU memory (39489.00 MB) to load "
            "model weights.",
            "notice",
            "only a warning or a notice that mentions memory",
        ),
    ],
)
def test_near_misses_say_what_they_are(text, kind, says):
    r = read_log(text)
    assert not r.is_oom and r.events == () and r.primary is None
    assert near_miss(clean_log(text))[0] == kind
    assert r.not_oom_reason.startswith("no out-of-memory error in this text: " + says)
    assert "\n" not in r.not_oom_reason


def test_near_miss_names_its_line():
    text = (
        "epoch 3 step 10\nstep 11\n"
        "RuntimeError: DataLoader worker (pid 9) is killed by signal: Killed."
    )
    assert "(line 3: RuntimeError: DataLoader worker" in read_log(text).not_oom_reason


def test_stopping_workers_is_not_a_kill():
    # vLLM stopping its own workers after an error: "Killing", not "Killed"
    text = "INFO 07-01 13:54:43 multiproc_worker_utils.py:123] Killing local vLLM worker processes"
    assert near_miss(clean_log(text)) is None


def test_host_ram_next_to_a_gpu_oom_keeps_the_gpu_oom():
    text = (
        "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough "
        "memory: you tried to allocate 34359738368 bytes.\n" + torch2("2.00 GiB")
    )
    r = read_log(text)
    assert r.is_oom and [e.line_no for e in r.events] == [2]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_triage_tab_names_the_reported_event_and_lists_the_others(tmp_path, anyio_backend):
    import datetime
    import shutil
    from pathlib import Path

    from textual.widgets import Static

    from vramtui.app.app import VramtuiApp
    from vramtui.catalog import load_catalog
    from vramtui.config import Config
    from vramtui.session import SizingSession
    from vramtui.spec import load_spec

    repo = Path(__file__).resolve().parent.parent
    spec_path = tmp_path / "chat.toml"
    shutil.copy(repo / "sample_specs" / "llama-3.1-8b-chat-8k-x16.toml", spec_path)
    session = SizingSession.from_spec(
        load_spec(spec_path),
        spec_path,
        load_catalog(use_user_config=False),
        today=datetime.date(2026, 12, 10),
    )
    app = VramtuiApp(session, Config(), draft_file=tmp_path / "draft.toml")
    text = "\n".join(tb(TRAIN) + [torch2("2.00 GiB")] + tb(BACKWARD) + [torch2("4.00 GiB")])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f7")
        app.triage_pane.set_log_text(text)
        await pilot.press("ctrl+r")
        await pilot.pause()
        shown = str(app.query_one("#triage-summary", Static).render())
    assert "(first of 2 out-of-memory errors, at line 4)" in shown
    assert "other events in the text (not acted on):" in shown
    assert "line 8: another pytorch out-of-memory error" in shown
