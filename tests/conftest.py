import pytest


@pytest.fixture(scope="session")
def session_cache_dir(tmp_path_factory):
    """One cache directory for the whole run (derived model structures are cached there)."""
    return tmp_path_factory.mktemp("user-cache")


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory, monkeypatch, session_cache_dir):
    """Tests never read or write the real user's config, state or cache directories."""
    root = tmp_path_factory.mktemp("user-dirs")
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(root / "config"))
    monkeypatch.setenv("VRAMTUI_STATE_DIR", str(root / "state"))
    monkeypatch.setenv("VRAMTUI_CACHE_DIR", str(session_cache_dir))
