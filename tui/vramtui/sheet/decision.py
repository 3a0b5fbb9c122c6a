"""The shortlist decision: the ranked fit offers with their evidence in short, what to check on
the cheapest candidates that need verification, and why the others are excluded.

The shortlist ranks; the choice is the user's, a business decision kept apart from the
estimates and measurements. Evidence is cited as a source label with its version and date;
the full source text (often a long URL and a quote) stays in the catalogue, and in the HTML
label's tooltip.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from vramtui.sheet.blocks import (
    EXCLUDED,
    FIT,
    VERIFY,
    Block,
    Bullets,
    Cell,
    Cite,
    Inline,
    Mark,
    Para,
    Section,
    Strong,
    Table,
)
from vramtui.sheet.figures import gib

DECISION_NOTE = (
    "The shortlist ranks; the choice is yours: a business decision, kept apart from the "
    "estimates and measurements."
)
SHOW_FIT = 3  # ranked fit candidates shown with their evidence
SHOW_VERIFY = 3  # candidates needing verification shown with what to check
LABEL_CHARS = 56  # a source label longer than this is cut at a word

_URL = re.compile(r"https?://[^\s)(,;'\"]+")


def short_url(url: str) -> str:
    """The domain and the last two path segments: "github.com/.../issues/205"."""
    parts = urlsplit(url)
    host = parts.netloc.removeprefix("www.")
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) <= 2:
        return "/".join([host, *segments])
    return "/".join([host, "\u2026", *segments[-2:]])


def source_label(source: str) -> str:
    """A long evidence source in short: its label (up to a quote, a URL or an aside), and the
    first URL as its domain and path tail."""
    url = _URL.search(source)
    label = re.split(r" quoted in |https?://", source, maxsplit=1)[0]
    quoted = re.compile(r"\s*(?<![A-Za-z])'[^']*'(?![A-Za-z])")
    if len(label) > LABEL_CHARS or any("(" in q or ";" in q for q in quoted.findall(label)):
        label = quoted.sub("", label)  # a long label loses its quotes first
    label = re.split(r" \(|; |, see ", label, maxsplit=1)[0].strip(" ,;:.")
    label = re.sub(r"\s+(for|of|in|from|on)$", "", label)
    if len(label) > LABEL_CHARS:
        label = label[:LABEL_CHARS].rsplit(" ", 1)[0].rstrip(" ,;:") + "\u2026"
    if url is not None:
        link = short_url(url.group(0).rstrip("."))
        return f"{label}, {link}" if label else link
    return label


def cost_text(c) -> str:
    return f"{c.cost.total:,.2f} {c.cost.currency}" if c.cost else "no price"


def _lead(c) -> str:
    return f"{c.lead_time_hours:g} h" if c.lead_time_hours is not None else "not documented"


def _figure_cell(c) -> Cell:
    """The usable-memory figure the fit rests on, cited in short."""
    mem = next((r for r in c.requirements if r.key == "memory"), None)
    parts: list[Inline] = [Strong(f"#{c.rank}"), ": "]
    figures = [ev for ev in (mem.evidence if mem else ()) if ev.get("kind") == "catalogue"]
    for i, ev in enumerate(figures):
        parts += ["; " if i else "", f"{ev['claim']} ({ev['scope']}; "]
        parts += [Cite(source_label(ev["source"]), ev["source"]), ")"]
    if not figures:
        parts.append("no catalogued usable-memory figure")
    return tuple(parts)


def _offer_evidence(fits) -> Cell:
    """The offers' own evidence (price list, stock), each distinct source once."""
    seen: dict[tuple, list[int]] = {}
    for c in fits:
        for ev in c.offer.evidence[:1]:
            key = (ev.source, ev.version, ev.date.isoformat() if ev.date else "")
            seen.setdefault(key, []).append(c.rank)
    if not seen:
        return "Offer evidence: none documented."
    parts: list[Inline] = ["Offer evidence: "]
    for i, ((source, version, date), ranks) in enumerate(seen.items()):
        which = "" if len(seen) == 1 else " (" + ", ".join(f"#{r}" for r in ranks) + ")"
        parts += ["; " if i else "", Cite(source_label(source), source)]
        parts.append(f", {', '.join(x for x in (version, date) if x)}{which}")
    return tuple(parts)


def shortlist_line(sl) -> Cell:
    """The shortlist in one line, for the summary."""
    from vramtui.shortlist import EXCLUDED as SL_EXCLUDED
    from vramtui.shortlist import FIT as SL_FIT
    from vramtui.shortlist import VERIFY as SL_VERIFY

    fits = sl.with_status(SL_FIT)
    top = f" (#1: {fits[0].offer.title}, {cost_text(fits[0])})" if fits else ""
    return (
        "Shortlist: ",
        Mark(FIT, f"{len(fits)} fit"),
        top + ", ",
        Mark(VERIFY, f"{len(sl.with_status(SL_VERIFY))} need verification"),
        ", ",
        Mark(EXCLUDED, f"{len(sl.with_status(SL_EXCLUDED))} excluded"),
        "; it ranks, the choice is yours",
    )


def decision_section(sl) -> Section:
    title = "Shortlist decision"
    if sl is None:
        return Section("shortlist", title, (Para(("No shortlist was computed (no catalogue).",)),))
    from vramtui.shortlist import EXCLUDED as SL_EXCLUDED
    from vramtui.shortlist import FIT as SL_FIT
    from vramtui.shortlist import VERIFY as SL_VERIFY

    blocks: list[Block] = [
        Para(
            (
                (
                    f"{len(sl.candidates)} offers priced for {sl.days:g} day(s) "
                    f"({sl.days_source}); the fit ones ranked by total cost, margin, lead time "
                    "(not speed). "
                ),
                Strong(DECISION_NOTE),
            )
        )
    ]
    fits = sl.with_status(SL_FIT)
    if fits:
        shown = fits[:SHOW_FIT]
        rows = [
            (
                str(c.rank),
                f"{c.offer.title}, {c.offer.provider}",
                cost_text(c),
                f"{gib(c.effective_margin_bytes)} ({c.effective_margin_fraction:.0%})",
                _lead(c),
            )
            for c in shown
        ]
        blocks.append(
            Table(
                ("#", "fit offer", "total cost", "margin (estimated)", "lead"),
                tuple(rows),
                frozenset({0, 2, 3}),
            )
        )
        evidence: list[Cell] = [_figure_cell(c) for c in shown]
        evidence.append(_offer_evidence(shown))
        if len(fits) > SHOW_FIT:
            rest = fits[SHOW_FIT:]
            evidence.append(
                f"Also fit: {len(rest)} more (#{rest[0].rank} to #{rest[-1].rank}, from "
                f"{cost_text(rest[0])})."
            )
        blocks.append(Bullets(tuple(evidence)))
    else:
        blocks.append(Para((Mark(EXCLUDED, "No candidate is fit on every requirement."),)))
    verify = sl.with_status(SL_VERIFY)
    if verify:
        shown = verify[:SHOW_VERIFY]
        items: list[Cell] = [
            (
                Strong(c.offer.title),
                f", {cost_text(c)}: "
                + "; ".join(r.condition or f"{r.name}: {r.detail}" for r in c.conditions),
            )
            for c in shown
        ]
        more = len(verify) - len(shown)
        lead = f"the {len(shown)} cheapest" if more else "all"
        blocks.append(
            Para(
                (
                    Mark(VERIFY, f"{len(verify)} need verification"),
                    f" ({lead}, with what to check"
                    + (f"; {more} more in the shortlist" if more else "")
                    + "):",
                )
            )
        )
        blocks.append(Bullets(tuple(items)))
    excluded = sl.with_status(SL_EXCLUDED)
    if excluded:
        by_req: dict[str, list] = {}
        for c in excluded:
            for r in c.failing:
                by_req.setdefault(r.name, []).append((r, c))
        reasons = []
        for name, pairs in by_req.items():
            text = f"{name} ({len(pairs)}"
            if pairs[0][0].key == "memory":
                usable = sorted(c.usable_bytes for _, c in pairs)
                span = (
                    gib(usable[0])
                    if usable[0] == usable[-1]
                    else (f"{gib(usable[0])} to {gib(usable[-1])}")
                )
                text += f"; {span} usable"
            reasons.append(text + ")")
        blocks.append(
            Para(
                (
                    Mark(EXCLUDED, f"{len(excluded)} excluded"),
                    " by an established failure (a preference never offsets one): "
                    + "; ".join(reasons)
                    + ".",
                )
            )
        )
    if sl.problems:
        blocks.append(Bullets(tuple(("Catalogue problem: ", p) for p in sl.problems)))
    return Section("shortlist", title, tuple(blocks))
