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
    ]
)

OFFSET_COMMITS_PARTITION_BY = ["topic"]
