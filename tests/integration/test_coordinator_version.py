"""The transaction version the coordinator recorded (`__transaction_state` ClientTransactionVersion) decides how
the replay judges a producer when the data alone cannot tell, and the configured version wins over it.

Every scenario writes the same partition: a transaction at epoch 5 aborted at epoch 6 (a TV1 fence abort or a
TV2 abort: the data cannot tell), then the next transaction at epoch 6 starting at sequence 3. Only the
coordinator's records differ. The checks of SEQ-009 and EPO-004 run on the replay itself (one plan per run
instead of a whole audit): they read nothing else.
"""

from __future__ import annotations

import pytest
from logbuilder import T0, PartitionLog
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

import pipeline.audit.rules  # noqa: F401  (registers every rule, frame and check)
from pipeline.audit.core.context import AuditContext
from pipeline.audit.replay.coordinator_version import with_coordinator_version
from pipeline.audit.replay.plan import replay, replay_input
from pipeline.audit.rules.epochs import fence_abort
from pipeline.audit.rules.sequences import tv2_txn_first_seq
from pipeline.audit.state.transactions import build_producer_state
from pipeline.config import AuditSettings
from pipeline.small_inputs import small_input_conf
from schemas.batches import BATCHES
from schemas.replay import PRODUCER_STATE_COLUMNS
from schemas.transaction_log import TRANSACTION_LOG
from tests.reference_replay import with_file_order_state as reference_file_order_state
from tests.reference_replay import with_producer_state as reference_producer_state

EMPTY, ONGOING = 0, 1
PIDS = {"recorded-tv2": 501, "unrecorded": 502, "recorded-tv1": 503, "takeover": 504}
CHECKS = {"SEQ-009": tv2_txn_first_seq, "EPO-004": fence_abort}


def _partition(topic: str, recorded: int | None) -> PartitionLog:
    """The partition of the module docstring; `recorded` is the ClientTransactionVersion of the Ongoing records
    of both transactions (None: no coordinator records)."""
    log, pid = PartitionLog(topic=topic, clock=T0), PIDS[topic]
    version = {} if recorded is None else {"value_version": 1, "client_transaction_version": recorded}
    tp = f"{topic}-0"
    if recorded is not None:
        log.txn_state(topic, EMPTY, pid, 5, **version)
        log.txn_state(topic, ONGOING, pid, 5, (tp,), **version)
    log.data(pid, 5, 0, 2, txn=True)
    log.marker(pid, 6, commit=False)
    if recorded is not None:
        log.txn_state(topic, ONGOING, pid, 6, (tp,), **version)
    log.data(pid, 6, 3, 1, txn=True)
    return log


def _judged(spark, settings: AuditSettings, logs: list[PartitionLog]):
    """Per topic: the `transaction_version` evidence of each finding of CHECKS by rule code, and the
    `producer_state` transaction version."""
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    transaction_log = spark.createDataFrame([row for log in logs for row in log.transaction_log_rows], TRANSACTION_LOG)
    replayed = replay(batches, settings, transaction_log).where("is_producer_row").localCheckpoint()
    ctx = AuditContext(settings)
    findings: dict[tuple[str, str], list[str]] = {}
    for code, check in CHECKS.items():
        fires = check(ctx)
        version = fires.evidence["transaction_version"].column().alias("version")
        for row in replayed.where(fires.when.column()).select("topic", version).collect():
            findings.setdefault((row.topic, code), []).append(row.version)
    versions = {row.topic: row.transaction_version for row in build_producer_state(replayed).collect()}
    return findings, versions


@pytest.fixture(scope="module")
def judged(spark):
    logs = [_partition("recorded-tv2", 2), _partition("unrecorded", None), _partition("recorded-tv1", 1)]
    return _judged(spark, AuditSettings(), logs)


def test_a_transaction_the_coordinator_recorded_as_tv2_must_start_at_sequence_0(judged):
    findings, versions = judged
    assert findings.get(("recorded-tv2", "SEQ-009")) == ["2/coordinator"]
    # the abort at data epoch + 1 is a TV2 client abort, not a fence: the next data is at its epoch, not one above
    assert findings.get(("recorded-tv2", "EPO-004")) is None
    assert versions["recorded-tv2"] == "2/coordinator"


def test_without_coordinator_records_the_producer_is_assumed_tv1(judged):
    findings, versions = judged
    assert findings.get(("unrecorded", "SEQ-009")) is None
    assert findings.get(("unrecorded", "EPO-004")) == ["1/assumed"]
    assert versions["unrecorded"] == "1/assumed"


def test_a_transaction_the_coordinator_recorded_as_tv1_is_judged_as_tv1(judged):
    findings, versions = judged
    assert findings.get(("recorded-tv1", "SEQ-009")) is None
    assert findings.get(("recorded-tv1", "EPO-004")) == ["1/coordinator"]
    assert versions["recorded-tv1"] == "1/coordinator"


def test_the_configured_version_wins_over_the_coordinators(spark):
    findings, versions = _judged(spark, AuditSettings(transaction_version="2"), [_partition("recorded-tv1", 1)])
    assert findings.get(("recorded-tv1", "SEQ-009")) == ["2/configured"]
    assert findings.get(("recorded-tv1", "EPO-004")) is None
    assert versions["recorded-tv1"] == "2/configured"


def test_the_version_follows_the_epochs_the_coordinator_recorded_it_for(spark):
    """A V2 instance took over a V1 producer id: TV1 up to the last V1 transaction's epoch, TV2 from the first
    V2 one on, unknown between them; Empty and fence records (the coordinator's own level) do not count."""
    log = PartitionLog(topic="takeover", clock=T0)
    log.txn_state("a", ONGOING, 7, 3, ("t-0",), value_version=1, client_transaction_version=1)
    log.txn_state("a", EMPTY, 7, 5, value_version=1, client_transaction_version=2)
    log.txn_state("a", ONGOING, 7, 7, ("t-0",), value_version=1, client_transaction_version=2)
    rows = spark.createDataFrame(
        [("", 7, epoch) for epoch in (2, 3, 5, 7, 8)] + [("", 8, 3), ("other", 7, 7)],
        "cluster_id string, producer_id bigint, producer_epoch int",
    )
    transaction_log = spark.createDataFrame(log.transaction_log_rows, TRANSACTION_LOG).fillna({"cluster_id": ""})
    versions = with_coordinator_version(rows, transaction_log).orderBy("cluster_id", "producer_id", "producer_epoch")
    assert [tuple(row) for row in versions.collect()] == [
        *[("", 7, 2, 1), ("", 7, 3, 1), ("", 7, 5, None), ("", 7, 7, 2), ("", 7, 8, 2), ("", 8, 3, None)],
        ("other", 7, 7, None),  # producer ids are a cluster's own
    ]


def _takeover() -> PartitionLog:
    """A V1 instance's transaction (recorded as TV1), then under the same producer id an unrecorded commit at
    the data epoch, a V2 instance's recorded transaction whose commit bumps the epoch, and one more whose Ongoing
    record was cleaned (TV2 from the recorded one's epoch on), ended by a TV2 fence abort (data epoch + 2)."""
    log, pid = PartitionLog(topic="takeover", clock=T0), PIDS["takeover"]
    v1, v2 = (
        {"value_version": 1, "client_transaction_version": 1},
        {"value_version": 1, "client_transaction_version": 2},
    )
    log.txn_state("x", ONGOING, pid, 0, ("takeover-0",), **v1)
    log.data(pid, 0, 0, 2, txn=True)
    log.marker(pid, 0)
    log.data(pid, 1, 0, 1, txn=True)
    log.marker(pid, 1)
    log.txn_state("x", ONGOING, pid, 2, ("takeover-0",), **v2)
    log.data(pid, 2, 0, 1, txn=True)
    log.marker(pid, 3)
    log.data(pid, 3, 0, 1, txn=True)
    log.marker(pid, 5, commit=False)
    return log


def test_same_state_as_the_window_reference(spark):
    """The compiled pass and tests/reference_replay.py agree on every producer row when the coordinator's records
    are read (the configured version ignores them: tests/integration/test_producer_kernel.py covers it)."""
    logs = [_partition("recorded-tv2", 2), _partition("unrecorded", None), _partition("recorded-tv1", 1), _takeover()]
    settings = AuditSettings()
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    transaction_log = spark.createDataFrame([row for log in logs for row in log.transaction_log_rows], TRANSACTION_LOG)
    rows = replay_input(batches, settings, transaction_log)
    reference = reference_producer_state(reference_file_order_state(rows), settings)
    columns = ["topic", "base_offset", *PRODUCER_STATE_COLUMNS.fieldNames()]
    compiled = replay(batches, settings, transaction_log).where("is_producer_row").select(*columns).localCheckpoint()
    assertDataFrameEqual(compiled, reference.where("is_producer_row").select(*columns))
    takeover = compiled.where("topic = 'takeover'").select("is_tv2").orderBy("base_offset").collect()
    # V1, V1 (unrecorded, a marker at the data epoch), V2 from the recorded transaction on
    assert [row.is_tv2 for row in takeover] == [False, False, False, False, True, True, True, True]


def test_the_replay_keeps_each_partition_in_one_task_whatever_join_spark_plans(spark):
    """The replay's tasks each walk whole partitions, so the join that adds the coordinator's versions must not
    spread a partition's rows over tasks by producer id: joined by shuffle (the broadcast hint off, as
    `spark.sql.optimizer.disableHints` turns it off), the replay saw each partition's producers in different tasks,
    and reported the offsets of the others missing."""
    log = PartitionLog(topic="shared", clock=T0)
    for pid in range(600, 616):  # producers of one partition, whose hashes fall in different shuffle partitions
        log.txn_state(f"id-{pid}", ONGOING, pid, 0, ("shared-0",), value_version=1, client_transaction_version=1)
        log.data(pid, 0, 0, 2, txn=True)
        log.marker(pid, 0, commit=True)
    batches = spark.createDataFrame(log.rows, BATCHES)
    transaction_log = spark.createDataFrame(log.transaction_log_rows, TRANSACTION_LOG)
    settings = AuditSettings()

    def replayed():
        rows = replay_input(batches, settings, transaction_log)
        # the version read too, or the optimizer drops the join: a left join to one row per key adds no row
        tasks = rows.select("topic", "partition", "coordinator_version", F.spark_partition_id().alias("task"))
        per_partition: dict[tuple, set[int]] = {}
        for row in tasks.collect():
            per_partition.setdefault((row.topic, row.partition), set()).add(row.task)
        replayed_rows = replay(batches, settings, transaction_log).localCheckpoint()
        return [len(ids) for ids in per_partition.values()], replayed_rows

    broadcast_tasks, broadcast = replayed()
    # a small input's settings (no adaptive execution to coalesce the shuffles into one task), and the hints off
    shuffle = {**small_input_conf(spark), "spark.sql.optimizer.disableHints": "true"}
    previous = {key: spark.conf.get(key, None) for key in shuffle}
    try:
        for key, value in shuffle.items():
            spark.conf.set(key, value)
        shuffled_tasks, shuffled = replayed()
    finally:
        for key, value in previous.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
    assert broadcast_tasks == shuffled_tasks == [1]
    gaps = "previous_readable_last_offset IS NOT NULL AND previous_readable_last_offset + 1 != base_offset"
    assert shuffled.where(gaps).count() == broadcast.where(gaps).count() == 0
    assertDataFrameEqual(shuffled, broadcast)
