"""`file_problems`: one row per problem found in a partition's non-segment files, with the rule it breaks.

Rules: SEG-001 (file naming, leftover `.cleaned`/`.swap`/`.deleted`), SEG-004 (`.index`), SEG-005
(`.timeindex`), SEG-006 (`partition.metadata`), LEP-001 (`leader-epoch-checkpoint` format) and SNP-001
(corrupt producer snapshot), spec §6.1 and §6.6. `position` is the byte position in a binary file, null for
text files and file names.
"""

from pyspark.sql import types as T

FILE_PROBLEMS = T.StructType(
    [
        T.StructField("rule_code", T.StringType(), False),
        T.StructField("severity", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("position", T.LongType(), True),
        T.StructField("message", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
    ]
)

FILE_PROBLEMS_PARTITION_BY = ["topic"]
