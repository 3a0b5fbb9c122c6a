"""Round 7 of the real-report corpus: start-up and loading evidence for the stage (a native
backtrace's loader frame, a statement that moves the model inside an inference function, a
server's command line, a weight-loading bar after the message, KV-cache allocation lines), a
message quoted in prose with its figures, a device runtime's bare "out of memory" headed above
the engine's own line, and libplacebo's one-letter sizes.

Each excerpt is written by hand in the shape the printing program gives it; bytes are worked by
hand in the printer's convention. Every rule has a counter-case it must not fire on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from vramtui.triage.reader import read_log

MiB = 2**20
GiB = 2**30
TORCH_2X = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total "
    "capacity of 23.65 GiB of which 3.06 MiB is free. Of the allocated memory 22.50 GiB is "
    "allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated."
)


def reading(text: str):
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return r


def stage(text: str) -> str:
    return reading(text).phase.phase


def first_failure(text: str):
    r = reading(text)
    return next(e for e in r.events if e.echo_of is None or e.echo_of < e.line_no)


# ------------------------------------------------------------------ detection and figures


def test_a_message_quoted_in_prose_with_its_figures_is_read():
    text = (
        'I encounter "CUDA out of memory. Tried to allocate 44.00 MiB (GPU 0; 4.00 GiB total '
        "capacity; 1.05 GiB already allocated; 102.40 KiB free; 1.07 GiB reserved in total by "
        'PyTorch)"'
    )
    ev = first_failure(text)
    assert ev.figures["tried_to_allocate_bytes"] == 44 * MiB  # 46,137,344
    # 102.40 x 1024 = 104,857.6 -> 104,858
    assert ev.figures["free_bytes"] == 104_858
    # 1.07 x 2^30 = 1,148,903,751.68 -> 1,148,903,752
    assert ev.figures["reserved_total_bytes"] == 1_148_903_752


def test_a_quoted_phrase_without_figures_is_still_prose():
    r = read_log('I keep getting "CUDA out of memory" on my laptop, any idea?')
    # not PyTorch's message: the reporter's words (round 14), with no figures
    assert [e.kind for e in r.events] == ["reported"]
    assert r.primary.framework == "unknown" and r.primary.figures == {}


def test_libplacebo_one_letter_sizes_are_1024_based():
    text = (
        "[error] [FFmpeg] [libplacebo @ 000002396b591900] Allocation of size   15M failed: "
        "VK_ERROR_OUT_OF_DEVICE_MEMORY!"
    )
    ev = first_failure(text)
    assert ev.figures["tried_to_allocate_bytes"] == 15 * MiB  # 15,728,640
    assert ev.as_written["tried_to_allocate_bytes"] == "15M"


def test_vulkan_failure_without_a_size_reads_no_figure():
    ev = first_failure("vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY")
    assert "tried_to_allocate_bytes" not in ev.figures


def test_a_runtime_out_of_memory_headed_above_tensorrts_own_line_is_one_failure():
    text = (
        "[05/08/2024-20:47:56] [TRT] [E] 1: [defaultAllocator.cpp::allocate::19] Error Code 1: "
        "Cuda Runtime (out of memory)\n"
        "[05/08/2024-20:47:56] [TRT] [W] Requested amount of GPU memory (13476831488 bytes) could "
        "not be allocated. There may not be enough free memory for allocation to succeed."
    )
    r = reading(text)
    assert r.events[0].echo_of == 2
    assert first_failure(text).figures["tried_to_allocate_bytes"] == 13_476_831_488


def test_a_runtime_out_of_memory_two_lines_above_an_engine_line_stays_its_own():
    text = (
        "[TRT] [E] 1: [defaultAllocator.cpp::allocate::19] Error Code 1: Cuda Runtime "
        "(out of memory)\n"
        "[TRT] [I] retrying with a smaller workspace\n"
        "[TRT] [W] Requested amount of GPU memory (13476831488 bytes) could not be allocated."
    )
    assert reading(text).events[0].echo_of is None


# ------------------------------------------------------------------ stage: start-up and load


def test_a_native_backtraces_loader_frame_is_load():
    glog = (
        "Check failed: error == cudaSuccess CUDA error out of memory at include/base/memory.h:131\n"
        "*** Check failure stack trace: ***\n"
        "    @     0x7fdadf48181d  google::LogMessage::Fail()\n"
        "    @     0x7fdae442646c  graphvite::Memory<>::resize()\n"
        "    @     0x7fdae45c12cf  graphvite::SolverMixin<>::build()\n"
    )
    assert stage(glog) == "load"
    rust = (
        'Error: DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")\n'
        "   0: candle_core::error::Error::bt\n"
        "   1: candle_core::tensor::Tensor::from_slice\n"
        "   2: candle_core::safetensors::MmapedSafetensors::load\n"
        "   3: candle_transformers::models::falcon::Falcon::load\n"
    )
    assert stage(rust) == "load"


def test_a_native_frame_named_otherwise_does_not_say_load():
    rust = (
        'Error: DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")\n'
        "   0: candle_core::error::Error::bt\n"
        "   1: candle_transformers::models::falcon::Falcon::forward\n"
        "   2: candle_core::loader::reload_cache_stats_and_more\n"
    )
    assert stage(rust) != "load"


def test_moving_the_pipeline_inside_an_inference_function_is_a_lazy_load():
    head = "Traceback (most recent call last):\n"
    moved = head + '  File "/home/u/app.py", line 72, in infer\n    pipe.to(device)\n' + TORCH_2X
    assert stage(moved) == "load"
    ran = head + '  File "/home/u/app.py", line 80, in infer\n    image = pipe(prompt)\n' + TORCH_2X
    assert stage(ran) == "generate"


def test_a_sub_model_moved_to_the_device_is_load():
    text = (
        "File ~/proj/models/vlm.py:210, in Vlm.set_device_ids(self, device_ids)\n"
        "--> 210 self.llama_model.to(self.devices[0])\n" + TORCH_2X
    )
    assert stage(text) == "load"


def test_a_layer_creating_its_weights_is_load_but_a_plain_buffer_is_not():
    built = (
        "self.weight = Parameter(torch.Tensor(self.output_size_per_partition, self.in_features))\n"
        + TORCH_2X
    )
    assert stage(built) == "load"
    scratch = "hidden = torch.matmul(q, k.transpose(1, 2))\n" + TORCH_2X
    assert stage(scratch) != "load"


def test_a_kv_buffer_preallocated_is_load():
    text = (
        "self.value_buffer = [torch.empty((size, head_num, head_dim), dtype=dtype, "
        'device="cuda") for _ in range(layer_num)]\n\n' + TORCH_2X
    )
    assert stage(text) == "load"


def test_a_class_built_from_a_hub_model_id_is_load():
    text = (
        'pipeline = FlaxWhisperPipline("openai/whisper-large-v2", dtype=jnp.bfloat16)\n' + TORCH_2X
    )
    assert stage(text) == "load"
    image = 'result = Upscaler("cat.png")\n' + TORCH_2X  # a file name, not an owner/name id
    assert stage(image) == "unknown"


def test_a_weight_loading_bar_after_the_message_is_load():
    text = (
        TORCH_2X + "\nLoading safetensors checkpoint shards:  13% Completed | 2/15 "
        "[00:01<00:11,  1.12it/s]\n"
    )
    assert stage(text) == "load"


def test_a_server_command_line_with_nothing_served_is_load_but_a_request_line_wins():
    cmd = "run : vllm serve Qwen/Qwen3-32B --port 8000\n"
    assert stage(cmd + TORCH_2X) == "load"
    served = cmd + "INFO: Received request chatcmpl-1: prompt: 'hi'\n" + TORCH_2X
    assert stage(served) == "generate"


def test_kv_cache_allocation_at_start_up_is_load():
    text = (
        "ds4: CUDA using managed KV cache for ctx=1000000 (kv cache 13.17 GiB)\n"
        "ds4: CUDA tensor alloc failed: out of memory\n"
    )
    assert stage(text) == "load"


def test_an_apps_short_loading_line_is_load_but_prose_about_loading_is_not_a_rule():
    text = (
        "Loading Mistral\n...\nQuantizing Mistral\nError running job: CUDA error: out of memory\n"
    )
    assert stage(text) == "load"
    prose = "Loading the images took long, then\nError running job: CUDA error: out of memory\n"
    # "Loading the images ..." is a sentence, not the short start-up line
    assert reading(prose).phase.evidence != "Loading the images took long, then"


def test_a_server_failing_to_create_a_model_instance_is_load():
    text = (
        "E0118 07:53:59.509842 1067 backend_model.cc:635] ERROR: Failed to create instance: "
        "unexpected error when creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime "
        "error in ::cudaMallocAsync(ptr, n, stream): out of memory"
    )
    assert stage(text) == "load"


def test_vllm_engine_construction_frames_are_start_up():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/env/site-packages/openllm/_runners.py", line 133, in __init__\n'
        "    self.model = vllm.AsyncLLMEngine.from_engine_args(\n"
        '  File "/env/site-packages/vllm/engine/async_llm_engine.py", line 628, in '
        "from_engine_args\n"
        "    engine = cls(parallel_config.worker_use_ray,\n" + TORCH_2X
    )
    assert stage(text) == "load"


# ------------------------------------------------------------------ stage: other log lines


def test_could_not_predict_on_the_error_line_is_generate():
    text = (
        "2022-02-22 15:06:21,438 Could not predict job_1. Not Enough GPU memory? "
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 431497216 bytes."
    )
    assert stage(text) == "generate"


def test_a_lower_case_epoch_line_and_an_engines_forward_words_are_the_training_forward():
    text = (
        "Running epoch=1\tlr=0.00010\n"
        "Failed to allocate. Freeing memory cache and retrying.\n"
        "Failed to allocate again.\n"
        "Error during forward propagation:\n"
        "  ConvolutionCudaCudnn\n"
    )
    assert stage(text) == "train_forward"
    # without the engine's words the training line names no step
    plain = "Running epoch=1\tlr=0.00010\nRuntimeError: CUDA error: out of memory\n"
    assert stage(plain) == "unknown"


# ------------------------------------------------------------------ the bench's pools


def test_the_tuning_pool_names_its_halves_so_a_new_half_stays_out():
    path = Path(__file__).resolve().parent.parent / "bench" / "bench_triage_corpus.py"
    spec = importlib.util.spec_from_file_location("bench_triage_corpus_r7", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert "held_out_6" in bench.POOLS["tuning"]
    assert set(bench.POOLS["tuning"]) == set(bench.SPENT_HALVES)
    # held_out_7 joined once it was measured (round 8); a half collected later stays out
    assert "held_out_7" in bench.POOLS["tuning"]
    assert all(h in bench.HALVES for h in bench.POOLS["tuning"])
    assert [h for h in bench.HALVES if h not in bench.SPENT_HALVES] == [
        h for h in bench.HALVES if h.startswith("held_out_") and int(h.rsplit("_", 1)[1]) >= 14
    ]
