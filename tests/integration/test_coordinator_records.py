"""The coordinator records made one `__transaction_state` partition at a time
(pipeline.audit.replay.coordinator_records) are those of the window definitions (tests/reference_coordinator.py),
whether the tasks read the files or the rows are exchanged: on built logs with every shape the windows look at and on a
generated root; the published dumps' records in tests/integration/test_realdata_audit.py (the real broker dirs hold no
`__transaction_state`)."""

from __future__ import annotations

from logbuilder import PartitionLog
from pyspark.testing import assertDataFrameEqual
from reference_coordinator import assert_same_records, reference_records

from pipeline.audit.replay.coordinator_records import audited_records, audited_rows
from pipeline.config import AuditSettings
from pipeline.tables.store import TableStore
from schemas.batches import BATCHES
from schemas.checkpoints import CHECKPOINTS
from schemas.transaction_log import TRANSACTION_LOG

EMPTY, ONGOING, PREPARE_COMMIT, COMPLETE_COMMIT = 0, 1, 2, 4


def _logs() -> list[PartitionLog]:
    """Two partitions: ids with histories, a tombstone, a record without an id, records sharing a batch, a cleaned
    gap in one and a cleaner checkpoint in the other."""
    logs = [PartitionLog(topic="__transaction_state", partition=n) for n in (3, 7)]
    for log in logs:
        for tid, pid in ((f"a{log.partition}", 100 + log.partition), (f"b{log.partition}", 200 + log.partition)):
            log.txn_state(tid, EMPTY, pid, 0)
            start = log.txn_state(tid, ONGOING, pid, 0, ("out-0", "out-1"))["start_timestamp_ms"]
            if log.partition == 3:
                log.skip(2)  # offsets the cleaner removed
            log.txn_state(tid, PREPARE_COMMIT, pid, 0, ("out-1", "out-0"), start=start)
            log.txn_state(tid, COMPLETE_COMMIT, pid, 0, start=start)
        log.txn_state(f"a{log.partition}", None, 0, 0)  # the id expired
        log.txn_state(None, EMPTY, 9, 0)
        shared = log.txn_state("c", EMPTY, 300, 0)
        log.txn_state("c", ONGOING, 300, 0, ("out-2",), batch_base_offset=shared["batch_base_offset"], timeout_ms=5)
    return logs


def test_the_pass_gives_the_window_definitions_records(spark):
    logs = _logs()
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    log_rows = spark.createDataFrame([row for log in logs for row in log.transaction_log_rows], TRANSACTION_LOG)
    logs[1].cleaner_checkpoint(log_rows.count() // 4)
    checkpoints = spark.createDataFrame(logs[1].checkpoint_rows, CHECKPOINTS)
    for cleaner in (None, checkpoints):
        expected = reference_records(audited_rows(log_rows, batches, cleaner))
        assertDataFrameEqual(audited_records(log_rows, batches, cleaner), expected)
    rows = audited_records(log_rows, batches, checkpoints).collect()
    assert {row.partition: row.uncleaned_from for row in rows} == {3: 10, 7: logs[1].checkpoint_rows[0]["offset"]}
    assert any(row.prev is not None for row in rows) and any(row.prev is None for row in rows if row.followed)
    assert sum(not row.is_first_of_batch for row in rows) == 2  # the records that share a batch, once per partition


def test_on_a_generated_root_both_ways(spark, generated_warehouse):
    store = TableStore(spark, str(generated_warehouse))
    assert assert_same_records(spark, store, AuditSettings(compacted_topics=["*-changelog"])) > 100
