"""MkDocs hook: the commands reference page is written from accelbench's own parsers."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- the reference of every command, generated from its parser -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from accelbench.cli.main import build_parser
    from accelbench.cli.reference import markdown_reference

    return markdown.replace(MARKER, markdown_reference(build_parser()))
