"""The committed-output format, in one place: what a commit publishes and how every reader finds it.

- `PartitionManifest`: `OUTPUT/_partitions/<key|all>/manifest.json`. Its single write is a partition's
  commit point: it names the partition's rows file and dead-letters file by paths *relative to the
  output root*, so an output can be copied or moved. A partition is committed iff its manifest exists.
- `committed()`: every committed partition's manifest. `extract query`, eval, report, retry and bench
  read output only through it (never by globbing data files, which may hold superseded or unpublished
  files). Only a folder named for a partition (`dt=YYYY-MM-DD` or `all`) counts, its manifest must be of
  that partition, and every file it names must lie in that partition's table folder; each file's size is
  checked on every read (`check_files`), its content hash with `verify=True` (`extract query --verify`).
  A manifest that breaks any of this raises `OutputCorruptError` (exit 8).
- `RunManifest`: what one run read, wrote and spent, `OUTPUT/_runs/<run_id>.json`, readable back with
  `from_json` / `run_manifests()`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import structlog

from pipeline.output.layout import KINDS, OutputLayout
from pipeline.output.links import refuse_links
from pipeline.output.metadata import bounded_json, typed
from pipeline.partition import WHOLE, Partition
from pipeline.storage import Storage, join
from workers.secrets import redact, redact_value

log = structlog.get_logger(__name__)

# 1: absolute paths, a `_SUCCESS` marker after the manifest; 2: relative paths, the manifest alone;
# 3: each file's size and blake2b, the lease generation of the commit, and the input selection (limit)
FORMAT = 3
HASH = "blake2b"  # 32-byte digest; about 1 GB/s a core, cheaper than sha256 here
REWRITE = "rewrite the partition with `extract run CONFIG --force` (with --date D for a day)"
_PARTITION_FOLDER = re.compile(r"^(all|dt=\d{4}-\d{2}-\d{2})$")
_DATA_NAME = re.compile(r"^part-[A-Za-z0-9._-]+\.parquet$")


class AccountingError(RuntimeError):
    """input_rows != rows + dead_letters: a document was lost or duplicated, so nothing is committed."""


class OutputCorruptError(RuntimeError):
    """The committed output is not what its manifests say: a manifest that does not parse, a file it names that is
    missing, outside the output, or of another size or hash. `extract` exits with `exit_codes.OUTPUT_CORRUPT`."""


class LeaseLostError(RuntimeError):
    """This writer's lease expired and was taken over, or was deleted, or a newer lease generation published the
    partition: it must not publish anything more (`pipeline.lease` raises it; `extract` exits 5)."""


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


def _partition_key(label: str) -> str:
    return "" if label == WHOLE else f"dt={label}"


def check_path(kind: str, label: str, path: str, where: str) -> str:
    """`path` if it names a data file of partition `label`'s `kind` folder (`rows/dt=D/part-X.parquet`); else
    `ManifestError`: a manifest may not name `../`, absolute, or another partition's or table's paths."""
    folder = join(kind, _partition_key(label))
    parent, _, name = path.rpartition("/")
    if parent != folder or not _DATA_NAME.match(name) or ".." in path.split("/"):
        raise ManifestError(f"{where}: {kind} file {path!r} is not a data file of partition {label} "
                            f"(expected {folder}/part-*.parquet): the manifest was altered; {REWRITE}")
    return path


def file_hash(storage: Storage, uri: str) -> str:
    """`blake2b:<hex>` of a file's bytes, read in 8 MiB pieces."""
    digest = hashlib.blake2b(digest_size=32)
    for piece in storage.read_chunks(uri):
        digest.update(piece)
    return f"{HASH}:{digest.hexdigest()}"


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
    sizes: dict[str, int] = field(default_factory=dict)  # kind → bytes of its file (format 3)
    hashes: dict[str, str] = field(default_factory=dict)  # kind → "blake2b:<hex>" of its file (format 3)
    lease_generation: int | None = None  # the lease generation that published it; an older one is refused
    # The input selection: the first `input_rows` documents of the partition's input, in plan order, of
    # `input_total_rows`; `complete` is False after a `limit` cut it short (a later run completes it).
    input_total_rows: int | None = None
    limit: int | None = None
    complete: bool = True

    @classmethod
    def from_json(cls, text: str, root: str, where: str = "manifest") -> PartitionManifest:
        """Parse a manifest of `root`'s output; legacy absolute paths become relative to `root`. A file path
        outside the partition's table folders is refused (`ManifestError`)."""
        try:
            raw = bounded_json(text, "partition manifest")
            if not isinstance(raw.get("files"), dict):
                raise TypeError("no files object")
            typed(cls, {k: v for k, v in raw.items() if k != "format"}, "partition manifest")
            label = str(raw["partition"])
            files = {kind: check_path(kind, label, relative(root, str(raw["files"][kind])), where) for kind in KINDS}
            manifest = cls(**{**_known(cls, raw), "files": files, "format": int(raw.get("format", 1))})
            for key in ("input_rows", "rows", "dead_letters"):
                setattr(manifest, key, int(getattr(manifest, key)))
            manifest.sizes = {k: int(v) for k, v in dict(manifest.sizes or {}).items() if k in KINDS}
            manifest.hashes = {k: str(v) for k, v in dict(manifest.hashes or {}).items() if k in KINDS}
        except ManifestError:
            raise
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ManifestError(f"{where}: not a partition manifest ({type(exc).__name__}: {exc}); {REWRITE}") from None
        return manifest

    def to_json(self) -> str:
        """The manifest's JSON; what it says of the input (its URI, files, a retry's settings) through the one
        redactor (`workers.secrets`): a URL password never reaches the output."""
        out = {**asdict(self), "format": FORMAT}
        for key in ("input_uri", "input_files", "retries"):
            out[key] = redact_value(out[key])
        return json.dumps(out, indent=2, default=str)

    def uri(self, kind: str, root: str) -> str:
        """Where a table's file of this partition is, for the output now at `root`."""
        return join(root, self.files[kind])

    def uris(self, root: str) -> set[str]:
        return {self.uri(kind, root) for kind in KINDS}

    @property
    def is_dated(self) -> bool:
        return self.partition != WHOLE


def _parse(storage: Storage, path: str, root: str, folder: str) -> PartitionManifest:
    refuse_links(root, path, write=False)
    manifest = PartitionManifest.from_json(storage.read_text(path), root, path)
    if folder != (_partition_key(manifest.partition) or WHOLE):
        raise ManifestError(f"{path}: the manifest is of partition {manifest.partition}, not of its folder "
                            f"{folder}: the output was altered; delete the copy, or {REWRITE}")
    return manifest


def read_manifest(storage: Storage, layout: OutputLayout, p: Partition,
                  check: bool = True) -> PartitionManifest | None:
    """The partition's committed manifest, or None if it was never committed; its files' sizes are checked
    (`check_files`) unless `check` is False (a commit about to replace it)."""
    path = layout.manifest(p)
    if not storage.exists(path):
        return None
    manifest = _parse(storage, path, layout.root, p.key or WHOLE)
    if check:
        check_files(storage, layout.root, manifest)
    return manifest


def check_files(storage: Storage, root: str, manifest: PartitionManifest, verify: bool = False) -> None:
    """Raise `OutputCorruptError` if a file the manifest names is missing or not of its recorded size, or, with
    `verify`, not of its recorded hash. A format-2 manifest records neither: its files must exist, and `verify`
    fails on it (nothing to verify against)."""
    where = join(OutputLayout(root).partitions_root(), _partition_key(manifest.partition) or WHOLE, "manifest.json")
    day = f" --date {manifest.partition}" if manifest.is_dated else ""
    fix = f"rerun the partition with `extract run CONFIG --force{day}`"
    for kind in KINDS:
        uri = manifest.uri(kind, root)
        size = storage.size(uri)
        if size is None:
            raise OutputCorruptError(f"{uri}: named by {where} but missing; {fix}")
        expected = manifest.sizes.get(kind)
        if expected is not None and size != expected:
            raise OutputCorruptError(f"{uri}: {size} bytes, but {where} records {expected}: the file was replaced "
                                     f"or cut; {fix}")
        recorded = manifest.hashes.get(kind)
        if verify and recorded and file_hash(storage, uri) != recorded:
            raise OutputCorruptError(f"{uri}: its content hash is not the {recorded} {where} records: the file was "
                                     f"replaced; {fix}")
        if verify and (not recorded or expected is None):
            raise OutputCorruptError(f"{uri}: {where} records no size and hash for it (a manifest of the format "
                                     f"before 3, or one stripped of them), so --verify cannot check it; {fix}")


def committed(storage: Storage, root: str, verify: bool = False) -> list[PartitionManifest]:
    """Every committed partition of the output at `root`, by label, its files' sizes (with `verify`, hashes)
    checked. The one reader of committed output. A folder of `_partitions/` that is not a partition's name (a
    copy such as `all.bak`) is ignored, with a warning."""
    layout = OutputLayout(root)
    refuse_links(root, layout.partitions_root(), write=False)
    base = layout.partitions_root() + "/"
    out = []
    for path in storage.list_files(layout.partitions_root()):
        if not (path.startswith(base) and path[len(base):].count("/") == 1 and path.endswith("/manifest.json")):
            continue
        folder = path[len(base):].split("/", 1)[0]
        if not _PARTITION_FOLDER.match(folder):
            log.warning("manifest.ignored", path=path, reason="not a partition folder (dt=YYYY-MM-DD or all)")
            continue
        manifest = _parse(storage, path, root, folder)
        check_files(storage, root, manifest, verify)
        out.append(manifest)
    return sorted(out, key=lambda m: m.partition)


def duckdb_recipe(root: str = "OUTPUT", kind: str = "rows") -> str:
    """The SQL a user runs in plain DuckDB to read only committed data (local output; S3 with httpfs)."""
    # `dt` from the partition folder the manifest names (its last `dt=` segment), not hive partitioning, which
    # would also turn a `k=v` folder above the output into a column, over a real one of the same name.
    # Only a partition's own folder (all, dt=YYYY-MM-DD): a copy such as _partitions/all.bak is not read.
    return (f"SET VARIABLE files = (SELECT list(regexp_replace(filename, '_partitions/[^/]+/manifest[.]json$', '') "
            f"|| files.{kind}) FROM read_json('{root}/_partitions/*/manifest.json', filename = true) "
            "WHERE regexp_matches(filename, '/_partitions/(all|dt=[0-9]{4}-[0-9]{2}-[0-9]{2})/manifest[.]json$')); "
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
    job: dict[str, Any] = field(default_factory=dict)  # the redacted job snapshot (pipeline.job_identity)
    extra: dict[str, Any] = field(default_factory=dict)  # keys a kind adds (a retry's settings)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        return {**{k: v for k, v in out.items() if k != "extra"}, **self.extra}

    def to_json(self) -> str:
        """The record's JSON, through the one redactor (`workers.secrets`): no secret reaches the output."""
        return json.dumps(redact(self.to_dict()), indent=2, sort_keys=False, default=str)

    @classmethod
    def from_json(cls, text: str, where: str = "run manifest") -> RunManifest:
        try:
            raw = bounded_json(text, "run record")
            typed(cls, raw, "run record")
            known = _known(cls, raw)
            extra = {k: v for k, v in raw.items() if k not in known}
            return cls(**{**known, "extra": extra})
        except (ValueError, TypeError) as exc:
            raise ManifestError(f"{where}: not a run manifest ({type(exc).__name__}: {str(exc)[:200]}); remove it "
                                "(a run record is a report's input, never the output's data)") from None


def run_manifests(storage: Storage, root: str) -> list[RunManifest]:
    """Every run record under OUTPUT/_runs, oldest first (by start time)."""
    runs = [RunManifest.from_json(storage.read_text(p), p) for p in storage.list_files(OutputLayout(root).runs_root())
            if p.endswith(".json")]
    return sorted(runs, key=lambda r: r.started_at)
