"""Starting a process with a case's WorkerEnv (see core.worker_env)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from accelbench.core.worker_env import FRESH_DIRS_VARIABLE, WorkerEnv


def worker_environment(env: WorkerEnv, parent: Path | None = None
                       ) -> tuple[Path | None, dict[str, str]]:
    """The variables to set in a process started with `env`, and the folder holding its
    fresh folders, one per variable: made in `parent` (which its owner removes), else a
    new folder of this process's own (see runner.lifeline) for the caller to remove;
    None when `env` asks for no fresh folder."""
    from accelbench.runner.lifeline import new_owned_folder

    environ = dict(env.values)
    if not env.fresh_dirs:
        return None, environ
    if parent is None:
        folder = new_owned_folder()
    else:
        folder = parent
        folder.mkdir(parents=True)
    for name in env.fresh_dirs:
        fresh = folder / name.lower()
        fresh.mkdir()
        environ[name] = str(fresh)
    environ[FRESH_DIRS_VARIABLE] = ",".join(env.fresh_dirs)
    return folder, environ


@contextlib.contextmanager
def applied(env: WorkerEnv) -> Iterator[None]:
    """`env` set in this process for a while, for a case that runs here rather than in
    a worker (`accelbench profile`): what a library reads only when torch loads cannot
    change any more, and the case's own read-back of its state says so. The process's
    environment and the fresh folders are back as they were afterwards."""
    folder, environ = worker_environment(env)
    saved = {name: os.environ.get(name) for name in environ}
    os.environ.update(environ)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
