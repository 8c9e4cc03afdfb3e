"""The shape of the package, read from its imports (every import, also those inside a
function): the folders form layers that import only downward, and no modules import
each other in a circle."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "accelbench"

# Lowest first: a folder may import only folders before it.
# The families (benchmarks/) sit above analysis: a family's view reads its results with the
# cross-family analysis (values, labels, checks) and makes the sections report/ renders.
# The application (app: a request in, a stored run out) composes the runner, the profiler,
# the store and the report, and the command line adapts options to it.
LAYERS = ("version", "errors", "suites", "core", "env", "store", "runner", "analysis", "benchmarks",
          "profile", "report", "slurm", "app", "cli", "__main__")


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(("accelbench", *parts))] = path
    return found


def _imports() -> dict[str, set[str]]:
    """Each module and the accelbench modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _folder(module: str) -> str:
    """The layer of a module: its folder; a family's command (`benchmarks/FAMILY/command`)
    is a command like those of cli/, above everything it runs, which only the command
    line imports (`Family.commands` names it)."""
    parts = module.split(".")
    if parts[1:2] == ["benchmarks"] and parts[-1] == "command":
        return "cli"
    return parts[1] if len(parts) > 1 else module


def test_every_folder_is_in_a_layer() -> None:
    folders = {_folder(m) for m in _modules() if m != "accelbench"}
    assert folders <= set(LAYERS), folders - set(LAYERS)


def test_folders_import_only_the_layers_below_them() -> None:
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in _imports().items() if module != "accelbench"
        for target in targets if target != "accelbench"
        and LAYERS.index(_folder(target)) > LAYERS.index(_folder(module))
    )
    assert not upward, upward


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = _imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in _modules():
        if module not in index:
            visit(module)
    assert not circles, circles


def test_report_knows_no_family_by_name() -> None:
    """A family is one package under benchmarks/: report/ renders the sections families
    make and has no module of theirs, nor a test of a family's name."""
    benchmarks = SRC / "benchmarks"
    families = {p.name for p in [*benchmarks.glob("*"), *benchmarks.glob("*/*")]
                if (p / "__init__.py").exists()}
    report = {p.stem for p in (SRC / "report").glob("*.py")}
    assert not report & families, report & families
    for path in (SRC / "report").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "family ==" not in text and "family !=" not in text, path.name
        # The registry list is all it may read of benchmarks/.
        assert not re.search(r"accelbench\.benchmarks\.(?!REGISTRY\b)", text), path.name


def test_no_command_imports_another_command_or_a_family() -> None:
    """A command is an adapter (options -> request -> accelbench.app -> print): what
    commands share lives in cli/'s shared modules, and a family's parts are reached
    through the registry, never by name. Only the entry point (cli/main.py) lists them."""
    crossing = sorted(
        f"{module} imports {target}"
        for module, targets in _imports().items()
        if module.startswith("accelbench.cli.") and module != "accelbench.cli.main"
        for target in targets
        if (target.startswith("accelbench.cli.") and target.endswith("_cmd"))
        or target.startswith("accelbench.benchmarks."))
    assert not crossing, crossing


def test_nothing_is_pickled_between_the_processes_of_a_run() -> None:
    """Requests and planned cases cross process boundaries as JSON."""
    run_path = [*sorted((SRC / "runner").glob("*.py")), SRC / "app.py",
                *sorted((SRC / "profile").glob("*.py"))]
    pickling = [path.name for path in run_path
                if re.search(r"^\s*(import pickle|from pickle)", path.read_text(), re.M)]
    assert not pickling, pickling
