import pytest


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory, monkeypatch):
    """Tests never read or write the real user's config or state directories."""
    root = tmp_path_factory.mktemp("user-dirs")
    monkeypatch.setenv("VRAMTUI_CONFIG_DIR", str(root / "config"))
    monkeypatch.setenv("VRAMTUI_STATE_DIR", str(root / "state"))
