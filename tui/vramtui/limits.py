"""The largest value vramtui accepts for every user-controlled size, in one place.

The spec parser, the app's form, the command-line flags and the `config.json` reader all check
against these, and name the limit in their message. Each limit is far above any real workload
and low enough that the work a value causes stays bounded (no hangs, no overflows).
"""

from __future__ import annotations

import math

# Placement
MAX_GPUS = 100_000  # placement.gpus, --gpus
MAX_PARALLEL = MAX_GPUS  # tensor_parallel, pipeline_parallel (never more than the GPUs)

# Workload sizes
MAX_PARAMS = 10**15  # model.params, --params: a quadrillion parameters
MAX_SEQ_TOKENS = 10_000_000  # lengths.seq_len, prompt_tokens, generated_tokens
MAX_BATCH = 1_000_000  # batch.micro_batch, batch.concurrency
MAX_GRAD_ACCUM = 1_000_000  # batch.grad_accum
MAX_LORA_RANK = 1_000_000  # task.lora.rank
MAX_LORA_ALPHA = 10**9  # task.lora.alpha
MAX_KV_BLOCK_TOKENS = 1_000_000  # runtime.kv_block_tokens
MAX_GROUP_SIZE = 1_000_000  # weights.group_size

# Bytes and memory
MAX_BYTES = 2**60  # any figure in bytes (1 EiB): measured bytes, cuda_context_bytes...
MAX_GIB = 2**30  # any figure in GiB (1 EiB): headroom.reserve_gib, --headroom-gib
MAX_BITS = 64  # --bits (simple mode)

# Campaign
MAX_DAYS = 3_650  # campaign.days, --days: ten years
MAX_MONEY = 10**12  # campaign.budget

# Measured dimensions and counts (anything else that is a plain number)
MAX_COUNT = 10**15

# Model architecture (config.json)
MAX_LAYERS = 10_000  # num_hidden_layers
MAX_HIDDEN = 1_000_000  # hidden_size, intermediate_size, head_dim, lora ranks...
MAX_HEADS = 100_000  # num_attention_heads, num_key_value_heads
MAX_VOCAB = 100_000_000  # vocab_size
MAX_POSITIONS = MAX_SEQ_TOKENS * 100  # max_position_embeddings (some configs say 10^8+)
MAX_EXPERTS = 100_000  # num_local_experts, experts per token

# Feed replay: the longest pause between two recorded snapshots that is replayed as a wait
MAX_REPLAY_GAP_S = 3600.0
MAX_POLL_INTERVAL_S = 3600.0  # watch --interval, --process-interval


def is_finite_number(value: object) -> bool:
    """An int or a finite float (not bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not (isinstance(value, float) and not math.isfinite(value))


def show_number(value: float) -> str:
    """A number for a message, short even when huge (no overflow, no 4,300-digit string)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**16:
        if abs(value) < 10**300:
            return f"{float(value):.6g}"
        return "a negative number of over 300 digits" if value < 0 else "a number of over 300 digits"
    if isinstance(value, float):
        return f"{value:.6g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def above_limit(what: str, value: float, limit: float, fix: str = "") -> str:
    """The one-line message for a value above a limit of this module."""
    fix = fix or f"use {limit:,} or less"
    return f"{what} = {show_number(value)} is above vramtui's limit of {limit:,}; {fix}"
