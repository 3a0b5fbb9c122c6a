"""The command palette's entries: every action by name, and a "go to field" for each field
of the spec form."""

from __future__ import annotations

from textual.app import SystemCommand
from textual.css.query import NoMatches


class PaletteCommands:
    """Mixed into VramtuiApp: uses its actions, panes and session."""

    def go_to_field(self, path: str) -> None:
        """Show the Sizing tab and focus the field of `path`."""
        from vramtui.app.widgets.spec_form import field_id

        self.action_show_tab("sizing")

        def focus() -> None:
            try:
                widget = self.form.query_one(f"#{field_id(path)}")
            except NoMatches:
                return
            widget.focus()
            widget.scroll_visible()

        self.call_after_refresh(focus)

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
        yield SystemCommand(
            "Show triage",
            "Read an out-of-memory error, change one variable",
            lambda: self.action_show_tab("triage"),
        )
        yield SystemCommand(
            "Show live feed",
            "GPU counters, processes, stage peaks",
            lambda: self.action_show_tab("feed"),
        )
        yield SystemCommand(
            "Show fit",
            "What fits on the compare card: each variable's largest value, the changes that "
            "make it fit (F10)",
            lambda: self.action_show_tab("fit"),
        )
        yield SystemCommand(
            "Import measurements",
            "A probe file or a vLLM start-up log, beside the estimate (F9)",
            self.action_import_measurements,
        )
        yield SystemCommand(
            "Dry run",
            "Trace the real model code on the meta device: traced estimates per stage",
            self.ledger_pane.start_dry_run,
        )
        yield SystemCommand(
            "Export sizing sheet",
            "One page as Markdown or HTML (ctrl+e)",
            self.action_export_sheet,
        )
        yield SystemCommand("Help", "Keys, statuses and units", self.action_help)
        yield SystemCommand("Undo", "Take back the last change to the spec (F3)", self.action_undo)
        for f in self.session.fields():
            yield SystemCommand(
                f"Go to field: {f.label}" + (f" ({f.group})" if f.group != f.label else ""),
                f"Focus the {f.label} field on the Sizing tab",
                lambda path=f.path: self.go_to_field(path),
            )
