"""Round 12 of the real-report corpus: PaddlePaddle's allocator message, XLA's compile-time
check without its status, RAPIDS' RMM, Omniverse's Vulkan result name, PyTorch 2.x's sentence
with its head cut off, a reporter's "a CUDA out of memory", faiss' wrapped request, host-side
pinned and arena memory, a logger named for inference, and TensorRT's autotuning.

Each excerpt is written by hand in the shape the printing program gives it; each byte count is
worked here from the printed figure and the program's unit convention. Every rule has a
counter-case it must not fire on.
"""

from __future__ import annotations

from triage_reading import reading, stage

from vramtui.triage.reader import read_log

GiB = 2**30
MiB = 2**20


# ------------------------------------------------------------------ PaddlePaddle


PADDLE = (
    "ResourceExhaustedError: \n"
    "\n"
    "Out of memory error on GPU 0. Cannot allocate 558.000000MB memory on GPU 0, 7.999695GB "
    "memory has been allocated and available memory is only 0.000000B.\n"
    "\n"
    "Please check whether there is any other process using GPU 0.\n"
    "1. If yes, please stop them, or start PaddlePaddle on another GPU.\n"
    "2. If no, please decrease the batch size of your model. \n"
)


def test_paddles_message_is_an_oom_with_1024_based_figures():
    r = reading(PADDLE)
    ev = r.primary
    assert r.framework == "paddle"
    # string::HumanReadableSize divides by 1024 and writes "MB"/"GB"
    assert ev.figures["tried_to_allocate_bytes"] == 558 * MiB == 585_105_408
    # 7.999695 * 2**30 = 8589607100.6 -> 8589607101
    assert ev.figures["already_allocated_bytes"] == 8_589_607_101
    assert ev.figures["free_bytes"] == 0
    assert ev.gpu_index == 0


def test_paddles_gpu_index_is_read():
    text = PADDLE.replace("GPU 0", "GPU 3")
    assert reading(text).primary.gpu_index == 3


def test_a_sentence_about_an_out_of_memory_error_on_a_gpu_is_not_paddles_message():
    r = read_log("I keep getting an out of memory error on GPU 0 when the batch is 64.\n")
    # not Paddle's message: the reporter's words (round 14), with no figures
    assert [e.kind for e in r.events] == ["reported"]
    assert r.primary.framework == "unknown" and r.primary.figures == {}


# ------------------------------------------------------------------ XLA compile check


def test_xlas_compile_check_without_its_status_is_an_oom():
    text = (
        "ERROR:tensorflow:Error recorded from training_loop: From /job:worker/replica:0/task:0:\n"
        "Compilation failure: Ran out of memory in memory space hbm. Used 12.34G of 8.00G hbm. "
        "Exceeded hbm capacity by 4.34G.\n"
    )
    r = reading(text)
    # XLA prints a bare 1024-based suffix: 8.00G is 8 GiB of HBM
    assert r.primary.figures["total_capacity_bytes"] == 8 * GiB


def test_a_usage_line_without_the_out_of_memory_words_is_not_an_oom():
    text = "Total hbm usage >= 7.47G:\n    reserved        530.00M\n    program          6.95G\n"
    assert not read_log(text).is_oom


# ------------------------------------------------------------------ RAPIDS' RMM


RMM = (
    '[WARN] ["FailedLoadCache put failed record"] [error="reason: UnexpectedError: RAFT failure '
    "at file=ivf_list.hpp line=55: ivf::list: failed to allocate a big enough list. Allocator "
    "exception: std::bad_alloc: out_of_memory: RMM failure at:/rmm/include/rmm/mr/device/"
    'pool_memory_resource.hpp:195: Maximum pool size exceeded"]\n'
)


def test_rmms_out_of_memory_is_a_gpu_oom_though_thrown_as_bad_alloc():
    r = reading(RMM)
    assert r.framework == "rmm"


def test_a_bare_bad_alloc_stays_host_memory():
    r = read_log("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  "
                 "std::bad_alloc\n")
    assert not r.is_oom


# ------------------------------------------------------------------ Vulkan result names


def test_omniverses_vulkan_result_without_the_vk_prefix_is_an_oom():
    text = (
        "2025-10-15 10:59:53 [48,192ms] [Error] [carb.graphics-vulkan.plugin] VkResult: "
        "ERROR_OUT_OF_DEVICE_MEMORY\n"
        "2025-10-15 10:59:53 [48,192ms] [Error] [carb.graphics-vulkan.plugin] vkAllocateMemory "
        "failed for flags: 0.\n"
    )
    assert reading(text).framework == "vulkan"


def test_another_vulkan_result_is_not_an_oom():
    text = (
        "2025-10-15 10:59:53 [48,192ms] [Error] [carb.graphics-vulkan.plugin] VkResult: "
        "ERROR_DEVICE_LOST\n"
    )
    assert not read_log(text).is_oom


# ------------------------------------------------------------------ PyTorch 2.x, head cut off


def test_a_2x_sentence_cut_before_tried_to_allocate_is_read_with_its_figures():
    text = (
        "````\n"
        "Tried to allocate 4.00 GiB. GPU 2 has a total capacity of 21.99 GiB of which 1.21 GiB "
        "is free. Including non-PyTorch memory, this process has 20.77 GiB memory in use.\n"
        "````\n"
    )
    f = reading(text).primary.figures
    assert f["tried_to_allocate_bytes"] == 4 * GiB
    assert f["total_capacity_bytes"] == 23_611_582_710  # 21.99 * 2**30 = 23611582709.76
    assert f["free_bytes"] == 1_299_227_607  # 1.21 * 2**30 = 1299227607.04
    assert f["process_in_use_bytes"] == 22_301_617_684  # 20.77 * 2**30 = 22301617684.48


def test_a_2x_head_on_its_own_line_keeps_its_figures_on_the_next_line_as_one_message():
    text = (
        "HIP out of memory.\n"
        "Tried to allocate 86.00 MiB. GPU 0 has a total capacity of 7.98 GiB of which 0 bytes is "
        "free.\n"
    )
    r = reading(text)
    assert len(r.events) == 1
    assert r.primary.figures["tried_to_allocate_bytes"] == 86 * MiB
    assert r.primary.figures["total_capacity_bytes"] == 8_568_459_756  # 7.98 * 2**30


def test_tried_to_allocate_inside_a_sentence_is_not_a_cut_message():
    text = "The docs say it tried to allocate 4.00 GiB. GPU 2 has a total capacity of 22 GiB.\n"
    assert not read_log(text).is_oom


# ------------------------------------------------------------------ a reporter's sentence


def test_a_reporters_a_cuda_out_of_memory_is_prose_and_the_real_message_is_first():
    text = (
        "after updating to the latest version i get a CUDA out of memory. Ubuntu, rtx3080 10gb.\n"
        "...\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 644.00 MiB. GPU 0 has "
        "a total capacity of 9.54 GiB\n"
    )
    r = reading(text)
    assert r.events[0].figures["tried_to_allocate_bytes"] == 644 * MiB
    assert r.events[0].figures["total_capacity_bytes"] == 10_243_497_001  # 9.54 * 2**30


def test_the_message_itself_is_still_read_after_an_error_word():
    text = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total "
    text += "capacity; 6.10 GiB already allocated; 1.50 MiB free; 6.20 GiB reserved in total by "
    text += "PyTorch)\n"
    assert reading(text).primary.figures["tried_to_allocate_bytes"] == 20 * MiB


# ------------------------------------------------------------------ faiss, wrapped


def test_faiss_request_on_a_wrapped_line_is_read_in_bytes():
    text = (
        "RuntimeError: Error in virtual void* faiss::gpu::StandardGpuResourcesImpl::allocMemory("
        "const faiss::gpu::AllocRequest&)\n"
        "              at faiss/gpu/StandardGpuResources.cpp:452: \n"
        "              Error: 'err == cudaSuccess' failed: StandardGpuResources: alloc fail type "
        "TemporaryMemoryBuffer \n"
        "              dev 0 space Device \tstream 0x7f7b46ba9a60 size 1610612736 bytes "
        "(cudaMalloc error out of memory [2])\n"
    )
    assert reading(text).primary.figures["tried_to_allocate_bytes"] == 1_610_612_736


# ------------------------------------------------------------------ host memory


def test_pinned_host_memory_that_falls_back_is_not_a_gpu_oom():
    text = (
        "0.05.025.382 W ggml_cuda_moe_cached_pinned_malloc: failed to allocate 24000.00 MiB of "
        "pinned memory: out of memory; using pageable cached fallback\n"
    )
    r = read_log(text)
    assert not r.is_oom


def test_llama_cpps_device_allocation_failure_stays_an_oom():
    text = (
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 24000.00 MiB on device 0: "
        "cudaMalloc failed: out of memory\n"
    )
    assert reading(text).framework == "llama.cpp"


def test_mujocos_arena_overflow_is_not_a_gpu_oom():
    text = (
        "ERROR: mj_stackAlloc: out of memory, stack overflow\n"
        "  max = 0, available = 0, requested = 24\n"
    )
    assert not read_log(text).is_oom


# ------------------------------------------------------------------ stage


OOM_1X = (
    "CUDA out of memory. Tried to allocate 972.00 MiB (GPU 1; 7.80 GiB total capacity; 4.91 "
    "GiB already allocated; 717.31 MiB free; 4.92 GiB reserved in total by PyTorch)\n"
)


def test_an_error_logged_by_an_embedding_module_is_inference():
    text = (
        "ERROR:bio_embeddings.embed.embedder_interfaces:Error processing batch of 3 sequences: "
        + OOM_1X
    )
    assert stage(text) == "generate"


def test_an_error_logged_by_another_module_does_not_decide():
    text = "ERROR:my_project.data.loader:Error processing batch of 3 sequences: " + OOM_1X
    assert stage(text) == "unknown"


def test_tensorrt_autotuning_before_the_error_is_an_engine_build():
    text = (
        "TENSORRT LOG: Constructing optimization profile number 0 out of 1\n"
        "*************** Autotuning format combination: Float(1,416,173056,519168) -> "
        "Float(1,416,173056,5537792) ***************\n"
        "TENSORRT LOG: ../rtSafe/safeRuntime.cpp (25) - Cuda Error in allocate: 2 (out of "
        "memory)\n"
    )
    assert stage(text) == "other"


def test_an_optimizer_slots_initialiser_stays_the_optimizer_step():
    text = (
        "ResourceExhaustedError (see above for traceback): OOM when allocating tensor of shape "
        "[24576,2400] and type float\n"
        "\t [[{{node motion_net/dense_7/kernel/Adam/Initializer/zeros}} = Const[dtype=DT_FLOAT, "
        '_device="/job:localhost/replica:0/task:0/device:GPU:0"]()]]\n'
    )
    assert stage(text) == "optimizer_step"
