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
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

TXN_INDEX_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the partition's topic",
    "partition": "the partition number",
    "producer_id": "producer id of the aborted transaction",
    "first_offset": "first offset of the aborted transaction",
    "last_offset": "offset of its ABORT marker",
    "last_stable_offset": "LSO the broker computed when it wrote the marker",
    "version": "entry version (0)",
    "entry_status": "`ok`, or `truncated` for trailing bytes that make no 34-byte entry",
    "segment_base_offset": "base offset of the segment owning the `.txnindex`",
    "position": "byte position of the entry in the file",
    "source_file": "path of the file the row was read from, as given under --input",
    "source_format": "how the input was read: `segment` (log dir), `dumplog` (kafka-dump-log text) or `columnar`",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
