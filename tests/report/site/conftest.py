"""Stores to publish: the committed corpora (copied, as opening may write beside them) and
the generated fleet of site_fleet, published once per module."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from site_fleet import fill, fleet_runs

from accelbench.store import Store


@pytest.fixture(scope="module")
def fleet_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fleet") / "results.sqlite"
    fill(path, fleet_runs())
    return path


@pytest.fixture(scope="module")
def fleet_site(fleet_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated fleet's site, published once for the module's tests to read."""
    from accelbench.report.site import publish

    out = tmp_path_factory.mktemp("fleet-site") / "site"
    with Store.open(fleet_store, create=False) as store:
        publish(store, out)
    return out


@pytest.fixture
def corpus_copy(tmp_path: Path) -> Callable[[Path], Path]:
    def copy(source: Path) -> Path:
        path = tmp_path / "corpus" / source.name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        return path

    return copy
