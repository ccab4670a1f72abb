"""A run is all or nothing: readers see published table versions, and what an unfinished run committed is
rolled back by the next writer or by the failing run itself."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

import schemas
from pipeline.cli import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, main
from pipeline.errors import InputError
from pipeline.tables.publication import last_published, read_published, roll_back_unpublished, table_versions
from pipeline.tables.store import TableStore

AUDIT_TABLES = ("findings", "transactions", "producer_state", "partition_summary")


def _main(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


def _rows(warehouse: Path, table: str) -> list[dict]:
    rows = DeltaTable(str(warehouse / table)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


def _summary(warehouse: Path, run_id: str) -> dict:
    summary = json.loads((warehouse / "reports" / run_id / "summary.json").read_text())
    summary.pop("run")
    return summary


@pytest.fixture(scope="module")
def published(spark, tmp_path_factory):
    """The sample, run once: (warehouse, store, run id, the audit tables' rows)."""
    from pipeline.samples import generate

    root = generate(tmp_path_factory.mktemp("sample"))
    warehouse = tmp_path_factory.mktemp("warehouse")
    code, _ = _main(["run", "--input", str(root), "--warehouse", str(warehouse)])
    assert code == 1
    store = TableStore(spark, str(warehouse), backend="embedded")
    run_id = last_published(store).run_id
    return warehouse, store, run_id, {table: _rows(warehouse, table) for table in AUDIT_TABLES}


def _assert_as_published(published) -> None:
    warehouse, store, run_id, rows = published
    assert roll_back_unpublished(store) == []  # as published: nothing left to roll back
    for table in AUDIT_TABLES:
        assert _rows(warehouse, table) == rows[table], table


def test_the_run_row_publishes_every_table_version(published):
    warehouse, store, run_id, _ = published
    run = last_published(store)
    assert run.run_id == run_id and run.command == "run"
    assert set(run.versions) >= {"batches", "ingest_manifest", *AUDIT_TABLES}
    assert run.versions == table_versions(store)
    assert not (warehouse / "findings" / "_staging").exists()
    assert not (warehouse / "_scratch").exists()  # a finished run leaves no trace of its intermediate tables


def test_read_published_gives_the_published_rows(published, spark, tmp_path):
    warehouse, store, _, rows = published
    assert read_published(store, "findings").count() == len(rows["findings"])
    with pytest.raises(InputError, match="no published run"):
        read_published(TableStore(spark, str(tmp_path), backend="embedded"), "findings")


def test_an_unfinished_run_is_invisible_to_report_and_rolled_back_by_the_next_writer(published, spark):
    warehouse, store, run_id, _ = published
    before = _summary(warehouse, run_id)
    # What a run killed after its findings commit leaves: other rows in findings, leftovers of its writes.
    topic = store.read("findings", schema=schemas.FINDINGS).select("topic").first().topic
    dead = store.read("findings", schema=schemas.FINDINGS).where(F.col("topic") == topic).limit(1)
    dead = dead.withColumn("run_id", F.lit("20990101T000000Z-dead00"))
    store.overwrite_partitions(dead, "findings", schemas.FINDINGS_PARTITION_BY, {"topic": [topic]})
    (warehouse / "_scratch" / "20990101T000000Z-dead00" / "replay").mkdir(parents=True)
    (warehouse / "transactions" / "_staging" / "0123").mkdir(parents=True)

    code, out = _main(["report", "--warehouse", str(warehouse), "--fail-on", "never"])
    assert code == EXIT_OK
    assert _summary(warehouse, run_id) == before
    assert run_id in out

    actions = roll_back_unpublished(store)
    assert any(action.startswith("restored findings") for action in actions)
    assert not (warehouse / "_scratch").exists()
    assert not (warehouse / "transactions" / "_staging").exists()
    _assert_as_published(published)


def test_a_table_no_published_run_wrote_is_removed(published, spark):
    warehouse, store, _, _ = published
    rows = spark.createDataFrame([], schemas.OFFSET_COMMITS)
    store.overwrite(rows, "offset_commits", schemas.OFFSET_COMMITS_PARTITION_BY)
    assert roll_back_unpublished(store) == ["removed offset_commits (no published run wrote it)"]
    assert not (warehouse / "offset_commits").exists()
    _assert_as_published(published)


def test_a_failing_run_rolls_back_its_own_commits(published, monkeypatch):
    warehouse, store, run_id, _ = published
    original = TableStore.overwrite_partitions

    def fail_on_summary(self, df, table, partition_by, values):
        if table == "partition_summary":
            raise RuntimeError("disk full")
        return original(self, df, table, partition_by, values)

    monkeypatch.setattr(TableStore, "overwrite_partitions", fail_on_summary)
    code, _ = _main(["audit", "--warehouse", str(warehouse)])
    monkeypatch.undo()

    assert code == EXIT_INTERNAL
    runs = _rows(warehouse, "runs")
    assert [run["status"] for run in runs if run["command"] == "audit"] == ["failed"]
    assert last_published(store).run_id == run_id
    _assert_as_published(published)


def test_report_refuses_a_run_that_was_not_published(published, capsys):
    warehouse, _, _, _ = published
    code, _ = _main(["report", "--warehouse", str(warehouse), "--run-id", "20990101T000000Z-dead00"])
    assert code == EXIT_USAGE
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "20990101T000000Z-dead00 is not a published" in error


def test_vacuum_keeps_what_published_runs_read_and_deletes_the_rest(published):
    warehouse, store, run_id, _ = published
    versions = last_published(store).versions
    referenced = {
        Path(uri.removeprefix("file://")).resolve()
        for uri in DeltaTable(str(warehouse / "findings"), version=versions["findings"]).file_uris()
    }
    code, _ = _main(["vacuum", "--warehouse", str(warehouse), "--retention-hours", "0", "--keep-runs", "1"])
    assert code == EXIT_OK
    on_disk = {path.resolve() for path in (warehouse / "findings").rglob("*.parquet")}
    assert on_disk == referenced  # the rolled-back run's files are gone, the published ones kept
    vacuum_run = last_published(store)
    assert vacuum_run.command == "vacuum"
    _assert_as_published(published)
    code, _ = _main(["report", "--warehouse", str(warehouse), "--fail-on", "never"])
    assert code == EXIT_OK
    assert json.loads((warehouse / "reports" / run_id / "summary.json").read_text())["run"]["id"] == run_id
