"""A spec as TOML: its TOML-shaped dict, its full text, and saving it without losing a file's
comments.

`save_spec` edits an existing file in place (with tomlkit): only the keys whose values changed
are rewritten, each at its place and with its trailing comment; new keys and tables go next to
their neighbours; keys that are gone are removed; `[[measured]]`, `[[triage]]` and `[[quality]]`
are updated entry by entry. Comments, blank lines, key order and number spellings (`7e9`) of the
rest of the file stay as the user wrote them. The edited text must load back to exactly the
spec being saved; when it does not, or the file cannot be read as a spec, the spec is written in
full (as `dumps_spec` does) and one warning line says that the comments were not kept.

`vramtui.spec` re-exports `spec_to_dict`, `dumps_spec` and `save_spec`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from vramtui.errors import SpecError
from vramtui.safe_text import safe_line

if TYPE_CHECKING:
    from vramtui.spec import Spec

HEADER = (
    "# vramtui workload spec (schema_version 1); every key is described in docs/spec-format.md\n"
)

# How many rounds of "apply the differences, load back, compare" an in-place edit may take: the
# second round writes out a value that a changed neighbour's default would otherwise alter.
_EDIT_ROUNDS = 3


# --------------------------------------------------------------------------------------------
# Spec -> dict / TOML text
# --------------------------------------------------------------------------------------------


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def spec_to_dict(spec: Spec) -> dict[str, Any]:
    """The TOML-shaped dict of a spec: None values omitted (TOML has no null), empty lists too."""
    out: dict[str, Any] = {
        "schema_version": spec.schema_version,
        "name": spec.name,
        "description": spec.description,
    }
    m = spec.model
    out["model"] = _drop_none(
        {"id": m.id, "path": m.path, "params": m.params, "revision": m.revision}
    )
    task: dict[str, Any] = {"kind": spec.task.kind}
    if spec.task.lora is not None:
        lo = spec.task.lora
        task["lora"] = _drop_none(
            {"rank": lo.rank, "alpha": lo.alpha, "targets": list(lo.targets), "dropout": lo.dropout}
        )
    out["task"] = task
    w = spec.weights
    weights = _drop_none(
        {
            "format": w.format,
            "double_quant": w.double_quant,
            "bits": w.bits,
            "group_size": w.group_size,
            "gguf_type": w.gguf_type,
        }
    )
    if w.groups:
        weights["groups"] = dict(w.groups)
    out["weights"] = weights
    le = spec.lengths
    out["lengths"] = _drop_none(
        {
            "prompt_tokens": le.prompt_tokens,
            "generated_tokens": le.generated_tokens,
            "seq_len": le.seq_len,
        }
    )
    b = spec.batch
    out["batch"] = _drop_none(
        {"concurrency": b.concurrency, "micro_batch": b.micro_batch, "grad_accum": b.grad_accum}
    )
    if spec.training is not None:
        tr = spec.training
        out["training"] = _drop_none(
            {
                "optimizer": tr.optimizer,
                "master_weights_fp32": tr.master_weights_fp32,
                "grad_dtype": tr.grad_dtype,
                "optimizer_state_dtype": tr.optimizer_state_dtype,
                "grad_checkpointing": tr.grad_checkpointing,
                "framework": tr.framework,
                "adapter_dtype": tr.adapter_dtype,
                "fused_qkv_adapter": tr.fused_qkv_adapter,
                "loss_impl": tr.loss_impl,
                "optimizer_placement": tr.optimizer_placement,
                "fsdp_frozen_base": tr.fsdp_frozen_base,
                "no_sync": tr.no_sync,
                "gqa_expand_kv": tr.gqa_expand_kv,
                "fsdp_root_gathered": tr.fsdp_root_gathered,
                "offload_params": tr.offload_params,
                "offload_checkpoints": tr.offload_checkpoints,
                "selective_policy": tr.selective_policy,
                "fp32_norms": tr.fp32_norms,
                "versions": dict(tr.versions) or None,
            }
        )
    r = spec.runtime
    out["runtime"] = _drop_none(
        {
            "attention": r.attention,
            "kv_cache_dtype": r.kv_cache_dtype,
            "kv_block_tokens": r.kv_block_tokens,
            "engine": r.engine,
        }
    )
    lc = spec.llama_cpp
    if lc is not None:
        out["llama_cpp"] = _drop_none(
            {
                "n_ctx": lc.n_ctx,
                "n_batch": lc.n_batch,
                "n_ubatch": lc.n_ubatch,
                "n_parallel": lc.n_parallel,
                "n_gpu_layers": lc.n_gpu_layers,
                "cache_type_k": lc.cache_type_k,
                "cache_type_v": lc.cache_type_v,
                "flash_attn": lc.flash_attn,
                "kv_unified": lc.kv_unified,
            }
        )
    p = spec.placement
    out["placement"] = {
        "gpus": p.gpus,
        "tensor_parallel": p.tensor_parallel,
        "pipeline_parallel": p.pipeline_parallel,
        "data_parallel_sharding": p.data_parallel_sharding,
    }
    h = spec.headroom
    out["headroom"] = _drop_none(
        {
            "mode": h.mode,
            "reserve_gib": h.reserve_gib,
            "reason": h.reason,
            "cuda_context_bytes": h.cuda_context_bytes,
            "margin_fraction": h.margin_fraction,
        }
    )
    c = spec.campaign
    campaign = _drop_none(
        {"days": c.days, "budget": c.budget, "currency": c.currency, "start_by": c.start_by}
    )
    if c.software is not None:
        sw = c.software
        campaign["software"] = _drop_none(
            {"image": sw.image, "driver": sw.driver, "cuda": sw.cuda, "required": sw.required}
        )
    if campaign:
        out["campaign"] = campaign
    if spec.measured:
        out["measured"] = [
            _drop_none(
                {
                    "stage": m.stage,
                    "quantity": m.quantity,
                    "bytes": m.bytes,
                    "value": m.value,
                    "as_written": m.as_written or None,
                    "counter": m.counter,
                    "item": m.item,
                    "source": m.source or None,
                    "gpu": m.gpu,
                    "device": m.device or None,
                    "date": m.date,
                    "run": m.run or None,
                    "error": m.error or None,
                    "dims": dict(m.dims) or None,
                    "versions": dict(m.versions) or None,
                }
            )
            for m in spec.measured
        ]
    if spec.triage:
        out["triage"] = [
            _drop_none(
                {
                    "time": a.time,
                    "phase": a.phase,
                    "framework": a.framework or None,
                    "variable": a.variable,
                    "change": a.change,
                    "predicted_peak_bytes": a.predicted_peak_bytes,
                    "outcome": a.outcome,
                    "figures": dict(a.figures) or None,
                }
            )
            for a in spec.triage
        ]
    if spec.quality:
        out["quality"] = [
            _drop_none({"metric": q.metric, "threshold": q.threshold, "note": q.note or None})
            for q in spec.quality
        ]
    return out


def dumps_spec(spec: Spec, source: str = "<spec>") -> str:
    """The spec as TOML text; refuses (SpecError) a spec that would not load back."""
    from vramtui.spec import validate_spec

    data = spec_to_dict(validate_spec(spec, source))
    arrays = {name: data.pop(name, []) for name in ("quality", "measured", "triage")}
    text = HEADER + tomli_w.dumps(data)
    for name, entries in arrays.items():  # as [[name]] tables, which tomli_w writes inline
        for entry in entries:
            nested = {k: v for k, v in entry.items() if isinstance(v, dict)}
            flat = {k: v for k, v in entry.items() if k not in nested}
            text += f"\n[[{name}]]\n" + tomli_w.dumps(flat)
            for key, table in nested.items():
                text += f"\n[{name}.{key}]\n" + tomli_w.dumps(table)
    return text


# --------------------------------------------------------------------------------------------
# In-place edit of an existing spec text
# --------------------------------------------------------------------------------------------


class CannotEditInPlace(Exception):
    """The text cannot be edited in place; the message says why, in a few words."""


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """Equal as TOML values: 7e9 == 7000000000, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def edit_spec_text(text: str, spec: Spec, source: str = "<spec>") -> str:
    """`text` (a spec file) changed in place so that it loads as `spec`.

    Only what differs between the spec `text` holds and `spec` is touched. Raises
    CannotEditInPlace when tomlkit cannot parse the text, the text is not a valid spec, or the
    edited text would not load back to exactly `spec`.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from vramtui.spec import loads_spec

    try:
        doc = tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        raise CannotEditInPlace(f"tomlkit cannot parse it: {exc}") from None
    try:
        before = loads_spec(text, source)
    except SpecError:
        raise CannotEditInPlace("it is not a valid spec") from None
    old = spec_to_dict(before)
    new = spec_to_dict(spec)
    for _ in range(_EDIT_ROUNDS):
        try:
            _apply_table(doc, old, new)
            edited = doc.as_string()
        except CannotEditInPlace:
            raise
        except (TOMLKitError, KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
            raise CannotEditInPlace(f"tomlkit could not edit it ({type(exc).__name__})") from None
        try:
            after = loads_spec(edited, source)
        except SpecError:
            raise CannotEditInPlace("the edited text would not load as a spec") from None
        if after == spec:
            return edited
        old = spec_to_dict(after)  # e.g. a default that a changed neighbour moved: write it out
    raise CannotEditInPlace("the edited text would not load back to the same spec")


def _container(node: Any) -> Any:
    """The tomlkit Container holding a document's or table's items."""
    from tomlkit.container import Container

    if isinstance(node, Container):
        return node
    value = getattr(node, "value", None)
    if isinstance(value, Container):
        return value
    raise CannotEditInPlace("a table is split over the file (out-of-order tables)")


def _is_table(item: Any) -> bool:
    from tomlkit.container import OutOfOrderTableProxy
    from tomlkit.items import AoT, Table

    return isinstance(item, Table | AoT | OutOfOrderTableProxy)


def _apply_table(node: Any, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Make the table `node` (whose values are `old`) hold `new`, touching only differences."""
    from tomlkit.container import OutOfOrderTableProxy
    from tomlkit.items import AoT, InlineTable, Table

    body = _container(node)
    for key in old:
        if key not in new and key in body:
            _drop_comments_above(body, _index_of(body, key))
            del body[key]
    order = list(new)
    for key, value in new.items():
        was = old.get(key, _MISSING)
        if was is not _MISSING and _same(was, value):
            continue
        item = body.item(key) if key in body else None
        if isinstance(item, OutOfOrderTableProxy):
            raise CannotEditInPlace(f"[{key}] is split over the file (tables out of order)")
        if isinstance(value, dict):
            if isinstance(item, Table | InlineTable):
                _apply_table(item, was if isinstance(was, dict) else {}, value)
            elif item is None:
                _insert(node, body, key, value, order)
            else:
                body[key] = value
        elif value and isinstance(value, list) and all(isinstance(v, dict) for v in value):
            if isinstance(item, AoT):
                _apply_array_of_tables(item, was if isinstance(was, list) else [], value)
            elif item is None:
                body.append(key, tomlkit_aot(value))
            else:
                raise CannotEditInPlace(f"{key} is not written as [[{key}]] tables")
        elif item is not None:
            body[key] = value  # keeps the key's place and its trailing comment
        else:
            _insert(node, body, key, value, order)


def tomlkit_aot(entries: list[dict[str, Any]]) -> Any:
    import tomlkit

    aot = tomlkit.aot()
    for entry in entries:
        aot.append(tomlkit.item(entry))
    return aot


def _apply_array_of_tables(aot: Any, old: list[Any], new: list[dict[str, Any]]) -> None:
    """`[[name]]` entries updated one by one; extra ones removed, new ones appended."""
    import tomlkit

    body = aot.body
    for i, entry in enumerate(new[: len(body)]):
        was = old[i] if i < len(old) and isinstance(old[i], dict) else {}
        _apply_table(body[i], was, entry)
    while len(body) > len(new):
        if len(body) > 1:
            _drop_trailing_comments(_innermost(body[-2]))
        del aot[len(body) - 1]
    for entry in new[len(body) :]:
        last = body[-1] if body else None
        table = tomlkit.item(entry)
        if last is not None and _ends_blank(last):
            table.add(tomlkit.nl())  # a blank line after it, as after the entry before it
        elif last is not None:
            table.trivia.indent = "\n"  # a blank line before it
        aot.append(table)


def _ends_blank(table: Any) -> bool:
    """Whether the text of `table` (a table or array of tables) ends with a blank line."""
    from tomlkit.items import Whitespace

    last = _last_item(_innermost(table))
    return isinstance(last, Whitespace) and "\n" in last.s


def _last_item(body: Any) -> Any:
    """The container's last item, skipping the placeholders tomlkit leaves for removed ones."""
    from tomlkit.items import Null

    return next((item for _k, item in reversed(body.body) if not isinstance(item, Null)), None)


def _innermost(item: Any) -> Any:
    """The container whose text ends the table `item` (its last sub-table's, if any)."""
    from tomlkit.items import AoT

    while True:
        if isinstance(item, AoT):
            if not item.body:
                raise CannotEditInPlace("an empty array of tables")
            item = item.body[-1]
        body = _container(item)
        last = _last_item(body)
        if not _is_table(last):
            return body
        item = last


def _drop_trailing_comments(body: Any, end: int | None = None) -> None:
    """Remove the comment lines that end `body` (or its items before `end`) with no blank line
    after them: they sit right above the header or key that follows, and go with it."""
    from tomlkit.items import Comment, Null

    items = body.body
    for i in range(len(items) if end is None else end, 0, -1):
        item = items[i - 1][1]
        if isinstance(item, Null):
            continue
        if not isinstance(item, Comment):
            return
        items[i - 1] = (None, Null())


def _drop_comments_above(body: Any, index: int) -> None:
    """Remove the comment lines right above the key or table at `index` of `body`."""
    from tomlkit.items import Comment, Null

    items = body.body
    j = index - 1
    while j >= 0 and isinstance(items[j][1], Null):
        j -= 1
    if j < 0:
        return
    above = items[j][1]
    if isinstance(above, Comment):
        _drop_trailing_comments(body, index)
    elif _is_table(above) and _is_table(items[index][1]):
        _drop_trailing_comments(_innermost(above))


def _insert(node: Any, body: Any, key: str, value: Any, order: list[str]) -> None:
    """Add `key` at its natural place: after the nearest key before it in `order` that the
    table holds (a value after the values, a table after the tables), else as tomlkit adds."""
    import tomlkit
    from tomlkit.items import InlineTable

    if isinstance(node, InlineTable):
        node[key] = value
        return
    item = tomlkit.item(value)
    as_table = _is_table(item)
    before = order[: order.index(key)]
    anchor = next(
        (k for k in reversed(before) if k in body and _is_table(body.item(k)) == as_table),
        None,
    )
    if anchor is None:
        if as_table:
            item.add(tomlkit.nl())
        body.append(key, item)
        return
    index = _index_of(body, anchor)
    if as_table:
        anchor_item = body.item(anchor)
        if not _ends_blank(anchor_item):
            item.trivia.indent = "\n"
        elif index + 1 < len(body.body):
            item.add(tomlkit.nl())  # keep the blank line before the table that follows
    if index + 1 < len(body.body):
        body._insert_at(index + 1, key, item)
    else:
        body.append(key, item)


def _index_of(body: Any, key: str) -> int:
    """Where `key` sits in the container's body (its last occurrence)."""
    index = -1
    for i, (k, _item) in enumerate(body.body):
        if k is not None and k.key == key:
            index = i
    if index < 0:
        raise CannotEditInPlace(f"{key} was not found where tomlkit keeps it")
    return index


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def warn_on_stderr(message: str) -> None:
    """The command line's way to show a save warning: one line on standard error."""
    print(f"vramtui: warning: {message}", file=sys.stderr)


def save_spec(
    spec: Spec,
    path: str | os.PathLike[str],
    *,
    template_text: str | None = None,
    in_place: bool = True,
    warn: Callable[[str], None] | None = warn_on_stderr,
) -> str | None:
    """Write the spec atomically: temp file in the same directory, fsync, os.replace, fsync dir.

    The text keeps the comments and layout of `template_text` (the file the spec was opened
    from, for "save as") or else of the file already at `path` (unless `in_place` is False: a
    spec that did not come from a file replaces it), edited in place; with neither, the spec is
    written in full. When the in-place edit cannot be done, the spec is written in
    full and a one-line warning is returned (and passed to `warn`, by default printed on
    standard error); None when there is nothing to say.

    The text is produced (and the spec validated) before anything touches the disk, so an
    invalid spec or a failed write leaves any existing file as it was and no temp file behind.
    """
    from vramtui.spec import MAX_SPEC_BYTES, read_spec_text, validate_spec

    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    source = str(path)
    full = dumps_spec(spec, source)  # validates; the text used when no edit in place is done
    warning = None
    template, where = template_text, "the file it was opened from"
    if template is None and in_place and path.exists():
        where = "the existing file"
        try:
            template = read_spec_text(path)
        except SpecError as exc:
            warning = _not_kept(source, str(exc))
    text = full
    if template is not None:
        try:
            text = edit_spec_text(template, validate_spec(spec, source), source)
        except CannotEditInPlace as exc:
            warning = _not_kept(source, f"{where} could not be edited in place: {exc}")
    data = text.encode("utf-8")
    if len(data) > MAX_SPEC_BYTES and text is not full:
        warning = _not_kept(source, "the edited file would pass the spec size limit")
        data = full.encode("utf-8")
    directory = path.parent
    if not directory.is_dir():
        raise SpecError(
            safe_line(
                f"cannot save spec to {source}: directory {directory} does not exist; create it "
                "or choose another path"
            )
        )
    from vramtui.fsutil import atomic_write_bytes

    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise SpecError(
            safe_line(
                f"cannot save spec to {source}: {exc.strerror or exc}; check the directory's "
                "permissions and free space"
            )
        ) from None
    if warning is not None and warn is not None:
        warn(warning)
    return warning


def _not_kept(source: str, why: str) -> str:
    why = " ".join(safe_line(why).split())
    if len(why) > 200:
        why = why[:199] + "…"
    return (
        f"saved {source} in full, without its comments and layout ({why}); the values are all there"
    )
