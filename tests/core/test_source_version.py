"""A benchmark's version follows its code, not its type annotations or comments."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from accelbench.core.registry import source_version

PLAIN = '''
import math

def measure(ctx, params):
    n = params["n"]
    return math.sqrt(n) * 2
'''

ANNOTATED = '''
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

# A comment.
def measure(ctx: object, params: Mapping[str, int]) -> float:
    n: int = params["n"]
    return math.sqrt(n) * 2
'''

CHANGED = PLAIN.replace("* 2", "* 3")


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(tmp_path))

    def version_of(name: str, text: str) -> str:
        (tmp_path / f"{name}.py").write_text(text)
        importlib.invalidate_caches()
        sys.modules.pop(name, None)
        return source_version(name)

    return version_of


def test_annotations_and_comments_leave_the_version(module) -> None:
    assert module("plain_bench", PLAIN) == module("annotated_bench", ANNOTATED)


def test_a_change_of_code_changes_it(module) -> None:
    assert module("plain_bench2", PLAIN) != module("changed_bench", CHANGED)


def test_a_declared_field_still_counts(module) -> None:
    with_field = "class C:\n    x: int\n    y: int = 1\n"
    without = "class C:\n    y: int = 1\n"
    assert module("with_field", with_field) != module("without_field", without)
