"""Why an open transaction hangs (`transactions.cause`), and the `read_committed` ground truth.

Every scenario is a partition of its own, audited together in one run with the coordinator records each writes.
"""

from __future__ import annotations

import pytest
from logbuilder import T0, PartitionLog
from pyspark.testing import assertDataFrameEqual

from pipeline.audit.engine.run import run_audit
from pipeline.audit.state.hanging import transaction_causes
from pipeline.config import AuditSettings
from schemas.batches import BATCHES
from schemas.checkpoints import CHECKPOINTS, REPLICATION_OFFSET
from schemas.read_committed import READ_COMMITTED
from schemas.transaction_log import TRANSACTION_LOG
from schemas.transactions import (
    CAUSE_ID_EXPIRED,
    CAUSE_LATE_DATA,
    CAUSE_MARKER_MISSING,
    CAUSE_NO_TRANSACTIONAL_ID,
    CAUSE_ONGOING,
    CAUSE_PARTITION_NOT_ADDED,
    CAUSE_UNKNOWN,
)

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = range(6)
DAY_MS = 86_400_000


def _tp(log):
    return f"{log.topic}-{log.partition}"


def _begin(log, tid, pid, partitions=None):
    """Empty and Ongoing of `tid` listing `partitions` (the log's own by default); the Ongoing's start time."""
    log.txn_state(tid, EMPTY, pid, 0)
    return log.txn_state(tid, ONGOING, pid, 0, partitions or (_tp(log),))["start_timestamp_ms"]


def late_data_after_a_commit(log):
    """A V1 transaction committed with its marker; a batch of the same epoch arrives after it."""
    start = _begin(log, "a", 101)
    log.data(101, 0, 0, 1, txn=True)
    log.txn_state("a", PREPARE_COMMIT, 101, 0, (_tp(log),), start=start)
    log.marker(101, 0)
    log.txn_state("a", COMPLETE_COMMIT, 101, 0, start=start)
    log.data(101, 0, 1, 1, txn=True)


def late_data_after_a_fence(log):
    """The coordinator aborted at a bumped epoch; the fenced producer's batch comes after the marker."""
    log.data(102, 0, 0, 1, txn=True)
    log.marker(102, 1, commit=False)
    log.data(102, 0, 1, 1, txn=True)


def marker_missing(log):
    start = _begin(log, "c", 103)
    log.data(103, 0, 0, 1, txn=True)
    log.txn_state("c", PREPARE_COMMIT, 103, 0, (_tp(log),), start=start)
    log.txn_state("c", COMPLETE_COMMIT, 103, 0, start=start)


def transactional_id_expired(log):
    _begin(log, "d", 104)
    log.data(104, 0, 0, 1, txn=True)
    log.txn_state("d", None, 104, 0)


def no_transactional_id(log):
    log.data(105, 0, 0, 1, txn=True)
    log.txn_state("other-e", EMPTY, 1105, 0)  # the coordinator records reach past the transaction's start


def partition_not_added(log):
    _begin(log, "f", 106, ("elsewhere-0",))
    log.data(106, 0, 0, 1, txn=True)


def coordinator_ongoing(log):
    _begin(log, "g", 107)
    log.data(107, 0, 0, 1, txn=True)


def unknown(log):
    """A producer no record names, writing after the newest coordinator record of the whole input."""
    log.data(108, 0, 0, 1, txn=True, at=T0 + DAY_MS)


CAUSES = {
    late_data_after_a_commit: CAUSE_LATE_DATA,
    late_data_after_a_fence: CAUSE_LATE_DATA,
    marker_missing: CAUSE_MARKER_MISSING,
    transactional_id_expired: CAUSE_ID_EXPIRED,
    no_transactional_id: CAUSE_NO_TRANSACTIONAL_ID,
    partition_not_added: CAUSE_PARTITION_NOT_ADDED,
    coordinator_ongoing: CAUSE_ONGOING,
    unknown: CAUSE_UNKNOWN,
}


def interleaved(log):
    """Producer 1's transaction aborts around producer 2's committed one; producer 3's is still open, and an
    idempotent batch follows. The replica's high watermark (checkpoint) is below the log end."""
    log.data(1, 0, 0, 1, txn=True)  # 0
    log.data(2, 0, 0, 1, txn=True)  # 1
    log.data(1, 0, 1, 2, txn=True)  # 2-3
    log.marker(2, 0)  # 4
    log.marker(1, 0, commit=False)  # 5
    log.data(3, 0, 0, 1, txn=True)  # 6
    log.data(4, 0, 0, 1)  # 7
    log.checkpoint_rows.append(
        {
            "kind": REPLICATION_OFFSET,
            "topic": log.topic,
            "partition": log.partition,
            "offset": 7,
            "problem": None,
            "source_file": "replication-offset-checkpoint",
            "broker_id": log.broker_id,
        }
    )


@pytest.fixture(scope="module")
def audited(spark, scratch):
    logs = {}
    for build in [*CAUSES, interleaved]:
        log = PartitionLog(topic=build.__name__.replace("_", "-"), clock=T0)
        build(log)
        logs[build] = log

    def frame(attribute, schema):
        return spark.createDataFrame([row for log in logs.values() for row in getattr(log, attribute)], schema)

    result = run_audit(
        frame("rows", BATCHES),
        AuditSettings(),
        "test-run",
        scratch("hanging"),
        transaction_log=frame("transaction_log_rows", TRANSACTION_LOG),
        checkpoints=frame("checkpoint_rows", CHECKPOINTS),
    )
    transactions = {}
    for row in result.transactions.collect():
        transactions.setdefault(row.topic, []).append(row)
    read_committed = result.read_committed.where(result.read_committed.topic == "interleaved").drop("run_id")
    read_committed = spark.createDataFrame(read_committed.collect(), read_committed.schema)
    result.release()
    return {build: transactions[log.topic] for build, log in logs.items()}, read_committed


@pytest.mark.parametrize("build", list(CAUSES), ids=lambda build: build.__name__)
def test_open_transaction_cause(build, audited):
    rows = audited[0][build]
    (open_row,) = [row for row in rows if row.outcome == "OPEN"]
    assert open_row.cause == CAUSES[build], open_row.cause_evidence
    assert open_row.abort_command.endswith(
        f"abort --topic {open_row.topic} --partition 0 --start-offset {open_row.first_offset}"
    )
    assert [row.cause for row in rows if row.outcome != "OPEN"] == [None] * (len(rows) - 1)


def test_cause_evidence(audited):
    transactions = audited[0]

    def evidence(build):
        return next(row.cause_evidence for row in transactions[build] if row.outcome == "OPEN")

    assert evidence(late_data_after_a_fence) == {"data_epoch": "0", "last_marker_offset": "1", "last_marker_epoch": "1"}
    assert evidence(late_data_after_a_commit)["decision"] == "PrepareCommit"
    missing = evidence(marker_missing)
    assert (missing["transactional_id"], missing["decision"], missing["completed"]) == ("c", "PrepareCommit", "true")
    assert evidence(transactional_id_expired) == {"transactional_id": "d", "latest_record_offset": "3"}
    assert evidence(partition_not_added) == {"transactional_ids": "f", "data_epoch": "0"}
    assert evidence(no_transactional_id)["coordinator_partitions"] == str(len(CAUSES) - 2)


def test_without_coordinator_records_only_late_data_is_told(spark):
    open_txns = spark.createDataFrame(
        [("", "t", 0, 1, 5, 0, T0), ("", "t", 0, 2, 7, 3, T0)],
        "cluster_id string, topic string, partition int, producer_id bigint, first_offset bigint, producer_epoch int, "
        "start_timestamp bigint",
    )
    transactions = spark.createDataFrame(
        [("", "t", 0, 1, 4, 1), ("", "t", 0, 2, 6, 3)],
        "cluster_id string, topic string, partition int, producer_id bigint, marker_offset bigint, marker_epoch int",
    )
    causes = transaction_causes(open_txns, transactions, None).orderBy("producer_id").collect()
    assert [(row.producer_id, row.cause) for row in causes] == [(1, CAUSE_LATE_DATA), (2, CAUSE_UNKNOWN)]


def test_read_committed_ground_truth(spark, audited):
    schema = READ_COMMITTED.__class__([f for f in READ_COMMITTED.fields if f.name != "run_id"])
    partition = dict.fromkeys(schema.fieldNames())
    partition.update(topic="interleaved", partition=0, broker_id=0, cluster_id="")
    expected = [
        {
            **partition,
            "kind": "PARTITION",
            "log_start_offset": 0,
            "log_end_offset": 8,
            "high_watermark": 7,
            "high_watermark_source": "checkpoint",
            "first_unstable_offset": 6,
            "last_stable_offset": 6,
        },
        {
            **partition,
            "kind": "ABORTED",
            "producer_id": 1,
            "first_offset": 0,
            "last_offset": 3,
            "abort_marker_offset": 5,
            "aborted_records": 3,
        },
    ]
    assertDataFrameEqual(audited[1], spark.createDataFrame(expected, schema))
