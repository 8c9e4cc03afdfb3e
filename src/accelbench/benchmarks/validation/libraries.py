"""The ecosystem libraries: loading one, and whether it was built for this torch.

A library that is not installed, that does not load with this torch, or that was built
for another torch (another release, or another CUDA/ROCm build) skips its checks with
the reason and the exact line that installs the build for this torch; it never fails
or crashes them. The pairs are PyTorch's: torchvision 0.(m+15).p and torchaudio 2.m.p go
with torch 2.m.p, torchtext 0.(m+15) went with torch 2.m up to 2.3 (its last release),
and torchrec and fbgemm-gpu 1.(m-5) go with torch 2.m. A torch with a build tag
(2.5.1+rocm6.2, 2.6.0+cu124) takes its libraries from the index of that build.
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


def paired_version(library: str, torch_version: str) -> str | None:
    """The release of `library` that goes with this torch (None: there is none)."""
    release = Version(torch_version).release
    if len(release) < 2 or release[0] != 2:
        return None
    minor, patch = release[1], release[2] if len(release) > 2 else 0
    if library == "torchvision":
        return f"0.{minor + 15}.{patch}"
    if library == "torchaudio":
        return f"2.{minor}.{patch}"
    if library == "torchtext":
        return f"0.{minor + 15}.{patch}" if minor <= 3 else None
    if library in ("torchrec", "fbgemm-gpu", "fbgemm_gpu"):
        return f"1.{minor - 5}.*" if minor >= 5 else None
    return None


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
            why = LAST_RELEASE.get(name, "")
            raise CaseSkipped(f"{name} is not installed, and no {name} release is built for "
                              f"torch {Version(torch.__version__).base}"
                              + (f": {why}" if why else ""),
                              details={"install": None}) from None
        raise CaseSkipped(f"{name} is not installed; install the build for torch "
                          f"{torch.__version__}: {line}",
                          details={"install": line}) from None
    except Exception as exc:  # an extension built for another torch: undefined symbols
        raise CaseSkipped(f"{name} does not load with torch {torch.__version__} (built for "
                          f"another torch?): {type(exc).__name__}: {_first_line(exc)}; "
                          f"install the build for this torch: {line}",
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
        why = LAST_RELEASE.get(library, "")
        problems.append(f"no {library} release is built for torch {Version(torch_version).base}"
                        + (f" ({why})" if why else ""))
    elif not _matches(Version(version).release, paired):
        problems.append(f"{library} {Version(version).base} goes with another torch; torch "
                        f"{Version(torch_version).base} goes with {library} {paired}")
    ours, theirs = Version(torch_version).tag, Version(version).tag
    if ours and theirs and ours != theirs:
        problems.append(f"{library} is a {theirs} build, torch a {ours} build")
    if requirement and not satisfies(Version(torch_version).release, requirement):
        problems.append(f"{library} asks for torch {requirement}")
    return Build(library, version, torch_version, paired, requirement, tuple(problems))


def installed_build(library: str, module: ModuleType, torch: ModuleType) -> Build:
    """The build of an imported library, from its version and its package metadata."""
    version = str(getattr(module, "__version__", "") or _dist_version(library) or "unknown")
    return build_of(library, version, str(torch.__version__), torch_requirement(library))


def require_built_for(build: Build) -> None:
    """Skip, with the reason and the install line, when the build does not fit."""
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
