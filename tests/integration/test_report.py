"""`extract report`: pure logic (error grouping, time binning, token budget, run choice), reading a
hand-written output (old-format rows, a rewritten partition), and the whole path on a run of the sample job, with
the HTML rendered by headless Chromium and the screenshot checked for charts. The run is on the simulated engine,
set to give the outcomes the bundled model gave these documents (the report, not the model, is the subject)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.tools.report import (
    CHART_FILES,
    COLORS,
    ROW,
    load_run,
    write_index,
)
from tests.conftest import SAMPLE, gold_answers, joining, run_cli, run_main, write_config, write_docs
from tests.unit.test_report import check_r1, chromium, write_output

CHROMIUM = Path("/usr/bin/chromium")
# The browser is not part of set-up (`make run` needs no root): `make browser` installs it, and `make test` tries
# to, going on without it.
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no {CHROMIUM}: `make browser` installs Debian's "
                                    "chromium (root or sudo) for the report's rendering check")


# ---------------------------------------------------------------- error grouping


# ---------------------------------------------------------------- time binning


# ---------------------------------------------------------------- token budget and run choice


# ---------------------------------------------------------------- reading an output (real Parquet, no engine)


@pytest.mark.slow
def test_index_lists_every_run_newest_first_and_links_each_run_page(tmp_path):
    root = write_output(tmp_path / "output")
    (root / "_eval" / "r1").mkdir(parents=True)
    (root / "_eval" / "r1" / "eval.json").write_text(json.dumps({"overall": {"f1": 0.5, "precision": 0.5,
                                                                             "recall": 0.5}, "fields": {},
                                                                 "documents": {"scored": 3, "gold": 3}}))
    index, lines, newest = write_index(str(root), tmp_path / "pages")
    assert [line.run_id for line in lines] == ["r1", "r2"] and newest.data.run_id == "r2"
    assert lines[0].f1 == "0.500" and lines[1].f1 == "—"
    page = index.read_text()
    assert page.index(">r2</a>") < page.index(">r1</a>")  # newest first
    for run_id in ("r1", "r2"):
        assert f'href="{run_id}/report.html"' in page
        run_page = (index.parent / run_id / "report.html").read_text()
        assert 'href="../index.html"' in run_page
    r1 = (index.parent / "r1" / "report.html").read_text()
    assert "&lt;b&gt;bold&lt;/b&gt;" in r1 and "<b>bold</b>" not in r1  # raw output escaped
    assert "F1 (extract eval)" in r1 and "0.500" in r1


def test_load_run_reads_an_s3_output(tmp_path, s3_endpoint):
    from pipeline.storage import S3Settings
    from tests.conftest import s3_client

    root = write_output(tmp_path)
    client = s3_client(s3_endpoint)
    client.create_bucket(Bucket="nightly")
    for path in root.rglob("*"):
        if path.is_file():
            client.upload_file(str(path), "nightly", f"jobs/out/{path.relative_to(root)}")
    check_r1(load_run("s3://nightly/jobs/out/", "r1", S3Settings(endpoint_url=s3_endpoint, region="us-east-1")))


# ---------------------------------------------------------------- the whole path, simulated engine and browser

# Sample invoices that give, as the bundled model did: validator refusals (0000-0002: the simulated engine's
# schema-made records, which the sample's validators refuse), rows (0006, 0007: their gold records), and a run-away
# output (0031: the simulated `mix` share of truncated outputs takes the documents whose digest draws under 0.05,
# of these only 0031); plus the empty scan and the too-long contract, which the pipeline refuses before any engine.
DOCS = ["inv-0000", "inv-0001", "inv-0002", "inv-0006", "inv-0007", "inv-0031", "inv-empty-scan",
        "inv-master-agreement"]
ANSWERED = ("inv-0006", "inv-0007")
MAX_TOKENS = 192  # near the sample's output lengths, so the max_tokens line has work to do


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory, cli_env_module):
    folder = tmp_path_factory.mktemp("report")
    table = pq.read_table(SAMPLE)
    picked = [r for r in table.to_pylist() if r["doc_id"] in DOCS]
    write_docs(folder / "docs.parquet", [r["doc_id"] for r in picked], [r["text"] for r in picked])
    simulated = {"outputs": str(gold_answers(folder / "answers.jsonl", ANSWERED)), "mix": {"truncated": 0.05}}
    config = write_config(folder, simulated, **{
        "input.uri": str(folder / "docs.parquet"), "model.max_tokens": MAX_TOKENS, "workers.batch_size": 2,
        "input.long_documents": "dead_letter",  # the master agreement is the report's input_too_long example
        "examples": False,
    })
    done = run_cli(["run", str(config)], cli_env_module)
    assert done.returncode == 0, done.stderr[-3000:]
    output = folder / "out"
    (record_path,) = (output / "_runs").glob("*.json")
    record = json.loads(record_path.read_text())
    assert record["rows"] == len(ANSWERED), record  # the outcomes the documents were picked for
    assert record["dead_letters_by_reason"] == {"semantic_invalid": 3, "truncated": 1, "empty_input": 1,
                                                "input_too_long": 1}, record
    # A nightly rerun of the committed partition: a no-op whose run record the report must not pick.
    again = run_cli(["run", str(config)], cli_env_module)
    assert again.returncode == 0, again.stderr[-3000:]
    report_dir = folder / "report"
    reported = run_main(["report", output, "--out", report_dir], env=WIDE)  # reading an output: in this process
    assert reported.returncode == 0, reported.stderr[-3000:]
    return {"folder": folder, "output": output, "record": record, "dir": report_dir / record["run_id"],
            "index": report_dir / "index.html", "stdout": reported.stdout}


WIDE = {"COLUMNS": "160"}


@pytest.fixture(scope="module")
def cli_env_module(ray_head):
    """`cli_env` for the module's fixture: runs join the session's Ray cluster."""
    return {**joining(ray_head), **WIDE}


@pytest.mark.engine
def _shown(record: dict) -> list[str]:
    """The charts the run page shows: every chart file, less the throughput chart under 10 s of generation (the
    simulated engine's run here generates in a few seconds)."""
    from pipeline.tools.report.extras import shown_charts

    return list(shown_charts({name: None for name in CHART_FILES}, record))


def test_report_writes_summary_html_and_charts(sample_run):
    record, stdout = sample_run["record"], " ".join(sample_run["stdout"].split())  # rich wraps long lines
    assert record["input_rows"] == len(DOCS)
    assert f"run {record['run_id']}" in stdout  # the no-op rerun was skipped...
    assert "(2 runs, 1 with a page; newest first)" in stdout  # ...and the index says so
    assert "no documents processed" in sample_run["index"].read_text()
    assert "empty_input" in stdout and "input_too_long" in stdout
    assert f"max_tokens {MAX_TOKENS}" in stdout
    for name in CHART_FILES:
        path = sample_run["dir"] / name
        assert path.stat().st_size > 5000, f"{name} is missing or empty"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (sample_run["dir"] / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == len(_shown(sample_run["record"]))
    # Self-contained: no attribute or CSS rule points anywhere but at inline data, back at the index, or at the
    # run's own document pages (docs/, beside it).
    external = re.findall(
        r"""(?:src|href)\s*=\s*["'](?!data:|\.\./index\.html|docs/[\w.-]+\.html["'])[^"']*["']|url\((?!\s*["']?data:)""",
        page)
    assert external == []
    assert "inv-empty-scan" in page and "inv-master-agreement" in page  # example ids in the error table
    # The per-field view names the field the validator refused on the sample (total: not in the document).
    assert "Errors per field" in page and "<code>total</code>" in page
    for section in ("Dead letters with their raw output", "Sample rows", "null rates", "Prompt, schema, model"):
        assert section in page
    assert "Extract the invoice from this document." in page  # the prompt, from the unchanged config
    assert "the job as the run saw it" in page  # from the run record's snapshot, the job never reloaded


@pytest.mark.engine
def test_report_run_selection_and_default_folder(sample_run):
    run_id = sample_run["record"]["run_id"]
    cwd = sample_run["folder"] / "elsewhere"
    cwd.mkdir()
    chosen = run_main(["report", sample_run["output"], "--run", run_id[:-2]], cwd=cwd, env=WIDE)
    assert chosen.returncode == 0, chosen.stderr[-2000:]
    assert (cwd / "out" / "report" / run_id / "report.html").is_file()
    missing = run_main(["report", sample_run["output"], "--run", "no-such-run"], cwd=cwd, env=WIDE)
    assert missing.returncode == 2  # nothing to report on: a usage error, not a failed partition
    assert "error: run 'no-such-run' not found under" in missing.stderr


@needs_chromium
@pytest.mark.engine
def test_report_renders_in_headless_chromium_with_every_chart(sample_run, tmp_path):
    import numpy as np
    from PIL import Image

    url = (sample_run["dir"] / "report.html").resolve().as_uri()
    dom = chromium(["--window-size=1280,2400", "--dump-dom", url], tmp_path / "profile")
    assert_links_resolve(dom.stdout)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout)
    assert body, "no <body> in the rendered DOM"
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))
    # The page's own script counts the images that decoded (naturalWidth > 0) once the page has loaded.
    shown = len(_shown(sample_run["record"]))  # the throughput chart only after 10 s of generation
    assert attrs.get("data-charts-loaded") == f"{shown}/{shown}", attrs
    boxes = json.loads(attrs["data-chart-boxes"].replace("&quot;", '"'))
    height = max(2400, int(attrs["data-page-height"]))

    shot = tmp_path / "report.png"
    taken = chromium([f"--window-size=1280,{height}", f"--screenshot={shot}", url], tmp_path / "profile")
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert pixels.shape[:2] == (height, 1280)
    for i, (left, top, width, h) in enumerate(boxes):
        assert width > 600 and h > 150, f"chart {i} laid out at {width}x{h} px"
        region = pixels[top: top + h, left: left + width]
        assert region.std() > 20, f"chart {i} at {left},{top} is blank in the screenshot"
        colours = len(np.unique(region.reshape(-1, 3) // 16, axis=0))
        assert colours > 20, f"chart {i} has {colours} colours: not a chart"
    # The outcomes chart (first) shows the largest outcome's bar in its colour.
    counts = {ROW: sample_run["record"]["rows"], **sample_run["record"]["dead_letters_by_reason"]}
    biggest = max(counts, key=counts.get)
    left, top, width, h = boxes[0]
    target = np.array([int(COLORS[biggest][k: k + 2], 16) for k in (1, 3, 5)])
    region = pixels[top: top + h, left: left + width]
    assert (np.abs(region - target).sum(axis=2) < 30).sum() > 500, f"no {biggest} bar in the outcomes chart"



def assert_links_resolve(dom: str) -> list[str]:
    """Every link the page's script collected points at a file that exists."""
    from urllib.parse import unquote, urlparse

    body = re.search(r"<body([^>]*)>", dom)
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))
    links = json.loads(attrs["data-links"].replace("&quot;", '"'))
    for link in links:
        parsed = urlparse(link)
        assert parsed.scheme == "file", link
        assert Path(unquote(parsed.path)).is_file(), f"broken link {link}"
    return links


@needs_chromium
@pytest.mark.engine
def test_index_renders_in_headless_chromium_and_its_links_resolve(sample_run, tmp_path):
    import numpy as np
    from PIL import Image

    url = sample_run["index"].resolve().as_uri()
    dom = chromium(["--window-size=1280,1600", "--dump-dom", url], tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    links = assert_links_resolve(dom.stdout)
    run_id = sample_run["record"]["run_id"]
    assert any(link.endswith(f"/{run_id}/report.html") for link in links)
    assert 'data-charts-loaded="1/1"' in dom.stdout  # the trend chart decoded
    shot = tmp_path / "index.png"
    taken = chromium(["--window-size=1280,1200", f"--screenshot={shot}", url], tmp_path / "profile")
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert pixels.std() > 20  # not a blank page
