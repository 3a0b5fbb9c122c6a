"""The stage the triage reader gives for an out-of-memory error, rule by rule.

Each test is a short excerpt in the shape the framework prints (frames, code lines, log lines),
the stage a person reading it would name, and a check that the reason says why.
"""

from __future__ import annotations

import time

import pytest

from vramtui.triage import read_log
from vramtui.triage.phase import AFTER_CONTEXT_LINES, LOG_CONTEXT_LINES, localise_phase

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.65 GiB of which 1.00 GiB is free."
)
OOM_1X = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total "
    "capacity; 6.71 GiB already allocated; 11.25 MiB free; 6.84 GiB reserved in total by PyTorch)"
)
SP = "/usr/lib/python3.10/site-packages"


def tb(*frames: tuple[str, str, str]) -> str:
    out = ["Traceback (most recent call last):"]
    for file, func, code in frames:
        out.append(f'  File "{file}", line 10, in {func}')
        if code:
            out.append(f"    {code}")
    return "\n".join(out)


def phase(text: str):
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return r.phase


# ------------------------------------------------------------------ truncated pastes


@pytest.mark.parametrize(
    ("code", "stage", "words"),
    [
        (
            " return Variable._execution_engine.run_backward(  # Calls into the C++ engine",
            "backward",
            "backward pass",
        ),
        ("    optimizer.step()", "optimizer_step", "steps the optimizer"),
        ("    torch._foreach_sqrt(exp_avg_sq)", "optimizer_step", "steps the optimizer"),
        ("    model = AutoModelForCausalLM.from_pretrained(path)", "load", "loads the model"),
        ("    state = torch.load(ckpt, map_location=device)", "load", "loads the model"),
    ],
)
def test_code_line_left_of_a_cut_traceback(code, stage, words):
    text = f"{code}\n           ^^^^^^^^^^^^^^^^^^^^^^^^^\n{OOM}"
    v = phase(text)
    assert v.phase == stage
    assert v.line_no == 1 and v.evidence == code.strip()
    assert "cut-off traceback" in v.reason and words in v.reason


def test_code_line_above_the_first_surviving_frame():
    # The paste starts with the code of a frame whose header was cut off; the frames below it
    # (module forwards) say nothing, so that code line decides.
    text = "\n".join(
        [
            "    loss.backward()",
            f'  File "{SP}/torch/nn/modules/module.py", line 1501, in _call_impl',
            "    return forward_call(*args, **kwargs)",
            OOM,
        ]
    )
    assert phase(text).phase == "backward"


def test_header_cut_to_its_function():
    text = f"line 3479, in cross_entropy\n    return torch._C._nn.cross_entropy_loss(\n\n{OOM}"
    v = phase(text)
    assert v.phase == "train_forward"
    assert "cross_entropy" in v.reason and "loss" in v.reason and v.line_no == 1


def test_header_after_prose_on_the_same_line():
    text = (
        f'Load "Llama-2-7b-chat-hf" show the error:   File "{SP}/torch/nn/modules/module.py", '
        "line 905, in <lambda>\n"
        "    return self._apply(lambda t: t.cuda(device))\n" + OOM_1X
    )
    v = phase(text)
    assert v.phase == "load" and v.line_no == 1
    assert "<lambda>" in v.reason and "moved to the GPU" in v.reason


def test_traceback_quoted_after_the_message():
    # The message first (an issue title), then "..." and the frames, with no Traceback line.
    text = "\n".join(
        [
            "[Bug]: RuntimeError: MPS backend out of memory (MPS allocated: 4.06 GB, other "
            "allocations: 2.73 GB, max allowed: 6.77 GB). Tried to allocate 5.00 MB on private "
            "pool.",
            "...",
            '      File "/sd/modules/processing.py", line 525, in decode_first_stage',
            "        x = model.decode_first_stage(x)",
            '      File "/sd/modules/sd_hijack_utils.py", line 17, in <lambda>',
            "        setattr(resolved_obj, func_path[-1], lambda *a, **k: self(*a, **k))",
        ]
    )
    v = phase(text)
    assert v.phase == "generate" and "decode_first_stage" in v.reason


def test_unindented_frames_keep_their_code_lines():
    # PyInstaller / old ComfyUI reports print frames and code flush left.
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            'File "faster_whisper\\transcribe.py", line 125, in init',
            "self.model = ctranslate2.models.Whisper(model_path, device=device)",
            "RuntimeError: CUDA failed with error out of memory",
        ]
    )
    v = localise_phase(text.split("\n"), 4)
    assert v.phase == "load" and "faster_whisper/transcribe.py" in v.reason


# ------------------------------------------------------------------ engines: start-up is load


def test_vllm_profile_run_is_start_up():
    text = tb(
        (f"{SP}/vllm/engine/llm_engine.py", "_initialize_kv_caches", "self.determine()"),
        (f"{SP}/vllm/worker/worker.py", "determine_num_available_blocks", "self.profile_run()"),
        (f"{SP}/vllm/worker/model_runner.py", "profile_run", "self.execute_model(inp, kv)"),
        (f"{SP}/vllm/worker/model_runner.py", "execute_model", "out = self.model(**inp)"),
        (f"{SP}/vllm/model_executor/layers/logits_processor.py", "_get_logits", "x = lm(x)"),
    )
    v = phase(f"{text}\n{OOM}")
    assert v.phase == "load"
    assert "profile_run" in v.reason and "start-up" in v.reason and "before any request" in v.reason


def test_vllm_sampler_while_serving_is_generate():
    text = tb(
        (f"{SP}/vllm/v1/worker/gpu_model_runner.py", "execute_model", "out = self.sampler(x)"),
        (f"{SP}/vllm/v1/sample/ops/topk_topp_sampler.py", "apply_top_k_top_p", "logits.sort()"),
    )
    v = phase(f"{text}\n{OOM}")
    assert v.phase == "generate" and "apply_top_k_top_p" in v.reason


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
        "that can be stored in KV cache (7344). Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine.",
    ],
)
def test_vllm_kv_cache_too_small_is_start_up(line):
    v = phase(line)
    assert v.phase == "load" and "start-up" in v.reason and "KV cache" in v.reason


def test_tgi_warmup_frames_are_start_up_and_prefill_is_generate():
    warm = tb(
        (f"{SP}/text_generation_server/server.py", "Warmup", "self.model.warmup(batch)"),
        (
            f"{SP}/text_generation_server/models/flash_causal_lm.py",
            "warmup",
            "self.generate_token(b)",
        ),
        (
            f"{SP}/text_generation_server/models/flash_causal_lm.py",
            "generate_token",
            "self.forward(b)",
        ),
    )
    v = phase(f"{warm}\n{OOM}")
    assert v.phase == "load" and "warmup" in v.reason
    serving = (
        f"{OOM_1X}\n2023-07-19T21:02:09.363221Z ERROR text_generation_launcher: Method Prefill "
        "encountered an error."
    )
    v = phase(serving)
    assert v.phase == "generate" and v.line_no == 2 and "Method Prefill" in v.evidence


def test_warmup_outside_a_serving_engine_is_not_start_up():
    # A benchmark's own warm-up function: a generation forward, not an engine's start-up.
    text = tb(
        ("/home/me/bench.py", "warmup", "model.generate(**inputs)"),
        (f"{SP}/transformers/generation/utils.py", "generate", "return self._sample(x)"),
    )
    assert phase(f"{text}\n{OOM}").phase == "generate"


def test_server_that_failed_to_start():
    text = (
        f"{OOM_1X}\n rank=0\nError: ShardCannotStart\n"
        "2023-08-17T10:23:27.032737Z ERROR text_generation_launcher: Shard 0 failed to start"
    )
    v = phase(text)
    assert v.phase == "load" and "failed to start" in v.reason


def test_llamacpp_context_is_start_up():
    text = (
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 16384.00 MiB on device 1: "
        "cudaMalloc failed: out of memory\n"
        "llama_kv_cache_init: failed to allocate buffer for kv cache"
    )
    v = phase(text)
    assert v.phase == "load" and "context" in v.reason and "before any prompt" in v.reason


def test_textgen_output_line_after_the_error_is_generation():
    text = f"{OOM_1X}\nOutput generated in 20.38 seconds (0.05 tokens/s, 1 tokens, context 1787)"
    v = phase(text)
    assert v.phase == "generate" and v.line_no == 2


# ------------------------------------------------------------------ evaluation, saving, other


def test_generate_inside_the_trainer_evaluation_loop_is_evaluation():
    text = tb(
        (f"{SP}/transformers/trainer.py", "train", "return inner_training_loop()"),
        (
            f"{SP}/transformers/trainer.py",
            "_inner_training_loop",
            "self._maybe_log_save_evaluate()",
        ),
        (f"{SP}/transformers/trainer_seq2seq.py", "prediction_step", "self.model.generate(**x)"),
        (f"{SP}/transformers/generation/utils.py", "generate", "return self._sample(x)"),
    )
    v = phase(f"{text}\n{OOM}")
    assert v.phase == "other"
    assert "prediction_step" in v.reason and "evaluation loop" in v.reason


def test_mmcv_eval_hook_around_a_test_loop_is_evaluation():
    text = tb(
        (f"{SP}/mmcv/runner/epoch_based_runner.py", "train", "self.call_hook('after_train_epoch')"),
        (f"{SP}/mmdet/core/evaluation/eval_hooks.py", "after_train_epoch", "single_gpu_test(m, d)"),
        (f"{SP}/mmdet/apis/test.py", "single_gpu_test", "result = model(return_loss=False)"),
    )
    v = phase(f"{text}\n{OOM_1X}")
    assert v.phase == "other" and "after_train_epoch" in v.reason


def test_checkpoint_save_is_other():
    text = tb(
        (
            f"{SP}/lightning/pytorch/callbacks/model_checkpoint.py",
            "on_train_epoch_end",
            "self._save()",
        ),
        (
            f"{SP}/lightning/pytorch/callbacks/model_checkpoint.py",
            "_save_checkpoint",
            "t.save_checkpoint(p)",
        ),
        (f"{SP}/lightning/fabric/plugins/io/torch_io.py", "save_checkpoint", "x = y.cpu()"),
    )
    v = phase(f"{text}\n{OOM}")
    assert v.phase == "other" and "checkpoint save" in v.reason


def test_quantisation_calibration_is_other():
    text = tb(
        ("/work/quantize.py", "main", "model.quantize(tokenizer, quant_config=cfg)"),
        (f"{SP}/torch/utils/_contextlib.py", "decorate_context", "return func(*args, **kwargs)"),
        (f"{SP}/awq/quantize/quantizer.py", "quantize", "].to(common_device)"),
    )
    v = phase(f"{text}\n{OOM}")
    assert v.phase == "other" and "quantisation" in v.reason


def test_quantize_call_in_a_snippet_before_the_message():
    text = (
        "model = AutoAWQForCausalLM.from_pretrained(path, device_map='auto')\n"
        "model.quantize(tokenizer, quant_config=quant_config)\n"
        "I used 6xA800, but still\n" + OOM
    )
    v = phase(text)
    assert v.phase == "other" and v.line_no == 2 and "quantisation" in v.reason


def test_tensor_of_literal_size_typed_in_a_repl_is_other():
    text = (
        ">>> x = torch.rand(46000, 10000, dtype=torch.float32, device='xpu')\n"
        'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n' + OOM
    )
    v = localise_phase(text.split("\n"), 4)
    assert v.phase == "other" and v.line_no == 1 and "tensor" in v.reason


def test_tensor_sized_from_the_model_is_not_a_test_allocation():
    text = "        return torch.empty(A.shape[:-1], dtype=A.dtype, device=A.device)\n" + OOM
    assert phase(text).phase == "unknown"


# ------------------------------------------------------------------ training frameworks


def test_trainer_constructor_places_the_model():
    text = tb(
        ("/src/llmtuner/train/rm/workflow.py", "run_rm", "trainer = PairwiseTrainer("),
        ("/src/llmtuner/train/rm/trainer.py", "__init__", "super().__init__(*args, **kwargs)"),
    )
    v = phase(f"{OOM}\n{text}")
    assert v.phase == "load" and "Trainer" in v.reason


def test_detectron2_run_step_with_only_forward_frames():
    text = tb(
        (f"{SP}/detectron2/engine/train_loop.py", "train", "self.run_step()"),
        (f"{SP}/detectron2/engine/train_loop.py", "run_step", "loss_dict = self.model(data)"),
        (f"{SP}/torch/nn/modules/module.py", "_call_impl", "return forward_call(*a, **k)"),
        (f"{SP}/torch/nn/modules/conv.py", "_conv_forward", "return F.conv2d(x, w)"),
    )
    v = phase(f"{text}\n{OOM_1X}")
    assert v.phase == "train_forward" and "run_step" in v.reason


def test_detectron_caffe2_create_model_and_inference():
    load = tb(
        ("/Detectron/detectron/utils/train.py", "create_model", "workspace.RunNetOnce(init_net)"),
        ("/caffe2/python/workspace.py", "RunNetOnce", "StringifyProto(net),"),
    )
    msg = (
        "RuntimeError: [enforce fail at context_gpu.cu:415] error == cudaSuccess. 2 vs 0. "
        "out of memory"
    )
    v = localise_phase(f"{load}\n{msg}".split("\n"), 6)
    assert v.phase == "load" and "create_model" in v.reason
    test = tb(
        ("/Detectron/detectron/core/test.py", "im_detect_bbox", "workspace.RunNet(name)"),
        ("/caffe2/python/workspace.py", "RunNet", "StringifyNetName(name),"),
    )
    v = localise_phase(f"{test}\n{msg}".split("\n"), 6)
    assert v.phase == "generate" and "im_detect_bbox" in v.reason


def test_mmdet_target_assignment_is_the_training_forward():
    text = tb(
        (
            f"{SP}/mmdet/structures/bbox/bbox_overlaps.py",
            "bbox_overlaps",
            "wh = (rb - lt).clamp(0)",
        ),
    )
    v = phase(f"{text}\n{OOM}")
    assert v.phase == "train_forward" and "bbox_overlaps" in v.reason


def test_keras_fit_names_no_step_unless_tensorflow_names_the_op():
    frames = tb(
        ("tryhard.py", "<module>", "model.fit(X, y, batch_size=10)"),
        ("/py/keras/engine/training.py", "fit", "validation_steps=validation_steps)"),
        ("/py/tensorflow/python/client/session.py", "_call_tf_sessionrun", "run_metadata)"),
    )
    err = (
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
        "tensor with shape[123008,500] and type float on /job:localhost/replica:0/task:0/"
        "device:GPU:0 by allocator GPU_0_bfc"
    )
    v = localise_phase(f"{frames}\n{err}".split("\n"), 8)
    assert v.phase == "unknown" and "one graph call" in v.reason
    adam = f"{frames}\n{err}\n\t [[{{{{node training/Adam/mul_23}}}}]]"
    v = localise_phase(adam.split("\n"), 8)
    assert v.phase == "optimizer_step" and "training/Adam/mul_23" in v.reason
    grad = f"{frames}\n{err}\n\t [[Node: gradients/conv1/Conv2D_grad/Conv2DBackpropInput = X]]"
    assert localise_phase(grad.split("\n"), 8).phase == "backward"


def test_training_line_after_the_error_needs_forward_frames():
    hook = "[08/14 07:32:25 d2.engine.hooks]: Total training time: 0:00:01 (0:00:00 on hooks)"
    frames = tb(
        (f"{SP}/torch/nn/modules/conv.py", "forward", "return self._conv_forward(x)"),
        (f"{SP}/torch/nn/modules/conv.py", "_conv_forward", "return F.conv2d(x, w)"),
    )
    v = phase(f"{frames}\n{OOM_1X}\n{hook}")
    assert v.phase == "train_forward" and "module forwards" in v.reason
    v = phase(f"{OOM_1X}\n{hook}")
    assert v.phase == "unknown"
    assert (
        v.evidence == hook and "forward pass, the backward pass or the optimizer step" in v.reason
    )


def test_epoch_line_and_a_forward_op_in_the_error():
    text = (
        " | Epoch: [1][10003/10010]    Time 1.209  Data 0.000  Err 8.3525\n"
        "/torch/share/lua/5.1/cudnn/init.lua:118: Error in CuDNN: CUDNN_STATUS_ALLOC_FAILED "
        "(cudnnFindConvolutionForwardAlgorithm)"
    )
    v = localise_phase(text.split("\n"), 2)
    assert v.phase == "train_forward" and v.line_no == 1 and "forward operation" in v.reason


# ------------------------------------------------------------------ log context without frames


@pytest.mark.parametrize(
    ("line", "stage", "words"),
    [
        (
            "Loading checkpoint shards:  50%|#####     | 2/4 [00:10<00:10,  5.0s/it]",
            "load",
            "loading",
        ),
        (
            "0/10 * Epoch (valid):   3% 1/32 [00:01<00:46,  1.50s/it, loss=1.656]",
            "other",
            "evaluation",
        ),
        ("- **Node Type:** KSampler", "generate", "KSampler"),
        ("- **Node Type:** CheckpointLoaderSimple", "load", "CheckpointLoaderSimple"),
        ("Error occurred when executing VAEDecode:", "generate", "VAEDecode"),
        ("Requested to load SDXL", "generate", "ComfyUI"),
        (
            "INFO 02-10 09:14:12 worker.py:266] Memory profiling takes 2.83 seconds",
            "load",
            "starting up",
        ),
        (
            "INFO 03-20 02:29:00 metrics.py:351] Avg prompt throughput: 12.1 tokens/s, Avg "
            "generation throughput: 30.2 tokens/s, GPU KV cache usage: 85.3%",
            "generate",
            "serving",
        ),
        (
            "2019-01-08 19:06:10.822532: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1189] "
            "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 7524 MB "
            "memory)",
            "load",
            "device",
        ),
    ],
)
def test_log_line_before_the_error(line, stage, words):
    v = phase(f"{line}\n{OOM}")
    assert v.phase == stage and v.line_no == 1
    assert words in v.reason or words in v.evidence


def test_mmcv_test_progress_bar_is_inference_alone_and_evaluation_after_training():
    bar = "[>>>>>>>>>>>>>                ] 20/76, 0.3 task/s, elapsed: 59s, ETA:   165s"
    v = phase(f"{bar}\nTraceback (most recent call last):\n...\n{OOM_1X}")
    assert v.phase == "generate" and "test set" in v.reason
    epoch = "2023-02-12 11:51:16,618 - mmdet - INFO - Epoch [2][250/267]\tlr: 7.813e-06, loss: 1.7"
    v = phase(f"{epoch}\n{bar}\n{OOM_1X}")
    assert v.phase == "other" and v.line_no == 2 and "between training epochs" in v.reason


def test_snippet_quoted_after_the_message():
    text = (
        f"but I encountered an error: `{OOM}`\n\n### Reproduction\n\n"
        "from lmdeploy import pipeline\n"
        "pipe = pipeline(model, backend_config=TurbomindEngineConfig(session_len=8192))"
    )
    v = phase(text)
    assert v.phase == "load" and v.line_no == 6 and "quoted after the error" in v.reason


def test_snippet_after_the_message_that_loads_then_trains_does_not_decide():
    text = (
        f"{OOM}\nMy script:\n"
        "model = AutoModelForCausalLM.from_pretrained(name)\n"
        "trainer = Trainer(model=model, args=args)\n"
        "trainer.train()"
    )
    assert phase(text).phase == "unknown"


def test_inference_call_in_a_notebook_cell():
    text = (
        "gen = tts.tts_with_preset(text, voice_samples=None, preset=preset)\n\n"
        "Error: Message\nOutOfMemoryError: " + OOM_1X.split(": ", 1)[1]
    )
    v = phase(text)
    assert v.phase == "generate" and v.line_no == 1


def test_nothing_said_is_unknown_with_a_reason():
    v = phase(OOM)
    assert v.phase == "unknown" and v.reason


# ------------------------------------------------------------------ bounds


def test_log_context_is_read_only_so_far_back():
    near = "\n".join(["Loading checkpoint shards"] + ["x"] * (LOG_CONTEXT_LINES - 2) + [OOM])
    assert phase(near).phase == "load"
    far = "\n".join(["Loading checkpoint shards"] + ["x"] * (LOG_CONTEXT_LINES + 5) + [OOM])
    assert phase(far).phase == "unknown"


def test_lines_after_the_error_are_read_only_so_far():
    tail = "Output generated in 20.38 seconds (0.05 tokens/s)"
    near = "\n".join([OOM] + ["x"] * (AFTER_CONTEXT_LINES - 2) + [tail])
    assert phase(near).phase == "generate"
    far = "\n".join([OOM] + ["x"] * (AFTER_CONTEXT_LINES + 5) + [tail])
    assert phase(far).phase == "unknown"


def test_hostile_lines_stay_fast():
    junk = [
        "line " * 40_000,
        'File "' * 40_000,
        "torch.rand((((" + "1" * 200_000,
        "[[{{node " + "a/" * 100_000,
        "Node Type:" + " " * 100_000,
        "] 1/2, " + "9" * 200_000,
    ]
    text = "\n".join(junk * 3 + [OOM] + junk)
    start = time.perf_counter()
    phase(text)
    assert time.perf_counter() - start < 5.0
