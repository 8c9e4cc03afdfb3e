"""The load generator: one process, one asyncio loop, aiohttp, streaming requests to an
OpenAI-compatible endpoint and noting when each piece of each answer arrives.

    python -m accelbench.benchmarks.llm.client PLAN.json OUT.jsonl [--cpus 0]

It runs in a process of its own so that the engine (which may share this machine) and
accelbench's own work do not delay its timestamps. The parent hands it a `LoadPlan` as
JSON; it writes one JSON line per request as each ends (a `RequestRecord`, never text),
flushed at once, so a killed client leaves what it did; before that, a short `started`
line when a request is sent, so that a request still in flight when the client was
killed counts as unfinished rather than vanishing (which would flatter the tail). A final
`{"summary": ...}` line gives the client's CPU and wall time over the measured load:
CPU close to wall means the client itself was saturated.

The order: warm-up requests first, at the concurrency limit (all at once with none), and
awaited; then the measured requests at their arrival offsets from a fresh start, at most
`concurrency` in flight (as vLLM's `--max-concurrency`: a request waits for a free slot,
and `scheduled` vs `sent` shows how long). SIGTERM (the parent's deadline) stops the
load: requests in flight end with an error and the chunk times they had.

Every request ends; none raises: a refused connection, an HTTP error, a malformed piece of
the stream, a stall (nothing received for `stall_timeout`, the wait for the first piece
included), the whole request passing `request_timeout`, or the server closing mid-stream
each become the record's one-line `error`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from accelbench.benchmarks.llm.records import RequestRecord

if TYPE_CHECKING:
    import aiohttp

PLAN_FORMAT = 1  # 1: the first format
APIS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
STOP_GRACE_S = 5.0  # how long the client has to write its records after SIGTERM
DRAIN_S = 1.0  # after [DONE], how long the rest of the response may take to close
ERROR_BODY_CHARS = 200

Counter = Callable[[str], int]


def one_line(text: object, limit: int = 300) -> str:
    """`text` on one line, whitespace collapsed, at most `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@dataclass(frozen=True)
class LoadPlan:
    """Everything the load generator needs, as JSON: where to send, what, and when.

    `prompts`, `max_tokens` and `warmup` have one entry per request (warm-up requests
    first, in practice); `offsets` one per measured request, in their order. The API key,
    if any, is read from the environment variable `api_key_env` and never written."""

    url: str
    api: str
    model: str
    prompts: tuple[str, ...]
    max_tokens: tuple[int, ...]
    warmup: tuple[bool, ...]
    offsets: tuple[float, ...]
    concurrency: int = 0  # 0: unlimited
    request_timeout: float = 600.0  # s, the whole request
    stall_timeout: float = 60.0  # s, the longest silence (the first piece's wait included)
    extra_body: dict[str, Any] = field(default_factory=dict)
    api_key_env: str | None = None
    tokenizer: str | None = None  # a tokenizer.json, to count output without usage
    # The first this many measured requests keep their output text (record.extra["text"]):
    # only where the user asked for text to be stored; 0: no text leaves this process.
    keep_text: int = 0

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise ValueError(f"api {self.api!r}: expected one of {', '.join(APIS)}")
        n = len(self.prompts)
        if len(self.max_tokens) != n or len(self.warmup) != n:
            raise ValueError("a load plan needs one max_tokens and warmup per prompt")
        measured = n - sum(self.warmup)
        if len(self.offsets) != measured:
            raise ValueError(f"{len(self.offsets)} arrival offsets for {measured} "
                             "measured requests")
        if any(not (o >= 0 and math.isfinite(o)) for o in self.offsets):
            raise ValueError("arrival offsets must be finite and 0 or more")
        if any(m < 1 for m in self.max_tokens):
            raise ValueError("max_tokens must be at least 1")
        if self.concurrency < 0:
            raise ValueError(f"concurrency {self.concurrency} must be 0 (unlimited) or more")
        if not (self.request_timeout > 0 and self.stall_timeout > 0):
            raise ValueError("request and stall timeouts must be above 0 s")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"endpoint URL {one_line(self.url, 80)!r} must start with "
                             "http:// or https://")

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        base = base[:-3] if base.endswith("/v1") else base
        return base + APIS[self.api]

    def body(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens,
                                "temperature": 0, "stream": True,
                                "stream_options": {"include_usage": True}}
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body.update(self.extra_body)
        return body

    def headers(self) -> dict[str, str]:
        """The request headers; ValueError when the API key's variable is not set."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key_env:
            token = os.environ.get(self.api_key_env)
            if not token:
                raise ValueError(f"the environment variable {self.api_key_env} "
                                 "(the API key's) is not set")
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def timeout(self) -> aiohttp.ClientTimeout:
        import aiohttp

        return aiohttp.ClientTimeout(total=self.request_timeout,
                                     sock_connect=min(self.stall_timeout, self.request_timeout),
                                     sock_read=self.stall_timeout)

    @property
    def measured(self) -> list[int]:
        return [i for i, w in enumerate(self.warmup) if not w]

    def to_dict(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, "url": self.url, "api": self.api, "model": self.model,
                "prompts": list(self.prompts), "max_tokens": list(self.max_tokens),
                "warmup": list(self.warmup), "offsets": list(self.offsets),
                "concurrency": self.concurrency, "request_timeout": self.request_timeout,
                "stall_timeout": self.stall_timeout, "extra_body": self.extra_body,
                "api_key_env": self.api_key_env, "tokenizer": self.tokenizer,
                "keep_text": self.keep_text}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadPlan:
        if d.get("format") != PLAN_FORMAT:
            raise ValueError(f"load plan format {d.get('format')!r}: this accelbench "
                             f"reads format {PLAN_FORMAT}")
        try:
            return cls(str(d["url"]), str(d["api"]), str(d["model"]),
                       tuple(str(p) for p in d["prompts"]),
                       tuple(int(m) for m in d["max_tokens"]),
                       tuple(bool(w) for w in d["warmup"]),
                       tuple(float(o) for o in d["offsets"]),
                       int(d.get("concurrency", 0)),
                       float(d.get("request_timeout", 600.0)),
                       float(d.get("stall_timeout", 60.0)),
                       dict(d.get("extra_body") or {}),
                       d.get("api_key_env"), d.get("tokenizer"),
                       int(d.get("keep_text", 0)))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"load plan: missing or bad field {one_line(exc, 80)}") from None

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict()), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> LoadPlan:
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the load plan {path.name}: {one_line(exc, 120)}"
                             ) from None
        if not isinstance(d, dict):
            raise ValueError(f"the load plan {path.name} is not a JSON object")
        return cls.from_dict(d)


@functools.lru_cache(maxsize=4)
def token_counter(tokenizer: str | None) -> Counter | None:
    """A function counting the tokens of a text with the tokenizer.json at `tokenizer`."""
    if tokenizer is None:
        return None
    from tokenizers import Tokenizer

    loaded = Tokenizer.from_file(tokenizer)

    def count(text: str) -> int:
        return len(loaded.encode(text, add_special_tokens=False).ids)

    return count


class _Exchange:
    """What one request has left so far (mutable while it streams; `record` freezes it)."""

    __slots__ = ("chunks", "end", "error", "index", "keep_text", "on_first", "parts",
                 "scheduled", "sent", "usage", "warmup")

    def __init__(self, index: int, warmup: bool, scheduled: float | None,
                 keep_text: bool) -> None:
        self.index, self.warmup, self.scheduled = index, warmup, scheduled
        self.keep_text = keep_text
        self.sent: float | None = None
        self.chunks: list[float] = []
        self.parts: list[str] = []
        self.usage: dict[str, Any] | None = None
        self.end: float | None = None
        self.error: str | None = None
        self.on_first: Callable[[], None] | None = None  # told as the first token arrives

    def record(self, counter: Counter | None) -> RequestRecord:
        sent = self.sent if self.sent is not None else math.nan
        scheduled = self.scheduled if self.scheduled is not None else sent
        prompt_tokens = output_tokens = None
        counted_by = "none"
        usage = self.usage or {}
        if isinstance(usage.get("completion_tokens"), int):
            output_tokens, counted_by = usage["completion_tokens"], "usage"
        elif counter is not None and self.chunks:
            output_tokens, counted_by = counter("".join(self.parts)), "tokenizer"
        if isinstance(usage.get("prompt_tokens"), int):
            prompt_tokens = usage["prompt_tokens"]
        return RequestRecord(self.index, self.warmup, scheduled, sent, tuple(self.chunks),
                             self.end, prompt_tokens, output_tokens, counted_by, self.error)


def _server_error(obj: dict[str, Any]) -> str:
    err = obj["error"]
    message = err.get("message", err) if isinstance(err, dict) else err
    return f"server error: {one_line(message, 200)}"


def _piece(ex: _Exchange, payload: bytes, now: float) -> bool:
    """Take one `data:` payload; True when the stream is over ([DONE] or an error)."""
    if payload == b"[DONE]":
        ex.end = now
        return True
    try:
        obj = json.loads(payload)
        if obj.get("error"):
            ex.error = _server_error(obj)
            return True
        choices = obj.get("choices")
        if choices:
            choice = choices[0]
            text = choice.get("text")
            if text is None and (delta := choice.get("delta")):
                text = (delta.get("content") or delta.get("reasoning_content")
                        or delta.get("reasoning"))
            if text:
                if not isinstance(text, str):
                    raise TypeError(text)
                ex.chunks.append(now)
                if ex.on_first is not None and len(ex.chunks) == 1:
                    ex.on_first()
                if ex.keep_text:
                    ex.parts.append(text)
        usage = obj.get("usage")
        if isinstance(usage, dict):
            ex.usage = usage
    except (ValueError, AttributeError, TypeError, KeyError, IndexError):
        shown = one_line(payload.decode("utf-8", "replace"), 80)
        ex.error = f"malformed stream: {shown}"
        return True
    return False


async def _exchange(session: aiohttp.ClientSession, url: str, headers: dict[str, str],
                    body: bytes, ex: _Exchange, t0: float, timeout: aiohttp.ClientTimeout,
                    on_sent: Callable[[_Exchange], None] | None = None) -> None:
    """Send one request and read its stream into `ex`; every failure ends in `ex.error`.
    Only cancellation propagates (with `ex` holding what had arrived)."""
    import aiohttp

    clock = time.perf_counter
    kind = "text/event-stream"
    ex.sent = clock() - t0
    if on_sent is not None:  # after the request is on its way, not before
        asyncio.get_running_loop().call_soon(on_sent, ex)
    try:
        async with session.post(url, data=body, headers=headers, timeout=timeout) as resp:
            if resp.status != 200:
                text = (await resp.content.read(4 * ERROR_BODY_CHARS)).decode("utf-8", "replace")
                ex.error = one_line(f"HTTP {resp.status} {resp.reason or ''}: "
                                    f"{one_line(text, ERROR_BODY_CHARS)}")
                ex.end = clock() - t0
                return
            kind = resp.content_type
            done = False
            pending = b""
            async for data in resp.content.iter_any():
                now = clock() - t0
                if b"\n" not in data:
                    pending += data
                    continue
                lines = (pending + data).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if line.startswith(b"data:") and _piece(ex, line[5:].strip(), now):
                        done = True
                        break
                if done:
                    break
            if not done:
                now = clock() - t0
                if pending.startswith(b"data:"):  # a last line without its newline
                    done = _piece(ex, pending[5:].strip(), now)
                if ex.error is None and ex.end is None:
                    ex.end = now
            elif ex.error is None and not resp.content.is_eof():
                # the response's closing bytes, so that its connection can be reused
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(resp.content.read(), DRAIN_S)
    except aiohttp.SocketTimeoutError:
        ex.error = f"stalled: nothing received for {timeout.sock_read:g} s"
    except aiohttp.ConnectionTimeoutError:
        ex.error = f"connecting timed out after {timeout.sock_connect:g} s"
    except asyncio.TimeoutError:
        ex.error = f"request timed out after {timeout.total:g} s"
    except aiohttp.ClientConnectorError as exc:
        reason = exc.os_error.strerror or one_line(exc.os_error, 120)
        ex.error = f"cannot connect to {exc.host}:{exc.port}: {reason}"
    except aiohttp.ServerDisconnectedError:
        where = "mid-stream" if ex.chunks else "before answering"
        ex.error = f"the server closed the connection {where}"
    except aiohttp.ClientPayloadError as exc:
        ex.error = f"the stream broke off: {one_line(exc, 160)}"
    except Exception as exc:  # a request fails alone, never the load
        ex.error = one_line(f"{type(exc).__name__}: {exc}", 200)
    if ex.error is not None:
        ex.end = clock() - t0
    elif not ex.chunks:
        ex.error = ("the stream ended without output text" if kind == "text/event-stream"
                    else f"the answer is not an event stream (Content-Type: {kind})")


def open_session(plan: LoadPlan) -> aiohttp.ClientSession:
    """A session for streaming a plan's requests: no pool limit (concurrency is the
    plan's), connections kept alive, the plan's timeouts."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    return aiohttp.ClientSession(connector=connector, timeout=plan.timeout(),
                                 auto_decompress=False)


async def stream_request(session: aiohttp.ClientSession, plan: LoadPlan, index: int,
                         prompt: str, max_tokens: int, t0: float, warmup: bool, *,
                         scheduled: float | None = None, counter: Counter | None = None,
                         on_first_token: Callable[[], None] | None = None,
                         ) -> tuple[RequestRecord, str]:
    """Stream one request of `plan`'s kind; its record (times from `t0`, a
    time.perf_counter value) and its output text. Never raises for the request's own
    failures (they are the record's error). `scheduled` defaults to the send time;
    `counter` to the plan's tokenizer (when the engine sends no usage); `on_first_token`
    is called the moment the first piece of output text is read (LoadGen's first-token
    callback)."""
    counter = counter if counter is not None else token_counter(plan.tokenizer)
    ex = _Exchange(index, warmup, scheduled, keep_text=True)
    ex.on_first = on_first_token
    try:
        headers = plan.headers()
    except ValueError as exc:
        ex.sent, ex.error = time.perf_counter() - t0, str(exc)
        return ex.record(counter), ""
    body = json.dumps(plan.body(prompt, max_tokens)).encode()
    await _exchange(session, plan.endpoint, headers, body, ex, t0, plan.timeout())
    return ex.record(counter), "".join(ex.parts)


# --- the client process ----------------------------------------------------------------

class _Output:
    """The client's output: a line per started and per ended request, each flushed."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def started(self, ex: _Exchange) -> None:
        self.stream.write(json.dumps({"started": ex.index, "scheduled": ex.scheduled,
                                      "sent": ex.sent}) + "\n")
        self.stream.flush()

    def ended(self, record: RequestRecord) -> None:
        self.stream.write(json.dumps(record.to_dict()) + "\n")
        self.stream.flush()

    def summary(self, summary: dict[str, Any]) -> None:
        self.stream.write(json.dumps({"summary": summary}) + "\n")
        self.stream.flush()


async def _drive(plan: LoadPlan, out: _Output, clock: dict[str, float]) -> None:
    counter = token_counter(plan.tokenizer)
    headers = plan.headers()
    url, timeout = plan.endpoint, plan.timeout()
    bodies = [json.dumps(plan.body(p, m)).encode()
              for p, m in zip(plan.prompts, plan.max_tokens, strict=True)]
    slots = asyncio.Semaphore(plan.concurrency) if plan.concurrency else None
    tasks: set[asyncio.Task[None]] = set()

    kept = set(plan.measured[:plan.keep_text])

    async def one(index: int, scheduled: float, t0: float) -> None:
        ex = _Exchange(index, plan.warmup[index], scheduled,
                       keep_text=counter is not None or index in kept)
        try:
            if slots is None:
                await _exchange(session, url, headers, bodies[index], ex, t0, timeout,
                                out.started)
            else:
                async with slots:
                    await _exchange(session, url, headers, bodies[index], ex, t0, timeout,
                                    out.started)
        except asyncio.CancelledError:
            if ex.error is None and ex.end is None:
                ex.error = "stopped before the stream ended (the load was stopped)"
            raise
        finally:
            if ex.sent is not None:
                record = ex.record(counter)
                if index in kept:
                    record = dataclasses.replace(record, extra={"text": "".join(ex.parts)})
                out.ended(record)

    async with open_session(plan) as session:
        try:
            warm = [i for i, w in enumerate(plan.warmup) if w]
            if warm:
                t0 = time.perf_counter()
                for i in warm:
                    task = asyncio.ensure_future(one(i, 0.0, t0))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                await asyncio.gather(*tasks)
            t0 = clock["t0"] = time.perf_counter()
            clock["cpu0"], clock["epoch0"] = time.process_time(), time.time()
            for index, offset in zip(plan.measured, plan.offsets, strict=True):
                wait = t0 + offset - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                task = asyncio.ensure_future(one(index, offset, t0))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            while tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)


async def _client(plan: LoadPlan, out: _Output) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    assert me is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, me.cancel)
    clock: dict[str, float] = {}
    stopped = False
    try:
        await _drive(plan, out, clock)
    except asyncio.CancelledError:
        stopped = True
    t0 = clock.get("t0", time.perf_counter())
    return {"wall_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - clock.get("cpu0", time.process_time()),
            "process_cpu_s": time.process_time(), "t0_epoch": clock.get("epoch0"),
            "stopped": stopped}


def _allow_many_connections() -> None:
    """Raise the open-file limit to its ceiling: an open-loop load keeps a connection per
    request in flight, and a slow engine can have thousands (the soft limit is often
    1024, where each request past it would fail with "Too many open files")."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m accelbench.benchmarks.llm.client",
                                     description="Stream a load plan's requests.")
    parser.add_argument("plan", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--cpus", default=None, help="CPUs to run on, e.g. 0 or 0,1")
    args = parser.parse_args(argv)
    try:
        plan = LoadPlan.read(args.plan)
        plan.headers()
        if args.cpus:
            os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
        token_counter(plan.tokenizer)
        _allow_many_connections()
    except (ValueError, OSError) as exc:
        print(f"load generator: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # e.g. an unreadable tokenizer file
        print(f"load generator: {one_line(f'{type(exc).__name__}: {exc}')}", file=sys.stderr)
        return 2
    with args.out.open("w", encoding="utf-8") as stream:
        out = _Output(stream)
        summary = asyncio.run(_client(plan, out))
        out.summary(summary)
    return 0


# --- in the parent ---------------------------------------------------------------------

@dataclass(frozen=True)
class LoadOutcome:
    """What a load left: every request's record (by index; a request sent but not ended
    when the client stopped is there, failed as unfinished), the measured window
    (first measured send to last measured end, s), the client's CPU and wall time over
    the measured load, and why the load did not finish, if it did not."""

    records: tuple[RequestRecord, ...]
    duration: float
    client_cpu_s: float | None
    error: str | None
    client_wall_s: float | None = None

    @property
    def measured(self) -> list[RequestRecord]:
        return [r for r in self.records if not r.warmup]


def read_output(path: Path, plan: LoadPlan) -> tuple[list[RequestRecord], dict[str, Any]]:
    """The records and summary a client wrote (also a killed client's: a torn last line
    is skipped, and a request started but never ended becomes an unfinished record)."""
    records: dict[int, RequestRecord] = {}
    started: dict[int, dict[str, Any]] = {}
    summary: dict[str, Any] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    for line in text.splitlines():
        try:
            obj = json.loads(line)
            if "summary" in obj:
                summary = dict(obj["summary"])
            elif "started" in obj:
                started[int(obj["started"])] = obj
            else:
                record = RequestRecord.from_dict(obj)
                records[record.index] = record
        except (ValueError, TypeError, KeyError):
            continue  # the line the client was writing when it was killed
    for index, s in started.items():
        if index not in records and 0 <= index < len(plan.warmup):
            records[index] = RequestRecord(
                index, plan.warmup[index], float(s["scheduled"]), float(s["sent"]),
                error="unfinished: the load generator stopped before the stream ended")
    return [records[i] for i in sorted(records)], summary


def _window(records: Sequence[RequestRecord]) -> float:
    measured = [r for r in records if not r.warmup]
    ends = [r.end for r in measured if r.end is not None]
    if not measured or not ends:
        return 0.0
    return max(ends) - min(r.sent for r in measured)


def run_load(plan: LoadPlan, deadline: float, *, python: str = sys.executable,
             cpu: int | Sequence[int] | None = None) -> LoadOutcome:
    """Run `plan` in a load generator process (a session of its own, ended with this
    process), on the CPUs `cpu` if given; past `deadline` s it is stopped (SIGTERM, then
    SIGKILL) and says so. Whatever it recorded is returned, also when it failed."""
    from accelbench.runner.lifeline import end_job, parent_death_preexec

    folder = Path(tempfile.mkdtemp(prefix="accelbench-load-"))  # private: mode 0700
    try:
        plan_path, out_path, log_path = (folder / "plan.json", folder / "out.jsonl",
                                         folder / "client.log")
        plan.write(plan_path)
        command = [python, "-m", "accelbench.benchmarks.llm.client", str(plan_path),
                   str(out_path)]
        if cpu is not None:
            cpus = [cpu] if isinstance(cpu, int) else list(cpu)
            command += ["--cpus", ",".join(str(c) for c in cpus)]
        stopped = False
        with log_path.open("wb") as log:
            try:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=log,
                                           start_new_session=True,
                                           preexec_fn=parent_death_preexec(signal.SIGKILL))
            except OSError as exc:
                return LoadOutcome((), 0.0, None, "the load generator could not start: "
                                   + one_line(exc, 200))
            try:
                process.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                stopped = True
            finally:
                end_job(process, STOP_GRACE_S)  # nothing to do when it has ended
        records, summary = read_output(out_path, plan)
        error = None
        measured = [r for r in records if not r.warmup]
        if stopped:
            ended = sum(1 for r in measured if r.end is not None)
            error = (f"the load generator passed its deadline of {deadline:g} s and was "
                     f"stopped: {ended} of {len(plan.offsets)} measured requests ended")
        elif process.returncode != 0:
            lines = log_path.read_text(encoding="utf-8", errors="replace").strip()
            last = one_line(lines.splitlines()[-1]) if lines else "no message"
            how = (f"was killed by signal {-process.returncode}" if process.returncode < 0
                   else f"failed (exit {process.returncode})")
            error = f"the load generator {how}: {last}"
        cpu_s, wall_s = summary.get("cpu_s"), summary.get("wall_s")
        return LoadOutcome(tuple(records), _window(records),
                           None if cpu_s is None else float(cpu_s), error,
                           None if wall_s is None else float(wall_s))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
