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
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

FINDINGS_PARTITION_BY = ["cluster_id", "topic"]

# The finding a check makes: every column but the run's id, in the table's order.
FINDING_FIELDS = tuple(field.name for field in FINDINGS.fields if field.name != "run_id")

SEVERITIES = ("INFO", "WARN", "ERROR", "CRITICAL")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}


def severity_at_least(threshold: str) -> tuple[str, ...]:
    """Severities that reach `threshold` (for --fail-on)."""
    return tuple(s for s in SEVERITIES if SEVERITY_RANK[s] >= SEVERITY_RANK[threshold])


# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "run_id": "run that wrote the row",
    "rule_code": "rule code (docs/rules.md)",
    "rule_name": "rule name",
    "severity": "CRITICAL, ERROR, WARN or INFO",
    "topic": "topic of the finding",
    "partition": "partition of the finding; null for topic-wide findings",
    "producer_id": "producer id concerned, if any",
    "producer_epoch": "producer epoch the finding is filed under",
    "base_offset": "first offset of the batch or record where the violation shows",
    "last_offset": "its last offset",
    "segment": "segment or file the finding points at",
    "position": "byte position in that file",
    "message": "one line saying what is wrong",
    "evidence": "the values that triggered the rule, by name",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": 'cluster of the partition (`batches.cluster_id`); "" when unknown',
}
