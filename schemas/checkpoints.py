"""`checkpoints`: one row per entry of a broker log dir's offset checkpoint files (spec §1.2).

`kind` is the file name. The audit needs `log-start-offset-checkpoint` (log start offset) and
`replication-offset-checkpoint` (high watermark) to reproduce the LSO; the other two are kept for reference.
A file the broker could not read gives rows with null topic, partition and offset and a `problem`.
The table is partitioned by (cluster, topic) like the others, so re-ingesting a topic replaces its rows; rows
without a topic (an unreadable file) are not kept in the table.
"""

from pyspark.sql import types as T

LOG_START_OFFSET = "log-start-offset-checkpoint"
REPLICATION_OFFSET = "replication-offset-checkpoint"
CLEANER_OFFSET = "cleaner-offset-checkpoint"
RECOVERY_POINT = "recovery-point-offset-checkpoint"
CHECKPOINT_KINDS = (LOG_START_OFFSET, REPLICATION_OFFSET, CLEANER_OFFSET, RECOVERY_POINT)

CHECKPOINTS = T.StructType(
    [
        T.StructField("kind", T.StringType(), False),
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("offset", T.LongType(), True),
        T.StructField("problem", T.StringType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

CHECKPOINTS_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "kind": "file name: log-start-offset, replication-offset (high watermark), cleaner-offset or recovery-point",
    "topic": "the partition's topic",
    "partition": "the partition number",
    "offset": "the offset the file records for the partition",
    "problem": "why the file could not be read; null when it could",
    "source_file": "path of the file the row was read from, as given under --input",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
