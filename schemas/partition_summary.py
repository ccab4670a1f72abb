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
    ]
)

PARTITION_SUMMARY_PARTITION_BY = ["topic"]
