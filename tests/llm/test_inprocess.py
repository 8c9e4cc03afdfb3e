"""The in-process engine: transformers' continuous batching behind an OpenAI-compatible
streaming server. Concurrent requests share forward steps, and each gets eager's greedy
tokens, one chunk per token, with usage last."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelbench.benchmarks.llm.engines.endpoint import Endpoint, inprocess_endpoint
from accelbench.benchmarks.llm.engines.inprocess import InProcessEngine, running_engine
from accelbench.benchmarks.llm.engines.model_dir import ids_of, model_dir
from accelbench.errors import UserError

# Each loads a model and serves it under continuous batching (seconds on a CPU).
slow = pytest.mark.slow


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[InProcessEngine, Endpoint]]:
    folder = model_dir("llama-tiny", root=tmp_path_factory.mktemp("models"))
    with running_engine(folder, dtype="float32") as served:
        yield served, inprocess_endpoint(served)


def _eager(folder: Path, prompt: list[int], n: int) -> list[int]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False)
    return [int(i) for i in out[0, len(prompt):]]


async def _stream(url: str, body: dict[str, Any], chat: bool) -> list[dict[str, Any] | str]:
    import aiohttp

    path = "/v1/chat/completions" if chat else "/v1/completions"
    events: list[dict[str, Any] | str] = []
    async with aiohttp.ClientSession() as session, \
            session.post(url + path, json={**body, "stream": True}) as response:
        assert response.status == 200
        async for line in response.content:
            text = line.decode().strip()
            if text.startswith("data: "):
                data = text[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@slow
def test_concurrent_requests_are_batched_and_greedy(
        engine: tuple[InProcessEngine, Endpoint]) -> None:
    eng, endpoint = engine
    prompts = [[5, 7, 100 + i, 9] for i in range(6)]
    max_tokens = [8 + i for i in range(6)]

    async def load() -> list[list[dict[str, Any] | str]]:
        return await asyncio.gather(*[
            _stream(endpoint.url, {"model": endpoint.model, "max_tokens": n, "temperature": 0,
                                   **({"messages": [{"role": "user", "content":
                                                     " ".join(f"w{i}" for i in p)}]}
                                      if k % 2 else {"prompt": " ".join(f"w{i}" for i in p)})},
                    chat=bool(k % 2))
            for k, (p, n) in enumerate(zip(prompts, max_tokens, strict=True))])

    # The generation loop is held until every request is queued, so that they meet in its
    # batches however slowly this machine sends them.
    streams: list[list[dict[str, Any] | str]] = []
    sender = threading.Thread(target=lambda: streams.extend(asyncio.run(load())))
    with eng.manager.pause():
        before = eng.forward_steps
        sender.start()
        deadline = time.monotonic() + 60
        while eng.manager.input_queue.qsize() < len(prompts) and time.monotonic() < deadline:
            time.sleep(0.01)
    sender.join(120)
    steps = eng.forward_steps - before
    # One request at a time would take a step per token; batched, the longest request's.
    assert steps < sum(max_tokens) / 2, steps
    for k, (events, prompt, n) in enumerate(zip(streams, prompts, max_tokens, strict=True)):
        assert events[-1] == "[DONE]"
        chunks = [e for e in events[:-1] if isinstance(e, dict)]
        assert chunks[-1]["usage"] == {"prompt_tokens": 4, "completion_tokens": n,
                                       "total_tokens": 4 + n}
        pieces = [(c["choices"][0]["delta"].get("content") if k % 2
                   else c["choices"][0]["text"]) for c in chunks if c["choices"]]
        tokens = [p for p in pieces if p]
        assert len(tokens) == n  # one chunk per token
        assert chunks[-2]["choices"][0]["finish_reason"] == "length"
        assert ids_of("".join(tokens)) == _eager(eng.model_dir, prompt, n)


@slow
def test_non_streaming_and_errors(engine: tuple[InProcessEngine, Endpoint]) -> None:
    eng, endpoint = engine
    status, answer = _post(endpoint.url + "/v1/completions",
                           {"model": endpoint.model, "prompt": "w5 w7 w100", "max_tokens": 5})
    assert status == 200
    assert ids_of(answer["choices"][0]["text"]) == _eager(eng.model_dir, [5, 7, 100], 5)
    assert answer["usage"]["completion_tokens"] == 5
    status, answer = _post(endpoint.url + "/v1/completions", {"prompt": "", "max_tokens": 5})
    assert status == 400 and "prompt" in answer["error"]["message"]
    with urllib.request.urlopen(endpoint.url + "/health") as response:
        assert json.loads(response.read()) == {"status": "ok"}
    with urllib.request.urlopen(endpoint.url + "/v1/models") as response:
        assert json.loads(response.read())["data"][0]["id"] == endpoint.model
    assert endpoint.name == "inprocess" and endpoint.weights == eng.model_dir


def test_unknown_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown in-process engine options: num_gpus"):
        InProcessEngine(tmp_path, options={"num_gpus": 2})


def test_each_token_gives_what_it_adds_to_the_text() -> None:
    from accelbench.benchmarks.llm.engines.inprocess import _Detokenizer

    class Bytes:  # a byte-level tokenizer: a character may span tokens
        def decode(self, ids: list[int]) -> str:
            return bytes(ids).decode("utf-8", "replace")

    pieces = _Detokenizer(Bytes())  # type: ignore[arg-type]
    text = "né à 3"
    got = [pieces.add(b) for b in text.encode()]
    assert "".join(got) == text
    assert got[:3] == ["n", "", "é"]  # the half of "é" adds nothing yet
