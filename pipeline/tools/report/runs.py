"""Which run a report shows (`pick_run`) and the outcomes of the partitions it committed (`load_run`).

Which records belong to a run: every record of each partition the run committed, as long as that
partition's current manifest is still the run's (resumed units staged by an earlier, interrupted
run are part of the commit). If the partition was since rewritten (`--force`, a retry), only the
records that still carry the run's id are shown, and the report says so."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipeline.output.committed import CommittedOutput
from pipeline.output.manifest import OutputCorruptError, PartitionManifest
from pipeline.output.tables import column_names, read_columns
from pipeline.storage import S3Settings, Storage, storage_for
from pipeline.tools.report.outcomes import ROW, RecordOutcome
from workers.outcome import DEAD_LETTERS, ROWS, DeadCol, lineage_names
from workers.secrets import redact


class ReportError(RuntimeError):
    """The output holds nothing to report on (no run records, an unknown run id, no committed data)."""


PLAIN_RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def plain_run_id(record: dict[str, Any], where: str) -> str:
    """The record's run id, which names a folder of the report (OUT/<run_id>/report.html): a plain name, or
    OutputCorruptError (a run record that names `../x`, an absolute path or a second line is tampered with)."""
    run_id = str(record.get("run_id"))
    if not PLAIN_RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise OutputCorruptError(f"a run record under {where}/_runs has run_id {run_id[:80]!r}, not a plain name "
                                 "(letters, digits, _ . -): the output's run records are tampered with; remove "
                                 "that record to report on the others")
    return run_id


@dataclass
class RunData:
    record: dict[str, Any]
    outcomes: list[RecordOutcome]
    output_uri: str
    notes: list[str] = field(default_factory=list)
    rows_have_tokens: bool = False
    row_tables: list[pa.Table] = field(default_factory=list)  # the run's rows, every column (for field profiles)
    input_files: list[str] = field(default_factory=list)  # the shown partitions' input files (least sure values)

    @property
    def run_id(self) -> str:
        return str(self.record["run_id"])


def list_runs(storage: Storage, output_uri: str) -> list[dict[str, Any]]:
    """Every run record under OUTPUT/_runs, oldest first (`CommittedOutput.runs`), each as the record's JSON object.
    A record a live run is still writing is not a finished run yet: it is left out."""
    return [redact(r.to_dict()) for r in CommittedOutput(output_uri, storage).runs(skip_unreadable=True)]


def pick_run(records: Sequence[dict[str, Any]], run_id: str | None, where: str) -> tuple[dict[str, Any], str | None]:
    """The run to report on and, when the default skipped newer runs, a note saying so.

    Default: the newest run that processed documents. A nightly rerun of a committed partition is a
    no-op with an empty record, and reporting on it would hide the run that did the work."""
    if not records:
        raise ReportError(f"no run records under {where}/_runs: is {where} a job's output folder?")
    if run_id:
        exact = [r for r in records if r.get("run_id") == run_id]
        matches = exact or [r for r in records if str(r.get("run_id", "")).startswith(run_id)]
        if len(matches) == 1:
            return matches[0], None
        known = ", ".join(str(r.get("run_id")) for r in records[-5:])
        problem = "is ambiguous" if matches else "not found"
        raise ReportError(f"run {run_id!r} {problem} under {where}/_runs (newest: {known})")
    newest = records[-1]
    for record in reversed(records):
        if record.get("input_rows"):
            if record is newest:
                return record, None
            return record, (f"newest run {newest.get('run_id')} processed no documents "
                            f"({partition_states(newest)}); reporting on {record.get('run_id')}")
    return newest, None


def partition_states(record: dict[str, Any]) -> str:
    states = Counter(str(p.get("status")) for p in record.get("partitions", []))
    return ", ".join(f"{n} {s}" for s, n in states.items()) or "no partitions"


def committed_by_partition(storage: Storage, output_uri: str) -> dict[str, PartitionManifest]:
    """Partition label → its committed manifest (`CommittedOutput.partitions`)."""
    return {m.partition: m for m in CommittedOutput(output_uri, storage).partitions()}


def _read_columns(storage: Storage, uri: str, wanted: dict[str, str]) -> tuple[pa.Table, str]:
    """The `wanted` columns that the file has (renamed to their report names), and its id column's name
    (the first column: the input's id column, whatever it is called)."""
    names = column_names(storage, uri)
    id_column = names[0]
    present = [c for c in wanted if c in names]
    table = read_columns(storage, uri, [id_column, *present])
    return table.rename_columns(["doc_id", *(wanted[c] for c in present)]), id_column


# The columns the report reads, by the names it gives them: the two tables' lineage in its shared vocabulary
# (`workers.outcome.LINEAGE`), and the dead letters' own columns.
_READ_LINEAGE = ("run_id", "at", "prompt_tokens", "output_tokens")
ROW_COLUMNS = {column: name for column, name in lineage_names(ROWS).items() if name in _READ_LINEAGE}
DEAD_COLUMNS = {DeadCol.REASON: "reason", DeadCol.ERROR: "error",
                **{column: name for column, name in lineage_names(DEAD_LETTERS).items() if name in _READ_LINEAGE},
                DeadCol.ATTEMPTS: "attempts", DeadCol.RAW_OUTPUT: "raw_output"}


def _outcomes(table: pa.Table, outcome: str | None) -> list[RecordOutcome]:
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    n = table.num_rows
    empty = [None] * n
    return [
        RecordOutcome(
            doc_id=str(columns["doc_id"][i]),
            outcome=outcome or str(columns["reason"][i]),
            at=columns.get("at", empty)[i],
            prompt_tokens=columns.get("prompt_tokens", empty)[i],
            output_tokens=columns.get("output_tokens", empty)[i],
            error=columns.get("error", empty)[i],
            attempts=columns.get("attempts", empty)[i],
            raw_output=columns.get("raw_output", empty)[i],
        )
        for i in range(n)
    ]


def load_run(output_uri: str, run_id: str | None = None, settings: S3Settings | None = None) -> RunData:
    """The chosen run's record and the outcomes of the partitions it committed (local or S3)."""
    output_uri = output_uri.rstrip("/")
    storage = storage_for(output_uri, settings)
    record, note = pick_run(list_runs(storage, output_uri), run_id, output_uri)
    data = RunData(record=record, outcomes=[], output_uri=output_uri, notes=[note] if note else [])
    if record.get("error"):
        data.notes.append(f"the run failed: {record['error']}")
    manifests = committed_by_partition(storage, output_uri)
    for part in record.get("partitions", []):
        label = str(part.get("partition"))
        if part.get("status") != "committed":
            data.notes.append(f"partition {label}: {part.get('status')}"
                              + (f" ({part['error']})" if part.get("error") else ""))
            continue
        manifest = manifests.get(label)
        if manifest is None:
            data.notes.append(f"partition {label}: no longer committed, so its records cannot be shown")
            continue
        _add_partition(storage, data, label, manifest)
    _note_counts(data)
    return data


def _add_partition(storage: Storage, data: RunData, label: str, manifest: PartitionManifest) -> None:
    """The outcomes of one committed partition of the run, with a note where it shows less than the whole."""
    record, rows_uri = data.record, manifest.uri(ROWS, data.output_uri)
    rows, _ = _read_columns(storage, rows_uri, ROW_COLUMNS)
    dead, _ = _read_columns(storage, manifest.uri(DEAD_LETTERS, data.output_uri), DEAD_COLUMNS)
    data.rows_have_tokens = data.rows_have_tokens or "output_tokens" in rows.column_names
    if record.get("kind") == "retry":
        rows, dead = _own(rows, data.run_id), _own(dead, data.run_id)
        data.notes.append(f"partition {label}: a retry; showing the {rows.num_rows} recovered rows and "
                          f"{dead.num_rows} documents still dead after it")
    elif manifest.run_id != data.run_id:
        rows, dead = _own(rows, data.run_id), _own(dead, data.run_id)
        data.notes.append(f"partition {label}: since rewritten by {manifest.run_id}; showing the "
                          f"{rows.num_rows + dead.num_rows} records that still carry this run's id")
    elif manifest.retries:
        ids = ", ".join(str(r.get("run_id")) for r in manifest.retries)
        data.notes.append(f"partition {label}: shown as it is now, after retries ({ids}); the run record "
                          "counts what this run wrote")
    data.outcomes += _outcomes(rows, ROW) + _outcomes(dead, None)
    data.row_tables.append(_full_rows(storage, rows_uri, rows.column("doc_id")))
    data.input_files += [str(f) for f in manifest.input_files or ()]


def _note_counts(data: RunData) -> None:
    """Notes on what the shown records lack: token counts, or agreement with the run record's counts."""
    record = data.record
    if not data.rows_have_tokens and any(o.outcome == ROW for o in data.outcomes):
        data.notes.append("rows carry no token counts (_prompt_tokens/_output_tokens): token histograms "
                          "show dead letters only")
    found = Counter(o.outcome for o in data.outcomes)
    expected = {ROW: int(record.get("rows", 0)), **{k: int(v) for k, v in
                                                      record.get("dead_letters_by_reason", {}).items()}}
    if not any(n.startswith("partition") for n in data.notes) and dict(found) != {k: v for k, v in
                                                                                   expected.items() if v}:
        data.notes.append(f"the committed files hold {dict(found)}, the run record says {expected}")


def _full_rows(storage: Storage, uri: str, doc_ids: pa.ChunkedArray) -> pa.Table:
    """Every column of a rows file, for the documents in `doc_ids` (the rows this report shows)."""
    import pyarrow.compute as pc

    table = read_columns(storage, uri)
    ids = table.column(0).cast(pa.string())
    return table.filter(pc.is_in(ids, value_set=doc_ids.combine_chunks().cast(pa.string())))


def _own(table: pa.Table, run_id: str) -> pa.Table:
    if "run_id" not in table.column_names:
        return table.slice(0, 0)
    import pyarrow.compute as pc

    return table.filter(pc.equal(table.column("run_id"), run_id))


def all_rows(data: RunData) -> pa.Table | None:
    tables = [t for t in data.row_tables if t.num_rows]
    if not tables:
        return None
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, TypeError):
        return tables[-1]  # partitions written under different schemas: profile the newest
