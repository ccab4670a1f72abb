"""`ingest_manifest`: one row per `.log` segment whose entries are in `batches`, so a rerun can skip it.

The row describes the file as the ingest that decoded it saw it: size and modification time from the listing,
and the hashes of its first and last entries, which change when a broker rewrites the file in place with the
same size (log cleaner, recovery). `pipeline.ingest_manifest` says how a run uses them. A hash is null when the
file could not be read completely; such a segment is read again by the next run.
Partitioned by (cluster, topic) like `batches`, and always replaced together with it.
"""

from pyspark.sql import types as T

INGEST_MANIFEST = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("source_file", T.StringType(), False),  # as in batches.source_file
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
        T.StructField("segment_base_offset", T.LongType(), False),
        T.StructField("size_bytes", T.LongType(), False),
        T.StructField("mtime_ns", T.LongType(), True),  # ns since the epoch; null when the filesystem has none
        T.StructField("first_batch_hash", T.StringType(), True),  # of the entry at position 0
        T.StructField("last_batch_position", T.LongType(), True),  # null when the file holds no entry
        T.StructField("last_batch_hash", T.StringType(), True),
        T.StructField("is_active", T.BooleanType(), False),  # the last segment of its partition directory
        T.StructField("rows_ingested", T.LongType(), False),  # its rows in `batches`
        T.StructField("decoded_bytes", T.LongType(), True),  # where a decode of the grown file goes on
        T.StructField("run_id", T.StringType(), False),
        T.StructField("ingested_at", T.TimestampType(), False),
    ]
)

INGEST_MANIFEST_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the partition's topic",
    "partition": "the partition number",
    "source_file": "the segment, spelled as in `batches.source_file`",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": "cluster the segment's rows were given (`batches.cluster_id`): a change decodes it again",
    "segment_base_offset": "base offset of the segment (its file name)",
    "size_bytes": "file size as listed",
    "mtime_ns": "modification time in ns since the epoch; null when the filesystem has none",
    "first_batch_hash": "BLAKE2b-128 of the first 61 bytes of the entry at position 0",
    "last_batch_position": "byte position of the last entry; null when the file holds none",
    "last_batch_hash": "BLAKE2b-128 of the first 61 bytes of the last entry",
    "is_active": "the last segment of its partition directory when decoded",
    "rows_ingested": "its rows in `batches`",
    "decoded_bytes": "end of its last entry when every entry before it decoded whole (`ok` or `legacy`); a run that "
    "finds the file grown decodes only from there (`appended`); null: decoded whole next time it changes",
    "run_id": "run that decoded it",
    "ingested_at": "when that run decoded it",
}
