"""Where did it run out of memory? Read the traceback (and the log around it) and name the phase.

`localise_phase(lines, event_line_no)` looks at the traceback that ends at the error line: the
DEEPEST frame that says something decides (frames nearer the error win over outer ones), so an
AdamW state initialisation (`_init_group`) reached from `training_step` is an optimizer step,
and a `generate()` called from inside an evaluation loop is generation. When no frame decides,
the error line itself (a vLLM KV-cache error, a llama.cpp compute buffer) and then the log lines
before the traceback ("Loading checkpoint shards", "Method Warmup") are read.

It reads the lines `log_prefixes.clean_log` left (prefixes, colours and wrappers gone) and
answers with the original line numbers. Everything is plain `re`, line by line, with bounded
quantifiers and a cap on the length of a line that is looked at, so a hostile paste cannot make
a pattern backtrack for long.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from vramtui.triage.log_prefixes import CleanLog, clean_lines

PHASES = ("load", "generate", "train_forward", "backward", "optimizer_step", "other", "unknown")

MAX_TRACEBACK_LINES = 3_000  # how far back from the error a traceback is followed
LOG_CONTEXT_LINES = 300  # how far back from the traceback the log is read for a phase hint

_A = re.ASCII


# ------------------------------------------------------------------------------ frames


@dataclass(frozen=True)
class Frame:
    file: str  # as written, "/" separators
    func: str
    code: str  # the source line shown under the frame ("" when none)
    header_no: int  # index in the cleaned lines of the 'File "...", line N, in f' line
    code_no: int | None  # index in the cleaned lines of the code line


_PY_FRAME = re.compile(
    r'\s{0,16}File "(?P<file>[^"\n]{1,1000})", line (?P<ln>\d{1,9}), in (?P<func>\S{1,200})', _A
)
_IPY_FRAME = re.compile(
    r"\s{0,16}File (?P<file>[^\s\"][^\n]{0,1000}?):(?P<ln>\d{1,9}), in (?P<func>[^\s(]{1,200})", _A
)
_IPY_CELL = re.compile(r"\s{0,16}Cell In\s?\[\d{1,6}\], line (?P<ln>\d{1,9})", _A)
_IPY_OLD = re.compile(
    r"(?P<file>(?:/|~|[A-Za-z]:\\|<ipython-input)\S{0,1000}) in (?P<func>[\w<>.]{1,200})\(", _A
)
_IPY_ARROW = re.compile(r"\s{0,8}-{1,8}>\s?\d{1,9}\s(?P<code>.*)", _A)
_TB_HEADER = re.compile(r".{0,200}?Traceback \(most recent call last\)", _A)
_CARET = re.compile(r"\s*[\^~\-+ ]+\s*$")
_TB_MISC = re.compile(
    r"(?:\s|-{1,8}>|-{3,}|\[\.\.\. skipping|\.\.\.<\d+ lines>\.\.\.|Cell In\s?\[|Traceback \(|"
    r"File \"|File [~/]|[A-Za-z]:\\|<ipython-input)",
    _A,
)


def _parse_header(line: str) -> tuple[str, str] | None:
    m = _PY_FRAME.match(line)
    if m:
        return m["file"].replace("\\", "/"), m["func"]
    m = _IPY_FRAME.match(line)
    if m:
        return m["file"].replace("\\", "/"), m["func"]
    m = _IPY_CELL.match(line)
    if m:
        return "<cell>", "<cell>"
    m = _IPY_OLD.match(line)
    if m:
        return m["file"].replace("\\", "/"), m["func"]
    return None


def collect_frames(log: CleanLog, event_idx: int, floor_idx: int = 0) -> list[Frame]:
    """The frames of the traceback that ends just above cleaned line `event_idx`, outermost
    first (as Python prints them), not looking above `floor_idx`. Only lines with the same
    rank / worker tag as the error line are read, so interleaved ranks do not mix. When nothing
    precedes the error, a traceback that starts right after it (logger.exception style) is read.
    """
    lines = log.lines
    n = len(lines)
    if not 0 <= event_idx < n:
        return []
    tag = log.tag(event_idx)
    block: list[int] = []
    i = event_idx - 1
    lowest = max(floor_idx, event_idx - MAX_TRACEBACK_LINES)
    while i >= lowest:
        if tag is not None and log.tag(i) != tag:
            i -= 1
            continue
        text = lines[i]
        if _TB_HEADER.match(text):
            break
        if text.strip() == "" or _TB_MISC.match(text) or _parse_header(text):
            block.append(i)
            i -= 1
            continue
        break
    block.reverse()
    if not any(_parse_header(lines[j]) for j in block):
        # Message first, traceback after it (logger.exception, some launchers).
        block = []
        j = event_idx + 1
        seen_header = False
        while j < min(n, event_idx + MAX_TRACEBACK_LINES):
            text = lines[j]
            if not seen_header:
                if _TB_HEADER.match(text):
                    seen_header = True
                elif j > event_idx + 3:
                    break
                j += 1
                continue
            if text.strip() == "" or _TB_MISC.match(text) or _parse_header(text):
                block.append(j)
                j += 1
                continue
            break
    return _frames_of(block, lines)


def _frames_of(block: list[int], lines: Sequence[str]) -> list[Frame]:
    frames: list[Frame] = []
    for pos, j in enumerate(block):
        text = lines[j]
        parsed = _parse_header(text)
        if not parsed:
            continue
        file, func = parsed
        code, code_no = "", None
        ipython = not _PY_FRAME.match(text)
        for k in block[pos + 1 : pos + 40]:
            nxt = lines[k]
            if _parse_header(nxt) or _TB_HEADER.match(nxt):
                break
            if ipython:
                m = _IPY_ARROW.match(nxt)
                if m:
                    code, code_no = m["code"].strip(), k
                    break
                continue
            if nxt.strip() and not _CARET.match(nxt):
                code, code_no = nxt.strip(), k
            break
        frames.append(Frame(file=file, func=func, code=code, header_no=j, code_no=code_no))
    return frames


# ------------------------------------------------------------------------------ rules


@dataclass(frozen=True)
class PhaseVerdict:
    phase: str
    evidence: str  # the line that decided it (stripped)
    line_no: int | None  # 1-based
    reason: str  # one line: why this line means this phase


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
    # vLLM engine start-up: memory profiling and KV-cache allocation
    "_initialize_kv_caches",
    "determine_num_available_blocks",
    "profile_run",
    "_dummy_run",
    "_dummy_sampler_run",
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
    "execute_model",
    "_execute_model",
    "compile_or_warm_up_model",
    "_dummy_pooler_run",
    "get_kv_cache_config",
    # text-generation-inference warm-up
    "warmup",
    "Warmup",
    "init_kv_cache",
)
_OTHER_FUNCS = _set(
    "evaluate",
    "_evaluate",
    "evaluation_loop",
    "prediction_step",
    "prediction_loop",
    "_maybe_log_save_evaluate",
    "validation_step",
    "test_step",
    "eval_step",
    "evaluate_loop",
    "save_pretrained",
    "save_model",
    "_save_checkpoint",
    "_save",
    "save_checkpoint",
    "save_state",
    "save_16bit_model",
    "_save_zero_checkpoint",
    "merge_and_unload",
    "_unload_and_optionally_merge",
    "merge_adapter",
    "export",
    "onnx_export",
    "push_to_hub",
    "_wrap_model",
    "prepare_model",
    "_prepare_deepspeed",
    "_sync_module_states",
    "_verify_param_shape_across_processes",
    "_sync_params_and_buffers",
    "fully_shard",
    "save_file",
    "prepare",
    "_prepare_one",
    "_prepare_fsdp",
    "consolidate_state_dict",
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
)

_RE_OPT_CODE = re.compile(
    r"\b(?:optimizer|optim|opt|scaler|self\.optimizer|self\.optim)\.step\(|zeros_like\(p, memory_format",
    _A,
)
_RE_BACKWARD_CODE = re.compile(r"\bbackward\(|\bautograd\.grad\(", _A)
_RE_LOAD_CODE = re.compile(
    r"\bfrom_pretrained\(|\bload_state_dict\(|\btorch\.load\(|\bsafe_open\(|\bload_file\(|"
    r"\b(?:model|self\.model|net|module|pipe|pipeline|llm|base_model|unet|vae|transformer)\w{0,40}"
    r"\.(?:to|cuda|half|bfloat16)\(",
    _A,
)
_RE_LOAD_WEAK_CODE = re.compile(
    r"\.cuda\(\)|\.to\(\s{0,4}(?:device\b|dev\b|\"cuda|'cuda|f\"cuda|f'cuda|torch\.device|\"mps|'mps|"
    r"\"xpu|'xpu|accelerator\.device|self\.device\b|args\.device)",
    _A,
)
_RE_GEN_CODE = re.compile(r"\.generate\(|\bllm\.(?:chat|generate)\(", _A)
_RE_OTHER_CODE = re.compile(
    r"\bDistributedDataParallel\(|\bDDP\(|\bFSDP\(|\bFullyShardedDataParallel\(|"
    r"\bdeepspeed\.initialize\(|\btorch\.onnx\.export\(|\btorch\.save\(|\.save_pretrained\(|"
    r"\bmerge_and_unload\(|\bfully_shard\(",
    _A,
)
_RE_TRAIN_CODE = re.compile(r"\btraining_step\(|\btrain_step\(", _A)


def _short(file: str) -> str:
    parts = [p for p in file.split("/") if p]
    for anchor in ("site-packages", "dist-packages"):
        if anchor in parts:
            k = parts.index(anchor)
            return "/".join(parts[k + 1 :])
    return "/".join(parts[-2:]) if len(parts) > 2 else file


# Each rule: (phase, strength, why). strength: "strong" decides at once (deepest wins),
# "context" decides only when no strong frame exists, "weak" after everything else.
_Rule = tuple[str, str, str, bool]  # phase, strength, reason, matched on the code line


def _classify(fr: Frame) -> _Rule | None:
    file = fr.file.lower()
    func = fr.func.rsplit(".", 1)[-1]  # IPython writes qualified names: GenerationMixin.generate
    code = fr.code
    # --- backward
    if func == "_engine_run_backward":
        return ("backward", "strong", "the autograd engine is running the backward pass", False)
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
        ("torch/optim/" in file and "lr_scheduler" not in file)
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
    # --- other (evaluation, saving, merging, wrapping for distributed training)
    if func in _OTHER_FUNCS and not ("safetensors" in file and func != "save_file"):
        if func in ("prepare", "_prepare_one") and "accelerate" not in file:
            pass
        else:
            what = (
                "evaluation"
                if "eval" in func or "predict" in func or func in ("validation_step", "test_step")
                else "saving or exporting"
                if "save" in func or "export" in func or "push" in func
                else "merging adapters"
                if "merge" in func or "unload" in func
                else "wrapping the model for distributed training"
            )
            return ("other", "strong", f"{what}, not the training or generation step", False)
    if "torch/nn/parallel/distributed.py" in file and func == "__init__":
        return ("other", "strong", "wrapping the model in DistributedDataParallel", False)
    if "deepspeed/__init__.py" in file and func == "initialize":
        return ("other", "strong", "deepspeed.initialize is wrapping the model", False)
    # --- load
    if (
        func in _LOAD_FUNCS
        or "safetensors/" in file
        or "torch/serialization.py" in file
        or "model_executor/model_loader" in file
        or ("bitsandbytes/nn/modules.py" in file and func in ("to", "cuda", "_quantize"))
        or ("torch/nn/modules/module.py" in file and func in ("_apply", "convert", "to", "cuda"))
    ):
        return (
            "load",
            "strong",
            "the weights are being loaded, converted or moved to the GPU",
            False,
        )
    # --- generate
    if (
        func in _GEN_FUNCS
        or "transformers/generation/" in file
        or "transformers/cache_utils.py" in file
        or "transformers/pipelines/" in file
    ):
        return (
            "generate",
            "strong",
            "inference: generation, its KV cache, or an engine profiling / warming up its KV cache",
            False,
        )
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
        if _RE_OPT_CODE.search(code):
            return ("optimizer_step", "strong", "this line steps the optimizer", True)
        if _RE_BACKWARD_CODE.search(code):
            return ("backward", "strong", "this line runs the backward pass", True)
        if _RE_OTHER_CODE.search(code):
            return ("other", "strong", "this line wraps, saves or exports the model", True)
        if _RE_GEN_CODE.search(code):
            return ("generate", "strong", "this line generates", True)
        if _RE_LOAD_CODE.search(code):
            return ("load", "strong", "this line loads the model or moves it to the GPU", True)
        if _RE_TRAIN_CODE.search(code):
            return ("train_forward", "strong", "this line runs a training step", True)
    if func in _TRAIN_CONTEXT_FUNCS:
        return (
            "train_forward",
            "context",
            "a training loop; no backward or optimizer frame is below it, so the forward pass",
            False,
        )
    if "torch/utils/_contextlib.py" in file and func == "decorate_context":
        return (
            "generate",
            "weak",
            "a function under torch.no_grad()/inference_mode(): an inference forward",
            False,
        )
    if code and _RE_LOAD_WEAK_CODE.search(code):
        return ("load", "weak", "this line moves tensors or the model to the GPU", True)
    return None


# Log lines before the traceback (or around an error without one), nearest first.
_LOG_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
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
        "load",
        re.compile(
            r"Loading checkpoint shards|Loading safetensors checkpoint shards|Loading "
            r"model weights|Starting to load model|loading weights file|Loading weights|"
            r"llama_model_load|llm_load_tensors|load_tensors:|Loading model from|"
            r"Instantiating \w{1,80} model|Loading pipeline components",
            re.IGNORECASE | _A,
        ),
        "the log was loading the model",
    ),
    (
        "generate",
        re.compile(
            r"Memory profiling|KV cache|Method Warmup|warmup\{|Warming up|Capturing "
            r"CUDA graph|Capturing cudagraph|graph capturing|llama_new_context|"
            r"llama_init_from_model|llama_context|llama_kv_cache|graph_reserve|"
            r"prompt eval|Processed prompts|Adding requests",
            re.IGNORECASE | _A,
        ),
        "the log was preparing or running generation (KV cache, warm-up, prompts)",
    ),
    (
        "other",
        re.compile(
            r"\*{3,} Running Evaluation|\*{3,} Running Prediction|Saving model "
            r"checkpoint to|Merging LoRA|Running validation",
            re.IGNORECASE | _A,
        ),
        "the log was evaluating or saving",
    ),
    (
        "train_forward",
        re.compile(
            r"\*{3,} Running training \*{3,}|\{'loss': |'train_loss'|"
            r"\bEpoch \d{1,6}\b",
            _A,
        ),
        "training had started; with no traceback frames to tell forward, backward and optimizer "
        "step apart, the forward pass is the usual place",
    ),
)

# The error line itself, when no frame decided.
_EVENT_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "load",
        re.compile(r"Free memory on device \(", _A),
        "vLLM checks free memory at start-up, before loading the weights",
    ),
    (
        "generate",
        re.compile(r"cache blocks|KV cache|max seq len|Maximum concurrency", _A),
        "the engine could not fit its KV cache after loading the weights",
    ),
    (
        "generate",
        re.compile(r"Not enough memory to handle \d", _A),
        "text-generation-inference warm-up (a prefill of the configured batch) ran out of memory",
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
        "generate",
        re.compile(
            r"compute buffer|graph_reserve|gallocr|kv_cache|kv cache|KV buffer|"
            r"llama_new_context|llama_init_from_model|llama_context|failed to create "
            r"context",
            re.IGNORECASE | _A,
        ),
        "llama.cpp was allocating its context (KV cache, compute buffers) after the weights",
    ),
)


def _unknown(reason: str) -> PhaseVerdict:
    return PhaseVerdict(phase="unknown", evidence="", line_no=None, reason=reason)


def localise_phase(lines: Sequence[str], event_line_no: int | None) -> PhaseVerdict:
    """Decide the phase of the error at 1-based `event_line_no` in `lines` (the pasted text split
    on newlines, as pasted: prefixes, colours and wrappers are cleaned here). `None`: the end of
    the text. The verdict's line number is a line of `lines`."""
    log = clean_lines(list(lines))
    idx = None if event_line_no is None else log.index_of(event_line_no)
    return phase_of(log, idx)


def phase_of(log: CleanLog, event_idx: int | None) -> PhaseVerdict:
    """Decide the phase of the error on cleaned line `event_idx` of `log` (None: the last
    non-blank line). The verdict gives the original line number."""
    lines = log.lines
    if not lines:
        return _unknown("the text is empty")
    if event_idx is None or not 0 <= event_idx < len(lines):
        # No event line given: the last non-blank line (the exception that ends a traceback)
        event_idx = len(lines) - 1
        while event_idx > 0 and not lines[event_idx].strip():
            event_idx -= 1
    n = len(lines)
    frames = collect_frames(log, event_idx, 0)
    context_hit: tuple[Frame, _Rule] | None = None
    weak_hit: tuple[Frame, _Rule] | None = None
    for fr in reversed(frames):  # deepest first
        rule = _classify(fr)
        if rule is None:
            continue
        phase, strength, _why, _on_code = rule
        if strength == "strong":
            return _frame_verdict(fr, rule, log)
        if strength == "context" and context_hit is None:
            context_hit = (fr, rule)
        elif strength == "weak" and weak_hit is None:
            weak_hit = (fr, rule)
    if context_hit:
        return _frame_verdict(*context_hit, log)
    if lines[event_idx]:
        # The error line and, for llama.cpp-style logs, the few lines after it.
        for j in range(event_idx, min(n, event_idx + 6)):
            text = lines[j][:2_000]
            if j > event_idx and not text.strip():
                break
            for phase, pattern, why in _EVENT_RULES:
                if pattern.search(text):
                    return PhaseVerdict(
                        phase=phase,
                        evidence=text.strip()[:500],
                        line_no=log.line_nos[j],
                        reason=why,
                    )
    if weak_hit:
        return _frame_verdict(*weak_hit, log)
    top = frames[0].header_no if frames else event_idx
    for j in range(min(top, n) - 1, max(-1, top - 1 - LOG_CONTEXT_LINES), -1):
        text = lines[j][:600]  # a log line says what it is doing near its start
        if not text or _parse_header(text):
            continue
        for phase, pattern, why in _LOG_RULES:
            if pattern.search(text):
                return PhaseVerdict(
                    phase=phase, evidence=text.strip()[:500], line_no=log.line_nos[j], reason=why
                )
    if frames:
        return _unknown(
            f"no frame of the {len(frames)}-frame traceback names a load, "
            "generation, training or optimizer step"
        )
    return _unknown("no traceback and no log line says what was running")


def _frame_verdict(fr: Frame, rule: _Rule, log: CleanLog) -> PhaseVerdict:
    phase, _strength, why, on_code = rule
    if on_code and fr.code_no is not None:
        evidence, idx = fr.code, fr.code_no
    else:
        evidence, idx = log.lines[fr.header_no].strip(), fr.header_no
    where = _short(fr.file)
    reason = f"the deepest deciding frame is {fr.func} ({where}): {why}"
    return PhaseVerdict(
        phase=phase, evidence=evidence[:500], line_no=log.line_nos[idx], reason=reason
    )
