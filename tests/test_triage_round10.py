"""Round 10 of the real-report corpus: more runtimes' out-of-memory words (OpenVINO's GPU plugin,
MLX's per-buffer limit, PJRT's "Error allocating device buffer"), XLA:TPU's HBM capacity, and
stage evidence for set-up (a torch layer's constructor, gpt-fast's `setup_caches`, a deep copy of
the weights, onnxruntime's session initialisation) and for an embedding run.

Each excerpt is written by hand in the shape the printing program gives it; bytes are worked by
hand in the printer's convention. Every rule has a counter-case it must not fire on.
"""

from __future__ import annotations

from triage_reading import reading, stage

from vramtui.triage.reader import read_log

GiB = 2**30


# ------------------------------------------------------------------ detection and figures


def test_openvino_gpu_plugin_out_of_resources():
    text = (
        "RuntimeError: Exception from src/inference/src/core.cpp:116:\n"
        "[ GENERAL_ERROR ] Exception from src/plugins/intel_gpu/src/runtime/ocl/ocl_engine.cpp:"
        "179:\n"
        "[GPU] out of GPU resources\n"
    )
    assert reading(text).primary.framework == "openvino"


def test_other_openvino_gpu_errors_are_not_oom():
    text = "[ GENERAL_ERROR ] [GPU] clEnqueueNDRangeKernel, error code: -5 CL_OUT_OF_RESOURCES_X"
    assert not read_log(text).is_oom


def test_mlx_buffer_larger_than_metals_limit_reads_its_request():
    text = (
        "RuntimeError: [metal::malloc] Attempting to allocate 15454965120 bytes which is greater "
        "than the maximum allowed buffer size of 12884901888 bytes."
    )
    ev = reading(text).primary
    assert ev.framework == "mlx"
    assert ev.figures["tried_to_allocate_bytes"] == 15_454_965_120


def test_pjrt_error_allocating_a_device_buffer():
    text = (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device "
        "buffer: Attempting to allocate 15.65G. That was not possible. There are 11.08G free.; "
        "(0x0x0_HBM0)"
    )
    ev = reading(text).primary
    assert ev.figures["tried_to_allocate_bytes"] == 16_804_059_546  # 15.65 x 2^30 = ...545.6
    assert ev.figures["free_bytes"] == 11_897_059_410  # 11.08 x 2^30 = ...409.92


def test_xla_tpu_compile_check_names_the_hbm_capacity():
    text = (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent "
        "error. Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm. Exceeded hbm "
        "capacity by 6.47G."
    )
    ev = reading(text).primary
    assert ev.figures["total_capacity_bytes"] == 16_621_523_436  # 15.48 x 2^30 = ...435.52


# ------------------------------------------------------------------ stage


def test_a_torch_layer_being_constructed_is_set_up():
    text = (
        '  File "train.py", line 97, in train\n'
        "    ssd_net = build_ssd('train', 300, 21)\n"
        '  File "/p/ssd.py", line 136, in vgg\n'
        "    conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)\n"
        '  File "/usr/lib/python3.6/site-packages/torch/nn/modules/conv.py", line 330, in '
        "__init__\n"
        "    False, _pair(0), groups, bias, padding_mode)\n"
        "RuntimeError: CUDA error: out of memory\n"
    )
    assert stage(text) == "load"


def test_a_custom_modules_constructor_does_not_count_as_a_torch_layer():
    text = (
        '  File "train.py", line 97, in train\n'
        "    loss = model(x)\n"
        '  File "/p/models/block.py", line 30, in __init__\n'
        "    self.buf = torch.zeros(n)\n"
        "RuntimeError: CUDA error: out of memory\n"
    )
    assert stage(text) != "load"


def test_gpt_fast_setup_caches_is_start_up():
    text = (
        '  File "/app/fish_speech/models/text2semantic/inference.py", line 762, in worker\n'
        "    model.setup_caches(max_batch_size=1, max_seq_len=4096)\n"
        '  File "/app/fish_speech/models/text2semantic/llama.py", line 395, in setup_caches\n'
        "    b.attention.kv_cache = KVCache(\n"
        "torch.OutOfMemoryError: Allocation on device\n"
    )
    assert stage(text) == "load"


def test_a_deep_copy_of_the_weights_is_set_up():
    text = (
        '  File "/usr/lib/python3.8/copy.py", line 153, in deepcopy\n'
        "    y = copier(memo)\n"
        '  File "/usr/lib/python3.8/site-packages/torch/nn/parameter.py", line 56, in __deepcopy__\n'
        "    result = type(self)(self.data.clone(memory_format=torch.preserve_format))\n"
        "RuntimeError: CUDA error: out of memory\n"
    )
    assert stage(text) == "load"


def test_onnxruntime_session_initialisation_is_set_up():
    text = (
        "onnxruntime.capi.onnxruntime_pybind11_state.RuntimeException: [ONNXRuntimeError] : 6 : "
        "RUNTIME_EXCEPTION : Exception during initialization: cuda_call.cc:121 CUBLAS failure 3: "
        "CUBLAS_STATUS_ALLOC_FAILED"
    )
    assert stage(text) == "load"


def test_onnxruntime_failing_while_running_is_not_initialisation():
    text = (
        "[E:onnxruntime:, sequential_executor.cc:516 ExecuteKernel] Non-zero status code returned "
        "while running Conv node. Status Message: Failed to allocate memory for requested buffer "
        "of size 285081600 on GPU"
    )
    assert stage(text) != "load"


def test_an_embedding_model_encoding_passages_is_inference():
    text = (
        "[Apr 26, 20:00:44] [0]           #> Encoding 57 passages..\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 23.65 GiB of which 1.06 GiB is free.\n"
    )
    assert stage(text) == "generate"


def test_encoding_a_video_is_not_an_embedding_run():
    text = (
        "Encoding video with ffmpeg\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 23.65 GiB of which 1.06 GiB is free.\n"
    )
    assert stage(text) == "unknown"
