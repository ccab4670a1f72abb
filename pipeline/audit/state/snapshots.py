"""The snapshot entries an audit checks: the producer entries of the audited replicas' snapshots, KRaft's own
snapshots left out."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.replay.plan import topic_matches
from pipeline.config import AuditSettings
from schemas.keys import TP


def audited_non_kraft(snapshots: DataFrame, replicas: DataFrame, settings: AuditSettings) -> DataFrame:
    return audited_snapshots(snapshots, replicas.where(~topic_matches(settings.kraft_topics)))


def producer_entries(snapshots: DataFrame) -> DataFrame:
    """The producer entries of well-formed snapshot files."""
    return snapshots.where((F.col("file_status") == SNAPSHOT_OK) & F.col("producer_id").isNotNull())


SNAPSHOT_OK = "ok"


def audited_snapshots(snapshots: DataFrame, replicas: DataFrame) -> DataFrame:
    """Snapshot rows of the audited replica of each partition, KRaft logs excluded by the replica list."""
    return snapshots.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1))).join(
        replicas.select(*TP, "broker_id"), on=[*TP, "broker_id"], how="inner"
    )
