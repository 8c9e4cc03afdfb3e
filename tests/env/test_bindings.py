"""One loader for the vendor libraries: telemetry and the host's GPU reading give the
same reason when a binding is absent or does not load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.env import bindings
from accelbench.env.bindings import INSTALL_HINT, BindingUnavailable, load_binding, quietly
from accelbench.env.host.gpu import read_gpu
from accelbench.env.telemetry.amd import AmdSmiSource
from accelbench.env.telemetry.guard import SourceUnavailable


def absent(name: str) -> object:
    raise ImportError(f"No module named {name!r}")


def broken(name: str) -> object:
    raise OSError(f"lib{name}.so: cannot open shared object file\nmore detail")


def test_an_absent_binding_says_how_to_install_it() -> None:
    with pytest.raises(BindingUnavailable, match=r"^pynvml is not installed \(pip install"):
        load_binding("pynvml", absent)


def test_a_binding_that_does_not_load_says_why_in_one_line() -> None:
    with pytest.raises(BindingUnavailable) as raised:
        load_binding("amdsmi", broken)
    assert str(raised.value) == "amdsmi did not load: OSError: libamdsmi.so: cannot open " \
                                "shared object file"


def test_the_host_reading_and_telemetry_give_the_same_reasons() -> None:
    reading = read_gpu(importer=broken)
    assert not reading.available
    assert reading.reason == ("pynvml did not load: OSError: libpynvml.so: cannot open "
                              "shared object file; amdsmi did not load: OSError: "
                              "libamdsmi.so: cannot open shared object file")
    assert read_gpu(importer=absent).reason == (f"pynvml is not installed ({INSTALL_HINT}); "
                                                f"amdsmi is not installed ({INSTALL_HINT})")
    with pytest.raises(SourceUnavailable) as raised:
        AmdSmiSource.open(0, importer=absent)
    assert str(raised.value) == f"amdsmi is not installed ({INSTALL_HINT})"


# ------------------------------------------------- what a vendor library prints itself

# What amdsmi prints on a host without ROCm: from C to file descriptor 1 and from Python
# to sys.stdout, and then its import fails.
FAKE_AMDSMI = '''
import os, pathlib
counter = pathlib.Path(__file__).with_name("imports")
counter.write_text(counter.read_text() + "x" if counter.exists() else "x")
os.write(1, b"/opt/rocm/lib/libamd_smi.so: cannot open shared object file\\n")
print("Unable to find libamd_smi.so library try installing amd-smi-lib")
raise KeyError("libamd_smi.so")
'''


def _fake_amdsmi(tmp_path: Path) -> Path:
    package = tmp_path / "fakes" / "amdsmi"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_AMDSMI)
    return package.parent


def test_what_a_binding_prints_while_loading_goes_into_the_reason_not_stdout(
        tmp_path, monkeypatch, capfd) -> None:
    monkeypatch.syspath_prepend(str(_fake_amdsmi(tmp_path)))
    monkeypatch.setattr(bindings, "_FAILED", {})
    for _ in range(3):
        with pytest.raises(BindingUnavailable) as raised:
            load_binding("amdsmi")
        assert str(raised.value) == (
            "amdsmi did not load: KeyError: 'libamd_smi.so' (it printed: "
            "/opt/rocm/lib/libamd_smi.so: cannot open shared object file)")
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    # Tried once per process: a failed import is not cached by Python, and would print again.
    assert (tmp_path / "fakes" / "amdsmi" / "imports").read_text() == "x"


def test_what_a_library_prints_when_started_goes_to_stderr_once(capfd) -> None:
    def init() -> int:
        os.write(1, b"amdsmi: no GPU found from C\n")
        print("amdsmi: and from Python")
        return 7

    assert quietly(init) == 7
    assert quietly(init) == 7
    out, err = capfd.readouterr()
    assert out == ""
    assert err.count("no GPU found from C") == 1 and err.count("and from Python") == 1


def _accelbench(*args: str, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(pythonpath), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                          text=True, timeout=600, check=False, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["health", "--device", "cpu", "--no-report"],
    ["validate", "--level", "1", "--device", "cpu", "--no-telemetry"],
])
def test_json_stays_json_when_a_vendor_library_prints(tmp_path, command) -> None:
    result = _accelbench(*command, "--json", "--store", str(tmp_path / "r.sqlite"),
                         pythonpath=_fake_amdsmi(tmp_path))
    assert result.returncode in (0, 1), result.stderr
    json.loads(result.stdout)
    assert "libamd_smi" not in result.stdout.split("{", 1)[0]
