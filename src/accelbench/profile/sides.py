"""The two sides of `accelbench explain`: which stack made each run, and the case profiled
again under it.

A side's stack is the one its run was measured under:
- a run of an A/B (`accelbench ab`) keeps its stack in its request: its interpreter and
  the variables set over the environment;
- any other run keeps, in its fingerprint, the environment switches it ran with
  (`env.fingerprint.environment_switches`): the side's processes get exactly those in
  place of this process's own, and run this interpreter unless `--a`/`--b` names the one
  the run was made with.
A side's interpreter must hold the PyTorch its run was measured with, or the profile would
explain another stack: that is checked first, without importing PyTorch here.

Each profile is `accelbench profile --request FILE --json` run by the side's interpreter,
with this accelbench first on its import path (as `ab` runs its sides), under a deadline.
It stores its own run in the same store (passed in the environment, never on a command
line: a database URL may carry a password)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.core.request import ProfileRequest, RunRequest, Stack
from accelbench.errors import UserError

if TYPE_CHECKING:
    from accelbench.core.measurement import Measurement
    from accelbench.store import StoredRun
    from accelbench.store.location import StoreLocation

SIDES = ("a", "b")
# The PyTorch release an interpreter holds, as torch.__version__ says it (with its local
# part, "+cu130", "+rocm6.4"), read from torch/version.py without importing PyTorch.
_VERSION_PROBE = """
import importlib.util, os, re
spec = importlib.util.find_spec("torch")
found = ""
for folder in (spec.submodule_search_locations or []) if spec else []:
    try:
        with open(os.path.join(folder, "version.py"), encoding="utf-8") as f:
            m = re.search(r"^__version__\\s*=\\s*['\\"]([^'\\"]+)['\\"]", f.read(), re.M)
    except OSError:
        continue
    if m:
        found = m.group(1)
        break
print(found)
"""
_PROBE_TIMEOUT_S = 60.0
_OUTPUT_MAX = 16 * 1024 * 1024


@dataclass(frozen=True)
class Side:
    """One side: its run, the case's stored measurement in it, and its stack; `inherit`
    where the stack's variables go over this process's environment (an A/B's), else they
    replace its environment switches (a run's recorded ones)."""

    name: str
    run: StoredRun
    measurement: Measurement
    stack: Stack
    inherit: bool

    @property
    def torch_version(self) -> str | None:
        torch = self.run.fingerprint.get("torch")
        version = torch.get("version") if isinstance(torch, Mapping) else None
        return version if isinstance(version, str) else None

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of this side's processes."""
        from accelbench.env.fingerprint import environment_switches

        base = dict(os.environ if base is None else base)
        if not self.inherit:
            for name in environment_switches(base):
                base.pop(name, None)
        base.update(dict(self.stack.env))
        return base


def stack_of(run: StoredRun, side: str, python: str | None,
             env: Sequence[tuple[str, str]]) -> tuple[Stack, bool]:
    """The stack `run` was measured under, with `python` (a side's --a/--b) and `env`
    (--a-env/--b-env) given over it; and whether its variables go over this process's
    environment (an A/B's) rather than replace its switches."""
    from accelbench.analysis.ab import ab_of

    ab = ab_of(run.record)
    if ab is not None:
        stack = ab.a if ab.side == "a" else ab.b
        inherit = True
    else:
        recorded = run.fingerprint.get("environment")
        pairs = (tuple((str(k), str(v)) for k, v in recorded.items())
                 if isinstance(recorded, Mapping) else ())
        stack = Stack(None, pairs)
        inherit = False
    merged = dict(stack.env)
    merged.update(dict(env))
    return Stack(python if python is not None else stack.python,
                 tuple(sorted(merged.items()))), inherit


def installed_torch(python: str | None) -> str | None:
    """The PyTorch release `python` (None: this one) has installed, as its
    torch.__version__ reads (PyTorch is not imported); None where it has none."""
    command = [python or sys.executable, "-c", _VERSION_PROBE]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"cannot run {python or sys.executable}: {e}") from None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def check_stack(side: Side, option: str) -> None:
    """A UserError when the side's interpreter holds another PyTorch than its run's."""
    wanted = side.torch_version
    found = installed_torch(side.stack.python)
    if wanted is None or found == wanted:
        return
    where = side.stack.python or "this Python"
    have = f"has PyTorch {found}" if found else "has no PyTorch"
    raise UserError(f"run {side.run.record.id} (side {side.name.upper()}) was measured with "
                    f"PyTorch {wanted}, but {where} {have}: give {option} with the "
                    "interpreter or virtual environment of that stack")


def profile_request(measurement: Measurement, run: StoredRun, steps: int, warmup: int,
                    wait: int) -> RunRequest:
    """The `accelbench profile` request of the stored case: its benchmark with every
    parameter of its identity, its device, its CPU threads where it recorded them, and
    the processes and backend its run was asked for."""
    case = measurement.case
    values: dict[str, tuple[Any, ...]] = {}
    threads = None
    for name, value in case.param_dict.items():
        if name == "threads" and isinstance(value, int) and not isinstance(value, bool):
            threads = value
        elif name != "dtype":
            values[name] = (value,)
    asked = stored_request(run)
    return RunRequest(command="profile", suite="profile", benches=(case.benchmark,),
                      values=values, dtypes=(case.dtype,) if case.dtype else (),
                      device=case.device or asked.device, threads=threads,
                      nproc_per_node=asked.nproc_per_node, backend=asked.backend,
                      oversubscribe=asked.oversubscribe,
                      profile=ProfileRequest(wait=wait, warmup=warmup, active=steps))


def run_request(profiled: RunRequest, run: StoredRun) -> RunRequest:
    """The `accelbench run` request that measures the case again as its run did: the
    profile's case with the run's timing, timeout and quiet-host wait, one repeat."""
    asked = stored_request(run)
    return profiled.replace(command="run", suite="quick", profile=None, repeat=1,
                            timing=asked.timing, case_timeout=asked.case_timeout,
                            wait_quiet=asked.wait_quiet)


def stored_request(run: StoredRun) -> RunRequest:
    """What the run was asked for; the defaults where it kept nothing that reads (a
    store from anywhere is untrusted)."""
    from accelbench.core.request import RequestError

    if run.record.request is None:
        return RunRequest()
    try:
        return RunRequest.from_dict(dict(run.record.request), f"run {run.record.id}")
    except RequestError:
        return RunRequest()


@dataclass(frozen=True)
class Profiled:
    """One profile of a side: its stored run and its trace files."""

    run_id: str
    traces: tuple[Path, ...]
    status: str
    problems: tuple[str, ...] = ()


def command_line(side: Side, request_file: Path) -> list[str]:
    """How a side's profile is started: its interpreter running accelbench."""
    return [side.stack.python or sys.executable, "-m", "accelbench", "profile", "--request",
            str(request_file), "--json"]


def repro_line(side: Side, request_file: Path, command: str) -> str:
    """The shell line that reproduces a side: its switches, its interpreter, `command`
    (`run` or `profile`) with the request file. Secrets' values are not written."""
    from accelbench.core.request import SECRET_NAME

    words = [f"{name}={'***' if SECRET_NAME.search(name) else shlex.quote(value)}"
             for name, value in side.stack.env]
    python = side.stack.python or sys.executable
    words += [shlex.quote(python), "-m", "accelbench", command, "--request",
              shlex.quote(str(request_file))]
    return " ".join(words)


def run_profile(side: Side, request_file: Path, location: StoreLocation, folder: Path,
                timeout_s: float) -> Profiled:
    """One profile of `side` in a process of its stack; a UserError (exit 1) when it
    fails, times out or prints nothing that reads."""
    env = side.environment()
    env["ACCELBENCH_STORE"] = location.url_without_secrets or str(location.path)
    password = location.postgres.password if location.postgres is not None else None
    if password is not None:
        env["PGPASSWORD"] = password.reveal()
    if side.stack.python is not None:
        link = folder / "path"
        if not link.exists():
            link.mkdir()
            (link / "accelbench").symlink_to(Path(__file__).resolve().parent.parent,
                                             target_is_directory=True)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(link),
                                                          os.environ.get("PYTHONPATH")]))
    process = subprocess.Popen(command_line(side, request_file), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                               text=True, errors="replace", start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise UserError(f"the profile of side {side.name.upper()} timed out after "
                        f"{timeout_s:.0f} s", exit_code=1) from None
    except BaseException:
        _stop(process)
        raise
    try:
        data = json.loads(out[:_OUTPUT_MAX]) if out else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        said = err.strip().splitlines()
        last = (said[-1] if said else f"exit status {process.returncode}"
                if process.returncode else "it printed no result that reads")
        raise UserError(f"the profile of side {side.name.upper()} failed: {last}",
                        exit_code=1)
    traces = tuple(Path(p) for p in data.get("traces") or () if isinstance(p, str))
    problems = [str(p) for p in data.get("problems") or ()]
    measured = data.get("measurement")
    if isinstance(measured, dict) and measured.get("status") not in (None, "ok"):
        problems.insert(0, f"the case {measured.get('status')}: "
                           f"{measured.get('reason') or 'no reason given'}")
    return Profiled(data["run_id"], traces, str(data.get("status")), tuple(problems))


def _stop(process: subprocess.Popen[str]) -> None:
    """End the profile's process group (it may have started workers), reap it and close
    its pipes."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
    try:
        process.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # a straggler holds the pipes: leave them to it
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()
