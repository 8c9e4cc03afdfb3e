import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# pytest-xdist gives its workers COLUMNS=80 and LINES=24; without them the output of a
# command in a worker is what it is in a serial run (a pipe: accelbench's wide page).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


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

# The folders whose tests call PyTorch's APIs (measure functions, models, checks, the
# profiler, collectives, engines and serving, the GPU tests): marked torch_api, which
# scripts/test-floor.sh runs again on the oldest PyTorch accelbench supports. A test
# elsewhere that does is marked in its own module.
TORCH_API_FOLDERS = ("benchmarks", "collectives", "gpu", "models", "profile", "serving",
                     "validation")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        folder = item.path.relative_to(tests).parts[0]
        if folder in TORCH_API_FOLDERS:
            item.add_marker(pytest.mark.torch_api)
        # A test on a PostgreSQL database needs the server the session starts.
        params = getattr(item, "callspec", None)
        on_postgres = params is not None and params.params.get("store_location") == "postgresql"
        if on_postgres or "pg_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.server)
    _long_files_first(items)


def _long_files_first(items: list[pytest.Item]) -> None:
    """The files with the most tests of seconds first, each file's tests in their order:
    pytest-xdist hands out whole files (--dist loadfile), and a long file handed out last
    would leave the other workers idle while it runs. The same order on every worker."""
    long_tests: dict[Path, int] = {}
    for item in items:
        slow = any(item.iter_markers(name)
                   for name in ("slow", "multinode", "server", "browser"))
        long_tests[item.path] = long_tests.get(item.path, 0) + int(slow)
    items.sort(key=lambda item: -long_tests[item.path])  # stable: keeps each file in order
