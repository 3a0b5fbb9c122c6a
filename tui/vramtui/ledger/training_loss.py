"""The loss a training framework runs, as bytes per logit: Hugging Face's full-vocabulary fp32
upcast (and its shifted copy before transformers 4.46), chunked fp32 or 16-bit heads and
losses (torchtune, LitGPT), fused linear cross-entropy (Liger, Unsloth from 2024.11), Unsloth's
in-place 16-bit logits before 2024.11, and a torch.compile'd cross-entropy (torchtitan). Split
out of `training_mechanisms`, which imports these names back where callers find them.
"""

from __future__ import annotations

from fractions import Fraction

from vramtui.ledger.context import LedgerContext


def settings(ctx: LedgerContext):
    """The framework settings of a training spec (vramtui.training_profiles)."""
    return ctx.framework


# transformers 4.46.0 moved the causal-LM loss into src/transformers/loss/loss_utils.py
# (ForCausalLMLoss: labels shifted with F.pad, no copy of the shifted logits, and the models
# return the logits in their own dtype). Before it, LlamaForCausalLM.forward (and the other
# causal LMs: Mistral, Qwen2, Gemma...) ran `logits = logits.float()`, then
# `shift_logits = logits[..., :-1, :].contiguous()` and CrossEntropyLoss, returning the fp32
# logits in its output (modeling_llama.py at v4.36.0 .. v4.45.2).
TRANSFORMERS_LOSS_UTILS = "4.46.0"
TRANSFORMERS_LOSS_UTILS_REF = (
    "modeling_llama.py LlamaForCausalLM.forward at v4.36-v4.45; ForCausalLMLoss in "
    "loss/loss_utils.py from v4.46.0"
)

# A torch.compile'd loss (loss_impl = "compiled"): torchtitan components/loss.py at e7c0cae
# build_cross_entropy_loss wraps cross_entropy(pred.flatten(0, 1).float(), ...) in
# torch.compile under training.compile (at 9dec370 train.py leaves it eager: "compiling loss
# function causes CUDA errors, turning off for now"). AOTAutograd's min-cut partitioner
# (torch/_functorch/partitioners.py, read at pytorch c28ba8e5: a reduction whose output is 4x
# smaller than its input is never recomputed, pointwise ops are) saves the 16-bit input and the
# log-softmax's per-row max and sum, not its fp32 output; inductor's joint-graph pattern
# scatter_upon_const_tensor (torch/_inductor/fx_passes/joint_graph.py) turns nll_loss
# backward's full + scatter into a pointwise where, so the backward writes the input's 16-bit
# gradient in one fused kernel. torch's test/inductor/test_scatter_optimization.py
# test_cross_entropy_loss records a compiled bf16 Linear + CrossEntropyLoss + backward at
# B, T, V = 32, 1024, 50257 on an A100 at peak_mem = 7.227 GB (10.524 GB without the pattern):
# 32,768 x 50,257 logits x 2 B = 3.29 GB, so the logits and their gradient (6.59 GB) and little
# else.
COMPILED_LOSS_REF = (
    "torchtitan components/loss.py at e7c0cae; torch _functorch/partitioners.py min-cut, "
    "_inductor/fx_passes/joint_graph.py scatter_upon_const_tensor"
)

# Unsloth 2024.11 ("Cut Cross Entropy", commit fa8e59eb1b) computes the loss from the hidden
# states without the full logits (fused_linear_cross_entropy; unsloth_fused_ce_loss from 2025.8).
# Before it, CausalLM_fast_forward materialised the LM head's logits in the model's 16-bit dtype
# (`logits = logits.to(self.config.torch_dtype)`) and kernels/cross_entropy_loss.py
# Fast_CrossEntropyLoss saved them with a per-row fp32 logsumexp, writing the gradient into the
# logits in place (`backward` returns `logits`), read at 2024.5 (commit 5cff582ccf).
UNSLOTH_FUSED_LOSS = "2024.11"
UNSLOTH_FUSED_LOSS_REF = (
    "unsloth/models/llama.py CausalLM_fast_forward and kernels/cross_entropy_loss.py "
    "Fast_CrossEntropyLoss at 2024.5 (commit 5cff582ccf); fused_linear_cross_entropy from "
    "2024.11 (commit fa8e59eb1b)"
)


def loss_bytes_per_logit(ctx: LedgerContext) -> tuple[Fraction, Fraction, Fraction, str]:
    """(forward at the loss, the loss backward, the LM head's backward) bytes per logit of the
    micro-batch, and the rule in words. b: the compute dtype's bytes."""
    fw = settings(ctx)
    b = ctx.act_bytes
    impl = fw.loss_impl
    if impl == "full-upcast" and shifted_logits_copy(ctx):
        return (
            Fraction(12),
            Fraction(16),
            Fraction(b),
            (
                f"the full-vocabulary loss of transformers < {TRANSFORMERS_LOSS_UTILS} "
                f"({TRANSFORMERS_LOSS_UTILS_REF}): the model upcasts its logits "
                "(logits = logits.float(), kept in the output, 4 B), copies the shifted logits "
                "(logits[..., :-1, :].contiguous(), 4 B) and CrossEntropyLoss saves its fp32 "
                "log-softmax (4 B): 12 B per logit at the loss; the loss backward holds the "
                "output's logits, the saved log-softmax, its gradient and the shifted logits' "
                f"gradient (4 x 4 B); the LM head's backward the logits' gradient in {b} B"
            ),
        )
    if impl == "full-upcast":
        fwd = Fraction(8 if b == 4 else b + 8)
        return (
            fwd,
            Fraction(12),
            Fraction(b),
            "the full-vocabulary loss: "
            + (
                "4 B fp32 logits (the upcast is a no-op) + 4 B log-softmax"
                if b == 4
                else f"{b} B + 4 B fp32 upcast + 4 B log-softmax"
            )
            + " per logit at the loss; the loss backward holds the saved log-softmax, its "
            "gradient and the logits' gradient (3 x 4 B); the LM head's backward the logits' "
            f"gradient in {b} B",
        )
    if impl == "chunked-fp32":
        n = fw.loss_chunks
        fwd = Fraction(4) + Fraction(b + 4, n)
        bwd = Fraction(4) + Fraction(4 + 4 + b, n)
        return (
            fwd,
            bwd,
            Fraction(b, n),
            (
                f"chunked fp32 cross-entropy in {n} chunks: each chunk's log-softmax (fp32, 4 B per "
                f"logit) is saved for backward, its logits and fp32 upcast ({b} + 4 B) live for one "
                f"chunk: 4 + {b + 4}/{n} B per logit at the loss; the loss backward: every saved "
                f"log-softmax + one chunk's gradients (4 + 4 + {b} B)/{n}; the LM head's backward "
                f"one chunk's logits' gradient, {b}/{n} B"
            ),
        )
    if impl == "chunked-bf16" and fw.fp32_model_output and b != 4:
        return (
            Fraction(8),
            Fraction(8),
            Fraction(4),
            (
                f"LM head in chunks ({b}-byte logits), which {fw.framework}'s precision plugin "
                f"casts to fp32 on output ({fw.origin('fp32_model_output')}): cross-entropy on "
                "the fp32 chunks, the fp32 logits (4 B) and their saved fp32 log-softmax (4 B) per "
                "logit held until the backward reaches them; the chunks' gradients are small"
            ),
        )
    if impl == "chunked-bf16":
        return (
            Fraction(2 * b),
            Fraction(2 * b),
            Fraction(b),
            (
                f"LM head in chunks and cross-entropy on the {b}-byte chunks (no fp32 upcast): the "
                f"logits ({b} B) and their saved log-softmax ({b} B) per logit, both held until "
                "the backward reaches them; the chunks' gradients are small"
            ),
        )
    if impl == "compiled":
        return (
            Fraction(b),
            Fraction(2 * b),
            Fraction(b),
            (
                f"a torch.compile'd cross-entropy on the {b}-byte logits' fp32 upcast "
                f"({COMPILED_LOSS_REF}): the upcast, log-softmax and its backward are fused "
                f"(no fp32 logits-sized tensor); the compiled graph saves the {b}-byte logits "
                "and a per-row max and log-sum-exp (small): "
                f"{b} B per logit at the loss; the loss backward holds the saved logits and "
                f"their gradient ({b} + {b} B); the LM head's backward the gradient, {b} B"
            ),
        )
    if unsloth_inplace_logits(ctx):
        return (
            Fraction(b),
            Fraction(b),
            Fraction(b),
            (
                f"Unsloth before {UNSLOTH_FUSED_LOSS} ({UNSLOTH_FUSED_LOSS_REF}): the LM head's "
                f"logits in the model's {b}-byte dtype, saved by the fused cross-entropy with a "
                "per-row fp32 logsumexp, which writes their gradient into them in place: "
                f"{b} B per logit at the loss, at its backward and at the LM head's backward"
            ),
        )
    # fused (Liger, Unsloth, cut-cross-entropy): the logits never exist in full
    return (
        Fraction(0),
        Fraction(0),
        Fraction(0),
        (
            "a fused linear + cross-entropy kernel: no full logits in any dtype (one chunk's "
            "logits, a few MB, not itemised)"
        ),
    )


def unsloth_inplace_logits(ctx: LedgerContext) -> bool:
    """Does Unsloth's loss materialise the 16-bit logits and write their gradient in place
    (a stated Unsloth version older than 2024.11, the profile's fused loss not overridden)?"""
    from vramtui.training_profiles import version_before

    fw = settings(ctx)
    return (
        fw.framework == "unsloth"
        and fw.loss_impl == "fused"
        and "loss_impl" not in fw.overridden
        and version_before(ctx.spec, "unsloth", UNSLOTH_FUSED_LOSS)
    )


def shifted_logits_copy(ctx: LedgerContext) -> bool:
    """Does the model's own forward compute the loss the transformers < 4.46 way (fp32 logits
    in the output, a contiguous copy of the shifted logits)? Only for transformers model code
    with a stated older transformers version."""
    from vramtui.training_profiles import version_before

    fw = settings(ctx)
    return fw.profile.model_code == "transformers" and version_before(
        ctx.spec, "transformers", TRANSFORMERS_LOSS_UTILS
    )


def loss_label(ctx: LedgerContext) -> str:
    fw = settings(ctx)
    impl = fw.loss_impl
    if impl == "chunked-bf16" and fw.fp32_model_output and ctx.act_bytes != 4:
        return "chunked LM head, its output cast to fp32, fp32 cross-entropy"
    if unsloth_inplace_logits(ctx):
        return "16-bit logits, fused cross-entropy, gradient in place"
    return {
        "full-upcast": "fp32 upcast, log-softmax, gradient",
        "chunked-fp32": f"chunked fp32 cross-entropy, {settings(ctx).loss_chunks} chunks",
        "chunked-bf16": "chunked 16-bit LM head and cross-entropy",
        "fused": "fused linear cross-entropy, no full logits",
        "compiled": "compiled fp32 cross-entropy, 16-bit logits and gradient",
    }[impl]


def no_logits_block(ctx: LedgerContext) -> bool:
    """Does the loss run without a logits-sized tensor (`loss_impl = "fused"`, not Unsloth's
    in-place 16-bit loss of a version older than 2024.11)?

    Cut Cross-Entropy (apple/ml-cross-entropy README, read at 18e76ada05: "computes the
    cross-entropy loss without materializing the logits for all tokens into global memory";
    its benchmark: 1.1 MB for the loss forward of Gemma 2 where the baseline takes 24 GB)
    is what Unsloth's CausalLM_fast_forward calls (unsloth/models/llama.py at 2025.3.15,
    commit 49eece4d94: `fused_linear_cross_entropy(hidden_states, lm_weight, labels, ...)`
    when the micro-batch has more than 1,024 tokens and returns EMPTY_LOGITS) and what
    Axolotl's CutCrossEntropyPlugin patches in. So the allocator has no freed logits-sized
    block to keep cached (the fragmentation heuristic's block)."""
    return settings(ctx).loss_impl == "fused" and not unsloth_inplace_logits(ctx)


def logit_block_bytes(ctx: LedgerContext) -> tuple[int, str]:
    """Bytes per logit of the largest logits-sized block the loss allocates (the fragmentation
    heuristic's block): an fp32 one unless the loss is Unsloth's in-place 16-bit one or a
    compiled one (whose largest logits-sized block is the 16-bit gradient)."""
    if unsloth_inplace_logits(ctx):
        return ctx.act_bytes, f"{ctx.act_bytes}-byte logits (Unsloth's in-place loss)"
    if settings(ctx).loss_impl == "compiled":
        return ctx.act_bytes, f"{ctx.act_bytes}-byte logits' gradient (the compiled loss)"
    return 4, "fp32 logits"
