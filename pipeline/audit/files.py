"""Rules about a partition's other files (spec §6.1): naming, offset and time indexes, partition.metadata
and the leader-epoch checkpoint. The problems are found while decoding the files
(`pipeline.sources.partition_files`, table `file_problems`); this module registers the rules and turns
those rows into findings.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.columns import FINDING_FIELDS
from pipeline.audit.registry import RULES, rule
from pipeline.audit.replay import TP

FILE_NAMING = rule(
    "SEG-001",
    "FILE_NAMING",
    "WARN",
    "6.1",
    "A segment, index or snapshot file whose name is not a 20-digit zero-padded offset with a known suffix, "
    "or a leftover .cleaned/.swap/.deleted file.",
)
OFFSET_INDEX = rule(
    "SEG-004",
    "OFFSET_INDEX",
    "WARN",
    "6.1",
    ".index size not a multiple of 8, relative offsets not increasing, or an entry whose position does not "
    "start a batch whose last offset is the entry's offset (the broker rebuilds indexes, so WARN).",
)
TIME_INDEX = rule(
    "SEG-005",
    "TIME_INDEX",
    "WARN",
    "6.1",
    ".timeindex size not a multiple of 12, timestamps not increasing, or an entry matching no batch.",
)
PARTITION_METADATA = rule(
    "SEG-006",
    "PARTITION_METADATA",
    "WARN",
    "6.1",
    "partition.metadata not of the form `version: 0` / `topic_id: <uuid>`, or a zero topic id.",
)
EPOCH_CHECKPOINT_FORMAT = rule(
    "LEP-001",
    "EPOCH_CHECKPOINT_FORMAT",
    "ERROR",
    "6.1",
    "leader-epoch-checkpoint with a version other than 0, a count that differs from its lines, or a malformed line.",
)


def file_problem_findings(file_problems: DataFrame, replicas: DataFrame) -> DataFrame:
    """Findings for the file problems of the audited replicas, named from the registry."""
    names = F.create_map(*[item for r in RULES.values() for item in (F.lit(r.code), F.lit(r.name))])
    return (
        file_problems.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .join(replicas.select(*TP, "broker_id"), on=[*TP, "broker_id"], how="inner")
        .select(
            "rule_code",
            names[F.col("rule_code")].alias("rule_name"),
            "severity",
            *TP,
            F.lit(None).cast("long").alias("producer_id"),
            F.lit(None).cast("int").alias("producer_epoch"),
            F.lit(None).cast("long").alias("base_offset"),
            F.lit(None).cast("long").alias("last_offset"),
            F.col("source_file").alias("segment"),
            "position",
            "message",
            F.create_map().cast("map<string,string>").alias("evidence"),
            "broker_id",
        )
        .select(*FINDING_FIELDS)
    )
