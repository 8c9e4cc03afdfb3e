"""The ecosystem libraries: which release goes with which torch, the install line, and
torchaudio, torchtext and torchrec checked through faked modules, for the failures a real
library cannot be made to show (a wrong result, a missing kernel, a build for another
torch); torchvision is checked for real in test_vision.py, torchrec and torchaudio in
test_libraries_real.py."""

from __future__ import annotations

import sys

import pytest
import torch
from fake_libraries import fbgemm_gpu, inject, torchaudio, torchrec, torchtext
from validation_helpers import figures, run_check

from accelbench.benchmarks.validation import audio, libraries, recsys, text
from accelbench.core.measurement import CaseSkipped

INDEX = "--index-url https://download.pytorch.org/whl/cu130"


@pytest.fixture(autouse=True)
def _pinned_torch(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.14.1+cu130")


@pytest.mark.parametrize(("library", "torch_version", "paired"), [
    ("torchvision", "2.14.1", "0.29.1"), ("torchvision", "2.5.1+rocm6.2", "0.20.1"),
    # Only versions that exist: no torchaudio 2.14.x, no torchtext 0.18.1, no 0.21.3.
    ("torchaudio", "2.14.1+cu130", None), ("torchaudio", "2.11.0", "2.11.0"),
    ("torchaudio", "2.9.1+rocm6.4", "2.9.1"), ("torchvision", "2.6.3", "0.21.0"),
    ("torchvision", "2.15.0", None), ("torchtext", "2.3.1", "0.18.0"),
    ("torchtext", "2.4.0", None), ("torchrec", "2.14.1", "1.9.*"),
    ("fbgemm-gpu", "2.6.0", "1.1.*"), ("torchrec", "2.4.0", None), ("numpy", "2.14.1", None),
])
def test_the_release_paired_with_a_torch(library, torch_version, paired):
    assert libraries.paired_version(library, torch_version) == paired


def test_every_pinned_release_is_one_known_to_exist():
    for library, by_minor in libraries.KNOWN_RELEASES.items():
        for minor, versions in by_minor.items():
            for patch in range(4):
                paired = libraries.paired_version(library, f"2.{minor}.{patch}")
                assert paired in versions


def test_a_torch_newer_than_every_torchaudio_is_told_none_matches_yet():
    assert libraries.no_release("torchaudio", "2.14.1+cu130") == (
        "none matches this PyTorch yet; the newest known, torchaudio 2.11.1, is for torch 2.11")
    assert libraries.no_release("torchaudio", "2.11.0") == ""


def test_the_install_line_pins_the_pair_and_the_index_of_the_build():
    assert libraries.install_line(["torchaudio"], "2.11.0+cu130") == \
        f"pip install torchaudio==2.11.0 {INDEX}"
    assert libraries.install_line(["torchvision"], "2.5.1+rocm6.2") == \
        "pip install torchvision==0.20.1 --index-url https://download.pytorch.org/whl/rocm6.2"
    assert libraries.install_line(["torchrec", "fbgemm-gpu"], "2.14.1") == \
        "pip install torchrec==1.9.* fbgemm-gpu==1.9.*"


def test_a_build_for_another_torch_says_what_does_not_fit():
    good = libraries.build_of("torchvision", "0.29.1+cu130", "2.14.1+cu130", ">=2.14.0")
    assert good.problems == ()
    bad = libraries.build_of("torchvision", "0.29.1+cpu", "2.14.1+cu130", "==2.13.0")
    assert bad.problems == ("torchvision is a cpu build, torch a cu130 build",
                            "torchvision asks for torch ==2.13.0")


@pytest.mark.parametrize(("release", "requirement", "ok"), [
    ((2, 14, 1), ">=2.14.0", True), ((2, 14, 1), "==2.14.1", True),
    ((2, 14, 1), "==2.3.0", False), ((2, 14, 1), ">=2.1,<2.14", False),
    ((2, 14, 1), "==2.14.*", True), ((2, 14, 1), "~=2.13", True), ((2, 14, 1), "!=2.14.1", False),
])
def test_torch_requirements(release, requirement, ok):
    assert libraries.satisfies(release, requirement) is ok


def test_a_library_that_does_not_load_with_this_torch_is_a_skip(monkeypatch, tmp_path):
    package = tmp_path / "torchaudio"
    package.mkdir()
    (package / "__init__.py").write_text(
        "raise OSError('libtorchaudio.so: undefined symbol: _ZN3c1017RegisterOperators')\n")
    monkeypatch.delitem(sys.modules, "torchaudio", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    m = run_check(audio.BENCHMARK, check="spectrogram")
    assert m.status == "skipped"
    assert m.reason == (
        "torchaudio does not load with torch 2.14.1+cu130 (built for another torch?): "
        "OSError: libtorchaudio.so: undefined symbol: _ZN3c1017RegisterOperators; no "
        "torchaudio release is built for torch 2.14.1 (none matches this PyTorch yet; the "
        "newest known, torchaudio 2.11.1, is for torch 2.11)")
    monkeypatch.delitem(sys.modules, "torchaudio", raising=False)
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    m = run_check(audio.BENCHMARK, check="spectrogram")
    assert m.reason is not None and m.reason.endswith(
        f"install the build for this torch: pip install torchaudio==2.11.0 {INDEX}")


# -- torchaudio ----------------------------------------------------------------------------

# The newest torch that has a torchaudio release (2.11.x); the pinned 2.14.1 has none.
TORCH_WITH_TORCHAUDIO = "2.11.0+cu130"


@pytest.mark.parametrize("check", audio.AUDIO_CHECKS)
def test_torchaudio_checks_pass_with_a_working_torchaudio(monkeypatch, check):
    monkeypatch.setattr(torch, "__version__", TORCH_WITH_TORCHAUDIO)
    inject(monkeypatch, torchaudio())
    m = run_check(audio.BENCHMARK, check=check)
    assert m.status == "ok", m.reason
    if check != "build":
        assert figures(m)["error"] <= figures(m)["tolerance"]


@pytest.mark.parametrize(("check", "what"), [("spectrogram", "spectrogram"),
                                             ("resample", "resample")])
def test_a_torchaudio_that_computes_wrong_fails(monkeypatch, check, what):
    monkeypatch.setattr(torch, "__version__", TORCH_WITH_TORCHAUDIO)
    inject(monkeypatch, torchaudio(wrong=True))
    m = run_check(audio.BENCHMARK, check=check)
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith(f"wrong result: torchaudio {what} against float64: ")


def test_a_torchaudio_for_another_torch_is_skipped_with_the_install_line(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.10.0+cu130")
    inject(monkeypatch, torchaudio(version="2.9.1+cu130"))
    m = run_check(audio.BENCHMARK, check="mel-spectrogram")
    assert m.status == "skipped"
    assert m.reason == (
        "torchaudio 2.9.1+cu130 is not built for torch 2.10.0+cu130: torchaudio 2.9.1 goes "
        "with another torch; torch 2.10.0 goes with torchaudio 2.10.0; install the build "
        f"for this torch: pip install torchaudio==2.10.0 {INDEX}")


def test_a_torch_with_no_torchaudio_release_yet_is_told_so_without_an_install_line(
        monkeypatch):
    inject(monkeypatch, torchaudio(version="2.11.1"))
    m = run_check(audio.BENCHMARK, check="mel-spectrogram")
    assert m.status == "skipped"
    assert m.reason == (
        "torchaudio 2.11.1 is not built for torch 2.14.1+cu130: no torchaudio release is "
        "built for torch 2.14.1 (none matches this PyTorch yet; the newest known, torchaudio "
        "2.11.1, is for torch 2.11)")
    assert m.details["install"] is None


def test_without_torchaudio_its_checks_are_skipped_with_the_install_line(monkeypatch):
    inject(monkeypatch, {"torchaudio": None})
    m = run_check(audio.BENCHMARK, check="build")
    assert (m.status, m.reason) == (
        "skipped", "torchaudio is not installed, and no torchaudio release is built for "
                   "torch 2.14.1: none matches this PyTorch yet; the newest known, "
                   "torchaudio 2.11.1, is for torch 2.11")
    assert m.details["install"] is None
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    m = run_check(audio.BENCHMARK, check="build")
    assert (m.status, m.reason) == (
        "skipped", "torchaudio is not installed; install the build for torch 2.11.0+cu130: "
                   f"pip install torchaudio==2.11.0 {INDEX}")
    assert m.details["install"] == f"pip install torchaudio==2.11.0 {INDEX}"


# -- torchtext -----------------------------------------------------------------------------


def test_torchtext_for_torch_2_3_passes_its_checks(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.3.1+cu121")
    inject(monkeypatch, torchtext(version="0.18.0"))
    for check in text.TEXT_CHECKS:
        m = run_check(text.BENCHMARK, check=check)
        assert m.status == "ok", m.reason
    assert figures(m)["error"] == 0 and figures(m)["vocabulary"] > 10


def test_a_torchtext_tokenizer_gone_wrong_fails(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.3.1+cu121")
    inject(monkeypatch, torchtext(wrong=True))
    m = run_check(text.BENCHMARK, check="vocab")
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith("wrong result: torchtext: basic_english split "
                               "'The quick brown fox jumps over the lazy dog.' into ")


def test_torchtext_has_no_release_for_the_pinned_torch(monkeypatch):
    inject(monkeypatch, torchtext())
    m = run_check(text.BENCHMARK, check="vocab")
    assert m.status == "skipped"
    assert m.reason is not None
    assert "no torchtext release is built for torch 2.14.1 (its last release, 0.18, was " \
           "built for torch 2.3)" in m.reason
    inject(monkeypatch, {"torchtext": None})
    m = run_check(text.BENCHMARK, check="build")
    assert m.reason == ("torchtext is not installed, and no torchtext release is built for "
                        "torch 2.14.1: its last release, 0.18, was built for torch 2.3")


# -- torchrec ------------------------------------------------------------------------------


def test_torchrec_checks_pass_with_torchrec_and_fbgemm(monkeypatch):
    inject(monkeypatch, {**torchrec(), **fbgemm_gpu()})
    for check in recsys.RECSYS_CHECKS:
        m = run_check(recsys.BENCHMARK, check=check)
        assert m.status == "ok", m.reason
    names = [c["name"] for c in m.details["compared"]]
    assert names == ["pooled f0", "grad of t0", "pooled f1", "grad of t1"]


def test_an_embedding_bag_collection_gone_wrong_fails(monkeypatch):
    inject(monkeypatch, {**torchrec(wrong=True), **fbgemm_gpu()})
    m = run_check(recsys.BENCHMARK, check="embedding-bag-collection")
    assert m.status == "failed"
    assert m.reason is not None
    assert m.reason.startswith("wrong result: torchrec EmbeddingBagCollection on a "
                               "KeyedJaggedTensor: ")
    assert "pooled f0" in m.reason


def test_torchrec_without_fbgemm_is_skipped_with_the_install_line(monkeypatch):
    inject(monkeypatch, {**torchrec(), "fbgemm_gpu": None})
    m = run_check(recsys.BENCHMARK, check="build")
    assert m.status == "skipped"
    assert m.reason == ("torchrec needs fbgemm_gpu, which is not installed; install the builds "
                        "for torch 2.14.1+cu130: pip install torchrec==1.9.* fbgemm-gpu==1.9.* "
                        f"{INDEX}")


def test_loading_a_missing_library_raises_a_skip_not_an_import_error(monkeypatch):
    inject(monkeypatch, {"torchrec": None})
    with pytest.raises(CaseSkipped, match="torchrec is not installed"):
        libraries.load("torchrec", torch, recsys.LIBRARIES)
