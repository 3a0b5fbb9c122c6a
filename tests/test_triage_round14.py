"""Round 14 of the real-report corpus: an out-of-memory error named only in the reporter's
words, MIOpen's HIP buffer failure, XLA's device-buffer message re-quoted one sentence per line,
Caffe's glog stack (Solver, Forward, Backward), TensorFlow 1.x's "Caused by op u'...'", torch's
Module.to line cut to "return t.to(", and a traceback that ends in constructors.

Each excerpt is written by hand in the shape the printing program (or a reporter) gives it; each
byte count is the program's own exact figure or worked by hand. Every rule has a counter-case
it must not fire on.
"""

from __future__ import annotations

import subprocess
import sys

from triage_reading import reading

from vramtui.triage.event_list import headline
from vramtui.triage.oom_prose import MAX_PROSE_CHARS, reported_oom
from vramtui.triage.reader import read_log

GiB = 2**30
MiB = 2**20


# ------------------------------------------------------------- the reporter's words


def test_an_issue_title_naming_a_cuda_oom_is_read_as_one_with_no_figures():
    text = (
        "CUDA out of memory at inference time with decoder_explain\n\n"
        "Trajectory prediction only is good but enabling the language decoder fails.\n"
    )
    r = read_log(text)
    assert r.is_oom
    assert r.primary.kind == "reported"
    assert r.primary.framework == "unknown"
    assert r.primary.figures == {}
    assert r.primary.line_no == 1
    assert r.primary.message == "CUDA out of memory at inference time with decoder_explain"
    assert "no error message" in headline(r.primary)


def test_oom_with_a_gpu_word_in_the_same_sentence_is_read():
    text = "I encounter an OOM even with a single H200 GPU.\n"
    assert read_log(text).primary.kind == "reported"
    text = "Now i getting cuda out of memory error.\n"
    assert read_log(text).is_oom


def test_the_gpu_memory_being_insufficient_is_read():
    text = "In the validation stage, the GPU memory is insufficient for a whole room.\n"
    assert read_log(text).is_oom


def test_a_sentence_line_is_numbered_as_in_the_paste():
    text = "Hello,\n\nthanks for the repo.\nAt step 4 I encounter a CUDA out-of-memory error.\n"
    r = read_log(text)
    assert r.primary.line_no == 4


def test_a_negated_oom_is_not_read():
    assert not read_log("It finished without any CUDA out of memory error.\n").is_oom
    assert not read_log("There is no OOM on the GPU, it just hangs.\n").is_oom


def test_host_memory_words_keep_a_sentence_out():
    assert not read_log("The job is killed: out of memory on the host, 64 GB RAM.\n").is_oom
    assert not read_log("OOM on the CPU side while loading the dataset to the GPU.\n").is_oom


def test_oom_without_a_gpu_word_is_not_read():
    assert not read_log("The script runs out of memory after an hour.\n").is_oom


def test_a_machine_line_no_form_reads_is_not_prose():
    # a source location and an error tag before the words: a message, not a sentence
    text = "`ggml/src/ggml-cuda/ggml-cuda.cu:444: HipVMM Failure: out of memory\n`\n"
    assert not read_log(text).is_oom


def test_words_beside_an_exception_or_a_host_kill_are_not_read():
    # an exception line: the paste holds an error message, which decides
    text = "I get a CUDA OOM sometimes, but now:\nValueError: bad shape\n"
    assert not read_log(text).is_oom
    # a host-RAM kill (a near miss) decides too
    text = (
        "My GPU out of memory problem again?\n"
        "RuntimeError: DataLoader worker (pid 629) is killed by signal: Killed.\n"
    )
    assert not read_log(text).is_oom


def test_a_real_message_wins_over_the_words():
    text = (
        "I keep getting CUDA OOM:\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
        "total capacity of 23.64 GiB of which 2.00 MiB is free.\n"
    )
    r = reading(text)
    assert r.primary.kind == "allocation"
    assert r.primary.figures["tried_to_allocate_bytes"] == 20 * MiB


def test_prose_reading_is_bounded():
    words = "lorem ipsum " * (MAX_PROSE_CHARS // 6)
    assert reported_oom([words + " CUDA out of memory"]) is None
    assert reported_oom(["CUDA out of memory " + words]) is not None


def test_the_cli_says_the_error_was_named_in_words(tmp_path):
    log = tmp_path / "issue.txt"
    log.write_text("After a few steps I encounter a CUDA out-of-memory error.\n")
    out = subprocess.run(
        [sys.executable, "-m", "vramtui", "triage", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "in the reporter's words" in out.stdout
    assert "no error message" in out.stdout


# ------------------------------------------------------------- MIOpen and XLA


def test_miopens_buffer_failure_is_a_rocm_oom_with_its_request_in_bytes():
    text = (
        "MIOpen Error: /data/repo/MIOpen/src/hip/handlehip.cpp:70: Memory not available to "
        "allocate buffer: 655360000\n"
    )
    r = reading(text)
    assert r.framework == "rocm"
    assert r.primary.figures["tried_to_allocate_bytes"] == 655_360_000
    assert r.primary.as_written["tried_to_allocate_bytes"] == "655360000"


def test_a_sentence_about_buffers_is_not_miopens_message():
    assert not read_log("Memory not available to allocate buffer pools is a config knob.\n").is_oom


def test_xla_device_buffer_message_requoted_one_sentence_per_line():
    text = (
        "RESOURCE_EXHAUSTED: Error allocating device buffer: \n"
        "Attempting to allocate 1.96G. \n"
        "That was not possible. \n"
        "There are 3.46G free. \n"
    )
    r = reading(text)
    # XLA's "G" is 2^30 (tsl's HumanReadableNumBytes): 1.96 x 2^30 = 2104533975.04
    assert r.primary.figures["tried_to_allocate_bytes"] == 2_104_533_975
    assert r.primary.figures["free_bytes"] == 3_715_146_711


def test_xla_device_buffer_heading_alone_is_not_read_as_a_figure():
    text = "RESOURCE_EXHAUSTED: Error allocating device buffer: \n(see the log above)\n"
    r = read_log(text)
    assert "tried_to_allocate_bytes" not in (r.primary.figures if r.primary else {})


# ------------------------------------------------------------- Caffe's glog stack

_CAFFE_HEAD = (
    "F0903 14:31:26.106397 92421 syncedmem.cpp:56] Check failed: error == cudaSuccess "
    "(2 vs. 0)  out of memory\n"
    "*** Check failure stack trace: ***\n"
    "    @     0x7fd08aa5c5cd  google::LogMessage::Fail()\n"
    "    @     0x7fd08b2290e0  caffe::SyncedMemory::to_gpu()\n"
    "    @     0x7fd08b390282  caffe::Blob<>::mutable_gpu_data()\n"
)


def test_caffe_forward_under_the_solver_is_the_training_forward():
    text = _CAFFE_HEAD + (
        "    @     0x7fd08b3eb296  caffe::ConvolutionLayer<>::Forward_gpu()\n"
        "    @     0x7fd08b1f15f2  caffe::Net<>::ForwardFromTo()\n"
        "    @     0x7fd08b3a6eca  caffe::Solver<>::Solve()\n"
        "    @           0x40ada0  train()\n"
    )
    assert read_log(text).phase.phase == "train_forward"


def test_caffe_backward_is_the_backward_pass():
    text = _CAFFE_HEAD + (
        "    @     0x7fd08b3eb296  caffe::ConvolutionLayer<>::Backward_gpu()\n"
        "    @     0x7fd08b1f15f2  caffe::Net<>::BackwardFromTo()\n"
        "    @     0x7fd08b3a6eca  caffe::Solver<>::Step()\n"
    )
    assert read_log(text).phase.phase == "backward"


def test_caffe_forward_with_no_solver_is_inference():
    text = _CAFFE_HEAD + (
        "    @     0x7f90fe3d4410  caffe::CuDNNConvolutionLayer<>::Forward_gpu()\n"
        "    @     0x7f90fe34b2e2  caffe::Net<>::ForwardFromTo()\n"
        "    @     0x7f910ec04b49  op::NetCaffe::forwardPass()\n"
        "    @     0x55a0dc974c80  findpose()\n"
    )
    assert read_log(text).phase.phase == "generate"


def test_a_native_stack_that_is_not_caffe_is_left_to_the_other_rules():
    text = (
        "F0903 14:31:26.106397 92421 alloc.cc:56] Check failed: error == cudaSuccess "
        "(2 vs. 0)  out of memory\n"
        "    @     0x7fd08b3eb296  mylib::Net::Forward()\n"
        "    @     0x7fd08b3a6eca  mylib::Solver::Solve()\n"
    )
    assert read_log(text).phase.phase != "train_forward"


# ------------------------------------------------------------- TensorFlow 1.x, torch, constructors


def test_tf1_caused_by_op_with_python2s_unicode_prefix_names_a_gradient_op():
    text = (
        "2017-12-15 17:45:48.103914: W tensorflow/core/framework/op_kernel.cc:1192] Resource "
        "exhausted: OOM when allocating tensor with shape[500,15000]\n"
        "Caused by op u'decoder/gradients/decoder/while/Select_1_grad/zeros_like', defined at:\n"
        '  File "train.py", line 227, in <module>\n'
    )
    assert read_log(text).phase.phase == "backward"


def test_tf1_caused_by_a_forward_op_is_not_backward():
    text = (
        "Resource exhausted: OOM when allocating tensor with shape[500,15000]\n"
        "Caused by op u'decoder/dense/MatMul', defined at:\n"
    )
    assert read_log(text).phase.phase != "backward"


_TORCH_2X = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total "
    "capacity of 24.00 GiB of which 0 bytes is free. Of the allocated memory 22.89 GiB is "
    "allocated by PyTorch, and 355.13 MiB is reserved by PyTorch but unallocated.\n"
)


def test_module_to_cut_to_return_t_to_is_the_model_moving_to_the_gpu():
    assert read_log("`   return t.to(\n" + _TORCH_2X).phase.phase == "load"


def test_a_whole_return_t_to_statement_is_not_that_line():
    # a helper's cast, whole on its line: not Module.to's convert() cut after its "("
    text = "    return t.to(torch.float16) * scale\n" + _TORCH_2X
    assert read_log(text).phase.phase != "load"


def test_a_traceback_ending_in_constructors_is_building_the_model():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/usr/tmp.py", line 78, in <module>\n'
        '    encoding = tcnn.Encoding(3, config["encoding"])\n'
        '  File "/site-packages/tinycudann/modules.py", line 324, in __init__\n'
        "    super(Encoding, self).__init__(seed=seed)\n"
        '  File "/site-packages/tinycudann/modules.py", line 170, in __init__\n'
        "    initial_params = self.native_tcnn_module.initial_params(seed)\n"
        "RuntimeError: CUDA error: out of memory\n"
    )
    assert read_log(text).phase.phase == "load"


def test_constructors_under_a_step_function_are_not_taken_as_load():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/usr/tmp.py", line 78, in <module>\n'
        "    run(model, batch)\n"
        '  File "/site-packages/lib/buffers.py", line 10, in __init__\n'
        "    self.buf = torch.empty(n, device='cuda')\n"
        "RuntimeError: CUDA error: out of memory\n"
    )
    assert read_log(text).phase.phase != "load"
