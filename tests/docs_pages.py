"""The documentation as tests read it: the README and the pages of the site under docs/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
PAGES = {path.relative_to(ROOT / "docs").as_posix(): path.read_text()
         for path in sorted((ROOT / "docs").rglob("*.md"))}
#: All the prose a user can read, README first.
ALL = "\n".join([README, *PAGES.values()])


def page(name: str) -> str:
    return PAGES[name]
