"""A PyTorch older than accelbench supports stops a run at start-up with one line."""

from __future__ import annotations

import pytest

from accelbench.env.torch_floor import TORCH_FLOOR, require_supported_torch, unsupported_torch
from accelbench.errors import EXIT_DEVICE, UserError


@pytest.mark.parametrize("version", ["2.9.1+cu128", "2.9.0", "2.14.1", "3.0.0a0+git1234",
                                     "2.10.0+rocm7.0"])
def test_supported_releases(version: str) -> None:
    assert unsupported_torch(version) is None


@pytest.mark.parametrize("version", ["2.8.0", "2.5.1+rocm6.2", "1.13.1", "2.1.0a0"])
def test_older_releases_are_named_with_what_to_install(version: str) -> None:
    reason = unsupported_torch(version)
    assert reason is not None and "\n" not in reason
    assert reason.startswith(f"PyTorch {version} is older than accelbench supports")
    assert f"{TORCH_FLOOR[0]}.{TORCH_FLOOR[1]} or newer" in reason


def test_an_unreadable_version_is_said_too() -> None:
    assert "cannot tell the PyTorch release" in (unsupported_torch("nightly") or "")


def test_the_floor_is_the_one_the_package_declares() -> None:
    from pathlib import Path

    root = Path(__file__).parents[2]
    floor = f"{TORCH_FLOOR[0]}.{TORCH_FLOOR[1]}"
    assert f'"torch>={floor}",' in (root / "pyproject.toml").read_text()
    # CI tests that release, beside the pinned one.
    pins = (root / "requirements-floor.txt").read_text().splitlines()
    assert any(line.startswith(f"torch=={floor}.") for line in pins)


def test_a_worker_on_an_old_torch_refuses_to_read_the_stack(monkeypatch) -> None:
    import torch

    from accelbench.runner.messages import ReadFingerprint, Refused
    from accelbench.runner.worker import answer

    require_supported_torch()  # the PyTorch these tests run on is supported
    monkeypatch.setattr(torch, "__version__", "2.4.1+cu121")
    reply = answer(ReadFingerprint("cpu"))
    assert isinstance(reply, Refused) and reply.exit_code == EXIT_DEVICE
    assert reply.message.startswith("PyTorch 2.4.1+cu121 is older than accelbench supports")
    with pytest.raises(UserError):
        require_supported_torch()
