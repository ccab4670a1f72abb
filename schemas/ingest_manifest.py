"""`ingest_manifest`: one row per `.log` segment whose entries are in `batches`, so a rerun can skip it.

The row describes the file as the ingest that decoded it saw it: size and modification time from the listing,
and the hashes of its first and last entries, which change when a broker rewrites the file in place with the
same size (log cleaner, recovery). `pipeline.ingest_manifest` says how a run uses them. A hash is null when the
file could not be read completely; such a segment is read again by the next run.
Partitioned by topic like `batches`, and always replaced together with it.
"""

from pyspark.sql import types as T

INGEST_MANIFEST = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("source_file", T.StringType(), False),  # as in batches.source_file
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("segment_base_offset", T.LongType(), False),
        T.StructField("size_bytes", T.LongType(), False),
        T.StructField("mtime_ns", T.LongType(), True),  # ns since the epoch; null when the filesystem has none
        T.StructField("first_batch_hash", T.StringType(), True),  # of the entry at position 0
        T.StructField("last_batch_position", T.LongType(), True),  # null when the file holds no entry
        T.StructField("last_batch_hash", T.StringType(), True),
        T.StructField("is_active", T.BooleanType(), False),  # the last segment of its partition directory
        T.StructField("rows_ingested", T.LongType(), False),  # its rows in `batches`
        T.StructField("run_id", T.StringType(), False),
        T.StructField("ingested_at", T.TimestampType(), False),
    ]
)

INGEST_MANIFEST_PARTITION_BY = ["topic"]
