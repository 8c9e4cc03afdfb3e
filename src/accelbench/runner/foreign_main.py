"""The worker's entry point in another interpreter (a side of `accelbench ab`):
`python -m accelbench.runner.foreign_main FD OWNER`, with FD the socket to the supervisor
and OWNER its pid (`runner.stack.start_foreign`)."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    from multiprocessing.connection import Connection

    from accelbench.runner.worker import worker_main

    fd, owner = (int(word) for word in argv)
    worker_main(Connection(fd), owner, death_signal=True)


if __name__ == "__main__":
    main(sys.argv[1:])
