"""`leader_epochs`: one row per line of a partition's `leader-epoch-checkpoint` (spec §1.2).

A well-formed entry fills `epoch` and `start_offset` and leaves `problem` null. A line the broker could not
read, or a wrong version or entry count, gives a row whose `problem` says why (LEP-001); its `epoch` and
`start_offset` are null, and `line` (1-based) points at the offending line, null for an unreadable file.
"""

from pyspark.sql import types as T

LEADER_EPOCHS = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("epoch", T.IntegerType(), True),
        T.StructField("start_offset", T.LongType(), True),
        T.StructField("line", T.IntegerType(), True),
        T.StructField("problem", T.StringType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

LEADER_EPOCHS_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the partition's topic",
    "partition": "the partition number",
    "epoch": "leader epoch of the entry; null for a bad line",
    "start_offset": "first offset written in that epoch; null for a bad line",
    "line": "1-based line number of a bad line; null otherwise or for an unreadable file",
    "problem": "why the line or file is malformed (LEP-001); null when fine",
    "source_file": "path of the file the row was read from, as given under --input",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
