"""The last word on the phase, when no rule of `phase` decided: evidence from the whole paste.

The rules in `phase_rules` / `phase_log_rules` map named frames, code lines and log lines to a
step. Real pastes often hold only a project's own names (`separate`, `run_inference`, a node
class, `vae.py forward`) that no list can hold. This fallback reads every identifier of the
paste as words (snake_case, camelCase and dotted paths split) and asks two questions:

1. Is there training anywhere in the paste? A loss, a backward pass, an optimizer, an epoch, a
   trainer, a training script, `.train()` / `.fit(`.
2. Was a model running when it failed? A module forward in the frames (`_call_impl`,
   `forward`), a model's layer code (`modeling_*.py`, `torch/nn/functional.py`), or a code line
   that calls a model, a pipeline or an inference method; or words that name inference
   (generate, sample, predict, embed, detect, separate, denoise, decode...).

With no training anywhere and a model running, the run was inference: `generate`. With training
evidence, a module forward and nothing else, the training forward. Anything else stays unknown.

Each answer is tagged with the fallback that gave it (`FALLBACKS`), so the bench can count how
often each is right and wrong. Everything is plain `re` over bounded lines.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from vramtui.triage import phase_log_rules as log_rules
from vramtui.triage.log_prefixes import CleanLog
from vramtui.triage.tracebacks import Frame, parse_header

_A = re.ASCII

WHOLE_PASTE_LINES = 3_000  # lines of the paste read for evidence
SNIPPET_LINES = 200  # lines above the error read for a quoted model call
_LINE_CAP = 600  # characters of a line read

FALLBACKS = (
    "graph-node",
    "inference-words",
    "forward-no-training",
    "forward-with-training",
)


@dataclass(frozen=True)
class Fallback:
    phase: str
    rule: str  # one of FALLBACKS
    reason: str
    line_idx: int  # index in the cleaned lines of the evidence line


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,80}", _A)
_CAMEL = re.compile(r"[A-Z]{2,}(?=[A-Z][a-z]|\b|[0-9_])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", _A)
# Attribute reads that say nothing about training: a layer checking its mode, a flag set off.
_NOT_TRAINING = re.compile(
    r"\.training\b|\b(?:is_)?training\s{0,2}=\s{0,2}(?:False|false)|\bno_grad\b|"
    r"\brequires_grad\w{0,2}\b|\bset_grad_enabled\b|\binference_mode\b|\btrainable\b",
    _A,
)
_LIB_PATH = re.compile(r"site-packages|dist-packages|/lib/python\d|/usr/lib/|/torch/|<frozen", _A)


def words(text: str) -> list[str]:
    """The lowercase words of every identifier in `text`: `run_inference` -> run, inference;
    `GenerationMixin` -> generation, mixin; `model.fit` -> model, fit."""
    out: list[str] = []
    for ident in _IDENT.findall(text[:_LINE_CAP]):
        for part in ident.split("_"):
            if part:
                out += [w.lower() for w in _CAMEL.findall(part)]
    return out


_TRAIN_WORDS = frozenset(
    {
        "loss",
        "losses",
        "backward",
        "optimizer",
        "optimizers",
        "optim",
        "train",
        "training",
        "trainer",
        "trainers",
        "epoch",
        "epochs",
        "finetune",
        "finetuning",
        "gradient",
        "gradients",
        "backprop",
        "sft",
        "dpo",
        "grpo",
        "rlhf",
        "pretrain",
        "pretraining",
    }
)
# Stems of the words in _TRAIN_WORDS (and `.fit(`) and in _INFER_WORDS, lower case: a line
# with none of them is not split into words (plain substring tests, cheap on long lines).
_TRAIN_STEMS = (
    *("train", "loss", "optim", "backward", "epoch", "finetun", "gradient", "backprop"),
    *("sft", "dpo", "grpo", "rlhf", "fit"),
)
_INFER_STEMS = (
    *("generat", "sampl", "infer", "predict", "detect", "separat", "denois", "decod", "embed"),
    *("transcri", "translat", "caption", "upscal", "interpol", "synthes", "chat", "vae"),
    *("comfy", "webui"),
)
_TRAIN_CODE = re.compile(r"\.fit\(|\.train\(\s{0,2}\)|\bfit_generator\(|\btrain_on_batch\(", _A)

_INFER_WORDS = frozenset(
    {
        "generate",
        "generation",
        "sample",
        "sampler",
        "sampling",
        "inference",
        "infer",
        "predict",
        "prediction",
        "detect",
        "detection",
        "separate",
        "separation",
        "denoise",
        "denoising",
        "decode",
        "embed",
        "embedding",
        "embeddings",
        "transcribe",
        "transcription",
        "translate",
        "caption",
        "upscale",
        "interpolate",
        "synthesize",
        "chat",
        "vae",
        "comfy",  # ComfyUI: a generation graph's executor
        "webui",  # stable-diffusion-webui and its forks
    }
)

# A model's layers running: where the code lives, or the call in a code line.
_LAYER_FILE = re.compile(
    r"(?:^|/)modeling_\w{1,60}\.py$|torch/nn/functional\.py$|torch/nn/modules/|"
    r"/(?:transformers|diffusers)/models/|/models?/\w{1,60}\.py$|/modules?/\w{1,60}\.py$|"
    r"/(?:layers?|blocks?|attention|nets?|networks?)/\w{1,60}\.py$",
    _A,
)
_MODEL_CALL = re.compile(
    r"(?<![\w.])(?:\w{1,30}\.)?(?:model|net|module|pipe|pipeline|unet|vae|encoder|decoder|"
    r"generator|backbone|transformer|llm)(?:_\w{1,20}|\d{1,2})?\s{0,2}\(|"
    r"\b(?:self\.)?(?:model|net|pipe|pipeline|llm)\.(?!to\(|cuda\(|load|save|train|eval\(|half\(|"
    r"float\()[a-z]\w{0,40}\(|"
    r"\b(?:F|functional|torch)\.(?:scaled_dot_product_attention|conv\dd|linear|softmax|"
    r"interpolate|pad|matmul|bmm|einsum|baddbmm|layer_norm|group_norm|embedding)\(",
    _A,
)

# The names _MODEL_CALL needs, lower case: a line with none of them is not matched.
_MODEL_HINTS = (
    *("model", "net", "module", "pipe", "unet", "vae", "encoder", "decoder", "generator"),
    *("backbone", "transformer", "llm", "functional.", "f.", "torch."),
)


def _has_any(text: str, stems: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(stem in low for stem in stems)


def _inference_func(func: str) -> bool:
    """A function named for inference: one inference word (`separate`, `generate`), or one
    ending the name (`run_inference`, `model_generate`). Not a verb on an object first:
    training code calls `generate_anchors` and `sample_batch`."""
    name = func.rsplit(".", 1)[-1].strip("_<>")
    parts = words(name)
    return bool(parts) and parts[-1] in _INFER_WORDS


def _is_forward_frame(fr: Frame) -> bool:
    func = fr.func.rsplit(".", 1)[-1]
    if func in ("forward", "_call_impl", "_wrapped_call_impl", "_conv_forward"):
        return True
    return bool(fr.file and _LAYER_FILE.search(fr.file.replace("\\", "/")))


def _own_file(file: str) -> bool:
    return bool(file) and not _LIB_PATH.search(file)


_COMMAND = re.compile(
    r"\s{0,8}(?:[!$>#%]\s{0,4})?(?:\w{1,40}=\S{0,80}\s{1,4}){0,4}"
    r"(?:python\d?(?:\.\d{1,2})?|torchrun|accelerate|deepspeed|bash|sh|srun|llamafactory-cli|"
    r"uv run|poetry run)\b",
    _A,
)
_ENTRY_FUNCS = frozenset({"<module>", "<cell>", "main", "<lambda>"})


def code_words(text: str) -> list[str]:
    """`words`, but only of identifiers that read as code: with an underscore, a camelCase
    hump, a call's parenthesis or a dot or slash beside them (`sam_detect(`, `embed_model`,
    `HuggingFaceEmbedding`, `sample_sequence/while`). Prose ("first few sample ids") is left
    out."""
    text = text[:_LINE_CAP]
    out: list[str] = []
    for m in _IDENT.finditer(text):
        ident = m.group()
        before = text[m.start() - 1] if m.start() else " "
        after = text[m.end()] if m.end() < len(text) else " "
        humped = any(a.islower() and b.isupper() for a, b in itertools.pairwise(ident))
        if "_" in ident.strip("_") or humped or after in "(./" or before in "./":
            out += words(ident)
    return out


# A graph node that creates a variable's value (TensorFlow 1.x builds every weight with one).
_TF_INIT_NODE = re.compile(
    r"(?:^|/)(?:initial_value|Initializer|Assign|random_\w{1,20})(?:/|$)", _A
)


def _graph_node(lines: list[str]) -> tuple[Fallback | None, int | None]:
    """The first TensorFlow node named anywhere in the paste: (its phase when it is a gradient
    op, an optimizer's op or a variable's initialiser, else None; its line when it is some
    other op, a forward op)."""
    for j, raw in enumerate(lines):
        node = log_rules.tf_node(raw[:_LINE_CAP])
        if node is None:
            continue
        hit = log_rules.tf_node_phase(node)
        if hit is not None:
            return Fallback(hit[0], "graph-node", hit[1], j), None
        if _TF_INIT_NODE.search(node):
            why = (
                f"TensorFlow names the failed op {node}: a variable's initial value, created "
                "when the model's weights are built"
            )
            return Fallback("load", "graph-node", why, j), None
        return None, j
    return None, None


def fallback_phase(log: CleanLog, event_idx: int, frames: list[Frame]) -> Fallback | None:
    """The phase from evidence anywhere in the paste, or None. Called only when no rule
    decided."""
    lines = log.lines[:WHOLE_PASTE_LINES]
    found_node, graph_forward_at = _graph_node(lines)
    if found_node is not None:
        return found_node
    train_at: int | None = None
    infer_at: int | None = None
    for j, raw in enumerate(lines):
        text = raw[:_LINE_CAP]
        want_train = train_at is None and _has_any(text, _TRAIN_STEMS)
        want_infer = infer_at is None and _has_any(text, _INFER_STEMS)
        if not (want_train or want_infer):
            continue  # no stem of a word still looked for: no need to split the line
        header = parse_header(text)
        if header:
            file, func = header
            path_words = words(file) if _own_file(file) else []
            train_found = words(func) + path_words if want_train else []
            infer_found = (words(func) if _inference_func(func) else []) + path_words
        else:
            if want_train and _TRAIN_CODE.search(text):
                train_at = j
            kept = _NOT_TRAINING.sub(" ", text)
            train_found = words(kept) if want_train else []
            infer_found = code_words(kept) if want_infer and not _COMMAND.match(text) else []
        if want_train and any(w in _TRAIN_WORDS for w in train_found):
            train_at = j
        if want_infer and any(w in _INFER_WORDS for w in infer_found):
            infer_at = j
        if train_at is not None and infer_at is not None:
            break
    forward_at: int | None = None
    for fr in reversed(frames):  # the deepest first
        if fr.func and _is_forward_frame(fr):
            forward_at = fr.header_no
            break
        if fr.code and _MODEL_CALL.search(fr.code):
            forward_at = fr.code_no if fr.code_no is not None else fr.header_no
            break
    whole = any(fr.func in _ENTRY_FUNCS for fr in frames)  # the traceback from its entry point
    if not frames:
        # no traceback: a quoted code line of the paste that calls a model
        top = min(event_idx, len(lines) - 1)
        for j in range(top, max(-1, top - SNIPPET_LINES), -1):
            text = lines[j][:_LINE_CAP]
            if _has_any(text, _MODEL_HINTS) and _MODEL_CALL.search(text) and not parse_header(text):
                forward_at, whole = j, True
                break
    if train_at is None:
        if infer_at is not None:
            return Fallback(
                "generate",
                "inference-words",
                "the paste's code names inference (generate, sample, predict, embed, decode...) "
                "and nothing in it says training",
                infer_at,
            )
        if forward_at is not None and whole:
            return Fallback(
                "generate",
                "forward-no-training",
                "a model was running when it failed and nothing in the paste says training "
                "(no loss, backward, optimizer, epoch or trainer): an inference forward",
                forward_at,
            )
        return None
    if forward_at is None and graph_forward_at is not None:
        forward_at = graph_forward_at  # a graph's forward op, in a run that trains
    elif not frames:
        return None
    if forward_at is not None:
        return Fallback(
            "train_forward",
            "forward-with-training",
            "the paste shows training, and the traceback ends in a model's forward with no "
            "backward or optimizer frame: the training forward",
            forward_at,
        )
    return None
