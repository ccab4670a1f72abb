"""Normal behaviour that repeats at scale, noted once per (partition, producer) with a count.

A findings table is what people alert on. The INFO findings of a rule registered with `per_producer` (the cleaner's
sequence gaps, a snapshot taken inside a transaction, an empty transaction marker, ...) come once per producer on
each replica: the first occurrence, with how many there were and the last offset among them in its evidence, not one
row per batch, marker or snapshot. Findings at WARN and above are never folded.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.registry import RULES
from schemas.findings import FINDING_FIELDS

KEY = ("rule_code", "severity", "cluster_id", "topic", "partition", "broker_id", "producer_id")


def once_per_producer(findings: DataFrame) -> DataFrame:
    """`findings` with the INFO findings of `per_producer` rules folded into one row per KEY."""
    codes = sorted(code for code, rule in RULES.items() if rule.per_producer)
    repeated = (F.col("severity") == F.lit("INFO")) & F.col("rule_code").isin(codes)
    first = F.min_by(
        F.struct(*FINDING_FIELDS), F.struct(F.coalesce("base_offset", F.lit(-1)), F.coalesce("position", F.lit(-1)))
    )
    folded = (
        findings.where(repeated)
        .groupBy(*KEY)
        .agg(first.alias("first"), F.count(F.lit(1)).alias("occurrences"), F.max("last_offset").alias("last"))
        .select(
            *[F.col(f"first.{name}").alias(name) for name in FINDING_FIELDS if name not in ("message", "evidence")],
            F.when(
                F.col("occurrences") > 1,
                F.format_string("%s (first of %d on this partition)", "first.message", "occurrences"),
            )
            .otherwise(F.col("first.message"))
            .alias("message"),
            F.map_concat(
                F.coalesce("first.evidence", F.create_map().cast("map<string,string>")),
                F.create_map(
                    F.lit("occurrences"),
                    F.col("occurrences").cast("string"),
                    F.lit("last_occurrence_offset"),
                    F.col("last").cast("string"),
                ),
            ).alias("evidence"),
        )
    )
    return findings.where(~repeated).unionByName(folded.select(*FINDING_FIELDS))
