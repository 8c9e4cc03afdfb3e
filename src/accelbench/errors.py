"""The one user-error path: every problem caused by input becomes a UserError.

The CLI turns a UserError into a single line on stderr and its exit code; nothing
already measured or stored is touched on the way out.
"""

from __future__ import annotations

# Exit codes, each with one meaning, so scripts and CI gates can tell them apart.
EXIT_OK = 0
EXIT_CASE_FAILED = 1  # the run finished, but at least one case failed
EXIT_USAGE = 2  # bad arguments: unknown name, invalid value
EXIT_STORE = 3  # the store file is missing, unreadable, foreign or too new
EXIT_DEVICE = 4  # the requested device is not available here
EXIT_STORE_UNREACHABLE = 5  # the store's database server cannot be reached
EXIT_STORE_AUTH = 6  # the store's database server refused the connection's credentials
EXIT_SCHEDULER = 7  # the batch scheduler (Slurm) refused the job: no such partition, ...
EXIT_NODES = 8  # the nodes asked for name no node, or a node cannot be used
EXIT_INCONCLUSIVE = 9  # a gate could not decide: the evidence is too noisy or contended
# `qualify --prologue/--epilogue`: the checks could not run at all (no device, no store,
# accelbench itself), so the node was not judged; every other command keeps its code.
EXIT_NOT_RUN = 10
# A serving engine's endpoint cannot be reached, refuses the connection, or is not an
# OpenAI-compatible server (the `llm` family's engines, by URL or started here).
EXIT_ENDPOINT = 11
EXIT_INTERNAL = 70  # accelbench itself could not work (the worker could not start)
EXIT_INTERRUPTED = 130  # stopped by the user (Ctrl-C); what was measured is kept
EXIT_TERMINATED = 143  # stopped by SIGTERM (128 + 15), as by Ctrl-C; what was measured is kept


class UserError(Exception):
    """A problem with what the user asked for, reported as one line."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class StoreError(UserError):
    """The result store cannot be used as asked."""

    exit_code = EXIT_STORE


class StoreUnreachable(StoreError):
    """The store's database server cannot be reached (no such host, nothing listening)."""

    exit_code = EXIT_STORE_UNREACHABLE


class StoreAuthFailed(StoreError):
    """The store's database server refused the credentials."""

    exit_code = EXIT_STORE_AUTH


class SchedulerError(UserError):
    """The batch scheduler refused or lost the job."""

    exit_code = EXIT_SCHEDULER


class NodesError(UserError):
    """The nodes asked for are no nodes, or cannot be used."""

    exit_code = EXIT_NODES


class DeviceError(UserError):
    """The requested device does not exist or is not usable."""

    exit_code = EXIT_DEVICE


class EndpointError(UserError):
    """A serving engine's endpoint is unreachable, refuses, or does not speak the OpenAI
    API; or an engine accelbench starts never became ready."""

    exit_code = EXIT_ENDPOINT


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: it stops a run on every path that Ctrl-C does, and only the exit
    code tells the two apart (a scheduler's stop is not the user's)."""
