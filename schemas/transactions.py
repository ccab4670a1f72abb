"""`transactions`: every transaction reconstructed per (topic, partition, producer id) from data and markers.

An OPEN transaction (no marker yet) carries `cause`, why it has none as far as the log and the coordinator
records tell (one of CAUSES), `cause_evidence`, and the `kafka-transactions.sh abort` command that ends it; the
three are null for closed transactions.
"""

from pyspark.sql import types as T

OUTCOME_COMMITTED = "COMMITTED"
OUTCOME_ABORTED = "ABORTED"
OUTCOME_OPEN = "OPEN"
OUTCOME_EMPTY = "EMPTY"  # a marker that closed no open transaction (spec §6.0a.7)

# Why an open transaction has no marker (pipeline.audit.state.hanging), in the order they are decided.
CAUSE_LATE_DATA = "LATE_DATA"  # data of an epoch whose transaction the producer's marker had already closed
CAUSE_MARKER_MISSING = "MARKER_MISSING"  # the coordinator decided (Prepare*) but no marker reached the partition
CAUSE_ID_EXPIRED = "TRANSACTIONAL_ID_EXPIRED"  # the id's latest record is a tombstone (or a persisted Dead)
CAUSE_NO_TRANSACTIONAL_ID = "NO_TRANSACTIONAL_ID"  # the coordinator records name the producer id nowhere
CAUSE_PARTITION_NOT_ADDED = "PARTITION_NOT_ADDED"  # no Ongoing record of (producer id, epoch) lists the partition
CAUSE_ONGOING = "COORDINATOR_ONGOING"  # the coordinator's transaction is still Ongoing with the partition
CAUSE_UNKNOWN = "UNKNOWN"  # no coordinator records that could tell
CAUSES = (
    CAUSE_LATE_DATA,
    CAUSE_MARKER_MISSING,
    CAUSE_ID_EXPIRED,
    CAUSE_NO_TRANSACTIONAL_ID,
    CAUSE_PARTITION_NOT_ADDED,
    CAUSE_ONGOING,
    CAUSE_UNKNOWN,
)

TRANSACTIONS = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), False),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("first_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("marker_offset", T.LongType(), True),
        T.StructField("marker_epoch", T.IntegerType(), True),
        T.StructField("coordinator_epoch", T.IntegerType(), True),
        T.StructField("outcome", T.StringType(), False),
        T.StructField("batch_count", T.LongType(), False),
        T.StructField("record_count", T.LongType(), False),
        T.StructField("start_timestamp", T.LongType(), True),
        T.StructField("end_timestamp", T.LongType(), True),
        T.StructField("duration_ms", T.LongType(), True),
        T.StructField("transaction_version", T.StringType(), True),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
        T.StructField("cause", T.StringType(), True),
        T.StructField("cause_evidence", T.MapType(T.StringType(), T.StringType(), True), True),
        T.StructField("abort_command", T.StringType(), True),
    ]
)

TRANSACTIONS_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "run_id": "run that wrote the row",
    "topic": "the partition's topic",
    "partition": "the partition number",
    "producer_id": "producer id of the transaction",
    "producer_epoch": "epoch of its data",
    "first_offset": "offset of its first data batch",
    "last_offset": "last offset of its last data batch",
    "marker_offset": "offset of the closing marker; null when open",
    "marker_epoch": "epoch of the marker",
    "coordinator_epoch": "coordinator epoch of the marker",
    "outcome": "`COMMITTED`, `ABORTED`, `OPEN` or `EMPTY` (a marker that closed nothing)",
    "batch_count": "its data batches",
    "record_count": "its data records",
    "start_timestamp": "max timestamp of its first data batch",
    "end_timestamp": "marker timestamp (last batch's when open)",
    "duration_ms": "end - start",
    "transaction_version": "transaction version it was judged by (as in `producer_state`)",
    "broker_id": "broker whose replica was audited",
    "cluster_id": 'cluster of the partition (`batches.cluster_id`); "" when unknown',
    "cause": "why an `OPEN` transaction has no marker (one of CAUSES); null when closed",
    "cause_evidence": "what the cause was read from: the records and offsets that show it",
    "abort_command": "the `kafka-transactions.sh abort` command (with `--start-offset`) that ends an open one",
}
