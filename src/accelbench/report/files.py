"""Report files: where a run's report goes, and writing it (HTML, or Markdown for a
file ending in .md), for `accelbench run`, `report` and the application (runner.app)."""

from __future__ import annotations

import re
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accelbench.errors import UserError


def check_writable(path: Path) -> None:
    """Refuse, before anything is measured, a report file that could not be written
    after: a folder in its place, or no folder it can be written in (the missing folders
    of its path are created then, so the nearest existing one must take a file).

    Permissions are tried, not read from mode bits: root passes every access() check,
    and a read-only or virtual file system (/proc) refuses what the bits allow. An
    existing path that is not a regular file (a FIFO, a socket, a device) is refused
    before it is opened: opening a FIFO with no reader blocks forever."""
    try:
        if path.is_dir():
            raise UserError(f"--report {path}: is a folder, not a file")
        if path.exists():
            if not stat.S_ISREG(path.stat().st_mode):
                raise UserError(f"--report {path}: is not a regular file")
            with path.open("ab"):  # appends nothing: the file is left as it is
                return
        folder = path.absolute().parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            raise UserError(f"--report {path}: {folder} is not a folder")
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UserError(f"--report {path}: cannot be written: {exc.strerror or exc}") from None


def format_for(output: str | None) -> str:
    if output == "-":
        return "md"
    if output and Path(output).suffix.lower() in (".md", ".markdown"):
        return "md"
    return "html"


def default_report_path(files_dir: Path, run_id: str, fmt: str = "html") -> Path:
    """reports/RUN.FMT in the store's folder (`StoreLocation.files_dir`)."""
    return report_path(Path(files_dir) / "reports", run_id, fmt)


def report_path(folder: Path, name: str, fmt: str) -> Path:
    """The file `name`.`fmt` in `folder`, where `name` may come from a store (a run id a
    merged store brought): only safe characters are kept, and the resolved path must be
    a file of `folder` itself, so that no stored value makes a report land elsewhere."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")[:128] or "report"
    path = folder / f"{safe}.{fmt}"
    if path.resolve().parent != folder.resolve():
        raise UserError(f"the report file {path} would not be in {folder}")
    return path


def render_groups(
    groups: Sequence[Any],
    fmt: str,
    *,
    min_effect: float = 0.05,
    profiles: Mapping[str, Sequence[Any]] | None = None,
) -> str:
    """The report of run groups: every run of them in full (with its profiles, by run id);
    with several groups, the first compared with each other one; with several stacks, the
    generations; A/Bs both of whose runs are among them, with their verdicts."""
    from accelbench.analysis.ab import pairs_in
    from accelbench.analysis.compare import compare
    from accelbench.analysis.generations import generations

    runs = list({r.record.id: r for g in groups for r in g.runs}.values())
    comparisons = [compare(groups[0], g, min_effect=min_effect) for g in groups[1:]]
    gens = None
    if len({r.record.generation_key for r in runs}) > 1:
        gens = generations(runs)
        gens = gens if gens.rows else None
    profiles = profiles or {}
    abs_found = pairs_in(runs)
    if fmt == "md":
        return _markdown(runs, comparisons, gens, profiles, abs_found)
    from accelbench.report.html import html_report

    return html_report(runs, comparisons=comparisons, generations=gens, profiles=profiles,
                       ab_results=abs_found)


def _markdown(runs: list[Any], comparisons: list[Any], gens: Any,
              profiles: Mapping[str, Sequence[Any]], abs_found: Sequence[Any] = ()) -> str:
    from accelbench.report.ab_tables import ab_tables
    from accelbench.report.analysis_tables import comparison_tables, generations_table
    from accelbench.report.markdown import run_report
    from accelbench.report.tables import render_markdown

    parts = [render_markdown(ab_tables(result)) for result in abs_found]
    for c in comparisons:
        parts.append(render_markdown(comparison_tables(c)))
    if gens is not None:
        parts.append(render_markdown([generations_table(gens)]))
    parts += [run_report(r.record, r.fingerprint, r.measurements,
                         profiles.get(r.record.id, ())) for r in runs]
    return "\n".join(parts)


def render(stored: Any, fmt: str = "html") -> str:
    """The report of one stored run."""
    if fmt == "md":
        from accelbench.report.markdown import run_report

        return run_report(stored.record, stored.fingerprint, stored.measurements)
    from accelbench.report.html import html_report

    return html_report([stored])


def write_report(stored: Any, path: Path) -> Path:
    """Write the report of one run: Markdown when the file name ends in .md, else HTML."""
    write_text(path, render(stored, format_for(str(path))))
    return path


def render_ab(result: Any, fmt: str = "html") -> str:
    """The report of an A/B (analysis.ab.AbResult): its table, then both runs in full."""
    runs = [result.a, result.b]
    if fmt == "md":
        from accelbench.report.ab_tables import ab_tables
        from accelbench.report.markdown import run_report
        from accelbench.report.tables import render_markdown

        return "\n".join([render_markdown(ab_tables(result)),
                          *(run_report(r.record, r.fingerprint, r.measurements)
                            for r in runs)])
    from accelbench.report.html import html_report

    return html_report(runs, ab_results=[result], title=f"accelbench A/B {result.id}")


def write_ab_report(result: Any, path: Path) -> Path:
    """Write the report of an A/B: Markdown when the file name ends in .md, else HTML."""
    write_text(path, render_ab(result, format_for(str(path))))
    return path


def write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Text not passed through `printable` may still hold the undecodable bytes of a
        # path (a lone surrogate): written as an escape rather than failing the report.
        path.write_text(text, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        raise UserError(f"cannot write the report to {path}: {exc.strerror}") from None
