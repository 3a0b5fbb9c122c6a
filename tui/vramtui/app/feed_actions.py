"""The app's live feed: start the source when the Feed tab is first shown, redraw at most
twice a second from the feed's thread, and the stage marks and stores the Feed tab asks for.

A mixin of `VramtuiApp` (it uses the app's session, feed pane, notify and autosave)."""

from __future__ import annotations

from textual.css.query import NoMatches

from vramtui.app.widgets.feed_pane import FeedRequest
from vramtui.errors import VramtuiError

FEED_REDRAW_S = 0.5  # the live feed redraws at most twice a second


class FeedActions:
    def _start_feed(self) -> None:
        """Start the feed source once, in the background, when the Feed tab is first shown."""
        if self._feed is not None:
            return
        from vramtui.feed.runner import FeedRunner, FeedSettings
        from vramtui.feed.stages import StageTracker

        settings = self.feed_settings or FeedSettings()
        self._tracker = StageTracker()
        self._feed = FeedRunner(settings, self._feed_changed)
        self.feed_pane.set_stages(self.session.results.estimate.stages)
        try:
            self._feed.start()
        except VramtuiError as exc:
            self.notify(str(exc), severity="error", timeout=10)
        self._drain_feed()

    def _feed_changed(self) -> None:
        """From the feed's thread: ask the UI thread to redraw (dropped while shutting down)."""
        try:
            self.call_from_thread(self._drain_feed)
        except RuntimeError:
            pass

    def stop_feed(self) -> None:
        self._feed_stopped = True
        if self._feed is not None:
            self._feed.stop()

    def _drain_feed(self) -> None:
        """Show the latest state of every host: one pending refresh at a time, and at most one
        redraw per FEED_REDRAW_S, so many streaming hosts never starve the keyboard."""
        if self._feed is None or self._feed_stopped or not self.feed_pane.is_mounted:
            return
        import time

        wait = self._last_feed_draw + FEED_REDRAW_S - time.monotonic()
        if wait > 0:
            if not self._feed_timer_set:
                self._feed_timer_set = True
                self.set_timer(wait, self._drain_feed_timer)
            return
        self._last_feed_draw = time.monotonic()
        statuses = self._feed.statuses()
        for _, _, snap in statuses.values():
            if snap is not None:
                self._tracker.update(snap)
        try:
            self.feed_pane.show(
                self._feed.settings.label(),
                statuses,
                self.session.results.estimate,
                self.unit,
                self._tracker,
            )
        except NoMatches:
            pass  # the app is closing: its widgets are already gone

    def _drain_feed_timer(self) -> None:
        self._feed_timer_set = False
        self._drain_feed()

    def on_feed_request(self, message: FeedRequest) -> None:
        import time

        if self._feed is None:
            return
        if message.action == "mark":
            self._tracker.mark(str(message.value), time.time())
            self.notify(f"marking stage {message.value}: peaks are kept per GPU", timeout=4)
        elif message.action == "stop":
            self._tracker.mark(None, time.time())
        elif message.action == "store":
            ms = self._tracker.measurements(self.session.spec)
            if not ms:
                self.notify(
                    "no stage peak to store yet: mark a stage while the job runs",
                    severity="warning",
                )
                return
            from vramtui.triage.advice import with_measurements

            self.session.replace_spec(with_measurements(self.session.spec, ms))
            self._schedule_autosave()
            self.notify(
                f"{len(ms)} measured stage peak(s) stored with the spec; they show "
                "beside the estimates"
            )
            self._refresh_all()
        self._drain_feed()
