"""`findings`: one row per rule violation or notable event, with the evidence that triggered it."""

from pyspark.sql import types as T

FINDINGS = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("rule_code", T.StringType(), False),
        T.StructField("rule_name", T.StringType(), False),
        T.StructField("severity", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("base_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("segment", T.StringType(), True),
        T.StructField("position", T.LongType(), True),
        T.StructField("message", T.StringType(), False),
        T.StructField("evidence", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("broker_id", T.IntegerType(), True),
    ]
)

FINDINGS_PARTITION_BY = ["topic"]
