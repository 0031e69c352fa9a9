"""The pages `extract report` writes: a run's report.html with its charts, and the index of every run."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from pipeline.output.links import LinkedWriteError
from pipeline.storage import S3Settings, storage_for
from pipeline.tools.report.build import Report, build_report
from pipeline.tools.report.charts import CHART_FILES, chart_trend, write_charts
from pipeline.tools.report.context import eval_scores
from pipeline.tools.report.documents import write_documents
from pipeline.tools.report.history import RunLine, run_line
from pipeline.tools.report.render import data_uri, environment, render_html
from pipeline.tools.report.runs import ReportError, all_rows, list_runs, load_run, plain_run_id


def default_out(output_uri: str) -> Path:
    """Where the pages go without --out: ./out/report, unless that lies inside a local output (an output named
    ./out), then a folder beside the output, OUTPUT-report. Never inside the output it reports on."""
    default = Path(os.path.abspath(os.path.join("out", "report")))
    if "://" in output_uri:
        return default
    output = Path(os.path.abspath(output_uri))
    if default == output or output in default.parents:
        return output.parent / f"{output.name}-report"
    return default


def own_folder(folder: Path, names: list[str]) -> None:
    """Refuse (exit 6, one line) a report folder that is, or whose files or run folders are, symbolic links: the
    pages are written into the folder itself, never through a link to elsewhere."""
    for path in (folder, *(folder / name for name in names)):
        if path.is_symlink():
            raise LinkedWriteError(f"{path} is a symbolic link: refused (extract report writes its pages into a "
                                   "folder of its own, never through a link); remove it or choose another --out")


def write_report(output_uri: str, out_dir: Path | None = None, run_id: str | None = None,
                 settings: S3Settings | None = None, top: int = 5, index_href: str | None = None
                 ) -> tuple[Report, Path]:
    """Load the run, write the charts and report.html into `out_dir` (default `default_out`/<run_id>)."""
    data = load_run(output_uri, run_id, settings)
    plain_run_id(data.record, data.output_uri)
    scores = eval_scores(storage_for(data.output_uri, settings), data.output_uri, data.run_id)
    report = build_report(data, top=top, scores=scores)
    out_dir = out_dir or default_out(output_uri) / data.run_id
    own_folder(out_dir, [*CHART_FILES, "report.html"])
    charts = write_charts(report, out_dir)
    doc_links = write_documents(report, all_rows(data), out_dir, environment())
    (out_dir / "report.html").write_text(render_html(report, charts, index_href, doc_links))
    return report, out_dir


def write_index(output_uri: str, out_dir: Path | None = None, settings: S3Settings | None = None, top: int = 5
                ) -> tuple[Path, list[RunLine], Report | None]:
    """OUT/index.html: every run in the output, newest first, each linking to its page OUT/<run_id>/report.html
    (written here for every run that processed documents). Returns the index, its lines, and the report of
    the newest run that did work (for the terminal summary)."""
    output_uri = output_uri.rstrip("/")
    storage = storage_for(output_uri, settings)
    records = list_runs(storage, output_uri)
    if not records:
        raise ReportError(f"no run records under {output_uri}/_runs: is {output_uri} a job's output folder?")
    for record in records:
        plain_run_id(record, output_uri)
    out_dir = out_dir or default_out(output_uri)
    own_folder(out_dir, ["index.html", "trend.png", *(str(r.get("run_id")) for r in records)])
    out_dir.mkdir(parents=True, exist_ok=True)
    lines, newest = [], None
    for record in records:
        run_id = str(record.get("run_id"))
        line = run_line(record, eval_scores(storage, output_uri, run_id))
        if line.documents:
            try:
                report, _ = write_report(output_uri, out_dir / run_id, run_id, settings, top, "../index.html")
                line.href = f"{run_id}/report.html"
                newest = report
            except ReportError as exc:
                line.note = str(exc)
        lines.append(line)
    trend = out_dir / "trend.png"
    chart_trend(lines, trend)
    page = environment().get_template("index.html.j2").render(
        output_uri=output_uri, runs=list(reversed(lines)), trend=data_uri(trend),
        generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S}")
    (out_dir / "index.html").write_text(page)
    return out_dir / "index.html", lines, newest
