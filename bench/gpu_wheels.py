"""Bring, as wheels, what a GPU machine with no package index lacks for the device check.

Run where an index answers, before the GPU machine is lent: every package accelbench,
its cases and its GPU tests need (bench/gpu_packages.py reads them from pyproject.toml),
with their dependencies, is downloaded as a wheel for the GPU machine's Python and
platform into DEST, but for what that machine already has, named in a package list
(`python3 -m pip list --format=freeze` there: `name==version` lines, or bare names,
taken as present in any version) and for PyTorch and its GPU stack, which are always the
machine's own. Dependencies are followed from each wheel's own metadata (Requires-Dist,
its markers taken for the target Python), one wheel at a time, so nothing the target
has is fetched again.

    python bench/gpu_wheels.py --dest WHEELS [--have LIST] [--python-version 3.12]
        [--platform manylinux_2_28_x86_64 ...]

Then, on the GPU machine: scripts/gpu-check.sh --wheelhouse WHEELS [DIR].
Exit codes: 0 the wheels are in DEST; 2 bad arguments or an unreadable list; 3 a
package has no wheel for the target (named, with pip's reason).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from gpu_packages import load, needs

EXIT_USAGE, EXIT_NO_WHEEL = 2, 3
# The machine's own GPU stack: never brought, whatever the list says.
OWN = re.compile(r"^(torch|torchvision|torchaudio|triton|pytorch-triton(-rocm)?|"
                 r"nvidia-.*|cuda-.*|amdsmi)$")
DEFAULT_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                     "manylinux2014_x86_64", "linux_x86_64")


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_have(text: str) -> dict[str, str | None]:
    """The package list: name -> version, None where only the name is given."""
    have: dict[str, str | None] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, sep, version = line.partition("==")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name.strip()):
            raise ValueError(f"not a package name: {line!r}")
        have[canonical(name)] = version.strip() if sep else None
    return have


@dataclass(frozen=True)
class Target:
    """The GPU machine's Python and platform, as pip download and markers need them."""

    python_version: str  # "3.12"
    platforms: tuple[str, ...] = DEFAULT_PLATFORMS

    @property
    def abi(self) -> str:
        return "cp" + self.python_version.replace(".", "")

    def markers(self, extra: str = "") -> dict[str, str]:
        return {"python_version": self.python_version,
                "python_full_version": self.python_version + ".0",
                "implementation_name": "cpython", "platform_python_implementation": "CPython",
                "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
                "platform_machine": "x86_64", "extra": extra}


def satisfied(requirement: str, have: Mapping[str, str | None]) -> bool:
    """Whether the listed packages hold `requirement` (a bare name: in any version)."""
    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion

    req = Requirement(requirement)
    name = canonical(req.name)
    if name not in have:
        return False
    version = have[name]
    if version is None or not req.specifier:
        return True
    try:
        return req.specifier.contains(version, prereleases=True)
    except InvalidVersion:
        return True


def dependencies(wheel: Path, extras: Iterable[str], target: Target) -> list[str]:
    """The requirements a wheel's metadata names for the target (and the extras asked of
    it)."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = HeaderParser().parsestr(zf.read(name).decode("utf-8", errors="replace"))
    found = []
    for line in meta.get_all("Requires-Dist") or ():
        req = Requirement(line)
        if req.marker is not None and not any(
                req.marker.evaluate(target.markers(extra)) for extra in ("", *extras)):
            continue
        req.marker = None
        found.append(str(req))
    return found


Download = Callable[[str, Path, Target], "tuple[Path | None, str]"]


def pip_download(requirement: str, dest: Path, target: Target) -> tuple[Path | None, str]:
    """One wheel, without its dependencies, for the target; (wheel, "") or (None, why)."""
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
           "--only-binary=:all:", "--python-version", target.python_version,
           "--implementation", "cp", "--abi", target.abi, "--abi", "abi3", "--abi", "none",
           *(a for p in target.platforms for a in ("--platform", p)),
           "--dest", str(dest), requirement]
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        return None, (lines[-1] if lines else f"pip exited {done.returncode}")
    new = sorted(set(dest.glob("*.whl")) - before)
    if new:
        return new[0], ""
    # already there: the wheel whose name is the requirement's
    from packaging.requirements import Requirement

    stem = canonical(Requirement(requirement).name).replace("-", "_")
    return next((w for w in dest.glob("*.whl")
                 if canonical(w.name.split("-")[0]).replace("-", "_") == stem), None), ""


def bring(wanted: Iterable[str], have: Mapping[str, str | None], dest: Path, target: Target,
          download: Download = pip_download) -> tuple[list[Path], list[str], list[str]]:
    """Download what `wanted` needs beyond `have`, following dependencies: the wheels,
    the requirements left to the machine (its own or listed), and the failures."""
    from packaging.requirements import Requirement

    dest.mkdir(parents=True, exist_ok=True)
    queue = list(wanted)
    brought: dict[str, Path] = {}
    kept: list[str] = []
    failed: list[str] = []
    while queue:
        requirement = queue.pop(0)
        req = Requirement(requirement)
        name = canonical(req.name)
        if name in brought or any(canonical(Requirement(k).name) == name for k in kept):
            continue
        if OWN.match(name) or satisfied(requirement, have):
            kept.append(requirement)
            continue
        wheel, why = download(requirement, dest, target)
        if wheel is None:
            failed.append(f"{requirement}: {why}")
            continue
        brought[name] = wheel
        queue.extend(dependencies(wheel, req.extras, target))
    return list(brought.values()), kept, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, required=True, help="the wheels' folder")
    parser.add_argument("--have", type=Path,
                        help="the GPU machine's package list (pip list --format=freeze)")
    parser.add_argument("--python-version", default="3.12",
                        help="the GPU machine's Python, major.minor (default 3.12)")
    parser.add_argument("--platform", action="append", dest="platforms",
                        help="a wheel platform tag of the machine (repeatable; default the "
                             "manylinux x86-64 tags)")
    parser.add_argument("--pyproject", type=Path,
                        default=Path(__file__).resolve().parents[1] / "pyproject.toml")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python_version):
        print(f"gpu_wheels: --python-version is major.minor, not {args.python_version!r}",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        have = read_have(args.have.read_text(encoding="utf-8")) if args.have else {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"gpu_wheels: cannot read the package list {args.have}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    target = Target(args.python_version, tuple(args.platforms or DEFAULT_PLATFORMS))
    wanted = [n.line for n in needs(load(args.pyproject))]
    wheels, kept, failed = bring(wanted, have, args.dest, target)
    size = sum(w.stat().st_size for w in wheels) / 2**20
    print(f"gpu_wheels: {len(wheels)} wheels, {size:.1f} MiB, in {args.dest} for Python "
          f"{target.python_version} ({target.platforms[0]}):")
    for wheel in sorted(wheels):
        print(f"  {wheel.name}")
    print(f"gpu_wheels: left to the machine (its own, or on its list): {len(kept)}")
    for line in failed:
        print(f"gpu_wheels: no wheel: {line}", file=sys.stderr)
    return EXIT_NO_WHEEL if failed else 0


if __name__ == "__main__":
    sys.exit(main())
