"""Hosts on this one machine for multi-node tests: network namespaces joined by veth pairs.

`hosts(n)` makes a small network that touches nothing outside itself: a "switch"
namespace holding a bridge, and n host namespaces, each with an `eth0` (10.213.0.{i+1}/24)
whose veth peer is a port of that bridge, and its own loopback. Nothing is created in the
namespace the tests run in, and no route leads out. A command run on a host
(`Host.command`, `Host.popen`) also gets a UTS namespace of its own with the host's name,
so `socket.gethostname()` tells the nodes apart, and every host's name resolves to its
address there (`ip netns exec` shows /etc/netns/NS/hosts as /etc/hosts). `Host.slow()`
limits the host's link with a token bucket, in both directions: a bad link.

Needs root and iproute2 (`ip`, `tc`) and `unshare` (util-linux). `require_hosts()` skips a
test where they are missing, but fails it under CI (CI=true), which installs them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_PREFIX = "abnet"
SUBNET = "10.213.0"


@dataclass(frozen=True)
class Host:
    name: str  # its host name, and the name of its namespace's last part
    netns: str
    address: str  # on eth0
    interface: str = "eth0"
    switch_netns: str = ""
    switch_port: str = ""

    def command(self, argv: Sequence[str]) -> list[str]:
        """argv run in this host's network namespace, under its own host name."""
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "--",
                "sh", "-c", 'hostname "$0" && exec "$@"', self.name, *argv]

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
            timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(argv), env=_env(env), timeout=timeout,
                              capture_output=True, text=True, check=False, **kwargs)

    def popen(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(argv), env=_env(env), text=True, **kwargs)

    def slow(self, rate: str = "1mbit", burst: str = "32kbit", latency: str = "400ms") -> None:
        """A token-bucket limit on what this host sends and on what it is sent."""
        for netns, dev in ((self.netns, self.interface), (self.switch_netns, self.switch_port)):
            _ip(["ip", "netns", "exec", netns, "tc", "qdisc", "replace", "dev", dev, "root",
                 "tbf", "rate", rate, "burst", burst, "latency", latency])


def _env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra or {})
    return env


def _ip(argv: Sequence[str]) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")


def missing() -> str | None:
    """Why hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = f"{_PREFIX}-probe-{os.getpid()}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return f"ip netns add failed: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, check=False)
    return None


def require_hosts() -> None:
    why = missing()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"multi-node hosts cannot be made: {why}")
    pytest.skip(f"multi-node hosts cannot be made: {why}")


def _remove_stale() -> None:
    """Namespaces left by a test session that was killed."""
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) >= 3 and parts[0] == _PREFIX and parts[1].isdigit():
            pid = int(parts[1])
            if pid != os.getpid() and not os.path.exists(f"/proc/{pid}"):
                subprocess.run(["ip", "netns", "delete", name], capture_output=True,
                               check=False)
                shutil.rmtree(Path("/etc/netns") / name, ignore_errors=True)


_made = 0


@contextlib.contextmanager
def hosts(n: int, names: Sequence[str] | None = None) -> Iterator[list[Host]]:
    """n hosts on one bridge; removed on exit."""
    global _made
    require_hosts()
    _remove_stale()
    _made += 1
    tag = f"{_PREFIX}-{os.getpid()}-{_made}"
    switch = f"{tag}-sw"
    names = list(names) if names is not None else [f"node{i}" for i in range(n)]
    made: list[str] = []
    try:
        _ip(["ip", "netns", "add", switch])
        made.append(switch)
        _ip(["ip", "-n", switch, "link", "set", "lo", "up"])
        _ip(["ip", "-n", switch, "link", "add", "br0", "type", "bridge"])
        _ip(["ip", "-n", switch, "link", "set", "br0", "up"])
        out = []
        for i, name in enumerate(names):
            netns = f"{tag}-{name}"
            _ip(["ip", "netns", "add", netns])
            made.append(netns)
            port = f"p{i}"
            _ip(["ip", "link", "add", "eth0", "netns", netns, "type", "veth",
                 "peer", "name", port, "netns", switch])
            _ip(["ip", "-n", switch, "link", "set", port, "master", "br0"])
            _ip(["ip", "-n", switch, "link", "set", port, "up"])
            address = f"{SUBNET}.{i + 1}"
            _ip(["ip", "-n", netns, "addr", "add", f"{address}/24", "dev", "eth0"])
            _ip(["ip", "-n", netns, "link", "set", "eth0", "up"])
            _ip(["ip", "-n", netns, "link", "set", "lo", "up"])
            out.append(Host(name=name, netns=netns, address=address, switch_netns=switch,
                            switch_port=port))
        table = "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in out)
        for h in out:
            etc = Path("/etc/netns") / h.netns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(table)
        yield out
    finally:
        for netns in reversed(made):
            subprocess.run(["ip", "netns", "delete", netns], capture_output=True, check=False)
            shutil.rmtree(Path("/etc/netns") / netns, ignore_errors=True)
