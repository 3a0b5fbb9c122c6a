"""Errors of the measurement importers: one line naming the problem and the fix."""

from vramtui.errors import VramtuiError


class LogImportError(VramtuiError):
    """A log that cannot be read as a measurement (no figures, or an out-of-memory failure)."""
