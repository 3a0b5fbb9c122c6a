"""The spec form: one input per field that applies, grouped, each with its error in place."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Label, Select, Static, Switch, TextArea

from vramtui.app.messages import FieldEdited, ModelFetchRequested
from vramtui.spec_fields import GROUP_TITLES, FieldDef


def field_id(path: str) -> str:
    return "f-" + path.replace(".", "-")


def row_id(path: str) -> str:
    return "row-" + path.replace(".", "-")


def group_id(group: str) -> str:
    return "group-" + group


class FieldRow(Vertical):
    """Label, input and (when invalid) the reason, for one field."""

    def __init__(
        self, field: FieldDef, text: str, error: str | None, default: str | None = None
    ) -> None:
        super().__init__(classes="field-row", id=row_id(field.path))
        self.field = field
        self.text = text
        self.error = error
        self.default = default  # what an empty optional field means, shown as a default

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
                prompt=f"(default: {self.default})" if self.default else "(not set)",
            )
        elif f.kind == "bool":
            yield Switch(value=switch_on(self.text, self.default), id=wid)
        elif f.kind == "quality":
            yield TextArea(self.text, id=wid, classes="quality-input", soft_wrap=True)
        else:
            yield Input(
                self.text,
                id=wid,
                placeholder=input_placeholder(f, self.default),
                compact=True,
                tooltip=f.help or None,
            )
        yield Static(self.error or "", classes="field-error", markup=False)

    def on_mount(self) -> None:
        self.set_class(bool(self.error), "-invalid")

    def show_default(self, default: str | None, text: str) -> None:
        """The default moved with another field (slots x tokens, the KV dtype): show the new
        one where the field is empty (`text`: what the field holds now)."""
        if default == self.default:
            return
        self.default = default
        widget = self.query_one(f"#{field_id(self.field.path)}")
        if isinstance(widget, Input):
            widget.placeholder = input_placeholder(self.field, default)
        elif isinstance(widget, Select):
            widget.prompt = f"(default: {default})" if default else "(not set)"
        elif isinstance(widget, Switch) and not text:
            with widget.prevent(Switch.Changed):
                widget.value = switch_on(text, default)

    def show_error(self, error: str | None) -> None:
        if error == self.error:
            return  # unchanged: no update, no re-layout of the screen
        self.error = error
        self.set_class(bool(error), "-invalid")
        self.query_one(".field-error", Static).update(error or "")


def input_placeholder(f: FieldDef, default: str | None) -> str:
    """An empty input shows its default (as a default, never as a value), else its help."""
    return f"(default: {default})" if default else f.help or ""


def switch_on(text: str, default: str | None) -> bool:
    """A switch shows its value, or its default while the spec leaves the key out."""
    return (text or default or "") == "true"


class SpecForm(VerticalScroll, can_focus=False):
    """Rebuilt when the set of applicable fields changes (task, format, headroom mode). Not a
    focus stop itself (tab goes from the tab bar straight to the first field); it still
    scrolls to keep the focused field in view."""

    def __init__(self, session, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session

    def compose(self) -> ComposeResult:
        yield from self._rows()

    def _wanted(self) -> list[tuple[str, object]]:
        """(id, make widget) for every group title and field row that applies, in order."""
        out: list[tuple[str, object]] = []
        group = None
        for f in self.session.fields():
            if f.group != group:
                group = f.group
                out.append((group_id(group), lambda g=group: self._group_title(g)))
            out.append((row_id(f.path), lambda f=f: self._row(f)))
        return out

    def _group_title(self, group: str) -> Static:
        return Static(GROUP_TITLES[group], classes="group-title", id=group_id(group))

    def _row(self, f: FieldDef) -> FieldRow:
        default = f.default(self.session.form) if f.default is not None else None
        return FieldRow(f, self.session.text(f.path), self.session.errors.get(f.path), default)

    def _rows(self):
        for _, make in self._wanted():
            yield make()

    async def rebuild(self) -> None:
        """Replace every row (a different session: open, recover)."""
        focused = self.app.focused.id if self.app.focused is not None else None
        await self.remove_children()
        await self.mount_all(list(self._rows()))
        if focused:
            try:
                self.query_one(f"#{focused}").focus()
            except Exception:
                pass

    async def sync_rows(self) -> None:
        """Add and remove rows as the set of applicable fields changes (task, format, headroom
        mode, model kind), keeping the rows that still apply: the input being typed into keeps
        its widget, focus, cursor and selection, so no keystroke is lost to a rebuild."""
        wanted = self._wanted()
        wanted_ids = {wid for wid, _ in wanted}
        existing = {child.id: child for child in self.children if child.id}
        stale = [w for wid, w in existing.items() if wid not in wanted_ids]
        if stale:
            await self.remove_children(stale)
        # Kept rows are already in display order (FIELDS order never changes): insert the new
        # ones, a run at a time, after the widget that precedes them.
        previous = None
        run: list = []
        for wid, make in wanted:
            widget = existing.get(wid)
            if widget is None:
                run.append(make())
                continue
            if run:
                await self._mount_run(run, previous, before=widget)
                run = []
            previous = widget
        if run:
            await self._mount_run(run, previous, before=None)

    async def _mount_run(self, run: list, previous, before) -> None:
        if previous is not None:
            await self.mount_all(run, after=previous)
        elif before is not None:
            await self.mount_all(run, before=before)
        else:
            await self.mount_all(run)

    def show_errors(self) -> None:
        for row in self.query(FieldRow):
            row.show_error(self.session.errors.get(row.field.path))

    def show_defaults(self) -> None:
        """Defaults that follow other fields (llama.cpp's n_ctx, slots, cache types)."""
        form = self.session.form
        for row in self.query(FieldRow):
            if row.field.default is not None:
                row.show_default(row.field.default(form), self.session.text(row.field.path))

    def refresh_values(self, skip: str | None = None) -> None:
        """Put the session's texts back into the inputs (after open, recover, or an edit that
        sets other fields: task kind, weight format). `skip` is the field being typed into,
        left as the user has it."""
        self.show_defaults()
        for row in self.query(FieldRow):
            if row.field.path == skip:
                continue
            widget = row.query_one(f"#{field_id(row.field.path)}")
            text = self.session.text(row.field.path)
            with widget.prevent(Input.Changed, Select.Changed, Switch.Changed, TextArea.Changed):
                if isinstance(widget, Input):
                    if widget.value != text:
                        widget.value = text
                elif isinstance(widget, Select):
                    value = text if text in row.field.choices else Select.NULL
                    if value is Select.NULL and not row.field.optional:
                        continue  # a required choice left unset: the Select keeps its default
                    if widget.value != value:
                        widget.value = value
                elif isinstance(widget, Switch):
                    on = switch_on(text, row.default)
                    if widget.value != on:
                        widget.value = on
                elif isinstance(widget, TextArea):
                    if widget.text != text:
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

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self._path_of(event.input) == "model":
            event.stop()
            self.post_message(ModelFetchRequested())

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
