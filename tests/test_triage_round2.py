"""Message families and stage rules added for the second round of the real-report corpus.

Each excerpt is written in the shape the printing framework's source gives it (quoted in the
comments); bytes are worked by hand in the printer's convention (KiB/MiB/GiB = 2^10/2^20/2^30,
vLLM's and XLA's too), value x unit rounded to the nearest byte.
"""

from __future__ import annotations

import pytest

from vramtui.triage.reader import read_log

GiB = 1024**3
MiB = 1024**2


def first_failure(text: str):
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return next(e for e in r.events if e.kind != "startup")


def stage(text: str) -> tuple[str, str]:
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return r.phase.phase, r.phase.reason


# ------------------------------------------------------------------------------ message families


def test_no_valid_cudnn_algorithm_is_an_allocation_failure():
    # aten/src/ATen/native/cudnn/Conv_v7.cpp: every algorithm whose workspace raised
    # CUDAOutOfMemoryError is skipped, then TORCH_CHECK(false, "Unable to find a valid cuDNN
    # algorithm to run convolution")
    ev = first_failure("RuntimeError: Unable to find a valid cuDNN algorithm to run convolution\n")
    assert (ev.framework, ev.kind, ev.figures) == ("pytorch", "allocation", {})


def test_no_valid_cudnn_algorithm_in_onnxruntime_names_onnxruntime():
    ev = first_failure(
        "onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : "
        "conv_grad.cc:120 Unable to find a valid cuDNN algorithm to run convolution.\n"
    )
    assert ev.framework == "onnxruntime"


def test_tensorflow_cudnn_scratch_space_failure():
    # tensorflow/core/kernels/conv_ops_gpu.cc: errors::Unknown("CUDNN failed to allocate the
    # scratch space for the runner or to find a working no-scratch runner.")
    ev = first_failure(
        "tensorflow.python.framework.errors_impl.UnknownError: Graph execution error:\n"
        "CUDNN failed to allocate the scratch space for the runner or to find a working "
        "no-scratch runner.\n"
    )
    assert (ev.framework, ev.kind) == ("tensorflow", "allocation")


def test_vulkan_out_of_device_memory():
    ev = first_failure(
        "src/runtime/vulkan/vulkan_buffer.cc:61: InternalError: Check failed: (__e == VK_SUCCESS)"
        " is false: Vulkan Error, code=-2: VK_ERROR_OUT_OF_DEVICE_MEMORY\n"
    )
    assert (ev.framework, ev.kind) == ("vulkan", "allocation")


def test_nccl_cuda_failure_reads_the_size_nccl_names_after_it():
    # NCCL include/alloc.h: CUDACHECK prints WARN("Cuda failure '%s'"), then the allocator
    # WARN("Failed to CUDA calloc %ld bytes"); a blank line between them
    ev = first_failure(
        "node7:1201:1388 [2] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n"
        "\n"
        "node7:1201:1388 [2] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 2097152 bytes\n"
        "node7:1201:1388 [2] NCCL INFO transport/p2p.cc:204 -> 1\n"
    )
    assert ev.kind == "allocation"
    assert ev.figures == {"tried_to_allocate_bytes": 2_097_152}  # exact bytes, as printed


def test_nccl_numbered_cuda_failure_under_an_unhandled_cuda_error():
    ev = first_failure(
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "Last error:\n"
        "Cuda failure 2 'out of memory'\n"
    )
    assert ev.kind == "allocation"


def test_nccl_cuda_failure_other_than_memory_is_not_an_oom():
    r = read_log(
        "node7:1201:1388 [0] include/alloc.h:102 NCCL WARN Cuda failure 1 'invalid argument'\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
    )
    assert not r.is_oom


def test_negative_vllm_kv_budget_is_a_failure_at_start_up():
    # vLLM logs "Available KV cache memory: %.2f GiB" (GiB = 2^30) after profiling; below zero
    # the engine refuses to start. -1.50 GiB = -1.5 x 2^30 = -1,610,612,736 B
    text = (
        "(EngineCore_DP0 pid=90) INFO 01-02 10:00:00 [gpu_worker.py:298] Available KV cache "
        "memory: -1.50 GiB\n"
        "(EngineCore_DP0 pid=90) ERROR 01-02 10:00:00 [core.py:708] EngineCore failed to start.\n"
    )
    ev = first_failure(text)
    assert (ev.framework, ev.kind) == ("vllm", "kv_cache")
    assert ev.figures["kv_cache_bytes"] == -1_610_612_736
    assert ev.as_written["kv_cache_bytes"] == "-1.50 GiB"
    assert read_log(text).phase.phase == "load"


def test_positive_vllm_kv_budget_is_only_a_start_up_line():
    r = read_log("INFO 01-02 10:00:00 [gpu_worker.py:298] Available KV cache memory: 10.50 GiB\n")
    assert not r.is_oom
    assert r.events[0].figures["kv_cache_bytes"] == 11_274_289_152  # 10.5 x 2^30


def test_llamacpp_cudamalloc_line_quoted_without_its_function_name():
    # ggml-cuda.cu: "%s: allocating %.2f MiB on device %d: cudaMalloc failed: %s";
    # 1024.50 MiB = 1024.5 x 2^20 = 1,074,266,112 B
    ev = first_failure(
        'Loading fails and it says "allocating 1024.50 MiB on device 1: cudaMalloc failed: '
        'out of memory" although nothing else runs\n'
    )
    assert (ev.framework, ev.gpu_index) == ("llama.cpp", 1)
    assert ev.figures["tried_to_allocate_bytes"] == 1_074_266_112


def test_xla_buffer_assignment_stats_after_the_message():
    # xla/service/buffer_assignment.cc StatsString, HumanReadableNumBytes (1024-based):
    # 1.50GiB = 1.5 x 2^30 = 1,610,612,736 B; 512.25MiB = 512.25 x 2^20 = 537,133,056 B
    ev = first_failure(
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
        "to allocate 1073741824 bytes.\n"
        "BufferAssignment OOM Debugging.\n"
        "BufferAssignment stats:\n"
        "             parameter allocation:    1.50GiB\n"
        "              constant allocation:         0B\n"
        "        maybe_live_out allocation:    2.00GiB\n"
        "     preallocated temp allocation:  512.25MiB\n"
        "                 total allocation:    4.00GiB\n"
    )
    assert ev.framework == "jax"
    assert ev.figures["tried_to_allocate_bytes"] == 1_073_741_824
    assert ev.figures["model_weights_bytes"] == 1_610_612_736
    assert ev.figures["activation_peak_bytes"] == 537_133_056


@pytest.mark.parametrize(
    ("tail", "want"),
    [
        # 100.50 MiB = 100.5 x 2^20 = 105,381,888 B
        (
            "Of the allocated memory 10.00 GiB is allocated by PyTorch, and 100.50 MiB is reserve",
            105_381_888,
        ),
        # 300.25 MiB = 300.25 x 2^20 = 314,834,944 B
        (
            (
                "Of the allocated memory 10.00 GiB is allocated by PyTorch, with 22.00 MiB allocated "
                "in private pools (e.g., CUDA Graphs), and 300.25 MiB is res"
            ),
            314_834_944,
        ),
    ],
)
def test_reserved_figure_of_a_sentence_cut_after_is(tail, want):
    ev = first_failure(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a "
        f"total capacity of 14.74 GiB of which 38.12 MiB is free. {tail}"
    )
    assert ev.figures["reserved_unallocated_bytes"] == want


def test_the_job_is_the_process_holding_what_pytorch_reserved():
    # allocated 7.00 GiB: both 8.50 GiB and 7.25 GiB hold that much; reserved 7.00 + 1.00 =
    # 8.00 GiB: only 8.50 GiB holds it. 8.5 x 2^30 = 9,126,805,504; 7.25 x 2^30 = 7,784,628,224
    ev = first_failure(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a "
        "total capacity of 23.55 GiB of which 512.00 MiB is free. Process 11 has 8.50 GiB "
        "memory in use. Process 12 has 7.25 GiB memory in use. Of the allocated memory 7.00 GiB "
        "is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated."
    )
    assert ev.figures["process_in_use_bytes"] == 9_126_805_504
    assert ev.figures["other_processes_total_bytes"] == 7_784_628_224


def test_a_github_reference_line_is_prose_not_a_comment():
    # "#3 ..." at the start of a line is a numbered note or an issue reference, not Python
    ev = first_failure(
        '#3 the train cell fails with OutOfMemoryError since "CUDA out of memory. Tried to '
        "allocate 2.00 GiB (GPU 0; 14.75 GiB total capacity; 10.00 GiB already allocated; "
        '512.00 MiB free; 12.00 GiB reserved in total by PyTorch)"\n'
    )
    assert ev.figures["tried_to_allocate_bytes"] == 2 * GiB
    assert ev.figures["free_bytes"] == 512 * MiB


# ------------------------------------------------------------------------------ stages

OOM_1X = (
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total "
    "capacity; 60.00 GiB already allocated; 1.00 GiB free; 70.00 GiB reserved in total by PyTorch)"
)
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.65 GiB of which 1.00 GiB is free."
)
SP = "/usr/lib/python3.10/site-packages"


def tb(*frames: tuple[str, str, str]) -> str:
    out = ["Traceback (most recent call last):"]
    for file, func, code in frames:
        out.append(f'  File "{file}", line 10, in {func}')
        if code:
            out.append(f"    {code}")
    return "\n".join(out)


def test_torchscript_backward_op_frame_is_the_backward_pass():
    phase, why = stage(
        "Traceback of TorchScript (most recent call last):\n"
        '  File "<string>", line 83, in <backward op>\n'
        "            def backward(grad_output):\n"
        "                grad_self = torch._softmax_backward_data(grad_output, result, dim)\n"
        f"{OOM_1X}\n"
    )
    assert phase == "backward" and "TorchScript" in why


def test_cpp_stack_trace_through_a_backward_kernel_is_the_backward_pass():
    text = (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"
        "Exception raised from createCublasHandle at ../CublasHandlePool.cpp:8 (most recent "
        "call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x4d (0x7f in libc10.so)\n"
        "frame #1: at::cuda::getCurrentCUDABlasHandle() + 0xb75 (0x7f in libtorch_cuda.so)\n"
        "frame #2: at::native::conv_depthwise3d_backward_out_cuda(at::Tensor const&) + 0x15ef "
        "(0x7f in libtorch_cuda.so)\n"
    )
    phase, why = stage(text)
    assert phase == "backward" and "C++ stack trace" in why
    forward_only = text.replace("conv_depthwise3d_backward_out_cuda", "addmm_out_cuda_impl")
    assert stage(forward_only)[0] == "unknown"


def test_a_function_named_evaluate_something_is_evaluation():
    phase, why = stage(
        tb(
            ("train.py", "<module>", "main()"),
            ("train.py", "test", "stats = evaluator.evaluate_predictions(results, gt)"),
            ("/work/models/common.py", "evaluate_predictions", "r = self.score(scores)"),
            ("/work/models/common.py", "score", "scores[~mask] += bias"),
        )
        + "\n"
        + OOM_1X
    )
    assert phase == "other" and "evaluation" in why


def test_restoring_an_optimizer_state_is_a_load_not_a_step():
    phase, _why = stage(
        tb(
            ("/work/trainers/base_trainer.py", "finalize", "self.checkpoint.restore()"),
            ("/work/utils/checkpoint.py", "restore", 'self.optimizer.load_state_dict(ck["opt"])'),
            (f"{SP}/torch/optim/optimizer.py", "load_state_dict", "state_dict = deepcopy(sd)"),
            ("/usr/lib/python3.10/copy.py", "deepcopy", "y = copier(memo)"),
        )
        + "\n"
        + OOM_1X
    )
    assert phase == "load"


@pytest.mark.parametrize(
    "path",
    ["/work/src/loss/ocr_loss/encoder.py", "/work/models/losses.py", "/work/utils/focal_loss.py"],
)
def test_a_module_of_the_projects_loss_code_is_the_training_forward(path):
    phase, why = stage(
        tb(
            (path, "forward", "out = self.bn3(self.conv3(out))"),
            (f"{SP}/torch/nn/modules/conv.py", "forward", "return self._conv_forward(x, w, b)"),
        )
        + "\n"
        + OOM
    )
    assert phase == "train_forward" and "loss" in why


def test_a_lossless_codec_is_not_a_loss():
    phase, _ = stage(
        tb(("/work/models/lossless_codec.py", "forward", "y = self.conv(x)")) + "\n" + OOM
    )
    assert phase == "unknown"


@pytest.mark.parametrize(
    "frames",
    [
        [
            (f"{SP}/lmdeploy/turbomind/turbomind.py", "_create_model_instance", "m = create()"),
        ],
        [
            ("/content/chat.py", "<module>", "cache = cache_type(model)"),
            ("/content/exllamav2/exllamav2/cache.py", "__init__", "self.create_state_tensors()"),
            (
                "/content/exllamav2/exllamav2/cache.py",
                "create_state_tensors",
                "v = torch.zeros(self.shape_wv, dtype=self.dtype, device=device)",
            ),
        ],
    ],
)
def test_an_engine_building_its_model_instances_or_kv_cache_is_start_up(frames):
    phase, _why = stage(tb(*frames) + "\n" + OOM)
    assert phase == "load"


def test_llamacpp_compute_buffers_re_reserved_while_decoding_are_generation():
    # innermost first: ggml's buffer, the graph allocator, then the caller (kv-cache update
    # runs inside llama_decode); 2048.00 MiB = 2^31 B
    phase, why = stage(
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2048.00 MiB on device 0: "
        "cudaMalloc failed: out of memory\n"
        "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 2147483648\n"
        "llama_kv_cache_update_impl: failed to allocate compute buffers\n"
    )
    assert phase == "generate" and "decode" in why


def test_llamacpp_context_creation_stays_a_load():
    phase, _ = stage(
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144.00 MiB on device 0: "
        "cudaMalloc failed: out of memory\n"
        "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 150994944\n"
        "llama_new_context_with_model: failed to allocate compute buffers\n"
    )
    assert phase == "load"


def test_metal_command_buffer_failing_at_synchronise_is_generation():
    phase, _ = stage(
        "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)\n"
        "ggml_metal_synchronize: error: command buffer 0 failed with status 5\n"
    )
    assert phase == "generate"


def test_fsdp_state_dict_clone_failure_is_a_save():
    # torch/distributed/fsdp: warnings.warn(f"Failed to clone() tensor with name {fqn} on rank
    # {rank}. This may mean that this state_dict entry could point to invalid memory regions
    # after returning from state_dict() call ... Error: {str(e)}")
    phase, why = stage(
        f"{SP}/torch/distributed/fsdp/_state_dict_utils.py:312: UserWarning: Failed to clone() "
        "tensor with name lm_head.weight on rank 0. This may mean that this state_dict entry "
        "could point to invalid memory regions after returning from state_dict() call if this "
        "parameter is managed by FSDP. Please check clone implementation of lm_head.weight. "
        "Error: CUDA out of memory. Tried to allocate 500.00 MiB (GPU 0; 39.59 GiB total "
        "capacity; 35.00 GiB already allocated; 200.00 MiB free; 37.00 GiB reserved in total "
        "by PyTorch)\n"
    )
    assert phase == "other" and "state dict" in why


@pytest.mark.parametrize(
    "text",
    [
        (
            "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running "
            "MatMul node. Name:'MatMul_7' Status Message: /onnxruntime_src/onnxruntime/core/framework/"
            "bfc_arena.cc:331 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool) Failed "
            "to allocate memory for requested buffer of size 4194304000\n"
        ),
        # the allocator's words on the line after "Status Message:"
        (
            "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while running "
            "Conv node. Name:'/stem/Conv' Status Message: \n"
            "/onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:376 void* onnxruntime::BFCArena"
            "::AllocateRawInternal(size_t, bool) Failed to allocate memory for requested buffer of "
            "size 4194304000\n"
        ),
    ],
)
def test_onnxruntime_running_a_node_is_an_inference_run(text):
    phase, _ = stage(text)
    assert phase == "generate"
    assert first_failure(text).figures["tried_to_allocate_bytes"] == 4_194_304_000


def test_tensorflow_forward_op_built_for_training():
    phase, why = stage(
        "ResourceExhaustedError: OOM when allocating tensor with shape[64,128,56,56] and type "
        "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
        "\t [[Node: bn1/FusedBatchNorm = FusedBatchNorm[T=DT_FLOAT, epsilon=0.001, "
        'is_training=true, _device="/job:localhost/replica:0/task:0/device:GPU:0"](conv1)]]\n'
    )
    assert phase == "train_forward" and "is_training=true" in why


def test_tensorflow_2_names_the_gradient_op_above_the_message():
    phase, _ = stage(
        "Node: 'gradient_tape/model/conv3d_2/Conv3D/Conv3DBackpropFilterV2'\n"
        "CUDNN failed to allocate the scratch space for the runner or to find a working "
        "no-scratch runner.\n"
    )
    assert phase == "backward"


def test_a_model_that_could_not_be_loaded():
    phase, _ = stage(
        "** model stable-diffusion-1.5 could not be loaded: CUDA out of memory. Tried to allocate "
        "16.00 MiB (GPU 0; 3.81 GiB total capacity; 3.20 GiB already allocated; 4.00 MiB free; "
        "3.30 GiB reserved in total by PyTorch)\n"
    )
    assert phase == "load"


@pytest.mark.parametrize(
    "text",
    [
        # aten/src/ATen/cudnn/Exceptions.h: a status other than ALLOC_FAILED, with PyTorch's hint
        (
            "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you "
            "passed in a non-contiguous input."
        ),
        "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED",
        (
            "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
            "Cuda failure 999 'unknown error'"
        ),
    ],
)
def test_cudnn_and_nccl_failures_that_are_not_memory(text):
    assert not read_log(text).is_oom
