"""The registry: the families accelbench knows (core.family) and the benchmarks they
declare (core.benchmark), listed explicitly; what a command, a suite or a report finds of
them, it finds here.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from accelbench.core.benchmark import (
    DEVICE_TYPES,
    Benchmark,
    MeasureFn,
    ViewFn,
    resolve_entry,
    source_version,
)
from accelbench.core.family import Family, of_families
from accelbench.errors import UserError

if TYPE_CHECKING:
    from importlib.abc import Traversable

    from accelbench.core.family import Command, SlurmJob
    from accelbench.core.measurement import Measurement

# Declarations are read from here too: `from accelbench.core.registry import Benchmark`.
__all__ = ["DEVICE_TYPES", "Benchmark", "MeasureFn", "Registry", "ViewFn", "core_suite_files",
           "resolve_entry", "source_version"]


# The ladder of accelbench's own suites, deepest last, listed first; the others follow by
# name.
_LADDER = ("quick", "standard", "full")


def core_suite_files() -> dict[str, Traversable]:
    """accelbench's own suites (`accelbench/suites/*.toml`), by name: the ladder first."""
    from importlib import resources

    found = {entry.name.removesuffix(".toml"): entry
             for entry in resources.files("accelbench.suites").iterdir()
             if entry.name.endswith(".toml")}
    return dict(sorted(found.items(), key=lambda item: (
        _LADDER.index(item[0]) if item[0] in _LADDER else len(_LADDER), item[0])))


class Registry:
    """An explicit, ordered collection of benchmark declarations, and of the families that
    declare them (`of`); a registry of benchmarks alone (a test's) has no family
    declarations: no checks, levels, suites or commands of its own."""

    def __init__(self, benchmarks: Iterable[Benchmark], families: Sequence[Family] = (),
                 locator: str | None = None) -> None:
        # Where another process finds this registry ("module:attribute"): the ranks of a
        # torchrun job are handed their cases by benchmark name and find the declarations
        # through it (a registry without one cannot start ranks).
        self.locator = locator
        self._by_name: dict[str, Benchmark] = {}
        for bench in benchmarks:
            if bench.name in self._by_name:
                raise ValueError(f"benchmark {bench.name} is declared twice")
            self._by_name[bench.name] = bench
        self.declared: tuple[Family, ...] = of_families(families)

    @classmethod
    def of(cls, families: Iterable[Family], locator: str | None = None) -> Registry:
        """The registry of these families' benchmarks, in their order; a family's
        benchmarks are checks when it says so."""
        declared = tuple(families)
        return cls((dataclasses.replace(b, check=f.checks) if f.checks else b
                    for f in declared for b in f.benchmarks), declared, locator)

    @staticmethod
    def located(locator: str) -> Registry:
        """The registry another process named by its locator."""
        registry = resolve_entry(locator)
        if not isinstance(registry, Registry):
            raise ValueError(f"{locator} is not a registry")
        return registry

    def family(self, name: str) -> Family | None:
        """The declaration of the family `name` (None where none was declared)."""
        return next((f for f in self.declared if f.name == name), None)

    def checks(self) -> list[str]:
        """The benchmarks that are checks, in registry order."""
        return [b.name for b in self if b.check]

    def level_checks(self, level: int) -> list[str]:
        """The checks `validate --level N` runs: what each family names at that level."""
        return [name for f in self.declared for name in f.levels.get(level, ())]

    def levels(self) -> tuple[int, ...]:
        return tuple(sorted({level for f in self.declared for level in f.levels}))

    def suite_files(self) -> dict[str, Traversable]:
        """Every suite by name: accelbench's own (`accelbench/suites`), then each family's
        (`suites/*.toml` in its package), in registry order; a family's suite may not take
        another's name."""
        found = core_suite_files()
        for family in self.declared:
            for name, entry in family.suite_files().items():
                if name in found:
                    raise ValueError(f"family {family.name}: its suite {name!r} has the name "
                                     "of another")
                found[name] = entry
        return found

    def commands(self) -> list[Command]:
        """The commands the families bring, in registry order, their modules imported now
        (each must be a `Command`: NAME, HELP, add_arguments and run)."""
        found: list[Command] = []
        for family in self.declared:
            for name in family.commands:
                module = importlib.import_module(name)
                missing = [a for a in ("NAME", "HELP", "add_arguments", "run")
                           if not hasattr(module, a)]
                if missing:
                    raise ValueError(f"family {family.name}: {name} is not a command "
                                     f"(no {', '.join(missing)})")
                found.append(module)
        return found

    def slurm_jobs(self) -> list[SlurmJob]:
        return [job for f in self.declared for job in f.slurm]

    def __iter__(self) -> Iterator[Benchmark]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def names(self) -> list[str]:
        return list(self._by_name)

    @property
    def families(self) -> tuple[str, ...]:
        """The families of the benchmarks, in the order they are first declared."""
        return tuple(dict.fromkeys(b.family for b in self))

    def views(self, measurements: Iterable[Measurement]) -> list[tuple[ViewFn, list[Measurement]]]:
        """Each view the benchmarks of `measurements` declare, in the order of the
        registry, with the measurements it is given (in their own order). A measurement
        of a benchmark not declared here (a record from another version) goes to the
        views that every benchmark of its family shares."""
        shared: dict[str, list[str]] = {}
        for family in self.families:
            benches = [b for b in self if b.family == family]
            shared[family] = [v for v in benches[0].views if all(v in b.views for b in benches)]
        order = list(dict.fromkeys(v for b in self for v in b.views))
        given: dict[str, list[Measurement]] = {}
        for m in measurements:
            bench = self._by_name.get(m.case.benchmark)
            for entry in bench.views if bench else shared.get(m.case.family, ()):
                given.setdefault(entry, []).append(m)
        return [(resolve_entry(entry), given[entry]) for entry in order if entry in given]

    def get(self, name: str) -> Benchmark:
        try:
            return self._by_name[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._by_name, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            known = ", ".join(self._by_name)
            raise UserError(f"unknown benchmark {name!r}{hint}; known: {known}") from None
