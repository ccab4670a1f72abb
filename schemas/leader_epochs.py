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
    ]
)

LEADER_EPOCHS_PARTITION_BY = ["topic"]
