"""What a training framework changes in the ledger: each mechanism of a framework profile
(vramtui.training_profiles) as bytes, with the counters that see them.

The reference behaviour (hf-trainer: PEFT fp32 adapters, the full-vocabulary fp32 loss, a
standard optimiser step) is what the rest of the ledger computed before frameworks existed;
every function here returns that behaviour's numbers for the hf-trainer defaults.
"""

from __future__ import annotations

from fractions import Fraction

from vramtui.ledger.context import LedgerContext
from vramtui.ledger.items import DEVICE_COUNTERS, ESTIMATED, LedgerItem
from vramtui.ledger.placement import distribution
from vramtui.ledger.training_loss import (  # noqa: F401 (re-exported for callers)
    COMPILED_LOSS_REF,
    TRANSFORMERS_LOSS_UTILS,
    TRANSFORMERS_LOSS_UTILS_REF,
    UNSLOTH_FUSED_LOSS,
    UNSLOTH_FUSED_LOSS_REF,
    logit_block_bytes,
    loss_bytes_per_logit,
    loss_label,
    no_logits_block,
    settings,
    shifted_logits_copy,
    unsloth_inplace_logits,
)

# bitsandbytes' MatMul4Bit.forward saved its input (ctx.tensors = (A, B)) for backward although
# the frozen 4-bit weight needs no input to compute the input's gradient; fixed by "fix QLoRA
# mem bug: delete useless buffered activation" (bitsandbytes PR #1270, commit 9e75374, first
# released in 0.43.2: ctx.tensors = (None, B)).
BNB_4BIT_INPUT_FIX = "0.43.2"
BNB_4BIT_INPUT_FIX_REF = "bitsandbytes PR #1270, commit 9e75374, released in 0.43.2"

# Unsloth's LoRA kernels (unsloth/kernels/fast_lora.py at 2024.5, commit 5cff582ccf) replace
# PEFT's forward for these module groups when every module of the group is adapted, the LoRA
# dropout is 0 and there is no bias (models/llama.py FastLlamaModel.patch_peft_model).
UNSLOTH_KERNEL_GROUPS = (
    ("qkv", ("q_proj", "k_proj", "v_proj")),
    ("o", ("o_proj",)),
    ("mlp", ("gate_proj", "up_proj", "down_proj")),
)

# bitsandbytes Optimizer8bit/Optimizer2State.get_state_buffer: a paged optimiser allocates a
# parameter's states with F.get_paged (cudaMallocManaged, lib.cget_managed_ptr) only when
# p.numel() >= 1e5; smaller parameters get torch.zeros_like (PyTorch's allocator).
BNB_PAGED_MIN_NUMEL = 100_000

# Modules whose LoRA input is the fused q, k, v input when the framework applies one LoRA
# dropout to it (LitGPT's LoRAQKVLinear).
QKV_NAMES = ("q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "Wqkv", "c_attn")


# --------------------------------------------------------------------------- adapters


def adapter_bytes(ctx: LedgerContext) -> int:
    """Bytes per adapter value: PEFT upcasts to fp32 (4 B); LitGPT and torchtune keep them in
    the model's 16-bit dtype (2 B)."""
    return 4 if settings(ctx).adapter_dtype == "fp32" else 2


def adapter_dtype_said(ctx: LedgerContext) -> str:
    fw = settings(ctx)
    if fw.adapter_dtype == "fp32":
        return "fp32"
    return "16-bit, the model's dtype"


def shares_qkv_input(ctx: LedgerContext, module_name: str) -> bool:
    """Does this module's LoRA input (dropout or cast) come once for the fused q, k, v?"""
    return bool(settings(ctx).fused_qkv_adapter) and module_name in QKV_NAMES


# --------------------------------------------------------------------------- checkpointing


def offloads_checkpoints(ctx: LedgerContext) -> bool:
    """Full checkpointing whose layer inputs are copied to host memory (Unsloth's "unsloth"
    gradient checkpointing)?"""
    return bool(settings(ctx).offload_checkpoints) and (
        ctx.spec.training.grad_checkpointing == "full"
    )


# Layer inputs of an offloaded checkpoint on the GPU at once: Unsloth 2024.x holds the input in
# transit to the host beside the current layer's in the forward and the reloaded one in the
# backward; unsloth_zoo's UnslothCheckpointFunction (a1899136) never offloads the last layer's
# input and reloads the others into one persistent GPU buffer.
OFFLOADED_INPUTS_ON_GPU = 2


def fp32_residual_stream(ctx: LedgerContext) -> bool:
    """fp32 norms (`fp32_norms`) in a 16-bit model whose linears are bitsandbytes 4-bit.

    PEFT src/peft/utils/other.py prepare_model_for_kbit_training (v0.13.2) casts every
    float16/bfloat16 parameter that is not Params4bit to float32; TRL 0.13.0
    SFTTrainer.__init__ calls it for a 4-bit model whose parameters are on the GPU and then,
    under bf16, trainer/utils.py peft_module_casting_to_bf16 puts lm_head and embed_tokens back
    in bf16 and leaves every module with "norm" in its name in fp32. transformers' RMSNorm
    returns `self.weight * hidden_states.to(input_dtype)` (modeling_mistral.py MistralRMSNorm):
    an fp32 weight makes its output fp32 whatever the input. bitsandbytes 0.43.3
    nn/modules.py Linear4bit.forward casts the input to the compute dtype and returns
    `out.to(inp_dtype)`: after an fp32 norm, q, k, v, gate and up come out fp32, the MLP's
    activation and product are fp32, down_proj returns fp32 and the residual add makes the
    stream fp32 from the first layer's MLP on (the embedding's output, bf16, is the first
    layer's input only). Saved for backward: the MLP's gate, up and activation at 4 B; under
    checkpointing every layer input but the first at 4 B. (The attention kernel gets 16-bit
    copies of q, k, v: transformers casts fp32 inputs to the autocast dtype before flash
    attention.)"""
    return (
        (bool(settings(ctx).fp32_norms) or trl_prepares_kbit(ctx))
        and ctx.spec.weights.format in ("nf4", "fp4")
        and ctx.act_bytes < 4
    )


# TRL's SFTTrainer, given a peft_config and a 4-bit model whose Params4bit are on the GPU, runs
# prepare_model_for_kbit_training (the norms to fp32) and, from 0.8.0, peft_module_casting_to_bf16
# (the embedding and LM head back to bf16, the norms kept fp32): trl/trainer/sft_trainer.py
# SFTTrainer.__init__, read at v0.4.7, v0.7.4, v0.8.0, v0.9.6, v0.13.0 (L168-233) and v0.20.0;
# after the PEFT integration of 2025-08 (#3882) through trl/models/utils.py prepare_peft_model
# (read at v0.23.0, PEFT's prepare_model_for_kbit_training, and v0.25.0, TRL's own, which casts
# every float16/bfloat16 parameter with "norm" in its name to float32).
# v0.26.0 ("Clean up model preparation", #4577, commit 2af35fb0d) drops it: SFTTrainer calls
# get_peft_model only and casts the trainable parameters to bf16 (sft_trainer.py at v1.1.0).
# Skipped for a sharded QLoRA model ("one should never call peft_module_casting_to_bf16 or
# prepare_model_for_kbit_training when doing QLoRA + FSDP / DS-Zero3"): Params4bit on the CPU or
# the meta device.
TRL_KBIT_PREPARE_DROPPED = "0.26.0"
TRL_KBIT_PREPARE_REF = (
    "TRL SFTTrainer before 0.26.0 runs prepare_model_for_kbit_training on a 4-bit model on the "
    "GPU (trl/trainer/sft_trainer.py at v0.13.0; trl/models/utils.py prepare_peft_model at "
    "v0.25.0), dropped in 0.26.0 (commit 2af35fb0d)"
)


def trl_prepares_kbit(ctx: LedgerContext) -> bool:
    """fp32 norms from TRL's SFTTrainer: the hf-trainer profile (Trainer + PEFT / TRL), its
    fp32_norms not set in the spec, a stated TRL version older than 0.26.0, and the 4-bit model
    not sharded (FSDP / ZeRO-3 QLoRA keeps its Params4bit off the GPU, which TRL skips). A
    plain transformers Trainer, or TRL unstated: the profile's default."""
    from vramtui.training_profiles import library_version, version_before

    fw = settings(ctx)
    return (
        fw.framework == "hf-trainer"
        and "fp32_norms" not in fw.overridden
        and library_version(ctx.spec, "trl") is not None
        and version_before(ctx.spec, "trl", TRL_KBIT_PREPARE_DROPPED)
        and ctx.spec.placement.data_parallel_sharding == "none"
    )


def fp32_norms_why(ctx: LedgerContext) -> str:
    """Where the fp32 norms come from, in words."""
    if trl_prepares_kbit(ctx) and not settings(ctx).fp32_norms:
        return f"[training.versions] trl {library_version_text(ctx, 'trl')}: {TRL_KBIT_PREPARE_REF}"
    return settings(ctx).origin("fp32_norms")


def library_version_text(ctx: LedgerContext, library: str) -> str:
    from vramtui.training_profiles import library_version

    return library_version(ctx.spec, library) or "unstated"


def torchtitan_op_saves(ctx: LedgerContext) -> bool:
    """Selective checkpointing under torchtitan's op-level policy?"""
    return (
        ctx.spec.training.grad_checkpointing == "selective"
        and settings(ctx).selective_policy == "torchtitan-op"
    )


def torchtitan_op_layer_bytes(ctx: LedgerContext, tokens: int) -> tuple[int, int, str]:
    """(bytes one layer keeps, the part of them the layer's recomputed saved set reuses, why)
    under torchtitan's selective_ac_option = "op".

    torchtitan parallelisms/parallelize_llama.py _apply_ac_to_transformer_block at 9dec370
    (models/llama3/parallelize_llama.py at e7c0cae, the same policy): each TransformerBlock is
    a checkpoint_wrapper whose create_selective_checkpoint_contexts policy returns MUST_SAVE for
    the ops of _save_list (aten.mm, _scaled_dot_product_flash_attention,
    _scaled_dot_product_efficient_attention, _c10d_functional.reduce_scatter_tensor, and the
    max (and abs at 9dec370) used for float8 scales) "except every second mm"
    (`meta[mm_count_key] % 2 == 0`), PREFER_RECOMPUTE for every other op. models/llama/model.py
    runs the block's linears as wq, wk, wv, (SDPA), wo, w1, w3, w2: the 1st, 3rd, 5th and 7th
    mm outputs are saved (q, v, the gate w1 and the down projection w2), wk, wo and w3
    recomputed. Kept per token: the block's input (the checkpoint's saved input), those four
    outputs and the SDPA kernel's output and fp32 log-sum-exp (one per head); eager attention
    calls no SDPA kernel, so nothing of it is kept. In the backward the layer's recomputed
    saved set reuses the kept v, attention output and gate (the same tensors), not the
    pre-rotary q or the down projection's output."""
    arch = ctx.arch
    b = ctx.act_bytes
    h = arch.hidden_size
    q = arch.num_attention_heads * arch.head_dim
    kvd = arch.num_kv_heads * arch.head_dim
    from vramtui.ledger.activations import _mlp_width

    width, _ = _mlp_width(arch)
    mm_outputs = [("q", q), ("k", kvd), ("v", kvd), ("o", h)]
    if arch.gated_mlp:
        mm_outputs += [("gate", width), ("up", width), ("down", h)]
    else:
        mm_outputs += [("up", width), ("down", h)]
    saved = mm_outputs[0::2]  # the 1st, 3rd, 5th... mm of the block
    per_token = b * (h + sum(w for _, w in saved))
    say = [f"the block input {h}", "mm outputs " + " + ".join(f"{n} {w}" for n, w in saved)]
    shared = ("v", "gate") if arch.gated_mlp else ("v", "up")  # what the recompute saves again
    reused = sum(w for n, w in saved if n in shared)
    if ctx.spec.runtime.attention != "eager":
        per_token += b * q + 4 * arch.num_attention_heads
        reused += q
        say.append(f"SDPA output {q} + fp32 log-sum-exp x {arch.num_attention_heads} heads")
    total = tokens * per_token
    why = (
        f"torchtitan's op-level selective checkpointing (selective_policy = torchtitan-op, "
        f"{ctx.framework.origin('selective_policy')}): per token {b} B x ({', '.join(say)}) "
        f"= {per_token:,} B, x {tokens:,} tokens = {total:,} B a layer"
    )
    return total, tokens * b * reused, why


def unsloth_kernel_groups(ctx: LedgerContext) -> dict[str, tuple[str, ...]]:
    """The module groups Unsloth's LoRA kernels run (name -> its modules): every module of the
    group adapted, LoRA dropout 0 (the profile's fused_lora_kernels)."""
    from vramtui.ledger.training import lora_modules

    if not settings(ctx).fused_lora_kernels or ctx.spec.task.lora.dropout > 0:
        return {}
    adapted = {m.name for m in lora_modules(ctx)}
    return {g: names for g, names in UNSLOTH_KERNEL_GROUPS if set(names) <= adapted}


# --------------------------------------------------------------------------- attention


def softcap_eager(ctx: LedgerContext) -> bool:
    """Does the framework's own attention compute the scores eagerly because the model
    soft-caps its attention logits (LitGPT with Gemma 2)?"""
    fw = settings(ctx)
    return (
        fw is not None
        and bool(fw.softcap_attention_eager)
        and ctx.arch is not None
        and bool(ctx.arch.config.get("attn_logit_softcapping"))
    )


def expands_kv(ctx: LedgerContext) -> bool:
    """Does the attention keep K and V repeated to every query head (LitGPT, torchtune)?"""
    return bool(settings(ctx).gqa_expand_kv)


# --------------------------------------------------------------------------- bitsandbytes


def old_bnb_saves_inputs(ctx: LedgerContext) -> bool:
    from vramtui.training_profiles import version_before

    return ctx.spec.weights.format in ("nf4", "fp4") and version_before(
        ctx.spec, "bitsandbytes", BNB_4BIT_INPUT_FIX
    )


def old_bnb_layer_bytes(ctx: LedgerContext, tokens: int) -> tuple[int, str]:
    """What bitsandbytes before 0.43.2 keeps per decoder layer: the input of every 4-bit
    linear, one tensor per distinct input (q, k and v read the same one), where no other
    saved tensor is already that input: the normed attention input (hidden), the attention
    output (o_proj's input: flash/sdpa already save it, so nothing more), the normed MLP input
    (hidden), the MLP product (down_proj's input, intermediate)."""
    from vramtui.ledger.activations import _mlp_width

    arch = ctx.arch
    b = ctx.act_bytes
    h = arch.hidden_size
    width, _ = _mlp_width(arch)
    # The framework's own attention hands the output projection a fresh copy: LitGPT's
    # litgpt/model.py CausalSelfAttention.forward `y = y.reshape(B, T, head_size * n_head)` of
    # the transposed attention output, torchtune's `output.transpose(1, 2).contiguous()`;
    # MatMul4Bit keeps that copy too. A transformers model's attention output is already saved.
    own = ctx.framework is not None and ctx.framework.profile.model_code == "own"
    attn_out = arch.num_attention_heads * arch.head_dim if own else 0
    per_token = 2 * h + width + attn_out
    total = tokens * per_token * b
    out_say = (
        f" and the output projection's input, the attention output reshaped into a new tensor by "
        f"{ctx.framework.framework}'s own attention ({attn_out})"
        if own
        else ""
    )
    return total, (
        f"bitsandbytes {ctx.spec.training and dict(ctx.spec.training.versions)['bitsandbytes']} "
        f"< {BNB_4BIT_INPUT_FIX}: MatMul4Bit saves the input of every 4-bit linear "
        f"({BNB_4BIT_INPUT_FIX_REF}): the normed attention and MLP inputs (2 x hidden {h}) and "
        f"down_proj's input ({width}){out_say} x {b} B over {tokens:,} tokens = {total:,} B"
        + ("" if own else " (o_proj's input is the attention output, already saved)")
    )


# --------------------------------------------------------------------------- optimiser


def paged_fraction(t) -> tuple[int, int]:
    """(values in parameters bitsandbytes pages, all trainable values): a paged optimiser
    pages the states of parameters with at least BNB_PAGED_MIN_NUMEL values."""
    paged = sum(r * c * k for r, c, k in t.matrices if r * c >= BNB_PAGED_MIN_NUMEL)
    return paged, t.params


def paged_states_item(ctx: LedgerContext, states: int, t, dist) -> tuple[int, LedgerItem | None]:
    """Split optimiser states into the part in CUDA managed memory (its own item, seen by
    NVML, not by PyTorch's allocator counters) and the rest: (bytes left in the ordinary
    optimiser item, the paged item or None)."""
    paged_values, total = paged_fraction(t)
    if not total or not paged_values:
        return states, None
    paged = states * paged_values // total
    item = LedgerItem(
        key="optimizer.paged",
        name="Optimiser states, paged (CUDA managed memory)",
        category="optimizer",
        status=ESTIMATED,
        basis=(
            f"bitsandbytes paged optimiser: the states of parameters with at least "
            f"{BNB_PAGED_MIN_NUMEL:,} values ({paged_values:,} of {total:,} trainable values) "
            f"are allocated by F.get_paged (cudaMallocManaged), outside PyTorch's allocator: "
            f"{states:,} x {paged_values:,} / {total:,} = {paged:,} B; counted by NVML (and "
            "the process's memory in use), not by torch.cuda.max_memory_allocated or "
            "memory_reserved; under memory pressure the driver pages them to host memory"
        ),
        stages=("forward", "backward", "optimizer_step", "validation", "export"),
        stage_bytes={
            s: paged for s in ("forward", "backward", "optimizer_step", "validation", "export")
        },
        distribution=dist,
        seen_by=DEVICE_COUNTERS,
    )
    return states - paged, item


def largest_gradient(ctx: LedgerContext, t, grad_b: int) -> tuple[int, str]:
    """Optimiser in backward: each parameter is stepped and its gradient freed as soon as it
    is computed; at most about one parameter's gradient exists at a time (the largest)."""
    biggest = max((r * c for r, c, _ in t.matrices), default=0)
    biggest = max(biggest, 1 if t.params else 0)
    return biggest * grad_b, (
        f"optimiser in backward (torchtune optimizer_in_bwd: a post-accumulate-grad hook steps "
        f"each parameter and frees its gradient): never a full set of gradients, at most the "
        f"largest parameter's, {biggest:,} x {grad_b} B"
    )


# --------------------------------------------------------------------------- FSDP


def no_sync_unsharded(ctx: LedgerContext) -> bool:
    """FSDP (FSDP1) accumulation steps under no_sync: every rank keeps unsharded gradients."""
    return (
        bool(settings(ctx).no_sync)
        and ctx.sharding == "fsdp"
        and ctx.layout.data_parallel > 1
        and ctx.spec.batch.grad_accum > 1
    )


def frozen_base_gathered(ctx: LedgerContext) -> bool:
    return (
        ctx.spec.task.kind in ("lora", "qlora")
        and ctx.sharding == "fsdp"
        and ctx.layout.data_parallel > 1
        and settings(ctx).fsdp_frozen_base == "gathered"
    )


def frozen_weight_bytes(items) -> int:
    """Every frozen weight's logical bytes (LoRA: the whole base, with its quant metadata)."""
    return sum(i.max_bytes for i in items if i.category in ("weights", "quant_metadata"))


def fsdp_frozen_items(ctx: LedgerContext, items) -> list[LedgerItem]:
    """LoRA under FSDP1 with frozen units (LitGPT's per-Linear wrap, Fabric): at the end of the
    backward every frozen unit is unsharded again on every rank."""
    if not frozen_base_gathered(ctx):
        return []
    dp = ctx.layout.data_parallel
    frozen = frozen_weight_bytes(items)
    offloaded = params_offloaded(ctx)
    extra = frozen if offloaded else frozen - frozen // dp
    fw = settings(ctx)
    return [
        LedgerItem(
            key="transient.fsdp_frozen_unsharded",
            name="FSDP frozen units unsharded in backward",
            category="transient",
            status=ESTIMATED,
            basis=(
                f"{fw.framework}: fsdp_frozen_base = gathered ({fw.origin('fsdp_frozen_base')}): "
                f"the frozen weights ({frozen:,} B) are all-gathered for the backward and stay "
                f"whole on every rank until its end; "
                + (
                    f"the shards are in host memory (offload_params): all {extra:,} B"
                    if offloaded
                    else f"beside the 1/{dp} shard already counted: "
                    f"{frozen:,} - {frozen:,} / {dp} = {extra:,} B"
                )
            ),
            stages=("backward",),
            stage_bytes={"backward": extra},
            distribution=distribution(ctx.layout, tp_share=Fraction(1, ctx.tp)),
        )
    ]


def frozen_layer_gather(ctx: LedgerContext) -> tuple[int, str] | None:
    """The ZeRO-3/FSDP gathered unit when the base is frozen: one decoder layer's stored
    weights (NF4 + metadata under QLoRA), current + prefetched, and its adapters with their
    gradients; None for a full fine-tune (the trainable layer rule applies)."""
    if ctx.spec.task.kind not in ("lora", "qlora") or ctx.arch is None:
        return None
    from vramtui.ledger.training import trainable
    from vramtui.ledger.weights import weight_items

    layers = max(ctx.arch.num_layers, 1)
    layer_items = [
        i
        for i in weight_items(ctx)
        if i.category in ("weights", "quant_metadata")
        and "embedding" not in i.key
        and "lm_head" not in i.key
    ]
    stored = sum(i.max_bytes for i in layer_items) // layers
    t = trainable(ctx)
    a = adapter_bytes(ctx)
    adapters = (t.params // layers) * a if t else 0
    gather = 2 * (stored + 2 * adapters)
    return gather, (
        f"the current and the prefetched decoder layer gathered in full: 2 x (one layer's "
        f"frozen weights as stored, {stored:,} B, no gradient + its adapters {adapters:,} B "
        f"and their gradients x 2) = {gather:,} B"
    )


# --------------------------------------------------------------------------- LM head


def quantises_head(ctx: LedgerContext) -> bool:
    """Is the LM head held in 4 bits (a framework that quantises every nn.Linear, LitGPT
    through Fabric's BitsandbytesPrecision) rather than left in the compute dtype (the
    Hugging Face bitsandbytes integration skips it)?"""
    fw = settings(ctx) if ctx.is_training else None
    from vramtui.ledger.formats import BNB4_FORMATS

    return (
        fw is not None
        and bool(fw.quantizes_lm_head)
        and ctx.spec.weights.format in BNB4_FORMATS
        and not ctx.spec.weights.group_overrides.get("lm_head")
    )


def dequantised_head_items(ctx: LedgerContext) -> list[LedgerItem]:
    """bitsandbytes' MatMul4Bit dequantises the whole 4-bit weight for each call, forward and
    backward (F.dequantize_4bit(B, quant_state).to(A.dtype)); for a 4-bit LM head that is a
    vocabulary x hidden matrix in the compute dtype, alive while each chunk of the head runs,
    beside every chunk's logits at the end of the forward and at the loss backward."""
    if not quantises_head(ctx) or ctx.arch is None:
        return []
    vocab, hidden = ctx.arch.vocab_size, ctx.arch.hidden_size
    b = ctx.act_bytes
    # Fabric's _Linear4bit.quantize quantises `weight.to(dtype=torch.half)`, so the quant
    # state's dtype is fp16: dequantize_4bit returns fp16 and `.to(A.dtype)` copies it to the
    # compute dtype while the fp16 one is still alive (a no-op copy for fp16 compute).
    per_value = 2 + (b if b != 2 or ctx.compute_dtype != "fp16" else 0)
    total = vocab * hidden * per_value
    from vramtui.ledger.weights import _group_distribution

    fw = settings(ctx)
    return [
        LedgerItem(
            key="transient.dequantised_head",
            name="4-bit LM head dequantised",
            category="transient",
            status=ESTIMATED,
            basis=(
                f"{fw.framework}: the LM head is 4-bit ({fw.origin('quantizes_lm_head')}); "
                "bitsandbytes MatMul4Bit.forward and .backward dequantise the whole weight for "
                "each chunk's matmul, F.dequantize_4bit(B, quant_state).to(A.dtype): fp16 (the "
                "quant state's dtype: lightning/fabric/plugins/precision/bitsandbytes.py "
                "_Linear4bit.quantize quantises weight.to(dtype=torch.half)) and its "
                f"{ctx.compute_dtype} copy at once: vocabulary {vocab:,} x hidden {hidden:,} x "
                f"{per_value} B = {total:,} B, beside the logits at the end of the forward and in "
                "the loss backward"
            ),
            stages=("forward", "backward"),
            stage_bytes={"forward": total, "backward": total},
            distribution=_group_distribution(ctx, "lm_head", None),
        )
    ]


def unties_head(ctx: LedgerContext) -> bool:
    """Does the framework's own model code hold a separate LM head where the Hugging Face
    model ties it to the embedding (LitGPT)?"""
    fw = settings(ctx)
    return (
        fw is not None
        and bool(fw.unties_lm_head)
        and ctx.arch is not None
        and bool(ctx.arch.tie_word_embeddings)
    )


def untied_head_shape(ctx: LedgerContext) -> tuple[int, int] | None:
    """(out, in) of the untied LM head copy, or None when the framework keeps it tied."""
    if not unties_head(ctx):
        return None
    return ctx.arch.vocab_size, ctx.arch.hidden_size


def untied_head_items(ctx: LedgerContext) -> list[LedgerItem]:
    """The LM head copy a framework's own model holds beside the embedding of a tied model.

    LitGPT's GPT has its own nn.Linear lm_head and its checkpoint converter copies the
    embedding into it: one more vocabulary x hidden matrix, in the model's dtype, or in 4 bits
    where the framework quantises the head (quantises_head)."""
    shape = untied_head_shape(ctx)
    if shape is None:
        return []
    from vramtui.ledger.formats import BNB4_FORMATS, linear_bytes
    from vramtui.ledger.weights import _group_distribution

    vocab, hidden = shape
    fmt = ctx.spec.weights.format
    if fmt in BNB4_FORMATS and quantises_head(ctx):
        fb = linear_bytes(fmt, hidden, vocab, False, ctx.quant)
        total, how = fb.total_bytes, f"{fmt} with its quantisation metadata"
    else:
        total, how = vocab * hidden * ctx.act_bytes, f"{ctx.act_bytes} B per value"
    fw = settings(ctx)
    stages = tuple(s for s in ctx.stages)
    return [
        LedgerItem(
            key="weights.lm_head_untied",
            name="LM head, untied copy",
            category="weights",
            status=ESTIMATED,
            basis=(
                f"{fw.framework}: the Hugging Face model ties its LM head to the embedding, the "
                f"framework's own model holds it apart ({fw.origin('unties_lm_head')}): vocabulary "
                f"{vocab:,} x hidden {hidden:,} = {vocab * hidden:,} values, {how} = {total:,} B"
            ),
            stages=stages,
            stage_bytes={s: total for s in stages},
            distribution=_group_distribution(ctx, "lm_head", None),
        )
    ]


# --------------------------------------------------------------------------- FSDP root unit

# The weight groups an FSDP root unit holds when the wrap policy wraps the decoder blocks only
# (the final norm is in the root too: hidden values, a few KB, not itemised).
ROOT_GROUPS = ("embedding", "lm_head")
FSDP_ROOT_STAGES = ("forward", "backward", "validation")


def params_offloaded(ctx: LedgerContext) -> bool:
    """Parameter CPU offload under FSDP or ZeRO-3 (FSDP CPUOffload(offload_params=True),
    DeepSpeed offload_param): every parameter, gradient and optimiser-state shard in host
    memory, each unit copied to the GPU and gathered for its compute."""
    fw = settings(ctx)
    return (
        fw is not None
        and bool(fw.offload_params)
        and ctx.sharding in ("fsdp", "zero3")
        and ctx.spec.task.kind != "inference"
    )


def _root_group(item) -> str | None:
    if item.key == "weights.lm_head_untied":
        return "lm_head"
    for group in ROOT_GROUPS:
        if item.key.startswith(f"weights.{group}."):
            return group
    return None


def fsdp_root_items(ctx: LedgerContext, items) -> list[LedgerItem]:
    """The FSDP root unit kept whole on every rank from the forward through the backward.

    FSDP1's _post_forward_reshard frees nothing for the root (`not state._is_root`), FSDP2's
    root is not resharded after the forward (post_forward_mesh_info = None); with a wrap policy
    that wraps the decoder blocks, the root holds the embedding, the final norm and the LM head
    (and a framework's untied head copy). Beside the 1/DP shard the weight items count:
    bytes x (1 - 1/DP) more; all of it when the parameters are offloaded to the CPU."""
    fw = settings(ctx)
    if (
        fw is None
        or not fw.fsdp_root_gathered
        or ctx.sharding != "fsdp"
        or ctx.arch is None
        or not ctx.is_training
    ):
        return []
    dp = ctx.layout.data_parallel
    offloaded = params_offloaded(ctx)
    if dp <= 1 and not offloaded:
        return []
    # LoRA under frozen units kept gathered (fsdp_frozen_items): the backward already holds
    # every frozen weight whole, the root's included.
    stages = tuple(
        s for s in FSDP_ROOT_STAGES if not (s == "backward" and frozen_base_gathered(ctx))
    )
    by_group: dict[str, int] = {}
    for item in items:
        group = _root_group(item)
        if group is not None and item.category == "weights":
            by_group[group] = by_group.get(group, 0) + item.max_bytes
    out = []
    for group, whole in by_group.items():
        extra = whole if offloaded else whole - whole // dp
        if not extra:
            continue
        how = (
            f"the whole {whole:,} B (the shards are in host memory: offload_params)"
            if offloaded
            else f"{whole:,} - {whole:,} / {dp} = {extra:,} B beside the 1/{dp} shard already "
            "counted"
        )
        out.append(
            LedgerItem(
                key=f"transient.fsdp_root_unsharded.{group}",
                name=f"FSDP root unit unsharded: {'embedding' if group == 'embedding' else 'LM head'}",
                category="transient",
                status=ESTIMATED,
                basis=(
                    f"fsdp_root_gathered ({fw.origin('fsdp_root_gathered')}): the root unit's "
                    f"{'embedding' if group == 'embedding' else 'LM head'} weights are gathered "
                    "at the start of the forward and stay whole on every rank until the end of "
                    f"the backward: {how}"
                ),
                stages=stages,
                stage_bytes={s: extra for s in stages},
                distribution=distribution(
                    ctx.layout,
                    where="first" if group == "embedding" else "last",
                    tp_share=Fraction(1, ctx.tp),
                ),
            )
        )
    return out


# --------------------------------------------------------------------------- parameter offload

# What parameter offload moves to host memory: the parameter shards (weights and their
# quantisation metadata, adapters, fp32 master copies), the gradient shards (FSDP1 copies each
# reduce-scattered shard to flat_param._cpu_grad) and the optimiser (its states and its step
# run on the CPU parameters).
OFFLOADED_CATEGORIES = ("weights", "quant_metadata", "adapter", "master_weights", "gradients")
OFFLOADED_KEYS = ("optimizer", "optimizer.paged", "transient.optimizer_step")


def offload_param_items(ctx: LedgerContext, items) -> list:
    """Items with parameter offload applied: the offloaded ones hold 0 B on the GPU (kept in
    the ledger, the basis says where they are)."""
    if not params_offloaded(ctx):
        return list(items)
    from dataclasses import replace

    fw = settings(ctx)
    out = []
    for item in items:
        if item.category in OFFLOADED_CATEGORIES or item.key in OFFLOADED_KEYS:
            out.append(
                replace(
                    item,
                    basis=item.basis
                    + (
                        f"; in host memory, 0 B on the GPU: parameter offload "
                        f"({fw.origin('offload_params')}; FSDP CPUOffload(offload_params=True) "
                        "keeps each flat parameter's shard and its gradient shard (_cpu_grad) "
                        "on the CPU, where the optimiser steps; each unit is copied to the GPU "
                        "and all-gathered for its compute)"
                    ),
                    stage_bytes={s: 0 for s in item.stages},
                )
            )
        else:
            out.append(item)
    return out
