"""An engine in this process: transformers' continuous batching (a `ContinuousBatchingManager`
that batches every request in flight into each forward step, on its own thread) behind a
minimal OpenAI-compatible streaming server on loopback (aiohttp, on a thread with its own
event loop).

Routes: GET /health, GET /v1/models, POST /v1/completions and /v1/chat/completions, with
`"stream": true` one chunk per generated token and a last chunk with `usage`, then
`data: [DONE]`; without it one JSON answer. Decoding is greedy whatever the request says
(a benchmark's load asks for temperature 0); `ignore_eos` makes a request run to its
`max_tokens`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from accelbench.benchmarks.llm.engines.server import CPU_CACHE
from accelbench.errors import EndpointError, UserError

CB_KEYS = ("num_blocks", "page_size", "max_batch_tokens", "max_memory_percent",
           "max_requests_per_batch", "scheduler_type", "use_cuda_graph")


class InProcessEngine:
    """The model of a folder under continuous batching; `serve()` puts it on HTTP."""

    def __init__(self, model_dir: Path, *, device: str = "cpu", dtype: str = "auto",
                 options: Mapping[str, Any] | None = None) -> None:
        self.model_dir = Path(model_dir)
        self.device = device
        self.dtype = dtype
        self.options = dict(options or {})
        unknown = set(self.options) - {*CB_KEYS, "attn_implementation"}
        if unknown:
            raise UserError(f"unknown in-process engine options: {', '.join(sorted(unknown))}"
                             f" (known: attn_implementation, {', '.join(CB_KEYS)})")
        self.model: Any = None
        self.tokenizer: Any = None
        self.manager: Any = None
        self.settings: dict[str, Any] = dict(self.options)  # and the defaults it used
        self.forward_steps = 0  # forward passes of the model: fewer than tokens when batching
        self.model_name = self.model_dir.name  # what /v1/models lists
        self.url = ""  # where it is served, once it is

    def start(self) -> None:
        import torch
        from transformers import (
            AutoModelForCausalLM,
            AutoTokenizer,
            ContinuousBatchingConfig,
            GenerationConfig,
        )

        from accelbench.benchmarks.llm.engines.model_dir import quiet_loading

        quiet_loading()
        dtype: Any = "auto" if self.dtype == "auto" else getattr(torch, self.dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        model: Any = AutoModelForCausalLM.from_pretrained(
            self.model_dir, dtype=dtype,
            attn_implementation=self.options.get("attn_implementation", "sdpa"))
        model.to(self.device).eval()
        forward = model.forward

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.forward_steps += 1
            return forward(*args, **kwargs)

        model.forward = counted
        self.model = model
        settings = {**(CPU_CACHE if self.device == "cpu" else {}),
                    **{k: v for k, v in self.options.items() if k in CB_KEYS}}
        if self.device == "cpu":
            settings.setdefault("use_cuda_graph", False)
        eos = model.generation_config.eos_token_id
        generation = GenerationConfig(  # type: ignore[no-untyped-call]
            do_sample=False, max_new_tokens=16, eos_token_id=-1 if eos is None else eos)
        self.settings = {"attn_implementation": model.config._attn_implementation,
                         **settings}
        self.manager = model.init_continuous_batching(
            generation_config=generation,
            continuous_batching_config=ContinuousBatchingConfig(
                auto_switch_to_flash=False, **settings))
        self.manager.start()

    def stop(self) -> None:
        if self.manager is not None:
            self.manager.stop(block=True, timeout=30)
            self.manager.destroy()
            self.manager = None

    def alive(self) -> bool:
        manager = self.manager
        return (manager is not None and manager.is_running()
                and manager.background_thread_status.fatal_error is None)

    def encode(self, body: Mapping[str, Any], chat: bool) -> list[int]:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ValueError("messages must be a non-empty list")
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                     tokenize=True, return_dict=False)
            if isinstance(ids, Mapping):
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(i, int) for i in prompt):
            return [int(i) for i in prompt]
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("prompt must be a non-empty string or a list of token ids")
        return [int(i) for i in self.tokenizer(prompt, add_special_tokens=False)["input_ids"]]

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))


class _Detokenizer:
    """Each token's text: what it adds to the text decoded so far, decoding only a short
    window (as text-generation-inference does), so a token costs the same at any length.
    Spaces between words are a tokenizer's to place (a word-level or byte-level one puts
    them between tokens); a token that ends inside a character adds "" until the
    character is whole."""

    def __init__(self, engine: InProcessEngine) -> None:
        self.engine = engine
        self.ids: list[int] = []
        self.prefix = 0  # the window's start
        self.read = 0  # the tokens before it have been given out as text

    def add(self, token: int) -> str:
        self.ids.append(token)
        before = self.engine.decode(self.ids[self.prefix:self.read])
        after = self.engine.decode(self.ids[self.prefix:])
        if len(after) <= len(before) or after.endswith("\ufffd"):
            return ""
        self.prefix, self.read = self.read, len(self.ids)
        return after[len(before):]


def _app(engine: InProcessEngine, model_name: str) -> Any:
    from aiohttp import web

    async def health(_: web.Request) -> web.Response:
        if not engine.alive():
            return web.json_response({"status": "error"}, status=503)
        return web.json_response({"status": "ok"})

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": model_name, "object": "model", "owned_by": "accelbench"}]})

    async def completions(request: web.Request) -> web.StreamResponse:
        return await _generate(request, chat=False)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await _generate(request, chat=True)

    async def _generate(request: web.Request, *, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            ids = engine.encode(body, chat)
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            if max_tokens < 1:
                raise ValueError("max_tokens must be at least 1")
        except (ValueError, TypeError, KeyError) as e:
            return web.json_response({"error": {"message": str(e), "type": "invalid_request"}},
                                     status=400)
        if not engine.alive():
            return web.json_response({"error": {"message": "engine is not running"}},
                                     status=503)
        manager = engine.manager
        rid = f"cmpl-{uuid.uuid4().hex[:16]}"
        outputs: asyncio.Queue[Any] = asyncio.Queue()
        manager.register_result_handler(rid, outputs.put_nowait)
        eos = -1 if body.get("ignore_eos") else None
        manager.add_request(ids, request_id=rid, max_new_tokens=max_tokens,
                            streaming=bool(body.get("stream")), eos_token_id=eos)
        kind = "chat.completion" if chat else "text_completion"
        created = int(time.time())

        def chunk(text: str | None, finish: str | None) -> dict[str, Any]:
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
            if chat:
                choice["delta"] = {} if text is None else {"content": text}
            else:
                choice["text"] = text or ""
            return {"id": rid, "object": kind + (".chunk" if chat else ""),
                    "created": created, "model": model_name, "choices": [choice]}

        def usage(generated: int) -> dict[str, int]:
            return {"prompt_tokens": len(ids), "completion_tokens": generated,
                    "total_tokens": len(ids) + generated}

        if not body.get("stream"):
            result = await outputs.get()
            while not result.is_finished():
                result = await outputs.get()
            if result.error is not None:
                return web.json_response({"error": {"message": str(result.error)}}, status=500)
            text = engine.decode(list(result.generated_tokens))
            finish = "length" if len(result.generated_tokens) >= max_tokens else "stop"
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            return web.json_response({"id": rid, "object": kind, "created": created,
                                      "model": model_name, "choices": [choice],
                                      "usage": usage(len(result.generated_tokens))})

        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def send(payload: dict[str, Any] | str) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            await response.write(f"data: {data}\n\n".encode())

        sent_tokens: list[int] = []
        pieces = _Detokenizer(engine)
        try:
            while True:
                result = await outputs.get()
                if result.error is not None:
                    await send({"error": {"message": str(result.error)}})
                    break
                for token in list(result.generated_tokens)[len(sent_tokens):]:
                    sent_tokens.append(int(token))
                    await send(chunk(pieces.add(int(token)), None))
                if result.is_finished():
                    finish = "length" if len(sent_tokens) >= max_tokens else "stop"
                    last = chunk(None if chat else "", finish)
                    await send(last)
                    await send({**chunk(None, None), "choices": [],
                                "usage": usage(len(sent_tokens))})
                    await send("[DONE]")
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            manager.cancel_request(rid)
            raise
        return response

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    return app


class _LoopThread:
    """An aiohttp application on loopback, served by a thread with its own event loop."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._runner: Any = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="accelbench-llm-server",
                                        daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start())
        except BaseException as e:  # handed to the starting thread
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self._runner.cleanup())
        self.loop.close()

    async def _start(self) -> None:
        from aiohttp import web

        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise EndpointError(f"cannot serve the in-process engine: {self._error}")

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)


@contextmanager
def running_engine(model_dir: Path, *, device: str = "cpu", dtype: str = "auto",
                   options: Mapping[str, Any] | None = None) -> Iterator[InProcessEngine]:
    """The engine of `model_dir`, started and served on a loopback URL (`engine.url`),
    stopped on leaving (`endpoint.started("inprocess", ...)` gives its Endpoint)."""
    engine = InProcessEngine(model_dir, device=device, dtype=dtype, options=options)
    try:
        engine.start()
        server = _LoopThread(_app(engine, engine.model_name))
        server.start()
        engine.url = f"http://127.0.0.1:{server.port}"
        try:
            yield engine
        finally:
            server.stop()
    finally:
        engine.stop()
