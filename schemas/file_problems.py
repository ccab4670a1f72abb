"""`file_problems`: one row per problem the reader saw in a partition's non-segment files, by kind.

The reader says what it saw; the audit decides what it means (pipeline.audit.rules.files maps each kind to its
rule). `position` is the byte position in a binary file, null for text files and file names.
"""

from pyspark.sql import types as T

FILE_PROBLEMS = T.StructType(
    [
        T.StructField("kind", T.StringType(), False),  # one of PROBLEM_KINDS
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("position", T.LongType(), True),
        T.StructField("message", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

FILE_PROBLEMS_PARTITION_BY = ["cluster_id", "topic"]

# problem kinds
PROBLEM_FILE_NAME = "file_name"  # not a 20-digit offset with a known suffix
PROBLEM_LEFTOVER_FILES = "leftover_files"  # a partition dir's .deleted/.cleaned/.swap files, one row for all of them
PROBLEM_OFFSET_INDEX = "offset_index"  # an `.index` entry or size that does not fit the segment
PROBLEM_TIME_INDEX = "time_index"  # a `.timeindex` entry or size that does not fit the segment
PROBLEM_PARTITION_METADATA = "partition_metadata"  # `partition.metadata` malformed
PROBLEM_LEADER_EPOCH_CHECKPOINT = "leader_epoch_checkpoint"  # `leader-epoch-checkpoint` malformed
PROBLEM_KINDS = (
    PROBLEM_FILE_NAME,
    PROBLEM_LEFTOVER_FILES,
    PROBLEM_OFFSET_INDEX,
    PROBLEM_TIME_INDEX,
    PROBLEM_PARTITION_METADATA,
    PROBLEM_LEADER_EPOCH_CHECKPOINT,
)

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "kind": "`file_name`, `leftover_files`, `offset_index`, `time_index`, `partition_metadata` or `leader_epoch_checkpoint`",
    "topic": "the partition's topic",
    "partition": "the partition number",
    "source_file": "the file with the problem",
    "position": "byte position in a binary file; null for text files and file names",
    "message": "what the reader saw",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
