"""A TorchDispatchMode that records every tensor storage as it is created and freed.

Storages, not tensors, hold memory: a view shares its base's storage, so each storage is
counted once however many views point at it (keyed by the C++ StorageImpl, `_cdata`), from the
op that created it until the weakref on its Python object fires (PyTorch keeps one Python
object per live storage). Parameters and buffers are registered up front as the baseline.

The tracker only records (event log); which category a storage belongs to is decided after
the run, with hindsight (an activation is a forward storage that outlives the forward; a
temporary is one freed inside its stage; tags mark gradients, optimiser states, KV cache).
Works the same on the meta device and on real CPU tensors, which is how the trace is checked.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_iter

# The CUDA caching allocator hands out blocks in multiples of 512 bytes (kMinBlockSize).
BLOCK_BYTES = 512

# Categories a storage can end up in (display order).
CATEGORIES = (
    "parameters",
    "adapter",
    "buffers",
    "gradients",
    "master_weights",
    "optimizer_states",
    "kv_cache",
    "activations",
    "attention_mask",
    "logits",
    "temporaries",
    "inputs",
    "other",
)

# Stages whose new storages (outside the logits/mask regions) are activations when they
# outlive the stage (saved for backward), temporaries when freed inside it.
_SAVING_STAGES = ("forward",)
# Stages whose whole working set is what the ledger calls activations (no-grad forwards).
_WORKING_SET_STAGES = ("prefill", "decode", "validation")


def rounded(nbytes: int) -> int:
    return -(-nbytes // BLOCK_BYTES) * BLOCK_BYTES if nbytes else 0


class UnsupportedOpError(Exception):
    """An op failed inside the trace (no meta kernel, data-dependent output)."""

    def __init__(self, op: str, detail: str, no_kernel: bool):
        super().__init__(f"{op}: {detail}")
        self.op = op
        self.detail = detail
        self.no_kernel = no_kernel


@dataclass
class StorageRecord:
    index: int
    nbytes: int
    stage: str | None  # stage during which it was created (None: before any stage)
    region: str  # "logits", "attention_mask" or "" when created
    op: str  # the op that created it
    tag: str | None = None  # explicit category (parameters, gradients, kv_cache, ...)
    freed_stage: str | None = None  # stage during which it was freed; None while alive
    freed: bool = False
    resizes: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class StageWindow:
    name: str
    start_event: int  # index into events of the first event of the stage
    end_event: int  # one past the last
    description: str


class StorageTracker(TorchDispatchMode):
    """Record storage births and deaths; tag storages; mark stages and regions."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[StorageRecord] = []
        self._live: dict[int, StorageRecord] = {}  # StorageImpl address -> record
        self._refs: dict[int, weakref.ref] = {}
        # (record index, +bytes or -bytes, the same rounded up to 512-byte blocks)
        self.events: list[tuple[int, int, int]] = []
        self.stage: str | None = None
        self.region: str = ""
        self.windows: list[StageWindow] = []
        self._stage_start = 0
        self._stage_description = ""
        self.recording = True

    # ------------------------------------------------------------------ registration

    def _storage_of(self, t: torch.Tensor):
        try:
            return t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse and other storage-less tensors
            return None

    def track(self, t: torch.Tensor, op: str = "", tag: str | None = None) -> StorageRecord | None:
        """Register the storage under `t` if new; tag it if `tag` is given (first tag wins
        unless the new tag is stronger, see `tag`)."""
        st = self._storage_of(t)
        if st is None:
            return None
        key = st._cdata
        rec = self._live.get(key)
        nbytes = st.nbytes()
        if rec is None:
            rec = StorageRecord(
                index=len(self.records),
                nbytes=nbytes,
                stage=self.stage,
                region=self.region,
                op=op,
                tag=tag,
            )
            self.records.append(rec)
            self._live[key] = rec
            self.events.append((rec.index, nbytes, rounded(nbytes)))
            self._refs[key] = weakref.ref(st, self._freer(key, rec))
        else:
            if nbytes != rec.nbytes:  # resized in place (resize_, set_)
                self.events.append(
                    (rec.index, nbytes - rec.nbytes, rounded(nbytes) - rounded(rec.nbytes))
                )
                rec.resizes.append(nbytes - rec.nbytes)
                rec.nbytes = nbytes
            if tag is not None:
                rec.tag = tag
        return rec

    def tag(self, t: torch.Tensor | None, tag: str) -> None:
        if t is None:
            return
        self.track(t, op="tagged", tag=tag)

    def _freer(self, key: int, rec: StorageRecord):
        def _freed(_ref) -> None:
            if self._live.get(key) is rec:
                del self._live[key]
                self._refs.pop(key, None)
            if not self.recording or rec.freed:
                return
            rec.freed = True
            rec.freed_stage = self.stage
            self.events.append((rec.index, -rec.nbytes, -rounded(rec.nbytes)))

        return _freed

    # ------------------------------------------------------------------ stages

    def begin_stage(self, name: str, description: str = "") -> None:
        self.end_stage()
        self.stage = name
        self._stage_start = len(self.events)
        self._stage_description = description

    def end_stage(self) -> None:
        if self.stage is None:
            return
        self.windows.append(
            StageWindow(self.stage, self._stage_start, len(self.events), self._stage_description)
        )
        self.stage = None

    def stop(self) -> None:
        self.end_stage()
        self.recording = False

    @property
    def live_bytes(self) -> int:
        return sum(r.nbytes for r in self._live.values())

    # ------------------------------------------------------------------ dispatch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except NotImplementedError as exc:
            raise UnsupportedOpError(str(func), _first_line(exc), no_kernel=True) from None
        except RuntimeError as exc:
            text = str(exc)
            no_kernel = any(
                s in text
                for s in ("meta tensor", "Meta backend", "data-dependent", "data dependent")
            )
            raise UnsupportedOpError(str(func), _first_line(exc), no_kernel=no_kernel) from None
        if self.recording:
            name = str(func)
            for t in tree_iter(out):
                if isinstance(t, torch.Tensor):
                    self.track(t, op=name)
        return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# ---------------------------------------------------------------------- analysis


def category_of(rec: StorageRecord) -> str:
    """The category of a storage, decided with hindsight once the run is over."""
    if rec.tag is not None:
        return rec.tag
    if rec.region in ("logits", "attention_mask"):
        return rec.region
    if rec.stage is None:
        return "other"
    if rec.stage in _WORKING_SET_STAGES:
        return "activations"
    if rec.stage in _SAVING_STAGES:
        return "temporaries" if rec.freed_stage == rec.stage else "activations"
    return "temporaries"


@dataclass(frozen=True)
class StagePeak:
    name: str
    description: str
    start_bytes: int
    end_bytes: int
    peak_bytes: int
    peak_rounded_bytes: int
    peak_categories: dict[str, int]
    end_categories: dict[str, int]
    peak_op: str
    allocations: int


def analyse(tracker: StorageTracker) -> list[StagePeak]:
    """Walk the event log once: per stage, the peak of live bytes and what was live then."""
    cats = [category_of(r) for r in tracker.records]
    # Stage boundaries at each event position, in order (a stage may hold no event at all).
    marks: dict[int, list[tuple[str, StageWindow]]] = {}
    for w in tracker.windows:
        marks.setdefault(w.start_event, []).append(("open", w))
        marks.setdefault(w.end_event, []).append(("close", w))
    live = 0
    live_rounded = 0
    by_cat: dict[str, int] = {}
    out: list[StagePeak] = []
    current: dict | None = None

    def _close(w: StageWindow) -> None:
        nonlocal current
        out.append(
            StagePeak(
                name=w.name,
                description=w.description,
                start_bytes=current["start"],
                end_bytes=live,
                peak_bytes=current["peak"],
                peak_rounded_bytes=current["peak_rounded"],
                peak_categories=_clean(current["peak_cats"]),
                end_categories=_clean(by_cat),
                peak_op=current["peak_op"],
                allocations=current["allocs"],
            )
        )
        current = None

    def _open(w: StageWindow) -> None:
        nonlocal current
        current = {
            "start": live,
            "peak": live,
            "peak_rounded": live_rounded,
            "peak_cats": dict(by_cat),
            "peak_op": "(live at the start of the stage)",
            "allocs": 0,
        }

    n = len(tracker.events)
    for i in range(n + 1):
        for action, w in marks.get(i, ()):
            if action == "open":
                _open(w)
            elif current is not None:
                _close(w)
        if i == n:
            break
        idx, delta, delta_rounded = tracker.events[i]
        rec = tracker.records[idx]
        cat = cats[idx]
        live += delta
        live_rounded += delta_rounded
        by_cat[cat] = by_cat.get(cat, 0) + delta
        if current is not None:
            if delta > 0:
                current["allocs"] += 1
            if live > current["peak"]:
                current["peak"] = live
                current["peak_cats"] = dict(by_cat)
                current["peak_op"] = rec.op
            current["peak_rounded"] = max(current["peak_rounded"], live_rounded)
    return out


def _clean(d: dict[str, int]) -> dict[str, int]:
    return {c: d[c] for c in CATEGORIES if d.get(c)}
