"""The dry run's one-line errors."""

from __future__ import annotations

from vramtui.errors import VramtuiError

# The README's install: from the vramtui source directory, with the `dryrun` extra.
INSTALL_HINT = (
    "install the dry-run extra from the vramtui source directory: pip install '.[dryrun]'"
)


class DryRunError(VramtuiError):
    """The dry run cannot trace this spec; str(error) is one line naming why and the fix.

    The analytic ledger is unaffected: it still stands whatever the trace does."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def missing_extra() -> DryRunError:
    return DryRunError(
        f"the dry run needs torch and transformers, which are not installed; {INSTALL_HINT}"
    )
