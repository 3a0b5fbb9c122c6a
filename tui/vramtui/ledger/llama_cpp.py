"""llama.cpp's memory: weights by offloaded layer, its KV cache and its compute buffer.

The rules follow llama.cpp's source (ggml-org/llama.cpp, 2025-2026):

- Layer placement (src/llama-model.cpp, load_tensors): `i_gpu_start = max(n_layer + 1 -
  n_gpu_layers, 0)`; block il goes to the GPU when il >= i_gpu_start, and the output layer
  (output.weight, output_norm) is slot n_layer, so it is offloaded first, by any n_gpu_layers
  >= 1. The input layer (token_embd) always stays on the CPU ("there is very little benefit to
  offloading the input layer"). A model without output.weight (tied embeddings) loads
  token_embd a second time as its output (TENSOR_DUPLICATED), on the output layer's device.
- Context (src/llama-context.cpp, llama_context::llama_context): n_ctx is padded to a multiple
  of 256; without --kv-unified each of the n_seq_max slots gets its own stream of
  GGML_PAD(n_ctx / n_seq_max, 256) cells. n_batch = min(n_ctx, n_batch), n_ubatch =
  min(n_batch, n_ubatch).
- KV cache (src/llama-kv-cache.cpp, llama_kv_cache::llama_kv_cache): per layer with a cache,
  K = ggml_new_tensor_3d(type_k, n_embd_k_gqa, kv_size, n_stream) and the same for V, on the
  layer's device (offload_kqv, on by default): bytes = cells x n_embd_gqa / block x type size.
- Compute buffer: the worst-case graph reserved for min(n_ctx, n_ubatch) tokens with every
  token an output (llama-context.cpp, graph_reserve(n_tokens, n_seqs, n_tokens)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from vramtui.ledger.context import LedgerContext
from vramtui.ledger.formats import GGUF_BLOCKS
from vramtui.ledger.items import ESTIMATED, UNKNOWN, LedgerItem
from vramtui.ledger.placement import distribution, layer_fractions
from vramtui.unit_text import Figure, UnitText

CTX_PAD = 256  # llama-context.cpp: cparams.n_ctx = GGML_PAD(cparams.n_ctx, 256)
F32 = 4  # llama.cpp computes activations, scores and logits in F32

_GROUP_LABELS = {
    "embedding": "token_embd (input embedding)",
    "lm_head": "output (lm_head)",
    "attention": "attention",
    "mlp": "MLP",
    "experts": "routed experts",
    "router": "MoE router",
    "norm": "norms",
    "other": "other",
}


def is_llama_cpp(spec) -> bool:
    return (spec.runtime.engine or "") == "llama.cpp" and spec.task.kind == "inference"


def _pad(n: int, to: int = CTX_PAD) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class Offload:
    """Which layers llama.cpp puts on the GPU for -ngl n_gpu_layers."""

    n_layer: int
    n_gpu_layers: int  # as given: -1 = all
    i_gpu_start: int

    @classmethod
    def of(cls, n_layer: int, n_gpu_layers: int) -> Offload:
        ngl = n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers
        return cls(n_layer, n_gpu_layers, max(n_layer + 1 - ngl, 0))

    def layer_on_gpu(self, il: int) -> bool:
        return il >= self.i_gpu_start

    @property
    def layers_on_gpu(self) -> int:
        return self.n_layer - min(self.i_gpu_start, self.n_layer)

    @property
    def output_on_gpu(self) -> bool:
        return self.n_layer >= self.i_gpu_start

    def describe(self) -> str:
        ngl = "-1 (all)" if self.n_gpu_layers < 0 else self.n_gpu_layers
        out = "with" if self.output_on_gpu else "without"
        return (
            f"n_gpu_layers {ngl}: {self.layers_on_gpu} of {self.n_layer} layers on the GPU, "
            f"{out} the output layer; token_embd stays on the CPU"
        )


def offload_of(ctx: LedgerContext) -> Offload:
    lc = ctx.spec.llama_cpp
    ngl = lc.n_gpu_layers if lc is not None else -1
    return Offload.of(ctx.arch.num_layers, ngl)


def _all_on_gpu(n_layer: int) -> Offload:
    return Offload(n_layer, -1, 0)


# --- weights -------------------------------------------------------------------------------------


def gguf_weight_items(ctx: LedgerContext, llama_cpp: bool) -> list[LedgerItem]:
    """Exact stored bytes per group from the GGUF header; on the GPU: what llama.cpp offloads
    (every tensor for another engine)."""
    from vramtui.ledger.weights import _layer_group_distribution
    from vramtui.models.gguf_file import _module_of

    model = ctx.checkpoint
    arch = ctx.arch
    off = offload_of(ctx) if llama_cpp else _all_on_gpu(arch.num_layers)
    gpu: dict[str, int] = {}
    host: dict[str, int] = {}
    types: dict[str, dict[str, int]] = {}
    embd_bytes = 0
    for t in model.tensors:
        _, _, group = _module_of(t)
        if t.layer is not None:
            on_gpu = off.layer_on_gpu(t.layer)
        elif group == "embedding":
            on_gpu = not llama_cpp
            embd_bytes += t.nbytes
        else:  # output.weight, output_norm and other whole-model tensors: the output layer
            on_gpu = off.output_on_gpu
        side = gpu if on_gpu else host
        side[group] = side.get(group, 0) + t.nbytes
        gpu.setdefault(group, 0)
        types.setdefault(group, {})
        types[group][t.type_name] = types[group].get(t.type_name, 0) + t.nbytes
    tied_copy = llama_cpp and arch.tie_word_embeddings and off.output_on_gpu and embd_bytes
    if tied_copy:
        gpu["lm_head"] = gpu.get("lm_head", 0) + embd_bytes
        types.setdefault("lm_head", {})
    where = model.describe()
    stages = ctx.stages
    items = []
    for group, nbytes in gpu.items():
        on_host = host.get(group, 0)
        mix = ", ".join(
            f"{k} {v:,} B" for k, v in sorted(types[group].items(), key=lambda kv: -kv[1])
        )
        parts = [f"exact stored bytes read from the {where}: {mix}"]
        if group == "lm_head" and tied_copy:
            parts = [
                (
                    f"no output.weight (tied embeddings): llama.cpp loads token_embd again as the "
                    f"output layer on the GPU, {embd_bytes:,} B (exact, from the GGUF header)"
                )
            ]
        if llama_cpp:
            parts.append(f"placement estimated by llama.cpp's rules ({off.describe()})")
            if on_host:
                parts.append(
                    UnitText(
                        f"{on_host:,} B (",
                        Figure(on_host, gib_in_bytes_mode=True),
                        ") stay in host RAM, not counted here",
                    )
                )
        label = "/".join(sorted(types[group], key=lambda k: -types[group][k])[:3]) or "GGUF"
        items.append(
            LedgerItem(
                key=f"weights.{group}.gguf",
                name=f"Weights: {_GROUP_LABELS.get(group, group)} (GGUF {label}, as stored)",
                category="weights",
                status=ESTIMATED,
                basis=UnitText("; ").join(parts),
                stages=stages,
                stage_bytes={s: nbytes for s in stages},
                distribution=_layer_group_distribution(ctx, group),
            )
        )
    return items


def offload_weight_items(ctx: LedgerContext, items: list[LedgerItem]) -> list[LedgerItem]:
    """Weight items worked out from the architecture (no GGUF header), split as llama.cpp
    offloads them: the GPU's share of each, the rest in host RAM."""
    from vramtui.ledger.weights import _per_layer_params

    arch = ctx.arch
    off = offload_of(ctx)
    out = []
    embd = 0
    for item in items:
        parts = item.key.split(".")
        group = parts[1] if len(parts) > 2 else "attention"
        if group == "embedding":
            share = Fraction(0)
            embd += item.max_bytes
        elif group == "lm_head":
            share = Fraction(1 if off.output_on_gpu else 0)
        else:
            per_layer = (
                _per_layer_params(ctx, group)
                if group in ("experts", "router", "mlp")
                else [1] * arch.num_layers
            )
            total = sum(per_layer)
            on = sum(w for i, w in enumerate(per_layer) if off.layer_on_gpu(i))
            share = Fraction(on, total) if total else Fraction(0)
        gpu = {s: math.ceil(b * share) for s, b in item.stage_bytes.items()}
        host = item.max_bytes - max(gpu.values(), default=0)
        extra = f"; llama.cpp placement ({off.describe()})"
        if host:
            extra += f": {host:,} B in host RAM, not counted here"
        out.append(replace(item, stage_bytes=gpu, basis=item.basis + extra))
    if arch.tie_word_embeddings and off.output_on_gpu and embd:
        stages = ctx.stages
        out.append(
            LedgerItem(
                key="weights.lm_head.tied",
                name="Weights: output (token_embd loaded again, tied embeddings)",
                category="weights",
                status=ESTIMATED,
                basis=f"tied embeddings: llama.cpp loads token_embd a second time as the output "
                f"layer on the GPU (TENSOR_DUPLICATED): {embd:,} B",
                stages=stages,
                stage_bytes={s: embd for s in stages},
                distribution=distribution(ctx.layout, where="last"),
            )
        )
    return out


def host_weight_bytes(ctx: LedgerContext) -> int:
    """Weight bytes llama.cpp keeps in host RAM (GGUF models only, else 0)."""
    model = ctx.checkpoint
    if not getattr(model, "is_gguf", False):
        return 0
    off = offload_of(ctx)
    total = 0
    for t in model.tensors:
        if t.layer is not None:
            total += 0 if off.layer_on_gpu(t.layer) else t.nbytes
        elif t.name.startswith("token_embd") or not off.output_on_gpu:
            total += t.nbytes
    return total


# --- KV cache ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextSize:
    requested: int  # n_ctx as given (or the spec's default)
    n_ctx: int  # after llama.cpp's padding
    slots: int
    streams: int
    cells_per_stream: int
    tokens: int  # the worst-case graph's tokens: min(n_ctx, n_batch, n_ubatch)

    @property
    def cells(self) -> int:
        return self.cells_per_stream * self.streams


def context_size(spec) -> ContextSize:
    lc = spec.llama_cpp
    conc = spec.batch.concurrency
    requested = lc.context(conc, spec.lengths.context_tokens)
    slots = lc.slots(conc)
    n_ctx = _pad(requested)
    if lc.kv_unified or slots == 1:
        streams, per = 1, n_ctx
    else:
        streams, per = slots, _pad(n_ctx // slots)
        n_ctx = per * slots
    n_batch = min(n_ctx, lc.n_batch)
    tokens = min(n_batch, lc.n_ubatch)
    return ContextSize(requested, n_ctx, slots, streams, per, tokens)


def _row_bytes(n_embd: int, cache_type: str) -> int | None:
    block, size = GGUF_BLOCKS[cache_type.upper()]
    if n_embd % block:
        return None
    return n_embd // block * size


def _kv_per_layer(ctx: LedgerContext) -> tuple[list[tuple[int, int]] | None, str]:
    """(n_embd_k_gqa, n_embd_v_gqa) per layer (0, 0 for a layer without a cache), or None and
    why the cache cannot be worked out."""
    arch = ctx.arch
    if arch.kv_unknown:
        return None, arch.kv_unknown
    if arch.mla is not None:
        return None, (
            "multi-head latent attention: llama.cpp's cache layout for it is not modelled here"
        )
    kinds = arch.layer_attention or ("full",) * arch.num_layers
    if any(k == "sliding" for k in kinds):
        return None, (
            "llama.cpp sizes the sliding-window layers' cache by its own rules "
            "(n_swa, --swa-full), not modelled here"
        )
    if getattr(ctx.checkpoint, "is_gguf", False):
        from vramtui.models.gguf_file import kv_layout

        return kv_layout(ctx.checkpoint), "from the GGUF header"
    per = arch.num_kv_heads * arch.head_dim
    return [(0, 0) if k == "none" else (per, per) for k in kinds], "from the architecture"


def kv_cache_items(ctx: LedgerContext) -> list[LedgerItem]:
    from vramtui.ledger.kv import kv_items

    if ctx.arch is None:
        return kv_items(ctx)  # the bare-count "unknown" item
    spec = ctx.spec
    stages = ("prefill", "decode")
    layers, why = _kv_per_layer(ctx)
    ctk, ctv = spec.llama_cpp.cache_types(spec.runtime.kv_cache_dtype)
    name = f"KV cache (llama.cpp, K {ctk}, V {ctv})"
    if layers is None:
        return [_unknown("kv_cache", name, "kv_cache", f"not itemised: {why}", stages)]
    off = offload_of(ctx)
    size = context_size(spec)
    rows = []
    for il, (k, v) in enumerate(layers):
        kb, vb = _row_bytes(k, ctk), _row_bytes(v, ctv)
        if kb is None or vb is None:
            return [
                _unknown(
                    "kv_cache",
                    name,
                    "kv_cache",
                    f"layer {il}'s K/V rows ({k}, {v} values) are not whole blocks of {ctk}/"
                    f"{ctv}; llama.cpp refuses that cache type for this model",
                    stages,
                )
            ]
        rows.append(kb + vb)
    gpu_rows = [r if off.layer_on_gpu(i) else 0 for i, r in enumerate(rows)]
    gpu = size.cells * sum(gpu_rows)
    host = size.cells * sum(rows) - gpu
    with_kv = sum(1 for k, _ in layers if k)
    k0, v0 = next(((k, v) for k, v in layers if k), (0, 0))
    kb0, vb0 = _row_bytes(k0, ctk), _row_bytes(v0, ctv)
    cells = (
        f"n_ctx {size.requested:,} padded to {size.n_ctx:,} cells"
        if size.streams == 1
        else f"n_ctx {size.requested:,} over {size.slots} slots: {size.streams} streams x "
        f"GGML_PAD(n_ctx / {size.slots}, 256) = {size.cells_per_stream:,} cells = "
        f"{size.cells:,} cells"
    )
    basis = [
        f"{cells} (the whole context is allocated at start-up, for every slot together)",
        (
            f"per layer per cell: K {k0} values ({ctk}) = {kb0} B + V {v0} values ({ctv}) = "
            f"{vb0} B, shapes {why}"
        ),
        UnitText(
            f"{size.cells:,} cells x {sum(gpu_rows):,} B over the {off.layers_on_gpu} GPU layer(s)"
            f" of {with_kv} with a cache = {gpu:,} B (",
            Figure(gpu, gib_in_bytes_mode=True),
            ")",
        ),
    ]
    if host:
        basis.append(f"{host:,} B for the CPU layers stay in host RAM, not counted here")
    dist = distribution(ctx.layout, stage_fractions=layer_fractions(gpu_rows, ctx.pp))
    return [
        LedgerItem(
            key="kv_cache",
            name=name,
            category="kv_cache",
            status=ESTIMATED,
            basis=UnitText("; ").join(basis),
            stages=stages,
            stage_bytes={s: gpu for s in stages},
            distribution=dist,
        )
    ]


def host_kv_bytes(ctx: LedgerContext) -> int:
    layers, _ = _kv_per_layer(ctx)
    if layers is None:
        return 0
    spec = ctx.spec
    ctk, ctv = spec.llama_cpp.cache_types(spec.runtime.kv_cache_dtype)
    off = offload_of(ctx)
    size = context_size(spec)
    total = 0
    for il, (k, v) in enumerate(layers):
        kb, vb = _row_bytes(k, ctk), _row_bytes(v, ctv)
        if kb is None or vb is None:
            return 0
        if not off.layer_on_gpu(il):
            total += size.cells * (kb + vb)
    return total


# --- compute buffer ------------------------------------------------------------------------------


def compute_buffer_item(ctx: LedgerContext) -> LedgerItem:
    stages = ("prefill", "decode")
    name = "Compute buffer (llama.cpp worst-case graph)"
    arch = ctx.arch
    if arch is None:
        return _unknown(
            "buffers.compute",
            name,
            "activations",
            "a bare parameter count has no layer shapes to size the graph with",
            stages,
        )
    spec = ctx.spec
    lc = spec.llama_cpp
    off = offload_of(ctx)
    size = context_size(spec)
    tokens = size.tokens
    candidates: list[tuple[int, str]] = []
    if off.layers_on_gpu and not lc.flash_attn and arch.num_attention_heads:
        kq = size.cells_per_stream * tokens * arch.num_attention_heads * F32
        candidates.append(
            (
                kq,
                (
                    f"attention scores KQ (no Flash Attention): {size.cells_per_stream:,} cells x "
                    f"{tokens} tokens x {arch.num_attention_heads} heads x 4 B = {kq:,} B (the "
                    "softmax runs in place)"
                ),
            )
        )
    if off.output_on_gpu:
        logits = arch.vocab_size * tokens * F32
        candidates.append(
            (logits, f"logits: {arch.vocab_size:,} vocab x {tokens} tokens x 4 B = {logits:,} B")
        )
    if off.layers_on_gpu:
        if arch.intermediate_size:
            ffn = 2 * arch.intermediate_size * tokens * F32
            candidates.append(
                (
                    ffn,
                    (
                        f"MLP gate and up: 2 x {arch.intermediate_size:,} x {tokens} tokens x 4 B "
                        f"= {ffn:,} B"
                    ),
                )
            )
        if arch.num_experts and arch.moe_intermediate_size:
            moe = 2 * arch.moe_intermediate_size * arch.num_experts_per_tok * tokens * F32
            candidates.append(
                (
                    moe,
                    (
                        f"experts gate and up: 2 x {arch.moe_intermediate_size:,} x "
                        f"{arch.num_experts_per_tok} experts x {tokens} tokens x 4 B = {moe:,} B"
                    ),
                )
            )
    if not candidates:
        return LedgerItem(
            key="buffers.compute",
            name=name,
            category="activations",
            status=ESTIMATED,
            basis="nothing runs on the GPU (n_gpu_layers 0): the graph runs on the CPU",
            stages=stages,
            stage_bytes={s: 0 for s in stages},
            distribution=distribution(ctx.layout),
        )
    biggest = max(b for b, _ in candidates)
    basis = UnitText(
        f"estimated floor: llama.cpp reserves the graph for min(n_ctx, n_batch, n_ubatch) = "
        f"{tokens} tokens, every one an output (llama-context.cpp, graph_reserve); ggml-alloc "
        "reuses memory between these tensors, so the buffer is at least the largest: ",
        "; ".join(text for _, text in candidates),
        " -> ",
        Figure(biggest, gib_in_bytes_mode=True),
        "; the smaller tensors live beside it (hidden states, the mask) are not counted; "
        "llama.cpp prints the real figure at start-up ('CUDA0 compute buffer size')",
    )
    return LedgerItem(
        key="buffers.compute",
        name=name,
        category="activations",
        status=ESTIMATED,
        basis=basis,
        stages=stages,
        stage_bytes={s: biggest for s in stages},
        distribution=distribution(ctx.layout, where="last"),
    )


def host_note(ctx: LedgerContext) -> str:
    """Where the rest lives: host RAM for llama.cpp's CPU layers (one line), or ''."""
    if ctx.arch is None:
        return ""
    off = offload_of(ctx)
    w = host_weight_bytes(ctx)
    kv = host_kv_bytes(ctx)
    parts = [off.describe()]
    if w:
        parts.append(f"host RAM holds {w:,} B of weights (the memory-mapped GGUF)")
    if kv:
        parts.append(f"{kv:,} B of KV cache for the CPU layers")
    return "llama.cpp: " + "; ".join(parts)


def _unknown(key: str, name: str, category: str, basis: str, stages) -> LedgerItem:
    return LedgerItem(
        key=key, name=name, category=category, status=UNKNOWN, basis=basis, stages=stages
    )
