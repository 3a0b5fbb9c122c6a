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
# TensorFlow 1.13-1.15 writes "[[node x (defined at ...)", and a graph-mode traceback says
# "Caused by op 'x', defined at:" (Python 2: "Caused by op u'x'").
_TF_NODE = re.compile(
    r"\[\[(?:\{\{node |Node: |node )(?P<node>[^\s}=\]]{1,300})|Caused by op u?'(?P<op>[^\s']{1,300})'",
    _A,
)
_TF_OPT_NODE = re.compile(
    r"/(?:Adam|AdamW|SGD|RMSProp|RMSprop|Adagrad|Adadelta|Momentum|LAMB|Nadam|Adamax|Ftrl)"
    r"\w{0,20}/|Apply(?:Adam|Gradient|Momentum|RMSProp)",
    _A,
)
_TF_GRADIENTS_SCOPE = re.compile(r"(?:^|/)gradients(?:_\d{1,4})?/", _A)
_TF_GRAD_NODE = re.compile(r"(?:^|/)gradients?(?:_\d{1,4})?/|_grad/|Grad\b|gradient_tape/", _A)

# TensorFlow 2 names the op on a line of its own, and in "Detected at node" (eager and tf.function).
_TF2_NODE = re.compile(
    r"^[\s`>]{0,8}Node: '(?P<node>[^\s']{1,300})'|Detected at node '(?P<n2>[^\s']{1,300})'", _A
)
_ORT_HEAD = re.compile(r"Status Message:\s{0,4}$", _A)


def heads_message(text: str) -> bool:
    """The line just before an error line that belongs to its message: TensorFlow 2 names the
    failed op on the line above the message; onnxruntime ends its node line with "Status
    Message:" and puts the allocator's words on the next line."""
    text = text[:2_000]
    return bool(_TF2_NODE.match(text) or _ORT_HEAD.search(text))


# A TensorFlow node definition in training mode (FusedBatchNorm[..., is_training=true, ...]).
_TF_TRAINING_ATTR = re.compile(r"\bis_training=true\b", _A)

# The outer function that reports the failure names the stage better than the allocation lines
# under it: llama.cpp prints the chain innermost first (ggml's buffer allocation, the graph
# allocator, then the caller); read before EVENT_RULES, on all the lines after the error.
CALLER_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "generate",
        re.compile(
            r"llama_kv_cache_update|kv_self_update|llama_decode|\bdecode: failed|"
            r"ggml_cuda_pool_malloc|ggml_metal_synchronize|ggml_metal_graph_compute|"
            r"command buffer \d{1,6} failed|graph_compute: |Processing Prompt",
            _A,
        ),
        (
            "llama.cpp was evaluating its graph for a prompt or a token (decode, compute buffers "
            "re-reserved or a pool grown during a request), after the model was loaded"
        ),
    ),
    (
        "other",
        re.compile(r"Failed to clone\(\) tensor with name|returning from state_dict\(\) call", _A),
        (
            "FSDP was gathering the full state dict (state_dict(), as a checkpoint save does): "
            "neither a training nor a generation step"
        ),
    ),
    (
        "generate",
        re.compile(r"Non-zero status code returned while running \w{1,80} node", _A),
        "ONNX Runtime was running the model's graph (an inference session's run)",
    ),
)

EVENT_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "load",
        # TensorFlow eager names the op: a normal / truncated-normal draw is a kernel
        # initialiser filling new weights while the model is built ("[Op:RandomStandardNormal]")
        re.compile(r"\[Op:(?:RandomStandardNormal|TruncatedNormal)\]", _A),
        "TensorFlow was drawing a layer's initial weights (a random-normal initialiser) while "
        "the model was being built",
    ),
    (
        "generate",
        # an app's own error line naming the inference it was doing: "Error processing or
        # transcribing /movies/x.avi: CUDA failed with error out of memory", "Failed to
        # synthesize speech: ...", "Error during generation: ..."
        re.compile(
            r"\b(?:[Ee]rror|[Ff]ail(?:ed|ure))\b[^\n]{0,80}?\b(?:transcrib(?:e|ing)|"
            r"generat(?:e|ing|ion)|synthesi[sz](?:e|ing)|upscal(?:e|ing)|inpaint(?:ing)?|"
            r"translat(?:e|ing|ion))\b",
            _A,
        ),
        "the app's error line names the inference it was running (transcribing, generating, "
        "synthesising, upscaling, translating)",
    ),
    (
        "load",
        re.compile(r"\bRUNTIME_EXCEPTION : Exception during initialization\b", _A),
        "onnxruntime failed while creating the inference session (its execution providers, "
        "cuBLAS and cuDNN handles and the model's initialisers), before any inference",
    ),
    (
        "generate",
        # an app's log tag on the error line naming an inference task: "[python] [upscale]
        # Real-ESRGAN failed: CUDA out of memory", "[txt2img] ..."
        re.compile(
            r"\[(?:upscal\w{0,4}|inpaint\w{0,4}|txt2img|img2img|tts|transcri\w{0,6}|"
            r"generat\w{0,4}|inference|predict\w{0,4}|denois\w{0,4}|sampl\w{0,4})\]",
            _A | re.IGNORECASE,
        ),
        "the error line carries the app's tag for an inference task (upscaling, inpainting, "
        "image or speech generation, transcription, prediction)",
    ),
    (
        "load",
        re.compile(r"\bError registering modules:", _A),
        "IREE's runtime (SHARK) failed registering a compiled module, which allocates the "
        "module's buffers at start-up, before any inference",
    ),
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
        re.compile(
            r"Executor creation failed|Failed to initialize executor|"
            r"\b[Ff]ailed to (?:create|load|initiali[sz]e) (?:model )?instance\b",
            _A,
        ),
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
    (
        "load",
        re.compile(
            r"\bcould not be loaded\b|\b[Ff]ailed to load (?:the )?model\b|\bloading failed\b", _A
        ),
        "the error line says the model could not be loaded",
    ),
    # An application's own sentence around the framework's message names the step.
    (
        "load",
        re.compile(
            r"\b[Ll]oad(?:ing)? model (?:error|failed)\b|\b(?:[Ee]rror|[Ff]ailed) (?:while |when )?"
            r"loading (?:the )?model\b|\b(?:when|while|during) (?:warming up|warm-?up\b|"
            r"initializing the engine)",
            _A,
        ),
        (
            "the error line says it happened while loading the model or warming the engine "
            "up at start-up, before any request"
        ),
    ),
    (
        "generate",
        re.compile(
            r"\b(?:[Ff]ailed to|[Cc]ould not|[Cc]ouldn't|[Uu]nable to) (?:generate|predict|infer|"
            r"transcribe|synthesi[sz]e)\b|"
            r"\b[Ee]rror (?:while |when )?(?:generating|predicting|transcribing|synthesi[sz]ing)\b|"
            r"\b(?:during|while|when) (?:generation|generating|inference|predicting|prediction|"
            r"sampling|transcribing|transcription)\b",
            _A,
        ),
        "the error line says it happened while generating or predicting (inference)",
    ),
    (
        "generate",
        # a text-generation router's span (batch{...}:prefill / decode) or a client relaying a
        # server's HTTP error for a request
        re.compile(
            r"(?:^|[}:])(?:prefill|decode)[:{]|\bServer error: |\breturned error: \d{3}\b|"
            r"\b(?:[Pp]refill|[Dd]ecode) (?:error|failed)\b",
            _A,
        ),
        (
            "a server was answering a request (the error is relayed from a prefill / decode "
            "or a request's HTTP reply)"
        ),
    ),
)


def caller_rule(text: str) -> tuple[str, str] | None:
    """(phase, reason) from a line that names the function that reported the failure."""
    for phase, pattern, why in CALLER_RULES:
        if pattern.search(text):
            return (phase, why)
    return None


def tf_node(text: str) -> str | None:
    """The TensorFlow node a line names ("[[{{node x}}]]", "[[Node: x = ...", "Node: 'x'")."""
    m = _TF_NODE.search(text)
    if m:
        return m["node"] or m["op"]
    m2 = _TF2_NODE.search(text)
    return (m2["node"] or m2["n2"]) if m2 else None


def tf_node_phase(node: str) -> tuple[str, str] | None:
    """(phase, reason) from a TensorFlow node's name: an optimizer's op or a gradient op (an
    optimizer slot's initialiser, "kernel/Adam/Initializer/zeros", is the optimizer's states
    being created: optimizer_step, as DeepSpeed's "initializing optimizer states")."""
    if _TF_GRADIENTS_SCOPE.search(node):
        # Keras 2 / TF 1 build the gradients inside the optimizer's name scope
        # ("training_1/Adam/gradients/loss_1/.../pow_grad/Pow"): a gradient op, not an update
        return ("backward", f"TensorFlow names the failed op {node}: a gradient op")
    if _TF_OPT_NODE.search(node):
        return ("optimizer_step", f"TensorFlow names the failed op {node}: an optimizer update")
    if _TF_GRAD_NODE.search(node):
        return ("backward", f"TensorFlow names the failed op {node}: a gradient op")
    return None


# Python logging's basic format names the logger before the message, "ERROR:bio_embeddings.
# embed.embedder_interfaces:Error processing batch ...": the reader strips it as a prefix, and
# a logger module named for an inference task says what was running.
_INFERENCE_LOGGER = re.compile(
    r"^(?:ERROR|CRITICAL|WARNING):(?:\w{1,40}\.){0,6}(?:embed|infer|predict|generat|transcri|"
    r"synthes)\w{0,20}[.:]",
    _A,
)


def logger_prefix_rule(prefix: str) -> tuple[str, str] | None:
    """(phase, reason) from the logger prefix stripped from the error line."""
    m = _INFERENCE_LOGGER.match(prefix)
    if m is None:
        return None
    return (
        "generate",
        f"the error was logged by {m.group(0)[:-1].split(':', 1)[1]}, an inference module "
        "(embedding, inference, prediction, generation, transcription)",
    )


def event_line_rule(text: str) -> tuple[str, str] | None:
    """(phase, reason) from the error line (or a line just after it) alone."""
    node = tf_node(text)
    if node is not None:
        hit = tf_node_phase(node)
        if hit is not None:
            return hit
        if _TF_TRAINING_ATTR.search(text):
            return (
                "train_forward",
                (
                    f"TensorFlow names the failed op {node}, a forward op of a graph built for "
                    "training (is_training=true), not a gradient or optimizer op"
                ),
            )
    for phase, pattern, why in EVENT_RULES:
        if pattern.search(text):
            return (phase, why)
    return None


# ------------------------------------------------------------------------------ log lines

_RE_MMCV_BAR = re.compile(r"\] {0,3}\d{1,9}/\d{1,9}, [\d.]{1,12} task/s", _A)
_RE_TRAINING_LINE = re.compile(
    r"\*{3,} Running training \*{3,}|\{'loss': |'train_loss'|\bEpoch:? ?\[?\d{1,6}\b|"
    r"\b[Rr]unning epoch[= ]\d{1,6}\b|"
    r"\bEpoch \(train\)|\btrain: +\d|\bIter ?\[\d|"
    # a progress bar that reports a loss (tqdm's postfix), or one named for training
    r"(?:it/s|s/it)[^\n]{0,200}\b(?:train_)?loss[=:] ?-?\d|\b(?:Training|Train):? {0,3}\d{1,3}%",
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
            r"\bValidation: {0,3}\d|\bEvaluating\b|"
            # a loop's own bare "testing..." line ("===> testing...")
            r"^\W{0,8}(?:=+> {0,2})?testing(?:\.{3}|\u2026)\s*$",
            re.IGNORECASE | _A,
        ),
        "the log was in the evaluation loop (validation / prediction)",
    ),
    (
        "other",
        # TensorRT's builder choosing kernels for each layer ("Autotuning format combination:
        # Float(...) -> Float(...)", "Constructing optimization profile number 0 out of 1"):
        # the network is being built into an engine, offline
        re.compile(
            r"\bAutotuning format combination:|\bConstructing optimization profile number \d",
            _A,
        ),
        "TensorRT's builder was building an engine from the network (an offline conversion, "
        "like an export: neither training nor serving)",
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
        "load",
        re.compile(
            r"^(?:> )?initializing model parallel\b|\bLoading (?:the )?(?:model|weights|checkpoint)\b|"
            # an app's own short start-up line: "Loading Mistral", "Loading transformer"
            r"^\s{0,4}Loading [\w.-]{2,60}(?:\.{3}|\u2026)?\s*$",
            re.IGNORECASE | _A,
        ),
        "the log was setting the model up (model-parallel groups, loading its weights)",
    ),
    (
        "load",
        # a server's own start-up line: it loads its model before it serves ("Starting server,
        # this might take a few minutes...")
        re.compile(r"\bStarting (?:the |a )?(?:\w{1,20} )?(?:server|engine|service)\b", _A),
        "the log says the server was starting (loading its model) and had served no request",
    ),
    (
        "generate",
        # a progress bar named for an inference step: "Sampling: 40%|", "Generating 3/50",
        # "DDIM Sampler: 12%", "Transcribing 12/80"; or a speech job that says it transcribes
        re.compile(
            r"^\s{0,4}(?:\w{1,20} )?(?:Sampling|Sampler|Generating|Denoising|Predicting|"
            r"Inferenc\w{1,3}|Transcribing|Synthesi[sz]ing|Decoding|Inpainting|Upscaling|"
            r"Captioning)\b:?[^\n]{0,120}?"
            r"(?:\d{1,3}%|\b\d{1,6}/\d{1,6}\b)|\btranscribing in\b|\bTranscribing\b|"
            # an embedding model encoding a corpus for an index (ColBERT's "#> Encoding 57
            # passages..", sentence-transformers' "Encoding 1000 documents")
            r"\bEncoding \d{1,9} (?:passages|documents|docs|texts|sentences|chunks)\b",
            _A,
        ),
        "the log was running inference (a sampling, generation or transcription progress bar)",
    ),
    (
        "generate",
        re.compile(
            # a web server's access line for a request that failed with a 5xx (uvicorn:
            # '"POST /clone_voice HTTP/1.1" 500 Internal Server Error'): it was serving
            r"\"POST /[\w/.-]{0,80} HTTP/[12](?:\.[01])?\" 5\d\d\b|"
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
            r"Model loading took|init_memory_pool|Init torch distributed|"
            r"\b(?:allocat\w{0,4}|using|creat\w{0,4}|reserv\w{0,4}|initiali[sz]\w{0,4}) "
            r"(?:[\w-]{1,20} ){0,3}KV[ -]cache (?:for|of|with|size|blocks)\b",
            re.IGNORECASE | _A,
        ),
        "the inference engine was starting up (profiling, KV cache, warm-up) and had served "
        "no request",
    ),
    (
        "generate",
        re.compile(
            r"\bServing on https?://|Uvicorn running on|Application startup complete|Running on "
            r"local URL|\bStarting (?:the )?(?:predictions?|inference)\b|\bRunning inference\b|"
            r"\bStarting (?![^\n]{0,60}train)[\w -]{1,60}\bpipeline\b",
            re.IGNORECASE | _A,
        ),
        "the log says the server was up and serving, or an inference run had started",
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
        "backward",
        # PyTorch's C++ stack trace under "Exception raised from ...": "frame #4: at::native::
        # ..._backward_out_cuda_template(...)", "torch::autograd::Engine::evaluate_function",
        # "torch::autograd::generated::ConvolutionBackward0::apply"
        re.compile(
            r"^\s{0,8}frame #\d{1,4}: [^\n]{0,300}?(?:Backward\d{0,3}::apply|"
            r"autograd::Engine::|_backward\w{0,40}\()",
            _A,
        ),
        (
            "the C++ stack trace under the error runs through the autograd engine or a backward "
            "kernel: the backward pass"
        ),
    ),
    (
        "load",
        # a native backtrace printed innermost first (glog's "@ 0x7f... ns::Class::build()",
        # Rust's "  12: crate::models::falcon::Falcon::load", its number possibly stripped as a
        # rank prefix): the nearest frame that loads or builds the model or its buffers
        re.compile(
            r"^\s{0,8}(?:@\s{1,8}0x[0-9a-fA-F]{4,16}\s{1,8}|\d{1,4}: )?[\w:<>, ]{0,300}?::"
            r"(?:load|build|load_\w{1,40}|from_pretrained|from_safetensors)(?:<[\w:, ]{0,60}>)?"
            r"(?:\(\)?)?\s*$",
            _A,
        ),
        "a native stack frame under the error loads the model or builds its buffers (start-up)",
    ),
    (
        "load",
        re.compile(
            r"Shard \d{1,4} failed to start|ShardCannotStart|Method Warmup encountered|"
            r"Unable to warmup|EngineCore failed to start|Engine core initialization failed|"
            r"Failed to initialize executor|WorkerProc failed to start",
            _A,
        ),
        "the log says the server failed to start: the error came during start-up (loading or "
        "warming up), before any request",
    ),
    (
        "load",
        # a weight-loading progress bar printed (flushed) just after the message
        re.compile(r"^\s{0,4}Loading (?:safetensors |pt |)checkpoint shards: {0,3}\d{1,3}%", _A),
        (
            "a weight-loading progress bar, cut short, is printed right after the error: the "
            "weights were being loaded"
        ),
    ),
    (
        "generate",
        re.compile(
            r"Method (?:Prefill|Decode) encountered|Request failed during generation|"
            r"Output generated in \d|Graph stats:|"
            # an engine's own line giving up on the prompt ("prompt processing failed",
            # "prefill failed"): the first step of serving a request
            r"\bprompt processing failed|\bprefill failed\b",
            _A | re.IGNORECASE,
        ),
        "the log after the error reports a generation request or graph ending (prefill, decode, "
        "prompt processing, a generated output, InvokeAI's graph stats)",
    ),
    (
        "other",
        # TensorRT's builder giving up after the allocation failed (trtexec, an engine export):
        # the network is being converted into an inference engine, offline
        re.compile(
            r"IBuilder::buildSerializedNetwork|IBuilder::buildEngineWithConfig|"
            r"Engine could not be created from network|Skipping tactic 0x[0-9a-fA-F]{1,16} due to",
            _A,
        ),
        "TensorRT's builder was building an engine from the network (an offline conversion, "
        "like an export: neither training nor serving)",
    ),
    (
        "train_forward",
        re.compile(r"Total training time", _A),
        "the training loop was running (its end-of-training hook prints 'Total training time' "
        "as the error unwinds it)",
    ),
)


# ------------------------------------------------------------------------------ command lines

# A shell command that starts a Python script: `python train.py`, `!python3 tools/test.py`,
# `accelerate launch finetune_lora.py`, `torchrun --nproc_per_node 8 pretrain.py`,
# `CUDA_VISIBLE_DEVICES=0 python scripts/run_inference.py`. The script's name says what the job
# does (a training run names no step: see `phase._training_step`).
_RE_LAUNCH = re.compile(
    r"(?:^|[\s!$>#;&|(*`])(?:python[\d.]{0,4}(?:\.exe)?|py|accelerate(?:\.exe)? launch|torchrun|"
    r"deepspeed|srun|mpirun|horovodrun|colossalai run)\s[^\n]{0,300}?"
    r"(?:^|[\s/\\=])(?P<script>[A-Za-z_][\w-]{0,80})\.py\b",
    _A,
)
_TRAIN_WORDS = frozenset(
    ("train", "training", "trainer", "finetune", "finetuning", "pretrain", "pretraining")
    + ("sft", "dpo", "ppo", "grpo", "rlhf", "distill")
)
_INFER_WORDS = frozenset(
    ("infer", "inference", "generate", "generation", "gen", "sample", "sampling", "sampler")
    + ("predict", "prediction", "demo", "chat", "txt2img", "img2img", "synthesize", "synthesis")
    + ("tts", "transcribe", "inpaint", "inpainting", "denoise", "test", "eval", "evaluate")
    + ("evaluation",)
)
# A command-line tool's sub-command that trains or serves: `llamafactory-cli train x.yaml`,
# `swift sft`, `tune run lora_finetune_single_device`, `mlx_lm.generate`, `ollama run`.
_RE_TOOL = re.compile(
    r"(?:^|[\s!$>#;&|(])(?:llamafactory-cli (?P<lf>train|chat|webchat|api|eval)|"
    r"swift (?P<swift>sft|pt|rlhf|infer|deploy)|tune run (?P<tune>[\w-]{1,80})|"
    r"mlx_lm[.\s](?P<mlx>generate|lora|fuse|chat|server)|"
    r"(?P<serve>vllm serve|sglang\.launch_server|trtllm-serve|text-generation-launcher))\b",
    _A,
)


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[^a-z]+", name.lower()) if w}


def command_rule(text: str) -> tuple[str, str] | None:
    """(phase, reason) from a command line that starts the job: a training script or an
    inference one, by its name. An evaluation script run on its own is inference too (the
    `eval` stage is an evaluation loop inside a training run)."""
    text = text[:1_000]
    m = _RE_TOOL.search(text)
    if m:
        if m["serve"]:
            return (
                "load",
                (
                    f"the command line starts a server ({m['serve']}), and no line after it "
                    "says it served a request: start-up"
                ),
            )
        sub = next(g for g in m.groups() if g)
        train = bool(_words(sub) & (_TRAIN_WORDS | {"lora", "pt", "fuse"}))
        if train:
            return (
                "train_forward",
                f"the command line starts a training run ({m.group(0).strip()})",
            )
        return ("generate", f"the command line starts inference or serving ({m.group(0).strip()})")
    m = _RE_LAUNCH.search(text)
    if not m:
        return None
    script = m["script"]
    words = _words(script)
    if words & _TRAIN_WORDS:
        return ("train_forward", f"the command line starts a training script ({script}.py)")
    if words & _INFER_WORDS:
        return (
            "generate",
            (
                f"the command line starts an inference script ({script}.py): generation, "
                "sampling or prediction, no training"
            ),
        )
    return None


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
    return command_rule(text)


def is_inference_progress(text: str) -> bool:
    """An mmcv ProgressBar line ('[>>>>  ] 20/76, 0.3 task/s, elapsed: ...'): a test loop."""
    return bool(_RE_MMCV_BAR.search(text))


def is_training_line(text: str) -> bool:
    return bool(_RE_TRAINING_LINE.search(text))


# Caffe's glog stack under "Check failed: error == cudaSuccess (2 vs. 0)  out of memory", one
# symbol per line, innermost first ("    @     0x7fd08b1f1717  caffe::Net<>::Forward()").
_CAFFE_FRAME = re.compile(
    r"^\s{0,8}@\s{1,8}0x[0-9a-fA-F]{4,16}\s{1,8}(?P<sym>[\w:<>, ~]{1,200})", _A
)
_CAFFE_BACKWARD = re.compile(r"::Backward(?:_gpu|_cpu|FromTo)?\b|::backward\w{0,20}\(", _A)
_CAFFE_UPDATE = re.compile(r"::(?:ApplyUpdate|Update|ComputeUpdateValue)\b", _A)
_CAFFE_FORWARD = re.compile(r"::(?:Forward\w{0,20}|forward\w{0,20})\b", _A)
_CAFFE_SOLVER = re.compile(r"\bcaffe::\w{0,40}Solver\w{0,10}<|::Solve\b|::Step\b|P2PSync", _A)
NATIVE_STACK_LINES = 60


def caffe_stack_rule(lines: list[str]) -> tuple[int, str, str] | None:
    """(index in `lines`, phase, reason) from a Caffe glog stack printed after the error: the
    innermost Backward / update / Forward symbol says the step, and a Solver frame (Caffe's
    training loop) above a forward says training; a forward with no Solver is a deployed
    network's inference. None when the lines hold no Caffe stack."""
    syms: list[tuple[int, str]] = []
    for j, text in enumerate(lines[:NATIVE_STACK_LINES]):
        m = _CAFFE_FRAME.match(text[:400])
        if m:
            syms.append((j, m["sym"]))
        elif syms and text.strip():
            break
    if not any("caffe::" in sym for _, sym in syms):
        return None
    solver = any(_CAFFE_SOLVER.search(sym) for _, sym in syms)
    for j, sym in syms:
        if _CAFFE_BACKWARD.search(sym):
            return (j, "backward", "Caffe's stack runs a layer's Backward: the backward pass")
        if _CAFFE_UPDATE.search(sym):
            return (j, "optimizer_step", "Caffe's stack runs the solver's update of the weights")
        if _CAFFE_FORWARD.search(sym):
            if solver:
                why = "Caffe's stack runs a Forward under the Solver (training): the training forward"
                return (j, "train_forward", why)
            why = (
                "Caffe's stack runs a network's Forward with no Solver above it (no training "
                "loop): a deployed network's inference"
            )
            return (j, "generate", why)
    return None


def after_line_rule(text: str) -> tuple[str, str] | None:
    for phase, pattern, why in AFTER_RULES:
        if pattern.search(text):
            return (phase, why)
    return None


# Lines an application's executor prints when it catches the OOM, read only when nothing else
# decided: they say which kind of run failed, not which step.
EXECUTOR_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "generate",
        # ComfyUI's execution.py catches an OOM raised by any node it executes, logs this line
        # and unloads every model. ComfyUI moves a model to the GPU when a sampler or decoder
        # needs it, so the node that failed was running a workflow's inference.
        re.compile(r"Got an OOM, unloading all loaded models", _A),
        (
            "ComfyUI's executor caught the OOM while running a workflow's node (ComfyUI puts "
            "models on the GPU when a sampler or decoder needs them): inference"
        ),
    ),
)


def executor_rule(text: str) -> tuple[str, str] | None:
    for phase, pattern, why in EXECUTOR_RULES:
        if pattern.search(text):
            return (phase, why)
    return None

