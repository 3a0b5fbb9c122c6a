"""The triage wizard: paste or open a log -> figures and stage (editable) -> single changes ->
apply one -> the attempt is logged in the spec; report its outcome when the job has run."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Label, Select, Static, TextArea

from vramtui.render import unit_label
from vramtui.safe_text import safe_line
from vramtui.triage.advice import fits_word
from vramtui.triage.event_list import headline, other_events, reported_event
from vramtui.triage.phase import PHASES
from vramtui.unit_text import in_unit
from vramtui.units import format_bytes


class TriageRequest(Message):
    """The user asked the app to do something with the triage state."""

    def __init__(self, action: str, value: object = None) -> None:
        super().__init__()
        self.action = action  # read | open | phase | apply | measured | outcome
        self.value = value


class TriagePane(Vertical):
    BINDINGS = [Binding("ctrl+r", "read", "Read log", id="triage.read")]

    def action_read(self) -> None:
        self.post_message(TriageRequest("read", self.query_one("#triage-log", TextArea).text))

    def compose(self) -> ComposeResult:
        with Horizontal(id="triage-input-row"):
            with Vertical(id="triage-paste-col"):
                yield Label("1. Paste what the job printed (or open a log file)")
                yield TextArea(id="triage-log", soft_wrap=False, show_line_numbers=False)
                with Horizontal(classes="triage-buttons"):
                    yield Button("Read (ctrl+r)", id="triage-read", variant="primary", compact=True)
                    yield Input(placeholder="path/to/job.log", id="triage-path", compact=True)
                    yield Button("Open log", id="triage-open", compact=True)
            with VerticalScroll(id="triage-reading"):
                yield Label("2. What the error says")
                with Horizontal(id="triage-phase-row"):
                    yield Label("stage ")
                    yield Select(
                        [(p, p) for p in PHASES],
                        id="triage-phase",
                        allow_blank=True,
                        compact=True,
                        prompt="(read a log)",
                    )
                    yield Label("  failed card ")
                    yield Select(
                        [],
                        id="triage-failed-gpu",
                        allow_blank=True,
                        compact=True,
                        prompt="(from the error)",
                    )
                yield Static("Nothing read yet.", id="triage-summary")
                yield Static(id="triage-figures")
        yield Label("3. Change one variable (estimated peak: from the error | from the ledger)")
        yield DataTable(id="triage-recs", cursor_type="row", zebra_stripes=True)
        with Horizontal(classes="triage-buttons"):
            yield Button(
                "Apply selected change", id="triage-apply", variant="warning", compact=True
            )
            yield Button("Record figures as measured", id="triage-measured", compact=True)
            yield Label(" last attempt:", classes="triage-outcome-label")
            yield Button("fixed", id="triage-fixed", compact=True)
            yield Button("still OOM", id="triage-still", compact=True)
            yield Button("other error", id="triage-other", compact=True)
        yield Static(id="triage-log-view")

    def on_mount(self) -> None:
        t = self.query_one("#triage-recs", DataTable)
        widths = {"change": 40, "error": 14, "ledger": 15, "fits": 11}
        for key, label in (
            ("n", "#"),
            ("variable", "variable"),
            ("error", "from the error"),
            ("ledger", "from the ledger"),
            ("fits", "fits"),
            ("change", "change"),
            ("recheck", "re-check"),
        ):
            t.add_column(label, key=key, width=widths.get(key))

    # ------------------------------------------------------------------ user -> app

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        bid = event.button.id
        if bid == "triage-read":
            self.post_message(TriageRequest("read", self.query_one("#triage-log", TextArea).text))
        elif bid == "triage-open":
            self.post_message(TriageRequest("open", self.query_one("#triage-path", Input).value))
        elif bid == "triage-apply":
            t = self.query_one("#triage-recs", DataTable)
            if t.row_count:
                self.post_message(TriageRequest("apply", t.cursor_row))
        elif bid == "triage-measured":
            self.post_message(TriageRequest("measured"))
        elif bid in ("triage-fixed", "triage-still", "triage-other"):
            outcome = {
                "triage-fixed": "fixed",
                "triage-still": "still out of memory",
                "triage-other": "other error",
            }[bid]
            self.post_message(TriageRequest("outcome", outcome))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "triage-path":
            event.stop()
            self.post_message(TriageRequest("open", event.value))

    def set_gpu_choices(self, gpus) -> None:
        """The catalogue cards the user can name as the one that failed."""
        self.query_one("#triage-failed-gpu", Select).set_options(
            [(safe_line(g.name), g.id) for g in gpus]
        )

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "triage-failed-gpu":
            event.stop()
            value = None if event.value is Select.NULL else str(event.value)
            self.post_message(TriageRequest("failed_gpu", value))
            return
        if event.select.id == "triage-phase":
            event.stop()
            if event.value is not Select.NULL:
                self.post_message(TriageRequest("phase", str(event.value)))

    # ------------------------------------------------------------------ app -> view

    def set_log_text(self, text: str) -> None:
        self.query_one("#triage-log", TextArea).text = text

    def show(self, session, unit: str) -> None:
        reading, advice = session.triage_reading, session.triage_advice
        summary = self.query_one("#triage-summary", Static)
        figures = self.query_one("#triage-figures", Static)
        table = self.query_one("#triage-recs", DataTable)
        table.clear()
        phase_select = self.query_one("#triage-phase", Select)
        if reading is None:
            summary.update("Nothing read yet.")
            figures.update("")
        elif not reading.is_oom:
            summary.update(
                Text(
                    safe_line(reading.not_oom_reason or "No out-of-memory error in this text."),
                    style="yellow",
                )
            )
            figures.update("")
        else:
            ev = reading.primary
            text = Text()
            text.append(safe_line(headline(ev)), style="bold red")
            if ev.gpu_index is not None:
                text.append(f" on GPU {ev.gpu_index}")
            if len(reading.events) > 1:
                text.append(f" ({safe_line(reported_event(reading))})\n")
            else:
                text.append(f" (line {ev.line_no})\n")
            ph = reading.phase
            text.append(f"stage {ph.phase}: ", style="bold")
            text.append(safe_line(ph.reason))
            if ph.evidence:
                text.append(f"\nline {ph.line_no}: {safe_line(ph.evidence)}", style="dim")
            others = other_events(reading)
            if others:
                text.append("\nother events in the text (not acted on):", style="bold")
                for line in others:
                    text.append(f"\n  {safe_line(line)}", style="dim")
            if advice is not None:
                if advice.stage_question:
                    text.append(
                        f"\n{advice.stage_question}? Pick it in the stage list above; "
                        "until then only changes that hold for every stage are listed.",
                        style="bold",
                    )
                for line in advice.mismatch_lines:
                    text.append(f"\nmismatch: {safe_line(line)}", style="bold yellow")
                text.append(f"\n{safe_line(in_unit(advice.deviation, unit))}")
                if advice.capacity_bytes:
                    text.append(
                        f"\n'fits' is judged against {_shown(advice.capacity_bytes, unit)}, "
                        f"{advice.capacity_source}",
                        style="dim",
                    )
                else:
                    text.append(
                        "\nthe failed card is unknown (the error prints no capacity): name it "
                        "in the failed-card list so that no smaller card is proposed",
                        style="yellow",
                    )
                for w in advice.warnings:
                    text.append(f"\nwarning: {safe_line(in_unit(w, unit))}", style="yellow")
            summary.update(text)
            with phase_select.prevent(Select.Changed):
                phase_select.value = ph.phase
            ft = Table(
                title="figures (measured by the framework at the failure)", title_justify="left"
            )
            ft.add_column("figure")
            ft.add_column("as written")
            ft.add_column(unit_label(unit), justify="right")
            for key, value in ev.figures.items():
                shown = _shown(value, unit)
                ft.add_row(
                    Text(safe_line(key.removesuffix("_bytes").replace("_", " "))),
                    Text(safe_line(ev.as_written.get(key, ""))),
                    shown,
                )
            for key, values in ev.figure_lists.items():
                name = key.removesuffix("_bytes").replace("_", " ").removesuffix("es")
                written = ev.lists_as_written.get(key, ())
                for k, value in enumerate(values):
                    ft.add_row(
                        Text(safe_line(f"{name} {k + 1}")),
                        Text(safe_line(written[k] if k < len(written) else "")),
                        _shown(value, unit),
                    )
            for key, value in ev.tokens.items():
                ft.add_row(key.replace("_", " "), "", f"{value:,} tokens")
            figures.update(ft)
        if advice is not None:
            shown_unit = unit if unit != "bytes" else "gib"
            for i, r in enumerate(advice.recommendations, 1):
                table.add_row(
                    str(i),
                    r.variable,
                    Text(_error_column(r, shown_unit), justify="right"),
                    Text(_peak(r.ledger_peak_bytes, shown_unit), justify="right"),
                    fits_word(r),
                    Text(
                        safe_line(in_unit(r.change, shown_unit)),
                        overflow="ellipsis",
                        no_wrap=True,
                    ),
                    Text(safe_line(r.recheck)),
                )
        self._show_log(session.spec, unit)

    def _show_log(self, spec, unit: str = "gib") -> None:
        view = self.query_one("#triage-log-view", Static)
        if not spec.triage and not spec.measured:
            view.update(
                Text(
                    "4. Attempts are logged in the spec ([[triage]]) with their "
                    "outcome; save the spec to keep them.",
                    style="dim",
                )
            )
            return
        t = Table(title="triage log (kept in the spec)", title_justify="left")
        for col in ("#", "time", "stage", "variable", "change", "predicted", "outcome"):
            t.add_column(col)
        for i, a in enumerate(spec.triage, 1):
            t.add_row(
                str(i),
                a.time,
                a.phase,
                a.variable,
                a.change,
                _shown(a.predicted_peak_bytes, unit) if a.predicted_peak_bytes else "-",
                a.outcome,
            )
        if spec.measured:
            t.caption = f"{len(spec.measured)} measured figure(s) stored with the spec"
        view.update(t)


def _error_column(r, unit: str) -> str:
    """The error's prediction: a peak, or (a KV cache too small for max_model_len) the KV one
    sequence needs against the room the engine has for it."""
    if r.error_kv_need_bytes is not None and r.error_kv_room_bytes is not None:
        return (
            f"KV {format_bytes(r.error_kv_need_bytes, unit)} of "
            f"{format_bytes(r.error_kv_room_bytes, unit)}"
        )
    return _peak(r.error_peak_bytes, unit)


def _peak(value: int | None, unit: str) -> str:
    return format_bytes(value, unit) if value is not None else "-"


def _shown(n_bytes: int, unit: str) -> str:
    """A figure in the display unit: exact bytes in bytes mode, else GiB, GB or MiB."""
    return f"{n_bytes:,} B" if unit == "bytes" else format_bytes(n_bytes, unit)
