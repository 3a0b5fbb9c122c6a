"""What traceback frames and code lines say about the stage (`phase_log_rules.py` reads the error
line and the log around it; `phase.py` decides which evidence to trust first).

Stages: `load` is everything before the job's first real step: reading and placing the weights,
and an inference engine's start-up (vLLM's memory profiling run and KV-cache allocation,
text-generation-inference's warm-up, llama.cpp creating its context), where no request has been
served yet. `generate` is any inference forward afterwards (serving, sampling, denoising, VAE
decode). Wrapping the model for distributed training (DistributedDataParallel, FSDP,
`deepspeed.initialize`) comes before the first step too: it broadcasts or shards the weights and
allocates the gradient buckets or partitions, so it is `load`. `other` is neither a training nor
a generation step: evaluation, a checkpoint save, post-training quantisation, merging adapters;
the reason names which.

Every pattern is plain `re` with bounded quantifiers, applied to one line (its first few
thousand characters) at a time.
"""

from __future__ import annotations

import re

from vramtui.triage.tracebacks import Frame

_A = re.ASCII

# A rule's answer: (phase, strength, reason, matched on the code line). strength: "strong"
# decides at once (deepest frame wins), "context" only when no strong frame exists, "weak"
# after the error line and the log after it.
Rule = tuple[str, str, str, bool]


def _set(*names: str) -> frozenset[str]:
    return frozenset(names)


_BACKWARD_FUNCS = _set(
    "_engine_run_backward",
    "backward",
    "_backward_fn",
    "manual_backward",
    "run_backward",
    "_run_backward",
    "backward_step",
)
_OPT_DS_FUNCS = _set(
    "step",
    "_create_fp32_partitions",
    "initialize_optimizer_states",
    "_setup_for_real_optimizer",
    "_optimizer_step",
    "_take_model_step",
    "_optimizer_states_and_gradient_swap_in",
    "_prepare_fp32_grad_for_sub_group",
    "_create_fp32_sub_groups",
    "unscale_and_clip_grads",
    "_update_scale",
)
# Optimizer methods that are not a step: restoring or saving its state (a checkpoint).
_OPT_NOT_STEP = _set("load_state_dict", "state_dict")
# Inference engines' start-up, after the weights are in: memory profiling, KV-cache sizing
# and allocation, warm-up, CUDA-graph capture (vLLM v0/v1, text-generation-inference, SGLang).
STARTUP_FUNCS = _set(
    "_initialize_kv_caches",
    "determine_num_available_blocks",
    "profile_run",
    "_dummy_run",
    "_dummy_sampler_run",
    "_dummy_pooler_run",
    "initialize_cache",
    "_allocate_kv_cache",
    "allocate_kv_cache",
    "_init_cache_engine",
    "initialize_kv_cache",
    "initialize_from_config",
    "_allocate_kv_cache_tensors",
    "_reshape_kv_cache_tensors",
    "initialize_kv_cache_tensors",
    "capture_model",
    "determine_available_memory",
    "compile_or_warm_up_model",
    "get_kv_cache_config",
    "check_enough_kv_cache_memory",
    "_check_enough_kv_cache_memory",
    "raise_if_cache_size_invalid",
    "init_kv_cache",
    "init_memory_pool",
    "profile_max_num_token",
    "init_cuda_graphs",
    # gpt-fast's KV-cache pre-allocation (model.setup_caches(max_batch_size, max_seq_length)),
    # which fish-speech and other gpt-fast descendants keep
    "setup_caches",
)
# A warm-up is a start-up step only inside a serving engine (elsewhere it may be anything).
_ENGINE_WARMUP_FUNCS = _set("warmup", "Warmup", "warm_up", "_warmup")
_ENGINE_FILES = (
    "text_generation_server/",
    "vllm/",
    "sglang/",
    "lmdeploy/",
    "tensorrt_llm/",
    "lorax_server/",
    "aphrodite/",
    "exllamav2/",
)


# Inside a serving engine, building the per-request machinery is start-up too: lmdeploy's
# TurboMind creates its model instances (weights' workspaces, KV cache), exllamav2 allocates its
# cache tensors when the cache object is constructed.
_ENGINE_BUILD_FUNCS = _set(
    "create_model_instance",
    "_create_model_instance",
    "create_state_tensors",
    # the engine itself being constructed (vLLM's AsyncLLMEngine.from_engine_args)
    "from_engine_args",
    "from_vllm_config",
    "_init_engine",
)


def is_startup_frame(fr: Frame) -> bool:
    """The frame is an inference engine's start-up step (after the weights, before serving)."""
    func = fr.func.rsplit(".", 1)[-1]
    if func in STARTUP_FUNCS:
        return True
    file = fr.file.lower()
    if not any(part in file for part in _ENGINE_FILES):
        return False
    if func in _ENGINE_WARMUP_FUNCS or func in _ENGINE_BUILD_FUNCS:
        return True
    # a quantised weight repacked for a kernel after loading (vLLM's
    # marlin_utils_fp4._repack_marlin_experts, gptq_marlin_repack): weights prepared at start-up
    if "repack" in func.lower():
        return True
    # a KV-cache class being constructed (exllamav2/cache.py: ExLlamaV2Cache.__init__)
    return func == "__init__" and file.rsplit("/", 1)[-1].startswith(("cache", "kv_cache"))


_LOAD_FUNCS = _set(
    "from_pretrained",
    "_from_pretrained",
    "_load_pretrained_model",
    "load_state_dict",
    "_load_state_dict_into_meta_model",
    "_load_state_dict_into_model",
    "load_checkpoint_and_dispatch",
    "load_checkpoint_in_model",
    "set_module_tensor_to_device",
    "set_module_quantized_tensor_to_device",
    "dispatch_model",
    "_load_from_state_dict",
    "load_model",
    "load_weights",
    "load_shard_file",
    "_load_state_dict_into_zero3_model",
    "create_quantized_param",
    "quantize_4bit",
    "prepare_model_for_kbit_training",
    "convert_and_load_state_dict_in_model",
    "load_sharded_checkpoint",
    "load_file",
    "safe_load_file",
    "_apply",
    "_load_model",
    "load_adapter",
    "_load_checkpoint",
    "get_model",
    "process_weights_after_loading",
    "from_single_file",
    "_quantize",
    "_load_best_model",
    "load_lora",
    "_materialize_meta_tensors",
    "_move_model_to_device",
    "load_from_checkpoint",
    "create_model",
    "build_model",
    "init_detector",
    "init_model",
    "pipeline",
    # JAX / Flax copying the parameters to every device (flax.jax_utils.replicate)
    "device_put_replicated",
    "_device_put_replicated",
)
_GEN_FUNCS = _set(
    "generate",
    "_sample",
    "sample",
    "greedy_search",
    "_greedy_search",
    "beam_search",
    "_beam_search",
    "beam_sample",
    "_beam_sample",
    "_assisted_decoding",
    "assisted_decoding",
    "_contrastive_search",
    "contrastive_search",
    "_dola_decoding",
    "prefill",
    "_prefill",
    "decode",
    "_decode",
    "decode_step",
    "generate_token",
    "generate_step",
    "execute_model",
    "_execute_model",
    # image generation (A1111 / ldm, diffusers), detection and speech inference
    "process_images",
    "process_images_inner",
    "decode_first_stage",
    "encode_first_stage",
    "txt2img",
    "img2img",
    "denoise",
    "im_detect_all",
    "im_detect_bbox",
    "im_detect_bbox_scale",
    "im_detect_bbox_aug",
    "im_detect_mask",
    "inference_on_dataset",
    "inference_detector",
    "single_gpu_test",
    "multi_gpu_test",
    "transcribe",
    "tts",
    "tts_with_preset",
    "synthesize",
    "predict_step",
    "run_inference",
    "inference",
    "infer",
)
_EVAL_FUNCS = _set(
    "evaluate",
    "_evaluate",
    "evaluation_loop",
    "prediction_step",
    "prediction_loop",
    "_maybe_log_save_evaluate",
    "validation_step",
    "val_step",
    "test_step",
    "eval_step",
    "evaluate_loop",
    "_evaluation_step",
    "_run_evaluation",
    "run_evaluation",
    "_do_eval",
    "_do_evaluate",
    "validate",
    "validation",
    "run_validation",
    "validation_epoch",
    "val_epoch",
    "valid_epoch",
    "validate_epoch",
    "eval_epoch",
    "evaluate_epoch",
    "val_one_epoch",
    "validate_one_epoch",
    "evaluate_one_epoch",
)
_SAVE_FUNCS = _set(
    "save_pretrained",
    "save_model",
    "_save_checkpoint",
    "_save",
    "save_checkpoint",
    "save_state",
    "save_16bit_model",
    "_save_zero_checkpoint",
    "save_file",
    "consolidate_state_dict",
    "get_state_dict",
    "_save_topk_checkpoint",
    "_save_last_checkpoint",
    "save_weights",
    "export",
    "onnx_export",
    "push_to_hub",
    # nn.Module's hook that writes one module's tensors into a state dict being built (a
    # checkpoint's); bitsandbytes' 8-bit layers undo their GPU tile layout there
    "_save_to_state_dict",
)
_MERGE_FUNCS = _set("merge_and_unload", "_unload_and_optionally_merge", "merge_adapter")
_WRAP_FUNCS = _set(
    "_wrap_model",
    "prepare_model",
    "_prepare_deepspeed",
    "_sync_module_states",
    "_verify_param_shape_across_processes",
    "_sync_params_and_buffers",
    "fully_shard",
    "prepare",
    "_prepare_one",
    "_prepare_fsdp",
)
# A function named only for validation once its underscores are gone: a trainer's private
# `__val` / `_eval` / `_valid` step.
_EVAL_BARE = _set("val", "eval", "valid", "validation", "validate", "evaluate")
# A function named for loading weights, in any case convention: loadCheckpoint, load_model_
# weights, LoadModel, _load_pretrained_weights, restore_checkpoint.
_LOAD_NAME = re.compile(
    r"^_{0,2}(?:load|restore)_?(?:from_?)?(?:pretrained_?)?(?:checkpoint|ckpt|model|weights?|"
    r"state_?dict|shards?|params|parameters)",
    re.IGNORECASE | _A,
)
# A function named for a prefill or decode step of serving: _continuation_prefill,
# forward_decode, chunked_prefill.
_SERVE_STEP_NAME = re.compile(r"(?:^|_)(?:prefill|decode)(?:_|$)", _A)
# A function named for evaluating something: evaluate_predictions, validate_model, test_epoch.
_EVAL_PREFIX = re.compile(
    r"evaluate_[a-z]|(?:eval|validate|validation|test)_(?:model|epoch|one|loop|step|batch|"
    r"dataset|data|predictions|all)",
    _A,
)
# Frames that, above a forward, put it inside a training run's evaluation (mmcv hooks).
EVAL_SCOPE_FUNCS = _EVAL_FUNCS | _set("after_train_epoch")
# Post-training quantisation packages: calibration runs the model over samples.
_QUANT_CALIBRATION_FILES = (
    "awq/quantize/",
    "awq/models/base.py",
    "auto_gptq/quantization/",
    "auto_gptq/modeling/_base.py",
    "gptqmodel/quantization/",
    "optimum/gptq/",
    "llmcompressor/",
    "/quark/torch/quantization/",
    "modelopt/torch/quantization/",
    "neural_compressor/",
)
_TRAIN_STRONG_FUNCS = _set(
    "training_step", "train_step", "_training_step", "training_step_and_backward"
)
_TRAIN_CONTEXT_FUNCS = _set(
    "compute_loss",
    "train",
    "_inner_training_loop",
    "fit",
    "train_epoch",
    "train_one_epoch",
    "training_loop",
    "run_training",
    "_run_train",
    "_run_stage",
    "train_loop",
    "closure",
    "_fit_loop",
    "run_epoch",
    "run_step",  # detectron2 SimpleTrainer / AMPTrainer
    "do_train",  # detectron2 plain_train_net
    "train_model",  # Detectron (Caffe2)
    "train_iter",
    "train_batch",
    "train_one_step",
    "training_epoch",
    "train_on_batch",
    "update_core",  # chainer's StandardUpdater (ESPnet1): one training iteration
)
# A training script by its file name: train.py, tools/train_net.py, main_train.py,
# finetune_lora.py, pretrain.py. A model called from it, with no backward or optimizer frame
# below and no evaluation or loading frame, is the training forward.
_TRAIN_SCRIPT = re.compile(
    r"(?:^|[/\\_])(?:train|training|finetune|fine_tune|pretrain|sft|dpo|rlhf|grpo|ppo)"
    r"(?:_\w{0,40})?\.py$",
    _A,
)
# A project's evaluation code by where it lives: an evaluation/ or evaluator package, an
# eval.py / evaluation.py module (rfdetr/evaluation/matching.py, tools/evaluator.py).
_EVAL_PATH = re.compile(
    r"/(?:evaluation|evaluator|evaluators)(?:/|\.py$)|/eval(?:uation)?\.py$", _A
)
# A function named for inference: transcribe_mic, predict_image, infer_batch, run_inference,
# model_generate. Not "generate_" or "sample_" first: training code generates anchors and masks
# and samples batches.
_INFER_NAME = re.compile(
    r"^(?:transcribe|predict|infer|inference)_\w|\w_(?:transcribe|predict|prediction|infer|"
    r"inference|generate|generation)$",
    _A,
)
# Loss functions and training targets: computed in a training step's forward.
_LOSS_FUNCS = _set(
    "cross_entropy",
    "nll_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "mse_loss",
    "kl_div",
    "loss_by_feat",
    "get_targets",
)
_LOSS_FILES = (
    "mmdet/models/losses/",
    "mmdet/models/task_modules/assigners/",
    "mmdet/core/bbox/assigners/",
    "mmdet/structures/bbox/bbox_overlaps.py",
    "mmdet/core/bbox/iou_calculators/",
)

# A project's loss code by where it lives: a loss/ or losses/ package, a loss.py or
# *_loss.py module (src/loss/ocr_loss/encoder.py, models/losses.py, utils/focal_loss.py).
_LOSS_PATH = re.compile(r"/(?:\w{0,40}_)?loss(?:es)?(?:/|\.py$|_\w{0,40}\.py$)", _A)

RE_OPT_CODE = re.compile(
    r"\b(?:\w{0,30}_)?(?:optimizer|optim|opt|scaler)(?:_\w{1,20})?\.step\(|"
    r"zeros_like\(p, memory_format|\btorch\._foreach_\w{1,24}_?\(",
    _A,
)
RE_BACKWARD_CODE = re.compile(r"\bbackward\(|\brun_backward\(|\bautograd\.grad\(", _A)
RE_LOAD_CODE = re.compile(
    r"\bfrom_pretrained\(|\bload_state_dict\(|\btorch\.load\(|\bsafe_open\(|\bload_file\(|"
    r"\b(?:model|self\.model|net|module|pipe|pipeline|llm|base_model|unet|vae|transformer)\w{0,40}"
    r"\.(?:to|cuda|half|bfloat16)\(|\._apply\(|\bpipeline\(|\bLLM\(|\bWhisperModel\(|"
    r"\b\w{0,40}Trainer\(|"
    # torch.nn.Module.to's convert() (torch 2.x splits the call over lines, so a traceback
    # shows "return t.to(" alone): each parameter being moved to the device
    r"^\W{0,4}\s{0,16}return t\.to\(\s{0,4}$|"
    # a sub-model attribute moved to the device: self.llama_model.to(...), self.text_model.cuda()
    r"\bself\.\w{1,30}_(?:model|net|encoder|decoder|unet|vae|transformer)\.(?:to|cuda)\(|"
    # a layer creating its weights (model construction): Parameter(torch.Tensor(out, in))
    r"\bParameter\(\s{0,4}torch\.(?:Tensor|empty|zeros|ones|randn|rand)\("
    # a KV buffer pre-allocated at start-up: self.value_buffer = [torch.empty(...) ...]
    r"|\bself\.(?:\w{0,20}_)?(?:kv|key|value|k|v)_buffers?\s{0,2}=\s{0,2}\[?\s{0,2}"
    r"torch\.(?:empty|zeros)\(|"
    # a class built from a Hub model id: FlaxWhisperPipline("openai/whisper-large-v2", ...)
    r"\b[A-Z]\w{0,60}\(\s{0,4}[\"'][\w.-]{1,60}/[\w.-]{1,80}[\"']|"
    # TensorFlow 1.x allocating every variable of the graph (the weights) before the first step
    r"\b(?:global_variables_initializer|initialize_all_variables)\(|"
    # JAX / Flax initialising the parameters (model.init(key, x), a sharded init_xmap / init_fn)
    r"\.init(?:_xmap|_fn|_params|_weights|_state)?\(\s{0,4}(?:jnp\.|jax\.|\w{0,20}key|rng)",
    _A,
)
RE_LOAD_WEAK_CODE = re.compile(
    r"\.cuda\(\)|\.to\(\s{0,4}(?:device\b|dev\b|\"cuda|'cuda|f\"cuda|f'cuda|torch\.device|\"mps|'mps|"
    r"\"xpu|'xpu|accelerator\.device|self\.device\b|args\.device)",
    _A,
)
RE_GEN_CODE = re.compile(
    r"\.generate\(|\bllm\.(?:chat|generate)\(|\.(?:transcribe|tts\w{0,30}|synthesi[sz]e|"
    r"infer|inference)\(|\bpipe\(|"
    # CTranslate2's inference-only API: Translator.translate_batch, Generator.generate_batch,
    # Encoder.forward_batch, score_batch (a library with no training)
    r"\.(?:translate|generate|forward|score)_batch\(",
    _A,
)
RE_WRAP_CODE = re.compile(
    r"\b\w{0,20}DistributedDataParallel\(|\bDDP\(|\bFSDP\(|\bFullyShardedDataParallel\(|"
    r"\bdeepspeed\.initialize\(|\bfully_shard\(",
    _A,
)
RE_OTHER_CODE = re.compile(
    r"\btorch\.onnx\.export\(|\btorch\.save\(|\.save_pretrained\(|\bmerge_and_unload\(",
    _A,
)
_WRAP_WHY = (
    "{} wraps the model for distributed training (DistributedDataParallel, FSDP or DeepSpeed "
    "broadcast or shard the weights and allocate gradient buckets or partitions): set-up, "
    "before the first step"
)
RE_QUANTIZE_CODE = re.compile(r"\b\w{0,40}model\w{0,20}\.quantize\(", _A)
# A tensor of literal size created straight on the device (a REPL test, a reproduction
# snippet): `torch.rand(46000, 10000, device='xpu')`, `mx.eye(28000)`. No model step.
_LITERAL_SIZE = r"\(\s{0,2}[\[(]?\s{0,2}\d"
RE_TENSOR_ALLOC_CODE = re.compile(
    r"\btorch\.(?:rand|randn|randint|zeros|ones|empty|full|eye|arange|tensor)"
    + _LITERAL_SIZE
    + r"[^\n]{0,300}(?:device\s{0,2}=|\.cuda\(|\.to\()|"
    r"\b(?:mx|jnp)\.(?:random\.\w{1,20}|zeros|ones|empty|full|eye|arange)" + _LITERAL_SIZE,
    _A,
)
# A training loop started from a script (only used to see that a snippet does more than one
# thing; it names no step).
RE_TRAIN_LOOP_CODE = re.compile(r"\b\w{0,40}\.(?:train|fit)\(", _A)
RE_TRAIN_CODE = re.compile(r"\btraining_step\(|\btrain_step\(", _A)

_INFERENCE_WHY = "inference: generation, sampling, denoising or decoding"
_STARTUP_WHY = (
    "the inference engine is starting up (memory profiling, KV-cache allocation or warm-up, "
    "after the weights are loaded and before any request is served)"
)


def code_rule(code: str) -> tuple[str, str] | None:
    """(phase, reason) from a source line alone (a frame's code line, a truncated paste, a
    reproduction snippet quoted before the error)."""
    code = code[:2_000]
    if RE_OPT_CODE.search(code):
        return ("optimizer_step", "this line steps the optimizer")
    if RE_BACKWARD_CODE.search(code):
        return ("backward", "this line runs the backward pass")
    if RE_QUANTIZE_CODE.search(code):
        return ("other", "this line runs post-training quantisation (calibration)")
    if RE_WRAP_CODE.search(code):
        return ("load", _WRAP_WHY.format("this line"))
    if RE_OTHER_CODE.search(code):
        return ("other", "this line saves, exports or merges the model")
    if RE_GEN_CODE.search(code):
        return ("generate", "this line runs inference (generation, transcription, synthesis)")
    if RE_LOAD_CODE.search(code):
        return (
            "load",
            "this line loads the model, builds an engine or trainer around it, or moves it to "
            "the GPU",
        )
    if RE_TRAIN_CODE.search(code):
        return ("train_forward", "this line runs a training step")
    return None


def snippet_rule(code: str) -> tuple[str, str] | None:
    """`code_rule`, and for a line outside any traceback (a REPL statement, a quoted snippet)
    also a bare tensor allocation on the device. Inside a model's frames such an allocation is
    part of whatever step runs the model, so frames do not use this rule."""
    hit = code_rule(code)
    if hit:
        return hit
    if RE_TENSOR_ALLOC_CODE.search(code[:2_000]):
        return (
            "other",
            "this line creates a tensor directly on the device (a test allocation), outside "
            "any model step",
        )
    return None


def is_engine_frame(fr: Frame) -> bool:
    """The frame runs inside a serving engine's code (vLLM, SGLang, text-generation-inference,
    lmdeploy, TensorRT-LLM, a model plug-in under a `vllm/` folder)."""
    file = fr.file.lower()
    return bool(fr.func) and any(part in file for part in _ENGINE_FILES)


def is_training_script(fr: Frame) -> bool:
    """The frame runs in a training script, by its file name (train.py, finetune_lora.py)."""
    return bool(fr.func) and bool(_TRAIN_SCRIPT.search(fr.file.lower()))


def is_module_forward(fr: Frame) -> bool:
    """A torch.nn.Module call or forward (the model running)."""
    func = fr.func.rsplit(".", 1)[-1]
    return func in ("forward", "_call_impl", "_wrapped_call_impl", "__call__", "_conv_forward")


def is_graph_training_frame(fr: Frame) -> bool:
    """A Keras / TensorFlow training loop: one graph call runs forward, backward and update."""
    file = fr.file.lower()
    return "keras/" in file or "tensorflow/" in file or "tf_keras/" in file


def classify_frame(fr: Frame) -> Rule | None:
    file = fr.file.lower()
    func = fr.func.rsplit(".", 1)[-1]  # IPython writes qualified names: GenerationMixin.generate
    code = fr.code
    # --- backward
    if func == "_engine_run_backward":
        return ("backward", "strong", "the autograd engine is running the backward pass", False)
    if fr.func.startswith("<backward"):  # TorchScript: File "<string>", line 83, in <backward op>
        return (
            "backward",
            "strong",
            "a TorchScript graph's backward op (its derivative formula) is running",
            False,
        )
    if "torch/autograd/function.py" in file:
        if "user_fn(" in code or func == "backward":
            return ("backward", "strong", "a custom autograd Function's backward is running", False)
    elif "torch/utils/checkpoint.py" in file and func in (
        "backward",
        "unpack_hook",
        "recompute_fn",
    ):
        return (
            "backward",
            "strong",
            "activation checkpointing recomputes the forward inside the backward pass",
            False,
        )
    elif func in _BACKWARD_FUNCS:
        return ("backward", "strong", "the backward pass (gradients) is running", False)
    # --- optimizer step
    if func == "_init_group":
        return (
            "optimizer_step",
            "strong",
            "the optimizer is creating its state (exp_avg, exp_avg_sq) on its first step",
            False,
        )
    if (
        ("torch/optim/" in file and "lr_scheduler" not in file and func not in _OPT_NOT_STEP)
        or "bitsandbytes/optim/" in file
        or "apex/optimizers" in file
        or "deepspeed/ops/adam" in file
        or "deepspeed/ops/lamb" in file
        or "transformers/optimization.py" in file
        or "/galore_torch/" in file
    ):
        return ("optimizer_step", "strong", "an optimizer step is updating the weights", False)
    if "deepspeed/" in file and func in _OPT_DS_FUNCS:
        return (
            "optimizer_step",
            "strong",
            "DeepSpeed is creating or stepping the optimizer state partitions",
            False,
        )
    if "accelerate/optimizer.py" in file and func == "step":
        return ("optimizer_step", "strong", "an optimizer step is updating the weights", False)
    # --- engine start-up (after the weights, before any request)
    if is_startup_frame(fr):
        return ("load", "strong", _STARTUP_WHY, False)
    # --- other: evaluation, saving, quantisation, merging, wrapping
    if func in _EVAL_FUNCS or _EVAL_PREFIX.match(func) or func.lstrip("_") in _EVAL_BARE:
        return (
            "other",
            "strong",
            "the evaluation loop (validation / prediction), not a training or generation step",
            False,
        )
    if func in _SAVE_FUNCS and not ("safetensors" in file and func != "save_file"):
        return (
            "other",
            "strong",
            "a checkpoint save or export, not a training or generation step",
            False,
        )
    if func in _MERGE_FUNCS:
        return ("other", "strong", "merging adapters into the model", False)
    if func in _WRAP_FUNCS and not (
        func in ("prepare", "_prepare_one") and "accelerate" not in file
    ):
        return ("load", "strong", _WRAP_WHY.format("the model"), False)
    if "torch/nn/parallel/distributed.py" in file and func == "__init__":
        return ("load", "strong", _WRAP_WHY.format("DistributedDataParallel"), False)
    if "deepspeed/__init__.py" in file and func == "initialize":
        return ("load", "strong", _WRAP_WHY.format("deepspeed.initialize"), False)
    if any(part in file for part in _QUANT_CALIBRATION_FILES):
        return (
            "other",
            "strong",
            "post-training quantisation: calibration runs the model over samples to choose the "
            "quantised weights",
            False,
        )
    # --- load
    if (
        func in _LOAD_FUNCS
        or "safetensors/" in file
        or "torch/serialization.py" in file
        or "model_executor/model_loader" in file
        or ("bitsandbytes/nn/modules.py" in file and func in ("to", "cuda", "_quantize"))
        or ("torch/nn/modules/module.py" in file and func in ("_apply", "convert", "to", "cuda"))
        or (
            "torch/nn/modules/module.py" in file
            and func == "<lambda>"
            and ("_apply(" in code or ".cuda(" in code or ".to(" in code)
        )
        or ("faster_whisper/transcribe.py" in file and func in ("__init__", "init"))
        # copy.deepcopy of a model: each Parameter copies its data (a second copy of the
        # weights, made while setting up: an EMA model, a per-worker model)
        or ("torch/nn/parameter.py" in file and func == "__deepcopy__")
    ):
        return (
            "load",
            "strong",
            "the weights are being loaded, converted or moved to the GPU",
            False,
        )
    if _LOAD_NAME.match(func):
        return ("load", "strong", f"a function named for loading weights ({func})", False)
    if func in ("__init__", "reset_parameters") and re.search(
        r"torch/nn/modules/(?:conv|linear|sparse|normalization|batchnorm|rnn|activation|"
        r"transformer)\.py$",
        file,
    ):
        # a torch layer's constructor creates its weights (on the GPU under a device context):
        # the model is being built, before any step
        return ("load", "strong", "a layer is being constructed: the model is being built", False)
    if func == "__init__" and file.rsplit("/", 1)[-1].endswith("trainer.py"):
        return (
            "load",
            "strong",
            "a Trainer is being constructed: it places the model on the GPU",
            False,
        )
    # --- generate
    if (
        func in _GEN_FUNCS
        or _SERVE_STEP_NAME.search(func)
        or "transformers/generation/" in file
        or "transformers/cache_utils.py" in file
        or "transformers/pipelines/" in file
        or "diffusers/pipelines/" in file
        or "/vllm/v1/sample/" in file
        or "vllm/model_executor/layers/sampler.py" in file
    ):
        return ("generate", "strong", _INFERENCE_WHY, False)
    # --- training step (forward)
    if func in _TRAIN_STRONG_FUNCS or (
        "lightning" in file and func in ("closure", "_training_step")
    ):
        return (
            "train_forward",
            "strong",
            "the training step's forward pass (no backward or optimizer frame below it)",
            False,
        )
    # --- code line
    if code:
        hit = code_rule(code)
        if hit:
            return (hit[0], "strong", hit[1], True)
    if func in _TRAIN_CONTEXT_FUNCS:
        return (
            "train_forward",
            "context",
            "a training loop; no backward or optimizer frame is below it, so the forward pass",
            False,
        )
    if _EVAL_PATH.search(file) and "site-packages/" not in file and "dist-packages/" not in file:
        return (
            "other",
            "context",
            "the project's evaluation code (by its path): the evaluation loop, not a training "
            "or generation step",
            False,
        )
    if _INFER_NAME.search(func):
        return ("generate", "context", f"a function named for inference ({func})", False)

    if func in _LOSS_FUNCS or any(part in file for part in _LOSS_FILES) or _LOSS_PATH.search(file):
        return (
            "train_forward",
            "context",
            "a loss (or its training targets) is being computed: the training step's forward",
            False,
        )
    if "torch/utils/_contextlib.py" in file and func == "decorate_context":
        return (
            "generate",
            "weak",
            "a function under torch.no_grad()/inference_mode(): an inference forward",
            False,
        )
    if code and RE_LOAD_WEAK_CODE.search(code):
        return ("load", "weak", "this line moves tensors or the model to the GPU", True)
    return None


def deepest_code_rule(fr: Frame, rule: Rule | None) -> Rule | None:
    """The deepest frame's code line is the statement that was running when memory ran out. In
    a project's own function named for inference (`infer`, `run_inference`), a statement that
    loads the model or moves it to the GPU (`pipe.to(device)`) is a lazy load: the statement
    decides, not the function's name. Library frames keep their rule."""
    if rule is None or rule[0] != "generate" or not fr.code or not fr.func:
        return rule
    if _LIB_FILE.search(fr.file):
        return rule
    hit = code_rule(fr.code)
    if hit is None or hit[0] != "load":
        return rule
    return (
        "load",
        "strong",
        f"{hit[1]}; the statement that was running decides over the function's name",
        True,
    )


_LIB_FILE = re.compile(r"site-packages|dist-packages|/lib/python\d|<frozen", _A)
