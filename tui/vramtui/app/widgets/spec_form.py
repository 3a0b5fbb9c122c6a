"""The spec form: one input per field that applies, grouped, each with its error in place."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Label, Select, Static, Switch, TextArea

from vramtui.app.messages import FieldEdited
from vramtui.spec_fields import GROUP_TITLES, FieldDef


def field_id(path: str) -> str:
    return "f-" + path.replace(".", "-")


class FieldRow(Vertical):
    """Label, input and (when invalid) the reason, for one field."""

    def __init__(self, field: FieldDef, text: str, error: str | None) -> None:
        super().__init__(classes="field-row")
        self.field = field
        self.text = text
        self.error = error

    def compose(self) -> ComposeResult:
        f = self.field
        yield Label(f.label, classes="field-label")
        wid = field_id(f.path)
        if f.kind == "choice":
            value = self.text if self.text in f.choices else Select.NULL
            yield Select(
                [(c, c) for c in f.choices],
                value=value,
                allow_blank=f.optional,
                id=wid,
                compact=True,
                prompt="(not set)",
            )
        elif f.kind == "bool":
            yield Switch(value=self.text == "true", id=wid)
        elif f.kind == "quality":
            yield TextArea(self.text, id=wid, classes="quality-input", soft_wrap=True)
        else:
            yield Input(
                self.text, id=wid, placeholder=f.help or "", compact=True, tooltip=f.help or None
            )
        yield Static(self.error or "", classes="field-error", markup=False)

    def on_mount(self) -> None:
        self.set_class(bool(self.error), "-invalid")

    def show_error(self, error: str | None) -> None:
        self.error = error
        self.set_class(bool(error), "-invalid")
        self.query_one(".field-error", Static).update(error or "")


class SpecForm(VerticalScroll):
    """Rebuilt when the set of applicable fields changes (task, format, headroom mode)."""

    def __init__(self, session, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session

    def compose(self) -> ComposeResult:
        yield from self._rows()

    def _rows(self):
        group = None
        for f in self.session.fields():
            if f.group != group:
                group = f.group
                yield Static(GROUP_TITLES[group], classes="group-title")
            yield FieldRow(f, self.session.text(f.path), self.session.errors.get(f.path))

    async def rebuild(self) -> None:
        focused = self.app.focused.id if self.app.focused is not None else None
        await self.remove_children()
        await self.mount_all(list(self._rows()))
        if focused:
            try:
                self.query_one(f"#{focused}").focus()
            except Exception:
                pass

    def show_errors(self) -> None:
        for row in self.query(FieldRow):
            row.show_error(self.session.errors.get(row.field.path))

    def refresh_values(self) -> None:
        """Put the session's texts back into the inputs (after open, recover)."""
        for row in self.query(FieldRow):
            widget = self.query_one(f"#{field_id(row.field.path)}")
            text = self.session.text(row.field.path)
            with widget.prevent(Input.Changed, Select.Changed, Switch.Changed, TextArea.Changed):
                if isinstance(widget, Input):
                    widget.value = text
                elif isinstance(widget, Select):
                    widget.value = text if text in row.field.choices else Select.NULL
                elif isinstance(widget, Switch):
                    widget.value = text == "true"
                elif isinstance(widget, TextArea):
                    widget.text = text

    # Inputs -> FieldEdited ----------------------------------------------------------

    def _path_of(self, widget) -> str | None:
        row = widget.parent
        return row.field.path if isinstance(row, FieldRow) else None

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        path = self._path_of(event.input)
        if path:
            self.post_message(FieldEdited(path, event.value))

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        path = self._path_of(event.select)
        if path:
            value = "" if event.value is Select.NULL else str(event.value)
            self.post_message(FieldEdited(path, value))

    def on_switch_changed(self, event: Switch.Changed) -> None:
        event.stop()
        path = self._path_of(event.switch)
        if path:
            self.post_message(FieldEdited(path, "true" if event.value else "false"))

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        path = self._path_of(event.text_area)
        if path:
            self.post_message(FieldEdited(path, event.text_area.text))
