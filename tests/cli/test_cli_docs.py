"""Docs and code agree: every command has help and is documented in the README."""

import re
from pathlib import Path

import pytest

from accelbench.cli.main import COMMANDS, build_parser, main

README = (Path(__file__).parents[2] / "README.md").read_text()


@pytest.mark.parametrize("command", [c.NAME for c in COMMANDS])
def test_every_command_has_help_and_a_readme_section(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: accelbench " + command in capsys.readouterr().out
    assert re.search(rf"^### `accelbench {command}\b", README, re.M), command


def test_every_run_option_is_in_the_readme():
    parser = build_parser()
    run_parser = parser._subparsers._group_actions[0].choices["run"]
    for action in run_parser._actions:
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                assert option in README, option


def test_readme_gives_the_two_newcomer_commands_and_ci_calls_the_test_one():
    ci = (Path(__file__).parents[2] / ".ci" / "run").read_text()
    assert "scripts/quickstart.sh" in README
    assert "scripts/test.sh" in README
    assert "scripts/test.sh" in ci
