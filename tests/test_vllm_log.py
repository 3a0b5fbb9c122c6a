"""vLLM start-up logs: the memory figures, the configuration and the ranks, per log format.

Conversion rule, the same as the code's: vLLM divides every memory figure by 2**30, also where
it prints "GB", so bytes = round(float(number as printed) * 2**30); "14.99 GiB" is
round(14.99 * 2**30) bytes and "14.9888 GB" is round(14.9888 * 2**30) bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vramtui.errors import VramtuiError
from vramtui.measure.errors import LogImportError
from vramtui.measure.vllm_log import (
    FIGURE_NAMES,
    VllmStartup,
    looks_like_vllm_log,
    parse_vllm_log,
)

LOGS = Path(__file__).parent / "vllm_logs"
GIB = 2**30


def gib(number: float) -> int:
    return round(number * GIB)


def read(name: str) -> str:
    return (LOGS / name).read_bytes().decode("utf-8")  # keep CR/LF exactly as stored


def rows(startup: VllmStartup) -> list[tuple]:
    return [
        (f.name, f.bytes, f.value, f.as_written, f.line, f.rank, f.tokens_per_request)
        for f in startup.figures
    ]


def config(startup: VllmStartup) -> tuple:
    return (
        startup.version,
        startup.engine,
        startup.format,
        startup.model,
        startup.dtype,
        startup.max_model_len,
        startup.tensor_parallel_size,
        startup.gpu_memory_utilization,
        startup.kv_cache_dtype,
        startup.block_size,
    )


# --------------------------------------------------------------------------- V0 engine


def test_v0_0_5_weights_and_blocks():
    s = parse_vllm_log(read("v0_0.5.3_api_server.log"))
    assert rows(s) == [
        ("weights", gib(14.9595), None, "14.9595 GB", 14, None, None),
        ("gpu_blocks", None, 27932.0, "27932", 15, None, None),
        ("cpu_blocks", None, 2048.0, "2048", 15, None, None),
    ]
    # "Graph capturing finished in 7 secs." has no size before 0.6.4: no cuda_graph figure
    assert s.figure("cuda_graph") is None
    # dtype from the engine's resolved config (torch.bfloat16), not the args' 'auto'; the
    # block size and gpu_memory_utilization from the API server's args
    assert config(s) == (
        "0.5.3.post1",
        "V0",
        "v0",
        "meta-llama/Meta-Llama-3-8B-Instruct",
        "bfloat16",
        8192,
        1,
        0.9,
        "auto",
        16,
    )
    assert s.figure("weights").text == (
        "INFO 07-24 09:12:06 model_runner.py:692] Loading model weights took 14.9595 GB"
    )


def test_v0_0_6_4_memory_profiling_results_line():
    s = parse_vllm_log(read("v0_0.6.4_profiling_results.log"))
    assert rows(s) == [
        ("weights", gib(2.0512), None, "2.0512 GB", 17, None, None),
        ("total_gpu_memory", gib(139.80), None, "139.80GiB", 18, None, None),
        ("non_torch", gib(0.73), None, "0.73GiB", 18, None, None),
        ("kv_cache", gib(122.71), None, "122.71GiB", 18, None, None),
        ("gpu_blocks", None, 365549.0, "365549", 19, None, None),
        ("cpu_blocks", None, 11915.0, "11915", 19, None, None),
        ("max_concurrency", None, 2855.85, "2855.85x", 20, None, 2048),
        ("cuda_graph", gib(0.16), None, "0.16 GiB", 23, None, None),
    ]
    # peak_torch_memory=2.38GiB includes the weights in 0.6.4: it is not an activation peak,
    # and nothing is derived from it
    assert s.figure("activation_peak") is None
    assert config(s) == (
        "0.6.4.post1",
        "V0",
        "v0-profiling",
        "realtreetune/rho-1b-sft-GSM8K",
        "bfloat16",
        2048,
        1,
        0.90,
        "auto",
        None,
    )


def test_v0_0_7_memory_profiling_takes_tp2():
    s = parse_vllm_log(read("v0_0.7.2_tp2_profiling.log"))
    # V0 prefixes name no rank: "(VllmWorkerProcess pid=2398)" and the unprefixed driver
    assert rows(s) == [
        ("weights", gib(7.5123), None, "7.5123 GB", 32, None, None),
        ("weights", gib(7.5123), None, "7.5123 GB", 33, None, None),
        ("total_gpu_memory", gib(39.39), None, "39.39GiB", 35, None, None),
        ("weights", gib(7.51), None, "7.51GiB", 36, None, None),
        ("non_torch", gib(0.62), None, "0.62GiB", 36, None, None),
        ("activation_peak", gib(1.41), None, "1.41GiB", 36, None, None),
        ("kv_cache", gib(26.70), None, "26.70GiB", 36, None, None),
        ("total_gpu_memory", gib(39.39), None, "39.39GiB", 38, None, None),
        ("weights", gib(7.51), None, "7.51GiB", 39, None, None),
        ("non_torch", gib(0.68), None, "0.68GiB", 39, None, None),
        ("activation_peak", gib(1.41), None, "1.41GiB", 39, None, None),
        ("kv_cache", gib(26.64), None, "26.64GiB", 39, None, None),
        ("gpu_blocks", None, 27279.0, "27279", 40, None, None),
        ("cpu_blocks", None, 4096.0, "4096", 40, None, None),
        ("max_concurrency", None, 26.64, "26.64x", 41, None, 16384),
        ("cuda_graph", gib(0.27), None, "0.27 GiB", 47, None, None),
        ("cuda_graph", gib(0.27), None, "0.27 GiB", 48, None, None),
    ]
    # the profiling line's 0.92 (what the worker used) beats the args' 0.92 (what was asked)
    assert config(s) == (
        "0.7.2",
        "V0",
        "v0-profiling",
        "meta-llama/Llama-3.1-8B-Instruct",
        "bfloat16",
        16384,
        2,
        0.92,
        "auto",
        None,
    )
    # the CR vLLM's NewLineFormatter leaves before each "\n" is not part of the text
    assert s.figures[2].text.endswith("x gpu_memory_utilization (0.92) = 36.24GiB")
    assert s.ranks == ()


# --------------------------------------------------------------------------- V1 engine


def test_v1_0_8_rank_prefixes():
    s = parse_vllm_log(read("v1_0.8.3_tp2_rank_prefix.log"))
    assert rows(s) == [
        ("weights", gib(7.1217), None, "7.1217 GiB", 26, 0, None),
        ("weights", gib(7.1217), None, "7.1217 GiB", 28, 1, None),
        # printed by the engine core, once per worker, with no prefix: rank unknown
        ("kv_cache_tokens", None, 1095520.0, "1,095,520 tokens", 37, None, None),
        ("max_concurrency", None, 33.43, "33.43x", 38, None, 32768),
        ("kv_cache_tokens", None, 1096080.0, "1,096,080 tokens", 39, None, None),
        ("max_concurrency", None, 33.45, "33.45x", 40, None, 32768),
        ("cuda_graph", gib(0.46), None, "0.46 GiB", 43, 1, None),
        ("cuda_graph", gib(0.46), None, "0.46 GiB", 44, 0, None),
    ]
    # "Loading weights took 1.47 seconds" (the loader's time) is not a weights figure
    assert len(s.figures_named("weights")) == 2
    assert config(s) == (
        "0.8.3",
        "V1",
        "v1",
        "Qwen/Qwen2.5-Coder-7B-Instruct",
        "bfloat16",
        32768,
        2,
        None,  # 0.8.3 prints no gpu_memory_utilization
        "auto",
        None,
    )
    assert s.ranks == (0, 1)
    assert s.figure("cuda_graph", rank=0).line == 44
    assert s.figure("cuda_graph").line == 44  # no unranked one: the lowest rank
    assert s.figure("kv_cache_tokens").value == 1095520.0
    assert s.figure("kv_cache", rank=0) is None


def test_v1_0_10_api_server_tp1():
    s = parse_vllm_log(read("v1_0.10.1_api_server.log"))
    assert rows(s) == [
        ("weights", gib(14.9889), None, "14.9889 GiB", 24, None, None),
        ("kv_cache", gib(50.44), None, "50.44 GiB", 30, None, None),
        ("kv_cache_tokens", None, 413200.0, "413,200 tokens", 31, None, None),
        ("max_concurrency", None, 50.44, "50.44x", 32, None, 8192),
        ("cuda_graph", gib(0.55), None, "0.55 GiB", 34, None, None),
        ("gpu_blocks", None, 25825.0, "25825", 36, None, None),
    ]
    assert config(s) == (
        "0.10.1.1",
        "V1",
        "v1",
        "meta-llama/Llama-3.1-8B-Instruct",
        "bfloat16",
        8192,
        1,
        0.85,  # from the non-default args
        "auto",
        None,
    )
    # "(EngineCore_0 pid=263)" names a process, not a rank
    assert s.ranks == ()


def test_v1_tp2_ansi_colours_and_crlf():
    text = read("v1_0.10.1_tp2_ansi_crlf.log")
    assert "\r\n" in text and "\x1b[1;36m" in text
    s = parse_vllm_log(text, "serve.log")
    assert rows(s) == [
        ("weights", gib(9.0876), None, "9.0876 GiB", 21, 0, None),
        ("weights", gib(9.0876), None, "9.0876 GiB", 23, 1, None),
        ("kv_cache", gib(26.13), None, "26.13 GiB", 31, 0, None),
        ("kv_cache", gib(26.09), None, "26.09 GiB", 32, 1, None),
        ("kv_cache_tokens", None, 213728.0, "213,728 tokens", 33, None, None),
        ("max_concurrency", None, 6.52, "6.52x", 34, None, 32768),
        ("cuda_graph", gib(0.62), None, "0.62 GiB", 38, 1, None),
        ("cuda_graph", gib(0.62), None, "0.62 GiB", 39, 0, None),
        ("gpu_blocks", None, 13358.0, "13358", 41, None, None),
    ]
    assert config(s) == (
        "0.10.1.1",
        "V1",
        "v1",
        "Qwen/Qwen2.5-32B-Instruct-AWQ",
        "float16",
        32768,
        2,
        0.9,
        "auto",
        16,  # 'block_size': 16 in the non-default args
    )
    kv1 = s.figure("kv_cache", rank=1)
    assert kv1.text == (
        "vllm-1  | (VllmWorker TP1 pid=213) INFO 09-01 21:25:46 [gpu_worker.py:276] "
        "Available KV cache memory: 26.09 GiB"
    )
    assert all("\x1b" not in f.text and "\r" not in f.text for f in s.figures)
    assert s.ranks == (0, 1)


def test_v1_recent_debug_profiling_and_merged_capacity_line():
    s = parse_vllm_log(read("v1_recent_tp2_debug.log"))
    assert rows(s) == [
        ("weights", gib(30.59), None, "30.59 GiB", 16, 0, None),
        ("weights", gib(30.59), None, "30.59 GiB", 18, 1, None),
        # DEBUG MemoryProfilingResult: weights, torch peak increase, non-torch increase
        ("weights", gib(30.59), None, "30.59GiB", 27, 0, None),
        ("non_torch", gib(0.62), None, "0.62GiB", 27, 0, None),
        ("activation_peak", gib(1.23), None, "1.23GiB", 27, 0, None),
        ("kv_cache", gib(37.99), None, "37.99 GiB", 28, 0, None),
        ("weights", gib(30.59), None, "30.59GiB", 31, 1, None),
        ("non_torch", gib(0.66), None, "0.66GiB", 31, 1, None),
        ("activation_peak", gib(1.23), None, "1.23GiB", 31, 1, None),
        ("kv_cache", gib(37.95), None, "37.95 GiB", 32, 1, None),
        # one merged line holds both capacity figures
        ("kv_cache_tokens", None, 310880.0, "310,880 tokens", 33, None, None),
        ("max_concurrency", None, 9.49, "9.49x", 33, None, 32768),
        ("cuda_graph", gib(0.91), None, "0.91 GiB", 36, 0, None),
        ("cuda_graph", gib(0.91), None, "0.91 GiB", 37, 1, None),
        ("gpu_blocks", None, 19430.0, "19430", 40, None, None),
    ]
    # no version line in this log; the engine follows from the V1-only lines; no dtype printed;
    # gpu_memory_utilization from "Requested memory: 0.900000 (util)"
    assert config(s) == (
        None,
        "V1",
        "v1",
        "Qwen/Qwen3-32B",
        None,
        32768,
        2,
        0.9,
        None,
        None,
    )
    assert s.figure("weights", rank=1).line == 18  # the first one rank 1 printed


# --------------------------------------------------------------------------- other shapes


def test_profiling_continuation_lines_without_prefix_keep_the_rank():
    text = (
        "(VllmWorker TP1 pid=5) INFO 01-14 12:36:52 [worker.py:240] Memory profiling takes "
        "1.46 seconds\n"
        "the current vLLM instance can use total_gpu_memory (23.55GiB) x gpu_memory_utilization "
        "(0.90) = 21.19GiB\n"
        "model weights take 7.97GiB; non_torch_memory takes 0.10GiB; PyTorch activation peak "
        "memory takes 1.12GiB; the rest of the memory reserved for KV Cache is 12.00GiB.\n"
    )
    s = parse_vllm_log(text)
    assert [(f.name, f.bytes, f.line, f.rank) for f in s.figures] == [
        ("total_gpu_memory", gib(23.55), 2, 1),
        ("weights", gib(7.97), 3, 1),
        ("non_torch", gib(0.10), 3, 1),
        ("activation_peak", gib(1.12), 3, 1),
        ("kv_cache", gib(12.00), 3, 1),
    ]
    assert s.format == "v0-profiling" and s.gpu_memory_utilization == 0.90


def test_v0_0_8_model_loading_in_gb_and_cuda_blocks():
    # vLLM 0.8 V0 (model_runner.py "Model loading took %.4f GB and %.6f seconds", a division by
    # float(2**30)) and executor_base.py "# %s blocks" with the device name "cuda"
    text = (
        "INFO 04-04 17:57:59 [model_runner.py:1146] Model loading took 0.4678 GB and "
        "114.953146 seconds\n"
        "INFO 04-04 17:58:00 [executor_base.py:111] # cuda blocks: 12200, # CPU blocks: 3640\n"
        "INFO 04-04 17:58:00 [executor_base.py:116] Maximum concurrency for 2048 tokens per "
        "request: 95.31x\n"
    )
    s = parse_vllm_log(text)
    assert rows(s) == [
        ("weights", gib(0.4678), None, "0.4678 GB", 1, None, None),
        ("gpu_blocks", None, 12200.0, "12200", 2, None, None),
        ("cpu_blocks", None, 3640.0, "3640", 2, None, None),
        ("max_concurrency", None, 95.31, "95.31x", 3, None, 2048),
    ]
    assert (s.engine, s.format, s.max_model_len) == ("V0", "v0", 2048)


def test_pr_10511_table_form():
    # the tab-separated table shown in vLLM PR #10511 (Dec 2024)
    text = (
        "INFO 12-13 19:54:18 worker.py:243] Memory profiling results:\n"
        "INFO 12-13 19:54:18 worker.py:243] duration\t0.75 seconds\n"
        "INFO 12-13 19:54:18 worker.py:243] total_gpu_memory\t79.22GiB\n"
        "INFO 12-13 19:54:18 worker.py:243] gpu_memory_utilization\t0.90\n"
        "INFO 12-13 19:54:18 worker.py:243] the current vLLM instance can use\t71.29GiB\n"
        "INFO 12-13 19:54:18 worker.py:243] model weights take\t14.96GiB\n"
        "INFO 12-13 19:54:18 worker.py:243] non_torch_memory\t1.79GiB\n"
        "INFO 12-13 19:54:18 worker.py:243] PyTorch activation peak memory\t1.26GiB\n"
        "INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory\t53.29GiB\n"
    )
    s = parse_vllm_log(text)
    assert [(f.name, f.bytes, f.line) for f in s.figures] == [
        ("total_gpu_memory", gib(79.22), 3),
        ("weights", gib(14.96), 6),
        ("non_torch", gib(1.79), 7),
        ("activation_peak", gib(1.26), 8),
        ("kv_cache", gib(53.29), 9),
    ]
    assert s.gpu_memory_utilization == 0.90 and s.format == "v0-profiling"


def test_process_prefixes_and_ranks():
    text = (
        "INFO 05-16 16:35:00 [core.py:61] Initializing a V1 LLM engine (v0.9.0) with config: "
        "model='x/y', dtype=torch.float16, max_seq_len=4096, tensor_parallel_size=2, "
        "pipeline_parallel_size=2, kv_cache_dtype=fp8\n"
        "(EngineCore_1 pid=75299) (VllmWorker rank=3 pid=75322) INFO 05-16 16:35:18 "
        "[gpu_model_runner.py:1] Model loading took 3.5 GiB and 1.0 seconds\n"
        "(Worker_PP1_TP0 pid=9) INFO 05-16 16:35:18 [gpu_model_runner.py:1] Model loading "
        "took 3.6 GiB and 1.0 seconds\n"
        "[Worker_TP1 pid=540] INFO 11-19 21:09:35 [v1/worker/gpu_worker.py:298] Available KV "
        "cache memory: 17.24 GiB\n"
        "(RayWorkerWrapper pid=304431, ip=10.0.0.2) INFO 07-25 02:40:27 "
        "[gpu_model_runner.py:2306] Graph capturing finished in 21 secs, took -0.03 GiB\n"
    )
    s = parse_vllm_log(text)
    assert [(f.name, f.bytes, f.rank) for f in s.figures] == [
        ("weights", gib(3.5), 3),  # the innermost prefix
        ("weights", gib(3.6), 2),  # PP1, TP0 with tensor_parallel_size=2: global rank 2
        ("kv_cache", gib(17.24), 1),
        ("cuda_graph", gib(-0.03), None),  # Ray names no rank; a negative delta is kept
    ]
    assert (s.version, s.dtype, s.kv_cache_dtype, s.max_model_len) == (
        "0.9.0",
        "float16",
        "fp8",
        4096,
    )


def test_progress_bar_parts_and_an_unversioned_config_line():
    text = (
        "INFO 01-10 10:00:00 llm_engine.py:72] Initializing an LLM engine with config: "
        "model='facebook/opt-125m', tokenizer='facebook/opt-125m', dtype=torch.float16, "
        "max_seq_len=2048, tensor_parallel_size=1, seed=0)\n"
        "Capturing CUDA graph shapes: 100%|##########| 35/35 [00:13<00:00, 2.61it/s] took 13 s"
        "\r(VllmWorker TP1 pid=3) INFO 02-11 14:02:57 [gpu_model_runner.py:1562] Graph capturing "
        "finished in 14 secs, took 0.27 GiB\n"
    )
    s = parse_vllm_log(text)
    assert [(f.name, f.bytes, f.line, f.rank, f.text[:22]) for f in s.figures] == [
        ("cuda_graph", gib(0.27), 2, 1, "(VllmWorker TP1 pid=3)"),
    ]
    assert (s.version, s.engine, s.model, s.dtype, s.max_model_len) == (
        None,
        "V0",
        "facebook/opt-125m",
        "float16",
        2048,
    )


def test_a_restart_reads_the_last_start_up():
    first = read("v0_0.5.3_api_server.log")
    second = read("v1_0.10.1_api_server.log")
    offset = first.count("\n")
    s = parse_vllm_log(first + second)
    assert s.version == "0.10.1.1" and s.format == "v1"
    assert s.figure("weights").line == 24 + offset
    assert s.figure("gpu_blocks").value == 25825.0


def test_out_of_memory_after_start_up_keeps_the_figures():
    text = read("v1_0.10.1_api_server.log") + (
        "(EngineCore_0 pid=263) ERROR 08-20 11:00:00 [core.py:1] torch.OutOfMemoryError: CUDA "
        "out of memory. Tried to allocate 2.00 GiB.\n"
    )
    assert parse_vllm_log(text).figure("kv_cache").bytes == gib(50.44)


def test_figure_names_are_checked():
    s = parse_vllm_log(read("v1_0.10.1_api_server.log"))
    with pytest.raises(ValueError):
        s.figure("weight")
    assert all(f.name in FIGURE_NAMES for f in s.figures)


# --------------------------------------------------------------------------- refusals


def _one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and message
    assert isinstance(exc.value, VramtuiError)
    return message


@pytest.mark.parametrize("text", ["", "  \n\r\n\t\n"])
def test_empty_log(text):
    with pytest.raises(LogImportError) as exc:
        parse_vllm_log(text, "serve.log")
    message = _one_line(exc)
    assert message.startswith("serve.log: the log is empty")
    assert "Application startup complete" in message


def test_not_a_vllm_log():
    text = "2024-01-01 12:00:00 INFO step 100 loss=1.234 lr=3e-4\nEpoch 1 took 31.2 s\n" * 50
    assert not looks_like_vllm_log(text)
    with pytest.raises(LogImportError) as exc:
        parse_vllm_log(text, "train.log")
    message = _one_line(exc)
    assert message.startswith("train.log: no vLLM start-up memory lines found")
    for looked_for in ("Model loading took", "# GPU blocks", "GPU KV cache size"):
        assert looked_for in message
    assert "Application startup complete" in message


def test_an_out_of_memory_traceback_points_to_triage():
    text = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py", line '
        "1309, in profile_run\n"
        "    self.execute_model(model_input, kv_caches, intermediate_tensors)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 0 has a "
        "total capacity of 44.34 GiB of which 3.01 GiB is free.\n"
    )
    assert looks_like_vllm_log(text)
    with pytest.raises(LogImportError) as exc:
        parse_vllm_log(text, "job.log")
    message = _one_line(exc)
    assert "out-of-memory error (line 4" in message
    assert "not a start-up log" in message
    assert "`vramtui triage job.log`" in message


def test_a_start_that_ran_out_of_memory_points_to_triage():
    # "Model loading took" was printed, then profile_run failed: not a completed start-up
    with pytest.raises(LogImportError) as exc:
        parse_vllm_log(read("oom_v1_profile_run.log"), "oom.log")
    message = _one_line(exc)
    assert "failed with an out-of-memory error at line 16" in message
    assert "torch.OutOfMemoryError: CUDA out of memory" in message
    assert "`vramtui triage oom.log`" in message


def test_no_cache_blocks_failure_names_the_error_line():
    text = (
        "INFO 02-10 09:14:09 model_runner.py:1115] Loading model weights took 14.9888 GB\n"
        '  File "/x/vllm/worker/worker.py", line 532, in raise_if_cache_size_invalid\n'
        '    raise ValueError("No available memory for the cache blocks. "\n'
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.\n"
    )
    with pytest.raises(LogImportError) as exc:
        parse_vllm_log(text)
    message = _one_line(exc)
    assert message.startswith("this vLLM start failed with an out-of-memory error at line 4")
    assert "`vramtui triage <log file>`" in message


# --------------------------------------------------------------------------- sniff, size


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_every_fixture_looks_like_vllm(name):
    assert looks_like_vllm_log(read(name))


def test_huge_log_is_read_in_one_pass():
    start = read("v1_0.10.1_api_server.log")
    stats = (
        "(APIServer pid=1) INFO 08-20 10:17:06 [loggers.py:123] Engine 000: Avg prompt "
        "throughput: 1843.2 tokens/s, Avg generation throughput: 512.3 tokens/s, Running: 12 "
        "reqs, Waiting: 0 reqs, GPU KV cache usage: 23.1%, Prefix cache hit rate: 41.2%\n"
    )
    access = '(APIServer pid=1) INFO:     10.0.0.7:51234 - "POST /v1/chat/completions" 200 OK\n'
    text = start + (stats + access * 9) * 10_000 + "x" * 100_000 + "took " * 50_000
    s = parse_vllm_log(text)
    assert len(s.figures) == 6 and s.figure("kv_cache_tokens").value == 413200.0
