"""`global_transactions`: each coordinator decision with the marker found on every partition it lists.

One row per Prepare* record of `__transaction_state` (transactional id, producer id, epoch, decision); `topic` and
`partition` say which `__transaction_state` partition holds the record. A torn transaction (COMMIT on one
partition, ABORT or nothing on another) has `is_torn` set.
"""

from pyspark.sql import types as T

DECISION_COMMIT = "COMMIT"
DECISION_ABORT = "ABORT"

PARTITION_MARKER = T.StructType(
    [
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("in_input", T.BooleanType(), True),  # the audited batches hold this partition
        T.StructField("marker_offset", T.LongType(), True),  # null: no marker of (producer id, epoch) found
        T.StructField("control_type", T.IntegerType(), True),  # 0 ABORT, 1 COMMIT
        T.StructField("coordinator_epoch", T.IntegerType(), True),
    ]
)

GLOBAL_TRANSACTIONS = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("transactional_id", T.StringType(), True),
        T.StructField("producer_id", T.LongType(), False),
        T.StructField("producer_epoch", T.IntegerType(), False),
        T.StructField("decision", T.StringType(), False),
        T.StructField("prepare_offset", T.LongType(), False),
        T.StructField("prepare_timestamp", T.LongType(), True),
        T.StructField("completed", T.BooleanType(), False),
        T.StructField("transaction_version", T.IntegerType(), True),
        T.StructField("partitions", T.ArrayType(PARTITION_MARKER, True), False),
        T.StructField("markers_agreeing", T.IntegerType(), False),
        T.StructField("markers_contradicting", T.IntegerType(), False),
        T.StructField("markers_missing", T.IntegerType(), False),
        T.StructField("is_torn", T.BooleanType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

GLOBAL_TRANSACTIONS_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "run_id": "run that wrote the row",
    "topic": "the `__transaction_state` topic",
    "partition": "the `__transaction_state` partition holding the record",
    "transactional_id": "transactional id of the record",
    "producer_id": "producer id of the decision",
    "producer_epoch": "producer epoch of the decision",
    "decision": "`COMMIT` or `ABORT`",
    "prepare_offset": "offset of the Prepare* record",
    "prepare_timestamp": "timestamp of the Prepare* record",
    "completed": "a later record of the id (Complete*) follows the decision",
    "transaction_version": "ClientTransactionVersion of the record",
    "partitions": "each listed partition with whether it is in the input and the marker found there",
    "markers_agreeing": "listed partitions in the input whose marker agrees with the decision",
    "markers_contradicting": "listed partitions in the input whose marker contradicts it",
    "markers_missing": "listed partitions in the input with no marker of the decision; on a compacted partition "
    "only while the producer's data there is open (the cleaner removes a marker once its data is gone)",
    "is_torn": "a marker contradicts the decision, or the decision completed and a partition has no marker",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": 'cluster of the `__transaction_state` log dir, and of the partitions it lists; "" when unknown',
}
