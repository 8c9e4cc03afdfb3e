"""Docs and code agree: every command has help and a section in the commands page, every
run option is explained, and the README keeps the newcomer's two commands."""

import argparse
import re
from pathlib import Path

import pytest

from accelbench.cli.main import build_parser, commands, main
from accelbench.cli.reference import markdown_reference
from docs_pages import PAGES, README, page

COMMANDS_PAGE = page("commands.md")


@pytest.mark.parametrize("command", [c.NAME for c in commands()])
def test_every_command_has_help_and_a_section_in_the_commands_page(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: accelbench " + command in capsys.readouterr().out
    assert re.search(rf"^## `accelbench {command}\b", COMMANDS_PAGE, re.M), command


def test_every_run_option_is_explained_in_the_commands_page():
    parser = build_parser()
    assert parser._subparsers is not None
    commands = parser._subparsers._group_actions[0]
    assert isinstance(commands, argparse._SubParsersAction)
    run_parser = commands.choices["run"]
    for action in run_parser._actions:
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                assert option in COMMANDS_PAGE, option


def test_readme_gives_the_two_newcomer_commands_and_ci_calls_the_test_one():
    ci = (Path(__file__).parents[2] / ".ci" / "run").read_text()
    assert "scripts/quickstart.sh" in README
    assert "scripts/test.sh" in README
    assert "scripts/test.sh" in ci


def test_the_readme_fits_a_newcomer_and_links_every_page():
    assert len(README.splitlines()) < 250
    for name in PAGES:
        assert f"docs/{name}" in README or name == "index.md", name


def test_every_page_is_in_the_site_navigation():
    nav = (Path(__file__).parents[2] / "mkdocs.yml").read_text()
    for name in PAGES:
        assert f": {name}\n" in nav, name


def _every_parser(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _every_parser(sub)


def test_the_generated_reference_has_every_command_and_option():
    parser = build_parser()
    reference = markdown_reference(parser)
    for sub in list(_every_parser(parser))[1:]:
        assert f"`{sub.prog}`" in reference, sub.prog
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in reference, (sub.prog, option)
    # Help text is shown as --help shows it, %(default)s expanded, and table-safe.
    assert "%(" not in reference
    rows = [line for line in reference.splitlines() if line.startswith("| `")]
    assert rows and all(line.count("|") == 3 for line in rows)
