"""`accelbench tune`: the GEMM shapes a selection runs, tuned offline with PyTorch's
TunableOp, and the table kept beside the store.

TunableOp (torch.cuda.tunable) tunes GEMMs on ROCm and CUDA GPUs only; on the CPU there
is nothing to tune, and `check_tunable` says so before anything runs or is stored. What
TunableOp does, as this module relies on it:

- PYTORCH_TUNABLEOP_ENABLED=1 routes GEMMs through TunableOp; PYTORCH_TUNABLEOP_TUNING=0
  keeps it from tuning; PYTORCH_TUNABLEOP_RECORD_UNTUNED=1 appends each GEMM with no
  tuned entry, once per process, to PYTORCH_TUNABLEOP_UNTUNED_FILENAME, with the current
  device's ordinal inserted before the name's last "." (`untuned.csv` -> `untuned0.csv`).
  The file is opened for appending: every worker process of a run adds to it, so the
  same shape can appear several times (`merge_untuned` keeps each once).
- `tune_gemm_in_file(FILE)` tunes each `Gemm...`/`ScaledGemm...` line of FILE on the
  current device; `mgpu_tune_gemm_in_file(PATTERN, N)` spreads the lines of the files
  PATTERN matches over N GPUs and gathers the results into one file, the results name's
  `%d` replaced by `_full0`.
- PYTORCH_TUNABLEOP_FILENAME names the results file, `%d` replaced by the device's
  ordinal (else the ordinal goes before the last "."). So that a table is found on
  every device, it is stored once and linked under one name per ordinal
  (`TABLE-gpu0.csv`, ...), and the variable set to `TABLE-gpu%d.csv` (`StoredTable.pattern`).
- A results file begins with `Validator` lines (PyTorch, ROCm/HIP, rocBLAS and
  hipBLASLt versions, the GPU's architecture); TunableOp ignores a file whose validators
  do not match the stack reading it.

The steps are small functions with seams (`Seams`) so the GPU path is tested without a
GPU: the probe of the stack, the worker processes of the collecting run and the process
that tunes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.core.request import RunRequest, Stack
from accelbench.errors import EXIT_CASE_FAILED, DeviceError, UserError

if TYPE_CHECKING:
    from accelbench.runner.plan import ValidRequest
    from accelbench.runner.recorder import Listener, Outcome
    from accelbench.runner.supervisor import WorkerFactory
    from accelbench.store import Store

ENABLED = "PYTORCH_TUNABLEOP_ENABLED"
TUNING = "PYTORCH_TUNABLEOP_TUNING"
RECORD_UNTUNED = "PYTORCH_TUNABLEOP_RECORD_UNTUNED"
FILENAME = "PYTORCH_TUNABLEOP_FILENAME"
UNTUNED_FILENAME = "PYTORCH_TUNABLEOP_UNTUNED_FILENAME"

# The lines of an untuned file that the offline tuner reads.
GEMM_PREFIXES = ("Gemm", "ScaledGemm")
UNTUNED_NAME = "untuned.csv"  # the collecting run's file; TunableOp adds the ordinal
GEMMS_NAME = "gemms.csv"  # the shapes, merged; the offline tuner reads it
RESULTS_NAME = "results%d.csv"  # the tuner's results; TunableOp puts the ordinal for %d
MGPU_RESULTS_NAME = "results_full0.csv"  # where mgpu_tune_gemm_in_file gathers them
TUNER_SCRIPT = "tune_gemms.py"
TUNING_FOLDER = "tuning"  # beside the store: the tables
SIDECAR_FORMAT = 1  # the JSON beside a table; 1: the first
HASH_PREFIX = 16  # hex digits of the table's sha256 that name it
COLLECT_MAX_TIME = 0.25  # seconds of sampling per case: a shape needs only to run once
PROBE_TIMEOUT_S = 180.0
DEFAULT_TUNE_TIMEOUT_S = 3600.0


class TuneFailed(UserError):
    """The tuning could not be done as asked: nothing was stored as tuned."""

    exit_code = EXIT_CASE_FAILED


def not_here(where: str) -> DeviceError:
    """The one line (exit 4) where TunableOp has nothing to tune."""
    return DeviceError(f"tune: TunableOp tunes GEMMs on ROCm and CUDA GPUs; nothing to tune "
                       f"on {where}")


# --- the stack: is there anything to tune here? ----------------------------------------

@dataclass(frozen=True)
class GpuStack:
    """What the stack's PyTorch says of TunableOp on this machine."""

    platform: str  # "rocm", "cuda" or "cpu" (no usable GPU)
    devices: int  # GPUs visible
    torch_version: str
    offline: bool  # torch.cuda.tunable.tune_gemm_in_file
    multi: bool  # torch.cuda.tunable.mgpu_tune_gemm_in_file

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> GpuStack:
        return GpuStack(str(data.get("platform", "cpu")), int(data.get("devices", 0)),
                        str(data.get("torch", "?")), bool(data.get("offline")),
                        bool(data.get("multi")))


_PROBE = """\
import json
import torch
tunable = getattr(torch.cuda, "tunable", None)
usable = torch.cuda.is_available()
print(json.dumps({
    "platform": ("rocm" if torch.version.hip else "cuda") if usable else "cpu",
    "devices": torch.cuda.device_count() if usable else 0,
    "torch": torch.__version__,
    "offline": hasattr(tunable, "tune_gemm_in_file"),
    "multi": hasattr(tunable, "mgpu_tune_gemm_in_file"),
}))
"""


def probe_stack(python: str | None, timeout: float = PROBE_TIMEOUT_S) -> GpuStack:
    """Ask the stack's interpreter (None: this one) in a process of its own whether a GPU
    and TunableOp's offline tuning are there; this process never imports torch."""
    command = [python or sys.executable, "-c", _PROBE]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        raise TuneFailed(f"tune: reading the stack's GPUs timed out after {timeout:.0f} s"
                         ) from None
    except OSError as exc:
        raise UserError(f"tune: could not start {command[0]}: {exc.strerror or exc}") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise UserError(f"tune: the stack's PyTorch could not be read: {why}")
    try:
        return GpuStack.from_dict(json.loads(lines[-1]))
    except (ValueError, TypeError, AttributeError):
        raise UserError(f"tune: the stack's PyTorch could not be read: {lines[-1][:200]!r}"
                        ) from None


def check_tunable(device_kind: str, python: str | None,
                  probe: Callable[[str | None], GpuStack]) -> GpuStack:
    """The GPUs TunableOp can tune on, or a DeviceError (exit 4) in one line: the CPU
    asked for or all there is, another kind of device, or a PyTorch without offline
    tuning. Nothing has run or been stored yet."""
    if device_kind == "cpu":
        raise not_here("the cpu")
    if device_kind not in ("auto", "cuda"):
        raise not_here(f"{device_kind} devices")
    found = probe(python)
    if found.platform == "cpu" or found.devices < 1:
        raise not_here("the cpu (this PyTorch sees no ROCm or CUDA GPU)")
    if not found.offline:
        raise DeviceError(f"tune: PyTorch {found.torch_version} has no offline TunableOp "
                          "tuning (torch.cuda.tunable.tune_gemm_in_file): a newer PyTorch "
                          "has it")
    return found


# --- collecting the shapes -------------------------------------------------------------

def collection_env(folder: Path) -> dict[str, str]:
    """The variables of the collecting run's processes: TunableOp on, not tuning, every
    untuned GEMM recorded in `folder`."""
    return {ENABLED: "1", TUNING: "0", RECORD_UNTUNED: "1",
            UNTUNED_FILENAME: str(folder / UNTUNED_NAME)}


def collection_request(request: RunRequest) -> RunRequest:
    """The run that collects the shapes: the selection once, in one process per case,
    with short sampling (a shape is recorded the first time it runs); no report."""
    timing = dict(request.timing)
    given = timing.get("max_time")
    short = (min(float(given), COLLECT_MAX_TIME)
             if isinstance(given, int | float) and not isinstance(given, bool)
             else COLLECT_MAX_TIME)
    timing.update(max_time=short, processes=1)
    return request.replace(timing=timing, repeat=1, report=None, no_report=True)


def collect(valid: ValidRequest, store: Callable[[], Store], stack: Stack, *,
            argv: Sequence[str] = (), listener: Listener | None = None,
            base: WorkerFactory | None = None) -> Outcome:
    """Run the collecting request (`collection_request`) under `stack` (its variables
    among them, `collection_env`): an ordinary run, stored as any other. `base` starts a
    worker (tests give a fake)."""
    from accelbench.runner.session import run_session
    from accelbench.runner.stack import StackWorkers

    workers = StackWorkers(stack)
    try:
        return run_session(valid, store, argv=argv, listener=listener,
                           case_timeout=valid.request.case_timeout,
                           worker_factory=workers.factory(base))
    finally:
        workers.close()


def merge_untuned(folder: Path) -> list[str]:
    """The GEMM lines of every untuned file in `folder` (one per device), each shape
    (operator and parameters) once, in the order first seen."""
    stem, suffix = os.path.splitext(UNTUNED_NAME)
    seen: dict[tuple[str, str], str] = {}
    for path in sorted(folder.glob(f"{stem}*{suffix}")):
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = raw.strip()
            if not line.startswith(GEMM_PREFIXES):
                continue
            parts = line.split(",")
            if len(parts) < 2:
                continue
            seen.setdefault((parts[0], parts[1]), ",".join(parts[:2]))
    return list(seen.values())


# --- tuning them -----------------------------------------------------------------------

# Run by the stack's interpreter in the tuning folder, with only torch and the standard
# library: it tunes GEMMS_NAME and prints, last, where the results are.
_TUNER = '''\
"""Tune the GEMMs of a file with TunableOp (written by accelbench tune)."""
import json
import os
import sys


def main():
    gemms, gpus, gathered = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    import torch
    if not torch.cuda.is_available():
        sys.exit("no ROCm or CUDA GPU: TunableOp has nothing to tune here")
    import torch.cuda.tunable as tunable
    if gpus > 1:
        stem, _, suffix = gemms.rpartition(".")
        tunable.mgpu_tune_gemm_in_file(f"{stem}*.{suffix}", gpus)
        results = gathered
    else:
        tunable.tune_gemm_in_file(gemms)
        # The name TunableOp gave the results (its ordinal in place of %d), else that
        # name made here, where this PyTorch leaves it unset.
        results = tunable.get_filename() or os.environ["PYTORCH_TUNABLEOP_FILENAME"].replace(
            "%d", str(torch.cuda.current_device()))
        tunable.write_file(results)
    print(json.dumps({"results": results, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
'''


@dataclass(frozen=True)
class TunerCommand:
    """The process that tunes: its command line, the variables set over this process's
    environment, and the folder it runs in."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path


def tuner_command(python: str | None, folder: Path, gpus: int) -> TunerCommand:
    """The command that tunes `folder`/GEMMS_NAME on `gpus` GPUs (several: with
    mgpu_tune_gemm_in_file). Names inside `folder` are relative: the multi-GPU gatherer
    derives its copies' names by replacing every "0" in the results name."""
    (folder / TUNER_SCRIPT).write_text(_TUNER, encoding="utf-8")
    env = {ENABLED: "1", TUNING: "1", RECORD_UNTUNED: "0", FILENAME: RESULTS_NAME}
    return TunerCommand((python or sys.executable, TUNER_SCRIPT, GEMMS_NAME, str(gpus),
                         MGPU_RESULTS_NAME), env, folder)


def run_tuner(command: TunerCommand, timeout: float) -> str:
    """Run the tuner to its end, or stop it (its whole session) once `timeout` seconds
    have passed: a GPU that hangs fails the tuning, never the command. Its standard
    output, or TuneFailed with the last line of what it said."""
    from accelbench.runner.lifeline import end_job, parent_death_preexec

    env = {**os.environ, **command.env}
    try:
        process = subprocess.Popen(list(command.argv), cwd=command.cwd, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True,
                                   preexec_fn=parent_death_preexec(signal.SIGTERM))
    except OSError as exc:
        raise TuneFailed(f"tune: could not start the tuner {command.argv[0]}: "
                         f"{exc.strerror or exc}") from None
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_job(process)
        process.communicate()
        raise TuneFailed(f"tune: the tuner timed out after {timeout:g} s (see "
                         "--tune-timeout); no table was stored") from None
    except BaseException:
        end_job(process)
        raise
    if process.returncode != 0:
        lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
        why = lines[-1].strip() if lines else f"exit status {process.returncode}"
        raise TuneFailed(f"tune: the tuner failed: {why[:300]}; no table was stored")
    return out.decode(errors="replace")


def results_of(stdout: str, folder: Path) -> Path:
    """The results file the tuner named on its last line, inside `folder`."""
    lines = stdout.strip().splitlines()
    try:
        named = str(json.loads(lines[-1])["results"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise TuneFailed("tune: the tuner did not say where its results are; no table was "
                         "stored") from None
    path = (folder / named).resolve()
    if path.parent != folder.resolve() or not path.is_file():
        raise TuneFailed(f"tune: the tuner wrote no results file ({named}); no table was "
                         "stored")
    return path


def tune_collected(collected: Outcome, work: Path, request: RunRequest, python: str | None,
                   gpus: GpuStack, files_dir: Path,
                   run: Callable[[TunerCommand, float], str],
                   timeout: float | None) -> tuple[int, StoredTable]:
    """Tune the shapes the collecting run recorded in `work` (`merge_untuned`) with the
    stack's interpreter (`run`, within `timeout` seconds) on its GPUs, and keep the table
    under `files_dir` (`store_table`): the number of shapes and the table kept. TuneFailed,
    nothing kept, where there is nothing to tune or the tuner failed."""
    gemms = merge_untuned(work)
    if not gemms:
        failed = len(collected.failed)
        raise TuneFailed(f"tune: the cases of run {collected.run_id} ran no GEMM through "
                         f"TunableOp{f' ({failed} failed)' if failed else ''}: nothing to "
                         "tune, no table stored")
    folder = work / "tune"
    folder.mkdir()
    (folder / GEMMS_NAME).write_text("".join(f"{g}\n" for g in gemms), encoding="utf-8")
    command = tuner_command(python, folder, gpus.devices if gpus.multi else 1)
    out = run(command, timeout or DEFAULT_TUNE_TIMEOUT_S)
    device = collected.fingerprint.device
    meta = {"selection": request.replace(report=None, no_report=False).to_dict(),
            "collection_runs": [collected.run_id], "created": now_iso(),
            "device": {"name": device.name, "arch": device.arch, "platform": device.platform,
                       "count": gpus.devices},
            "torch": gpus.torch_version, "python": python}
    table = store_table(results_of(out, folder), tuning_dir(files_dir), gemms, gpus.devices,
                        meta)
    return len(gemms), table


# --- keeping the table -----------------------------------------------------------------

@dataclass(frozen=True)
class StoredTable:
    """A tuned table kept beside the store: the CSV, its sidecar, and the value of
    PYTORCH_TUNABLEOP_FILENAME that finds it on every device linked."""

    path: Path
    sidecar: Path
    pattern: str
    sha256: str
    entries: int
    validators: Mapping[str, str]
    meta: Mapping[str, Any] = field(default_factory=dict)


def tuning_dir(files_dir: Path) -> Path:
    return files_dir / TUNING_FOLDER


def store_table(results: Path, folder: Path, gemms: Sequence[str], devices: int,
                meta: Mapping[str, Any]) -> StoredTable:
    """Keep the tuner's `results` in `folder` as SHA-PREFIX.csv (read-only) with
    SHA-PREFIX.json beside it and a link SHA-PREFIX-gpuN.csv per device, once it reads
    as a table that tunes at least one of the `gemms` collected; TuneFailed (nothing
    kept) otherwise. A table already kept is kept as it is; its sidecar gains the new
    collecting runs."""
    from accelbench.env.tuning import read_tunableop

    table = read_tunableop(results)
    if not table.exists or not table.sha256:
        raise TuneFailed(f"tune: the tuner's results could not be read "
                         f"({', '.join(table.problems)}); no table was stored")
    if table.problems:
        raise TuneFailed(f"tune: the tuner's results are not a clean TunableOp table "
                         f"({'; '.join(table.problems)}); no table was stored")
    wanted = {tuple(line.split(",")[:2]) for line in gemms}
    tuned = [e for e in table.entries if (e.op, e.params) in wanted]
    if not tuned:
        raise TuneFailed(f"tune: TunableOp tuned none of the {len(gemms)} GEMM shape(s) "
                         "collected (offline tuning skips some shapes); no table was stored")
    if not table.validators:
        raise TuneFailed("tune: the tuner's results carry no validators; no table was stored")
    if "%" in str(folder):
        raise UserError(f"tune: {folder}: a folder whose name holds '%' cannot be given "
                        "to TunableOp")
    folder.mkdir(parents=True, exist_ok=True)
    name = table.sha256[:HASH_PREFIX]
    path, sidecar = folder / f"{name}.csv", folder / f"{name}.json"
    if not path.exists():
        staged = folder / f".{name}.csv.{os.getpid()}"
        staged.write_bytes(results.read_bytes())
        staged.chmod(0o444)  # TunableOp with tuning on would append to it
        os.replace(staged, path)
    for ordinal in range(max(1, devices)):
        link = folder / f"{name}-gpu{ordinal}.csv"
        if not link.is_symlink():
            with contextlib.suppress(FileExistsError):
                link.symlink_to(path.name)
    pattern = str(folder / f"{name}-gpu%d.csv")
    data = {
        "format": SIDECAR_FORMAT,
        "table": path.name,
        "sha256": table.sha256,
        "entries": len(table.entries),
        "gemms_collected": len(gemms),
        "gemms_tuned": len(tuned),
        "validators": dict(sorted(table.validators.items())),
        "filename": pattern,
        "devices_linked": max(1, devices),
        **meta,
    }
    previous = _read_sidecar(sidecar)
    runs = list(dict.fromkeys([*previous.get("collection_runs", []),
                               *data.get("collection_runs", [])]))
    if runs:
        data["collection_runs"] = runs
    staged = folder / f".{name}.json.{os.getpid()}"
    staged.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(staged, sidecar)
    return StoredTable(path, sidecar, pattern, table.sha256, len(table.entries),
                       dict(table.validators), data)


def _read_sidecar(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def tuned_env(table: StoredTable) -> tuple[tuple[str, str], ...]:
    """The variables of a stack that uses `table`: TunableOp on, no tuning, the table."""
    return ((ENABLED, "1"), (TUNING, "0"), (FILENAME, table.pattern))


def untuned_env() -> tuple[tuple[str, str], ...]:
    return ((ENABLED, "0"),)


# --- the seams -------------------------------------------------------------------------

def _no_base(phase: str) -> WorkerFactory | None:
    return None


@dataclass(frozen=True)
class Seams:
    """What tests replace to run the GPU path without a GPU: the probe of the stack,
    each phase's base worker factory ("collect", "a", "b"; None: real workers), and the
    tuner's process."""

    probe: Callable[[str | None], GpuStack] = probe_stack
    workers: Callable[[str], WorkerFactory | None] = _no_base
    run_tuner: Callable[[TunerCommand, float], str] = run_tuner


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
