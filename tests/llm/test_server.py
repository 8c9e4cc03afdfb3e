"""Engines started as processes: ready or a one-line EndpointError, and always stopped:
by stop(), and when the process that started them is interrupted, terminated or killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from accelbench.benchmarks.llm.engines.server import (
    ManagedServer,
    free_port,
    transformers_serve_command,
    vllm_command,
)
from accelbench.errors import EndpointError


def _gone(pid: int, within: float = 15.0) -> bool:
    """Whether `pid` has exited (a zombie no one reaped counts as exited)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def _http_server(port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]


def test_never_ready_is_an_endpoint_error_and_is_stopped(tmp_path: Path) -> None:
    server = ManagedServer([sys.executable, "-c", "print('loading', flush=True); "
                            "import time; time.sleep(120)"],
                           port=free_port(), log_path=tmp_path / "s.log", ready_timeout=1)
    with pytest.raises(EndpointError, match=r"was not ready within 1 s: ") as e:
        server.start()
    assert "\n" not in str(e.value)  # the log's last lines, on one line
    assert server.pid is not None and _gone(server.pid)


def test_a_server_that_dies_says_why(tmp_path: Path) -> None:
    server = ManagedServer([sys.executable, "-c", "import sys; print('bad weights'); "
                            "print('Traceback: boom', file=sys.stderr); sys.exit(3)"],
                           port=free_port(), log_path=tmp_path / "s.log", ready_timeout=60)
    with pytest.raises(EndpointError, match=r"exited with code 3 before it was ready: "
                                            r"bad weights \| Traceback: boom"):
        server.start()


def test_a_missing_program_is_an_endpoint_error(tmp_path: Path) -> None:
    server = ManagedServer([str(tmp_path / "no-such-engine")], port=free_port(),
                           log_path=tmp_path / "s.log")
    with pytest.raises(EndpointError, match="cannot start"):
        server.start()


def test_stop_ends_the_server_and_what_it_started(tmp_path: Path) -> None:
    port = free_port()
    child = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {child}; exec {' '.join(_http_server(port))}"
    server = ManagedServer(["bash", "-c", script], port=port, log_path=tmp_path / "s.log",
                           ready_paths=("/",), ready_timeout=60)
    with server:
        assert server.alive() and server.answers()
        pid = server.pid
        assert pid is not None
    assert _gone(pid) and _gone(int(child.read_text()))
    assert not server.alive()
    server.stop()  # again: nothing to do


PARENT = textwrap.dedent("""
    import sys, time
    from accelbench.benchmarks.llm.engines.server import ManagedServer
    port = int(sys.argv[1])
    server = ManagedServer([sys.executable, "-m", "http.server", str(port), "--bind",
                            "127.0.0.1"], port=port, log_path=sys.argv[2],
                           ready_paths=("/",), ready_timeout=60)
    server.start()
    print(server.pid, flush=True)
    while True:
        time.sleep(1)
""")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_server_dies_with_its_parent(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "parent.py").write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), str(free_port()),
                               str(tmp_path / "s.log")], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), line
        server = int(line)
        assert not _gone(server, within=0.2)
        parent.send_signal(sig)
        parent.wait(30)
        assert _gone(server)
    finally:
        parent.kill()
        parent.communicate()


def test_command_builders(tmp_path: Path) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    for script in ("transformers", "vllm"):
        (python.parent / script).touch()
    command = transformers_serve_command(tmp_path / "m", 8123, device="cpu", dtype="float32",
                                         python=python, options={"cb_num_blocks": 64})
    assert command == [str(python.parent / "transformers"), "serve", "--host", "127.0.0.1",
                       "--port", "8123", "--device", "cpu", "--continuous-batching",
                       "--dtype", "float32", "--cb-num-blocks", "64", "--cb-block-size",
                       "64", "--cb-max-batch-tokens", "512", str(tmp_path / "m")]
    command = transformers_serve_command(tmp_path / "m", 8123, device="cuda", python=python)
    assert not [flag for flag in command if flag.startswith("--cb-")]
    command = vllm_command(tmp_path / "m", 8123, model_name="tiny", max_model_len=2048,
                           python=python, options={"enforce_eager": True})
    assert command[:3] == [str(python.parent / "vllm"), "serve", str(tmp_path / "m")]
    assert "--load-format" in command and command[-1] == "--enforce-eager"
    with pytest.raises(EndpointError, match="vllm is not installed next to"):
        vllm_command(tmp_path, 1, model_name="x", max_model_len=1, python=tmp_path / "python")


@pytest.mark.slow
@pytest.mark.server
def test_transformers_serve_streams_and_passes_the_canary(tmp_path: Path) -> None:
    from accelbench.benchmarks.llm.engines import probe, started
    from accelbench.benchmarks.llm.engines.canary import check
    from accelbench.benchmarks.llm.engines.model_dir import model_dir

    folder = model_dir("llama-tiny", root=tmp_path / "models")
    with started("transformers-serve", str(folder), dtype="float32", ready_timeout=300,
                 log_dir=tmp_path / "logs") as endpoint:
        assert endpoint.name == "transformers-serve" and endpoint.version.startswith("5.")
        body = {"model": endpoint.model, "prompt": "w5 w7 w100", "max_tokens": 6,
                "stream": True, "temperature": 0}
        request = urllib.request.Request(endpoint.url + "/v1/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            lines = [line.decode().strip() for line in response]
        chunks = [json.loads(line[6:]) for line in lines
                  if line.startswith("data: {")]
        usage = [c["usage"] for c in chunks if c.get("usage")]
        assert usage[-1]["completion_tokens"] == 6 and usage[-1]["prompt_tokens"] == 3
        result = check(endpoint, max_tokens=8)
        assert result.ok and not result.skipped and result.tokens == 24, result.detail
        by_url = probe(endpoint.url)  # the same server, as a URL engine
        assert by_url.model == str(folder) and by_url.weights == folder
        assert check(by_url, max_tokens=4).ok
        port = int(endpoint.url.rsplit(":", 1)[1])
    assert os.system(f"exec 3<>/dev/tcp/127.0.0.1/{port} 2>/dev/null") != 0
