"""Errors that reach the user as one clear line: what is wrong, and how to fix it."""


class VramtuiError(Exception):
    """Base class: str(error) is a single line naming the problem and the fix."""


class UnitsError(VramtuiError, ValueError):
    """A quantity that cannot be read as bytes."""


class SpecError(VramtuiError):
    """A workload spec that is malformed, incomplete or impossible."""


class ModelError(VramtuiError):
    """A model that cannot be found or whose architecture cannot be read."""


class CatalogError(VramtuiError):
    """A GPU or offer catalogue file that is malformed."""
