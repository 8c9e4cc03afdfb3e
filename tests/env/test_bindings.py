"""One loader for the vendor libraries: telemetry and the host's GPU reading give the
same reason when a binding is absent or does not load."""

from __future__ import annotations

import pytest

from accelbench.env.bindings import INSTALL_HINT, BindingUnavailable, load_binding
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
