"""The vramtui terminal app: spec form, itemised headroom ledger, shortlist."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.widgets import Footer, Header, TabbedContent, TabPane, Tabs

from vramtui.app.feed_actions import FeedActions
from vramtui.app.fit_actions import FitActions
from vramtui.app.messages import CandidateSelected, FieldEdited, ModelFetchRequested
from vramtui.app.palette import PaletteCommands
from vramtui.app.screens.dialogs import ConfirmDialog, HelpScreen, PathPrompt, RecoverDraft
from vramtui.app.triage_actions import TriageActions
from vramtui.app.widgets.feed_pane import FeedPane
from vramtui.app.widgets.fit_pane import FitPane
from vramtui.app.widgets.ledger_pane import LedgerPane
from vramtui.app.widgets.shortlist_pane import ShortlistPane
from vramtui.app.widgets.spec_form import SpecForm
from vramtui.app.widgets.triage_pane import TriagePane
from vramtui.config import UNITS, Config
from vramtui.drafts import (
    UNREADABLE_DIR,
    DraftError,
    DraftSlot,
    drafts_dir,
    is_held,
    load_draft,
    name_for_spec,
    printable,
    recoverable_drafts,
    set_aside,
)
from vramtui.errors import VramtuiError
from vramtui.fsutil import user_path
from vramtui.safe_text import safe_line, safe_text
from vramtui.session import SizingSession

AUTOSAVE_DELAY_S = 1.0
# Edits that also set other fields (switch_task fills the training table, weights_for_format
# the format's own keys): the form's other inputs are refreshed after them.
SETS_OTHER_FIELDS = frozenset({"task.kind", "weights.format"})


class VramtuiApp(FeedActions, FitActions, TriageActions, PaletteCommands, App):
    # Absolute: Textual resolves a relative CSS_PATH against the module of the class in use,
    # so a subclass elsewhere (a benchmark, a test) would look for bench/app.tcss.
    CSS_PATH = [Path(__file__).with_name("app.tcss")]
    TITLE = "vramtui"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]
    BINDINGS = [
        # Help first: the footer shows bindings in this order and cuts the tail at 80 columns.
        Binding("f1", "help", "Help", id="help", priority=True),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        Binding("q", "quit", "Quit", id="quit_q", show=False),  # an input takes q as a letter
        Binding("ctrl+s", "save", "Save", id="save"),
        Binding("f2", "save_as", "Save as", id="save_as"),
        Binding("ctrl+o", "open", "Open", id="open"),
        Binding("f3", "undo", "Undo", id="undo", priority=True),
        Binding("f4", "cycle_units", "Units", id="units"),
        Binding("f5", "show_tab('sizing')", "Sizing", id="tab.sizing"),
        Binding("f6", "show_tab('shortlist')", "Shortlist", id="tab.shortlist"),
        Binding("f7", "show_tab('triage')", "Triage", id="tab.triage"),
        Binding("f8", "show_tab('feed')", "Feed", id="tab.feed"),
        Binding("f10", "show_tab('fit')", "Fit", id="tab.fit"),
        Binding("f9", "import_measurements", "Import", id="measure_import"),
        # Priority: a focused text field (the Sizing tab's default) would take ctrl+e as
        # end-of-line; `end` still does that. Inside a dialog the field keeps the key.
        Binding("ctrl+e", "export_sheet", "Sheet", id="export_sheet", priority=True),
    ]

    def __init__(
        self,
        session: SizingSession,
        config: Config | None = None,
        offer_draft: bool = False,
        draft_file: Path | None = None,
        draft_dir: Path | None = None,
        feed_settings=None,
        initial_tab: str = "sizing",
    ) -> None:
        super().__init__()
        self.session = session
        self.config = config or Config()
        self.unit = self.config.units
        self.offer_draft = offer_draft
        # One draft per instance, locked while it lives (vramtui.drafts). A given draft_file
        # stays this instance's draft whatever spec it edits; otherwise the draft follows the
        # spec's path (a new name after open / save as).
        self.draft_dir = draft_dir or (draft_file.parent if draft_file else drafts_dir())
        self._fixed_draft = draft_file is not None
        self._slot = (
            DraftSlot.fixed(draft_file)
            if draft_file is not None
            else DraftSlot.claim(session.path, self.draft_dir)
        )
        self._draft_entries: list = []  # the recoverable drafts the start-up dialog lists
        self._draft_failed = ""  # why the last autosave failed ("" when it worked)
        self._edit_note = ""  # what an edit also changed (in the title until another field)
        self._edit_note_path = ""
        self._quit_armed = False  # ctrl+q pressed once while the draft could not be written
        self._autosave_timer = None
        self.feed_settings = feed_settings
        self.initial_tab = initial_tab
        self._feed = None
        self._tracker = None
        self._last_feed_draw = 0.0
        self._feed_timer_set = False
        self._feed_stopped = False
        self._tab_focus: dict[str, object] = {}  # tab id -> the widget focused when it was left
        self._ledger_shown: tuple | None = None  # (estimate, unit) the ledger pane shows
        self._shortlist_shown: tuple | None = None  # (shortlist, unit) the shortlist pane shows
        self.exit_note = ""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity="information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Notifications carry user text (paths, catalogue problems, errors): shown as written,
        never as markup, and with every control character made visible."""
        super().notify(
            safe_text(str(message)),
            title=safe_line(title),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        gpus = self.session.catalog.gpus if self.session.catalog else {}
        # Kept as attributes: App.query_one searches only the active screen, which is a dialog
        # while one is open (recover draft, help) and none while the app shuts down.
        self.form = SpecForm(self.session, id="form")
        # The card to compare with: chosen once, at start-up (the top-ranked fit, else the
        # ledger's default), then only by the user (the list, or a move in the shortlist).
        sl = self.session.results.shortlist
        top = next((c for c in sl.candidates if c.rank), None) if sl is not None else None
        self.ledger_pane = LedgerPane(gpus, id="ledger", compare=top.gpu.id if top else None)
        self.shortlist_pane = ShortlistPane(id="shortlist-pane")
        self.triage_pane = TriagePane(id="triage-pane")
        self.feed_pane = FeedPane(id="feed-pane")
        self.fit_pane = FitPane(gpus, self.session.catalog, id="fit-pane")
        with TabbedContent(initial="sizing", id="tabs") as tabs:
            self.tabs = tabs
            with TabPane("Sizing", id="sizing"):
                with Horizontal(id="sizing-row"):
                    yield self.form
                    yield self.ledger_pane
            with TabPane("Shortlist", id="shortlist"):
                yield self.shortlist_pane
            with TabPane("Triage", id="triage"):
                yield self.triage_pane
            with TabPane("Feed", id="feed"):
                yield self.feed_pane
            with TabPane("Fit", id="fit"):
                yield self.fit_pane
        yield Footer()

    def on_mount(self) -> None:
        if self.config.keymap:
            self.set_keymap(self.config.keymap)
        for warning in self.config.warnings:
            self.notify(warning, severity="warning", timeout=8)
        if self.session.catalog is not None:
            for problem in self.session.catalog.problems:
                self.notify(f"catalogue: {problem}", severity="warning", timeout=8)
            self.triage_pane.set_gpu_choices(
                sorted(self.session.catalog.gpus.values(), key=lambda g: g.name.lower())
            )
        self._install_signal_handlers()
        self._refresh_all()
        if self.initial_tab != "sizing":
            self.call_after_refresh(self.action_show_tab, self.initial_tab)
        else:
            self.call_after_refresh(self._focus_first_field)
        if self.offer_draft:
            self._offer_drafts()

    def _focus_first_field(self) -> None:
        """Keyboard first: start in the form's first input, not on the tab bar."""
        if self.screen is not self.screen_stack[0]:
            return  # a dialog (recover draft) is up: leave its focus alone
        if self.focused is not None and not isinstance(self.focused, Tabs):
            return  # the user (or a test) has already chosen where to be
        first = next(iter(self.form.query("Input, Select")), None)
        if first is not None:
            first.focus()

    def _install_signal_handlers(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGHUP, signal.SIGTERM):
                loop.add_signal_handler(sig, self._on_hangup, sig)
        except (NotImplementedError, RuntimeError, AttributeError, ValueError):
            pass  # not on the main thread (tests) or no such signal on this platform

    # ------------------------------------------------------------------ state -> view

    def _refresh_all(self) -> None:
        # Redraw a pane only when what it shows changed: an edit that leaves the estimate as it
        # was (a name, a campaign field under a manual reserve) costs no table rebuild and no
        # screen re-layout. Estimates and shortlists are frozen dataclasses, compared by value.
        results = self.session.results
        ledger = (results.estimate, results.spec.measured, self.unit)
        if ledger != self._ledger_shown:
            self.ledger_pane.show(results, self.unit)
            self._ledger_shown = ledger
        shortlist = (results.shortlist, self.unit)
        if shortlist != self._shortlist_shown:
            self.shortlist_pane.show(results.shortlist, self.unit)
            self._shortlist_shown = shortlist
        triage = (
            self.session.triage_reading,
            self.session.triage_advice,
            results.spec.triage,
            results.spec.measured,
            self.unit,
        )
        if triage != getattr(self, "_triage_shown", None):
            self.triage_pane.show(self.session, self.unit)
            self._triage_shown = triage
        self._show_fit()  # searches only while the Fit tab is shown
        self._update_title()

    def _update_title(self) -> None:
        s = self.session
        name = str(s.path) if s.path else "unsaved spec"
        marks = []
        if s.dirty:
            marks.append("modified")
        if not s.is_valid:
            marks.append("invalid field: showing the last valid estimate")
        if self._draft_failed and s.dirty:
            marks.append("draft not saved")
        if self._edit_note:
            marks.append(self._edit_note + " (F3 undo)")
        self.sub_title = safe_line(name + (f" ({'; '.join(marks)})" if marks else ""))

    # ------------------------------------------------------------------ edits

    async def on_field_edited(self, message: FieldEdited) -> None:
        outcome = self.session.set_field(message.path, message.text)
        if not outcome.changed:
            return  # an input reporting the text it already held (e.g. on mount)
        # What the edit also changed stays in the title while the user keeps typing into the
        # same field (each key is an edit), and goes with the first edit elsewhere.
        if outcome.notes:
            self._edit_note, self._edit_note_path = "; ".join(outcome.notes), message.path
        elif message.path != self._edit_note_path:
            self._edit_note = ""
        for note in outcome.notes:
            self.notify(f"{note}. F3 undoes it.", title="Also changed", timeout=12)
        form = self.form
        if outcome.layout_changed:
            await form.sync_rows()
        if outcome.layout_changed or message.path in SETS_OTHER_FIELDS or outcome.notes:
            form.refresh_values(skip=message.path)
        else:
            form.show_defaults()  # llama.cpp's n_ctx and slots follow lengths and concurrency
        form.show_errors()
        if outcome.valid:
            self._refresh_all()
        else:
            self._update_title()
            if self.session.general_error:
                self.notify(self.session.general_error, severity="error")
        self._schedule_autosave()

    def on_model_fetch_requested(self, message: ModelFetchRequested) -> None:
        """Enter in the model field: a model found nowhere else is asked of the Hub (its
        config.json and safetensors headers), in a thread; the form is recomputed after."""
        error = self.session.errors.get("model", "")
        if "press Enter in the model field" not in error:
            return  # found already, or refused for another reason: nothing to fetch
        from vramtui.spec import spec_from_dict

        try:
            spec = spec_from_dict(self.session.form, "the form")
        except VramtuiError:
            return
        base = self.session.path.parent if self.session.path else None
        self.notify(f"asking the Hub for {safe_line(spec.model.label)}", timeout=4)
        self.run_worker(lambda: self._fetch_model(spec.model, base), thread=True, group="hub-fetch")

    def _fetch_model(self, model, base) -> None:
        from vramtui.models.resolve import resolve_model_ref

        try:
            resolve_model_ref(model, base, hub=True)
            problem = None
        except VramtuiError as exc:
            problem = str(exc)
        self.call_from_thread(self._model_fetched, problem)

    async def _model_fetched(self, problem: str | None) -> None:
        if problem is not None:
            self.session.errors["model"] = problem
            self.form.show_errors()
            self.notify(problem, severity="error", timeout=12)
            return
        outcome = self.session.revalidate()  # finds what was fetched in the cache
        self.form.refresh_values()
        self.form.show_errors()
        if outcome.valid:
            self._refresh_all()
        else:
            self._update_title()
        self._schedule_autosave()

    async def action_undo(self) -> None:
        """Take back the last change to the spec (a field edit, a task switch and what it
        switched with it, an applied triage change)."""
        outcome = self.session.undo()
        if outcome is None:
            self.notify("nothing to undo", severity="warning")
            return
        self._edit_note = ""
        form = self.form
        if outcome.layout_changed:
            await form.sync_rows()
        form.refresh_values()
        form.show_errors()
        if outcome.valid:
            self._refresh_all()
        else:
            self._update_title()
        self.notify("undone: the spec is back to the previous version", timeout=4)
        self._schedule_autosave()

    def on_candidate_selected(self, message: CandidateSelected) -> None:
        # Follow the shortlist only when the user moves in it: a rebuild after an edit (or the
        # start-up) re-highlights its first row, and must not replace the card they chose.
        focused = self.focused
        if focused is None or focused.id != "shortlist-table":
            return
        sl = self.session.results.shortlist
        if sl is None or not self.ledger_pane.is_attached:
            return
        for c in sl.candidates:
            if c.offer.id == message.offer_id:
                self.ledger_pane.compare_with(c.gpu.id)

    def _schedule_autosave(self) -> None:
        if self._autosave_timer is not None:
            self._autosave_timer.stop()
        self._autosave_timer = self.set_timer(AUTOSAVE_DELAY_S, self.save_draft_now)

    @property
    def draft_file(self) -> Path:
        """This instance's draft file (it exists only while there are unsaved edits)."""
        return self._slot.path

    def save_draft_now(self) -> bool:
        """Write the draft when there are unsaved edits; True when they are on disk (or there
        is nothing to keep). A failure (state dir unwritable, disk full) warns once and
        leaves the app running: ctrl+s still saves the spec itself."""
        if not self.session.dirty:
            return True
        try:
            self._slot.write(self.session.form, self.session.texts, self.session.path)
        except (OSError, ValueError, TypeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            if not self._draft_failed:
                self.notify(
                    f"the draft cannot be saved to {self.draft_file.parent} ({reason}); your "
                    "edits are only in this window: ctrl+s saves the spec",
                    severity="warning",
                    timeout=15,
                    markup=False,
                )
            self._draft_failed = reason
            self._update_title()
            return False
        if self._draft_failed:
            self._draft_failed = ""
            self._update_title()
        return True

    def _on_hangup(self, sig: int) -> None:
        """A dropped SSH connection (SIGHUP) or a kill (SIGTERM): keep every edit, leave."""
        name = signal.Signals(sig).name
        try:
            if not self.session.dirty:
                self.exit_note = f"received {name}: no unsaved changes"
            elif self.save_draft_now():
                self.exit_note = f"received {name}: draft saved to {self.draft_file}"
            else:
                self.exit_note = (
                    f"received {name}: the draft could not be saved ({self._draft_failed})"
                )
        finally:
            self.stop_feed()
            self._exit_soon_regardless()
            self.exit(return_code=0)

    @staticmethod
    def _exit_soon_regardless(after_s: float = 5.0) -> None:
        """After a hang-up the terminal is gone and restoring it can block; the draft is
        already on disk, so make sure the process ends even then (no orphan on the node)."""
        import os
        import threading

        timer = threading.Timer(after_s, os._exit, args=(0,))
        timer.daemon = True
        timer.start()

    # ------------------------------------------------------------------ actions

    def action_cycle_units(self) -> None:
        self.unit = UNITS[(UNITS.index(self.unit) + 1) % len(UNITS)]
        self._refresh_all()
        self.notify(f"units: {self.unit}", timeout=2)

    def action_show_tab(self, tab: str) -> None:
        """Show a tab and move the focus into it. Focus left in the hidden pane would be moved
        to that pane's next widget, and TabbedContent shows the pane of a focused widget: the
        switch would bounce back (F5 from the shortlist table stayed on the shortlist)."""
        if self.tabs.active == tab:
            return
        focused = self.focused
        if focused is not None and self.tabs.active:
            left = self.tabs.get_pane(self.tabs.active)
            if left in focused.ancestors:
                self._tab_focus[self.tabs.active] = focused
        self.tabs.active = tab
        target = self._tab_focus.get(tab)
        if target is None or not target.is_attached:
            target = {
                # the form is no focus stop itself: its first field is
                "sizing": next(iter(self.form.query("Input, Select")), self.form),
                "shortlist": self.shortlist_pane.table,
                "triage": self.triage_pane.query_one("#triage-log"),
                "feed": self.feed_pane.query_one("#feed-stage"),
                "fit": self.fit_pane.query_one("#fit-table"),
            }[tab]
        if tab == "feed":
            self._start_feed()
        target.focus()

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
            self._save_to(user_path(path))

    def _save_to(self, path: Path) -> None:
        try:
            saved = self.session.save(path)
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        self._slot.discard()  # this instance's draft only: another's edits stay where they are
        self._draft_failed = ""
        self._quit_armed = False
        self._follow_spec_path()
        self._update_title()
        self.notify(f"saved {saved}")
        if self.session.save_warning:
            self.notify(self.session.save_warning, severity="warning", timeout=10)

    def _follow_spec_path(self) -> None:
        """After save as / open the spec has another path: so has this instance's draft."""
        if self._fixed_draft:
            return
        old = self._slot
        if self.session.path is not None and old.path.stem.startswith(
            name_for_spec(self.session.path)
        ):
            return
        self._slot = DraftSlot.claim(self.session.path, self.draft_dir)
        old.release()

    def action_open(self) -> None:
        self.push_screen(PathPrompt("Open spec (TOML)"), self._open_answer)

    async def _open_answer(self, path: str | None) -> None:
        if not path:
            return
        try:
            session = SizingSession.open(user_path(path), self.session.catalog)
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        if self.session.dirty:
            # The unsaved edits belong to the other spec: keep them apart, never overwritten
            # by the next autosave nor removed by a clean quit.
            if not self.save_draft_now():
                self.notify(
                    "the unsaved edits of this spec cannot be kept as a draft: save them "
                    "(ctrl+s) before opening another spec",
                    severity="error",
                    timeout=10,
                )
                return
            aside = self._slot.set_aside()
            if aside is not None:
                self.notify(
                    f"unsaved edits of the previous spec kept as {aside}", timeout=10, markup=False
                )
        await self._replace_session(session)
        self._follow_spec_path()
        self.notify(f"opened {path}")

    # ------------------------------------------------------------------ measurements, sheet

    def action_import_measurements(self) -> None:
        self.push_screen(
            PathPrompt("Import measurements: probe file (JSON lines) or vLLM log"),
            self._import_answer,
        )

    def _import_answer(self, path: str | None) -> None:
        if not path:
            return
        try:
            result, added = self.session.import_measurements(user_path(path))
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        repeats = len(result.measurements) - added
        message = f"{result.summary()}: {added} new" + (
            f", {repeats} already stored" if repeats else ""
        )
        if result.skipped:
            message += f"; {len(result.skipped)} skipped (first: {result.skipped[0]})"
        for warning in result.warnings:
            self.notify(warning, severity="warning", timeout=10)
        self.notify(message + ("; unsaved: ctrl+s to keep them" if added else ""), timeout=10)
        self._refresh_all()
        self.action_show_tab("sizing")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "export_sheet" and isinstance(self.screen, ModalScreen):
            return False
        return True

    def action_export_sheet(self) -> None:
        stem = self.session.path.stem if self.session.path else "sizing-sheet"
        self.push_screen(
            PathPrompt("Export the sizing sheet (FILE.md or FILE.html)", f"{stem}-sheet.md"),
            self._export_answer,
        )

    def _export_answer(self, path: str | None) -> None:
        if not path:
            return
        from vramtui.sheet.command import save_sheet
        from vramtui.sheet.model import build_sheet

        results = self.session.results
        target = user_path(path)
        try:
            sheet = build_sheet(
                results.spec,
                results.arch,
                results.estimate,
                results.shortlist,
                spec_source=self.session.path.name if self.session.path else "unsaved spec",
                checkpoint=results.checkpoint,
            )
            save_sheet(sheet, target)
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        self.notify(f"sizing sheet written to {target}")

    def on_unmount(self) -> None:
        self.stop_feed()
        self.release_draft()

    async def _replace_session(self, session: SizingSession) -> None:
        self.session = session
        form = self.form
        form.session = session
        await form.rebuild()
        self._refresh_all()

    # ------------------------------------------------------------------ drafts at start-up

    def _offer_drafts(self) -> None:
        """List every draft no live instance holds: recover one, set it aside, or skip."""
        entries, notes = recoverable_drafts(self.draft_dir)
        for note in notes:
            self.notify(
                f"unreadable draft set aside: {printable(note, 300)}",
                severity="warning",
                timeout=10,
                markup=False,
            )
        self._draft_entries = entries
        if entries:
            self.push_screen(RecoverDraft([e.line() for e in entries]), self._recover_answer)

    async def _recover_answer(self, answer: tuple[str, int] | None) -> None:
        if answer is None:
            return  # skipped: the drafts stay, offered again at the next start
        action, index = answer
        entry = self._draft_entries.pop(index)
        if is_held(entry.path):
            self.notify("that draft has just been taken by another vramtui", severity="warning")
        elif action == "recover":
            await self._recover(entry.path)
            return
        else:
            aside = set_aside(entry.path)
            if aside is not None:
                self.notify(f"draft set aside as {aside}", markup=False)
            else:
                self.notify(
                    f"the draft {entry.path} could not be moved", severity="warning", markup=False
                )
        if self._draft_entries:
            self.push_screen(
                RecoverDraft([e.line() for e in self._draft_entries]), self._recover_answer
            )

    async def _recover(self, path: Path) -> None:
        """Load the draft into the form and make it this instance's draft; a damaged one is
        moved to unreadable/ and the app goes on with the spec it started with."""
        slot = DraftSlot.adopt(path)
        if slot is None:
            self.notify("that draft has just been taken by another vramtui", severity="warning")
            return
        try:
            session = SizingSession.from_draft(load_draft(path), self.session.catalog)
        except FileNotFoundError:
            slot.release()
            self.notify("that draft is gone (saved or recovered meanwhile)", severity="warning")
            return
        except Exception as exc:  # a damaged file: DraftError, or anything it still provokes
            slot.release()
            reason = str(exc) if isinstance(exc, DraftError) else type(exc).__name__
            aside = set_aside(path, UNREADABLE_DIR)
            where = f"; kept as {aside}" if aside else ""
            self.notify(
                f"the draft cannot be recovered ({printable(reason, 300)}){where}",
                severity="error",
                timeout=15,
                markup=False,
            )
            return
        old, self._slot = self._slot, slot
        old.release()
        await self._replace_session(session)
        self.form.show_errors()
        self.notify("draft recovered")

    async def action_quit(self) -> None:
        if self.session.dirty:
            kept = self.save_draft_now()
            if not kept:
                self.notify(
                    f"the unsaved edits cannot be kept as a draft ({self._draft_failed}): "
                    "ctrl+s saves the spec; quit again to leave without them",
                    severity="error",
                    timeout=15,
                    markup=False,
                )
            if not self._quit_armed:
                self._quit_armed = True
                text = (
                    "They are kept as a draft: vramtui offers to recover it at the next start. "
                    "ctrl+s saves the spec itself."
                    if kept
                    else f"They cannot be kept as a draft ({self._draft_failed}): quitting "
                    "loses them. ctrl+s saves the spec."
                )
                self.push_screen(
                    ConfirmDialog("Quit with unsaved changes?", text, yes="Quit", no="Stay"),
                    self._quit_answer,
                )
                return
            if self._draft_failed:
                self.exit_note = (
                    f"unsaved changes lost: the draft could not be saved ({self._draft_failed})"
                )
            else:
                self.exit_note = (
                    f"unsaved changes kept as a draft ({self.draft_file}); "
                    "vramtui offers to recover it at the next start"
                )
        else:
            self._slot.discard()
        self.stop_feed()
        self.exit()

    async def _quit_answer(self, yes: bool | None) -> None:
        if yes:
            await self.action_quit()
        else:
            self._quit_armed = False

    def release_draft(self) -> None:
        """Give up this instance's lock (its draft file, if any, stays to be recovered)."""
        self._slot.release()
