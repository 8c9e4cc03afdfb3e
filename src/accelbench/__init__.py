"""accelbench: validate and benchmark a PyTorch accelerator stack and keep every result.

From Python, `accelbench.run(...)` makes one run as `accelbench run` does, through the
same application function (runner.app): a `RunRequest` (or its fields), checked before
anything starts, measured in supervised worker processes, stored as each case finishes,
with its report written beside the store.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.app import Finished
    from accelbench.core.request import RunRequest

from accelbench.version import __version__

__all__ = ["RunRequest", "__version__", "run"]


def run(request: RunRequest | None = None, *, store: str | os.PathLike[str] | None = None,
        **fields: Any) -> Finished:
    """Measure a request on this machine and store it; the finished run.

    `request` is a `RunRequest`, or its fields are given as keywords
    (`accelbench.run(benches=("gemm",), overrides={"shape": ("1024",)}, device="cpu")`);
    `store` is a SQLite file or a PostgreSQL URL (default: `$ACCELBENCH_STORE`, else the
    user's default store). Bad input raises `accelbench.errors.UserError` (its
    `exit_code` is the command line's) before anything is measured or stored.
    """
    from accelbench import app
    from accelbench.core.request import RunRequest
    from accelbench.errors import UserError
    from accelbench.store import default_store_location, parse_location

    if request is None:
        try:
            request = RunRequest(**fields)
        except TypeError as exc:
            raise UserError(f"accelbench.run: {exc}") from None
        # Typed as the JSON form is: a field of the wrong kind is refused here, in one
        # line, rather than deep in the run.
        request = RunRequest.from_dict(request.to_dict())
    elif fields:
        raise UserError("accelbench.run: give a request or its fields, not both")
    location = parse_location(store) if store is not None else default_store_location()
    finished = app.run(request, location)
    if finished is None:
        raise UserError("accelbench.run: this process is a rank other than 0 of a torchrun "
                        "job: rank 0 has the run")
    return finished


def __getattr__(name: str) -> Any:
    # `accelbench.RunRequest` without importing the request module when accelbench is.
    if name == "RunRequest":
        from accelbench.core.request import RunRequest

        return RunRequest
    raise AttributeError(f"module 'accelbench' has no attribute {name!r}")
