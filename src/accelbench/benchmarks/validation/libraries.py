"""The ecosystem libraries: loading one, and whether it was built for this torch.

A library that is not installed, that does not load with this torch, or that was built
for another torch (another release, or another CUDA/ROCm build) skips its checks with
the reason and the exact line that installs the build for this torch; it never fails
or crashes them. The pairs are PyTorch's: torchvision 0.(m+15) and torchaudio 2.m go with
torch 2.m, torchtext 0.(m+15) went with torch 2.m up to 2.3 (its last release), and
torchrec and fbgemm-gpu 1.(m-5) go with torch 2.m. A torch with a build tag
(2.5.1+rocm6.2, 2.6.0+cu124) takes its libraries from the index of that build.

A pinned version is one that exists: torchvision, torchaudio and torchtext are pinned from
KNOWN_RELEASES, the releases on PyPI, never by arithmetic on torch's version alone (a
library's releases lag torch's, and its patch releases need not follow torch's). A torch
newer than a library's newest known release has none to install, and the skip says so,
naming the newest.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from accelbench.core.measurement import CaseSkipped

INDEX = "https://download.pytorch.org/whl/"


@dataclass(frozen=True)
class Version:
    """A version string split into its release numbers and its build tag."""

    text: str

    @property
    def release(self) -> tuple[int, ...]:
        numbers = re.match(r"\d+(\.\d+)*", self.text)
        return tuple(int(n) for n in numbers.group(0).split(".")) if numbers else ()

    @property
    def base(self) -> str:
        return self.text.split("+", 1)[0]

    @property
    def tag(self) -> str | None:
        """"cu130", "rocm6.2", "cpu"; None without one."""
        return self.text.split("+", 1)[1] if "+" in self.text else None


# The releases on PyPI of the libraries that follow torch's minor version, by the torch
# 2.m they go with (`pip index versions NAME`). Add a row when PyTorch releases one.
KNOWN_RELEASES: dict[str, dict[int, tuple[str, ...]]] = {
    "torchvision": {
        0: ("0.15.1", "0.15.2"), 1: ("0.16.0", "0.16.1", "0.16.2"),
        2: ("0.17.0", "0.17.1", "0.17.2"), 3: ("0.18.0", "0.18.1"), 4: ("0.19.0", "0.19.1"),
        5: ("0.20.0", "0.20.1"), 6: ("0.21.0",), 7: ("0.22.0", "0.22.1"), 8: ("0.23.0",),
        9: ("0.24.0", "0.24.1"), 10: ("0.25.0",), 11: ("0.26.0",), 12: ("0.27.0", "0.27.1"),
        13: ("0.28.0",), 14: ("0.29.0", "0.29.1", "0.29.2"),
    },
    "torchaudio": {
        0: ("2.0.1", "2.0.2"), 1: ("2.1.0", "2.1.1", "2.1.2"), 2: ("2.2.0", "2.2.1", "2.2.2"),
        3: ("2.3.0", "2.3.1"), 4: ("2.4.0", "2.4.1"), 5: ("2.5.0", "2.5.1"), 6: ("2.6.0",),
        7: ("2.7.0", "2.7.1"), 8: ("2.8.0",), 9: ("2.9.0", "2.9.1"), 10: ("2.10.0",),
        11: ("2.11.0", "2.11.1"),
    },
    "torchtext": {
        0: ("0.15.1", "0.15.2"), 1: ("0.16.0", "0.16.1", "0.16.2"),
        2: ("0.17.0", "0.17.1", "0.17.2"), 3: ("0.18.0",),
    },
}  # fmt: skip


def paired_version(library: str, torch_version: str) -> str | None:
    """The release of `library` that goes with this torch (None: there is none, or none
    known yet). Of a library in KNOWN_RELEASES, the one whose patch number is torch's
    where that exists, else the newest for torch's minor version."""
    release = Version(torch_version).release
    if len(release) < 2 or release[0] != 2:
        return None
    minor, patch = release[1], release[2] if len(release) > 2 else 0
    known = KNOWN_RELEASES.get(library)
    if known is not None:
        versions = known.get(minor)
        if not versions:
            return None
        same_patch = [v for v in versions if Version(v).release[2:] == (patch,)]
        return same_patch[0] if same_patch else versions[-1]
    if library in ("torchrec", "fbgemm-gpu", "fbgemm_gpu"):
        return f"1.{minor - 5}.*" if minor >= 5 else None
    return None


def no_release(library: str, torch_version: str) -> str:
    """Why no release of `library` goes with this torch, for a skip's reason ("" where
    there is nothing more to say)."""
    if library in LAST_RELEASE:
        return LAST_RELEASE[library]
    known = KNOWN_RELEASES.get(library)
    release = Version(torch_version).release
    if not known or len(release) < 2 or release[:2] <= (2, max(known)):
        return ""
    newest = max(known)
    return (f"none matches this PyTorch yet; the newest known, {library} "
            f"{known[newest][-1]}, is for torch 2.{newest}")


def install_line(libraries: Sequence[str], torch_version: str) -> str:
    """The pip line that installs the builds of `libraries` for this torch."""
    pinned = []
    for name in libraries:
        version = paired_version(name, torch_version)
        pinned.append(f"{name}=={version}" if version else name)
    tag = Version(torch_version).tag
    index = f" --index-url {INDEX}{tag}" if tag else ""
    return f"pip install {' '.join(pinned)}{index}"


# Libraries that have no release for newer torches, and what their last one was for.
LAST_RELEASE = {"torchtext": "its last release, 0.18, was built for torch 2.3"}


def load(name: str, torch: ModuleType, libraries: Sequence[str] | None = None,
         needed_by: str | None = None) -> ModuleType:
    """Import `name`; a library that is missing, or that does not load with this torch,
    skips the check with the reason and the install line of `libraries` (default: it).
    `needed_by` names the library that needs this one."""
    wanted = list(libraries or [name])
    line = install_line(wanted, torch.__version__)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        if missing.split(".")[0] != name:
            raise CaseSkipped(f"{name} needs {missing}, which is not installed: {line}",
                              details={"install": line}) from None
        if needed_by:
            raise CaseSkipped(f"{needed_by} needs {name}, which is not installed; install "
                              f"the builds for torch {torch.__version__}: {line}",
                              details={"install": line}) from None
        if all(paired_version(lib, torch.__version__) is None for lib in wanted):
            why = no_release(name, torch.__version__)
            raise CaseSkipped(f"{name} is not installed, and no {name} release is built for "
                              f"torch {Version(torch.__version__).base}"
                              + (f": {why}" if why else ""),
                              details={"install": None}) from None
        raise CaseSkipped(f"{name} is not installed; install the build for torch "
                          f"{torch.__version__}: {line}",
                          details={"install": line}) from None
    except Exception as exc:  # an extension built for another torch: undefined symbols
        loaded = (f"{name} does not load with torch {torch.__version__} (built for another "
                  f"torch?): {type(exc).__name__}: {_first_line(exc)}")
        if paired_version(name, torch.__version__) is None:
            raise CaseSkipped(f"{loaded}; {_none_for(name, torch.__version__)}",
                              details={"install": None}) from None
        raise CaseSkipped(f"{loaded}; install the build for this torch: {line}",
                          details={"install": line}) from None


@dataclass(frozen=True)
class Build:
    """What a library says it was built for, and what does not fit this torch."""

    library: str
    version: str
    torch_version: str
    paired: str | None
    requirement: str | None
    problems: tuple[str, ...] = ()
    facts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"library": self.library, "version": self.version,
                "torch": self.torch_version, "paired_with_this_torch": self.paired,
                "torch_requirement": self.requirement, "problems": list(self.problems),
                **self.facts}


def build_of(library: str, version: str, torch_version: str,
             requirement: str | None) -> Build:
    """Compare a library's version and build tag, and its torch requirement, with this
    torch: a pure function of the version strings."""
    problems = []
    paired = paired_version(library, torch_version)
    if paired is None:
        problems.append(_none_for(library, torch_version))
    elif not _matches(Version(version).release, paired):
        problems.append(f"{library} {Version(version).base} goes with another torch; torch "
                        f"{Version(torch_version).base} goes with {library} {paired}")
    ours, theirs = Version(torch_version).tag, Version(version).tag
    if ours and theirs and ours != theirs:
        problems.append(f"{library} is a {theirs} build, torch a {ours} build")
    if requirement and not satisfies(Version(torch_version).release, requirement):
        problems.append(f"{library} asks for torch {requirement}")
    return Build(library, version, torch_version, paired, requirement, tuple(problems))


def _none_for(library: str, torch_version: str) -> str:
    why = no_release(library, torch_version)
    return (f"no {library} release is built for torch {Version(torch_version).base}"
            + (f" ({why})" if why else ""))


def installed_build(library: str, module: ModuleType, torch: ModuleType) -> Build:
    """The build of an imported library, from its version and its package metadata."""
    version = str(getattr(module, "__version__", "") or _dist_version(library) or "unknown")
    return build_of(library, version, str(torch.__version__), torch_requirement(library))


def require_built_for(build: Build) -> None:
    """Skip, with the reason and the install line, when the build does not fit."""
    if build.problems and build.paired is None:  # nothing to install: the reason says so
        raise CaseSkipped(f"{build.library} {build.version} is not built for torch "
                          f"{build.torch_version}: {'; '.join(build.problems)}",
                          details={**build.to_dict(), "install": None})
    if build.problems:
        line = install_line([build.library], build.torch_version)
        raise CaseSkipped(f"{build.library} {build.version} is not built for torch "
                          f"{build.torch_version}: {'; '.join(build.problems)}; install the "
                          f"build for this torch: {line}",
                          details={**build.to_dict(), "install": line})


def torch_requirement(distribution: str) -> str | None:
    """The torch requirement in a distribution's metadata ("==2.3.0", ">=2.14.0")."""
    try:
        requires = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for line in requires:
        match = re.match(r"torch\s*\(?\s*([<>=!~][^;)]*)\)?\s*(;.*)?$", line.strip())
        if match and not (match.group(2) or "").strip():
            return match.group(1).replace(" ", "")
    return None


def satisfies(release: tuple[int, ...], requirement: str) -> bool:
    """Whether a release meets a requirement of plain clauses (==, >=, <=, >, <, !=, ~=,
    a trailing .* for ==); an unreadable clause is taken as met."""
    for clause in requirement.split(","):
        match = re.match(r"(==|>=|<=|!=|~=|>|<)\s*([\d.]+)(\.\*)?$", clause.strip())
        if not match:
            continue
        op, wanted, star = match.group(1), tuple(int(n) for n in match.group(2).split(".")
                                                  if n), match.group(3)
        have = release[:len(wanted)] if star or op == "~=" else release
        ok = {"==": have == wanted if star else _padded(have, wanted) == 0,
              "!=": _padded(have, wanted) != 0, ">=": _padded(release, wanted) >= 0,
              "<=": _padded(release, wanted) <= 0, ">": _padded(release, wanted) > 0,
              "<": _padded(release, wanted) < 0,
              "~=": _padded(release, wanted) >= 0
              and release[:len(wanted) - 1] == wanted[:-1]}[op]
        if not ok:
            return False
    return True


def _padded(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    width = max(len(a), len(b))
    x, y = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (x > y) - (x < y)


def _matches(release: tuple[int, ...], paired: str) -> bool:
    """A release against "0.29.1" (major and minor must match) or "1.9.*"."""
    wanted = tuple(int(n) for n in paired.replace(".*", "").split(".")[:2])
    return release[:2] == wanted


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def device_unsupported(exc: BaseException) -> bool:
    """The library's operator has no kernel for this device (a build without CUDA/HIP)."""
    return isinstance(exc, NotImplementedError) or "Could not run" in str(exc)
