"""The vramtui terminal app: spec form, itemised headroom ledger, shortlist."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Header, TabbedContent, TabPane

from vramtui.app.messages import CandidateSelected, FieldEdited
from vramtui.app.screens.dialogs import HelpScreen, PathPrompt, RecoverDraft
from vramtui.app.widgets.ledger_pane import LedgerPane
from vramtui.app.widgets.shortlist_pane import ShortlistPane
from vramtui.app.widgets.spec_form import SpecForm
from vramtui.config import UNITS, Config
from vramtui.drafts import discard_draft, draft_path, read_draft, write_draft
from vramtui.errors import VramtuiError
from vramtui.session import SizingSession

AUTOSAVE_DELAY_S = 1.0


class VramtuiApp(App):
    CSS_PATH = ["app.tcss"]
    TITLE = "vramtui"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="save"),
        Binding("f2", "save_as", "Save as", id="save_as"),
        Binding("ctrl+o", "open", "Open", id="open"),
        Binding("f4", "cycle_units", "Units", id="units"),
        Binding("f5", "show_tab('sizing')", "Sizing", id="tab.sizing"),
        Binding("f6", "show_tab('shortlist')", "Shortlist", id="tab.shortlist"),
        Binding("f1", "help", "Help", id="help"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(
        self,
        session: SizingSession,
        config: Config | None = None,
        offer_draft: bool = False,
        draft_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.config = config or Config()
        self.unit = self.config.units
        self.offer_draft = offer_draft
        self.draft_file = draft_file or draft_path()
        self._autosave_timer = None
        self.exit_note = ""

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        gpus = self.session.catalog.gpus if self.session.catalog else {}
        with TabbedContent(initial="sizing", id="tabs"):
            with TabPane("Sizing", id="sizing"):
                with Horizontal(id="sizing-row"):
                    yield SpecForm(self.session, id="form")
                    yield LedgerPane(gpus, id="ledger")
            with TabPane("Shortlist", id="shortlist"):
                yield ShortlistPane(id="shortlist-pane")
        yield Footer()

    def on_mount(self) -> None:
        if self.config.keymap:
            self.set_keymap(self.config.keymap)
        for warning in self.config.warnings:
            self.notify(warning, severity="warning", timeout=8)
        if self.session.catalog is not None:
            for problem in self.session.catalog.problems:
                self.notify(f"catalogue: {problem}", severity="warning", timeout=8)
        self._install_signal_handlers()
        self._refresh_all()
        if self.offer_draft:
            draft = read_draft(self.draft_file)
            if draft is not None:
                self.push_screen(RecoverDraft(draft.describe()), self._recover_answer)

    def _install_signal_handlers(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGHUP, signal.SIGTERM):
                loop.add_signal_handler(sig, self._on_hangup, sig)
        except (NotImplementedError, RuntimeError, AttributeError, ValueError):
            pass  # not on the main thread (tests) or no such signal on this platform

    # ------------------------------------------------------------------ state -> view

    def _refresh_all(self) -> None:
        results = self.session.results
        self.query_one(LedgerPane).show(results, self.unit)
        self.query_one(ShortlistPane).show(results.shortlist, self.unit)
        self._update_title()

    def _update_title(self) -> None:
        s = self.session
        name = str(s.path) if s.path else "unsaved spec"
        marks = []
        if s.dirty:
            marks.append("modified")
        if not s.is_valid:
            marks.append("invalid field: showing the last valid estimate")
        self.sub_title = name + (f" ({'; '.join(marks)})" if marks else "")

    # ------------------------------------------------------------------ edits

    async def on_field_edited(self, message: FieldEdited) -> None:
        outcome = self.session.set_field(message.path, message.text)
        form = self.query_one(SpecForm)
        if outcome.layout_changed:
            await form.rebuild()
        form.show_errors()
        if outcome.valid:
            self._refresh_all()
        else:
            self._update_title()
            if self.session.general_error:
                self.notify(self.session.general_error, severity="error")
        self._schedule_autosave()

    def on_candidate_selected(self, message: CandidateSelected) -> None:
        sl = self.session.results.shortlist
        if sl is None:
            return
        for c in sl.candidates:
            if c.offer.id == message.offer_id:
                self.query_one(LedgerPane).compare_with(c.gpu.id)

    def _schedule_autosave(self) -> None:
        if self._autosave_timer is not None:
            self._autosave_timer.stop()
        self._autosave_timer = self.set_timer(AUTOSAVE_DELAY_S, self.save_draft_now)

    def save_draft_now(self) -> None:
        if self.session.dirty:
            write_draft(self.session.form, self.session.texts, self.session.path, self.draft_file)

    def _on_hangup(self, sig: int) -> None:
        """A dropped SSH connection (SIGHUP) or a kill (SIGTERM): keep every edit, leave."""
        try:
            self.save_draft_now()
        finally:
            self.exit_note = (
                f"received {signal.Signals(sig).name}: draft saved to {self.draft_file}"
            )
            self.exit(return_code=0)

    # ------------------------------------------------------------------ actions

    def action_cycle_units(self) -> None:
        self.unit = UNITS[(UNITS.index(self.unit) + 1) % len(UNITS)]
        self._refresh_all()
        self.notify(f"units: {self.unit}", timeout=2)

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_help(self) -> None:
        rows = []
        for key, binding in self._bindings_by_id().items():
            keys = self.config.keymap.get(key, binding.key)
            rows.append((key, keys, binding.description))
        self.push_screen(HelpScreen(rows))

    def _bindings_by_id(self) -> dict[str, Binding]:
        return {b.id: b for b in self.BINDINGS if isinstance(b, Binding) and b.id}

    def action_save(self) -> None:
        if self.session.path is None:
            self.action_save_as()
            return
        self._save_to(self.session.path)

    def action_save_as(self) -> None:
        initial = str(self.session.path) if self.session.path else "spec.toml"
        self.push_screen(PathPrompt("Save spec as (TOML)", initial), self._save_answer)

    def _save_answer(self, path: str | None) -> None:
        if path:
            self._save_to(Path(path).expanduser())

    def _save_to(self, path: Path) -> None:
        try:
            saved = self.session.save(path)
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        discard_draft(self.draft_file)
        self._update_title()
        self.notify(f"saved {saved}")

    def action_open(self) -> None:
        self.push_screen(PathPrompt("Open spec (TOML)"), self._open_answer)

    async def _open_answer(self, path: str | None) -> None:
        if not path:
            return
        if self.session.dirty:
            self.save_draft_now()
        try:
            session = SizingSession.open(Path(path).expanduser(), self.session.catalog)
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        await self._replace_session(session)
        self.notify(f"opened {path}")

    async def _replace_session(self, session: SizingSession) -> None:
        self.session = session
        form = self.query_one(SpecForm)
        form.session = session
        await form.rebuild()
        self._refresh_all()

    async def _recover_answer(self, recover: bool | None) -> None:
        draft = read_draft(self.draft_file)
        if draft is None:
            return
        if recover:
            session = SizingSession.from_draft(draft, self.session.catalog)
            await self._replace_session(session)
            self.query_one(SpecForm).show_errors()
            self.notify("draft recovered")
        else:
            aside = self.draft_file.with_name("draft.set-aside.toml")
            self.draft_file.replace(aside)
            self.notify(f"draft set aside as {aside}")

    async def action_quit(self) -> None:
        if self.session.dirty:
            self.save_draft_now()
            self.exit_note = (
                f"unsaved changes kept as a draft ({self.draft_file}); "
                "vramtui offers to recover it at the next start"
            )
        else:
            discard_draft(self.draft_file)
        self.exit()

    # ------------------------------------------------------------------ command palette

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        yield SystemCommand("Save spec", "Write the spec as TOML (ctrl+s)", self.action_save)
        yield SystemCommand("Save spec as", "Choose a file for the spec", self.action_save_as)
        yield SystemCommand("Open spec", "Load a spec TOML file", self.action_open)
        yield SystemCommand("Cycle units", "GiB, GB, MiB, bytes", self.action_cycle_units)
        yield SystemCommand(
            "Show sizing", "Spec form and headroom ledger", lambda: self.action_show_tab("sizing")
        )
        yield SystemCommand(
            "Show shortlist",
            "Rental candidates and their evidence",
            lambda: self.action_show_tab("shortlist"),
        )
        yield SystemCommand("Help", "Keys, statuses and units", self.action_help)
