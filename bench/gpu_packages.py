"""Which of accelbench's packages this Python has: what the device check can run with.

A GPU machine may reach no package index: the device check then runs accelbench from its
source tree with the PyTorch and packages already installed there (scripts/gpu-check.sh
--offline). This reads the package's own metadata (pyproject.toml) and says

- which required packages are missing or too old: accelbench cannot run without them, so
  they must be brought as wheels (--wheelhouse DIR);
- which optional ones are missing, and what is left out without each: the cases that
  need one are skipped with their reason (an engine, the serving scenarios), a vendor's
  telemetry is not read, and nothing else is left out;
- which test packages are missing: the GPU tests need pytest, pytest-timeout and
  hypothesis (the test configuration loads its settings).

With --site (the folder the wheels brought with --wheelhouse went into), it first says
which packages were taken from those wheels; every other one is this Python's own.

    python bench/gpu_packages.py [--pyproject FILE] [--site DIR]

Exit codes: 0 every required and test package is present; 3 one is missing (listed, with
the `pip download` line that fetches it as a wheel on a machine with an index).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

EXIT_MISSING = 3
# Extras that are development tools, not something a case needs.
NOT_FOR_CASES = frozenset({"dev", "docs", "all"})
TEST_PACKAGES = ("pytest", "pytest-timeout", "hypothesis")
# What is left out without an extra's packages.
LEFT_OUT = {
    "telemetry": "no power, energy or clock readings from that vendor's GPUs",
    "onnx": "the ONNX Runtime cases are skipped",
    "serving": "the serving scenarios and the LLM serving cases (serve-llm) are skipped",
    "quant": "int8 on GPUs is skipped",
    "diffusion": "the diffusion UNet case is skipped",
    "postgres": "no PostgreSQL store",
    "metrics": "no OpenMetrics export",
}


@dataclass(frozen=True)
class Need:
    """One requirement line of the metadata: the distribution and its version bound."""

    line: str  # "numpy>=1.24"
    name: str  # "numpy"
    extra: str | None  # None: required


@dataclass(frozen=True)
class Found:
    need: Need
    version: str | None  # None: not installed
    fits: bool  # installed and within its bound


def parse(line: str, extra: str | None = None) -> Need | None:
    """The requirement `line` as a Need, or None when its marker rules it out for this
    Python (`tomli>=2; python_version < '3.11'` on 3.11 and newer)."""
    spec, _, marker = line.partition(";")
    if marker.strip() and not _marker_holds(marker.strip()):
        return None
    name = re.split(r"[<>=!~\[ ]", spec.strip(), maxsplit=1)[0]
    return Need(spec.strip(), name, extra)


def _marker_holds(marker: str) -> bool:
    try:
        from packaging.markers import Marker
    except ImportError:  # without packaging, a marker is taken to hold
        return True
    return bool(Marker(marker).evaluate())


def _fits(line: str, version: str) -> bool:
    try:
        from packaging.requirements import Requirement
        from packaging.version import InvalidVersion
    except ImportError:  # without packaging, installed is taken as enough
        return True
    try:
        return Requirement(line).specifier.contains(version, prereleases=True)
    except InvalidVersion:
        return True


def needs(pyproject: Mapping[str, Any]) -> list[Need]:
    """Every requirement of the package and of its extras that cases use."""
    project = pyproject["project"]
    found = [n for line in project.get("dependencies", ()) if (n := parse(line))]
    for extra, lines in project.get("optional-dependencies", {}).items():
        wanted = TEST_PACKAGES if extra == "dev" else ()
        if extra in NOT_FOR_CASES and not wanted:
            continue
        for line in lines:
            need = parse(line, "test" if extra == "dev" else extra)
            if need and (extra != "dev" or need.name in wanted):
                found.append(need)
    return found


def survey(wanted: Iterable[Need],
           version_of: Callable[[str], str | None] | None = None) -> list[Found]:
    """Each need with the version installed here (version_of is the seam for tests)."""
    look = version_of or _installed
    return [Found(n, v, v is not None and _fits(n.line, v))
            for n in wanted for v in (look(n.name),)]


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def report(found: list[Found]) -> tuple[list[str], bool]:
    """Lines saying what is missing, and whether the check can run (nothing required or
    for the tests is missing)."""
    lines: list[str] = []
    blocking = [f for f in found if not f.fits and f.need.extra in (None, "test")]
    optional: dict[str, list[Found]] = {}
    for f in found:
        if not f.fits and f.need.extra not in (None, "test"):
            optional.setdefault(f.need.name, []).append(f)
    present = sum(f.fits for f in found)
    lines.append(f"packages: {present} of {len(found)} present")
    for f in blocking:
        kind = "for the tests" if f.need.extra == "test" else "required"
        lines.append(f"missing ({kind}): {_why(f)}")
    for each in optional.values():
        extras = sorted({f.need.extra or "" for f in each})
        left = "; ".join(LEFT_OUT.get(e, f"what needs the extra {e} is skipped")
                         for e in extras)
        lines.append(f"missing (optional, extra {', '.join(extras)}: {left}): "
                     f"{_why(each[0])}")
    if blocking:
        names = " ".join(f"'{f.need.line}'" for f in blocking)
        lines.append("bring them as wheels, on a machine with a package index: pip download "
                     f"--only-binary=:all: --dest WHEELS {names}, then run gpu-check.sh "
                     "--wheelhouse WHEELS")
    return lines, not blocking


def _why(f: Found) -> str:
    if f.version is None:
        return f.need.line
    return f"{f.need.line} (installed: {f.version})"


def from_site(site: Path) -> list[str]:
    """A line naming each package installed in `site` (the wheels brought along), with
    its version."""
    dists = sorted((d.metadata["Name"] or "?", d.version)
                   for d in metadata.distributions(path=[str(site)]))
    if not dists:
        return [f"from the wheels ({site.name}): none"]
    shown = ", ".join(f"{name} {version}" for name, version in dists)
    return [f"from the wheels ({site.name}, {len(dists)}): {shown}; every other package is "
            "this Python's own"]


def load(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with path.open("rb") as fh:
        return dict(tomllib.load(fh))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pyproject", type=Path,
                        default=Path(__file__).resolve().parents[1] / "pyproject.toml")
    parser.add_argument("--site", type=Path,
                        help="the folder the brought wheels were installed into")
    args = parser.parse_args(argv)
    lines, ok = report(survey(needs(load(args.pyproject))))
    if args.site is not None:
        lines = from_site(args.site) + lines
    print("\n".join(lines))
    return 0 if ok else EXIT_MISSING


if __name__ == "__main__":
    sys.exit(main())
