import atexit
import os
import shutil
import tempfile

import pytest

# No test reaches the real Hugging Face Hub or reads the user's Hugging Face cache or token.
# Set before any test module is imported: subprocess tests copy os.environ at import time.
# The fake Hub fixture (tests/fake_hub.py) turns the Hub back on, towards a local server.
_HF_HOME = tempfile.mkdtemp(prefix="vramtui-tests-hf-")
atexit.register(shutil.rmtree, _HF_HOME, True)
for _name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
    os.environ.pop(_name, None)
os.environ["HF_HOME"] = _HF_HOME
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"  # the discard port: refused at once


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
    # A fresh cache per test (what the Hub fetch cached must not leak between tests), except
    # the structures derived with transformers: shared by the whole run, as they are slow to
    # build and depend only on the config.
    cache = root / "cache"
    cache.mkdir()
    (session_cache_dir / "derived").mkdir(exist_ok=True)
    (cache / "derived").symlink_to(session_cache_dir / "derived", target_is_directory=True)
    monkeypatch.setenv("VRAMTUI_CACHE_DIR", str(cache))
    monkeypatch.setenv("HF_HOME", str(root / "hf-home"))


@pytest.fixture
def fake_hub(monkeypatch):
    """A local stand-in for the Hugging Face Hub (tests/fake_hub.py), with HF_ENDPOINT
    pointing at it and offline mode off; no repository yet (add them with `.add`). At the
    end, no request may have asked for a byte of weights."""
    from fake_hub import FakeHub

    fake = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", fake.url)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    import huggingface_hub.constants

    # huggingface_hub reads HF_HUB_OFFLINE once, at import (set above for every test).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    yield fake
    fake.stop()
    assert fake.weight_requests() == [], "a byte of weights was asked of the Hub"
