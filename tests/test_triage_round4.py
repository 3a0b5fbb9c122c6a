"""Message families and stage rules added for the fourth round of the real-report corpus.

Each excerpt is written by hand in the shape the printing framework's source gives it; bytes
are worked by hand in the printer's convention (KiB/MiB/GiB = 2^10/2^20/2^30; XLA's bare "M" is
MiB), value x unit rounded to the nearest byte. Every rule has a counter-case it must not
fire on.
"""

from __future__ import annotations

from vramtui.triage.reader import read_log

TORCH_2X = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
    "capacity of 23.65 GiB of which 3.31 MiB is free. Including non-PyTorch memory, this process "
    "has 23.64 GiB memory in use. Of the allocated memory 23.10 GiB is allocated by PyTorch, and "
    "85.30 MiB is reserved by PyTorch but unallocated."
)


def first_failure(text: str):
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return next(e for e in r.events if e.kind != "startup")


def phase(text: str) -> str:
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return r.phase.phase


# ------------------------------------------------------------------------------ message families


def test_tpu_attempting_to_allocate_with_bare_mebibytes_ending_a_sentence():
    ev = first_failure(
        "RuntimeError: RESOURCE_EXHAUSTED: Attempting to allocate 12.50M. That was not possible. "
        "There are 40.25M free. Due to fragmentation, the largest contiguous region of free "
        "memory is 10.00M.; (0x0x0_HBM0)"
    )
    assert ev.figures["tried_to_allocate_bytes"] == 13_107_200  # 12.5 x 2^20
    assert ev.figures["free_bytes"] == 42_205_184  # 40.25 x 2^20


def test_itex_allocator_reads_the_request_not_the_rounding():
    ev = first_failure(
        "E itex/core/devices/bfc_allocator.cc:101] Allocator ran out of memory trying to "
        "allocate 1000000000 Bytes (rounded to 1000000256 Bytes)"
    )
    assert ev.figures["tried_to_allocate_bytes"] == 1_000_000_000


def test_tensorflow_1x_ran_out_of_memory_line():
    ev = first_failure(
        "W tensorflow/core/common_runtime/bfc_allocator.cc:275] Ran out of memory trying to "
        "allocate 256.00MiB.  See logs for memory state."
    )
    assert ev.figures["tried_to_allocate_bytes"] == 268_435_456  # 256 x 2^20


def test_tensorflow_retry_warning_is_still_not_a_failure():
    r = read_log(
        "W tensorflow/core/common_runtime/bfc_allocator.cc:217] Allocator (GPU_0_bfc) ran out "
        "of memory trying to allocate 2.50GiB with freed_by_count=0. The caller indicates that "
        "this is not a failure, but may mean that there could be performance gains if more "
        "memory were available."
    )
    assert not r.is_oom


def test_pytorch_1x_parenthesis_quoted_alone_in_prose():
    ev = first_failure(
        "I ran it on a V100 and got the same error: _(GPU 0; 15.90 GiB total capacity; 12.00 GiB "
        "already allocated; 1.50 GiB free; 12.25 GiB reserved in total by PyTorch)_"
    )
    assert ev.figures["total_capacity_bytes"] == 17_072_495_002  # 15.9 x 2^30 = ...001.6
    assert ev.figures["already_allocated_bytes"] == 12 * 2**30
    assert ev.figures["free_bytes"] == 1_610_612_736  # 1.5 x 2^30
    assert "tried_to_allocate_bytes" not in ev.figures


def test_xpu_block_limit_with_its_parenthesis_is_still_not_an_oom():
    r = read_log(
        "RuntimeError: Current platform can NOT allocate memory block with size larger than 4GB! "
        "Tried to allocate 7.62 GiB (GPU  0; 15.11 GiB total capacity; 334.79 MiB already "
        "allocated; 474.00 MiB reserved in total by PyTorch)"
    )
    assert not r.is_oom


def test_device_runtime_out_of_memory_sentence():
    ev = first_failure(
        "Out of Memory: Not enough space to allocate 104857600 B DRAM buffer across 12 banks, "
        "where each bank needs to store 8738304 B, but bank size is only 1073741792 B"
    )
    assert ev.figures["tried_to_allocate_bytes"] == 104_857_600


def test_kernel_oom_killer_line_is_not_a_device_oom():
    r = read_log("[12345.678] Out of memory: Killed process 4242 (python3) total-vm:9000000kB")
    assert not r.is_oom


def test_nnabla_gives_up_after_one_retry():
    r = read_log(
        "Running epoch=1\tlr=0.00010\n"
        "Failed to allocate. Freeing memory cache and retrying.\n"
        "Failed to allocate again.\n"
        "Error during forward propagation:\n"
    )
    assert r.is_oom
    assert r.framework == "nnabla"


def test_markdown_bold_around_a_figure():
    text = TORCH_2X.replace("has 23.64 GiB memory", "has **5.50 GiB** memory")
    ev = first_failure(text)
    assert ev.figures["process_in_use_bytes"] == 5_905_580_032  # 5.5 x 2^30


def test_driver_call_failure_with_exact_bytes():
    ev = first_failure(
        "E1103 18:23:55.103160 3413767 gpu_cudamallocasync_allocator.cc:361] gpu_async_0 "
        "cuMemAllocAsync failed to allocate 3221225472 bytes: RESOURCE_EXHAUSTED: : "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory"
    )
    assert ev.figures["tried_to_allocate_bytes"] == 3 * 2**30


# ------------------------------------------------------------------------------ stage: frames


def test_traceback_after_the_message_survives_an_elision():
    text = (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"
        "\n"
        "Full traceback:\n"
        "Traceback (most recent call last):\n"
        '  File "/work/bench.py", line 90, in <module>\n'
        "    main()\n"
        "...\n"
        '  File "/work/bench.py", line 70, in run\n'
        "    loss.backward()\n"
        "...\n"
    )
    assert phase(text) == "backward"


def test_double_spaced_traceback_keeps_its_code_lines():
    text = (
        "Traceback (most recent call last):\n\n"
        '  File "/app/run.py", line 12, in main\n\n'
        "    loss.backward()\n\n"
        '  File "/usr/lib/python3/site-packages/torch/_tensor.py", line 5, in helper\n\n'
        "    x = y\n\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "backward"


def test_outer_traceback_printed_after_the_error_names_the_validation_step():
    text = (
        '  File "/repo/lib/models/block.py", line 89, in forward\n'
        "    sim_map = torch.matmul(query, key)\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 4.10 GiB (GPU 3; 10.92 GiB total "
        "capacity; 5.46 GiB already allocated; 1019.50 MiB free; 3.89 GiB cached)\n"
        "Traceback (most recent call last):\n"
        '  File "/repo/segmentor/trainer.py", line 240, in __train\n'
        "    self.__val()\n"
        '  File "/repo/segmentor/trainer.py", line 308, in __val\n'
        "    outputs = self.seg_net(*inputs)\n"
    )
    assert phase(text) == "other"  # evaluation during training


def test_model_layers_alone_stay_unknown():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/repo/lib/models/block.py", line 89, in forward\n'
        "    sim_map = torch.matmul(query, key)\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "unknown"


def test_camel_case_checkpoint_loader_is_load():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/run_test.py", line 14, in <module>\n'
        '    sim.context.loadCheckpoint(open("restart.chk", "rb").read())\n'
        '  File "/env/site-packages/openmm/openmm.py", line 6030, in loadCheckpoint\n'
        "    return _openmm.Context_loadCheckpoint(self, checkpoint)\n"
        "openmm.OpenMMException: Error creating array random: hipErrorOutOfMemory (2)\n"
    )
    assert phase(text) == "load"


def test_a_function_named_for_prefill_is_generation():
    text = (
        '  File "/site-packages/vllm/v1/attention/backends/custom_attn.py", line 727, in '
        "_continuation_prefill\n"
        "    v_full = torch.cat([v_cached, val_chunk], dim=0)\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "generate"


def test_engine_model_frames_without_start_up_serve_a_request():
    text = (
        '  File "/data/plugin/vllm/model.py", line 404, in token_unpermutation\n'
        "    tokens = tokens * scores.unsqueeze(-1)\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "generate"


def test_engine_model_frames_under_profile_run_are_start_up():
    text = (
        '  File "/site-packages/vllm/worker/model_runner.py", line 1300, in profile_run\n'
        "    self.execute_model(model_input, kv_caches)\n"
        '  File "/data/plugin/vllm/model.py", line 404, in token_unpermutation\n'
        "    tokens = tokens * scores.unsqueeze(-1)\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "load"


# ------------------------------------------------------------------------------ stage: log lines


def test_inference_script_on_the_command_line():
    text = "python .\\scripts\\run_inference.py --config-name=base\n\n" + TORCH_2X
    assert phase(text) == "generate"


def test_training_command_names_no_step_without_frames():
    text = "accelerate launch --num_processes 2 finetune_lora.py --bf16\n\n" + TORCH_2X
    assert phase(text) == "unknown"


def test_training_command_with_module_forward_frames_is_the_forward():
    text = (
        "$ torchrun --nproc_per_node 8 pretrain.py --config big.yaml\n"
        '  File "/env/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl\n'
        "    return forward_call(*args, **kwargs)\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "train_forward"


def test_a_script_that_says_neither_decides_nothing():
    assert phase("python tools/convert_weights.py --in a --out b\n" + TORCH_2X) == "unknown"


def test_cli_tool_sub_command():
    assert phase("llamafactory-cli train examples/lora.yaml\n" + TORCH_2X) == "unknown"
    assert phase("llamafactory-cli chat examples/infer.yaml\n" + TORCH_2X) == "generate"


def test_model_parallel_initialisation_is_load():
    text = (
        "> initializing model parallel with size 8\n"
        "> initializing ddp with size 1\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "load"


def test_sampling_progress_bar_is_generation():
    text = "Sampling:  40%|████      | 20/50 [00:10<00:15,  2.00it/s]\n" + TORCH_2X
    assert phase(text) == "generate"


def test_progress_bar_with_a_loss_is_training():
    text = (
        "  3%|▎         | 30/1000 [00:12<06:40,  2.42it/s, loss=2.3145]\n"
        "Traceback (most recent call last):\n"
        '  File "/env/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl\n'
        "    return forward_call(*args, **kwargs)\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "train_forward"


# ------------------------------------------------------------------------------ fold B rules


def test_project_evaluation_code_by_its_path_is_evaluation():
    text = (
        '  File "rfdetr/evaluation/matching.py", line 44, in _compute_mask_iou\n'
        "    inter = masks_a @ masks_b.T\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "other"


def test_an_installed_package_named_evaluation_is_not_the_project_loop():
    text = (
        '  File "/env/site-packages/lib/evaluation/x.py", line 44, in helper\n'
        "    inter = masks_a @ masks_b.T\n" + TORCH_2X + "\n"
    )
    assert phase(text) == "unknown"


def test_command_line_in_markdown_bold():
    text = "**python scripts/inference-long.py configs/sample.py --num-frames 32**\n" + TORCH_2X
    assert phase(text) == "generate"


def test_a_server_line_that_says_loading_failed_is_load():
    text = (
        "Model 'llm' loading failed with error: Internal: unexpected error when creating "
        "modelInstanceState: CUDA runtime error in ::cudaMalloc: cudaErrorMemoryAllocation"
    )
    assert phase(text) == "load"
