"""Round 8 of the real-report corpus: wrapping the model for distributed training is set-up
(`load`), a module's `_save_to_state_dict` is a checkpoint save, start-up words of engines and
runtimes (vLLM's "WorkerProc failed to start", weights repacked after loading, IREE's "Error
registering modules", JAX replicating parameters), inference words (CTranslate2's batch API, an
engine's "prompt processing failed", ComfyUI's executor catching the OOM), faiss-gpu's request
in bytes, and a 1.4-2.0 message cut inside "reserved".

Each excerpt is written by hand in the shape the printing program gives it; bytes are worked by
hand in the printer's convention. Every rule has a counter-case it must not fire on.
"""

from __future__ import annotations

from triage_reading import reading, stage

from vramtui.triage.reader import read_log

MiB = 2**20
GiB = 2**30
TORCH_2X = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total "
    "capacity of 23.56 GiB of which 14.44 MiB is free. Of the allocated memory 22.21 GiB is "
    "allocated by PyTorch, and 300.00 MiB is reserved by PyTorch but unallocated."
)


# ------------------------------------------------------------------ figures


def test_faiss_gpu_request_is_read_in_bytes():
    text = (
        "Error in virtual void* faiss::gpu::StandardGpuResourcesImpl::allocMemory(const "
        "faiss::gpu::AllocRequest&) at /project/faiss/faiss/gpu/StandardGpuResources.cpp:452: "
        "Error: 'err == cudaSuccess' failed: StandardGpuResources: alloc fail type "
        "TemporaryMemoryBuffer dev 0 space Device stream 0x55fdc14ecbc0 size 536870912 bytes "
        "(cudaMalloc error out of memory [2])"
    )
    ev = reading(text).primary
    assert ev.figures["tried_to_allocate_bytes"] == 512 * MiB  # 536,870,912 as printed


def test_a_faiss_size_without_a_failure_is_not_an_oom():
    text = (
        "StandardGpuResources: alloc ok type TemporaryMemoryBuffer dev 0 space Device stream "
        "0x55fdc14ecbc0 size 536870912 bytes"
    )
    assert not read_log(text).is_oom


def test_a_message_cut_inside_reserved_keeps_the_reserved_total():
    text = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.42 GiB (GPU 2; "
        "11.78 GiB total capacity; 8.01 GiB already allocated; 1.32 GiB free; 9.29 GiB res"
    )
    ev = reading(text).primary
    # 9.29 x 2^30 = 9,975,061,544.96 -> 9,975,061,545
    assert ev.figures["reserved_total_bytes"] == 9_975_061_545
    # 1.32 x 2^30 = 1,417,339,207.68 -> 1,417,339,208
    assert ev.figures["free_bytes"] == 1_417_339_208


def test_a_message_cut_right_after_the_last_figure_names_no_reserved_figure():
    # "5.61 GiB" may have gone on as "cached)" (1.0-1.3, reserved but unallocated) or as
    # "reserved in total by PyTorch)" (1.4-2.0): the reader does not guess which
    text = (
        "RuntimeError: CUDA out of memory. Tried to allocate 5.57 GiB (GPU 0; 12.00 GiB total "
        "capacity; 5.59 GiB already allocated; 4.92 GiB free; 5.61 GiB"
    )
    ev = reading(text).primary
    assert "reserved_total_bytes" not in ev.figures
    assert "reserved_unallocated_bytes" not in ev.figures
    assert ev.figures["free_bytes"] == 5_282_809_774  # 4.92 x 2^30 = 5,282,809,774.08


def test_pytorch_1_0_cached_figure_is_reserved_but_unallocated():
    # c10/cuda/CUDACachingAllocator.cpp (1.0-1.3): format_size(amount_cached - amount_allocated)
    text = (
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.92 GiB total "
        "capacity; 10.27 GiB already allocated; 10.50 MiB free; 32.43 MiB cached)"
    )
    ev = reading(text).primary
    assert ev.figures["reserved_unallocated_bytes"] == 34_005_320  # 32.43 x 2^20 = 34,005,319.68
    assert "reserved_total_bytes" not in ev.figures


# ------------------------------------------------------------------ stage: set-up and saving


def test_wrapping_the_model_in_ddp_is_set_up():
    text = (
        "Traceback (most recent call last):\n"
        '  File "pretraining.py", line 728, in main\n'
        "    train_result = trainer.train()\n"
        '  File "/usr/lib/python3.10/site-packages/accelerate/accelerator.py", line 1355, in '
        "prepare_model\n"
        "    model = torch.nn.parallel.DistributedDataParallel(\n"
        '  File "/usr/lib/python3.10/site-packages/torch/nn/parallel/distributed.py", line 809, '
        "in __init__\n"
        "    self._ddp_init_helper(\n" + TORCH_2X
    )
    assert stage(text) == "load"


def test_a_quoted_wrap_statement_is_set_up_and_a_save_statement_is_not():
    wrap = "    model = MMDistributedDataParallel(model.cuda(), device_ids=[rank])\n" + TORCH_2X
    assert stage(wrap) == "load"
    save = "    torch.save(model.state_dict(), 'ckpt.pt')\n" + TORCH_2X
    r = reading(save)
    assert r.phase.phase == "other" and "save" in r.phase.reason


def test_save_to_state_dict_is_a_checkpoint_save():
    text = (
        '  File "/opt/conda/lib/python3.9/site-packages/bitsandbytes/nn/modules.py", line 336, '
        "in _save_to_state_dict\n"
        "    self.weight.data = undo_layout(self.state.CxB, self.state.tile_indices)\n"
        '  File "/opt/conda/lib/python3.9/site-packages/bitsandbytes/autograd/_functions.py", '
        "line 96, in undo_layout\n"
        "    outputs = torch.empty_like(tensor)\n" + TORCH_2X
    )
    r = reading(text)
    assert r.phase.phase == "other" and "checkpoint save" in r.phase.reason


def test_load_state_dict_is_still_loading():
    text = (
        '  File "/usr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 2041, in '
        "load_state_dict\n"
        "    load(self, state_dict)\n" + TORCH_2X
    )
    assert stage(text) == "load"


# ------------------------------------------------------------------ stage: engines' start-up


def test_vllm_worker_that_failed_to_start_is_start_up():
    prefix = "(Worker_PP1_TP0 pid=1386) ERROR 08-27 22:16:22 [multiproc_executor.py:938] "
    text = (
        prefix + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB.\n"
        + prefix + "WorkerProc failed to start.\n"
    )
    assert stage(text) == "load"


def test_weights_repacked_after_loading_are_start_up():
    text = (
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/'
        'utils/marlin_utils_fp4.py", line 332, in _repack_marlin_experts\n'
        "    out = torch.empty(\n" + TORCH_2X
    )
    assert stage(text) == "load"


def test_an_engine_running_its_model_without_start_up_words_is_serving():
    text = (
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/worker/model_runner.py", line 1700, '
        "in execute_model\n"
        "    hidden_or_intermediate_states = model_executable(\n" + TORCH_2X
    )
    assert stage(text) == "generate"


def test_iree_registering_its_modules_is_start_up():
    text = (
        "Error registering modules: c/runtime/src/iree/hal/drivers/vulkan/vma_allocator.cc:692: "
        "RESOURCE_EXHAUSTED; VK_ERROR_OUT_OF_DEVICE_MEMORY; vmaCreateBuffer; while invoking "
        "native function hal.allocator.allocate"
    )
    assert stage(text) == "load"


def test_jax_replicating_parameters_is_loading():
    text = (
        '  File "/usr/lib/python3.8/site-packages/jax/_src/api.py", line 2796, in '
        "_device_put_replicated\n"
        "    buf, = dispatch.device_put(x, devices[0])\n"
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 402653184 bytes."
    )
    assert stage(text) == "load"


# ------------------------------------------------------------------ stage: inference words


def test_ctranslate2_batch_calls_are_inference():
    for call in ("encoder.forward_batch(inputs)", "translator.translate_batch(batch)"):
        text = f"    result = {call}\nRuntimeError: CUDA failed with error out of memory"
        assert stage(text) == "generate", call


def test_a_batch_helper_with_another_name_is_not_inference():
    text = "    batch = loader.next_batch(inputs)\nRuntimeError: CUDA failed with error out of memory"
    assert stage(text) != "generate"


def test_an_engine_that_gives_up_on_the_prompt_was_generating():
    text = (
        "ds4: CUDA loading model tensors into device cache: 80.04 GiB\n"
        "ds4: CUDA q8 fp16 cache alloc failed (64.00 MiB): out of memory\n"
        "ds4: prompt processing failed: Metal prefill failed\n"
    )
    assert stage(text) == "generate"


def test_comfyui_executor_catching_the_oom_is_inference():
    text = (
        '  File "G:\\ComfyUI\\python\\Lib\\site-packages\\torch\\nn\\modules\\conv.py", line 549, '
        "in _conv_forward\n"
        "    return F.conv2d(\n"
        "torch.OutOfMemoryError: Allocation on device\n"
        "\n"
        "Got an OOM, unloading all loaded models.\n"
    )
    assert stage(text) == "generate"


def test_comfyui_executor_line_does_not_override_a_training_frame():
    # a training node (a LoRA trainer inside ComfyUI): the frames decide first
    text = (
        '  File "/ComfyUI/custom_nodes/trainer/train.py", line 210, in step\n'
        "    loss.backward()\n"
        '  File "/usr/lib/python3.10/site-packages/torch/autograd/__init__.py", line 266, in '
        "backward\n"
        "    Variable._execution_engine.run_backward(\n" + TORCH_2X + "\n"
        "Got an OOM, unloading all loaded models.\n"
    )
    assert stage(text) == "backward"
