"""Issue 55: a lease's time to live is bounded (finite, at least a second: in a record and in EXTRACT_LEASE_TTL_S),
else exit 5 in one line; and lease generations only grow, even after the lease file is deleted mid-run."""

from __future__ import annotations

import json

import pytest

from pipeline.lease import Lease, LeaseHeldError, LeaseRecord
from pipeline.storage import storage_for


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "1e300", "abc", "0.5"])
def test_an_out_of_bounds_ttl_in_the_environment_is_a_lease_error(tmp_path, monkeypatch, value):
    monkeypatch.setenv("EXTRACT_LEASE_TTL_S", value)
    with pytest.raises(LeaseHeldError, match="EXTRACT_LEASE_TTL_S") as refused:
        Lease(storage_for(str(tmp_path)), str(tmp_path / "_lease.json"), "run-1")
    assert "\n" not in str(refused.value)


def test_a_ttl_in_bounds_is_taken(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRACT_LEASE_TTL_S", "2.5")
    assert Lease(storage_for(str(tmp_path)), str(tmp_path / "_lease.json"), "run-1").ttl_s == 2.5


@pytest.mark.parametrize("ttl", ["NaN", "Infinity", "-Infinity", "1e300", "0", "-1"])
def test_a_record_whose_ttl_is_out_of_bounds_is_not_a_lease_record(ttl):
    good = LeaseRecord(holder="r", host="h", pid=1, token="t", acquired_at="a", expires_at="b", expires_unix=1.0,
                       generation=1).to_json()
    assert LeaseRecord.from_json(good) is not None
    assert LeaseRecord.from_json(good.replace('"ttl_s": 300.0', f'"ttl_s": {ttl}')) is None


def test_a_run_with_a_zero_ttl_is_exit_5(tmp_path, monkeypatch, capsys):
    from pipeline import exit_codes
    from pipeline.cli.main import main
    from tests.unit.test_output_integrity import committed

    cfg = committed(tmp_path)
    monkeypatch.setenv("EXTRACT_LEASE_TTL_S", "0")
    assert main(["run", str(cfg)]) == exit_codes.OUTPUT_LEASED
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "EXTRACT_LEASE_TTL_S" in errors[0]


def test_generations_grow_across_a_deleted_lease_file(tmp_path):
    storage = storage_for(str(tmp_path))
    path = tmp_path / "_lease.json"
    first = Lease(storage, str(path), "run-1").acquire()
    assert first.generation == 1
    path.unlink()  # someone breaks the lease while the first writer runs
    second = Lease(storage, str(path), "run-2").acquire()
    try:
        assert second.generation == 2
        assert json.loads(path.read_text())["generation"] == 2
    finally:
        second.release()
        first.release()
    third = Lease(storage, str(path), "run-3").acquire()
    assert third.generation == 3
    third.release()
