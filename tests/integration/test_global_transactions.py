"""`global_transactions`: each coordinator decision with the marker found on every partition it lists."""

from __future__ import annotations

from logbuilder import PartitionLog
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from pipeline.audit.replay.coordinator_records import audited_records
from pipeline.audit.replay.plan import replay
from pipeline.audit.state.global_transactions import build_global_transactions
from pipeline.audit.state.transactions import markers_of, transaction_parts
from pipeline.config import AuditSettings
from schemas.batches import BATCHES, STATUS_OK
from schemas.global_transactions import GLOBAL_TRANSACTIONS
from schemas.keys import TP
from schemas.transaction_log import TRANSACTION_LOG

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = range(6)
COORDINATOR_TOPIC = "__transaction_state"


def _transaction(coordinator, outputs, tid, pid, listed, markers, complete=True):
    """Empty, Ongoing and Prepare* (COMMIT) of `tid` listing `listed`, data on every output partition listed,
    then the `markers` (partition -> commit?) at the coordinator's clock and, with `complete`, CompleteCommit."""
    coordinator.txn_state(tid, EMPTY, pid, 0)
    start = coordinator.txn_state(tid, ONGOING, pid, 0, listed)["start_timestamp_ms"]
    for name in listed:
        if name in outputs:
            outputs[name].data(pid, 0, 0, 2, txn=True, at=coordinator.clock)
    prepare = coordinator.txn_state(tid, PREPARE_COMMIT, pid, 0, listed, start=start)
    for name, commit in markers.items():
        outputs[name].marker(pid, 0, commit=commit, coordinator_epoch=0, at=coordinator.clock + 5)
    if complete:
        coordinator.txn_state(tid, COMPLETE_COMMIT, pid, 0, start=start)
    return prepare


def _markers(batches):
    """The markers of the replay of `batches`, as the engine hands them to `build_global_transactions`."""
    return markers_of(transaction_parts().of(replay(batches, AuditSettings())))


def _partitions(batches):
    """The audited partitions, none of them compacted, as the engine hands them to `build_global_transactions`."""
    return batches.select(*TP).distinct().withColumn("compacted_by", F.lit(None).cast("string"))


def _no_open_transactions(spark):
    return spark.createDataFrame([], "cluster_id string, topic string, partition int, producer_id long")


def _marker(log, name, offset, control_type):
    topic, _, partition = name.rpartition("-")
    return {
        "topic": topic,
        "partition": int(partition),
        "in_input": log is not None,
        "marker_offset": offset,
        "control_type": control_type,
        "coordinator_epoch": None if offset is None else 0,
    }


def test_decisions_with_their_markers(spark):
    coordinator = PartitionLog(topic=COORDINATOR_TOPIC, partition=7)
    outputs = {f"out-{n}": PartitionLog(topic="out", partition=n) for n in range(2)}
    committed = _transaction(coordinator, outputs, "a", 100, ("out-0", "out-1"), {"out-0": True, "out-1": True})
    torn = _transaction(coordinator, outputs, "b", 200, ("out-0", "out-1"), {"out-0": True, "out-1": False})
    # out-1 got no marker, and gone-0 is not in the input at all
    absent = _transaction(coordinator, outputs, "c", 300, ("gone-0", "out-0", "out-1"), {"out-0": True})
    pending = _transaction(coordinator, outputs, "d", 400, ("out-1",), {}, complete=False)
    # two transactions of one epoch (TV1): each marker goes to the decision written before it
    first_of_epoch = _transaction(coordinator, outputs, "e", 500, ("out-0",), {"out-0": True})
    second_of_epoch = _transaction(coordinator, outputs, "e", 500, ("out-0",), {"out-0": False})
    logs = [coordinator, *outputs.values()]
    batches = spark.createDataFrame([row for log in logs for row in log.rows], BATCHES)
    records = audited_records(spark.createDataFrame(coordinator.transaction_log_rows, TRANSACTION_LOG), batches, None)
    marker_offsets = {
        (row["producer_id"], f"out-{row['partition']}"): row["base_offset"]
        for log in outputs.values()
        for row in log.rows
        if row["is_control"] and row["producer_id"] != 500
    }
    first_marker, second_marker = [row["base_offset"] for row in outputs["out-0"].rows[-4:] if row["is_control"]]

    def expected(prepare, markers, agreeing, contradicting, missing, torn, completed=True):
        listed = sorted(markers)
        return {
            "topic": COORDINATOR_TOPIC,
            "partition": 7,
            "transactional_id": prepare["transactional_id"],
            "producer_id": prepare["producer_id"],
            "producer_epoch": 0,
            "decision": "COMMIT",
            "prepare_offset": prepare["record_offset"],
            "prepare_timestamp": prepare["batch_timestamp"],
            "completed": completed,
            "transaction_version": None,
            "partitions": [
                _marker(outputs.get(name), name, marker_offsets.get((prepare["producer_id"], name)), markers[name])
                for name in listed
            ],
            "markers_agreeing": agreeing,
            "markers_contradicting": contradicting,
            "markers_missing": missing,
            "is_torn": torn,
            "broker_id": 0,
            "cluster_id": "",
        }

    rows = [
        expected(committed, {"out-0": 1, "out-1": 1}, 2, 0, 0, False),
        expected(torn, {"out-0": 1, "out-1": 0}, 1, 1, 0, True),
        expected(absent, {"gone-0": None, "out-0": 1, "out-1": None}, 1, 0, 1, True),
        expected(pending, {"out-1": None}, 0, 0, 1, False, completed=False),
        expected(first_of_epoch, {"out-0": 1}, 1, 0, 0, False),
        expected(second_of_epoch, {"out-0": 0}, 0, 1, 0, True),
    ]
    rows[-2]["partitions"][0].update(marker_offset=first_marker, coordinator_epoch=0)
    rows[-1]["partitions"][0].update(marker_offset=second_marker, coordinator_epoch=0)
    schema = GLOBAL_TRANSACTIONS.__class__([f for f in GLOBAL_TRANSACTIONS.fields if f.name != "run_id"])
    actual = build_global_transactions(records, _markers(batches), _partitions(batches), _no_open_transactions(spark))
    assertDataFrameEqual(actual.select(*schema.fieldNames()), spark.createDataFrame(rows, schema))


def test_a_coordinator_lists_the_partitions_of_its_own_cluster(spark):
    """The same producer id, topic and partition in another cluster hold no marker of this coordinator's."""

    def listed_partition(output_cluster: str):
        coordinator = PartitionLog(topic=COORDINATOR_TOPIC, partition=7, cluster_id="a")
        output = PartitionLog(topic="out", partition=0, cluster_id=output_cluster)
        _transaction(coordinator, {"out-0": output}, "a", 100, ("out-0",), {"out-0": True})
        batches = spark.createDataFrame(coordinator.rows + output.rows, BATCHES)
        log = spark.createDataFrame(coordinator.transaction_log_rows, TRANSACTION_LOG)
        (decision,) = build_global_transactions(
            audited_records(log, batches, None), _markers(batches), _partitions(batches), _no_open_transactions(spark)
        ).collect()
        return decision.cluster_id, decision.partitions[0].in_input, decision.partitions[0].marker_offset is not None

    assert listed_partition("a") == ("a", True, True)
    assert listed_partition("b") == ("a", False, False)


def test_a_marker_the_cleaner_removed_is_not_missing(spark):
    """On a compacted partition the cleaner removes a marker once its transaction's data is gone: not missing, and
    the decision not torn for it; while the producer's data is still open there, its marker is missing."""
    coordinator = PartitionLog(topic=COORDINATOR_TOPIC, partition=7)
    _transaction(coordinator, {}, "a", 100, ("cmp-0", "cmp-1"), {})
    batches = spark.createDataFrame(coordinator.rows, BATCHES)
    records = audited_records(spark.createDataFrame(coordinator.transaction_log_rows, TRANSACTION_LOG), batches, None)
    partitions = spark.createDataFrame(
        [("", "cmp", n, "cleaner checkpoint") for n in range(2)],
        "cluster_id string, topic string, partition int, compacted_by string",
    )
    cleaned = build_global_transactions(records, _markers(batches), partitions, _no_open_transactions(spark))
    assert [(row.markers_missing, row.is_torn) for row in cleaned.collect()] == [(0, False)]
    still_open = spark.createDataFrame(
        [("", "cmp", 1, 100)], "cluster_id string, topic string, partition int, producer_id long"
    )
    missing = build_global_transactions(records, _markers(batches), partitions, still_open)
    assert [(row.markers_missing, row.is_torn) for row in missing.collect()] == [(1, True)]


def test_markers_are_assigned_as_of_their_time(spark):
    """Each marker goes to the latest decision of its (producer id, epoch, partition) written at or before it, the
    earliest when all are later (clock skew), ties to the higher record offset; a decision takes its first marker.
    Checked against that definition on random times with ties and missing timestamps."""
    import random

    from pipeline.audit.state.global_transactions import _assigned_markers

    rng = random.Random(7)
    clock = lambda: rng.choice([None, *range(0, 40, 3)])  # noqa: E731
    decisions = [
        ("", COORDINATOR_TOPIC, 0, offset, clock(), 500, rng.choice([0, 1]), "out-0") for offset in range(0, 60, 2)
    ]
    markers = [(offset, rng.choice([0, 1]), clock()) for offset in range(100, 140)]

    def expected_assignment(epoch, at):
        of_key = [d for d in decisions if d[6] == epoch]
        order = lambda d: (d[4] is not None, d[4] or 0, d[3])  # noqa: E731 (struct order: null times first)
        before = [d for d in of_key if at is not None and d[4] is not None and d[4] <= at]
        chosen = max(before, key=order) if before else (min(of_key, key=order) if of_key else None)
        return None if chosen is None else chosen[3]

    firsts: dict[int, int] = {}
    for offset, epoch, at in markers:
        decision = expected_assignment(epoch, at)
        if decision is not None:
            firsts[decision] = min(firsts.get(decision, offset), offset)
    decision_rows = spark.createDataFrame(
        decisions,
        "cluster_id string, coordinator_topic string, coordinator_partition int, prepare_offset long, "
        "prepare_timestamp long, producer_id long, producer_epoch int, tp_name string",
    )
    batch_rows = [
        {
            **{field.name: None for field in BATCHES.fields},
            "cluster_id": "",
            "topic": "out",
            "partition": 0,
            "producer_id": 500,
            "producer_epoch": epoch,
            "base_offset": offset,
            "max_timestamp": at,
            "entry_status": STATUS_OK,
            "is_control": True,
            "control_type": 1,
            "coordinator_epoch": 0,
            "segment_base_offset": 0,
            "position": offset,
            "source_file": "out-0/00000000000000000000.log",
            "source_format": "segment",
        }
        for offset, epoch, at in markers
    ]
    batches = spark.createDataFrame(batch_rows, BATCHES)
    assigned = _assigned_markers(decision_rows, batches).select("prepare_offset", "marker.marker_offset").collect()
    assert {row.prepare_offset: row.marker_offset for row in assigned} == firsts


def test_the_markers_are_those_of_the_replay(spark):
    """`markers_of` the transactions' parts holds every COMMIT/ABORT marker the replay's producer rows hold, open,
    empty and closed transactions alike, and no empty control batch (the cleaner's leftover)."""
    log = PartitionLog(topic="out", partition=0)
    log.data(100, 0, 0, 2, txn=True)
    log.marker(100, 0, commit=True, coordinator_epoch=3)
    log.marker(100, 0, commit=False, coordinator_epoch=3)  # closes no transaction: EMPTY
    log.data(100, 1, 0, 1, txn=True)
    log.marker(100, 1, commit=False, coordinator_epoch=4)
    log.data(200, 0, 0, 1, txn=True)  # stays open
    log.marker(200, 0, commit=True, coordinator_epoch=4)["record_count"] = 0  # emptied by the cleaner
    log.data(300, 0, 0, 1)
    batches = spark.createDataFrame(log.rows, BATCHES)
    columns = ["cluster_id", "topic", "partition", "producer_id", "producer_epoch", "base_offset", "control_type"]
    replayed = replay(batches, AuditSettings())
    expected = replayed.where("is_producer_row AND is_marker").select(*columns, "coordinator_epoch", "max_timestamp")
    actual = markers_of(transaction_parts().of(replayed))

    assertDataFrameEqual(actual.select(*expected.columns), expected)
    assert actual.count() == 3
