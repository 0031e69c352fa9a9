"""`extract submit` (issue 19 item 4, issue 17 item 5): what is shipped, what is refused, and the submission id.
Pure logic on real files; the cluster path itself runs in test_cluster.py."""

from __future__ import annotations

import json
import stat
from datetime import date
from pathlib import Path

import pytest
import yaml

from pipeline import submit as job
from pipeline.config import ConfigError, load_config
from tests.conftest import ROOT, write_docs

SECRET = "PLANTED-S3cretPW-7f3a"


@pytest.fixture
def job_dir(tmp_path) -> Path:
    """A config folder as users have them: the job's files, plus credentials, notes and old output beside them."""
    folder = tmp_path / "job"
    (folder / ".aws").mkdir(parents=True)
    (folder / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    (folder / ".env").write_text(f"DB_PASSWORD={SECRET}\n")
    (folder / "notes.txt").write_text(f"the admin password is {SECRET}\n")
    (folder / "out").mkdir()
    (folder / "out" / "old.parquet").write_text("x")
    (folder / "models").mkdir()
    (folder / "models" / "__init__.py").write_text("")
    (folder / "models" / "ticket.py").write_text((ROOT / "tests" / "fixtures" / "models.py").read_text())
    (folder / "models" / ".secret.py").write_text(f"KEY = {SECRET!r}\n")
    (folder / "examples.jsonl").write_text("")
    write_docs(folder / "docs.parquet", ["a"], ["text"])
    config = {"name": "tickets", "input": {"uri": "docs.parquet", "id_column": "doc_id", "text_column": "text"},
              "schema": "models.ticket:Ticket", "prompt": "Extract.\n{document}",
              "model": {"path": "bundled"}, "output": {"uri": "s3://bucket/tickets"}}
    (folder / "extract.yaml").write_text(yaml.safe_dump(config))
    return folder


def test_only_the_job_files_are_shipped_never_dotfiles(job_dir):
    loaded = load_config(job_dir / "extract.yaml")
    files = [str(f) for f in job.job_files(loaded)]
    assert files == ["docs.parquet", "extract.yaml", "models/__init__.py", "models/ticket.py"]


def test_the_working_dir_holds_the_files_and_the_set_values_in_a_file_not_on_the_command_line(job_dir):
    loaded = load_config(job_dir / "extract.yaml")
    sets = [f"storage.endpoint_url=https://admin:{SECRET}@minio.local:9000", "model.max_tokens=64"]
    folder = job.stage_working_dir(loaded, job.job_files(loaded), sets)
    try:
        shipped = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        assert shipped == ["docs.parquet", job.SET_FILE, "extract.yaml", "models/__init__.py", "models/ticket.py"]
        assert json.loads((folder / job.SET_FILE).read_text()) == sets
        assert stat.S_IMODE((folder / job.SET_FILE).stat().st_mode) == 0o600
        for path in folder.rglob("*"):
            if path.is_file() and path.name != job.SET_FILE:
                assert SECRET.encode() not in path.read_bytes(), path
    finally:
        import shutil

        shutil.rmtree(folder)
    command = job.entrypoint("extract.yaml", ["--date", "2026-11-30"], with_sets=True)
    assert command == f"extract run extract.yaml --date 2026-11-30 --set-file {job.SET_FILE}"


def test_run_reads_set_values_from_the_file(job_dir, tmp_path):
    from pipeline.cli.main import parser
    from pipeline.cli.options import overrides

    path = tmp_path / "sets.json"
    path.write_text(json.dumps(["model.max_tokens=64", "storage.endpoint_url=http://x:1"]))
    args = parser().parse_args(["run", str(job_dir / "extract.yaml"), "--set-file", str(path)])
    assert overrides(args) == {"model.max_tokens": 64, "storage.endpoint_url": "http://x:1"}
    path.write_text('{"not": "a list"}')
    with pytest.raises(ConfigError, match="--set-file"):
        overrides(args)


def test_a_file_outside_the_config_folder_is_refused_by_name(job_dir):
    config = yaml.safe_load((job_dir / "extract.yaml").read_text())
    config["model"]["chat_template"] = "../chat.jinja"
    (job_dir.parent / "chat.jinja").write_text("{{ messages }}")
    (job_dir / "extract.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="model.chat_template: '../chat.jinja' is outside the config's folder"):
        job.job_files(load_config(job_dir / "extract.yaml"))


@pytest.mark.parametrize(("uri", "address", "allow", "refused"), [
    ("out/tickets", "http://127.0.0.1:8265", False, "is relative"),
    ("out/tickets", "http://head.example.com:8265", True, None),
    ("/shared/tickets", "http://head.example.com:8265", False, "remote cluster"),
    ("/shared/tickets", "http://head.example.com:8265", True, None),
    ("/shared/tickets", "http://127.0.0.1:8265", False, None),
    ("s3://bucket/tickets", "http://head.example.com:8265", False, None),
])
def test_an_output_the_job_would_lose_is_refused(job_dir, uri, address, allow, refused):
    loaded = load_config(job_dir / "extract.yaml", {"output.uri": uri})
    if refused is None:
        job.check_output(loaded, address, allow)
    else:
        with pytest.raises(ConfigError, match=refused):
            job.check_output(loaded, address, allow)


def test_the_submission_id_is_the_job_and_its_day(job_dir):
    loaded = load_config(job_dir / "extract.yaml")
    assert job.submission_id(loaded, date(2026, 11, 30)) == "tickets-2026-11-30"
    assert job.submission_id(loaded, None).startswith("tickets-20")


def test_refusals_are_one_line():
    exists = RuntimeError("Request failed with status code 400: Job with submission_id tickets-2026-11-30 "
                          "already exists. Please use a different submission_id.\nTraceback ...")
    message = job.explain(exists, "http://h:8265", "tickets-2026-11-30")
    assert "\n" not in message and "already submitted" in message
    auth = type("AuthenticationError", (Exception,), {})("Token authentication failed\n" + "frame\n" * 30)
    message = job.explain(auth, "http://h:8265", "x")
    assert "\n" not in message and "refused authentication" in message and "RAY_AUTH_TOKEN" in message


def test_prepare_auth_sets_token_mode_only_with_a_token(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setattr(job, "TOKEN_FILE", str(tmp_path / "none"))
    job.prepare_auth()
    assert "RAY_AUTH_MODE" not in __import__("os").environ
    monkeypatch.setenv("RAY_AUTH_TOKEN", "t")
    job.prepare_auth()
    assert __import__("os").environ["RAY_AUTH_MODE"] == "token"


def test_secret_looking_files_in_a_shipped_folder_stay_behind(job_dir):
    """Issue 23 item 8: an input folder with notes beside the data ships only the data the job reads."""
    data = job_dir / "data"
    data.mkdir()
    write_docs(data / "part-0.parquet", ["a"], ["text"])
    (data / "notes.env").write_text(f"DB_PASSWORD={SECRET}\n")
    (data / "server.pem").write_text(SECRET)
    (data / "README.txt").write_text("about the data\n")
    config = yaml.safe_load((job_dir / "extract.yaml").read_text())
    config["input"]["uri"] = "data"
    (job_dir / "extract.yaml").write_text(yaml.safe_dump(config))
    files = [str(f) for f in job.job_files(load_config(job_dir / "extract.yaml"))]
    assert files == ["data/part-0.parquet", "extract.yaml", "models/__init__.py", "models/ticket.py"]


@pytest.mark.parametrize(("key", "name"), [("input.uri", "credentials.parquet"),
                                          ("model.chat_template", "chat.env")])
def test_a_secret_looking_file_the_job_reads_is_refused_not_left_behind(job_dir, key, name):
    config = yaml.safe_load((job_dir / "extract.yaml").read_text())
    (job_dir / name).write_bytes((job_dir / "docs.parquet").read_bytes() if key == "input.uri" else b"{{ x }}")
    node, leaf = (config["input"], "uri") if key == "input.uri" else (config["model"], "chat_template")
    node[leaf] = name
    (job_dir / "extract.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=f"^{name} has a secret-looking name"):
        job.job_files(load_config(job_dir / "extract.yaml"))


def test_a_symlink_out_of_the_folder_is_one_line_naming_it(job_dir, tmp_path):
    data = job_dir / "data"
    data.mkdir()
    write_docs(data / "part-0.parquet", ["a"], ["text"])
    outside = write_docs(tmp_path / "elsewhere.parquet", ["b"], ["text"])
    (data / "part-1.parquet").symlink_to(outside)
    config = yaml.safe_load((job_dir / "extract.yaml").read_text())
    config["input"]["uri"] = "data"
    (job_dir / "extract.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as info:
        job.job_files(load_config(job_dir / "extract.yaml"))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("input.uri: data/part-1.parquet is a symlink to") and str(outside) in message
