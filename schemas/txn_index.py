"""`txn_index`: one row per entry of a partition's `.txnindex` files (aborted-transaction index, spec §1.3).

`entry_status` is 'ok' for a decoded 34-byte entry, 'truncated' for trailing bytes that do not make an
entry (the file size is not a multiple of 34).
"""

from pyspark.sql import types as T

TXN_INDEX = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("first_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("last_stable_offset", T.LongType(), True),
        T.StructField("version", T.IntegerType(), True),
        T.StructField("entry_status", T.StringType(), False),
        T.StructField("segment_base_offset", T.LongType(), False),
        T.StructField("position", T.LongType(), False),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("source_format", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
    ]
)

TXN_INDEX_PARTITION_BY = ["topic"]
