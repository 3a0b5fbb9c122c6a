"""Start the app from the command line: spec file, or the seed example; the drafts left by
earlier instances are offered for recovery at start-up."""

from __future__ import annotations

import sys


def run_app(
    spec_path: str | None = None,
    catalog_dir: str | None = None,
    feed_settings=None,
    initial_tab: str = "sizing",
) -> int:
    from vramtui.app.app import VramtuiApp
    from vramtui.builtin_specs import seed_example_spec
    from vramtui.catalog import load_catalog
    from vramtui.config import load_config
    from vramtui.fsutil import user_path
    from vramtui.session import SizingSession

    binding_ids = {b.id for b in VramtuiApp.BINDINGS if b.id}
    config = load_config(binding_ids=binding_ids)
    catalog = load_catalog(catalog_dir or config.catalog_dir)
    if config.price_max_age_days is not None:
        from dataclasses import replace

        catalog = replace(catalog, price_max_age_days=config.price_max_age_days)
    if spec_path:
        session = SizingSession.open(user_path(spec_path), catalog)
    else:
        session = SizingSession.from_spec(seed_example_spec(), None, catalog)
    app = VramtuiApp(
        session,
        config,
        offer_draft=True,
        feed_settings=feed_settings,
        initial_tab=initial_tab,
    )
    try:
        app.run()
    finally:
        app.stop_feed()
        app.release_draft()
    if app.exit_note:
        try:
            print(f"vramtui: {app.exit_note}", file=sys.stderr, flush=True)
        except OSError:
            pass  # the terminal hung up (SIGHUP): the draft is saved, there is no one to tell
    return app.return_code or 0
