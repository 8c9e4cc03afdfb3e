"""A throwaway PostgreSQL cluster on this machine, for the store's tests and benchmarks.

`start()` runs initdb into a new temporary directory and starts the server on 127.0.0.1
(a free port) and on a unix socket in that directory, with fsync off (nothing in it
needs to outlive the process). Two login roles: TRUST_ROLE, trusted without a password,
and PASSWORD_ROLE, which must give PASSWORD (scram-sha-256), so that refused credentials
can be tried for real. `Cluster.stop()` stops the server at once and removes it all.

Run as root, the server runs as the `postgres` user (initdb refuses root), through
runuser. The binaries are found with `pg_config --bindir`, else in
/usr/lib/postgresql/*/bin; `bin_dir()` is None when there are none.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "postgres"
TRUST_ROLE = "accelbench"
PASSWORD_ROLE = "fleet"
PASSWORD = "s3cret:p@ss/word"  # characters that must be escaped in a URL

_HBA = f"""\
local all {SUPERUSER} trust
host all {SUPERUSER} 127.0.0.1/32 trust
local all {TRUST_ROLE} trust
host all {TRUST_ROLE} 127.0.0.1/32 trust
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
"""


def bin_dir() -> Path | None:
    """Where initdb, pg_ctl and postgres are, or None."""
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.strip()
            candidates.append(Path(out))
        except (OSError, subprocess.SubprocessError):
            pass
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for directory in candidates:
        if all((directory / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return directory
    return None


@dataclass(frozen=True)
class Cluster:
    directory: Path
    bin: Path
    port: int

    @property
    def socket_dir(self) -> Path:
        return self.directory

    def url(self, database: str, role: str = TRUST_ROLE, password: str | None = None,
            host: str = "127.0.0.1", port: int | None = None) -> str:
        auth = quote(role, safe="") + (f":{quote(password, safe='')}" if password else "")
        return f"postgresql://{auth}@{host}:{port or self.port}/{database}"

    def socket_url(self, database: str, role: str = TRUST_ROLE) -> str:
        """A URL through the unix socket: host= names the socket's directory."""
        return (f"postgresql://{role}@/{database}?host={quote(str(self.socket_dir), safe='')}"
                f"&port={self.port}")

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one statement as the superuser over the socket; its output."""
        return _run([str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                     "-h", str(self.socket_dir), "-p", str(self.port), "-U", SUPERUSER,
                     "-d", database, "-c", statement]).strip()

    def create_database(self, name: str, owner: str = TRUST_ROLE) -> str:
        """A new, empty database owned by `owner`; its name."""
        self.sql(f'CREATE DATABASE "{name}" OWNER "{owner}"')
        return name

    def stop(self) -> None:
        try:
            _run(_as_server_user([str(self.bin / "pg_ctl"), "stop", "-D",
                                  str(self.directory / "data"), "-m", "immediate", "-w"]))
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def start(bindir: Path | None = None) -> Cluster:
    """A new cluster, started; raises RuntimeError with the server's words if it cannot."""
    bindir = bindir or bin_dir()
    if bindir is None:
        raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found")
    directory = Path(tempfile.mkdtemp(prefix="accelbench-pg-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(directory, SUPERUSER, SUPERUSER)
        data = directory / "data"
        _run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER,
                              "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"]))
        (data / "pg_hba.conf").write_text(_HBA)
        port = _free_port()
        options = (f"-c listen_addresses=127.0.0.1 -c port={port} "
                   f"-c unix_socket_directories={directory} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        _run(_as_server_user([str(bindir / "pg_ctl"), "start", "-D", str(data), "-w",
                              "-t", "60", "-l", str(directory / "server.log"), "-o", options]))
        cluster = Cluster(directory, bindir, port)
        cluster.sql(f"CREATE ROLE {TRUST_ROLE} LOGIN CREATEDB")
        escaped = PASSWORD.replace("'", "''")
        cluster.sql(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{escaped}'")
        return cluster
    except BaseException:
        log = directory / "server.log"
        detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        shutil.rmtree(directory, ignore_errors=True)
        if detail:
            raise RuntimeError(f"the PostgreSQL server did not start: {detail}") from None
        raise


def _as_server_user(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", SUPERUSER, "--", *argv]
    return argv


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd="/")
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name if argv[0] != 'runuser' else argv[4]} "
                           f"failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
