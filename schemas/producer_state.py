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
    ]
)

PRODUCER_STATE_PARTITION_BY = ["topic"]
