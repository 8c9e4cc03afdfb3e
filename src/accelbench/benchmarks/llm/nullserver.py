"""A null engine: an OpenAI-compatible streaming server that computes nothing.

It answers `/v1/completions` and `/v1/chat/completions` with `max_tokens` tokens ("w0",
"w1", ...), one SSE chunk each, at once or `delay` seconds apart, then a usage chunk and
`data: [DONE]`; `/health` and `/v1/models` as engines do. It serves two purposes: the
load generator's own cost and timing error are measured against it (it notes its own
time to first token, from the request's arrival to the first chunk's write: GET
`/null/stats`), and its faults give every failure of a real engine on demand:

- `refuse`: every completion is an HTTP 503;
- `malformed`: after the first token, a chunk that is not JSON;
- `stall`: after the first token, nothing more (the connection stays open);
- `die`: after the first token, the process exits (in a thread of the caller's process:
  the connection is dropped instead);
- `no-usage`: no usage chunk (the client must count tokens itself or say it cannot).

    python -m accelbench.benchmarks.llm.nullserver --port 0 [--delay S] [--fault F]

prints its URL on the first line and serves on loopback until SIGTERM or SIGINT.
`NullServer(...)` runs it in a thread of this process, as a context manager.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

FAULTS = ("refuse", "malformed", "stall", "die", "no-usage")
VOCAB = 512  # the tokens cycle through "w0".."w511", as the tiny test models' vocabulary
CREATED = 1_700_000_000
DIE_EXIT_CODE = 3


def _chunk(api: str, model: str, text: str, finish: str | None = None) -> bytes:
    if api == "chat":
        choice: dict[str, Any] = {"index": 0, "delta": {"content": text},
                                  "finish_reason": finish}
        obj = {"id": "chatcmpl-null", "object": "chat.completion.chunk", "created": CREATED,
               "model": model, "choices": [choice]}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        obj = {"id": "cmpl-null", "object": "text_completion", "created": CREATED,
               "model": model, "choices": [choice]}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class _State:
    def __init__(self, delay: float, fault: str | None, model: str,
                 die: Callable[[web.Request], None]) -> None:
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"fault {fault!r}: expected one of {', '.join(FAULTS)}")
        if not delay >= 0:
            raise ValueError(f"delay {delay} must be 0 or more seconds")
        self.delay, self.fault, self.model, self.die = delay, fault, model, die
        self.requests = 0
        self.ttft: list[float] = []
        self.closing = False
        # Every token's chunk, made once: writing them is the server's whole work.
        self.tokens = {api: [_chunk(api, model, f" w{i}") for i in range(VOCAB)]
                       for api in ("completions", "chat")}


def _prompt_tokens(body: dict[str, Any], chat: bool) -> int:
    if chat:
        return sum(len(str(m.get("content", "")).split())
                   for m in body.get("messages", []) if isinstance(m, dict))
    prompt = body.get("prompt", "")
    return len(prompt) if isinstance(prompt, list) else len(str(prompt).split())


def make_app(state: _State) -> web.Application:
    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": state.model, "object": "model", "created": CREATED, "owned_by": "null"}]})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"requests": state.requests, "ttft": state.ttft})

    async def reset(request: web.Request) -> web.Response:
        state.requests, state.ttft = 0, []
        return web.json_response({"status": "ok"})

    async def complete(request: web.Request) -> web.StreamResponse:
        start = time.perf_counter()
        state.requests += 1
        if state.fault == "refuse":
            return web.json_response({"error": {"message": "the null server refuses "
                                                "(fault: refuse)", "type": "unavailable"}},
                                     status=503)
        try:
            body = await request.json()
            n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        except (ValueError, TypeError, AttributeError):
            return web.json_response({"error": {"message": "the body is not a JSON object "
                                                "with an integer max_tokens"}}, status=400)
        chat = request.path.endswith("/chat/completions")
        usage = {"prompt_tokens": _prompt_tokens(body, chat), "completion_tokens": n,
                 "total_tokens": _prompt_tokens(body, chat) + n}
        if not body.get("stream"):
            text = "".join(f" w{i % VOCAB}" for i in range(n))
            choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                       "finish_reason": "length"} if chat else
                      {"index": 0, "text": text, "finish_reason": "length"})
            return web.json_response({"id": "null", "object": "chat.completion" if chat
                                      else "text_completion", "created": CREATED,
                                      "model": state.model, "choices": [choice],
                                      "usage": usage})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        # A client that goes away mid-stream (a stopped load) is no error of the server's.
        with contextlib.suppress(ConnectionResetError):
            await stream(request, response, chat, n, usage, start)
        return response

    async def stream(request: web.Request, response: web.StreamResponse, chat: bool, n: int,
                     usage: dict[str, int], start: float) -> None:
        api = "chat" if chat else "completions"
        tokens = state.tokens[api]
        if chat:  # as OpenAI's: a first chunk with the role and no text
            await response.write(b'data: {"id":"chatcmpl-null","object":"chat.completion.'
                                 b'chunk","choices":[{"index":0,"delta":{"role":"assistant",'
                                 b'"content":""},"finish_reason":null}]}\n\n')
        for i in range(n):
            if state.delay:
                await asyncio.sleep(state.delay)
            if i == 0:
                # Taken before the write: once the chunk is on the socket, the client's
                # thread may read it before this one is scheduled again, so a later
                # reading could exceed the client's own time to first token.
                state.ttft.append(time.perf_counter() - start)
            if i == n - 1:
                await response.write(_chunk(api, state.model, f" w{i % VOCAB}", "length"))
            else:
                await response.write(tokens[i % VOCAB])
            if i == 0:
                if state.fault == "malformed":
                    await response.write(b'data: {"choices": [{"text": \n\n')
                    break
                if state.fault == "stall":
                    transport = request.transport
                    while not (state.closing or transport is None or transport.is_closing()):
                        await asyncio.sleep(0.05)
                    return
                if state.fault == "die":
                    state.die(request)
                    return
        if state.fault not in ("no-usage", "malformed"):
            await response.write(b"data: " + json.dumps(
                {"id": "null", "object": "chat.completion.chunk" if chat else
                 "text_completion", "created": CREATED, "model": state.model,
                 "choices": [], "usage": usage}).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/null/stats", stats)
    app.router.add_post("/null/reset", reset)
    app.router.add_post("/v1/completions", complete)
    app.router.add_post("/v1/chat/completions", complete)
    return app


def _drop_connection(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()


class NullServer:
    """The null engine in a thread of this process, on a free loopback port:

        with NullServer(delay=0.01) as server:
            ... server.url ... server.ttft ...
    """

    def __init__(self, *, delay: float = 0.0, fault: str | None = None,
                 model: str = "null", port: int = 0) -> None:
        self.state = _State(delay, fault, model, _drop_connection)
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ttft(self) -> list[float]:
        """Each streamed request's time from its arrival to its first token's write, s."""
        return list(self.state.ttft)

    @property
    def requests(self) -> int:
        return self.state.requests

    def __enter__(self) -> NullServer:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, args=(self._loop, ready),
                                        name="accelbench-null-server", daemon=True)
        self._thread.start()
        ready.wait(30)
        if self._failed is not None or not ready.is_set():
            self.__exit__(None, None, None)
            raise RuntimeError(f"the null server did not start: {self._failed}")
        return self

    def _serve(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(make_app(self.state), access_log=None, handle_signals=False,
                               shutdown_timeout=0.5)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", self.port)
            loop.run_until_complete(site.start())
            self.port = int(runner.addresses[0][1])
        except BaseException as exc:  # the caller raises it
            self._failed = exc
            loop.close()
            ready.set()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            self.state.closing = True
            loop.run_until_complete(runner.cleanup())
            loop.close()

    def __exit__(self, *exc: object) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)


async def _serve_forever(state: _State, port: int) -> None:
    runner = web.AppRunner(make_app(state), access_log=None, handle_signals=False,
                           shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    state.closing = True
    await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m accelbench.benchmarks.llm.nullserver",
                                     description="An OpenAI-compatible null engine.")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each token")
    parser.add_argument("--fault", choices=FAULTS, default=None)
    parser.add_argument("--model", default="null")
    args = parser.parse_args(argv)

    def die(request: web.Request) -> None:
        os._exit(DIE_EXIT_CODE)

    try:
        state = _State(args.delay, args.fault, args.model, die)
    except ValueError as exc:
        parser.error(str(exc))
    asyncio.run(_serve_forever(state, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
