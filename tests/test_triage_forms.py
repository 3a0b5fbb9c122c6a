"""The message families the triage reader recognises (`vramtui.triage.oom_forms`) and the figures
each carries, to the byte.

Every excerpt is written as the printing framework's source writes it. Bytes are worked by hand
in the printer's convention (KiB/MiB/GiB = 2^10/2^20/2^30; TensorFlow's and XLA's
HumanReadableNumBytes are 1024-based too), value x unit rounded to the nearest byte; the
arithmetic is in the comments.
"""

from __future__ import annotations

import pytest

from vramtui.triage import advice
from vramtui.triage.oom_forms import FRAMEWORKS, PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS
from vramtui.triage.reader import read_log
from vramtui.units import parse_bytes

GiB = 1024**3
MiB = 1024**2


def first_failure(text: str):
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return next(e for e in r.events if e.kind != "startup")


# ------------------------------------------------------------------------------ PyTorch variants


def test_xpu_parenthesised_form_after_a_stdin_frame():
    # Python prints no source line under File "<stdin>": the exception line follows the header
    ev = first_failure(
        "Traceback (most recent call last):\n"
        '  File "<stdin>", line 1, in <module>\n'
        "RuntimeError: XPU out of memory. Tried to allocate 1.71 GiB (GPU 0; 15.56 GiB total "
        "capacity; 176.00 MiB already allocated; 176.00 MiB reserved in total by PyTorch)\n"
    )
    assert (ev.framework, ev.kind, ev.gpu_index) == ("xpu", "allocation", 0)
    assert ev.figures == {
        "tried_to_allocate_bytes": 1_836_098_519,  # 1.71 x 1,073,741,824 = ...519.04
        "total_capacity_bytes": 16_707_422_781,  # 15.56 x 1,073,741,824 = ...781.44
        "already_allocated_bytes": 184_549_376,  # 176 x 1,048,576
        "reserved_total_bytes": 184_549_376,
    }


def test_xpu_sentence_form():
    ev = first_failure(
        "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 8.00 GiB. GPU 0 has a "
        "total capacity of 15.11 GiB. Of the allocated memory 0 bytes is allocated by PyTorch, "
        "and 0 bytes is reserved by PyTorch but unallocated. Please use `empty_cache` to "
        "release all unoccupied cached memory."
    )
    assert (ev.framework, ev.gpu_index) == ("xpu", 0)
    assert ev.figures == {
        "tried_to_allocate_bytes": 8 * GiB,
        "total_capacity_bytes": 16_224_238_961,  # 15.11 x 1,073,741,824 = ...960.64
        "allocated_by_pytorch_bytes": 0,
        "reserved_unallocated_bytes": 0,
    }


def test_pytorch_1x_cached_is_reserved_but_unallocated():
    # PyTorch 1.0-1.3: format_size(stats.amount_cached - stats.amount_allocated), " cached)";
    # here 14.29 MiB "cached" beside 775.71 MiB allocated could not be the whole reserve
    ev = first_failure(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.93 GiB total "
        "capacity; 775.71 MiB already allocated; 14.88 MiB free; 14.29 MiB cached)"
    )
    assert ev.figures == {
        "tried_to_allocate_bytes": 20_971_520,  # 20 x 1,048,576
        "total_capacity_bytes": 8_514_772_664,  # 7.93 x 1,073,741,824 = ...664.32
        "free_bytes": 15_602_811,  # 14.88 x 1,048,576 = ...810.88
        "reserved_unallocated_bytes": 14_984_151,  # 14.29 x 1,048,576 = ...151.04
        "already_allocated_bytes": 813_390_889,  # 775.71 x 1,048,576 = ...888.96
    }
    assert "reserved_total_bytes" not in ev.figures


def test_pytorch_21_capacty_typo_reads_the_capacity():
    ev = first_failure(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 60.00 MiB. GPU 0 has "
        "a total capacty of 11.00 GiB of which 4.48 GiB is free. Of the allocated memory 5.19 "
        "GiB is allocated by PyTorch, and 283.84 MiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting max_split_size_mb to avoid "
        "fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
    )
    assert ev.gpu_index == 0
    assert ev.figures == {
        "tried_to_allocate_bytes": 62_914_560,  # 60 x 1,048,576
        "total_capacity_bytes": 11_811_160_064,  # 11 x 1,073,741,824
        "free_bytes": 4_810_363_372,  # 4.48 x 1,073,741,824 = ...371.52
        "allocated_by_pytorch_bytes": 5_572_720_067,  # 5.19 x 1,073,741,824 = ...066.56
        "reserved_unallocated_bytes": 297_627_812,  # 283.84 x 1,048,576 = ...811.84
    }


def test_a_retyped_lower_case_message_is_read():
    ev = first_failure(
        "but l got this problem `cuda out of memory, tried to allocate 50MiB(GPU 0; 1.96GiB "
        "totalcapacity;1.33GiB already allocated; 43.5MiB free;1.36 GiB reserved in total by "
        "Pytorch)`"
    )
    assert ev.framework == "pytorch"
    assert ev.figures == {
        "tried_to_allocate_bytes": 52_428_800,  # 50 x 1,048,576
        "total_capacity_bytes": 2_104_533_975,  # 1.96 x 1,073,741,824 = ...975.04
        "free_bytes": 45_613_056,  # 43.5 x 1,048,576
        "reserved_total_bytes": 1_460_288_881,  # 1.36 x 1,073,741,824 = ...880.64
        "already_allocated_bytes": 1_428_076_626,  # 1.33 x 1,073,741,824 = ...625.92
    }


def test_prose_naming_the_error_is_not_the_message():
    r = read_log(
        "but am now getting CUDA out of memory error:\n"
        "`RuntimeError: CUDA out of memory. Tried to allocate 4.00 GiB (GPU 0; 47.54 GiB total "
        "capacity; 30.76 GiB already allocated; 1.22 GiB free; 33.29 GiB reserved in total by "
        "PyTorch)`"
    )
    assert len(r.events) == 1
    assert r.events[0].line_no == 2
    assert r.events[0].figures["tried_to_allocate_bytes"] == 4 * GiB
    # the sentence alone is no message: read only as the reporter's words, with no figures
    words = read_log("I keep getting CUDA out of memory errors with SDXL")
    assert [e.kind for e in words.events] == ["reported"]
    assert words.primary.figures == {}


def test_a_paste_cut_inside_the_sentence_keeps_the_figures_it_shows():
    ev = first_failure(
        "CUDA out of memory. Tried to allocate 42.00 MiB. GPU 0 has a total capacty of 39.39 GiB "
        "of which 31.94 MiB is free. Process 7529 has 39.23 GiB memory in use. Of the "
        "allocated memory 37.21 GiB is allo"
    )
    assert ev.figures["allocated_by_pytorch_bytes"] == 39_953_933_271  # 37.21 x 2^30 = ...271.04
    assert ev.figures["process_in_use_bytes"] == 42_122_891_756  # 39.23 x 2^30 = ...755.52
    cut = first_failure(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 260.00 MiB. GPU 1 has a "
        "total capacity of 23.53 GiB of which 190.50 MiB is free. Including non-PyTorch memory, "
        "this process has 23.33 GiB memory in use. Of the allocated memory 22.70 GiB is "
        "allocated by PyTorch, and 87.85 MiB is reserved by PyTorch b"
    )
    assert cut.figures["reserved_unallocated_bytes"] == 92_117_402  # 87.85 x 2^20 = ...401.6


def test_jupyter_traceback_header_is_an_oom():
    r = read_log(
        "---------------------------------------------------------------------------\n"
        "OutOfMemoryError                          Traceback (most recent call last)\n"
    )
    assert r.is_oom and r.framework == "pytorch"


def test_a_record_continued_under_the_service_prefix_alone():
    # docker compose tags every line; the logger stamps only the record's first line
    ev = first_failure(
        "api-1  | 2025-03-14 11:05:29.634 ERROR:    torch.OutOfMemoryError: CUDA out of memory.\n"
        "api-1  | Tried to allocate 260.00 MiB. GPU 1 has a total capacity of 23.53 GiB of which\n"
        "api-1  | 190.50 MiB is free. Including non-PyTorch memory, this process has 23.33 GiB\n"
        "api-1  | memory in use. Of the allocated memory 22.70 GiB is allocated by PyTorch, and\n"
        "api-1  | 87.85 MiB is reserved by PyTorch but unallocated.\n"
    )
    assert ev.gpu_index == 1
    assert ev.figures == {
        "tried_to_allocate_bytes": 272_629_760,  # 260 x 1,048,576
        "total_capacity_bytes": 25_265_145_119,  # 23.53 x 1,073,741,824 = ...118.72
        "free_bytes": 199_753_728,  # 190.5 x 1,048,576
        "process_in_use_bytes": 25_050_396_754,  # 23.33 x 1,073,741,824 = ...753.92
        "allocated_by_pytorch_bytes": 24_373_939_405,  # 22.70 x 1,073,741,824 = ...404.8
        "reserved_unallocated_bytes": 92_117_402,  # 87.85 x 1,048,576 = ...401.6
    }


# ------------------------------------------------------------------------------ "Process N has X"

_HEAD = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB. GPU 6 has a "
    "total capacity of 23.65 GiB of which 208.06 MiB is free. "
)
_TAIL = (
    "Of the allocated memory 22.87 GiB is allocated by PyTorch, and 6.23 MiB is reserved by "
    "PyTorch but unallocated."
)


def test_the_job_in_a_container_is_its_own_process_line():
    ev = first_failure(_HEAD + "Process 2271801 has 23.44 GiB memory in use. " + _TAIL)
    # 23.44 GiB >= the 22.87 GiB PyTorch allocated: the job, not a stranger
    assert ev.figures["process_in_use_bytes"] == 25_168_508_355  # 23.44 x 2^30 = ...354.56
    assert "other_processes_total_bytes" not in ev.figures
    assert ev.figure_list("other_processes_bytes") == ()


def test_the_job_among_other_processes():
    ev = first_failure(
        _HEAD + "Process 11 has 398.00 MiB memory in use. Process 12 has 398.00 MiB memory in use. "
        "Process 10 has 23.44 GiB memory in use. " + _TAIL
    )
    assert ev.figures["process_in_use_bytes"] == 25_168_508_355
    assert ev.figures["other_processes_total_bytes"] == 834_666_496  # 2 x 398 x 1,048,576
    assert ev.as_written["other_processes_total_bytes"] == "398.00 MiB + 398.00 MiB"
    assert ev.figure_lists["other_processes_bytes"] == (417_333_248, 417_333_248)


def test_this_process_named_makes_every_process_line_another():
    ev = first_failure(
        _HEAD + "Process 11 has 512.00 MiB memory in use. Including non-PyTorch memory, this "
        "process has 23.00 GiB memory in use. " + _TAIL
    )
    assert ev.figures["process_in_use_bytes"] == 23 * GiB
    assert ev.figures["other_processes_total_bytes"] == 512 * MiB
    assert ev.figure_list("other_processes_bytes") == (512 * MiB,)


def test_lines_smaller_than_the_allocation_are_other_processes():
    ev = first_failure(_HEAD + "Process 11 has 700.00 MiB memory in use. " + _TAIL)
    assert "process_in_use_bytes" not in ev.figures
    assert ev.figures["other_processes_total_bytes"] == 734_003_200  # 700 x 1,048,576
    assert ev.figure_lists["other_processes_bytes"] == (734_003_200,)


def test_two_lines_large_enough_to_be_the_job_are_left_unread():
    ev = first_failure(
        _HEAD + "Process 11 has 23.10 GiB memory in use. Process 12 has 23.20 GiB memory in "
        "use. " + _TAIL
    )
    assert "process_in_use_bytes" not in ev.figures
    assert "other_processes_total_bytes" not in ev.figures
    assert ev.figure_lists == {}


# ------------------------------------------------------------------------------ fraction limit


def test_cuda_malloc_async_fraction_message_in_a_comfyui_report():
    ev = first_failure(
        "!!! Exception during processing !!! Allocation on device 0 would exceed allowed "
        "memory. (out of memory)\n"
        "Currently allocated     : 11.11 GiB\n"
        "Requested               : 128.00 MiB\n"
        "Device limit            : 12.00 GiB\n"
        "Free (according to CUDA): 0 bytes\n"
        "PyTorch limit (set by user-supplied memory fraction)\n"
        "                        : 17179869184.00 GiB\n"
    )
    assert (ev.framework, ev.kind, ev.gpu_index) == ("comfyui", "allocation", 0)
    assert ev.figures == {
        "tried_to_allocate_bytes": 134_217_728,  # 128 x 1,048,576
        "total_capacity_bytes": 12 * GiB,
        "free_bytes": 0,
        "already_allocated_bytes": 11_929_271_665,  # 11.11 x 1,073,741,824 = ...664.64
        "allowed_bytes": 2**64,  # 2^34 GiB: no limit set; exact, not a float's 1.8446744e19
    }


def test_tgi_warmup_panic_quoting_the_fraction_message():
    ev = first_failure(
        "thread 'main' panicked at 'Unable to warmup model: Generation(\"Allocation on device 0 "
        "would exceed allowed memory. (out of memory)\\nCurrently allocated     : 16.08 GiB\\n"
        "Requested               : 4.83 GiB\\nDevice limit            : 22.20 GiB\\nFree "
        "(according to CUDA): 11.12 MiB\\nPyTorch limit (set by user-supplied memory fraction)"
        "\\n                        : 22.20 GiB\")', router/src/main.rs:216:18"
    )
    assert ev.framework == "tgi"
    assert ev.figures == {
        "tried_to_allocate_bytes": 5_186_173_010,  # 4.83 x 1,073,741,824 = ...009.92
        "total_capacity_bytes": 23_837_068_493,  # 22.20 x 1,073,741,824 = ...492.8
        "free_bytes": 11_660_165,  # 11.12 x 1,048,576 = ...165.12
        "already_allocated_bytes": 17_265_768_530,  # 16.08 x 1,073,741,824 = ...529.92
        "allowed_bytes": 23_837_068_493,
    }


def test_plain_pytorch_fraction_message():
    ev = first_failure(
        "torch.OutOfMemoryError: Allocation on device 1 would exceed allowed memory. (out of "
        "memory)"
    )
    assert (ev.framework, ev.gpu_index) == ("pytorch", 1)


# ------------------------------------------------------------------------------ TensorFlow / XLA


def test_tensorflow_oom_when_allocating_tensor():
    ev = first_failure(
        "ResourceExhaustedError: 2 root error(s) found.\n"
        "  (0) Resource exhausted: OOM when allocating tensor with shape[16,112,112,147] and "
        "type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
    )
    assert (ev.framework, ev.kind, ev.gpu_index) == ("tensorflow", "allocation", 0)
    assert ev.figures == {}  # a shape, not a byte count


def test_tensorflow_bfc_failure_reads_the_exact_rounded_size():
    ev = first_failure(
        "2023-01-01 10:00:00.000000: W tensorflow/tsl/framework/bfc_allocator.cc:479] Allocator "
        "(GPU_0_bfc) ran out of memory trying to allocate 1.00GiB (rounded to 1073741824)"
        "requested by op MatMul"
    )
    assert (ev.framework, ev.gpu_index) == ("tensorflow", 0)
    assert ev.figures == {"tried_to_allocate_bytes": 1_073_741_824}


def test_bfc_failure_with_only_the_readable_size_is_1024_based():
    ev = first_failure(
        "W tensorflow/core/common_runtime/bfc_allocator.cc:217] Allocator (GPU_1_bfc) ran out "
        "of memory trying to allocate 84.60MiB.  Current allocation summary follows."
    )
    assert ev.gpu_index == 1
    assert ev.figures == {"tried_to_allocate_bytes": 88_709_530}  # 84.6 x 1,048,576 = ...529.6


def test_bfc_retry_warning_is_not_a_failure():
    r = read_log(
        "W tensorflow/core/common_runtime/bfc_allocator.cc:275] Allocator (GPU_0_bfc) ran out "
        "of memory trying to allocate 2.10GiB with freed_by_count=0. The caller indicates that "
        "this is not a failure, but may mean that there could be performance gains if more "
        "memory were available."
    )
    assert not r.is_oom


def test_stream_executor_failed_to_allocate_reads_the_exact_bytes():
    ev = first_failure(
        "2025-03-17 17:48:09.854267: I tensorflow/stream_executor/cuda/cuda_driver.cc:739] "
        "failed to allocate 2.12G (2282521344 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out "
        "of memory"
    )
    assert ev.framework == "tensorflow"
    assert ev.figures == {"tried_to_allocate_bytes": 2_282_521_344}
    hip = first_failure(
        "E tensorflow/stream_executor/rocm/rocm_driver.cc:601] failed to allocate 7.35G "
        "(7889485824 bytes) from device: hipError_t(1002)"
    )
    assert hip.framework == "tensorflow"
    assert hip.figures == {"tried_to_allocate_bytes": 7_889_485_824}


def test_xla_out_of_memory_inside_tensorflow():
    ev = first_failure(
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: 2 root error(s) found.\n"
        "  (0) Resource exhausted: Out of memory while trying to allocate 68852648264 bytes.\n"
        "         [[{{node cluster_0_1/xla_run}}]]\n"
    )
    assert ev.framework == "tensorflow"
    assert ev.figures == {"tried_to_allocate_bytes": 68_852_648_264}


def test_jax_resource_exhausted():
    ev = first_failure(
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
        "to allocate 6291456 bytes.\nBufferAssignment OOM Debugging.\n"
    )
    assert (ev.framework, ev.kind) == ("jax", "allocation")
    assert ev.figures == {"tried_to_allocate_bytes": 6_291_456}
    readable = first_failure(
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4.00GiB."
    )
    assert readable.figures == {"tried_to_allocate_bytes": 4 * GiB}


def test_jax_message_wrapped_by_the_terminal():
    ev = first_failure(
        "2019-06-13 01:17:08.886805: E external/org_tensorflow/tensorflow/compiler/xla/python/"
        "local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out \n"
        "of memory while trying to allocate 5520758552 bytes.\n"
    )
    assert ev.framework == "jax"
    assert ev.figures == {"tried_to_allocate_bytes": 5_520_758_552}


def test_xla_without_a_host_framework_is_labelled_xla():
    ev = first_failure(
        "[error] Execution of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying "
        "to allocate 58982400 bytes."
    )
    assert ev.framework == "xla"
    assert ev.figures == {"tried_to_allocate_bytes": 58_982_400}


# ------------------------------------------------------------------------------ other engines


def test_tensorrt_llm_executor_creation_figures_across_blank_lines():
    ev = first_failure(
        "[07/08/2025-19:47:15] [TRT-LLM] [RANK 1] [E] Failed to initialize executor on rank 1: "
        "Executor creation failed due to insufficient GPU memory.\n"
        "\n"
        "The following component could not be created: KV cache\n"
        "Total GPU memory (GiB): 140.06\n"
        "Free GPU memory before component creation attempt (GiB): 108.86\n"
        "\n"
        "Previously created components and free GPU memory before/after creation (GiB):\n"
        "Model: 139.55 / 110.70\n"
    )
    assert (ev.framework, ev.kind) == ("tensorrt-llm", "allocation")
    assert ev.figures == {
        "total_capacity_bytes": 150_388_279_869,  # 140.06 x 1,073,741,824 = ...869.44
        "free_bytes": 116_887_534_961,  # 108.86 x 1,073,741,824 = ...960.64
    }


def test_tensorrt_llm_runtime_error_through_the_generic_form():
    ev = first_failure(
        "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: [TensorRT-LLM][ERROR] CUDA "
        "runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory"
    )
    assert ev.framework == "tensorrt-llm"


def test_tensorrt_requested_amount_could_not_be_allocated():
    ev = first_failure(
        "[W] [TRT] Requested amount of GPU memory (1073741824 bytes) could not be allocated. "
        "There may not be enough free memory for allocation to succeed."
    )
    assert ev.framework == "tensorrt"
    assert ev.figures == {"tried_to_allocate_bytes": 1_073_741_824}


def test_ctranslate2_cuda_failed_with_error():
    ev = first_failure(
        "Traceback (most recent call last):\n"
        'File "faster_whisper\\transcribe.py", line 125, in init\n'
        "RuntimeError: CUDA failed with error out of memory\n"
    )
    assert (ev.framework, ev.kind) == ("ctranslate2", "allocation")


def test_onnxruntime_arena_and_cuda_failure():
    ev = first_failure(
        "[E:onnxruntime:, sequential_executor.cc:514 ExecuteKernel] Non-zero status code "
        "returned while running Conv node. Name:'Conv_0' Status Message: /onnxruntime_src/"
        "onnxruntime/core/framework/bfc_arena.cc:376 void* onnxruntime::BFCArena::"
        "AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, onnxruntime::"
        "WaitNotificationFn) Failed to allocate memory for requested buffer of size 2147483648"
    )
    assert ev.framework == "onnxruntime"
    assert ev.figures == {"tried_to_allocate_bytes": 2 * GiB}
    cuda = first_failure(
        "CUDA failure 2: out of memory ; GPU=3 ; hostname=box ; file=/onnxruntime_src/"
        "onnxruntime/core/providers/cuda/cuda_allocator.cc ; line=47 ; expr=cudaMalloc("
        "(void**)&p, size);"
    )
    assert (cuda.framework, cuda.gpu_index) == ("onnxruntime", 3)


def test_old_ggml_cuda_error_line():
    ev = first_failure(
        "CUDA error 2 at /home/runner/work/wheels/vendor/llama.cpp/ggml-cuda.cu:7949: out of "
        "memory\ncurrent device: 0\n"
    )
    assert ev.framework == "llama.cpp"


def test_mlx_metal_errors():
    ev = first_failure(
        "libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] "
        "Command buffer execution failed: Insufficient Memory "
        "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"
    )
    assert ev.framework == "mlx"
    alloc = first_failure("RuntimeError: [metal::malloc] Unable to allocate 34359738368 bytes.")
    assert (alloc.framework, alloc.figures) == ("mlx", {"tried_to_allocate_bytes": 32 * GiB})


# ------------------------------------------------------------------------------ not GPU OOMs


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: [enforce fail at alloc_cpu.cpp:72] data. DefaultCPUAllocator: not enough "
        "memory: you tried to allocate 151781376 bytes.",
        'Wanted to start SD today, suddenly getting the error "RuntimeError: [enforce fail at '
        "..\\c10\\core\\impl\\alloc_cpu.cpp:72] data. DefaultCPUAllocator: not enough memory: you "
        'tried to allocate 151781376 bytes."',
        "09:21:20.184 ERROR cpu Error:  data. DefaultCPUAllocator: not enough memory: you tried "
        "to allocate 6553600 bytes.",
    ],
)
def test_pytorch_cpu_allocator_is_host_ram_not_a_gpu_oom(text):
    r = read_log(text)
    assert not r.is_oom
    assert "system RAM" in r.not_oom_reason


def test_xpu_single_block_limit_is_not_exhaustion():
    r = read_log(
        "RuntimeError: Current platform can NOT allocate memory block with size larger than 4GB! "
        "Tried to allocate 6.85 GiB (GPU  0; 15.56 GiB total capacity; 0 bytes already "
        "allocated; 0 bytes reserved in total by PyTorch)"
    )
    assert not r.is_oom
    assert "limit on one allocation" in r.not_oom_reason


# ------------------------------------------------------------------------------ consumers


def test_every_framework_a_form_names_is_listed():
    for name in (
        "comfyui",
        "tensorflow",
        "jax",
        "xla",
        "tensorrt",
        "tensorrt-llm",
        "ctranslate2",
        "onnxruntime",
        "lmdeploy",
        "mlx",
    ):
        assert name in FRAMEWORKS
    assert set(PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS) <= set(FRAMEWORKS)
    for other in ("tensorflow", "jax", "xla", "xpu", "mps", "onnxruntime", "llama.cpp"):
        assert other not in PYTORCH_CUDA_ALLOCATOR_FRAMEWORKS


def test_expandable_segments_advice_only_for_pytorchs_cuda_allocator():
    # 8.00 GiB reserved, 2.00 GiB allocated: 6 GiB of slack, far above the quarter-GiB floor
    figures = (
        "Tried to allocate 1.00 GiB (GPU 0; 15.56 GiB total capacity; 2.00 GiB already "
        "allocated; 8.00 GiB reserved in total by PyTorch)"
    )
    cuda = read_log("RuntimeError: CUDA out of memory. " + figures)
    xpu = read_log("RuntimeError: XPU out of memory. " + figures)
    recs = advice._allocator(cuda, 15 * GiB, 9 * GiB)
    assert [r.variable for r in recs] == ["allocator"]
    assert "PYTORCH_CUDA_ALLOC_CONF" in recs[0].change
    assert advice._allocator(xpu, 15 * GiB, 9 * GiB) == []


# ------------------------------------------------------------------------------ units


def test_decimal_quantities_are_exact_and_round_half_to_even():
    assert parse_bytes("9007199254740993") == 9_007_199_254_740_993  # 2^53 + 1: a float loses it
    assert parse_bytes("17179869184.00 GiB") == 2**64
    assert parse_bytes("9.54 GiB") == 10_243_497_001  # 9.54 x 1,073,741,824 = ...000.96
    assert (parse_bytes("0.5 B"), parse_bytes("1.5 B"), parse_bytes("2.5 B")) == (0, 2, 2)


# ------------------------------------------------------------------------------ bounds


@pytest.mark.parametrize(
    "text",
    [
        ("Resource exhausted: Out\n" + " " * 3_000 + "\n") * 200,
        "Allocator (GPU_0_bfc) ran out of memory trying to allocate " * 3_000,
        "CUDA out of memory. Tried to allocate 1.00 GiB. "
        + "Process 1 has 1.00 GiB memory in use. " * 5_000,
        "Allocation on device 0 would exceed allowed memory. (out of memory)\n"
        + "PyTorch limit (set by user-supplied memory fraction)"
        + " " * 20_000,
        "CUDA error 2 at " + "a" * 20_000 + ": out of memory",
        ('  File "x.py", line 1, in f\n' + "a." * 5_000 + "Error: x\n") * 10,
        "Executor creation failed due to insufficient GPU memory.\n\n\n" * 2_000,
        # round 9: a 1.x message whose last figure is followed by a long run of words
        "CUDA out of memory. Tried to allocate 1.00 GiB (GPU 0; 1.00 GiB free; 2.00 GiB "
        + "re" * 20_000,
        "vkAllocateMemory failed " * 5_000 + "-2",
        "Error Code 2: " * 5_000 + "OutOfMemory",
        "MTLCommandBufferErrorDomain Code=" * 5_000 + "8",
        "alloc failed (" * 5_000 + "64.00 MiB): out of memory",
    ],
)
def test_new_forms_stay_linear_on_hostile_text(text):
    import time

    start = time.perf_counter()
    read_log(text)
    assert time.perf_counter() - start < 3.0
