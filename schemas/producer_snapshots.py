"""`producer_snapshots`: one row per producer entry of a `<offset>.snapshot` file (spec §1.4).

A snapshot file that cannot be decoded (bad version, CRC mismatch, truncated entries, trailing bytes)
gives one row with `file_status` saying why and null producer fields, so SNP-001 is a filter.
`file_status` is 'ok', 'bad_version', 'truncated' (shorter than its header or its entry count says, or a
negative count), 'trailing_bytes', 'crc_mismatch' (checked in that order, so the status names the
structural fault when there is one; `crc_valid` is filled whenever the file has its 6-byte prefix) or
'unreadable' (I/O error, `file_note` says which). A valid snapshot without entries gives one 'ok' row with
null producer fields, so every snapshot file is visible (SNP-002 needs their offsets).

Values are the file's, with one exception: `current_txn_first_offset` is null where the file stores -1 (no
open transaction), which is how kafka-dump-log prints it (`None` / `OptionalLong.empty`), so a non-null
value always means an open transaction. The other "none" values stay as the broker writes them:
`last_sequence` -1 and `last_offset` -1 (no data batch retained for the producer), `offset_delta` 0, and
`coordinator_epoch` -1 (no marker seen).
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
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

PRODUCER_SNAPSHOTS_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the partition's topic",
    "partition": "the partition number",
    "snapshot_offset": "offset in the file name: state after all batches below it",
    "producer_id": "producer id of the entry; null for a file-level row",
    "producer_epoch": "epoch of the entry",
    "last_sequence": "last sequence (-1: no data batch retained)",
    "last_offset": "last data offset (-1: none)",
    "offset_delta": "last offset - first offset of the last batch",
    "timestamp": "producer's last timestamp",
    "coordinator_epoch": "last marker's coordinator epoch (-1: no marker seen)",
    "current_txn_first_offset": "first offset of the open transaction; null when none",
    "version": "snapshot file version",
    "crc_valid": "the file's CRC-32C matches",
    "file_status": "`ok`, `bad_version`, `truncated`, `trailing_bytes`, `crc_mismatch` or `unreadable`",
    "file_note": "the I/O error of an unreadable file",
    "source_file": "path of the file the row was read from, as given under --input",
    "source_format": "how the input was read: `segment` (log dir), `dumplog` (kafka-dump-log text) or `columnar`",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
