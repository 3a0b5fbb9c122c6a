"""Attention for the trace: what the spec's kernel really keeps, not the meta math path.

On the meta device `scaled_dot_product_attention` falls back to the math path and materialises
the b x a x s x s scores, which the flash and memory-efficient CUDA kernels never do. For
`flash` and `sdpa` the trace registers (through transformers' AttentionInterface) an attention
function that allocates what those kernels keep:

* forward: the output (b, s, a, d_v) in the compute dtype and the log-sum-exp (b, a, s) in
  fp32; q, k and v are saved for backward when they need gradients (they are already live);
* backward: the gradients of q, k and v.

Keys and values are not repeated to the query heads (flash kernels read grouped KV heads
directly; PyTorch's SDPA does the same with enable_gqa, which transformers sets when there is
no padding mask). With no padding mask (the trace's batches are unpadded), `sdpa` on CUDA
dispatches to the flash or memory-efficient kernel, which keep the same tensors.

For `eager` the model's own eager attention runs unchanged (repeat_kv copies, s x s scores in
the compute dtype, fp32 softmax, float causal mask). Selective recomputation with eager
attention checkpoints the attention core only (Korthikanti et al.'s selective recompute).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

FLASH_NAME = "vramtui_fused_kernel"
EAGER_NAME = "vramtui_eager"
EAGER_SELECTIVE_NAME = "vramtui_eager_selective"

# The tracker of the trace in progress: mask construction is tagged "attention_mask" on it.
ACTIVE_TRACKER = None

KERNEL_DESCRIPTIONS = {
    "flash": (
        "flash-attention kernel model: output + fp32 log-sum-exp forward, dq/dk/dv backward; "
        "no s x s scores"
    ),
    "sdpa": (
        "SDPA as dispatched on CUDA without a padding mask (flash / memory-efficient kernel): "
        "output + fp32 log-sum-exp forward, dq/dk/dv backward; no s x s scores"
    ),
    "eager": (
        "eager math path as written in the model (repeat_kv copies, s x s scores, fp32 softmax, "
        "float causal mask)"
    ),
}


def _flash_function():
    import torch

    class _FlashLike(torch.autograd.Function):
        @staticmethod
        def forward(ctx, query, key, value):
            b, a, s, _ = query.shape
            dv = value.shape[-1]
            out = query.new_empty((b, s, a, dv))
            lse = torch.empty((b, a, s), dtype=torch.float32, device=query.device)
            if any(ctx.needs_input_grad):
                ctx.save_for_backward(query, key, value, out, lse)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            query, key, value, _out, _lse = ctx.saved_tensors
            gq = torch.empty_like(query) if ctx.needs_input_grad[0] else None
            gk = torch.empty_like(key) if ctx.needs_input_grad[1] else None
            gv = torch.empty_like(value) if ctx.needs_input_grad[2] else None
            return gq, gk, gv

    return _FlashLike


_FLASH = None


def flash_like_attention(module, query, key, value, attention_mask, **kwargs):
    """AttentionInterface function: query (b, a, s, d), key/value (b, kv, s_k, d) ->
    output (b, s, a, d_v), as the flash kernels return it."""
    global _FLASH
    if _FLASH is None:
        _FLASH = _flash_function()
    return _FLASH.apply(query, key, value), None


def _sdpa_function():
    import torch

    class _SdpaLike(torch.autograd.Function):
        """SDPA's flash/memory-efficient kernels: output (..., a, s, d_v) as SDPA returns it,
        fp32 log-sum-exp (..., a, s) saved for backward, dq/dk/dv in backward."""

        @staticmethod
        def forward(ctx, query, key, value):
            out = query.new_empty((*query.shape[:-1], value.shape[-1]))
            lse = torch.empty(query.shape[:-1], dtype=torch.float32, device=query.device)
            if any(ctx.needs_input_grad):
                ctx.save_for_backward(query, key, value, out, lse)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            query, key, value, _out, _lse = ctx.saved_tensors
            gq = torch.empty_like(query) if ctx.needs_input_grad[0] else None
            gk = torch.empty_like(key) if ctx.needs_input_grad[1] else None
            gv = torch.empty_like(value) if ctx.needs_input_grad[2] else None
            return gq, gk, gv

    return _SdpaLike


_SDPA = None


@contextlib.contextmanager
def kernel_sdpa(active: bool = True):
    """While active, `torch.nn.functional.scaled_dot_product_attention` keeps what the fused
    CUDA kernels keep (for families that call it directly, not through the interface)."""
    global _SDPA
    if not active:
        yield
        return
    import torch

    if _SDPA is None:
        _SDPA = _sdpa_function()
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention

    def sdpa(query, key, value, *args, **kwargs):
        return _SDPA.apply(query, key, value)

    functional.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        functional.scaled_dot_product_attention = original


def uses_attention_interface(model_class) -> bool:
    """Whether the family's modeling file dispatches attention through AttentionInterface
    (and so can run the trace's registered functions)."""
    # Read from the modeling file's own text: whether the module object carries the name at
    # this moment depends on what else the process imported, not on how the family dispatches.
    import importlib

    try:
        module = importlib.import_module(getattr(model_class, "__module__", ""))
    except Exception:  # noqa: BLE001 - an unimportable family cannot dispatch through it
        return False
    path = getattr(module, "__file__", None)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return "ALL_ATTENTION_FUNCTIONS" in handle.read()
        except OSError:
            pass
    return hasattr(module, "ALL_ATTENTION_FUNCTIONS")


@dataclass(frozen=True)
class Route:
    """How a family without the AttentionInterface is built and traced."""

    implementation: str  # "sdpa" | "eager": transformers' own names
    patch_sdpa: bool  # trace SDPA as the fused kernels (kernel_sdpa)
    used: str  # what the trace runs, in words
    note: str


def builtin_route(
    family: str, kernel: str, training: bool, checkpointing: str, supports_sdpa: bool
) -> Route:
    """The attention a family that does not use AttentionInterface is traced with."""
    why = (
        f"{family} picks its attention class from a fixed table, not transformers' "
        "AttentionInterface, so the trace's own attention cannot be registered"
    )
    selective = training and checkpointing == "selective"
    if kernel in ("flash", "sdpa") and supports_sdpa:
        return Route(
            "sdpa",
            True,
            KERNEL_DESCRIPTIONS[kernel] + " (the model's direct SDPA call, traced as the kernel)",
            f"{why}: built with attn_implementation='sdpa', its scaled_dot_product_attention "
            "call traced as the fused kernel (output + fp32 log-sum-exp, no s x s scores)",
        )
    if kernel in ("flash", "sdpa"):
        return Route(
            "eager",
            False,
            KERNEL_DESCRIPTIONS["eager"] + f" ({family} has no SDPA path in transformers)",
            f"{why}, and it has no SDPA path: traced with its eager attention, whose s x s "
            f"scores a {kernel} kernel would not keep (the trace overstates attention)",
        )
    text = KERNEL_DESCRIPTIONS["eager"]
    note = f"{why}: built with attn_implementation='eager'"
    if selective:
        text += "; selective recomputation not applied (the attention core is the model's own)"
        note += (
            "; selective recomputation of the attention core cannot be applied to its "
            "built-in attention, so the trace keeps the scores for backward"
        )
    return Route("eager", False, text, note)


def _model_eager(module):
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if eager is None:  # pragma: no cover - every transformers decoder defines one
        raise RuntimeError(f"{type(module).__name__} has no eager_attention_forward")
    return eager


@contextlib.contextmanager
def _cuda_softmax(query):
    """On CUDA, softmax(fp16 scores, dtype=float32) runs as one kernel (half_to_float); the
    meta device takes the CPU path, which first copies the scores to fp32. Trace what CUDA
    does (bf16 is copied on CUDA too, so it is left alone)."""
    import torch

    if query.dtype != torch.float16 or query.device.type != "meta":
        yield
        return
    functional = torch.nn.functional
    original = functional.softmax

    def softmax(input, dim=None, _stacklevel=3, dtype=None):
        if dtype == torch.float32 and input.dtype == torch.float16 and dim is not None:
            return torch._softmax(input, dim, True)
        return original(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)

    functional.softmax = softmax
    try:
        yield
    finally:
        functional.softmax = original


def eager_attention(module, query, key, value, attention_mask, **kwargs):
    """The model's own eager attention (its modeling file's eager_attention_forward)."""
    with _cuda_softmax(query):
        return _model_eager(module)(module, query, key, value, attention_mask, **kwargs)


def eager_selective_attention(module, query, key, value, attention_mask, **kwargs):
    """The model's own eager attention, its core recomputed in backward (selective)."""
    from torch.utils.checkpoint import checkpoint

    eager = _model_eager(module)

    def core(q, k, v, mask):
        with _cuda_softmax(q):
            return eager(module, q, k, v, mask, **kwargs)[0]

    return checkpoint(core, query, key, value, attention_mask, use_reentrant=False), None


def register() -> None:
    """Register the trace's attention functions and their mask functions (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import (
        AttentionMaskInterface,
        eager_mask,
        flash_attention_mask,
    )

    AttentionInterface.register(FLASH_NAME, flash_like_attention)
    AttentionMaskInterface.register(FLASH_NAME, _tagged(flash_attention_mask))
    AttentionInterface.register(EAGER_NAME, eager_attention)
    AttentionMaskInterface.register(EAGER_NAME, _tagged(eager_mask))
    AttentionInterface.register(EAGER_SELECTIVE_NAME, eager_selective_attention)
    AttentionMaskInterface.register(EAGER_SELECTIVE_NAME, _tagged(eager_mask))


def _tagged(mask_function):
    """Mask construction, its storages tagged "attention_mask" on the active tracker."""

    def build_mask(*args, **kwargs):
        tracker = ACTIVE_TRACKER
        if tracker is None:
            return mask_function(*args, **kwargs)
        before = tracker.region
        tracker.region = "attention_mask"
        try:
            return mask_function(*args, **kwargs)
        finally:
            tracker.region = before

    return build_mask


def implementation_for(kernel: str, training: bool, checkpointing: str) -> str:
    """The attn_implementation name the traced model runs with."""
    if kernel in ("flash", "sdpa"):
        return FLASH_NAME
    if training and checkpointing == "selective":
        return EAGER_SELECTIVE_NAME
    return EAGER_NAME


def describe(kernel: str, training: bool, checkpointing: str) -> str:
    text = KERNEL_DESCRIPTIONS[kernel]
    if kernel == "eager" and training and checkpointing == "selective":
        text += "; selective recomputation: the attention core is recomputed in backward"
    elif kernel != "eager" and training and checkpointing == "selective":
        text += "; selective recomputation changes nothing with this kernel (no scores to drop)"
    return text
