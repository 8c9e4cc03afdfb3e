"""The processes of one side of an A/B (`accelbench ab`): a stack is a Python interpreter
(a virtual environment's, say, with another PyTorch) and environment variables set over
this process's own.

A side that runs another interpreter gets this accelbench's own code first on its import
path (a folder holding a link to this package), so both sides measure with the same
accelbench and only the stack differs; its PyTorch and the libraries beside it are the
interpreter's own. Its worker speaks to this process over an inherited socket, as a
spawned worker does over its pipe."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.core.request import Stack
from accelbench.core.worker_env import WorkerEnv
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.runner.supervisor import WorkerFactory, WorkerProcess


def python_of(given: str, option: str) -> str | None:
    """The interpreter a side names: a virtual environment's folder or an interpreter;
    None for this process's own. A UserError when there is none."""
    path = Path(given).expanduser()
    if path.is_dir():
        for candidate in (path / "bin" / "python", path / "bin" / "python3"):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                path = candidate
                break
        else:
            raise UserError(f"{option} {given}: no bin/python in that folder (give a virtual "
                            f"environment or a Python interpreter)")
    elif not (path.is_file() and os.access(path, os.X_OK)):
        found = shutil.which(given)
        if found is None:
            raise UserError(f"{option} {given}: no such Python interpreter or virtual "
                            f"environment")
        path = Path(found)
    absolute = os.path.abspath(path)
    return None if absolute == os.path.abspath(sys.executable) else absolute


class StackWorkers:
    """Starts the worker processes of one side: its variables set over the case's own
    environment (the side's win), its interpreter with this accelbench first on the
    import path. `close` removes the folder that path is made of."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self._env = WorkerEnv.of(dict(stack.env))
        self._folder: Path | None = None
        if stack.python is not None:
            from accelbench.runner.lifeline import new_owned_folder

            self._folder = new_owned_folder()
            package = Path(__file__).resolve().parent.parent
            (self._folder / "accelbench").symlink_to(package, target_is_directory=True)

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment a case of this side's is judged against (`WorkerEnv.for_user`):
        this process's, with the side's variables."""
        return {**os.environ, **dict(self.stack.env)}

    def factory(self, base: WorkerFactory | None = None) -> WorkerFactory:
        """A factory of this side's workers; `base` starts one (tests give a fake that
        takes the environment and the interpreter)."""
        from accelbench.runner.supervisor import Worker

        python = self.stack.python
        path = (str(self._folder),) if self._folder is not None else ()

        def start(env: WorkerEnv) -> WorkerProcess:
            combined = self._env.union(env)
            if base is not None:
                return base(combined)
            return Worker(combined, python, path)

        return start

    def rank_env(self, env: WorkerEnv) -> WorkerEnv:
        """What a torchrun job of this side starts with: the side's variables over the
        cases' `env`, and this accelbench first on the ranks' import path."""
        combined = self._env.union(env)
        if self._folder is None:
            return combined
        path = os.pathsep.join([str(self._folder), *filter(None, [os.environ.get("PYTHONPATH")])])
        return WorkerEnv.of({**dict(combined.values), "PYTHONPATH": path}, combined.fresh_dirs)

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
