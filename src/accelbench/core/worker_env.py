"""The environment a case's worker process starts with.

Some libraries read their switches from the environment once, when they load or first
make a handle: ROCm's hipBLASLt takes TF32 only with HIPBLASLT_ALLOW_TF32=1 set before
torch is imported, cuBLAS reads CUBLAS_WORKSPACE_CONFIG when it creates a handle (any
earlier case in the worker may have made one), and MIOpen keeps its find and tuning
databases in folders named by MIOPEN_USER_DB_PATH and MIOPEN_CUSTOM_CACHE_DIR and
searches only in the find mode MIOPEN_FIND_MODE names. Setting such a variable inside a
case is too late, or silently ineffective. A benchmark states what its case needs as a
WorkerEnv;
the runner starts the worker (or the ranks) with it, and cases that need different
environments never share a process.

The user's own environment always wins: a variable already set is left as it is, and
the benchmark records what was in effect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Set in a worker to the names of the variables that point at a fresh empty folder made
# for that worker, comma-separated: a benchmark can tell a cold database from a warm one.
FRESH_DIRS_VARIABLE = "ACCELBENCH_FRESH_DIRS"


@dataclass(frozen=True)
class WorkerEnv:
    """Variables to set (`values`), and variables to point at a new empty folder that
    lives as long as the worker (`fresh_dirs`)."""

    values: tuple[tuple[str, str], ...] = ()
    fresh_dirs: tuple[str, ...] = ()

    @staticmethod
    def of(values: Mapping[str, str] | None = None, fresh_dirs: Iterable[str] = ()) -> WorkerEnv:
        return WorkerEnv(tuple(sorted((values or {}).items())), tuple(sorted(set(fresh_dirs))))

    def __bool__(self) -> bool:
        return bool(self.values or self.fresh_dirs)

    def for_user(self, environ: Mapping[str, str]) -> WorkerEnv:
        """What is left to set once the user's own variables are respected."""
        return WorkerEnv(
            tuple((name, value) for name, value in self.values if name not in environ),
            tuple(name for name in self.fresh_dirs if name not in environ),
        )

    def union(self, other: WorkerEnv) -> WorkerEnv:
        """Both environments in one process: for the cases of one distributed job. Where
        both set a variable differently, the first one's value is kept."""
        values = dict(other.values) | dict(self.values)
        return WorkerEnv.of(values, (*self.fresh_dirs, *other.fresh_dirs))

    def describe(self) -> str:
        """A stable text naming the environment (empty for none): the worker's key."""
        parts = [f"{name}={value}" for name, value in self.values]
        parts += [f"{name}=<fresh folder>" for name in self.fresh_dirs]
        return " ".join(parts)


NONE = WorkerEnv()


def combined(envs: Iterable[WorkerEnv]) -> WorkerEnv:
    out = NONE
    for env in envs:
        out = out.union(env)
    return out
