"""`transactions`: every transaction reconstructed per (topic, partition, producer id) from data and markers."""

from pyspark.sql import types as T

OUTCOME_COMMITTED = "COMMITTED"
OUTCOME_ABORTED = "ABORTED"
OUTCOME_OPEN = "OPEN"
OUTCOME_EMPTY = "EMPTY"  # a marker that closed no open transaction (spec §6.0a.7)

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
    ]
)

TRANSACTIONS_PARTITION_BY = ["topic"]

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
}
