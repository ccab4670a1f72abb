"""The coordinator records a run takes over from the kept replay: a partition's records are made from its own rows
alone, the digest of those rows changes with any of them, and a frame over one partition's records is checked on
the partitions derived again and keeps the findings of the others (tests/integration/test_nightly_append.py holds
the tables of a rerun that took some partitions over to those of a full run)."""

from __future__ import annotations

from logbuilder import PartitionLog
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.engine.run import frame_findings
from pipeline.audit.replay.kept import CoordinatorOutcome, KeptReplay
from pipeline.audit.state.coordinator import audited_rows, records_of
from pipeline.audit.state.kept_coordinator import sources
from pipeline.config import AuditSettings
from schemas.batches import BATCHES
from schemas.checkpoints import CHECKPOINTS, CLEANER_OFFSET
from schemas.transaction_log import TRANSACTION_LOG

EMPTY, ONGOING, PREPARE_COMMIT, COMPLETE_COMMIT = 0, 1, 2, 4


def _coordinators() -> list[PartitionLog]:
    logs = [PartitionLog(topic="__transaction_state", partition=n) for n in (3, 7)]
    for log in logs:
        for tid, pid in ((f"a{log.partition}", 100 + log.partition), (f"b{log.partition}", 200 + log.partition)):
            log.txn_state(tid, EMPTY, pid, 0)
            start = log.txn_state(tid, ONGOING, pid, 0, ("out-0",))["start_timestamp_ms"]
            log.txn_state(tid, PREPARE_COMMIT, pid, 0, ("out-0",), start=start)
            log.txn_state(tid, COMPLETE_COMMIT, pid, 0, start=start)
    return logs


def _digests(spark, logs, checkpoints=None) -> dict[int, tuple[int, int]]:
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    log_rows = spark.createDataFrame([row for log in logs for row in log.transaction_log_rows], TRANSACTION_LOG)
    digests = sources(audited_rows(log_rows, batches, checkpoints)).collect()
    return {row.partition: (row.rows, row.digest) for row in digests}


def test_a_partitions_records_are_made_from_its_own_rows(spark):
    logs = _coordinators()
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    log_rows = spark.createDataFrame([row for log in logs for row in log.transaction_log_rows], TRANSACTION_LOG)
    together = records_of(audited_rows(log_rows, batches, None)).where(F.col("partition") == 7)
    alone = records_of(audited_rows(log_rows.where(F.col("partition") == 7), batches, None))
    assertDataFrameEqual(alone, together)
    assert alone.count() == 8


def test_the_digest_changes_with_the_partitions_rows_only(spark):
    logs = _coordinators()
    before = _digests(spark, logs)
    assert before == _digests(spark, logs)  # the same rows, the same digest
    logs[1].txn_state("a7", EMPTY, 107, 1)  # an appended record
    after = _digests(spark, logs)
    assert after[3] == before[3]
    assert after[7] != before[7] and after[7][0] == before[7][0] + 1

    changed = _coordinators()
    changed[1].transaction_log_rows[2]["transaction_timeout_ms"] = 1  # one column of one record
    assert _digests(spark, changed)[7] != before[7]


def test_the_digest_changes_with_the_replicas_cleaner_offset(spark):
    logs = _coordinators()
    cleaner = spark.createDataFrame(
        [(CLEANER_OFFSET, "__transaction_state", 3, 2, None, "cleaner-offset-checkpoint", 0, "")], CHECKPOINTS
    )
    before, cleaned = _digests(spark, logs), _digests(spark, logs, cleaner)
    assert cleaned[3] != before[3]
    assert cleaned[7] == before[7]


def test_a_coordinator_local_frame_checks_the_derived_partitions_and_keeps_the_others_findings(spark, tmp_path):
    logs = _coordinators()
    for log in logs:  # a record each partition's KEY_VERSION (TSL-001) check fires on
        log.txn_state(f"c{log.partition}", EMPTY, 300 + log.partition, 0, key_version=1)
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    log_rows = spark.createDataFrame([row for log in logs for row in log.transaction_log_rows], TRANSACTION_LOG)
    records_of(audited_rows(log_rows, batches, None)).write.parquet(str(tmp_path / "records"))
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
