"""`batches`: one row per entry found in a log segment (bronze layer).

Every v2 batch header field of spec §1.1 is kept, plus the decoded control record of control batches, what
walking the records found (`record_problem`, `max_record_timestamp`; null when not checked) and the provenance
of the entry. Entries the broker's iterator would reject (truncated tail, too small, bad magic) are kept as
rows too, with `entry_status` saying why, so integrity rules are plain filters.
The audit keys (topic, partition, producer_id, base_offset) come first so Delta collects stats on them.
"""

from pyspark.sql import types as T

# entry_status values
STATUS_OK = "ok"
STATUS_LEGACY = "legacy"  # magic 0/1 message set: recognised and skipped for producer state
STATUS_TRUNCATED = "truncated_tail"  # FileLogInputStream stops: partial trailing entry
STATUS_TOO_SMALL = "too_small"  # size < 14 (or v2 size < 61): the iterator cannot go on
STATUS_BAD_MAGIC = "bad_magic"  # byte 16 not in {0, 1, 2}: the iterator cannot go on
STATUS_UNREADABLE = "unreadable"  # the file could not be opened or read; entry_note says why

BATCHES = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("base_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("base_sequence", T.IntegerType(), True),
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("is_transactional", T.BooleanType(), True),
        T.StructField("is_control", T.BooleanType(), True),
        T.StructField("control_type", T.IntegerType(), True),
        T.StructField("coordinator_epoch", T.IntegerType(), True),
        T.StructField("record_count", T.IntegerType(), True),
        T.StructField("base_timestamp", T.LongType(), True),
        T.StructField("max_timestamp", T.LongType(), True),
        T.StructField("max_record_timestamp", T.LongType(), True),  # largest record timestamp; null: no records
        T.StructField("partition_leader_epoch", T.IntegerType(), True),
        T.StructField("magic", T.IntegerType(), True),
        T.StructField("attributes", T.IntegerType(), True),
        T.StructField("compression", T.IntegerType(), True),
        T.StructField("timestamp_type", T.IntegerType(), True),
        T.StructField("has_delete_horizon", T.BooleanType(), True),
        T.StructField("last_offset_delta", T.IntegerType(), True),
        T.StructField("batch_length", T.IntegerType(), True),
        T.StructField("crc", T.LongType(), True),
        T.StructField("crc_valid", T.BooleanType(), True),
        T.StructField("record_problem", T.StringType(), True),  # why the records do not parse (FMT-006)
        T.StructField("entry_status", T.StringType(), False),
        T.StructField("entry_note", T.StringType(), True),
        T.StructField("segment_base_offset", T.LongType(), False),
        T.StructField("position", T.LongType(), False),
        T.StructField("size_bytes", T.LongType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("source_format", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
    ]
)

BATCHES_PARTITION_BY = ["topic"]
