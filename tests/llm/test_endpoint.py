"""Endpoints by URL: probed for their model and name, refused in one line when they
cannot be used (never showing a secret); and importing the engines is light."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from accelbench.benchmarks.llm.engines.endpoint import probe, safe_url, started
from accelbench.benchmarks.llm.engines.server import free_port
from accelbench.errors import EXIT_ENDPOINT, EndpointError


@contextmanager
def _serving(routes: Callable[[Any], None]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A small aiohttp server on loopback; yields its URL and the headers it received."""
    from aiohttp import web

    seen: list[dict[str, str]] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append(dict(request.headers))
        response: web.StreamResponse = await handler(request)
        return response

    app = web.Application(middlewares=[record])
    routes(app)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    port = free_port()
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def _models(app: Any, *, version: bool = False, status: int = 200) -> None:
    from aiohttp import web

    async def models(_: Any) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "tiny"}]}, status=status,
                                 headers={"Server": "uvicorn"})

    async def served_version(_: Any) -> web.Response:
        return web.json_response({"version": "0.11.0"})

    app.router.add_get("/v1/models", models)
    if version:
        app.router.add_get("/version", served_version)


def test_probe_reads_model_and_vllm_version() -> None:
    with _serving(lambda app: _models(app, version=True)) as (url, _):
        endpoint = probe(url + "/v1/", timeout=5)
    assert (endpoint.url, endpoint.model, endpoint.name, endpoint.version) == (
        url, "tiny", "vllm", "0.11.0")
    assert endpoint.extra_body == {"ignore_eos": True}


def test_probe_names_other_servers_by_header() -> None:
    with _serving(_models) as (url, _):
        endpoint = probe(url, timeout=5)
    assert (endpoint.name, endpoint.version, endpoint.extra_body) == ("uvicorn", "unknown", {})


def test_token_is_sent_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_TOKEN", "s3cret-token")
    with _serving(lambda app: _models(app, status=401)) as (url, seen), \
            pytest.raises(EndpointError, match="refused the request") as e:
        probe(url, timeout=5, api_key_env="LLM_TOKEN")
    assert seen[0]["Authorization"] == "Bearer s3cret-token"
    assert "s3cret" not in str(e.value)
    assert e.value.exit_code == EXIT_ENDPOINT
    with pytest.raises(EndpointError, match="give no credentials in the address") as e:
        probe(url.replace("http://", "http://user:pw@"), timeout=5)
    assert "pw" not in str(e.value)
    monkeypatch.delenv("LLM_TOKEN")
    with pytest.raises(EndpointError, match="LLM_TOKEN is not set"):
        probe(url, api_key_env="LLM_TOKEN")


def test_unreachable_and_not_openai_are_one_line_errors() -> None:
    from aiohttp import web

    with pytest.raises(EndpointError, match=r"cannot reach http://127\.0\.0\.1:") as e:
        probe(f"http://127.0.0.1:{free_port()}", timeout=5)
    assert "\n" not in str(e.value)

    def html(app: Any) -> None:
        async def page(_: Any) -> web.Response:
            return web.Response(text="<html>\n<body>hello</body></html>",
                                content_type="text/html")
        app.router.add_get("/v1/models", page)

    with _serving(html) as (url, _), \
            pytest.raises(EndpointError, match="does not speak the OpenAI API") as e:
        probe(url, timeout=5)
    assert "\n" not in str(e.value)
    with _serving(lambda app: None) as (url, _), \
            pytest.raises(EndpointError, match="answered HTTP 404"):
        probe(url, timeout=5)
    with pytest.raises(EndpointError, match="not an http"):
        probe("ftp://example.invalid")


def test_started_url_yields_the_probed_endpoint() -> None:
    with _serving(_models) as (url, _), started("url", "", url=url) as endpoint:
        assert endpoint.model == "tiny"
    with _serving(_models) as (url, _), started("url", "other", url=url) as endpoint:
        assert endpoint.model == "other"
    with pytest.raises(ValueError, match="unknown engine"), started("tgi", "x"):
        pass


def test_started_refuses_an_unknown_model(tmp_path: Path) -> None:
    with pytest.raises(EndpointError, match="neither a model of accelbench"), \
            started("transformers-serve", str(tmp_path / "nothing")):
        pass


def test_safe_url_drops_the_password() -> None:
    assert safe_url("http://user:pw@host:8000/v1") == "http://host:8000/v1"
    assert safe_url("http://host:8000") == "http://host:8000"


def test_importing_the_engines_imports_no_torch() -> None:
    code = ("import sys, accelbench.benchmarks.llm.engines, "
            "accelbench.benchmarks.llm.engines.endpoint, "
            "accelbench.benchmarks.llm.engines.server, "
            "accelbench.benchmarks.llm.engines.model_dir, "
            "accelbench.benchmarks.llm.engines.canary; "
            "heavy = {'torch', 'transformers'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


FAKE_VLLM = """#!{python}
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

print("argv", json.dumps(sys.argv[1:]), flush=True)
port = int(sys.argv[sys.argv.index("--port") + 1])
name = sys.argv[sys.argv.index("--served-model-name") + 1]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = {{"/health": {{}}, "/v1/models": {{"data": [{{"id": name}}]}}}}.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())


HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.mark.slow
def test_started_vllm_serves_dummy_weights_in_its_own_environment(tmp_path: Path) -> None:
    """vLLM runs from the interpreter given (its own environment): here a stand-in `vllm`
    script that logs its arguments and answers like vLLM."""
    from accelbench.benchmarks.llm.engines.model_dir import model_dir

    bin_dir = tmp_path / "vllm-env" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "vllm").write_text(FAKE_VLLM.format(python=sys.executable))
    (bin_dir / "vllm").chmod(0o755)
    folder = model_dir("llama-tiny", weights=False, root=tmp_path / "models")
    with started("vllm", str(folder), dtype="bf16", python=str(bin_dir / "python"),
                 options={"max_model_len": 512, "args": "--enforce-eager --max-num-seqs 4"},
                 log_dir=tmp_path / "logs",
                 ready_timeout=60) as endpoint:
        assert endpoint.name == "vllm" and endpoint.model == folder.name
        assert endpoint.extra_body == {"ignore_eos": True} and endpoint.weights is None
        assert endpoint.options["max_model_len"] == 512 and endpoint.options["dtype"] == "bfloat16"
        assert endpoint.options["args"] == "--enforce-eager --max-num-seqs 4"
        assert endpoint.tokenizer == folder / "tokenizer.json"
        assert probe(endpoint.url).model == folder.name
    log = (tmp_path / "logs" / "vllm.log").read_text()
    argv = json.loads(log.split("argv ", 1)[1].splitlines()[0])
    assert argv[:2] == ["serve", str(folder)]
    assert "--load-format" in argv and argv[argv.index("--load-format") + 1] == "dummy"
    assert argv[argv.index("--max-model-len") + 1] == "512"
    assert argv[argv.index("--dtype") + 1] == "bfloat16"
    assert argv[-3:] == ["--enforce-eager", "--max-num-seqs", "4"]  # last: they win
    with pytest.raises(EndpointError, match="cannot reach"):
        probe(endpoint.url, timeout=5)


@pytest.mark.slow
def test_started_inprocess_yields_a_served_engine(tmp_path: Path) -> None:
    from accelbench.benchmarks.llm.engines.model_dir import model_dir

    folder = model_dir("llama-tiny", root=tmp_path / "models")
    with started("inprocess", str(folder), dtype="fp32",
                 options={"args": "--num-blocks 128 --scheduler-type=fifo"}) as endpoint:
        assert endpoint.name == "inprocess" and endpoint.weights == folder
        assert probe(endpoint.url).model == endpoint.model == folder.name
        assert endpoint.info()["options"] == {
            "device": "cpu", "dtype": "float32", "attn_implementation": "sdpa",
            "num_blocks": 128, "page_size": 64, "max_batch_tokens": 512,
            "scheduler_type": "fifo", "use_cuda_graph": False}
    with pytest.raises(EndpointError, match="cannot reach"):
        probe(endpoint.url, timeout=5)


def test_bad_dtype_and_options_are_usage_errors(tmp_path: Path) -> None:
    from accelbench.benchmarks.llm.engines.model_dir import model_dir
    from accelbench.errors import UserError

    folder = model_dir("llama-tiny", weights=False, root=tmp_path)
    with pytest.raises(UserError, match="unknown dtype 'int3'"), \
            started("transformers-serve", str(folder), dtype="int3"):
        pass
    with pytest.raises(UserError, match="cannot read the engine's options"), \
            started("transformers-serve", str(folder), options={"args": "--x 'open"}):
        pass
    with pytest.raises(UserError, match="cannot read engine option 'num-blocks'"), \
            started("inprocess", str(folder), options={"args": "num-blocks 4"}):
        pass


def test_a_local_server_of_a_model_folder_has_known_weights(tmp_path: Path) -> None:
    """`transformers serve DIR` names its model by the folder's path: on loopback, the
    canary can then compare with that folder's weights."""
    from aiohttp import web

    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (folder / name).write_text("{}")

    def serving_folder(app: Any) -> None:
        async def models(_: Any) -> web.Response:
            return web.json_response({"data": [{"id": str(folder)}]})
        app.router.add_get("/v1/models", models)

    with _serving(serving_folder) as (url, _):
        endpoint = probe(url, timeout=5)
        assert endpoint.weights == folder and endpoint.tokenizer == folder / "tokenizer.json"
        (folder / "model.safetensors").unlink()  # no weights there: not known
        assert probe(url, timeout=5).weights is None


def test_a_port_that_does_not_speak_http_is_an_endpoint_error() -> None:
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    listener.settimeout(0.1)
    stop = threading.Event()

    def garble() -> None:
        # answers every connection with a banner until told to stop; how many
        # connections the probe makes is its own business
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(5)
                connection.recv(1024)
                connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    thread = threading.Thread(target=garble, daemon=True)
    thread.start()
    try:
        with pytest.raises(EndpointError, match="cannot reach") as e:
            probe(f"http://127.0.0.1:{port}", timeout=5)
        assert "\n" not in str(e.value)
    finally:
        stop.set()
        thread.join(timeout=10)
        listener.close()
