"""A command that measures and is refused before anything is measured (no such device)
leaves no store behind; a host whose name is not UTF-8 still runs, its name kept with
the odd bytes escaped."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accelbench.env.fingerprint import collect, host_name
from accelbench.errors import EXIT_DEVICE, EXIT_OK, DeviceError
from accelbench.runner import messages
from accelbench.store import Store
from fakes import no_vendor_tools
from scripted_worker import ScriptedWorker, run_cli


class RealDevices(ScriptedWorker):
    """The scripted worker, but the device is looked for as a worker looks for it: a
    device this machine does not have is refused."""

    def ask(self, message: Any, timeout: float) -> Any:
        if isinstance(message, messages.ReadFingerprint):
            try:
                return messages.FingerprintRead(collect(message.device, run=no_vendor_tools,
                                                        environ={}).to_dict())
            except DeviceError as exc:
                return messages.Refused(exc.exit_code, str(exc))
        return super().ask(message, timeout)


@pytest.mark.parametrize("command", [["run", "--bench", "launch"], ["validate"], ["health"]])
def test_a_refused_device_creates_no_store(command: list[str], monkeypatch, capsys,
                                           tmp_path: Path) -> None:
    from accelbench.runner import session

    monkeypatch.setattr(session, "run_session",
                        functools.partial(session.run_session, worker_factory=RealDevices))
    store = tmp_path / "new" / "results.sqlite"
    code = run_cli(monkeypatch, *command, "--device", "cuda:7", "--no-report",
                   "--store", str(store))
    err = capsys.readouterr().err
    assert code == EXIT_DEVICE, err
    assert "cuda:7" in err
    assert not store.exists() and not store.parent.exists()


def test_a_host_name_that_is_not_utf8_is_kept_escaped() -> None:
    assert host_name("node\udcff\udcfe-<b>") == "node\\xff\\xfe-<b>"
    assert host_name("gpu-01.example") == "gpu-01.example"
    assert host_name("nœud-é") == "nœud-é"


def _renamed(name: bytes, *argv: str) -> list[str]:
    """`accelbench ARGV` in a UTS namespace of its own whose host name is `name`."""
    code = ("import os, socket, sys\n"
            f"socket.sethostname({name!r})\n"
            "os.execv(sys.executable, [sys.executable, '-m', 'accelbench', *sys.argv[1:]])\n")
    return ["unshare", "--uts", "--", sys.executable, "-c", code, *argv]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs root and unshare to rename the host")
def test_a_run_on_a_host_named_in_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    report = tmp_path / "report.html"
    result = subprocess.run(
        _renamed(b"node\xff\xfe-<b>", "run", "--bench", "launch", "--device", "cpu",
                 "--max-time", "0.05", "--threads", "1", "--store", str(store),
                 "--report", str(report)),
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "ACCELBENCH_STORE": str(store)})
    assert result.returncode == EXIT_OK, result.stderr
    with Store.open(store, create=False) as opened:
        stored = opened.load_run("latest")
    assert stored.record.host == "node\\xff\\xfe-<b>"
    assert stored.fingerprint["host"]["hostname"] == "node\\xff\\xfe-<b>"
    assert stored.measurements and stored.measurements[0].ok
    page = report.read_text(encoding="utf-8")
    assert "node\\xff\\xfe-&lt;b&gt;" in page and "-<b>" not in page
