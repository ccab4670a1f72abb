"""`read_committed`: what a read_committed consumer of each partition must see, as the audit reconstructs it.

One table with two kinds of rows, so that a client or lag-exporter test reads one table for one partition:

* `kind = PARTITION`, one per audited partition: the log start, the high watermark, the first unstable offset and
  the last stable offset (the fetch limit of read_committed), with no producer columns;
* `kind = ABORTED`, one per aborted transaction with data: the range the consumer must skip, `producer_id`,
  `first_offset` (the aborted-transaction index's firstOffset, what the broker sends in a fetch response),
  `last_offset` (its last data batch) and `abort_marker_offset` (where the skipping ends), with its record count;
  the offset columns of the partition are null on these rows.

Ranges are the replay's, not the `.txnindex` file's (IDX-* findings say where the two differ). The high
watermark is the replication-offset-checkpoint value when the log dir's checkpoints were ingested
(`high_watermark_source = checkpoint`), otherwise the log end offset (`log_end`); the last stable offset is the
first unstable offset when it is below the high watermark, else the high watermark (spec §2.8).
"""

from pyspark.sql import types as T

KIND_PARTITION = "PARTITION"
KIND_ABORTED = "ABORTED"
HW_FROM_CHECKPOINT = "checkpoint"
HW_FROM_LOG_END = "log_end"

READ_COMMITTED = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
        T.StructField("kind", T.StringType(), False),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("first_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("abort_marker_offset", T.LongType(), True),
        T.StructField("aborted_records", T.LongType(), True),
        T.StructField("log_start_offset", T.LongType(), True),
        T.StructField("log_end_offset", T.LongType(), True),
        T.StructField("high_watermark", T.LongType(), True),
        T.StructField("high_watermark_source", T.StringType(), True),
        T.StructField("first_unstable_offset", T.LongType(), True),
        T.StructField("last_stable_offset", T.LongType(), True),
    ]
)

READ_COMMITTED_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "run_id": "run that wrote the row",
    "topic": "the partition's topic",
    "partition": "the partition number",
    "broker_id": "broker whose replica was audited",
    "cluster_id": 'cluster of the partition (`batches.cluster_id`); "" when unknown',
    "kind": "`PARTITION` (the partition's offsets) or `ABORTED` (a range a read_committed consumer skips)",
    "producer_id": "ABORTED: producer id of the aborted transaction",
    "first_offset": "ABORTED: its first offset (the aborted-transaction index's firstOffset)",
    "last_offset": "ABORTED: last offset of its last data batch",
    "abort_marker_offset": "ABORTED: offset of the ABORT marker, where the skipping ends",
    "aborted_records": "ABORTED: records the consumer skips",
    "log_start_offset": "PARTITION: first offset of the log",
    "log_end_offset": "PARTITION: offset after the last entry",
    "high_watermark": "PARTITION: the replication-offset-checkpoint value, else the log end",
    "high_watermark_source": "PARTITION: `checkpoint` or `log_end`",
    "first_unstable_offset": "PARTITION: first offset of the earliest open transaction; null when none",
    "last_stable_offset": "PARTITION: the fetch limit of read_committed consumers",
}
