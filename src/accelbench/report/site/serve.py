"""Serving a published site on this machine only (127.0.0.1), to look at it in a browser:
the standard library's HTTP server over the site's folder, no more."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from accelbench.errors import UserError

LOOPBACK = "127.0.0.1"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a line per request would bury the URL printed above


def site_server(folder: str | Path, port: int) -> ThreadingHTTPServer:
    """A server of `folder` on the loopback address at `port` (0: any free port), bound
    but not serving yet (`serve_forever`)."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    try:
        return ThreadingHTTPServer((LOOPBACK, port), handler)
    except OSError as exc:
        raise UserError(f"cannot serve on {LOOPBACK}:{port}: {exc.strerror or exc}") from None


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://{LOOPBACK}:{server.server_address[1]}/"
