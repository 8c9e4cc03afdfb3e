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


def test_the_quickstart_installs_what_its_own_suite_needs_on_the_cpu():
    """The main job's CPU cases are not skipped for want of an extra: every optional
    package a quick-suite CPU case requires comes with the quickstart's install."""
    import re

    from accelbench.benchmarks import REGISTRY
    from accelbench.benchmarks.models.engines.packages import EXTRAS
    from accelbench.runner.plan import load_suite

    root = Path(__file__).parents[2]
    script = (root / "scripts" / "quickstart.sh").read_text()
    installed = set(re.findall(r"-e '\.\[([a-z,]+)\]'", script))
    extras = {e for group in installed for e in group.split(",")}
    suite = load_suite("quick", REGISTRY)
    needed = set()
    for entry in suite.entries:
        if "cpu" not in entry.devices and "any" not in entry.devices:
            continue
        bench = REGISTRY.get(entry.bench)
        source = root / "src" / Path(*bench.entry.split(":")[0].split("."))
        for module in re.findall(r"require\(\"([a-z_]+)\"",
                                 source.with_suffix(".py").read_text()):
            line = EXTRAS.get(module, (module, ""))[1]
            needed.update(re.findall(r"accelbench\[([a-z]+)\]", line))
    assert "serving" in needed  # the quick suite's LoadGen case
    assert needed <= extras, f"the quickstart does not install {sorted(needed - extras)}"
