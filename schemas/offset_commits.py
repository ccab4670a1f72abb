"""`offset_commits`: one row per offset commit written by a transactional producer on `__consumer_offsets`.

Only records of transactional data batches are kept: they are the TxnOffsetCommit writes that §6.8 (XTX-009)
matches against the `__transaction_state` partition sets. `topic`/`partition` are the `__consumer_offsets`
partition holding the record; the committed position is `committed_topic`/`committed_partition`/
`committed_offset`. `producer_id`/`producer_epoch` are the batch's. Group metadata records (key version 2)
are not offset commits and are not kept. A tombstone (null value) has `is_tombstone` true and null value
fields; fields a value version does not have are null (`leader_epoch` before v3, `expire_timestamp` outside
v1). A record that cannot be decoded keeps what was decoded before the fault and names it in `decode_error`.
"""

from pyspark.sql import types as T

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
GROUP_METADATA_KEY_VERSION = 2

OFFSET_COMMITS = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("group", T.StringType(), True),
        T.StructField("committed_topic", T.StringType(), True),
        T.StructField("committed_partition", T.IntegerType(), True),
        T.StructField("committed_offset", T.LongType(), True),
        T.StructField("leader_epoch", T.IntegerType(), True),
        T.StructField("metadata", T.StringType(), True),
        T.StructField("commit_timestamp", T.LongType(), True),
        T.StructField("expire_timestamp", T.LongType(), True),
        T.StructField("record_offset", T.LongType(), True),
        T.StructField("batch_base_offset", T.LongType(), True),
        T.StructField("key_version", T.IntegerType(), True),
        T.StructField("value_version", T.IntegerType(), True),
        T.StructField("is_tombstone", T.BooleanType(), True),
        T.StructField("decode_error", T.StringType(), True),
        T.StructField("segment_base_offset", T.LongType(), True),
        T.StructField("position", T.LongType(), True),  # of the batch in the segment
        T.StructField("source_file", T.StringType(), False),
        T.StructField("source_format", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

OFFSET_COMMITS_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the `__consumer_offsets` topic",
    "partition": "the `__consumer_offsets` partition holding the record",
    "producer_id": "producer id of the transactional batch",
    "producer_epoch": "producer epoch of the batch",
    "group": "consumer group id",
    "committed_topic": "topic whose position is committed",
    "committed_partition": "partition whose position is committed",
    "committed_offset": "the committed offset",
    "leader_epoch": "leader epoch stored with the commit (value v3+); null before",
    "metadata": "commit metadata string",
    "commit_timestamp": "commit time (ms)",
    "expire_timestamp": "expiry time (value v1 only); null otherwise",
    "record_offset": "offset of the record",
    "batch_base_offset": "base offset of its batch",
    "key_version": "key version",
    "value_version": "value version; null for a tombstone",
    "is_tombstone": "the record has a null value",
    "decode_error": "why the record could not be decoded fully; null when it could",
    "segment_base_offset": "base offset of the segment holding the entry (its file name)",
    "position": "byte position of the batch in the segment",
    "source_file": "path of the file the row was read from, as given under --input",
    "source_format": "how the input was read: `segment` (log dir), `dumplog` (kafka-dump-log text) or `columnar`",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
