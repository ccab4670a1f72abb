"""`partition_metadata`: one row per `partition.metadata` file (spec §1.2).

`version` and `topic_id` (URL-safe base64, as Kafka prints it) are filled as far as they could be read;
`problem` says what the broker would reject (SEG-006), null for a good file.
"""

from pyspark.sql import types as T

PARTITION_METADATA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("version", T.IntegerType(), True),
        T.StructField("topic_id", T.StringType(), True),
        T.StructField("problem", T.StringType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

PARTITION_METADATA_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the partition's topic",
    "partition": "the partition number",
    "version": "version line of the file (0)",
    "topic_id": "topic id (URL-safe base64, as Kafka prints it)",
    "problem": "what the broker would reject (SEG-006); null for a good file",
    "source_file": "path of the file the row was read from, as given under --input",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
