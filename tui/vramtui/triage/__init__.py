"""Out-of-memory triage: read a pasted error or log (`read_log`), say where it failed
(`localise_phase`); `advice` compares it with the ledger and proposes single changes."""

from vramtui.triage.phase import PHASES, PhaseVerdict, localise_phase
from vramtui.triage.reader import FIGURE_KEYS, OomEvent, TriageReading, read_log

__all__ = [
    "FIGURE_KEYS",
    "PHASES",
    "OomEvent",
    "PhaseVerdict",
    "TriageReading",
    "localise_phase",
    "read_log",
]
