"""The load generator against the null engine and against servers that misbehave on
purpose: every request ends, with its times right or with a one-line error, never a
hang; a killed or stopped client leaves what it did."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from accelbench.benchmarks.llm.client import (
    LoadPlan,
    open_session,
    read_output,
    run_load,
    stream_request,
)
from accelbench.benchmarks.llm.nullserver import NullServer
from accelbench.benchmarks.llm.records import RequestRecord


def plan_for(url: str, n: int = 1, *, warmup: int = 0, api: str = "completions",
             max_tokens: int = 4, offsets: tuple[float, ...] | None = None,
             **options) -> LoadPlan:
    total = warmup + n
    return LoadPlan(url, api, "null", tuple(f"w1 w2 w{i}" for i in range(total)),
                    (max_tokens,) * total, (True,) * warmup + (False,) * n,
                    offsets if offsets is not None else (0.0,) * n, **options)


def stream(plan: LoadPlan, max_tokens: int | None = None, **kw) -> tuple[RequestRecord, str]:
    """One request of `plan`, streamed in this process."""

    async def go() -> tuple[RequestRecord, str]:
        async with open_session(plan) as session:
            return await stream_request(session, plan, 0, "w1 w2 w3",
                                        max_tokens or plan.max_tokens[0],
                                        time.perf_counter(), False, **kw)

    return asyncio.run(go())


@contextlib.contextmanager
def scripted(pieces: list[tuple[bytes, float]], status: int = 200, then_hang: bool = False,
             content_type: str = "text/event-stream") -> Iterator[str]:
    """A server (in a thread) answering every POST with `pieces` written one by one,
    each after its pause; optionally keeping the connection open afterwards."""
    closing = threading.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(status=status, headers={"Content-Type": content_type})
        await response.prepare(request)
        for data, pause in pieces:
            if pause:
                await asyncio.sleep(pause)
            await response.write(data)
        while then_hang and not closing.is_set():
            await asyncio.sleep(0.02)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.2)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        closing.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def chunk(text: str, **extra) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text}], **extra}
                                  ).encode() + b"\n\n"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def word_tokenizer(folder: Path) -> str:
    """A tokenizer.json of the words w0..w511 split on whitespace."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(512)} | {"[UNK]": 512}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return str(path)


# --- the plan ------------------------------------------------------------------------

def test_a_plan_round_trips_through_json(tmp_path):
    plan = plan_for("http://127.0.0.1:1/v1", 2, warmup=1, api="chat", offsets=(0.0, 0.5),
                    concurrency=3, extra_body={"ignore_eos": True}, tokenizer="t.json")
    plan.write(tmp_path / "plan.json")
    assert LoadPlan.read(tmp_path / "plan.json") == plan
    assert plan.endpoint == "http://127.0.0.1:1/v1/chat/completions"
    body = plan.body("hello", 7)
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert (body["stream"], body["max_tokens"], body["temperature"], body["ignore_eos"]) == (
        True, 7, 0, True)
    assert body["stream_options"] == {"include_usage": True}
    assert plan_for("http://h:8/").body("x", 1)["prompt"] == "x"


@pytest.mark.parametrize(("change", "word"), [
    ({"api": "embeddings"}, "api"), ({"offsets": (0.0, 1.0)}, "offsets"),
    ({"offsets": (-1.0,)}, "offsets"), ({"concurrency": -1}, "concurrency"),
    ({"stall_timeout": 0}, "timeouts"), ({"url": "127.0.0.1:80"}, "http"),
    ({"max_tokens": (0,)}, "max_tokens"),
])
def test_a_bad_plan_is_refused(change, word):
    fields = plan_for("http://127.0.0.1:1").to_dict() | {
        k: list(v) if isinstance(v, tuple) else v for k, v in change.items()}
    with pytest.raises(ValueError, match=word):
        LoadPlan.from_dict(fields)


def test_a_plan_of_another_format_is_refused():
    with pytest.raises(ValueError, match="format"):
        LoadPlan.from_dict(plan_for("http://h:1").to_dict() | {"format": 99})


def test_the_api_key_is_sent_but_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELBENCH_TEST_KEY", "sekrit-token")
    plan = plan_for("http://h:1", api_key_env="ACCELBENCH_TEST_KEY")
    assert plan.headers()["Authorization"] == "Bearer sekrit-token"
    plan.write(tmp_path / "plan.json")
    assert "sekrit" not in (tmp_path / "plan.json").read_text()
    monkeypatch.delenv("ACCELBENCH_TEST_KEY")
    with pytest.raises(ValueError, match="ACCELBENCH_TEST_KEY"):
        plan.headers()


# --- one request, in this process ----------------------------------------------------

@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_stream_is_timed_and_counted(api):
    with NullServer(delay=0.01) as server:
        record, text = stream(plan_for(server.url, api=api, max_tokens=5))
        server_ttft = server.ttft
    assert record.ok, record.error
    assert text == " w0 w1 w2 w3 w4"
    # the chat stream's first chunk (the role, no text) is not a token's
    assert len(record.chunk_times) == 5
    assert record.sent < record.chunk_times[0]
    assert list(record.chunk_times) == sorted(record.chunk_times)
    assert record.end is not None and record.end >= record.chunk_times[-1]
    assert (record.output_tokens, record.prompt_tokens, record.counted_by) == (5, 3, "usage")
    assert record.ttft is not None and record.ttft >= server_ttft[0] >= 0.01


def test_a_refused_request_is_an_http_error():
    with NullServer(fault="refuse") as server:
        record, _ = stream(plan_for(server.url))
    assert not record.ok
    assert record.error is not None
    assert record.error.startswith("HTTP 503 Service Unavailable: ")
    assert "the null server refuses" in record.error


def test_a_malformed_chunk_fails_the_request():
    with NullServer(fault="malformed") as server:
        record, _ = stream(plan_for(server.url))
    assert record.error is not None and record.error.startswith("malformed stream: ")
    assert len(record.chunk_times) == 1  # what arrived before it is kept


def test_a_stalled_stream_fails_after_the_stall_timeout():
    with NullServer(fault="stall") as server:
        record, _ = stream(plan_for(server.url, stall_timeout=0.3, request_timeout=60))
    assert record.error == "stalled: nothing received for 0.3 s"
    assert len(record.chunk_times) == 1
    assert record.end is not None and record.end - record.chunk_times[0] >= 0.3


def test_a_server_that_never_answers_is_a_stall():
    import socket

    with socket.socket() as listening:  # connections are accepted by the kernel, no more
        listening.bind(("127.0.0.1", 0))
        listening.listen(8)
        port = listening.getsockname()[1]
        record, _ = stream(plan_for(f"http://127.0.0.1:{port}", stall_timeout=0.3,
                                    request_timeout=60))
    assert record.error == "stalled: nothing received for 0.3 s"
    assert record.chunk_times == ()


def test_a_request_past_its_timeout_fails():
    with NullServer(delay=0.05) as server:
        record, _ = stream(plan_for(server.url, max_tokens=1000, stall_timeout=10,
                                    request_timeout=0.4))
    assert record.error == "request timed out after 0.4 s"
    assert record.chunk_times and record.e2e is not None and record.e2e >= 0.4


def test_a_refused_connection_fails_the_request():
    port = free_port()
    record, _ = stream(plan_for(f"http://127.0.0.1:{port}"))
    assert record.error is not None
    assert record.error.startswith(f"cannot connect to 127.0.0.1:{port}: ")
    assert "\n" not in record.error


def test_a_dropped_connection_fails_the_request():
    with NullServer(fault="die") as server:
        record, _ = stream(plan_for(server.url))
    assert record.error is not None and "\n" not in record.error
    assert record.error.startswith(("the stream broke off", "the server closed"))
    assert len(record.chunk_times) == 1


def test_without_usage_the_tokenizer_counts(tmp_path):
    with NullServer(fault="no-usage") as server:
        plain, _ = stream(plan_for(server.url, max_tokens=6))
        counted, _ = stream(plan_for(server.url, max_tokens=6,
                                     tokenizer=word_tokenizer(tmp_path)))
    assert plain.ok and (plain.output_tokens, plain.counted_by) == (None, "none")
    assert counted.ok and (counted.output_tokens, counted.counted_by) == (6, "tokenizer")


def test_sse_lines_split_across_reads_and_crlf_are_read():
    first = chunk("a")
    pieces = [(first[:9], 0), (first[9:].replace(b"\n", b"\r\n"), 0.05),
              (b": a comment\n\nevent: message\n", 0), (chunk("b")[:-1], 0.05),
              (b"\n" + chunk("c") + chunk("") + b"data: [DONE]\n\n", 0.05)]
    with scripted(pieces) as url:
        record, text = stream(plan_for(url))
    assert record.ok, record.error
    assert text == "abc"
    assert len(record.chunk_times) == 3  # the empty text is not a token
    gaps = [b - a for a, b in itertools.pairwise(record.chunk_times)]
    assert min(gaps) >= 0.04  # each piece timed when it arrived, not when parsed
    assert (record.output_tokens, record.counted_by) == (None, "none")


def test_a_stream_ends_at_done_even_if_the_server_lingers():
    with scripted([(chunk("a"), 0), (b"data: [DONE]\n\n", 0)], then_hang=True) as url:
        record, _ = stream(plan_for(url, stall_timeout=30))
    assert record.ok, record.error
    assert record.end is not None and record.end - record.chunk_times[0] < 0.5


def test_a_stream_ends_at_its_close_without_done():
    usage = {"prompt_tokens": 3, "completion_tokens": 2}
    with scripted([(chunk("a"), 0), (chunk("b"), 0), (b'data: {"choices": [], "usage": '
                                                      + json.dumps(usage).encode() + b"}", 0)]
                  ) as url:  # the last line even lacks its newline
        record, _ = stream(plan_for(url))
    assert record.ok, record.error
    assert (record.output_tokens, record.prompt_tokens) == (2, 3)


@pytest.mark.parametrize(("pieces", "status", "expected"), [
    ([(chunk("a"), 0), (b'data: {"error": {"message": "out of\\nmemory"}}\n\n', 0)], 200,
     "server error: out of memory"),
    ([(b"data: [1, 2]\n\n", 0)], 200, "malformed stream: [1, 2]"),
    ([(b'data: {"choices": [{"text": 5}]}\n\n', 0)], 200, "malformed stream: "),
    ([(b"data: [DONE]\n\n", 0)], 200, "the stream ended without output text"),
    ([(b"<html>\n<body>" + b"x" * 500 + b"</body></html>", 0)], 500,
     "HTTP 500 Internal Server Error: <html> <body>xxx"),
])
def test_a_bad_answer_is_a_one_line_error(pieces, status, expected):
    with scripted(pieces, status=status) as url:
        record, _ = stream(plan_for(url))
    assert record.error is not None and record.error.startswith(expected), record.error
    assert "\n" not in record.error and len(record.error) < 300
    assert not record.ok


def test_an_answer_that_is_not_a_stream_says_so():
    answer = json.dumps({"choices": [{"text": "all at once"}]}).encode()
    with scripted([(answer, 0.0)], content_type="application/json") as url:
        record, _ = stream(plan_for(url))
    assert record.error == "the answer is not an event stream (Content-Type: application/json)"


def test_a_client_that_cannot_be_started_says_why():
    outcome = run_load(plan_for("http://127.0.0.1:1"), deadline=5,
                       python="/nonexistent/python")
    assert outcome.records == ()
    assert outcome.error is not None
    assert outcome.error.startswith("the load generator could not start: ")


def test_chat_pieces_are_read():
    def delta(d: dict[str, str]) -> bytes:
        return b"data: " + json.dumps({"choices": [{"delta": d}]}).encode() + b"\n\n"

    pieces = [(delta({"role": "assistant"}), 0.0), (delta({"reasoning_content": "hm"}), 0.0),
              (delta({"content": "yes"}), 0.0), (delta({}), 0.0), (b"data: [DONE]\n\n", 0.0)]
    with scripted(pieces) as url:
        record, text = stream(plan_for(url, api="chat"))
    assert record.ok and text == "hmyes" and len(record.chunk_times) == 2


# --- the load generator's process ----------------------------------------------------

def client_process(plan: LoadPlan, folder: Path, *args: str) -> subprocess.Popen[bytes]:
    plan.write(folder / "plan.json")
    with (folder / "client.log").open("wb") as log:
        return subprocess.Popen([sys.executable, "-m", "accelbench.benchmarks.llm.client",
                                 str(folder / "plan.json"), str(folder / "out.jsonl"), *args],
                                stderr=log)


@pytest.mark.slow
def test_a_load_records_every_request_and_no_text(tmp_path):
    with NullServer(delay=0.002) as server:
        plan = plan_for(server.url, 4, warmup=2, max_tokens=3, offsets=(0.0, 0.05, 0.1, 0.1))
        process = client_process(plan, tmp_path)
        assert process.wait(timeout=60) == 0, (tmp_path / "client.log").read_text()
        served = server.requests
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert " w0" not in "".join(lines) and "w1 w2" not in "".join(lines)
    summary = json.loads(lines[-1])["summary"]
    assert summary["cpu_s"] > 0 and summary["wall_s"] >= 0.1 and not summary["stopped"]
    records, _ = read_output(tmp_path / "out.jsonl", plan)
    assert served == 6
    assert [(r.index, r.warmup) for r in records] == [
        (0, True), (1, True), (2, False), (3, False), (4, False), (5, False)]
    assert all(r.ok and r.output_tokens == 3 for r in records)
    measured = [r for r in records if not r.warmup]
    assert [r.scheduled for r in measured] == [0.0, 0.05, 0.1, 0.1]
    assert all(r.sent >= r.scheduled for r in measured)  # never early


@pytest.mark.slow
def test_run_load_keeps_to_the_concurrency():
    with NullServer(delay=0.01) as server:
        plan = plan_for(server.url, 5, max_tokens=3, concurrency=1)
        outcome = run_load(plan, deadline=60)
    assert outcome.error is None
    assert len(outcome.records) == 5 and all(r.ok for r in outcome.records)
    spans = sorted((r.sent, r.end or math.inf) for r in outcome.records)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert outcome.duration == pytest.approx(spans[-1][1] - spans[0][0])
    assert outcome.client_cpu_s is not None and outcome.client_cpu_s > 0


@pytest.mark.slow
def test_a_deadline_stops_the_load_and_keeps_what_it_did():
    with NullServer(fault="stall") as server:
        plan = plan_for(server.url, 3, stall_timeout=60, offsets=(0.0, 0.0, 30.0))
        started = time.monotonic()
        outcome = run_load(plan, deadline=2.0)
    assert time.monotonic() - started < 30
    assert outcome.error is not None
    assert outcome.error.startswith("the load generator passed its deadline of 2 s")
    assert "0 of 3 measured requests ended" in outcome.error
    # the two sent requests are there, with the first token each had; the third was
    # never sent
    assert [r.index for r in outcome.records] == [0, 1]
    for r in outcome.records:
        assert r.error == "stopped before the stream ended (the load was stopped)"
        assert len(r.chunk_times) == 1 and r.end is None


@pytest.mark.slow
def test_a_killed_client_leaves_its_records(tmp_path):
    with NullServer(delay=0.05) as server:
        plan = LoadPlan(server.url, "completions", "null", ("w1", "w2"), (1, 1000),
                        (False, False), (0.0, 0.0))
        process = client_process(plan, tmp_path)
        out = tmp_path / "out.jsonl"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and '"index": 0' not in (
                out.read_text() if out.exists() else ""):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    records, summary = read_output(out, plan)
    assert summary == {}
    assert records[0].ok and records[0].output_tokens == 1
    assert records[1].error == "unfinished: the load generator stopped before the stream ended"
    assert records[1].end is None and records[1].sent >= 0


@pytest.mark.slow
def test_a_dying_server_fails_its_requests():
    with subprocess.Popen([sys.executable, "-m", "accelbench.benchmarks.llm.nullserver",
                           "--fault", "die"], stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            outcome = run_load(plan_for(url, 2, offsets=(0.0, 0.5)), deadline=60)
            assert process.wait(timeout=10) == 3
        finally:
            if process.poll() is None:
                process.kill()
    assert outcome.error is None
    first, second = outcome.records
    assert first.error is not None and first.error.startswith(
        ("the stream broke off", "the server closed the connection mid-stream"))
    assert second.error is not None and second.error.startswith("cannot connect")


@pytest.mark.slow
def test_the_null_server_stops_on_sigterm():
    with subprocess.Popen([sys.executable, "-m", "accelbench.benchmarks.llm.nullserver",
                           "--delay", "0.001"], stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            record, _ = stream(plan_for(url, max_tokens=2))
            assert record.ok
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()


@pytest.mark.slow
@pytest.mark.parametrize(("change", "message"), [
    ({"tokenizer": "/nonexistent/tokenizer.json"}, "Exception: "),
    ({"api_key_env": "ACCELBENCH_TEST_UNSET_KEY"}, "ACCELBENCH_TEST_UNSET_KEY"),
])
def test_a_client_that_cannot_start_says_why_in_one_line(change, message, monkeypatch):
    monkeypatch.delenv("ACCELBENCH_TEST_UNSET_KEY", raising=False)
    outcome = run_load(plan_for("http://127.0.0.1:1", **change), deadline=60)
    assert outcome.records == ()
    assert outcome.error is not None
    assert outcome.error.startswith("the load generator failed (exit 2): load generator: ")
    assert message in outcome.error and "\n" not in outcome.error


@pytest.mark.slow
def test_run_load_pins_the_client_to_a_cpu():
    cpu = sorted(os.sched_getaffinity(0))[-1]
    with NullServer() as server:
        outcome = run_load(plan_for(server.url, 1), deadline=60, cpu=cpu)
    assert outcome.error is None and outcome.records[0].ok
    bad = run_load(plan_for("http://127.0.0.1:1", 1), deadline=60, cpu=10_000)
    assert bad.error is not None and "exit 2" in bad.error


def test_a_client_leaving_mid_stream_is_no_error_of_the_null_server(caplog):
    with NullServer(delay=0.02) as server:
        record, _ = stream(plan_for(server.url, max_tokens=100, request_timeout=0.1))
        time.sleep(0.2)  # the server writes its next token to the closed connection
    assert record.error == "request timed out after 0.1 s"
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


@pytest.mark.slow
def test_the_client_opens_more_connections_than_its_soft_file_limit(tmp_path):
    import resource

    def low_soft_limit() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))

    with NullServer(delay=0.1) as server:
        plan = plan_for(server.url, 120, max_tokens=3)
        plan.write(tmp_path / "plan.json")
        process = subprocess.run([sys.executable, "-m", "accelbench.benchmarks.llm.client",
                                  str(tmp_path / "plan.json"), str(tmp_path / "out.jsonl")],
                                 preexec_fn=low_soft_limit, timeout=60, check=False)
    assert process.returncode == 0
    records, _ = read_output(tmp_path / "out.jsonl", plan)
    assert len(records) == 120
    assert [r.error for r in records if not r.ok] == []
