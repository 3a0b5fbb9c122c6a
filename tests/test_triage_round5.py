"""Round 5 of the real-report corpus: the whole-paste stage fallback, and the message forms and
figure rules added with it.

Each excerpt is written by hand in the shape the printing framework's source gives it; bytes
are worked by hand in the printer's convention (KiB/MiB/GiB = 2^10/2^20/2^30), value x unit
rounded to the nearest byte. Every rule has a counter-case it must not fire on.
"""

from __future__ import annotations

from vramtui.triage.phase_fallback import code_words, words
from vramtui.triage.reader import read_log

TORCH_1X = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total "
    "capacity; 6.50 GiB already allocated; 10.00 MiB free; 6.60 GiB reserved in total by PyTorch)"
)


def reading(text: str):
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return r


def phase(text: str) -> str:
    return reading(text).phase.phase


def first_failure(text: str):
    return next(e for e in reading(text).events if e.kind != "startup")


def _tb(*frames: tuple[str, str, str], message: str = TORCH_1X) -> str:
    lines = ["Traceback (most recent call last):"]
    for file, func, code in frames:
        lines += [f'  File "{file}", line 10, in {func}', f"    {code}"]
    return "\n".join([*lines, message])


_SP = "/usr/lib/python3.11/site-packages/"
_CALL = (_SP + "torch/nn/modules/module.py", "_call_impl", "return forward_call(*args)")
_LAYER = ("/home/u/proj/vae.py", "forward", "x = F.pad(x, padding)")


# ------------------------------------------------------------------------------ words


def test_identifiers_split_into_words():
    assert words("run_inference") == ["run", "inference"]
    assert words("GenerationMixin") == ["generation", "mixin"]
    assert words("HuggingFaceEmbedding(model_name=x)") == [
        "hugging",
        "face",
        "embedding",
        "model",
        "name",
        "x",
    ]


def test_only_code_shaped_identifiers_count_as_code_words():
    # prose: no underscore, no hump, no call, no dot
    assert code_words("first few sample ids were skipped") == []
    assert code_words("trees <- sam_detect(image)") == ["sam", "detect"]
    assert code_words("embed = HuggingFaceEmbedding") == ["hugging", "face", "embedding"]


# ------------------------------------------------------------------------------ inference words


def test_a_snippet_that_embeds_with_no_training_is_inference():
    text = (
        "embed_model = HuggingFaceEmbedding(model_name=path, embed_batch_size=1)\n"
        "nodes = splitter.get_nodes_from_documents(documents)\n"
        "...\n" + TORCH_1X
    )
    assert phase(text) == "generate"


def test_inference_words_do_not_decide_beside_training_words():
    text = (
        "Epoch 3 started\n"
        "embed_model = HuggingFaceEmbedding(model_name=path, embed_batch_size=1)\n" + TORCH_1X
    )
    assert phase(text) != "generate"


def test_inference_words_in_prose_or_a_command_line_do_not_decide():
    assert phase("| WARNING: first few sample ids were skipped\n" + TORCH_1X) == "unknown"
    assert phase("!python generate.py --task t2v --sample_shift 8\n\n" + TORCH_1X) == "unknown"


def test_a_function_named_for_inference_decides_but_not_a_verb_on_an_object():
    sep = _tb(
        ("/home/u/app/inference.py", "<module>", "main()"),
        ("/home/u/app/lib/models.py", "separate", "out = self.run_chunk(mix)"),
        ("/home/u/app/lib/models.py", "run_chunk", "y = torch.stft(mix, n_fft)"),
    )
    assert phase(sep) == "generate"
    anchors = _tb(
        ("/home/u/proj/heads.py", "generate_anchors", "a = torch.zeros(n, 4)"),
        ("/home/u/proj/net.py", "stats", "x = y * 2"),
    )
    assert phase(anchors) == "unknown"


# ------------------------------------------------------------------------------ a model's forward


def test_whole_traceback_into_a_forward_with_no_training_is_inference():
    text = _tb(
        ("/home/u/proj/run.py", "<module>", "out = model(x)"),
        _CALL,
        ("/home/u/proj/net.py", "forward", "x = self.conv(x)"),
    )
    assert phase(text) == "generate"


def test_cut_traceback_into_a_forward_decides_nothing():
    # no entry frame: the caller (a training loop or not) is cut off
    text = _tb(_CALL, (_SP + "torch/nn/modules/linear.py", "forward", "return F.linear(x, w)"))
    assert phase(text) == "unknown"


def test_a_quoted_model_call_with_no_traceback_is_inference():
    text = "image, latent = net.decoder([codes], input_is_latent=True)\nbut I get:\n" + TORCH_1X
    assert phase(text) == "generate"
    # a module listing is no model call
    text = "for module in layer.modules():\n    module.weight.data = w\n" + TORCH_1X
    assert phase(text) == "unknown"


def test_a_self_training_check_is_no_training_evidence():
    text = _tb(
        ("/home/u/proj/run.py", "<module>", "out = model(x)"),
        _CALL,
        ("/home/u/proj/net.py", "forward", "x = self.drop(x) if self.training else x"),
    )
    assert phase(text) == "generate"


# ------------------------------------------------------------------------------ TensorFlow graph nodes


def test_tensorflow_1_13_lowercase_node_names_an_optimizer_op():
    text = (
        "ResourceExhaustedError (see above for traceback): OOM when allocating tensor of shape "
        "[32000,768] and type float\n"
        "\t [[node model/word_embedding/lookup_table/Adam/Initializer/zeros (defined at "
        "xlnet/model_utils.py:164)  = Const[dtype=DT_FLOAT]()]]"
    )
    assert phase(text) == "optimizer_step"


def test_caused_by_op_names_a_gradient_anywhere_in_the_paste():
    text = (
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
        "tensor with shape[8,509,3072] and type float on /job:localhost/replica:0/task:0/"
        "device:GPU:0 by allocator GPU_0_bfc\n" + "\n".join(f"line {k}" for k in range(10)) + "\n"
        "Caused by op 'gradients/model/layer_20/ff/mul_grad/Mul', defined at:\n"
        '  File "model.py", line 429, in <module>'
    )
    assert phase(text) == "backward"


def test_a_variables_initial_value_is_the_models_build():
    text = (
        "W tensorflow/core/common_runtime/bfc_allocator.cc:275] Ran out of memory trying to "
        "allocate 144.00MiB.  See logs for memory state.\n"
        "W tensorflow/core/framework/op_kernel.cc:965] Internal: Dst tensor is not initialized.\n"
        "E tensorflow/core/common_runtime/executor.cc:390] Executor failed to create kernel.\n"
        "\t [[Node: Variable_10/initial_value = Const[dtype=DT_FLOAT]()]]"
    )
    assert phase(text) == "load"


def test_a_forward_node_says_nothing_without_training():
    text = (
        "ResourceExhaustedError: OOM when allocating tensor with shape[1,4,32,512,512] and type "
        "float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
        "\t [[node encoder/block_018/SelfAttention/einsum/Einsum (defined at ops.py:1336) ]]"
    )
    assert phase(text) == "unknown"


def test_a_forward_node_in_a_training_script_is_the_training_forward():
    text = (
        "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with "
        "shape[256,112,112,64]\n"
        "\t [[Node: InceptionV1/Conv2d_1a_7x7/BatchNorm/moments/SquaredDifference = "
        'SquaredDifference[T=DT_FLOAT, _device="/job:localhost/replica:0/task:0/gpu:0"]()]]\n'
        "Traceback (most recent call last):\n"
        '  File "train_image_classifier.py", line 585, in <module>\n'
        "    tf.app.run()"
    )
    assert phase(text) == "train_forward"


# ------------------------------------------------------------------------------ log and code rules


def test_a_server_starting_up_is_loading():
    text = (
        "INFO tabby::serve: Starting server, this might takes a few minutes...\n"
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  CUDA failed with error out of memory"
    )
    assert phase(text) == "load"
    # a request served after the start-up line: serving
    text = (
        "INFO Starting server, this might take a few minutes...\n"
        "INFO Received request 7f3a: prompt of 812 tokens\n" + TORCH_1X
    )
    assert phase(text) == "generate"


def test_a_grad_scaler_step_is_the_optimizer_step():
    text = "    loss = self._grad_scaler.step(self._optimizer, closure)\n" + TORCH_1X
    assert phase(text) == "optimizer_step"
    # a learning-rate scheduler's step is no optimizer step
    text = "    self._lr_scheduler.step()\n" + TORCH_1X
    assert phase(text) != "optimizer_step"


# ------------------------------------------------------------------------------ detection


def test_directml_could_not_allocate_tensor():
    r = reading(
        "    RuntimeError: Could not allocate tensor with 402653184 bytes. There is not enough "
        "GPU video memory available!"
    )
    assert r.framework == "directml"
    assert r.events[0].figures["tried_to_allocate_bytes"] == 402_653_184  # printed in bytes


def test_directml_words_alone_are_not_an_oom():
    r = read_log("Note: there is not enough GPU video memory available for 4K previews.")
    assert not r.is_oom


def test_a_reporters_sentence_before_the_message_is_not_the_first_oom():
    ev = first_failure(
        "When I train, I am getting CUDA out of memory.\n\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 426.00 MiB (GPU 0; "
        "11.75 GiB total capacity; 4.52 GiB already allocated; 83.50 MiB free; 10.46 GiB "
        "reserved in total by PyTorch)"
    )
    assert ev.figures["tried_to_allocate_bytes"] == 446_693_376  # 426 x 2^20
    assert ev.figures["total_capacity_bytes"] == 12_616_466_432  # 11.75 x 2^30


def test_a_sentence_that_quotes_the_figures_is_still_read():
    ev = first_failure(
        "I am getting CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.80 GiB total "
        "capacity; 6.50 GiB already allocated; 10.00 MiB free; 6.60 GiB reserved in total by "
        "PyTorch)"
    )
    assert ev.figures["tried_to_allocate_bytes"] == 20_971_520  # 20 x 2^20


def test_tensorflow_cpu_allocator_is_host_ram_not_an_oom():
    text = (
        "Resource exhausted: OOM when allocating tensor with shape[1024,50257] and type float on "
        "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu\nKilled"
    )
    assert not read_log(text).is_oom
    gpu = text.replace("device:CPU:0 by allocator cpu", "device:GPU:0 by allocator GPU_0_bfc")
    assert read_log(gpu).is_oom


# ------------------------------------------------------------------------------ figures


def test_two_process_lines_the_job_is_the_one_near_pytorchs_reservation():
    ev = first_failure(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 260.00 MiB. GPU 0 has a "
        "total capacity of 23.64 GiB of which 77.12 MiB is free. Process 250179 has 19.19 GiB "
        "memory in use. Process 259318 has 4.36 GiB memory in use. Of the allocated memory 3.82 "
        "GiB is allocated by PyTorch, and 102.20 MiB is reserved by PyTorch but unallocated."
    )
    # reserved = 3.82 GiB + 102.20 MiB ~ 3.92 GiB: 4.36 GiB is 0.44 GiB over it, 19.19 GiB is
    # 15 GiB over it (more than any CUDA context and workspaces): 4.36 GiB is the job
    assert ev.figures["process_in_use_bytes"] == 4_681_514_353  # 4.36 x 2^30
    assert ev.figures["other_processes_total_bytes"] == 20_605_105_603  # 19.19 x 2^30


def test_two_process_lines_both_near_the_reservation_stay_unread():
    ev = first_failure(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 260.00 MiB. GPU 0 has a "
        "total capacity of 23.64 GiB of which 77.12 MiB is free. Process 1 has 4.50 GiB "
        "memory in use. Process 2 has 4.40 GiB memory in use. Of the allocated memory 3.82 "
        "GiB is allocated by PyTorch, and 102.20 MiB is reserved by PyTorch but unallocated."
    )
    assert "process_in_use_bytes" not in ev.figures
    assert "other_processes_total_bytes" not in ev.figures


def test_bfc_rounded_to_is_the_bin_not_the_request():
    ev = first_failure(
        "W external/org_tensorflow/tensorflow/tsl/framework/bfc_allocator.cc:479] Allocator "
        "(GPU_0_bfc) ran out of memory trying to allocate 27.93GiB (rounded to 29995136256)"
        "requested by op"
    )
    assert ev.figures["tried_to_allocate_bytes"] == 29_989_609_144  # 27.93 x 2^30


def test_the_whole_paste_scan_stays_fast_on_hostile_text():
    import time

    # every line holds an inference stem ("sampl") but no inference word: each is split
    for line in ("x_" * 300 + "(" + "Ab" * 150, "samplE_" * 85 + "("):
        text = "\n".join([line] * 3_000) + "\n" + TORCH_1X
        start = time.perf_counter()
        read_log(text)
        assert time.perf_counter() - start < 4.0
