"""`accelbench report [RUN...]`: write an HTML (or Markdown) report of stored runs."""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accelbench.cli.options import add_store, open_store, path_arg, percentage

NAME = "report"
HELP = "write an HTML (or Markdown) report of stored runs (default: the latest)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="run ids, prefixes, 'latest' (default), stack globs or FIELD=GLOB "
                        "filters; with several, the first is compared with each other one")
    parser.add_argument("--format", choices=("html", "md"),
                        help="html or md (default: from the file name; md on standard output, "
                        "html otherwise)")
    parser.add_argument("-o", "--output", type=path_arg, metavar="FILE",
                        help="where to write it ('-' for standard output; default: "
                        "reports/RUN.html beside the store)")
    parser.add_argument("--min-effect", type=percentage, default=5.0, metavar="PCT",
                        help="smallest change a comparison reports (default 5)")
    add_store(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    from accelbench.analysis.select import select_group
    from accelbench.cli.compare_cmd import check_percent

    check_percent(args.min_effect, "--min-effect")
    refs = args.runs or ["latest"]
    fmt = args.format or _format_for(args.output)
    with open_store(args, create=False) as store:
        groups = [select_group(store, ref) for ref in refs]
        profiles = {r.record.id: store.profiles_for_run(r.record.id)
                    for g in groups for r in g.runs}
        text = render_groups(groups, fmt, min_effect=args.min_effect / 100, profiles=profiles)
        if args.output == "-":
            sys.stdout.write(text)
            return 0
        if args.output:
            path = Path(args.output)
        elif len(groups) == 1 and len(groups[0].runs) == 1:
            path = default_report_path(store.location.files_dir, groups[0].runs[0].record.id, fmt)
        else:
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            path = report_path(store.location.files_dir / "reports", f"report-{stamp}", fmt)
    _write(path, text)
    print(f"Report: {path}")
    return 0


def _format_for(output: str | None) -> str:
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
    from accelbench.errors import UserError

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
    generations."""
    from accelbench.analysis.compare import compare
    from accelbench.analysis.generations import generations

    runs = list({r.record.id: r for g in groups for r in g.runs}.values())
    comparisons = [compare(groups[0], g, min_effect=min_effect) for g in groups[1:]]
    gens = None
    if len({r.record.generation_key for r in runs}) > 1:
        gens = generations(runs)
        gens = gens if gens.rows else None
    profiles = profiles or {}
    if fmt == "md":
        return _markdown(runs, comparisons, gens, profiles)
    from accelbench.report.html import html_report

    return html_report(runs, comparisons=comparisons, generations=gens, profiles=profiles)


def _markdown(runs: list[Any], comparisons: list[Any], gens: Any,
              profiles: Mapping[str, Sequence[Any]]) -> str:
    from accelbench.report.analysis_tables import comparison_tables, generations_table
    from accelbench.report.markdown import run_report
    from accelbench.report.tables import render_markdown

    parts = []
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
    _write(path, render(stored, _format_for(str(path))))
    return path


def _write(path: Path, text: str) -> None:
    from accelbench.errors import UserError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the report to {path}: {exc.strerror}") from None
