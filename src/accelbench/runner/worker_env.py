"""Starting a process with a case's WorkerEnv (see core.worker_env)."""

from __future__ import annotations

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
