"""The catalogue lists of the headless commands (`vramtui models`, `offers`, `gpus`): tables that
fit the terminal.

Ids are what a user copies into other commands (`shortlist --detail OFFER_ID`,
`triage --failed-gpu GPU`, `--model ID`), so the id column is never wrapped, cut or dropped
(an id wider than the whole terminal folds, every character kept). The other columns wrap at spaces; when even wrapped they cannot fit, they are left out one at a time
in each list's documented order, and a line under the table names what was left out.

Units: GB = 10^9 B and GiB = 2^30 B, each figure carrying its own; parameter counts use
M = 10^6 and B = 10^9 parameters (never bytes), with exact counts in `models --wide`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from vramtui.safe_text import safe_line, safe_text
from vramtui.units import GIB_BYTES, format_bytes

# ------------------------------------------------------------------------- the fitted table


@dataclass(frozen=True)
class ListColumn:
    header: str
    justify: str = "left"
    no_wrap: bool = False  # a short figure ("34.39 B", "bf16") is kept on one line


def _min_max(cell: Text, no_wrap: bool) -> tuple[int, int]:
    """The narrowest and widest a cell can be printed: its longest word (its longest line when
    it must not wrap), and its longest line."""
    lines = cell.plain.split("\n")
    widest = max(Text(line).cell_len for line in lines)
    if no_wrap:
        return widest, widest
    words = [w for line in lines for w in line.split()]
    return max([Text(w).cell_len for w in words] or [0]), widest


def _shrink(widths: list[int], minimums: list[int], excess: int) -> list[int]:
    """Take `excess` cells off the columns in proportion to how far each can give (its widest
    line less its longest word), none below its minimum."""
    slack = [w - m for w, m in zip(widths, minimums)]
    total = sum(slack)
    if excess <= 0 or total <= 0:
        return list(widths)
    keep = max(0, total - excess)
    kept = [s * keep // total for s in slack]
    # Hand the cells lost to rounding back, the largest slack first.
    for i in sorted(range(len(slack)), key=lambda j: -slack[j])[: keep - sum(kept)]:
        kept[i] += 1
    return [m + k for m, k in zip(minimums, kept)]


def _squeeze(widths: list[int], room: int) -> list[int]:
    """Widths for a terminal too narrow for even the id and the columns that are never left
    out: the id keeps what the others leave, at least half the room; every cell folds, so
    every character is still printed."""
    others = widths[1:]
    first = max(room - sum(others), min(widths[0], room // 2), 1)
    left = room - first
    total = sum(others)
    if not others or total <= left:
        return [first, *others]
    squeezed = [max(1, w * left // total) for w in others]
    while sum(squeezed) > left and max(squeezed) > 1:
        squeezed[squeezed.index(max(squeezed))] -= 1
    return [first, *squeezed]


class FittedTable:
    """A table whose key column (the id; the first unless `key` says) keeps its full width on
    one line.

    The columns named in `drop_order` are optional: while the others (at their full width)
    and the optional ones (at their narrowest) are wider than the terminal, optional columns
    are left out in that order. Columns wrap at spaces, none below its longest word (or, for
    a `no_wrap` column, its widest line): optional columns give way first, in that order, then
    the others in proportion to what they can give. If the id alone is wider
    than the terminal, it folds over several lines: every character is still printed.
    """

    def __init__(
        self,
        title: str,
        columns: Sequence[ListColumn],
        rows: Iterable[Sequence[str | Text]],
        drop_order: Sequence[str] = (),
        show_lines: bool = False,
        key: int = 0,
        table_box: box.Box | None = box.SIMPLE_HEAD,
        title_style: str | None = None,
    ) -> None:
        self.title = title
        self.key = key
        self.style = {
            "box": table_box,
            "show_edge": table_box is not box.SIMPLE_HEAD,
            "pad_edge": table_box is not box.SIMPLE_HEAD,
        }
        self.title_style = title_style
        self.show_lines = show_lines
        self.columns = list(columns)
        # Plain strings are cleaned here (control characters shown, not obeyed), so that the
        # widths measured are the widths printed.
        self.rows = [[Text(safe_text(c)) if isinstance(c, str) else c for c in r] for r in rows]
        self.drop_order = list(drop_order)
        headers = [c.header for c in self.columns]
        for name in self.drop_order:
            if name not in headers or headers.index(name) == key:
                raise ValueError(f"drop order names {name!r}, not a droppable column")
        self._ranges = []
        for i, col in enumerate(self.columns):
            no_wrap = col.no_wrap or i == key
            cells = [_min_max(r[i], no_wrap) for r in self.rows]
            head_min, head_max = _min_max(Text(col.header), no_wrap)
            self._ranges.append(
                (
                    max([head_min] + [c[0] for c in cells]),
                    max([head_max] + [c[1] for c in cells]),
                )
            )

    def _table(self, kept: Sequence[int], widths: Sequence[int] | None = None) -> Table:
        t = Table(
            title=self.title,
            title_justify="left",
            title_style=self.title_style,
            show_lines=self.show_lines,
            **self.style,
        )
        for n, i in enumerate(kept):
            col = self.columns[i]
            width = None if widths is None else widths[n]
            t.add_column(col.header, overflow="fold", justify=col.justify, width=width)
        for r in self.rows:
            t.add_row(*(r[i] for i in kept))
        return t

    def _overhead(self, console: Console, n: int) -> int:
        """The cells a table of `n` columns spends on padding and separators."""
        probe = Table(**self.style)
        for _ in range(n):
            probe.add_column(width=1)
        wide = console.options.update_width(10_000)
        return Measurement.get(console, wide, probe).minimum - n

    def layout(self, console: Console, width: int) -> tuple[Table, list[str]]:
        """The table for `width` cells and the headers left out to fit."""
        headers = [c.header for c in self.columns]
        kept = list(range(len(self.columns)))
        dropped: list[str] = []
        to_drop = list(self.drop_order)

        def room(cols: list[int]) -> int:
            return width - self._overhead(console, len(cols))

        def need(cols: list[int]) -> int:
            # The columns that are never left out at their full width, the others at their
            # narrowest: an optional column is left out before a needed one has to wrap.
            return sum(
                self._ranges[i][0] if headers[i] in self.drop_order else self._ranges[i][1]
                for i in cols
            )

        while need(kept) > room(kept) and to_drop:
            name = to_drop.pop(0)
            kept.remove(headers.index(name))
            dropped.append(name)
        # A column left out before a wider one may fit again once that one is out.
        for name in reversed(dropped[:-1]):
            trial = sorted(kept + [headers.index(name)])
            if need(trial) <= room(trial):
                kept = trial
                dropped.remove(name)
        room = room(kept)
        minimums = [self._ranges[i][0] for i in kept]
        widths = [self._ranges[i][1] for i in kept]
        excess = sum(widths) - room
        # The columns that would be left out first give way first, down to their minimum.
        for name in self.drop_order:
            n = kept.index(headers.index(name)) if headers.index(name) in kept else None
            if n is None or excess <= 0:
                continue
            give = min(excess, widths[n] - minimums[n])
            widths[n] -= give
            excess -= give
        widths = _shrink(widths, minimums, excess)
        if sum(widths) > room:
            k = kept.index(self.key)
            squeezed = _squeeze([widths[k]] + widths[:k] + widths[k + 1 :], max(room, len(widths)))
            widths = squeezed[1 : k + 1] + [squeezed[0]] + squeezed[k + 1 :]
        return self._table(kept, widths), dropped

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table, dropped = self.layout(console, options.max_width)
        yield table
        if dropped:
            yield Text(
                f"left out to fit {options.max_width} columns: {', '.join(dropped)}",
                style="dim",
            )

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        table, _ = self.layout(console, options.max_width)
        return Measurement.get(console, options, table)


# ------------------------------------------------------------------------------- models

# A size token of a Hub model name: "7B", "0.5B", "8x7B", "270m", and an active-parameter
# count such as the "A22B" of "Qwen3-235B-A22B".
_SIZE_TOKEN = re.compile(r"^(?:\d+x)?\d+(?:\.\d+)?[bBmM]$|^[aA]\d+(?:\.\d+)?[bB]$")


def model_family(model_id: str) -> str:
    """The family a model id belongs to: the id without its size tokens, lower-cased.

    "Qwen/Qwen2.5-7B-Instruct" -> "qwen/qwen2.5-instruct"; "google/gemma-2-27b-it" ->
    "google/gemma-2-it"; "Qwen/Qwen3-235B-A22B" -> "qwen/qwen3".
    """
    org, _, name = model_id.rpartition("/")
    tokens = [t for t in re.split(r"[-_]", name) if t and not _SIZE_TOKEN.match(t)]
    rest = "-".join(tokens) or name
    return f"{org}/{rest}".lower() if org else rest.lower()


def compact_count(n: int) -> str:
    """A parameter count in a few characters: 7,615,616,512 -> "7.62 B" (B = 10^9),
    494,032,768 -> "494 M" (M = 10^6), 1.2e12 -> "1.20 T" (T = 10^12)."""
    if n >= 999_500_000_000:
        return f"{n / 1e12:,.2f} T"
    if n >= 999_500_000:
        return f"{n / 1e9:.2f} B"
    if n >= 999_500:
        return f"{n / 1e6:.0f} M"
    return f"{n:,}"


MODEL_DROP_ORDER = ("head dim", "KV heads", "layers", "dtype", "notes")


def models_renderable(models: dict, query: str | None = None, wide: bool = False) -> Group:
    """`vramtui models`: sorted by family, then parameter count, then id."""
    chosen = [(mid, a) for mid, a in models.items() if not query or query.lower() in mid.lower()]
    chosen.sort(key=lambda m: (model_family(m[0]), m[1].param_count, m[0].lower()))
    columns = [ListColumn("id"), ListColumn("params", "right", no_wrap=True)]
    if wide:
        columns.append(ListColumn("parameters (exact)", "right", no_wrap=True))
    columns += [
        ListColumn("layers", "right", no_wrap=True),
        ListColumn("KV heads", "right", no_wrap=True),
        ListColumn("head dim", "right", no_wrap=True),
        ListColumn("dtype", no_wrap=True),
        ListColumn("notes"),
    ]
    rows = []
    for mid, a in chosen:
        notes = []
        if a.is_moe:
            notes.append(f"MoE {a.num_experts}x top-{a.num_experts_per_tok}")
        if a.mla:
            notes.append("MLA")
        if a.num_sliding_layers:
            notes.append(f"{a.num_sliding_layers} sliding layers")
        row = [mid, compact_count(a.param_count)]
        if wide:
            row.append(f"{a.param_count:,}")
        row += [
            str(a.num_layers),
            str(a.num_kv_heads),
            str(a.head_dim),
            a.default_dtype,
            ", ".join(notes),
        ]
        rows.append(row)
    title = "model catalogue, by family then size"
    table = FittedTable(
        title, columns, rows, MODEL_DROP_ORDER + (("parameters (exact)",) if wide else ())
    )
    legend = "params: M = 10^6, B = 10^9, T = 10^12 parameters (not bytes)"
    legend += "" if wide else "; exact counts with --wide"
    if not rows:
        if query:
            return Group(Text(f"No catalogue model id contains {safe_line(repr(query))}."))
        return Group(Text("The model catalogue is empty."))
    return Group(table, Text(legend, style="dim"))


# ------------------------------------------------------------------------------- offers


def plan_price(plan) -> str:
    """A plan's price with the time it buys: "on demand: 0.22 USD/h", "1-day commitment:
    25.92 USD/24 h (1.08 USD/h)"."""
    if plan.hours == 1:
        return f"{plan.name}: {plan.price:,.2f} {plan.currency}/h"
    per_hour = plan.price / plan.hours
    return (
        f"{plan.name}: {plan.price:,.2f} {plan.currency}/{plan.hours:g} h "
        f"({per_hour:,.2f} {plan.currency}/h)"
    )


OFFER_DROP_ORDER = ("link", "host", "provider", "lead time")


SAMPLE_MARK = "sample price, not a quote"


def offers_renderable(catalog, today=None, max_age_days: float | None = None) -> Group:
    """`vramtui offers`: one row per offer; each shipped sample says so in its row, and each
    price carries the date it was seen ("price to re-check" past `max_age_days` on `today`)."""
    import datetime

    from vramtui.price_age import (
        DEFAULT_PRICE_MAX_AGE_DAYS,
        RECHECK,
        price_is_stale,
        price_seen_on,
    )
    from vramtui.shortlist import is_illustrative

    today = today or datetime.date.today()
    if max_age_days is None:
        max_age_days = catalog.price_max_age_days
    if max_age_days is None:
        max_age_days = DEFAULT_PRICE_MAX_AGE_DAYS
    columns = [
        ListColumn("id"),
        ListColumn("cards"),
        ListColumn("link"),
        ListColumn("plans (price per period)"),
        ListColumn("lead time"),
        ListColumn("provider"),
        ListColumn("host"),
    ]
    rows = []
    samples = stale = 0
    for o in sorted(catalog.offers.values(), key=lambda o: o.id):
        host = (
            ", ".join(
                x
                for x in (
                    f"{o.host_ram_gb:g} GB RAM" if o.host_ram_gb is not None else "",
                    f"{o.vcpus} vCPU" if o.vcpus is not None else "",
                    f"{o.disk_gb:g} GB disk" if o.disk_gb is not None else "",
                )
                if x
            )
            or "not documented"
        )
        lead = (
            f"{o.schedule.lead_time_hours:g} h"
            if o.schedule and o.schedule.lead_time_hours is not None
            else "not stated"
        )
        plans = Text("\n".join(safe_text(plan_price(p)) for p in o.plans) or "no plan")
        if is_illustrative(o):
            samples += 1
            plans.append(f"\n{SAMPLE_MARK}", style="yellow")
        seen = price_seen_on(o)
        plans.append(f"\nseen {seen.isoformat() if seen else 'on an unknown date'}", style="dim")
        if price_is_stale(o, today, max_age_days):
            stale += 1
            plans.append(f"\n{RECHECK}", style="yellow")
        rows.append(
            [
                o.id,
                f"{o.gpu_count} x {o.gpu}",
                o.interconnect or "not documented",
                plans,
                lead,
                o.provider,
                host,
            ]
        )
    table = FittedTable(
        "rental offers (prices for the whole package; GB = 10^9 B)",
        columns,
        rows,
        OFFER_DROP_ORDER,
        show_lines=True,
    )
    legend = []
    if samples:
        legend.append(
            f"sample: illustrative sample data shipped with vramtui ({samples} offers); import "
            "your provider's offers with `vramtui offers import FILE`."
        )
    legend.append(
        f"seen: when the price was seen; {RECHECK}: seen more than {max_age_days:g} days "
        f"before {today.isoformat()}, or undated ({stale} offers; --price-max-age DAYS)."
    )
    return Group(table, *(Text(line, style="dim") for line in legend))


# --------------------------------------------------------------------------------- gpus

GPU_TITLE = "GPU catalogue (GB = 10^9 B, GiB = 2^30 B)"
# The float formats that set a card apart for sizing (weights and KV cache), widest first.
_NARROW_FLOATS = ("bf16", "fp8", "fp4")


def formats_cell(formats: Sequence[str]) -> str:
    """The formats in one short cell: the narrow float formats the card runs natively
    ("bf16 fp8 fp4"), else its narrowest float ("fp16" on a T4)."""
    narrow = [f for f in _NARROW_FLOATS if f in formats]
    if narrow:
        return " ".join(narrow)
    for f in ("fp16", "tf32", "fp32"):
        if f in formats:
            return f
    return "not catalogued"


def _gib_figure(f) -> str:
    if f is None:
        return "-"
    return f"{f.bytes / GIB_BYTES:,.2f}" + ("" if f.verified else "?")


def memory_cell(g) -> str:
    """ "CUDA total / NVML total" in GiB: "21.99 / 22.49 GiB"; "?" marks an unverified
    figure, "-" one not catalogued."""
    return f"{_gib_figure(g.cuda_total)} / {_gib_figure(g.nvml_total)} GiB"


def figure_cell(f) -> str:
    """One capacity figure for --wide: GiB, the exact bytes, and the figure as its source
    wrote it when that was not bytes."""
    if f is None:
        return "not catalogued"
    lines = [format_bytes(f.bytes, "gib"), f"= {format_bytes(f.bytes, 'bytes')}"]
    written = " ".join(f.as_written.split())
    if written != lines[0] and not re.fullmatch(r"[\d,]+(\s*B)?", written):
        lines.append(f"(source: {written})")
    if not f.verified:
        lines.append("unverified")
    return "\n".join(lines)


GPU_DROP_ORDER = ("formats", "name")
GPU_WIDE_DROP_ORDER = ("arch", "formats", "name", "nominal")


def gpus_renderable(catalog, wide: bool = False) -> Group:
    gpus = sorted(catalog.gpus.values(), key=lambda g: g.id)
    if wide:
        columns = [
            ListColumn("id"),
            ListColumn("name"),
            ListColumn("arch"),
            ListColumn("nominal"),
            ListColumn("NVML total", no_wrap=True),
            ListColumn("CUDA total", no_wrap=True),
            ListColumn("formats"),
        ]
        rows = [
            [
                g.id,
                g.name,
                g.architecture,
                g.nominal.as_written,
                figure_cell(g.nvml_total),
                figure_cell(g.cuda_total),
                " ".join(g.formats),
            ]
            for g in gpus
        ]
        return Group(FittedTable(GPU_TITLE, columns, rows, GPU_WIDE_DROP_ORDER, show_lines=True))
    columns = [
        ListColumn("id"),
        ListColumn("name"),
        ListColumn("CUDA / NVML total", "right", no_wrap=True),
        ListColumn("formats", no_wrap=True),
    ]
    rows = [[g.id, g.name, memory_cell(g), formats_cell(g.formats)] for g in gpus]
    legend = (
        "CUDA total: what PyTorch can allocate; NVML total: what nvidia-smi shows. "
        "? unverified figure, - not catalogued. formats: the bf16/fp8/fp4 the card runs "
        "natively, else its narrowest float. "
        "--wide: every format, nominal size, exact bytes, the figures as written."
    )
    return Group(FittedTable(GPU_TITLE, columns, rows, GPU_DROP_ORDER), Text(legend, style="dim"))
