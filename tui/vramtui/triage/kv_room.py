"""When a serving engine says its KV cache is too small for max_model_len, in bytes.

vLLM refuses to start when one sequence at `max_model_len` does not fit in the KV cache left
after the weights and the profiled activations: v0 prints token counts ("The model's max seq
len (32768) is larger than the maximum number of tokens that can be stored in KV cache
(7344)"), v1 prints bytes ("... (16.00 GiB KV cache is needed), which is larger than the
available KV cache memory (3.59 GiB). ... the estimated maximum model length is 7344").

From the error: the tokens one sequence needs and the room the engine had. Where the engine
printed bytes, those are the room; where it printed tokens, the room in bytes is those tokens
at the spec's model's KV bytes per token (an estimate, said so). A change is then judged from
the error by the KV one sequence needs after it against the room after it: the weights a change
frees go to the KV cache (the engine sizes the cache from what is left), a smaller KV dtype
shrinks the need, a shorter context shrinks it too. Per GPU throughout (the tokens are the
engine's, each GPU holds its tensor-parallel share).
"""

from __future__ import annotations

from dataclasses import dataclass

from vramtui.ledger import estimate
from vramtui.spec import Spec
from vramtui.unit_text import Figure, UnitText


@dataclass(frozen=True)
class KvRoom:
    need_tokens: int  # one sequence at max_model_len
    room_tokens: int | None  # tokens the engine's KV cache held (printed or derived)
    need_bytes: int  # KV one sequence at need_tokens needs, per GPU
    room_bytes: int  # the KV memory the engine had, per GPU
    room_printed: bool  # True: the engine printed the room in bytes; False: tokens x estimate
    weights_bytes: int  # the spec's weights per GPU (what a weight change frees comes from it)
    ledger_need_bytes: int  # the ledger's KV for one sequence at need_tokens (scales changes)

    @property
    def short_bytes(self) -> int:
        return self.need_bytes - self.room_bytes

    def line(self) -> str:
        """One line; its figures follow the display unit (a `UnitText`)."""
        room = (
            UnitText(Figure(self.room_bytes), " as the engine printed it")
            if self.room_printed
            else UnitText(
                f"{self.room_tokens:,} tokens, about ",
                Figure(self.room_bytes),
                " at the spec's model's KV bytes per token (estimated)",
            )
        )
        tokens = f" ({self.room_tokens:,} tokens)" if self.room_printed and self.room_tokens else ""
        return UnitText(
            "the engine's KV cache had room for ",
            room,
            f"{tokens}; one sequence at max_model_len {self.need_tokens:,} needs ",
            Figure(self.need_bytes),
            " per GPU: short by ",
            Figure(max(0, self.short_bytes)),
            f"; max_model_len {self.room_tokens:,} or less fits as the card is"
            if self.room_tokens
            else "",
        )


def _one_sequence(spec: Spec, tokens: int) -> Spec | None:
    from vramtui.triage.single_change import edit_spec

    if tokens < 2:
        return None
    return edit_spec(
        spec,
        {
            "batch.concurrency": 1,
            "lengths.prompt_tokens": tokens - 1,
            "lengths.generated_tokens": 1,
        },
    )


def kv_bytes_for(spec: Spec, arch, checkpoint, tokens: int) -> int | None:
    """KV cache bytes (largest GPU) one sequence of `tokens` needs under `spec`; None when the
    ledger cannot size the cache (no architecture)."""
    one = _one_sequence(spec, tokens)
    if one is None:
        return None
    est = estimate(one, arch, checkpoint)
    items = est.items_in("kv_cache")
    if not items or any(i.is_unknown for i in items):
        return None
    return sum(i.largest_gpu_bytes(est.layout) for i in items)


def weights_bytes(est) -> int:
    return sum(
        i.largest_gpu_bytes(est.layout)
        for i in est.items
        if i.category in ("weights", "quant_metadata") and not i.is_unknown
    )


def kv_room(reading, spec: Spec, arch, checkpoint, est) -> KvRoom | None:
    """The KV shortfall the error shows, or None when the error is not a KV-too-small one (or
    the spec cannot size a KV cache)."""
    ev = reading.primary
    if ev is None or ev.kind != "kv_cache" or spec.is_training:
        return None
    need_tokens = ev.tokens.get("max_model_len")
    if not need_tokens:
        return None
    room_tokens = ev.tokens.get("kv_cache_tokens") or ev.tokens.get("estimated_max_model_len")
    printed_room = ev.figures.get("kv_cache_bytes")
    printed_need = ev.figures.get("tried_to_allocate_bytes") if printed_room else None
    ledger_need = kv_bytes_for(spec, arch, checkpoint, need_tokens)
    if ledger_need is None:
        return None
    need_bytes = printed_need or ledger_need
    if printed_room is not None:
        room_bytes, printed = printed_room, True
    elif room_tokens:
        derived = kv_bytes_for(spec, arch, checkpoint, room_tokens)
        if derived is None:
            return None
        room_bytes, printed = derived, False
    else:
        return None
    return KvRoom(
        need_tokens=need_tokens,
        room_tokens=room_tokens,
        need_bytes=need_bytes,
        room_bytes=room_bytes,
        room_printed=printed,
        weights_bytes=weights_bytes(est),
        ledger_need_bytes=ledger_need,
    )


def judge_change(
    room: KvRoom, spec: Spec, after: Spec, arch, checkpoint, after_est
) -> tuple[int, int] | None:
    """(KV one sequence needs after the change, room after it), per GPU, from the error."""
    before_ctx = spec.lengths.context_tokens
    after_ctx = after.lengths.context_tokens
    tokens = room.need_tokens if after_ctx == before_ctx else min(after_ctx, room.need_tokens)
    need_now = room.ledger_need_bytes
    need_after = kv_bytes_for(after, arch, checkpoint, tokens)
    if need_after is None or need_now <= 0:
        return None
    # Scale the error's need by the ledger's ratio (exact when the engine printed bytes).
    need = round(room.need_bytes * need_after / need_now)
    freed = room.weights_bytes - weights_bytes(after_est)
    return need, room.room_bytes + freed


def max_len_edit(room: KvRoom, spec: Spec) -> dict[str, int] | None:
    """The spec edit that brings the context down to what the KV cache held."""
    if not room.room_tokens or room.room_tokens >= spec.lengths.context_tokens:
        return None
    generated = spec.lengths.generated_tokens or 0
    prompt = room.room_tokens - generated
    if prompt < 1:
        return None
    return {"lengths.prompt_tokens": prompt}


__all__ = ["KvRoom", "judge_change", "kv_bytes_for", "kv_room", "max_len_edit"]
