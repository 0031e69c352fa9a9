"""Data files are on disk before the manifest that names them: every file a commit publishes is fsynced (and its
folder's entry) before the manifest's rename makes it visible."""

from __future__ import annotations

import os

import pipeline.storage as storage_module
from tests.conftest import write_config, write_docs
from tests.fixtures.commits import DOCS, commit_outcome, invoice


def test_every_named_file_is_fsynced_before_its_manifest_is_published(tmp_path, monkeypatch):
    docs = write_docs(tmp_path / "docs.parquet", DOCS, ["A-1 1.0", "b", "c", "d"])
    cfg = write_config(tmp_path, **{"input.uri": str(docs)})
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(storage_module.os, "fsync", fsync)
    monkeypatch.setattr(storage_module.os, "replace", replace)
    commit_outcome(cfg, "first", {"a": invoice("A-1")}, {"b": "truncated", "c": "truncated", "d": "empty_input"})
    published = [i for i, (op, path) in enumerate(events) if op == "replace" and path.endswith("manifest.json")
                 and "_partitions" in path]
    assert published, events
    data = {path for op, path in events if op == "replace" and path.endswith(".parquet")
            and ("/rows/" in path or "/dead_letters/" in path)}
    assert {os.path.basename(p).split("-")[0] for p in data} == {"part"} and len(data) == 2
    for path in data:  # each data file: its bytes fsynced (as the temp name), renamed, its folder fsynced
        renamed = events.index(("replace", path))
        assert renamed < published[0]
        assert any(op == "fsync" and os.path.dirname(p) == os.path.dirname(path) for op, p in events[:renamed])
        assert ("fsync", os.path.dirname(path)) in events[renamed:published[0]]
