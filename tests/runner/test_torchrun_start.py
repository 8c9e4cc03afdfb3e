"""torchrun is started in one place (runner.launcher): the ranks of distributed cases and
those of `accelbench profile --nproc-per-node` come from the same command and start."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from accelbench.cli import profile_cmd
from accelbench.errors import EXIT_INTERNAL, UserError
from accelbench.runner import launcher


def test_the_torchrun_command_starts_a_module_on_n_ranks_of_this_node() -> None:
    assert launcher.torchrun_command(3, "accelbench", "profile", "gemm") == [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
        "--nproc-per-node=3", "-m", "accelbench", "profile", "gemm"]
    group = launcher.RankGroup(2, "gloo")
    command = group.command(Path("job.pkl"), Path("out.jsonl"))
    assert command[:6] == launcher.torchrun_command(2, "x")[:6]


def test_profile_ranks_are_started_through_the_launcher(monkeypatch) -> None:
    started: list[list[str]] = []

    class Finished:
        def wait(self) -> int:
            return 3

    def start(command, environ=None, log=None):
        started.append(list(command))
        return Finished()

    monkeypatch.setattr(launcher, "start_torchrun", start)
    parser = argparse.ArgumentParser()
    profile_cmd.add_arguments(parser)
    args = parser.parse_args(["gemm", "-p", "shape=256", "--nproc-per-node", "2",
                              "--device", "cpu"])
    assert profile_cmd._launch_ranks(args, "cpu") == 3
    (command,) = started
    assert command[:8] == launcher.torchrun_command(2, "accelbench")
    assert command[8:] == profile_cmd.rank_argv(args)
    assert "--nproc-per-node" not in command[8:]


def test_a_torchrun_that_cannot_start_is_one_line_and_an_internal_error() -> None:
    with pytest.raises(UserError) as raised:
        launcher.start_torchrun(["/nonexistent/python", "-m", "torch.distributed.run"])
    assert raised.value.exit_code == EXIT_INTERNAL
    assert str(raised.value).startswith("could not start torchrun: ")
    assert "\n" not in str(raised.value)
