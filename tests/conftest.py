import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh store location; the environment points there too, so nothing leaks."""
    path = tmp_path / "store" / "results.sqlite"
    monkeypatch.setenv("ACCELBENCH_STORE", str(path))
    return path


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """No test may write to the user's real store."""
    if "ACCELBENCH_STORE" not in os.environ:
        monkeypatch.setenv(
            "ACCELBENCH_STORE", str(tmp_path_factory.mktemp("default") / "results.sqlite")
        )


# Property tests: no deadline (a loaded machine must not fail them) and a fixed seed,
# so a run in CI explores the same examples as a run here.
from hypothesis import settings  # noqa: E402

settings.register_profile("accelbench", deadline=None, derandomize=True, max_examples=60,
                          database=None)
settings.load_profile("accelbench")

# A real PostgreSQL server and the store location fixture on both back-ends.
from postgres import pg_cluster, pg_url, store_location  # noqa: E402, F401
