"""Untrusted structured files: size, depth and alias caps, each a one-line error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accelbench.analysis.baseline import read_baseline
from accelbench.analysis.rules import parse_rules
from accelbench.cli.main import main
from accelbench.core.untrusted import (
    check_shape,
    parse_json,
    parse_yaml,
    read_bytes,
    read_text,
    short,
)
from accelbench.errors import EXIT_STORE, EXIT_USAGE, StoreError, UserError

RULE = "  - name: r{i}\n    metric: gemm\n    compare: value\n    min: 1\n    category: c\n"


def _one_line(exc: pytest.ExceptionInfo[UserError]) -> str:
    message = str(exc.value)
    assert "\n" not in message and len(message) < 400
    return message


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    """A rule whose 'min' is a list of `levels` + 1 values, each `width` of the one before:
    `width ** levels` strings once expanded."""
    values = ['&a0 "lol"'] + [f"&a{i} [{', '.join([f'*a{i - 1}'] * width)}]"
                              for i in range(1, levels + 1)]
    return (f"rules:\n  - metric: gemm\n    compare: value\n    min: [{', '.join(values)}]\n"
            "    category: c\n")


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    with pytest.raises(UserError) as info:
        parse_rules(billion_laughs(), "bomb.yaml")
    assert "more than" in _one_line(info) and "aliases expanded" in str(info.value)


def test_a_small_alias_expansion_is_still_a_short_message() -> None:
    # Under the cap, the value reaches the message that names it: it is cut short.
    with pytest.raises(UserError) as info:
        parse_rules(billion_laughs(levels=3), "laughs.yaml")
    assert "'min' must be a number, got a list of 4 item(s)" in _one_line(info)


def test_merge_keys_cannot_multiply_a_mapping() -> None:
    lines = ["m0: &m0 {x: 1, y: 2}"]
    for i in range(1, 12):
        lines.append(f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 10)}]}}")
    with pytest.raises(UserError) as info:
        parse_yaml("\n".join(lines), "merge.yaml")
    assert "more than" in _one_line(info)


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(UserError) as info:
        parse_yaml("a: &a [1, *a]\n", "loop.yaml")
    assert "refers to a value that contains it" in _one_line(info)


@pytest.mark.parametrize("depth", [65, 20_000])
def test_deep_nesting_is_refused_in_yaml_and_json(depth: int) -> None:
    for text, parse in (("[" * depth + "]" * depth, parse_yaml),
                        ("[" * depth + "]" * depth, parse_json),
                        ("x:\n" + "".join(" " * i + "- \n" for i in range(1, 200)), parse_yaml)):
        with pytest.raises(UserError) as info:
            parse(text, "deep")
        assert "nested too deeply" in _one_line(info) or "nesting depth" in str(info.value)


def test_shared_values_count_each_time_and_the_walk_stops_at_the_cap() -> None:
    leaf: list[object] = [0] * 10
    for _ in range(30):  # 10**30 values if expanded
        leaf = [leaf] * 10
    with pytest.raises(StoreError, match="more than 1000 values"):
        check_shape(leaf, "shared", StoreError, max_depth=100, max_nodes=1000)
    check_shape({"a": [1, 2, {"b": None}]}, "small", max_nodes=8)
    with pytest.raises(UserError):
        check_shape({"a": [1, 2, {"b": None}]}, "small", max_nodes=7)


def test_files_over_the_size_cap_are_refused(tmp_path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * 101)
    with pytest.raises(UserError, match="larger than 100 bytes"):
        read_text(path, "rules file", max_bytes=100)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(UserError, match="not UTF-8"):
        read_text(path, "rules file")


def test_messages_never_quote_a_whole_value() -> None:
    assert short("x" * 10_000) == "'" + "x" * 60 + "...'"
    assert short(list(range(10**5))) == "a list of 100000 item(s)"
    assert short({"a": 1}) == "an object of 1 field(s)"
    assert short(1.5) == "1.5"
    with pytest.raises(UserError) as info:
        parse_rules("rules:\n  - metric: gemm\n    compare: " + "e" * 100_000
                    + "\n    min: 1\n    category: c\n", "long.yaml")
    assert "unknown compare" in _one_line(info)


@pytest.mark.slow
def test_many_rules_and_a_duplicate_name_among_them() -> None:
    text = "rules:\n" + "".join(RULE.format(i=i) for i in range(3000))
    assert len(parse_rules(text, "many.yaml")) == 3000
    with pytest.raises(UserError) as info:
        parse_rules(text + RULE.format(i=1234), "many.yaml")
    assert _one_line(info) == "many.yaml: two rules are named 'r1234'"


@pytest.mark.parametrize("kind", ["rules", "baseline"])
def test_the_cli_reports_hostile_files_in_one_line(kind, tmp_path, capsys, store_path) -> None:
    path = tmp_path / f"{kind}.file"
    if kind == "rules":
        path.write_text(billion_laughs())
        argv = ["diagnose", "--rules", str(path)]
    else:
        path.write_text("[" * 20_000 + "]" * 20_000)
        argv = ["diagnose", "--baseline", str(path)]
    # The rules file is read before the store is opened; the baseline file after it.
    code = main([*argv, "--store", str(store_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("accelbench: error: ")
    assert code == (EXIT_USAGE if kind == "rules" else EXIT_STORE)
    if kind == "baseline":
        with pytest.raises(UserError, match="nested too deeply"):
            read_baseline(path)
    assert json.loads("1") == 1


def test_special_files_are_refused_without_being_opened(tmp_path, capsys):
    """A FIFO as a rules file would block the read forever; /dev/zero would never end."""
    fifo = tmp_path / "rules.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(UserError, match="is not a regular file"):
            read_bytes(path, "rules file")
    assert main(["diagnose", "--rules", str(fifo)]) == 2
    assert "is not a regular file" in capsys.readouterr().err
