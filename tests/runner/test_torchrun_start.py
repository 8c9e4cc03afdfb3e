"""torchrun is started in one place (runner.launcher): the ranks of distributed cases and
those of `accelbench profile --nproc-per-node` come from the same command and start."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from accelbench import app
from accelbench.benchmarks import REGISTRY
from accelbench.cli import profile_cmd
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_INTERNAL, UserError
from accelbench.runner import launcher
from accelbench.store import parse_location


def test_the_torchrun_command_starts_a_module_on_n_ranks_of_this_node() -> None:
    assert launcher.torchrun_command(3, "accelbench", "profile", "gemm") == [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
        "--nproc-per-node=3", "-m", "accelbench", "profile", "gemm"]
    group = launcher.RankGroup(2, "gloo", REGISTRY)
    command = group.command(Path("job.json"), Path("out.jsonl"))
    assert command[:6] == launcher.torchrun_command(2, "x")[:6]


def test_profile_ranks_are_started_through_the_launcher_with_the_request(
        monkeypatch, tmp_path) -> None:
    started: list[tuple[list[str], RunRequest, dict[str, str]]] = []

    class Finished:
        def wait(self) -> int:
            return 3

    def start(command, environ=None, log=None):
        # The ranks are handed the request as JSON, one rank each, and the store through
        # their environment.
        request = RunRequest.from_json(Path(command[command.index("--request") + 1])
                                       .read_text())
        started.append((list(command), request, dict(environ or {})))
        return Finished()

    monkeypatch.setattr(launcher, "start_torchrun", start)
    parser = argparse.ArgumentParser()
    profile_cmd.add_arguments(parser)
    args = parser.parse_args(["gemm", "-p", "shape=256", "--nproc-per-node", "2",
                              "--device", "cpu"])
    request = profile_cmd.build_request(args)
    store = tmp_path / "results.sqlite"
    assert app.profile_ranks(request, parse_location(str(store)), ["--json"]) == 3
    ((command, handed, environ),) = started
    assert command[:8] == launcher.torchrun_command(2, "accelbench")
    assert command[8:10] == ["profile", "--request"] and command[11:] == ["--json"]
    assert handed == request.replace(nproc_per_node=1)
    assert environ["ACCELBENCH_STORE"] == str(store)


def test_a_torchrun_that_cannot_start_is_one_line_and_an_internal_error() -> None:
    with pytest.raises(UserError) as raised:
        launcher.start_torchrun(["/nonexistent/python", "-m", "torch.distributed.run"])
    assert raised.value.exit_code == EXIT_INTERNAL
    assert str(raised.value).startswith("could not start torchrun: ")
    assert "\n" not in str(raised.value)
