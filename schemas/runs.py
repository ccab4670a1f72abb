"""`runs`: one row per invocation, so every table row can be traced to the run and config that wrote it."""

from pyspark.sql import types as T

RUNS = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("command", T.StringType(), False),
        T.StructField("started_at", T.TimestampType(), False),
        T.StructField("finished_at", T.TimestampType(), True),
        T.StructField("status", T.StringType(), False),
        T.StructField("inputs", T.ArrayType(T.StringType()), True),
        T.StructField("reference_time_ms", T.LongType(), True),
        T.StructField("delta_backend", T.StringType(), True),
        T.StructField("counts", T.MapType(T.StringType(), T.LongType()), True),
        T.StructField("config_json", T.StringType(), True),
        T.StructField("tool_version", T.StringType(), True),
        # a successful writer's publication: the version of every table as the run left it
        T.StructField("table_versions", T.MapType(T.StringType(), T.LongType()), True),
    ]
)
