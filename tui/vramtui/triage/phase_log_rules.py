"""What the error line and the log lines printed around it say about the stage, when the
traceback does not (`phase_rules.py` has the stage names and the frame rules; `phase.py`
decides which evidence to trust first).

Every pattern is plain `re` with bounded quantifiers, applied to one line (its first few
hundred or thousand characters) at a time.
"""

from __future__ import annotations

import re

_A = re.ASCII

# ------------------------------------------------------------------------------ the error line

# TensorFlow names the op that failed: "[[{{node training/Adam/mul_23}}]]", "[[Node: ...".
_TF_NODE = re.compile(r"\[\[(?:\{\{node |Node: )(?P<node>[^\s}=\]]{1,300})", _A)
_TF_OPT_NODE = re.compile(
    r"/(?:Adam|AdamW|SGD|RMSProp|RMSprop|Adagrad|Adadelta|Momentum|LAMB|Nadam|Adamax|Ftrl)"
    r"\w{0,20}/|Apply(?:Adam|Gradient|Momentum|RMSProp)",
    _A,
)
_TF_GRAD_NODE = re.compile(r"(?:^|/)gradients?(?:_\d{1,4})?/|_grad/|Grad\b|gradient_tape/", _A)

EVENT_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "load",
        re.compile(r"Free memory on device \(", _A),
        "vLLM checks free memory at start-up, before loading the weights",
    ),
    (
        "load",
        re.compile(r"cache blocks|KV cache|max seq len|Maximum concurrency", _A),
        "engine start-up: after loading the weights the engine sizes its KV cache, and it "
        "could not hold max_model_len; no request had been served",
    ),
    (
        "load",
        re.compile(r"Not enough memory to handle \d|Unable to warmup model", _A),
        "text-generation-inference's warm-up at start-up (a prefill of the configured batch "
        "before any request) ran out of memory",
    ),
    (
        "load",
        re.compile(r"Executor creation failed|Failed to initialize executor", _A),
        "engine start-up: TensorRT-LLM could not create its executor (weights, KV cache)",
    ),
    (
        "generate",
        re.compile(r"Request failed during generation", _A),
        "the server was answering a request (generation)",
    ),
    (
        "load",
        re.compile(
            r"Some modules are dispatched on the CPU|offloaded to the|offload the "
            r"whole model|offloaded layers",
            _A,
        ),
        "the model did not fit on the GPU when it was loaded, so modules went to CPU or disk",
    ),
    (
        "load",
        re.compile(
            r"llama_model_load|error loading model|load_tensors|alloc_tensor_range|"
            r"llm_load|model buffer|requires more system memory|error loading llama "
            r"server",
            _A,
        ),
        "llama.cpp was allocating the model's weight buffers",
    ),
    (
        "load",
        re.compile(
            r"compute buffer|graph_reserve|gallocr|kv_cache|kv cache|KV buffer|"
            r"llama_new_context|llama_init_from_model|llama_context|failed to create "
            r"context",
            re.IGNORECASE | _A,
        ),
        "llama.cpp was creating its context (KV cache, compute buffers) while loading the "
        "model, before any prompt",
    ),
)


def event_line_rule(text: str) -> tuple[str, str] | None:
    """(phase, reason) from the error line (or a line just after it) alone."""
    m = _TF_NODE.search(text)
    if m:
        node = m["node"]
        if _TF_OPT_NODE.search(node):
            return ("optimizer_step", f"TensorFlow names the failed op {node}: an optimizer update")
        if _TF_GRAD_NODE.search(node):
            return ("backward", f"TensorFlow names the failed op {node}: a gradient op")
    for phase, pattern, why in EVENT_RULES:
        if pattern.search(text):
            return (phase, why)
    return None


# ------------------------------------------------------------------------------ log lines

_RE_MMCV_BAR = re.compile(r"\] {0,3}\d{1,9}/\d{1,9}, [\d.]{1,12} task/s", _A)
_RE_TRAINING_LINE = re.compile(
    r"\*{3,} Running training \*{3,}|\{'loss': |'train_loss'|\bEpoch:? ?\[?\d{1,6}\b|"
    r"\bEpoch \(train\)|\btrain: +\d|\bIter ?\[\d",
    _A,
)
_RE_COMFY_NODE = re.compile(
    r"Node Type:\W{0,8}(?P<a>\w{1,120})|Error occurred when executing (?P<b>\w{1,120})", _A
)
LOG_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "optimizer_step",
        re.compile(
            r"(?:Before|After) initializing optimizer states|initializ\w{0,3} "
            r"optimizer states|Creating fp32 partitions",
            re.IGNORECASE | _A,
        ),
        "the log says the optimizer states were being created",
    ),
    (
        "other",
        re.compile(
            r"\*{3,} Running Evaluation|\*{3,} Running Prediction|Running validation|"
            r"\((?:valid|val|validation|eval)\)|Validation DataLoader|\bValidating\b|"
            r"\bValidation: {0,3}\d|\bEvaluating\b",
            re.IGNORECASE | _A,
        ),
        "the log was in the evaluation loop (validation / prediction)",
    ),
    (
        "other",
        re.compile(
            r"Saving model checkpoint to|Saving checkpoint|Merging LoRA", re.IGNORECASE | _A
        ),
        "the log was saving a checkpoint or merging adapters",
    ),
    (
        "load",
        re.compile(
            r"Loading checkpoint shards|Loading safetensors checkpoint shards|Loading "
            r"model weights|Starting to load model|loading weights file|Loading weights|"
            r"llama_model_load|llm_load_tensors|load_tensors:|Loading model from|"
            r"Instantiating \w{1,80} model|Loading pipeline components|"
            r"Created TensorFlow device",
            re.IGNORECASE | _A,
        ),
        "the log was loading the model (or creating the device it loads onto)",
    ),
    (
        "generate",
        re.compile(
            r"prompt eval|Processed prompts|Adding requests|Avg prompt throughput|"
            r"Received request|Output generated in \d|Requested to load|Loading \d{1,3} new "
            r"models?|loaded completely|loaded partially|got prompt|Prefill batch",
            re.IGNORECASE | _A,
        ),
        "the log was serving or running generation (prompts, requests, sampling; ComfyUI moves "
        "a model to the GPU just before the node that samples or decodes with it)",
    ),
    (
        "load",
        re.compile(
            r"Memory profiling|Available KV cache memory|GPU KV cache size|KV cache (?:size|"
            r"memory)|# GPU blocks|Maximum concurrency for|Method Warmup|warmup\{|Warming up|"
            r"Capturing CUDA graph|Capturing cudagraph|graph capturing|llama_new_context|"
            r"llama_init_from_model|llama_context|llama_kv_cache|graph_reserve|"
            r"Model loading took|init_memory_pool|Init torch distributed",
            re.IGNORECASE | _A,
        ),
        "the inference engine was starting up (profiling, KV cache, warm-up) and had served "
        "no request",
    ),
    (
        "train_forward",
        _RE_TRAINING_LINE,
        "the log shows training running",
    ),
)

# Lines printed just after the error, as the program unwinds: what had just failed.
AFTER_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "load",
        re.compile(
            r"Shard \d{1,4} failed to start|ShardCannotStart|Method Warmup encountered|"
            r"Unable to warmup|EngineCore failed to start|Engine core initialization failed|"
            r"Failed to initialize executor",
            _A,
        ),
        "the log says the server failed to start: the error came during start-up (loading or "
        "warming up), before any request",
    ),
    (
        "generate",
        re.compile(
            r"Method (?:Prefill|Decode) encountered|Request failed during generation|"
            r"Output generated in \d|Graph stats:",
            _A,
        ),
        "the log after the error reports a generation request or graph ending (prefill, decode, "
        "a generated output, InvokeAI's graph stats)",
    ),
    (
        "train_forward",
        re.compile(r"Total training time", _A),
        "the training loop was running (its end-of-training hook prints 'Total training time' "
        "as the error unwinds it)",
    ),
)


def comfy_node_rule(text: str) -> tuple[str, str] | None:
    m = _RE_COMFY_NODE.search(text)
    if not m:
        return None
    node = m["a"] or m["b"]
    if "Load" in node:
        return ("load", f"the ComfyUI node that failed is {node}, a loader")
    return (
        "generate",
        f"the ComfyUI node that failed is {node}: a node of a generation graph (sampling, "
        "decoding; ComfyUI moves models to the GPU inside the node that uses them)",
    )


def log_line_rule(text: str) -> tuple[str, str] | None:
    """(phase, reason) from one log line before the error."""
    hit = comfy_node_rule(text)
    if hit:
        return hit
    for phase, pattern, why in LOG_RULES:
        if pattern.search(text):
            return (phase, why)
    return None


def is_inference_progress(text: str) -> bool:
    """An mmcv ProgressBar line ('[>>>>  ] 20/76, 0.3 task/s, elapsed: ...'): a test loop."""
    return bool(_RE_MMCV_BAR.search(text))


def is_training_line(text: str) -> bool:
    return bool(_RE_TRAINING_LINE.search(text))


def after_line_rule(text: str) -> tuple[str, str] | None:
    for phase, pattern, why in AFTER_RULES:
        if pattern.search(text):
            return (phase, why)
    return None
