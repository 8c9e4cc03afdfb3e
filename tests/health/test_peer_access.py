"""Turning peer access off between two GPUs through the runtime PyTorch loaded, and on
again whatever happens, with a recorded runtime in place of libcudart/libamdhip64."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

import pytest

from accelbench.benchmarks.health import peer_access
from accelbench.benchmarks.health.peer_access import PeerAccessError, PeerAccessOff


class Runtime:
    """The runtime's two calls, recording the device current at each: `on` holds the
    (device, peer) pairs with peer access on."""

    def __init__(self, on: set[tuple[int, int]], fail_enable: bool = False) -> None:
        self.on = set(on)
        self.current = 0
        self.calls: list[tuple[str, int, int]] = []
        self.fail_enable = fail_enable

    def cudaDeviceDisablePeerAccess(self, peer: int) -> int:
        self.calls.append(("off", self.current, peer))
        if (self.current, peer) not in self.on:
            return peer_access.NOT_ENABLED
        self.on.discard((self.current, peer))
        return peer_access.SUCCESS

    def cudaDeviceEnablePeerAccess(self, peer: int, flags: int) -> int:
        self.calls.append(("on", self.current, peer))
        if self.fail_enable:
            return 217  # cudaErrorPeerAccessUnsupported
        self.on.add((self.current, peer))
        return peer_access.SUCCESS


def _torch(runtime: Runtime) -> Any:
    @contextlib.contextmanager
    def device(index: int):
        before, runtime.current = runtime.current, index
        try:
            yield
        finally:
            runtime.current = before

    return SimpleNamespace(cuda=SimpleNamespace(device=device))


def test_peer_access_is_off_both_ways_inside_and_on_again_after() -> None:
    runtime = Runtime({(0, 1), (1, 0), (0, 2)})
    with PeerAccessOff(_torch(runtime), runtime, "cuda", 0, 1):
        assert runtime.on == {(0, 2)}
    assert runtime.on == {(0, 1), (1, 0), (0, 2)}
    assert runtime.calls[:2] == [("off", 0, 1), ("off", 1, 0)]


def test_a_way_that_was_off_stays_off() -> None:
    runtime = Runtime({(1, 0)})
    with PeerAccessOff(_torch(runtime), runtime, "cuda", 0, 1):
        assert runtime.on == set()
    assert runtime.on == {(1, 0)}
    assert ("on", 0, 1) not in runtime.calls


def test_peer_access_comes_back_when_the_copy_fails() -> None:
    runtime = Runtime({(0, 1), (1, 0)})
    with pytest.raises(RuntimeError, match="copy failed"), \
            PeerAccessOff(_torch(runtime), runtime, "cuda", 0, 1):
        raise RuntimeError("copy failed")
    assert runtime.on == {(0, 1), (1, 0)}


def test_a_runtime_that_will_not_turn_it_on_again_is_an_error() -> None:
    runtime = Runtime({(0, 1), (1, 0)}, fail_enable=True)
    with pytest.raises(PeerAccessError, match=r"gpu0 to gpu1 \(runtime error 217\)"), \
            PeerAccessOff(_torch(runtime), runtime, "cuda", 0, 1):
        pass


def test_the_runtime_is_found_among_the_loaded_libraries() -> None:
    maps = [
        "7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6",
        "7f20-7f30 r-xp 00000000 08:01 456 /opt/venv/lib/python3.11/site-packages/nvidia/"
        "cuda_runtime/lib/libcudart.so.12",
        "7f40-7f50 r-xp 00000000 08:01 789 /opt/rocm/lib/libamdhip64.so.6.2.60200",
        "7f60-7f70 rw-p 00000000 00:00 0 ",
    ]
    assert str(peer_access.runtime_path("cuda", maps)).endswith("/libcudart.so.12")
    assert peer_access.runtime_path("rocm", maps) == "/opt/rocm/lib/libamdhip64.so.6.2.60200"
    assert peer_access.runtime_path("cuda", maps[:1]) is None
    assert peer_access.open_runtime("cpu") is None
