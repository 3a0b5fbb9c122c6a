"""Modal dialogs: a path prompt (open / save as), draft recovery, and the help screen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static


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


class RecoverDraft(ModalScreen[bool]):
    BINDINGS = [
        Binding("r", "recover", "Recover", id="dialog.recover"),
        Binding("d", "discard", "Set aside", id="dialog.discard"),
    ]

    def __init__(self, description: str) -> None:
        super().__init__()
        self.description = description

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("An unsaved draft was found", classes="dialog-title")
            yield Static(self.description, markup=False)
            yield Static(
                "Recover it (r), or set it aside (d): it is kept as "
                "draft.set-aside.toml, never deleted.",
                classes="dialog-hint",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Recover", id="recover", variant="primary")
                yield Button("Set aside", id="discard")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "recover")

    def action_recover(self) -> None:
        self.dismiss(True)

    def action_discard(self) -> None:
        self.dismiss(False)


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
    "Your edits are autosaved as a draft; a dropped SSH connection (SIGHUP) saves it too, and the "
    "next start offers to recover it. Keys can be remapped in config.toml [keymap] by binding "
    "id.\n"
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
