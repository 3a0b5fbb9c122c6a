"""The app's side of the Fit tab: keep it on the spec, the display unit and the compare card
(one card for the ledger's bar and the fit search, chosen in either tab or by a move in the
shortlist), and search when the tab is shown."""

from __future__ import annotations

from textual.widgets import TabbedContent

from vramtui.app.messages import CompareChanged
from vramtui.app.widgets.fit_pane import FitCardChosen


class FitActions:
    """Mixed into VramtuiApp: uses its session, unit, ledger_pane and fit_pane."""

    def _show_fit(self) -> None:
        self.fit_pane.show(self.session.results, self.unit, self.ledger_pane.compare_id)

    def on_compare_changed(self, message: CompareChanged) -> None:
        self._show_fit()

    def on_fit_card_chosen(self, message: FitCardChosen) -> None:
        self.ledger_pane.compare_with(message.gpu_id)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "fit":
            # after the switch has made the pane visible
            self.call_after_refresh(self.fit_pane.refresh_fit)
