"""Messages the widgets post to the app (state changes flow up, results flow down)."""

from __future__ import annotations

from textual.message import Message


class FieldEdited(Message):
    """The user changed a spec field; `text` is what the field now holds."""

    def __init__(self, path: str, text: str) -> None:
        super().__init__()
        self.path = path
        self.text = text


class CandidateSelected(Message):
    def __init__(self, offer_id: str) -> None:
        super().__init__()
        self.offer_id = offer_id


class ModelFetchRequested(Message):
    """Enter in the model field: ask the Hub for the model it names (typing never does)."""


class CompareChanged(Message):
    """The card the ledger is judged against (and the fit search runs on) changed."""

    def __init__(self, gpu_id: str) -> None:
        super().__init__()
        self.gpu_id = gpu_id
