"""The app's side of the triage wizard: read a log, correct the stage, name the failed card,
apply one change (asking first when it is predicted not to fit), record the outcome."""

from __future__ import annotations

from vramtui.app.screens.dialogs import ConfirmDialog
from vramtui.app.widgets.triage_pane import TriageRequest
from vramtui.errors import VramtuiError
from vramtui.fsutil import user_path
from vramtui.unit_text import in_unit


class TriageActions:
    """Mixed into VramtuiApp: uses its session, panes and notify."""

    async def on_triage_request(self, message: TriageRequest) -> None:
        """The triage wizard: read, correct the stage, apply one change, log the outcome."""
        s = self.session
        try:
            if message.action == "read":
                reading = s.triage_read(message.value or "")
                if not reading.is_oom:
                    self.notify(
                        reading.not_oom_reason or "no out-of-memory error in this text",
                        severity="warning",
                        timeout=8,
                    )
            elif message.action == "open":
                path = user_path(str(message.value or ""))
                from vramtui.triage.command import read_log_text

                text = read_log_text(str(path)) if str(message.value or "").strip() else ""
                if not text:
                    self.notify("give the path of a log file", severity="warning")
                    return
                self.triage_pane.set_log_text(text[-200_000:])
                s.triage_read(text)
            elif message.action == "phase":
                s.triage_set_phase(str(message.value))
            elif message.action == "failed_gpu":
                s.triage_set_failed_gpu(message.value)
            elif message.action == "apply":
                if s.triage_advice is None or not s.triage_advice.recommendations:
                    self.notify("read an out-of-memory log first", severity="warning")
                    return
                index = int(message.value)
                rec = s.triage_advice.recommendations[index]
                if rec.fits is False:
                    self.push_screen(
                        ConfirmDialog(
                            "This change is predicted not to fit",
                            f"{in_unit(rec.change, self.unit)}: "
                            f"{in_unit(rec.why_not_fit, self.unit)}. Apply it and log the "
                            "attempt anyway?",
                        ),
                        lambda yes: self._triage_apply_confirmed(index) if yes else None,
                    )
                    return
                await self._triage_apply(index)
            elif message.action == "measured":
                n = s.triage_record_measured()
                self.notify(
                    f"{n} measured figure(s) stored with the spec"
                    if n
                    else "the error holds no figure to store",
                    timeout=6,
                )
                if n:
                    self._schedule_autosave()
            elif message.action == "outcome":
                if not s.spec.triage:
                    self.notify("no attempt logged yet", severity="warning")
                    return
                s.triage_set_outcome(len(s.spec.triage) - 1, str(message.value))
                self._schedule_autosave()
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
        self._refresh_all()

    async def _triage_apply(self, index: int, force: bool = False) -> None:
        rec = self.session.triage_advice.recommendations[index]
        self.session.triage_apply(index, force=force)
        await self.form.rebuild()
        self._schedule_autosave()
        self.notify(
            f"applied: {in_unit(rec.change, self.unit)} — logged as a pending attempt; re-run the "
            "job, then report its outcome",
            timeout=8,
        )

    async def _triage_apply_confirmed(self, index: int) -> None:
        """The user confirmed a change predicted not to fit."""
        try:
            await self._triage_apply(index, force=True)
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
        self._refresh_all()
