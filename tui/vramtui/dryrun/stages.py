"""Run the spec's stages on the built model under the storage tracker.

Inference (transformers' generate() path, DynamicCache, logits for the last position only, an
fp32 copy of them for sampling):
  prefill  - the prompt at the spec's concurrency in one forward; under vLLM, the engine's
             default prefill budget (8,192 tokens per step, as the ledger assumes), with the
             other sequences' caches already held;
  decode   - one step of every sequence with the cache at prompt + generated - 1 tokens (the
             longest, last step of generation).
Training (a Trainer step): optimiser states from a previous step exist before the forward;
  forward  - micro-batch x seq_len with labels: logits for every position, the loss in fp32;
  backward - loss.backward(), gradients of the trainable parameters;
  optimizer_step - the emulated step's temporaries (optimizer.py), gradients still held;
  validation - a no-grad forward with labels at the training micro-batch.
The batches are unpadded (no 2-D attention mask), as packed or equal-length training data is.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field

from vramtui.dryrun.tracker import StorageTracker, UnsupportedOpError, analyse

VLLM_ENGINES = ("vllm",)


@dataclass
class TraceRun:
    tracker: StorageTracker
    peaks: list  # tracker.StagePeak per stage
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _register_baseline(built, tracker: StorageTracker) -> None:
    for p in built.model.parameters():
        tracker.tag(p, "adapter" if id(p) in built.adapter_params else "parameters")
    for b in built.model.buffers():
        tracker.tag(b, "buffers")


def _zeros_ids(torch, shape, device):
    return torch.zeros(shape, dtype=torch.long, device=device)


class _LogitsRegion:
    """Tag storages created from the output projection's forward to the end of the model's
    forward (logits, their fp32 upcast, log-softmax) as logits; in backward, until the grad of
    the projection's input is computed (the logits' gradients)."""

    def __init__(self, built, tracker: StorageTracker):
        self.tracker = tracker
        head = built.lm_head
        self.handles = [
            head.register_forward_pre_hook(self._pre),
            head.register_forward_hook(self._post),
        ]

    def _pre(self, module, args):
        self.tracker.region = "logits"

    def _post(self, module, args, output):
        x = args[0] if args else None
        if x is not None and getattr(x, "requires_grad", False):
            x.register_hook(self._grad_done)

    def _grad_done(self, grad):
        self.tracker.region = ""

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _tag_cache(cache, tracker: StorageTracker) -> None:
    for layer in getattr(cache, "layers", []):
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if t is not None and hasattr(t, "untyped_storage"):
                tracker.tag(t, "kv_cache")


def run_stages(spec, built, *, device: str = "meta") -> TraceRun:
    """Trace the spec's stages; UnsupportedOpError propagates from an op that cannot run."""
    import torch

    from vramtui.dryrun import attention

    tracker = StorageTracker()
    notes: list[str] = []
    t0 = time.perf_counter()
    attention.ACTIVE_TRACKER = tracker
    region = _LogitsRegion(built, tracker)
    try:
        with (
            warnings.catch_warnings(),
            _unpacked_sequences(),
            _cuda_dropout(torch),
            attention.kernel_sdpa(built.patch_sdpa),
            tracker,
        ):
            # transformers 5 renames past_key_values -> cache; older releases know only the former
            warnings.simplefilter("ignore", FutureWarning)
            _register_baseline(built, tracker)
            if spec.task.kind == "inference":
                notes += _inference(spec, built, tracker, torch, device)
            else:
                notes += _training(spec, built, tracker, torch, device)
            tracker.stop()
    finally:
        tracker.stop()
        region.remove()
        attention.ACTIVE_TRACKER = None
    seconds = time.perf_counter() - t0
    return TraceRun(tracker=tracker, peaks=analyse(tracker), notes=notes, seconds=seconds)


@contextlib.contextmanager
def _unpacked_sequences():
    """transformers checks the position ids for packed sequences with a data-dependent test
    (no meta kernel); the trace's sequences are not packed, so the answer is known: none."""
    try:
        from transformers import masking_utils
    except ImportError:  # pragma: no cover
        yield
        return
    original = getattr(masking_utils, "find_packed_sequence_indices", None)
    if original is None:
        yield
        return
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = original


@contextlib.contextmanager
def _cuda_dropout(torch):
    """Dropout as CUDA runs it. Off CUDA, ATen's dropout multiplies by a noise tensor of the
    input's dtype (4 B per value for PEFT's fp32 adapter inputs) and autograd keeps it; on CUDA
    it is the fused `native_dropout`, which keeps a 1 B bool mask. The trace models the GPU."""
    functional = torch.nn.functional
    original = functional.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0 or inplace:
            return original(input, p, training, inplace)
        return torch.native_dropout(input, p, True)[0]

    functional.dropout = dropout
    try:
        yield
    finally:
        functional.dropout = original


# ------------------------------------------------------------------------------ inference


def _forward_cached(model, ids, cache, tracker):
    out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    tracker.region = ""
    return out


def _new_cache(built):
    from transformers import DynamicCache

    return DynamicCache(config=built.hf_config)


def _sample(out, tracker, torch):
    """generate(): an fp32 copy of the last position's logits, then the next token."""
    tracker.region = "logits"
    logits = out.logits[:, -1].to(copy=True, dtype=torch.float32)
    tracker.region = ""
    return logits.argmax(-1)


def _prefill_shape(spec) -> tuple[int, int, int, str]:
    """(sequences in the prefill step, tokens each, sequences whose cache is already held, note)."""
    conc, prompt = spec.batch.concurrency, spec.lengths.prompt_tokens
    engine = (spec.runtime.engine or "transformers").lower()
    if engine not in VLLM_ENGINES:
        return conc, prompt, 0, f"prefill: {conc} x {prompt:,} tokens in one forward"
    from vramtui.ledger.activations import VLLM_DEFAULT_BATCHED_TOKENS

    budget = VLLM_DEFAULT_BATCHED_TOKENS
    length = min(prompt, budget)
    seqs = max(1, min(conc, budget // length))
    held = conc - seqs
    return (
        seqs,
        length,
        held,
        (
            f"prefill as vLLM schedules it: {seqs} x {length:,} tokens per step (default "
            f"max_num_batched_tokens {budget:,}), the cache of the other {held} sequence(s) "
            f"x {prompt:,} tokens already held"
        ),
    )


def _inference(spec, built, tracker, torch, device) -> list[str]:
    model = built.model
    conc = spec.batch.concurrency
    prompt = spec.lengths.prompt_tokens
    context = prompt + spec.lengths.generated_tokens
    seqs, length, held, prefill_note = _prefill_shape(spec)
    notes = [prefill_note]
    with torch.no_grad():
        # --- prefill
        pool = None
        if held:
            pool = _new_cache(built)
            out = _forward_cached(model, _zeros_ids(torch, (held, prompt), device), pool, tracker)
            del out
            _tag_cache(pool, tracker)
        ids = _zeros_ids(torch, (seqs, length), device)
        tracker.tag(ids, "inputs")
        cache = _new_cache(built)
        tracker.begin_stage("prefill", prefill_note)
        out = _forward_cached(model, ids, cache, tracker)
        _tag_cache(cache, tracker)
        nxt = _sample(out, tracker, torch)
        del out
        tracker.end_stage()
        del nxt, cache, pool, ids
        # --- decode: the cache at context - 1 tokens, then the last step
        cache = _new_cache(built)
        if context > 1:
            out = _forward_cached(
                model, _zeros_ids(torch, (conc, context - 1), device), cache, tracker
            )
            del out
        _tag_cache(cache, tracker)
        ids = _zeros_ids(torch, (conc, 1), device)
        tracker.tag(ids, "inputs")
        decode_note = (
            f"decode: one step of {conc} sequence(s) with the cache at {context - 1:,} tokens "
            f"(the last step of {prompt:,} + {spec.lengths.generated_tokens:,}); "
            "transformers' DynamicCache grows by concatenation"
        )
        tracker.begin_stage("decode", decode_note)
        out = _forward_cached(model, ids, cache, tracker)
        _tag_cache(cache, tracker)
        nxt = _sample(out, tracker, torch)
        del out
        tracker.end_stage()
        del nxt, cache
    notes.append(decode_note)
    return notes


# ------------------------------------------------------------------------------ training


class _GradHooks:
    """Tag gradients as they are accumulated; hold them in the spec's grad dtype when it differs
    from the parameter's (an fp32 gradient buffer, as DeepSpeed/FSDP keep)."""

    def __init__(self, spec, built, tracker, torch):
        self.tracker = tracker
        self.buffers: dict[int, object] = {}
        self.handles = []
        want = None
        if spec.task.kind == "full_finetune":
            want = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[
                spec.training.grad_dtype
            ]
        self.want = want
        self.converted = False
        for p in built.trainable:
            self.handles.append(p.register_post_accumulate_grad_hook(self._hook))

    def _hook(self, p) -> None:
        if self.want is not None and p.grad is not None and p.grad.dtype != self.want:
            self.converted = True
            g = p.grad.to(self.want)
            acc = self.buffers.get(id(p))
            if acc is None:
                self.buffers[id(p)] = g
                self.tracker.tag(g, "gradients")
            else:
                acc.add_(g)
                del g
            p.grad = None
            return
        self.tracker.tag(p.grad, "gradients")

    def preallocate(self, built, torch) -> None:
        """Gradients of earlier micro-batches (gradient accumulation)."""
        for p in built.trainable:
            if self.want is not None and p.dtype != self.want:
                g = torch.zeros_like(p, dtype=self.want)
                self.buffers[id(p)] = g
                self.tracker.tag(g, "gradients")
            else:
                p.grad = torch.zeros_like(p)
                self.tracker.tag(p.grad, "gradients")

    def clear(self, built) -> None:
        for p in built.trainable:
            p.grad = None
        self.buffers.clear()

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _training(spec, built, tracker, torch, device) -> list[str]:
    from vramtui.dryrun.optimizer import EmulatedOptimizer

    model = built.model
    mb, s = spec.batch.micro_batch, spec.lengths.seq_len
    notes = []
    optimizer = EmulatedOptimizer(spec, built.trainable, tracker)
    notes.append(optimizer.description)
    grads = _GradHooks(spec, built, tracker, torch)
    accum = spec.batch.grad_accum or 1
    try:
        if accum > 1:
            grads.preallocate(built, torch)
            notes.append(
                f"gradient accumulation ({accum} steps): gradients of earlier micro-batches "
                "are held before the forward"
            )
        ids = _zeros_ids(torch, (mb, s), device)
        labels = _zeros_ids(torch, (mb, s), device)
        tracker.tag(ids, "inputs")
        tracker.tag(labels, "inputs")
        tracker.begin_stage(
            "forward", f"forward of {mb} x {s:,} tokens with labels (all positions' logits)"
        )
        out = model(input_ids=ids, labels=labels, use_cache=False)
        tracker.region = ""
        loss = out.loss
        del out
        tracker.begin_stage("backward", "loss.backward()")
        loss.backward()
        tracker.region = ""
        del loss
        tracker.begin_stage("optimizer_step", "optimiser step (emulated), gradients held")
        optimizer.step()
        tracker.end_stage()
        if grads.converted:
            notes.append(
                f"gradients held in {spec.training.grad_dtype} as the spec sets (a converted "
                "copy of each parameter's gradient)"
            )
        grads.clear(built)
        model.eval()
        with torch.no_grad():
            tracker.begin_stage("validation", f"no-grad forward of {mb} x {s:,} tokens with labels")
            out = model(input_ids=ids, labels=labels, use_cache=False)
            tracker.region = ""
            del out
            tracker.end_stage()
        model.train()
    finally:
        grads.remove()
    optimizer.release()
    return notes


__all__ = ["TraceRun", "UnsupportedOpError", "run_stages"]
