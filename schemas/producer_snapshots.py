"""`producer_snapshots`: one row per producer entry of a `<offset>.snapshot` file (spec §1.4).

A snapshot file that cannot be decoded (bad version, CRC mismatch, truncated entries, trailing bytes)
gives one row with `file_status` saying why and null producer fields, so SNP-001 is a filter.
"""

from pyspark.sql import types as T

PRODUCER_SNAPSHOTS = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("snapshot_offset", T.LongType(), False),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("offset_delta", T.IntegerType(), True),
        T.StructField("timestamp", T.LongType(), True),
        T.StructField("coordinator_epoch", T.IntegerType(), True),
        T.StructField("current_txn_first_offset", T.LongType(), True),
        T.StructField("version", T.IntegerType(), True),
        T.StructField("crc_valid", T.BooleanType(), True),
        T.StructField("file_status", T.StringType(), False),
        T.StructField("file_note", T.StringType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("source_format", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
    ]
)

PRODUCER_SNAPSHOTS_PARTITION_BY = ["topic"]
