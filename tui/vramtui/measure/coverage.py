"""Does a measurement validate the required workload? Dimensions executed versus required.

The seed: "If the program truncates data, keeps fewer tokens or skips part of the corpus, a
passing case does not validate the announced workload: record the dimensions actually
executed." A figure measured at a smaller batch, a shorter length or on part of the corpus is
kept and shown, flagged "does not validate the required workload", and never replaces the
estimate made for the required dimensions.

Some figures do not depend on the batch or the length (the weights, the optimiser states, the
CUDA context, anything read at load): those validate their item whatever the dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass

# Categories whose bytes do not depend on batch, length or concurrency.
DIMENSION_FREE_CATEGORIES = frozenset(
    {"weights", "quant_metadata", "adapter", "master_weights", "gradients", "optimizer", "buffers"}
)
DIMENSION_FREE_ITEMS = frozenset(
    # CUDA graphs are captured once for the engine's own batch sizes, not the workload's.
    {"overhead.cuda_context", "overhead.nccl", "transient.load", "cuda_graphs"}
)

DOES_NOT_VALIDATE = "does not validate the required workload"


@dataclass(frozen=True)
class Coverage:
    validates: bool  # the figure stands for the required workload
    dimension_free: bool  # the figure does not depend on batch or length
    shortfalls: tuple[str, ...] = ()  # why not, one phrase each
    executed: str = ""  # the dimensions executed, in words

    @property
    def note(self) -> str:
        if self.dimension_free:
            return "does not depend on batch or length"
        if self.validates:
            return f"validates the required workload ({self.executed})"
        return f"{DOES_NOT_VALIDATE}: " + "; ".join(self.shortfalls)


def required_dims(spec) -> dict[str, int]:
    """Sequences per step and tokens per sequence the spec requires."""
    if spec.is_training:
        return {"batch": spec.batch.micro_batch or 0, "seq_len": spec.lengths.seq_len or 0}
    return {"batch": spec.batch.concurrency or 0, "seq_len": spec.lengths.context_tokens}


def required_tokens(spec) -> int:
    """Tokens the KV cache must hold at once for the required workload (inference)."""
    d = required_dims(spec)
    return d["batch"] * d["seq_len"]


def executed_dims(m) -> dict[str, float]:
    """A measurement's dimensions normalised to batch and seq_len (others kept as recorded)."""
    dims = dict(m.dims)
    out: dict[str, float] = {}
    for name in ("batch", "micro_batch", "concurrency"):
        if name in dims:
            out["batch"] = dims[name]
            break
    if "seq_len" in dims:
        out["seq_len"] = dims["seq_len"]
    elif "prompt_tokens" in dims:
        out["seq_len"] = dims["prompt_tokens"] + dims.get("generated_tokens", 0)
    if "corpus_fraction" in dims:
        out["corpus_fraction"] = dims["corpus_fraction"]
    return out


def describe_dims(dims) -> str:
    """Dimensions in words: '8 x 4,096 tokens', 'batch 8', 'not recorded'."""
    d = dict(dims)
    parts = []
    batch, seq = d.get("batch"), d.get("seq_len")
    if batch is not None and seq is not None:
        parts.append(f"{_n(batch)} x {_n(seq)} tokens")
    elif batch is not None:
        parts.append(f"batch {_n(batch)}")
    elif seq is not None:
        parts.append(f"{_n(seq)} tokens per sequence")
    for name, value in sorted(d.items()):
        if name in ("batch", "seq_len"):
            continue
        if name == "corpus_fraction":
            parts.append(f"{value:.0%} of the corpus")
        else:
            parts.append(f"{name.replace('_', ' ')} {_n(value)}")
    return ", ".join(parts) or "dimensions not recorded"


def _n(x) -> str:
    return f"{x:,}" if isinstance(x, int) or float(x).is_integer() else f"{x:,g}"


def _is_dimension_free(m, categories: dict[str, str]) -> bool:
    if m.stage == "load":
        return True
    if m.quantity == "item" and m.item:
        keys = m.item.split("+")
        return all(
            k in DIMENSION_FREE_ITEMS
            or k in DIMENSION_FREE_CATEGORIES
            or categories.get(k) in DIMENSION_FREE_CATEGORIES
            for k in keys
        )
    return False


def coverage(m, spec, categories: dict[str, str] | None = None) -> Coverage:
    """Whether measurement `m` validates `spec`'s required workload, and if not, why.

    `categories` maps ledger item keys to their category (to tell dimension-free items).
    """
    categories = categories or {}
    if m.error:
        return Coverage(
            validates=False,
            dimension_free=False,
            shortfalls=(f"the stage failed ({m.error.splitlines()[0][:80]})",),
            executed=describe_dims(executed_dims(m)),
        )
    if m.quantity in ("kv_cache_tokens", "max_concurrency", "gpu_blocks"):
        return _count_coverage(m, spec)
    if _is_dimension_free(m, categories):
        return Coverage(validates=True, dimension_free=True, executed=describe_dims(m.dims))
    if m.quantity == "kv_cache_pool":
        # A pre-allocated pool: its size says what the engine set aside, not what the
        # workload needs; the token counts validate the workload.
        return Coverage(
            validates=False,
            dimension_free=False,
            shortfalls=("a pre-allocated pool (capacity, not need): see the KV cache tokens",),
            executed=describe_dims(m.dims),
        )
    executed = executed_dims(m)
    required = required_dims(spec)
    shortfalls = []
    if not executed:
        shortfalls.append("the dimensions executed were not recorded")
    else:
        for name, label in (("batch", _batch_label(spec)), ("seq_len", "tokens per sequence")):
            want = required[name]
            got = executed.get(name)
            if got is None:
                shortfalls.append(f"{label} not recorded")
            elif got < want:
                shortfalls.append(f"{label} {_n(got)} < required {_n(want)}")
        fraction = executed.get("corpus_fraction")
        if fraction is not None and fraction < 1:
            shortfalls.append(f"only {fraction:.0%} of the corpus was run")
    return Coverage(
        validates=not shortfalls,
        dimension_free=False,
        shortfalls=tuple(shortfalls),
        executed=describe_dims(executed),
    )


def _batch_label(spec) -> str:
    return "micro-batch" if spec.is_training else "concurrent sequences"


def _count_coverage(m, spec) -> Coverage:
    """vLLM's token capacity against the tokens the required workload holds at once."""
    if spec.is_training:
        return Coverage(
            validates=False,
            dimension_free=False,
            shortfalls=("a serving engine's KV capacity does not apply to a training spec",),
        )
    need_tokens = required_tokens(spec)
    context = spec.lengths.context_tokens
    dims = dict(m.dims)
    shortfalls = []
    max_len = dims.get("max_model_len") or dims.get("tokens_per_request")
    if max_len is not None and max_len < context:
        shortfalls.append(
            f"max_model_len {_n(max_len)} < required {_n(context)} tokens per sequence: the "
            "engine would refuse the required length"
        )
    if m.quantity == "kv_cache_tokens":
        if m.value < need_tokens:
            shortfalls.append(
                f"{_n(int(m.value))} KV cache tokens < {_n(need_tokens)} required "
                f"({_n(required_dims(spec)['batch'])} x {_n(context)})"
            )
    elif m.quantity == "max_concurrency":
        per_request = dims.get("tokens_per_request")
        if per_request is None:
            shortfalls.append("tokens per request not recorded")
        else:
            capacity = m.value * per_request
            if capacity < need_tokens:
                shortfalls.append(
                    f"{m.value:g}x at {_n(per_request)} tokens = {_n(int(capacity))} tokens < "
                    f"{_n(need_tokens)} required"
                )
    else:  # gpu_blocks: tokens only with the block size
        block = dims.get("block_size")
        if block is None:
            shortfalls.append("the block size was not recorded: blocks cannot be read as tokens")
        elif m.value * block < need_tokens:
            shortfalls.append(
                f"{_n(int(m.value))} blocks x {_n(block)} tokens < {_n(need_tokens)} required"
            )
    return Coverage(
        validates=not shortfalls,
        dimension_free=False,
        shortfalls=tuple(shortfalls),
        executed=describe_dims(m.dims),
    )
