"""The committed-output format, in one place: what a commit publishes and how every reader finds it.

- `PartitionManifest`: `OUTPUT/_partitions/<key|all>/manifest.json`. Its single write is a partition's
  commit point: it names the partition's rows file and dead-letters file by paths *relative to the
  output root*, so an output can be copied or moved. A partition is committed iff its manifest exists.
- `committed()`: every committed partition's manifest. `extract query`, eval, report, retry and bench
  read output only through it (never by globbing data files, which may hold superseded or unpublished
  files).
- `RunManifest`: what one run read, wrote and spent, `OUTPUT/_runs/<run_id>.json`, readable back with
  `from_json` / `run_manifests()`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pipeline.output.layout import KINDS, OutputLayout
from pipeline.partition import WHOLE, Partition
from pipeline.storage import Storage, join

FORMAT = 2  # 1: absolute paths, a `_SUCCESS` marker after the manifest; 2: relative paths, the manifest alone


class AccountingError(RuntimeError):
    """input_rows != rows + dead_letters: a document was lost or duplicated, so nothing is committed."""


class OutputCorruptError(RuntimeError):
    """The committed output is not what its manifests say: a manifest that does not parse, a file it names that is
    missing, outside the output, or of another size or hash. `extract` exits with `exit_codes.OUTPUT_CORRUPT`."""


class ManifestError(OutputCorruptError, ValueError):
    """A manifest that is not valid JSON or lacks a required key."""


def relative(root: str, uri: str) -> str:
    """`uri` relative to the output root; a legacy absolute path is cut at its table folder."""
    prefix = root.rstrip("/") + "/"
    if uri.startswith(prefix):
        return uri[len(prefix):]
    if not uri.startswith("/") and "://" not in uri:
        return uri
    for kind in KINDS:  # a format-1 manifest written where the output used to live
        marker = f"/{kind}/"
        if marker in uri:
            return kind + "/" + uri.rsplit(marker, 1)[1]
    raise ManifestError(f"{uri} is not under an output table folder ({', '.join(KINDS)})")


def _known(cls: type, raw: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in raw.items() if k in names}


@dataclass
class PartitionManifest:
    partition: str  # the label: YYYY-MM-DD, or "all"
    files: dict[str, str]  # kind (rows | dead_letters) → path relative to the output root
    run_id: str = ""
    input_rows: int = 0
    rows: int = 0
    dead_letters: int = 0
    output_hash: str = ""
    format: int = FORMAT
    commit_id: str = ""
    committed_at: str = ""
    updated_at: str | None = None
    input_uri: str = ""
    input_files: list[str] = field(default_factory=list)
    input_fingerprint: str | None = None
    schema: dict[str, str] = field(default_factory=dict)
    model: str = ""
    output_parts: dict[str, str] = field(default_factory=dict)  # what decided the output hash, each hashed
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    units: int = 0
    units_resumed: int = 0
    seconds: float = 0.0
    tokens: dict[str, int] = field(default_factory=dict)
    retries: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_json(cls, text: str, root: str, where: str = "manifest") -> PartitionManifest:
        """Parse a manifest of `root`'s output; legacy absolute paths become relative to `root`."""
        try:
            raw = json.loads(text)
            files = {kind: relative(root, raw["files"][kind]) for kind in KINDS}
            manifest = cls(**{**_known(cls, raw), "files": files, "format": int(raw.get("format", 1))})
            for key in ("input_rows", "rows", "dead_letters"):
                setattr(manifest, key, int(getattr(manifest, key)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{where}: not a partition manifest ({type(exc).__name__}: {exc})") from None
        return manifest

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "format": FORMAT}, indent=2, default=str)

    def uri(self, kind: str, root: str) -> str:
        """Where a table's file of this partition is, for the output now at `root`."""
        return join(root, self.files[kind])

    def uris(self, root: str) -> set[str]:
        return {self.uri(kind, root) for kind in KINDS}

    @property
    def is_dated(self) -> bool:
        return self.partition != WHOLE


def read_manifest(storage: Storage, layout: OutputLayout, p: Partition) -> PartitionManifest | None:
    """The partition's committed manifest, or None if it was never committed."""
    path = layout.manifest(p)
    if not storage.exists(path):
        return None
    return PartitionManifest.from_json(storage.read_text(path), layout.root, path)


def committed(storage: Storage, root: str) -> list[PartitionManifest]:
    """Every committed partition of the output at `root`, by label. The one reader of committed output."""
    layout = OutputLayout(root)
    base = layout.partitions_root() + "/"
    out = []
    for path in storage.list_files(layout.partitions_root()):
        if path.startswith(base) and path[len(base):].count("/") == 1 and path.endswith("/manifest.json"):
            out.append(PartitionManifest.from_json(storage.read_text(path), root, path))
    return sorted(out, key=lambda m: m.partition)


def duckdb_recipe(root: str = "OUTPUT", kind: str = "rows") -> str:
    """The SQL a user runs in plain DuckDB to read only committed data (local output; S3 with httpfs)."""
    # `dt` from the partition folder the manifest names (its last `dt=` segment), not hive partitioning, which
    # would also turn a `k=v` folder above the output into a column, over a real one of the same name.
    return (f"SET VARIABLE files = (SELECT list(regexp_replace(filename, '_partitions/[^/]+/manifest[.]json$', '') "
            f"|| files.{kind}) FROM read_json('{root}/_partitions/*/manifest.json', filename = true)); "
            "SELECT * EXCLUDE (_file), TRY_CAST(nullif(regexp_extract(_file, '/dt=([^/]+)/[^/]+$', 1), '') AS DATE) "
            "AS dt FROM read_parquet(getvariable('files'), hive_partitioning = false, union_by_name = true, "
            "filename = '_file');")


@dataclass
class RunManifest:
    run_id: str
    name: str
    config_path: str
    config_hash: str
    status: str
    started_at: str
    finished_at: str | None = None
    input_uri: str = ""
    input_files: int = 0
    output_uri: str = ""
    schema: dict[str, str] = field(default_factory=dict)
    model: str = ""
    max_tokens: int | None = None
    constrained: bool = True
    schema_checks: list[dict[str, Any]] = field(default_factory=list)  # per schema: backend, compile, unenforced
    input_rows: int = 0
    rows: int = 0
    dead_letters: int = 0
    dead_letters_by_reason: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float | None] = field(default_factory=dict)
    actors: list[dict[str, Any]] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    alert: str | None = None  # why a committed run missed output's quality bar (pipeline.quality; exit 4)
    kind: str = "run"  # run | retry
    extra: dict[str, Any] = field(default_factory=dict)  # keys a kind adds (a retry's settings)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        return {**{k: v for k, v in out.items() if k != "extra"}, **self.extra}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=str)

    @classmethod
    def from_json(cls, text: str, where: str = "run manifest") -> RunManifest:
        try:
            raw = json.loads(text)
            known = _known(cls, raw)
            extra = {k: v for k, v in raw.items() if k not in known}
            return cls(**{**known, "extra": extra})
        except (json.JSONDecodeError, TypeError) as exc:
            raise ManifestError(f"{where}: not a run manifest ({type(exc).__name__}: {exc})") from None


def run_manifests(storage: Storage, root: str) -> list[RunManifest]:
    """Every run record under OUTPUT/_runs, oldest first (by start time)."""
    runs = [RunManifest.from_json(storage.read_text(p), p) for p in storage.list_files(OutputLayout(root).runs_root())
            if p.endswith(".json")]
    return sorted(runs, key=lambda r: r.started_at)
