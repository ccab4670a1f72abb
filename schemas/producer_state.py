"""`producer_state`: per (topic, partition, producer id) state at the end of the log.

What `kafka-transactions.sh describe-producers` would show for the partition.
"""

from pyspark.sql import types as T

PRODUCER_STATE = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), False),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("last_timestamp", T.LongType(), True),
        T.StructField("coordinator_epoch", T.IntegerType(), True),
        T.StructField("current_txn_start_offset", T.LongType(), True),
        T.StructField("batch_count", T.LongType(), False),
        T.StructField("is_transactional", T.BooleanType(), True),
        T.StructField("transaction_version", T.StringType(), True),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

PRODUCER_STATE_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "run_id": "run that wrote the row",
    "topic": "the partition's topic",
    "partition": "the partition number",
    "producer_id": "the producer id",
    "producer_epoch": "its current epoch",
    "last_sequence": "last sequence written",
    "last_offset": "last offset written",
    "last_timestamp": "max timestamp of its last batch or marker",
    "coordinator_epoch": "coordinator epoch of its last marker",
    "current_txn_start_offset": "first offset of its open transaction; null when none",
    "batch_count": "its batches on the partition",
    "is_transactional": "it wrote transactional data",
    "transaction_version": (
        "version the audit judged it by, and its source: `N/configured` (`audit.transaction_version`), "
        "`N/coordinator` (ClientTransactionVersion of its `__transaction_state` Ongoing records), `2/inferred` (a "
        "commit bumped the epoch), `1/inferred` (a marker at the data epoch), `1/assumed` (no evidence)"
    ),
    "broker_id": "broker whose replica was audited",
    "cluster_id": 'cluster of the partition (`batches.cluster_id`); "" when unknown',
}
