"""Modal dialogs: a path prompt (open / save as), a yes/no confirmation, draft recovery, and
the help screen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option


class PathPrompt(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, title: str, initial: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.initial = initial

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(self.initial, id="path-input", placeholder="path/to/spec.toml")
            yield Static("Enter to confirm, Escape to cancel.", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question (applying a change predicted not to fit). Dismissed with True only
    when the user presses the confirming button or y; Escape, n and the other button say no."""

    BINDINGS = [
        Binding("y", "yes", "Yes", id="dialog.yes"),
        Binding("escape,n", "no", "No", id="dialog.no"),
    ]

    def __init__(self, title: str, text: str, yes: str = "Apply anyway", no: str = "Cancel"):
        super().__init__()
        self.title_text, self.text, self.yes, self.no = title, text, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="confirm-dialog"):
            yield Label(Content(self.title_text), classes="dialog-title")
            yield Static(Content(self.text))
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.no, id="confirm-no", variant="primary")
                yield Button(self.yes, id="confirm-yes", variant="error")
            yield Static("y to confirm; n or Escape to cancel.", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


class RecoverDraft(ModalScreen[tuple[str, int] | None]):
    """The drafts left by earlier instances (one line each: spec, age, what differs).
    Dismissed with ("recover", index), ("aside", index), or None to skip them all."""

    BINDINGS = [
        Binding("r", "recover", "Recover", id="dialog.recover"),
        Binding("d", "discard", "Set aside", id="dialog.discard"),
        Binding("escape,s", "skip", "Skip", id="dialog.skip"),
    ]

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = list(lines)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            count = len(self.lines)
            yield Label(
                "An unsaved draft was found"
                if count == 1
                else f"{count} unsaved drafts were found",
                classes="dialog-title",
            )
            yield OptionList(*(Option(Content(line)) for line in self.lines), id="draft-list")
            yield Static(
                "Recover the highlighted draft (r), set it aside (d): kept under set-aside/, "
                "never deleted; or skip (s, Escape): the drafts wait for the next start.",
                classes="dialog-hint",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Recover", id="recover", variant="primary")
                yield Button("Set aside", id="discard")
                yield Button("Skip", id="skip")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0
        options.focus()

    def _chosen(self) -> int:
        index = self.query_one(OptionList).highlighted
        return 0 if index is None else index

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(("recover", event.option_index))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "skip":
            self.dismiss(None)
        else:
            self.dismiss(("recover" if event.button.id == "recover" else "aside", self._chosen()))

    def action_recover(self) -> None:
        self.dismiss(("recover", self._chosen()))

    def action_discard(self) -> None:
        self.dismiss(("aside", self._chosen()))

    def action_skip(self) -> None:
        self.dismiss(None)


# One line per paragraph: the Static wraps them to the dialog's width (hard-wrapped lines wider
# than the dialog broke into a long and a one-word line each).
HELP_TEXT = (
    "vramtui sizes the GPU memory of one workload spec and shortlists rented cards.\n"
    "\n"
    "Sizing tab: edit the spec on the left; the ledger on the right recomputes on every change. "
    "An invalid value is marked on its field with the reason; the ledger keeps the last valid "
    "spec.\n"
    "Shortlist tab: fit candidates ranked by total cost, then margin, then lead time; then those "
    "that need verification (with what to check), then the excluded (with the failing "
    "requirement).\n"
    "\n"
    "Status of every figure:  ~ estimated   = measured   ? unknown (never added to a total)\n"
    "Units: GB = 10^9 bytes, GiB = 2^30 bytes; the unit key cycles GiB, GB, MiB, bytes.\n"
    "Per-stage peaks add only items live together; the conservative bound sums every item's "
    "maximum and is a bound, not an observed peak.\n"
    "\n"
    "Your edits are autosaved as a draft of this window's own; a dropped SSH connection (SIGHUP) "
    "saves it too, and the next start lists every draft left behind to recover or set aside. "
    "Keys can be remapped in config.toml [keymap] by binding id.\n"
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1", "close", "Close", id="dialog.close")]

    def __init__(self, bindings: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.bindings_rows = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Label("vramtui help", classes="dialog-title")
            yield Static(HELP_TEXT, markup=False)
            rows = "\n".join(
                f"{keys:<18} {desc:<28} id: {bid}" for bid, keys, desc in self.bindings_rows
            )
            yield Static("Keys\n" + rows, markup=False, id="help-keys")
            yield Static("Escape closes this help.", classes="dialog-hint")

    def action_close(self) -> None:
        self.dismiss(None)
