"""Message families and stage rules added for the third round of the real-report corpus.

Each excerpt is written in the shape the printing framework's source gives it; bytes are worked
by hand in the printer's convention (KiB/MiB/GiB = 2^10/2^20/2^30; XLA's bare "G" is GiB),
value x unit rounded to the nearest byte. Every rule has a counter-case it must not fire on.
"""

from __future__ import annotations

import pytest

from vramtui.triage.reader import read_log


def first_failure(text: str):
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return next(e for e in r.events if e.kind != "startup")


def phase(text: str) -> str:
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return r.phase.phase


# ------------------------------------------------------------------------------ message families


def test_xla_tpu_bare_suffix_sizes():
    # XLA:TPU: "Attempting to reserve 11.35G at the bottom of memory. ... There are 12.18G free"
    ev = first_failure(
        "E pjrt_stream_executor_client.cc:2085] Execution of replica 0 failed: "
        "RESOURCE_EXHAUSTED: Attempting to reserve 6.48G at the bottom of memory. That was not "
        "possible. There are 6.78G free, 0B reserved, and 3.33G reservable."
    )
    # 6.48 x 2^30 = 6957847019.52 -> 6957847020; 6.78 x 2^30 = 7279969566.72 -> 7279969567
    assert ev.figures["tried_to_allocate_bytes"] == 6_957_847_020
    assert ev.figures["free_bytes"] == 7_279_969_567


def test_xla_bare_suffix_prefers_exact_bytes():
    ev = first_failure(
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request "
        "for 11.35G (12186969702B) on device ordinal 0"
    )
    assert ev.figures["tried_to_allocate_bytes"] == 12_186_969_702
    assert ev.gpu_index == 0


def test_bare_suffix_not_read_from_other_words():
    # "There are 3 free slots" is no size: no figure, and no OOM either
    assert not read_log("INFO: There are 3 free slots in the queue").is_oom


def test_headless_pytorch_1x_message():
    # a paste that starts at "Tried to allocate" (the head "CUDA out of memory." cut off)
    ev = first_failure(
        "Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB already "
        "allocated; 2.88 MiB free; 1.25 GiB reserved in total by PyTorch)"
    )
    assert ev.framework == "pytorch"
    assert ev.figures["tried_to_allocate_bytes"] == 20 * 2**20  # 20971520
    # 1.96 x 2^30 = 2104533975.04 -> 2104533975; 2.88 x 2^20 = 3019898.88 -> 3019899
    assert ev.figures["total_capacity_bytes"] == 2_104_533_975
    assert ev.figures["free_bytes"] == 3_019_899
    assert ev.figures["reserved_total_bytes"] == 1_342_177_280  # 1.25 x 2^30


def test_headless_form_not_after_xpu_block_limit():
    # the same words after the XPU platform's single-block refusal are a size limit
    r = read_log(
        "RuntimeError: Current platform can NOT allocate memory block with size larger than "
        "4GB! Tried to allocate 7.62 GiB (GPU  0; 15.11 GiB total capacity; 334.79 MiB already "
        "allocated; 474.00 MiB reserved in total by PyTorch)"
    )
    assert not r.is_oom
    # and prose that quotes the words mid-sentence is not the message
    assert not read_log("I tried to allocate 2 GiB (GPU 0; total capacity 8 GiB) by hand").is_oom


def test_tinygrad_kfd_memory_error():
    # tinygrad/runtime/ops_amd.py: raise MemoryError(f"Cannot allocate {size} bytes: no memory
    # is available.") on ENOMEM from the KFD (device memory)
    ev = first_failure(
        '  File "tinygrad/runtime/ops_amd.py", line 584, in alloc\n'
        "MemoryError: Cannot allocate 122341986304 bytes: no memory is available."
    )
    assert ev.framework == "tinygrad"
    assert ev.figures["tried_to_allocate_bytes"] == 122_341_986_304


def test_bare_host_memory_error_is_not_a_gpu_oom():
    r = read_log(
        "  X_train = np.array(images)\nMemoryError: Unable to allocate 3.2 GiB for an array"
    )
    assert not r.is_oom


# ------------------------------------------------------------------------------ near-misses


def test_ollama_system_memory_is_host_ram():
    # ollama's scheduler: fmt.Errorf("model requires more system memory (%s) than is available
    # (%s)") compares the host's free RAM
    r = read_log(
        'ValueError: Ollama call failed with status code 500. Details: {"error":"model requires '
        'more system memory (3.7 GiB) than is available (3.6 GiB)"}'
    )
    assert not r.is_oom
    assert "system RAM" in r.not_oom_reason


_TF_RETRIES = (
    "2017-10-07 23:47:58.493727: E tensorflow/stream_executor/cuda/cuda_driver.cc:924] failed "
    "to allocate 6.35G (6814913792 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY\n"
    "2017-10-07 23:48:01.790388: E tensorflow/stream_executor/cuda/cuda_driver.cc:924] failed "
    "to allocate 5.71G (6133422080 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY\n"
)


def test_host_memory_error_beside_tf_retries_is_not_oom():
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 126, in generator\n'
        "    X_train = np.array(images)\n"
        "MemoryError\n" + _TF_RETRIES
    )
    assert not read_log(text).is_oom


def test_tf_retries_alone_still_read_as_oom():
    # counter-case: without a host MemoryError the retries are the only sign, and they say the
    # device is full (another process holds it)
    ev = first_failure(_TF_RETRIES)
    assert ev.figures["tried_to_allocate_bytes"] == 6_814_913_792  # the exact bytes printed


def test_device_memory_error_beside_retries_stays_oom():
    text = _TF_RETRIES + "MemoryError: CUDA device out of memory while allocating workspace\n"
    assert read_log(text).is_oom


# ------------------------------------------------------------------------------ stage rules

_MSG_1X = (
    "CUDA out of memory. Tried to allocate 6.71 GiB (GPU 0; 23.70 GiB total capacity; "
    "18.67 GiB already allocated; 3.43 GiB free; 19.11 GiB reserved in total by PyTorch)"
)


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (f"INFO:root:Failed to generate out/chain.pdb due to {_MSG_1X}", "generate"),
        (f"RuntimeError: Error transcribing mic: {_MSG_1X}", "generate"),
        (f"RuntimeError: {_MSG_1X} during inference of batch 3", "generate"),
        (f"load model error: {_MSG_1X}", "load"),
        (
            (
                "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 "
                "dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` "
                "when initializing the engine."
            ),
            "load",
        ),
        (
            (
                "batch{batch_size=1}:prefill:prefill{id=13 size=1}: lorax_client: router/client/"
                f"src/lib.rs:33: Server error: {_MSG_1X}"
            ),
            "generate",
        ),
        (
            (
                'Kobold returned error: 507 INSUFFICIENT STORAGE {"detail":{"msg":"KoboldAI ran '
                'out of memory: CUDA error: out of memory"}}'
            ),
            "generate",
        ),
        # counter-cases: the words of training, or none at all
        (f"RuntimeError: {_MSG_1X} during training of epoch 3", "unknown"),
        (f"RuntimeError: {_MSG_1X}", "unknown"),
    ],
)
def test_error_line_names_the_step(line, want):
    assert phase(line) == want


@pytest.mark.parametrize(
    ("before", "want"),
    [
        ("Model loaded.\nServing on http://0.0.0.0:1234.", "generate"),
        ("INFO:     Application startup complete.", "generate"),
        ("INFO | root | Starting Predictions", "generate"),
        ("[info] > Starting Stereo Duplex pipeline", "generate"),
        # counter-cases: a training pipeline, a server not yet serving
        ("[info] > Starting training pipeline", "unknown"),
        ("INFO: Started server process [123]\nINFO: Waiting for application startup.", "unknown"),
    ],
)
def test_log_before_says_serving_or_inference(before, want):
    assert phase(f"{before}\nRuntimeError: {_MSG_1X}") == want


def _tb(*frames: tuple[str, str, str]) -> str:
    out = ["Traceback (most recent call last):"]
    for file, func, code in frames:
        out.append(f'  File "{file}", line 10, in {func}')
        out.append(f"    {code}")
    out.append(f"RuntimeError: {_MSG_1X}")
    return "\n".join(out)


_FWD = ("/usr/lib/python3/site-packages/torch/nn/modules/module.py", "_call_impl", "return f(*a)")
_LAYER = ("/home/u/proj/net.py", "forward", "x = self.conv(x)")


def test_chainer_update_core_is_a_training_iteration():
    text = _tb(
        ("/site-packages/chainer/training/trainer.py", "run", "update()"),
        ("/home/u/espnet/asr/asr.py", "update_core", "loss = self.model(x).mean()"),
        _FWD,
        _LAYER,
    )
    assert phase(text) == "train_forward"


def test_function_named_for_inference():
    text = _tb(
        ("/site-packages/gradio/utils.py", "wrapper", "response = f(*args)"),
        ("/home/u/app/pipeline.py", "transcribe_mic", "segments = self.run(audio)"),
        _LAYER,
    )
    assert phase(text) == "generate"


@pytest.mark.parametrize("func", ["generate_anchors", "sample_batch", "predictor"])
def test_inference_name_counter_cases(func):
    # training code generates anchors and samples batches; "predictor" is no verb phrase
    text = _tb(("/home/u/proj/heads.py", func, "a = torch.zeros(n, 4)"), _LAYER)
    assert phase(text) == "unknown"


def test_model_called_from_training_script():
    text = _tb(("train.py", "<module>", "semantic = model(rgb)"), _FWD, _LAYER)
    assert phase(text) == "train_forward"


def test_training_script_counter_cases():
    # no module forward in the traceback: a training script doing bookkeeping names no step
    text = _tb(("train.py", "training", "gaussians.add_stats(points)"), _LAYER[:1] + ("stats", "x"))
    assert phase(text) == "unknown"
    # a loading line in the training script decides load, not the file name
    text = _tb(("train.py", "<module>", "model = Net().to(device)"), _FWD)
    assert phase(text) == "load"
    # a script that is not named for training: no training verdict from its name; the whole
    # traceback with nothing that says training is inference (tests/test_triage_round5.py)
    text = _tb(("run.py", "<module>", "out = model(x)"), _FWD, _LAYER)
    assert phase(text) == "generate"
