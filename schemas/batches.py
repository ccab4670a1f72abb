"""`batches`: one row per entry found in a log segment (bronze layer).

Every v2 batch header field of spec §1.1 is kept, plus the decoded control record of control batches, what
walking the records found (`record_problem`, `max_record_timestamp`; null when not checked) and the provenance
of the entry. Entries the broker's iterator would reject (truncated tail, too small, bad magic) are kept as
rows too, with `entry_status` saying why, so integrity rules are plain filters.
The audit keys (topic, partition, producer_id, base_offset) come first so Delta collects stats on them.
"""

from pyspark.sql import types as T

# ControlRecordType ids: the key of a control record (spec §1.3); ABORT and COMMIT are transaction markers.
CONTROL_TYPES = ("ABORT", "COMMIT", "LeaderChange", "SnapshotHeader", "SnapshotFooter", "KRaftVersion", "KRaftVoters")
CONTROL_ABORT = CONTROL_TYPES.index("ABORT")
CONTROL_COMMIT = CONTROL_TYPES.index("COMMIT")

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
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

BATCHES_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the partition's topic",
    "partition": "the partition number",
    "producer_id": "producerId (-1: none); null for entries whose header could not be read",
    "base_offset": "first offset of the batch",
    "last_offset": "base offset + lastOffsetDelta",
    "producer_epoch": "producerEpoch (-1: none)",
    "base_sequence": "baseSequence (-1: none)",
    "last_sequence": "sequence of the last record, wrapping past 2147483647 (-1: none)",
    "is_transactional": "attribute bit 4: part of a transaction",
    "is_control": "attribute bit 5: a control batch (marker)",
    "control_type": "decoded control record type: 0 ABORT, 1 COMMIT, other KRaft types; null for data",
    "coordinator_epoch": "coordinator epoch of a COMMIT/ABORT marker; null for data",
    "record_count": "recordsCount of the header",
    "base_timestamp": "baseTimestamp (the delete horizon when that bit is set)",
    "max_timestamp": "maxTimestamp of the header",
    "max_record_timestamp": "largest record timestamp found walking the records; null when not walked or no records",
    "partition_leader_epoch": "leader epoch stamped by the leader that appended it",
    "magic": "format version of the entry: 2, or 0/1 for legacy message sets",
    "attributes": "raw attributes field",
    "compression": "codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd",
    "timestamp_type": "0 CreateTime, 1 LogAppendTime",
    "has_delete_horizon": "attribute bit 6: baseTimestamp is a delete horizon",
    "last_offset_delta": "lastOffsetDelta of the header",
    "batch_length": "batchLength of the header (size - 12)",
    "crc": "stored CRC",
    "crc_valid": "the stored CRC matches the bytes (FMT-004 when false)",
    "record_problem": "why the records do not parse as Kafka parses them (FMT-006); null if they do or were not walked",
    "entry_status": "`ok`, `legacy`, `truncated_tail`, `too_small`, `bad_magic` or `unreadable`",
    "entry_note": "why an entry is not `ok`",
    "segment_base_offset": "base offset of the segment holding the entry (its file name); fetched: the log start read",
    "position": "byte position of the entry in the segment; fetched: its base offset (a response has no position)",
    "size_bytes": "bytes the entry takes in the file (batchLength + 12)",
    "source_file": "path of the file the row was read from, as given under --input; fetched: `kafka://.../TOPIC-P`",
    "source_format": "how the input was read: `segment` (log dir), `dumplog` (kafka-dump-log text), `columnar`, or "
    "`fetch` (the Kafka protocol)",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`), or of the leader it was fetched "
    "from; null when unknown",
    "cluster_id": "`cluster.id` of the log dir (`meta.properties`) or the fetched cluster, else `ingest.cluster_id`; "
    '"" when unknown',
}
