"""What a generated batch script hands its job, read back out of the script."""

from __future__ import annotations

from accelbench.core.request import RunRequest
from accelbench.slurm.script import END_OF_REQUEST


def requests_in(script: str) -> list[RunRequest]:
    """The requests in a script's here-documents, in order."""
    found: list[RunRequest] = []
    lines = iter(script.splitlines())
    for line in lines:
        if line.endswith(f"<<'{END_OF_REQUEST}'"):
            body: list[str] = []
            for inner in lines:
                if inner == END_OF_REQUEST:
                    break
                body.append(inner)
            found.append(RunRequest.from_json("\n".join(body)))
    return found
