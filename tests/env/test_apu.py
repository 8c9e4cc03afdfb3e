"""APU awareness: whether a GPU shares one memory with the CPU, whether XNACK is on, and
where managed memory lives because of both, from faked device properties of an MI300A
(XNACK on and off), an MI300X, an MI250X, a W7900 (a target without XNACK) and an H100."""

from __future__ import annotations

import pytest

from accelbench.core.device import DeviceInfo
from accelbench.env.apu import MemoryModel, managed_memory, memory_model
from accelbench.env.fingerprint import collect
from accelbench.report.fingerprint import rows
from fakes import device_properties

GIB = 1 << 30
MI300A = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300A", "gfx942", 110 * GIB, 228)
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942", 192 * GIB, 304)
H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90", 80 * GIB, 132)
STRIX = DeviceInfo("cuda", 0, "rocm", "AMD Radeon Graphics", "gfx1151", 96 * GIB, 40)
MI250X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI250X", "gfx90a", 64 * GIB, 110)
W7900 = DeviceInfo("cuda", 0, "rocm", "AMD Radeon PRO W7900", "gfx1100", 48 * GIB, 96)




@pytest.mark.parametrize(("feature", "env", "on"), [
    ("xnack+", {"HSA_XNACK": "1"}, True),
    ("xnack-", {"HSA_XNACK": "0"}, False),
    ("xnack-", {}, False),
])
def test_an_mi300a_is_an_apu_and_its_xnack_is_what_gcnarchname_says(feature, env, on):
    model = memory_model(device_properties(f"gfx942:sramecc+:{feature}", True), MI300A, env)
    assert model is not None
    assert model.integrated is True
    assert model.integrated_by == ("PyTorch's is_integrated, and identified as AMD Instinct "
                                   "MI300A, an APU")
    assert model.xnack is on
    assert model.xnack_by == f"gcnArchName gfx942:sramecc+:{feature}"
    assert model.to_dict() == {"integrated": True, "integrated_by": model.integrated_by,
                               "xnack": on, "xnack_by": model.xnack_by,
                               "xnack_feature": feature, "hsa_xnack": env.get("HSA_XNACK")}


def test_hsa_xnack_that_did_not_take_effect_is_said():
    model = memory_model(device_properties("gfx942:sramecc+:xnack-", True), MI300A,
                         {"HSA_XNACK": "1"})
    assert model is not None and model.xnack is False
    assert model.xnack_by == ("gcnArchName gfx942:sramecc+:xnack- (HSA_XNACK=1 is set, but "
                              "not in effect)")


def test_a_target_without_the_xnack_feature_has_no_xnack_whatever_hsa_xnack_says():
    """The runtime names every target that has XNACK with its mode (xnack+ or xnack-):
    a name without one is a target without XNACK, which HSA_XNACK=1 cannot turn on."""
    for env in ({}, {"HSA_XNACK": "1"}, {"HSA_XNACK": "0"}):
        model = memory_model(device_properties("gfx1100", False), W7900, env)
        assert model is not None and model.xnack is False
        assert model.xnack_feature is None and model.hsa_xnack == env.get("HSA_XNACK")
        assert str(model.xnack_by).startswith("gcnArchName gfx1100 has no xnack feature")
    asked = memory_model(device_properties("gfx1100", False), W7900, {"HSA_XNACK": "1"})
    assert asked is not None and "HSA_XNACK=1 is set, but cannot take effect" in str(
        asked.xnack_by)


def test_hsa_xnack_is_read_only_where_pytorch_gives_no_gcnarchname():
    off = memory_model(device_properties(integrated=False), MI250X, {"HSA_XNACK": "0"})
    assert off is not None and off.xnack is False
    assert off.xnack_by == "HSA_XNACK=0 (PyTorch gave no gcnArchName)"
    asked = memory_model(device_properties(integrated=False), MI250X, {"HSA_XNACK": "1"})
    assert asked is not None and asked.xnack is None  # asked for; nothing shows it took
    assert str(asked.xnack_by).startswith("HSA_XNACK=1 asks for it")
    unknown = memory_model(device_properties(integrated=False), MI250X, {})
    assert unknown is not None and unknown.xnack is None
    assert unknown.to_dict()["xnack"] is None
    assert unknown.xnack_by == "neither gcnArchName (not given) nor HSA_XNACK says"


@pytest.mark.parametrize(("gcn", "env", "where"), [
    ("gfx90a:sramecc+:xnack-", {}, "host-resident"),
    ("gfx90a:sramecc+:xnack-", {"HSA_XNACK": "0"}, "host-resident"),
    ("gfx90a:sramecc+:xnack-", {"HSA_XNACK": "1"}, "host-resident"),  # not in effect
    ("gfx90a:sramecc+:xnack+", {"HSA_XNACK": "1"}, "migrates"),
    ("gfx1100", {"HSA_XNACK": "1"}, "host-resident"),
    (None, {}, "unknown"),
])
def test_managed_memory_on_a_discrete_amd_gpu_migrates_only_with_xnack(gcn, env, where):
    model = memory_model(device_properties(gcn, False), MI250X, env)
    assert model is not None
    managed = managed_memory(model, "rocm")
    assert managed.placement == where
    assert "XNACK" in managed.placement_by
    assert managed.to_dict() == {"managed_memory": where,
                                 "managed_memory_by": managed.placement_by}


@pytest.mark.parametrize("feature", ["xnack+", "xnack-"])
def test_managed_memory_on_an_apu_is_the_one_memory_whatever_xnack_says(feature):
    model = memory_model(device_properties(f"gfx942:sramecc+:{feature}", True), MI300A, {})
    assert model is not None
    managed = managed_memory(model, "rocm")
    assert managed.placement == "one memory"
    assert "nothing migrates" in managed.placement_by


def test_managed_memory_on_cuda_migrates_as_cuda_documents():
    managed = managed_memory(MemoryModel(False, "PyTorch's is_integrated"), "cuda")
    assert managed.placement == "migrates"
    assert "concurrentManagedAccess" in managed.placement_by


def test_an_mi300a_is_an_apu_even_where_pytorch_does_not_say_so():
    missing = memory_model(device_properties("gfx942:xnack-"), MI300A, {})
    assert missing is not None and missing.integrated is True
    assert missing.integrated_by == "identified as AMD Instinct MI300A, an APU"
    denied = memory_model(device_properties("gfx942:xnack-", False), MI300A, {})
    assert denied is not None and denied.integrated is True
    assert "though PyTorch's is_integrated is False" in denied.integrated_by


def test_an_mi300x_and_an_h100_are_discrete():
    mi300x = memory_model(device_properties("gfx942:sramecc+:xnack-", False), MI300X, {})
    assert mi300x is not None
    assert (mi300x.integrated, mi300x.integrated_by, mi300x.xnack) == (
        False, "PyTorch's is_integrated", False)
    h100 = memory_model(device_properties(integrated=False), H100, {"HSA_XNACK": "1"})
    assert h100 is not None
    assert (h100.integrated, h100.xnack, h100.xnack_by) == (False, None, None)
    assert h100.to_dict() == {"integrated": False, "integrated_by": "PyTorch's is_integrated"}


def test_any_device_pytorch_reports_as_integrated_is_one():
    model = memory_model(device_properties("gfx1151:xnack-", True), STRIX, {})
    assert model is not None and model.integrated is True
    assert model.integrated_by == "PyTorch's is_integrated"
    old = memory_model(device_properties("gfx1151"), STRIX, {})
    assert old is not None and old.integrated is False and old.xnack is False
    assert old.integrated_by == "PyTorch's device properties have no is_integrated"


def test_properties_pytorch_could_not_give_are_said():
    model = memory_model(None, MI300X, {})
    assert model is not None
    assert (model.integrated, model.integrated_by) == (False, "PyTorch gave no device properties")
    apu = memory_model(None, MI300A, {})
    assert apu is not None and apu.integrated is True  # the product still says


def test_a_cpu_has_no_memory_model():
    assert memory_model(device_properties(), DeviceInfo("cpu", None, "cpu", "cpu"), {}) is None


@pytest.mark.parametrize("xnack", [True, False])
def test_the_fingerprint_of_an_mi300a_says_apu_and_xnack(fakes, xnack):
    env = {"HSA_XNACK": "1" if xnack else "0"}
    fp = collect("cuda", torch_module=fakes.mi300a(xnack), run=fakes.no_tools, environ=env)
    model = fp.data["memory_model"]
    assert model["integrated"] is True and model["xnack"] is xnack
    assert fp.data["product"]["label"] == "AMD Instinct MI300A"
    assert fp.data["product"]["peaks"] == "AMD Instinct MI300A"
    table = dict(rows(fp.to_dict()))
    assert table["Integrated with the CPU (APU)"] == "yes"
    assert table["XNACK"] == ("yes" if xnack else "no")
    assert table["XNACK: read from"].startswith("gcnArchName gfx942:sramecc+:xnack")
    assert table["HSA_XNACK"] == env["HSA_XNACK"]


def test_the_fingerprints_of_discrete_gpus_say_so(fakes):
    mi300x = collect("cuda", torch_module=fakes.mi300x(), run=fakes.no_tools, environ={})
    assert mi300x.data["memory_model"] == {
        "integrated": False, "integrated_by": "PyTorch's is_integrated", "xnack": False,
        "xnack_by": "gcnArchName gfx942:sramecc+:xnack-", "xnack_feature": "xnack-",
        "hsa_xnack": None}
    h100 = collect("cuda", torch_module=fakes.h100(), run=fakes.no_tools, environ={})
    assert h100.data["memory_model"] == {"integrated": False,
                                         "integrated_by": "PyTorch's is_integrated"}
    assert dict(rows(h100.to_dict()))["Integrated with the CPU (APU)"] == "no"
    cpu = collect("cpu", run=fakes.no_tools, environ={})
    assert "memory_model" not in cpu.data
