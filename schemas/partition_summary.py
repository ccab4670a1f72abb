"""`partition_summary`: one row per topic partition: offsets, stability and counts by severity and rule.

`read_uncommitted_records` counts the data records a read_uncommitted consumer gets (everything below the
high watermark, here the log end); `read_committed_records` those a read_committed consumer gets: data
records of batches ending below the LSO, less the records of aborted transactions that start below it.
"""

from pyspark.sql import types as T

PARTITION_SUMMARY = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("log_start_offset", T.LongType(), True),
        T.StructField("log_end_offset", T.LongType(), True),
        T.StructField("first_unstable_offset", T.LongType(), True),
        T.StructField("last_stable_offset", T.LongType(), True),
        T.StructField("batch_count", T.LongType(), False),
        T.StructField("record_count", T.LongType(), False),
        T.StructField("producer_count", T.LongType(), False),
        T.StructField("open_transactions", T.LongType(), False),
        T.StructField("hanging_transactions", T.LongType(), False),
        T.StructField("committed_transactions", T.LongType(), False),
        T.StructField("aborted_transactions", T.LongType(), False),
        T.StructField("aborted_records", T.LongType(), False),
        T.StructField("read_uncommitted_records", T.LongType(), False),
        T.StructField("read_committed_records", T.LongType(), False),
        T.StructField("findings_by_severity", T.MapType(T.StringType(), T.LongType()), True),
        T.StructField("findings_by_rule", T.MapType(T.StringType(), T.LongType()), True),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
        T.StructField("compacted_by", T.StringType(), True),
        T.StructField("cleaner_offset", T.LongType(), True),
    ]
)

PARTITION_SUMMARY_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "run_id": "run that wrote the row",
    "topic": "the partition's topic",
    "partition": "the partition number",
    "log_start_offset": "the larger of the first retained offset and `log-start-offset-checkpoint`",
    "log_end_offset": "offset after the last batch",
    "first_unstable_offset": "first offset of the earliest open transaction; null when none",
    "last_stable_offset": "offset below which read_committed consumers read",
    "batch_count": "batches of the partition",
    "record_count": "records of the partition",
    "producer_count": "distinct producer ids",
    "open_transactions": "transactions without a marker",
    "hanging_transactions": "open transactions older than transaction.max.timeout.ms + 5 min (LSO-002)",
    "committed_transactions": "transactions closed by COMMIT",
    "aborted_transactions": "transactions closed by ABORT",
    "aborted_records": "data records of aborted transactions",
    "read_uncommitted_records": "data records a read_uncommitted consumer gets",
    "read_committed_records": "data records a read_committed consumer gets",
    "findings_by_severity": "findings of the partition per severity",
    "findings_by_rule": "findings of the partition per rule code",
    "broker_id": "broker whose replica was audited",
    "cluster_id": 'cluster of the partition (`batches.cluster_id`); "" when unknown',
    "compacted_by": "how the partition is known to be compacted: `configured` (audit.compacted_topics), `cleaner "
    "checkpoint` (its log dir's cleaner-offset-checkpoint lists it) or `delete horizon` (a batch the cleaner "
    "rewrote); null when it is not",
    "cleaner_offset": "the audited replica's cleaner-offset-checkpoint entry: the cleaner has compacted the log "
    "below it; null when none",
}
