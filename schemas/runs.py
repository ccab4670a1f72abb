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
        # the warehouse layout a successful writer left (pipeline.tables.upgrade)
        T.StructField("layout_version", T.IntegerType(), True),
    ]
)

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "run_id": "the run id (UTC start time plus a random suffix)",
    "command": "run, ingest, audit, report, vacuum, upgrade, ...",
    "started_at": "start time",
    "finished_at": "end time; null while running or after a kill",
    "status": "`succeeded` or `failed`",
    "inputs": "the --input roots",
    "reference_time_ms": "--reference-time in epoch ms; null when not given",
    "delta_backend": "`native` or `embedded`",
    "counts": "rows written per step, segments per ingest outcome, findings per severity, plan costs",
    "config_json": "effective configuration",
    "tool_version": "produce-audit version",
    "table_versions": "version of every table as a successful writing run left it (what readers follow)",
    "layout_version": "warehouse layout a successful writer left: 2, tables partitioned by cluster_id then topic; "
    "null before it was recorded (1, by topic only)",
}
