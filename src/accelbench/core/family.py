"""What a family of benchmarks is, declared once in its own package.

A family is one package under `accelbench.benchmarks` (or anywhere on the path, for a
family of a site's own): its benchmarks, whether their cases are checks, which levels of
`accelbench validate --level` run which of them, the suites it brings (`suites/*.toml`
in its package, found from the files), the commands it adds to `accelbench`, and the
batch jobs `accelbench slurm` can submit for it. The registry holds the families
(`Registry.of`); nothing else names a family, so adding one is its package plus one line
in the registry's list.

Its name is its package's: `accelbench.benchmarks.micro` is the family `micro`, and every
benchmark it declares says so (`Benchmark.family`), which the registry checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.abc import Traversable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import argparse

    from accelbench.core.benchmark import Benchmark


class Command(Protocol):
    """A command of `accelbench` (a module of `cli/`, or one a family brings): its name,
    its one-line help, its options and what it does, returning the exit code."""

    NAME: str
    HELP: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


@dataclass(frozen=True)
class SlurmJob:
    """A batch job `accelbench slurm NAME` submits for a family: one job across the
    nodes, srun starting torchrun on each, every rank running `accelbench COMMAND
    --request FILE` with the request that COMMAND makes of `options` and the options
    given after `--` (COMMAND is `run` or one of the family's commands)."""

    name: str  # the action: `accelbench slurm NAME`
    help: str
    command: str
    job_name: str  # sbatch --job-name, and the output files' names
    options: tuple[str, ...] = ()  # COMMAND's options the job always has


@dataclass(frozen=True)
class Family:
    """A family's declaration (`FAMILY` in its package; see the module docstring)."""

    package: str  # its package's __name__: the family's name is its last part
    benchmarks: tuple[Benchmark, ...]
    summary: str = ""
    # Its cases are checks: each a verdict (pass, fail, skip) with the error found, which
    # `validate` runs and prints, and `diagnose` judges by verdict rather than by rules.
    checks: bool = False
    # `validate --level N` runs these of its benchmarks (levels it is not named at run
    # none of them); a level's checks are those of every family, in registry order.
    levels: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    # The commands it brings: the names of its modules that are commands (`Command`),
    # each imported only by the command line, since a command sits above everything it
    # runs (its own `command` module, beside the family's declarations).
    commands: tuple[str, ...] = ()
    slurm: tuple[SlurmJob, ...] = ()

    @property
    def name(self) -> str:
        return self.package.rpartition(".")[2]

    def __post_init__(self) -> None:
        names = {b.name for b in self.benchmarks}
        for bench in self.benchmarks:
            if bench.family != self.name:
                raise ValueError(f"benchmark {bench.name} says it is of the family "
                                 f"{bench.family!r}, but the package {self.package} that "
                                 f"declares it is the family {self.name!r}")
        for level, listed in self.levels.items():
            unknown = sorted(set(listed) - names)
            if unknown:
                raise ValueError(f"family {self.name}: level {level} names {unknown[0]!r}, "
                                 "which it does not declare")
        for module in self.commands:
            if not module.startswith(f"{self.package}."):
                raise ValueError(f"family {self.name}: its command {module} is not a module "
                                 "of its package")
        if self.levels and not self.checks:
            raise ValueError(f"family {self.name}: validate levels run checks, and its "
                             "cases are not checks")

    def suite_files(self) -> dict[str, Traversable]:
        """The suites it brings: each `suites/NAME.toml` of its package, by NAME."""
        try:
            folder = resources.files(self.package).joinpath("suites")
        except ModuleNotFoundError:
            return {}
        if not folder.is_dir():
            return {}
        return {entry.name.removesuffix(".toml"): entry for entry in folder.iterdir()
                if entry.name.endswith(".toml") and entry.is_file()}


def of_families(families: Sequence[Family]) -> tuple[Family, ...]:
    """The families, each once by name (a name twice is a ValueError)."""
    seen: set[str] = set()
    for family in families:
        if family.name in seen:
            raise ValueError(f"family {family.name} is declared twice")
        seen.add(family.name)
    return tuple(families)
