"""The coordinator findings a run takes over from the kept replay: a partition's records are made from its own rows
alone, the digest of what they were made from changes with its files, its audited broker and its cleaner offset, and
a frame over one partition's records is checked on the other partitions and keeps the findings of those taken over
(tests/integration/test_nightly_append.py holds the tables of a rerun that took some over to those of a full run)."""

from __future__ import annotations

from logbuilder import PartitionLog
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.engine.run import frame_findings
from pipeline.audit.replay.coordinator_records import audited_records, sources
from pipeline.audit.replay.kept import CoordinatorOutcome, KeptReplay
from pipeline.config import AuditSettings
from pipeline.tables.files_per_partition import FileGroup
from schemas.batches import BATCHES
from schemas.transaction_log import TRANSACTION_LOG

EMPTY, ONGOING, PREPARE_COMMIT, COMPLETE_COMMIT = 0, 1, 2, 4
KEY_3, KEY_7 = '["c", "__transaction_state", 3]', '["c", "__transaction_state", 7]'
KEY_7_TUPLE = ("c", "__transaction_state", 7)


def _coordinators() -> list[PartitionLog]:
    logs = [PartitionLog(topic="__transaction_state", partition=n) for n in (3, 7)]
    for log in logs:
        for tid, pid in ((f"a{log.partition}", 100 + log.partition), (f"b{log.partition}", 200 + log.partition)):
            log.txn_state(tid, EMPTY, pid, 0)
            start = log.txn_state(tid, ONGOING, pid, 0, ("out-0",))["start_timestamp_ms"]
            log.txn_state(tid, PREPARE_COMMIT, pid, 0, ("out-0",), start=start)
            log.txn_state(tid, COMPLETE_COMMIT, pid, 0, start=start)
    return logs


def test_a_partitions_records_are_made_from_its_own_rows(spark):
    logs = _coordinators()
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    log_rows = spark.createDataFrame([row for log in logs for row in log.transaction_log_rows], TRANSACTION_LOG)
    together = audited_records(log_rows, batches, None).where(F.col("partition") == 7)
    alone = audited_records(log_rows.where(F.col("partition") == 7), batches, None)
    assertDataFrameEqual(alone, together)
    assert alone.count() == 8


def test_the_digest_changes_with_the_partitions_files_broker_and_cleaner_offset():
    def group(partition: int, *names: str) -> FileGroup:
        paths = tuple(f"/wh/transaction_log/cluster_id=c/topic=__transaction_state/{name}" for name in names)
        return FileGroup("__transaction_state", partition, paths, 100, 1)

    replicas = {("c", "__transaction_state", 3): (1, None), ("c", "__transaction_state", 7): (1, None)}
    before = sources([group(3, "a.parquet"), group(7, "b.parquet")], replicas)
    assert set(before) == {KEY_3, KEY_7}
    assert sources([group(7, "b.parquet"), group(3, "a.parquet")], dict(reversed(replicas.items()))) == before
    grown = sources([group(3, "a.parquet"), group(7, "b.parquet", "b2.parquet")], replicas)  # a new segment's file
    assert grown[KEY_3] == before[KEY_3] and grown[KEY_7] != before[KEY_7]
    for replica in ((2, None), (1, 40)):  # another broker audited; the cleaner went on
        changed = sources([group(3, "a.parquet"), group(7, "b.parquet")], {**replicas, KEY_7_TUPLE: replica})
        assert changed[KEY_3] == before[KEY_3] and changed[KEY_7] != before[KEY_7]
    unaudited = sources([group(3, "a.parquet"), group(9, "c.parquet")], replicas)
    assert set(unaudited) == {KEY_3}


def test_a_coordinator_local_frame_checks_the_derived_partitions_and_keeps_the_others_findings(spark, tmp_path):
    logs = _coordinators()
    for log in logs:  # a record each partition's KEY_VERSION (TSL-001) check fires on
        log.txn_state(f"c{log.partition}", EMPTY, 300 + log.partition, 0, key_version=1)
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    log_rows = spark.createDataFrame([row for log in logs for row in log.transaction_log_rows], TRANSACTION_LOG)
    audited_records(log_rows, batches, None).write.parquet(str(tmp_path / "records"))
    inputs = AuditInputs(*[None] * 11, coordinator_records=spark.read.parquet(str(tmp_path / "records")))
    ctx = AuditContext(AuditSettings())
    frame = "transaction_log.records"
    checked = frame_findings(frame, inputs, ctx)
    assert sorted(row.partition for row in checked.where(F.col("rule_code") == "TSL-001").collect()) == [3, 7]
    # What the earlier run kept: its findings of partition 3 said something else, and it had one more of 7.
    kept = checked.withColumn("message", F.concat(F.lit("kept: "), "message"))
    kept.write.parquet(str(tmp_path / "kept"))
    earlier = KeptReplay("earlier", "fingerprint", row_findings={frame: str(tmp_path / "kept")})
    outcome = CoordinatorOutcome([("", "__transaction_state", 3)], earlier)

    found = frame_findings(frame, inputs, ctx, coordinator=outcome)

    assertDataFrameEqual(found.where(F.col("partition") == 3), kept.where(F.col("partition") == 3))
    assertDataFrameEqual(found.where(F.col("partition") == 7), checked.where(F.col("partition") == 7))
