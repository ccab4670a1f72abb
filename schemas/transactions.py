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
