"""The replay of spec §6.0: every batch of the audited replicas with the state its neighbours left, one row each.

Two kinds of state are added, so that every rule afterwards reads plain columns of one materialised table
(`replay`) and no later plan holds a window over the batches:

* file order (the §6.1 integrity checks): the previous entry, the highest offset and leader epoch so far, the
  first and last segment of the replica (pipeline.audit.replay.file_order).
* producer state (the SEQ/EPO/TXN checks): what the broker's `ProducerAppendInfo` held for the row's producer
  before appending it: fencing epoch, epoch run, the 5-batch duplicate window and sequence position, the open
  transaction, the coordinator epoch, the transaction version (pipeline.audit.replay.producer_kernel).

Shuffles: `prepare_batches` hash-partitions the batches by (cluster, topic, partition) once (the replica is chosen by an
aggregate joined back by broadcast; that join and the coordinator's transaction versions' come before the exchange,
so that the clustering holds however Spark plans them). One `mapInArrow` pass (pipeline.audit.replay.task) then
sorts each task's rows itself, into file order and into producer order, and walks each order a chunk at a time with
the state the chunk before left: the whole replay costs one exchange, and no Spark sort.
"""

from __future__ import annotations

import re
from functools import partial

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.arrow_pass import ArrowPass
from pipeline.audit.replay.coordinator_version import with_coordinator_version
from pipeline.audit.replay.task import replay_rows
from pipeline.config import AuditSettings
from pipeline.small_inputs import broadcast_unless_small
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT, STATUS_OK, STATUS_TRUNCATED
from schemas.checkpoints import CLEANER_OFFSET, LOG_START_OFFSET
from schemas.keys import REPLICA, TP, TP_PID
from schemas.replay import FILE_ORDER_COLUMNS, PRODUCER_STATE_COLUMNS

# A partition: topic and partition number within one cluster (`batches.cluster_id`, "" when unknown). Clusters
# share broker ids and topic names, so nothing of two clusters is ever compared or replayed together.
PRODUCER = [*TP_PID, "is_producer_row"]  # the rows of one producer's state
# What `replica_facts` says of a whole replica: the replay reads them, but does not keep them on every row, where
# appending to the replica would make the rows written before stale.
REPLICA_FACTS = ["first_segment_base_offset", "last_segment_base_offset", "partition_max_timestamp"]
# How a replica is known to be compacted, if it is (`compacted_by`), and its cleaner's checkpoint: on every row, and
# part of what a kept replay of its partition must still say to be gone on from (pipeline.audit.replay.files).
COMPACTION = ["compacted_by", "cleaner_offset"]
# The log start offset the replica's log-start-offset-checkpoint holds (DeleteRecords moves it inside a segment): on
# every row, and part of what a kept replay of its partition must still say, as its compaction is.
LOG_START = "checkpoint_log_start"
COMPACTED_CONFIGURED = "configured"  # audit.compacted_topics names the topic
COMPACTED_CLEANER = "cleaner checkpoint"  # the log dir's cleaner-offset-checkpoint lists the partition
COMPACTED_DELETE_HORIZON = "delete horizon"  # a batch carries the delete-horizon bit: the cleaner rewrote it


def topic_matches(patterns: list[str]) -> Column:
    """Whether the topic matches any of the glob patterns (`*`, `?`) of a config list."""
    matched = F.lit(False)
    for pattern in patterns:
        matched = matched | F.col("topic").like(_glob_to_like(pattern))
    return matched


def topic_name_matches(patterns: list[str], topic: str) -> bool:
    """`topic_matches` of one topic name, without Spark: the same LIKE patterns, read as SQL's LIKE reads them."""
    return any(re.fullmatch(_like_to_regex(_glob_to_like(pattern)), topic, re.DOTALL) for pattern in patterns)


def _like_to_regex(like: str) -> str:
    """SQL LIKE as a regular expression: `%` any text, `_` one character, a backslash takes the next literally."""
    pieces, escaped = [], False
    for character in like:
        if escaped:
            pieces.append(re.escape(character))
            escaped = False
        elif character == "\\":
            escaped = True
        else:
            pieces.append({"%": ".*", "_": "."}.get(character, re.escape(character)))
    return "".join(pieces)


def prepare_batches(batches: DataFrame, settings: AuditSettings, checkpoints: DataFrame | None = None) -> DataFrame:
    """The one exchange: the audited replica's batches clustered by partition (`TP`), with topic kinds and
    the replica's facts (first and last segment, newest timestamp, compaction)."""
    return _audited_rows(batches, settings, checkpoints).repartition(*TP)


def _audited_rows(batches: DataFrame, settings: AuditSettings, checkpoints: DataFrame | None) -> DataFrame:
    """`prepare_batches` before its exchange. Whatever is joined to these rows is joined before the exchange: a
    join after it keeps the clustering by partition only as a broadcast, and Spark may plan a shuffle instead
    (`spark.sql.optimizer.disableHints`), which would hand the pass's tasks parts of partitions."""
    batches = audited_broker(batches)
    facts = F.broadcast(replica_facts(batches, settings, checkpoints))
    return (
        batches.join(facts, on=REPLICA, how="inner")
        .withColumn("is_compacted", F.col("compacted_by").isNotNull())
        .withColumn("is_coordinator_topic", topic_matches(settings.coordinator_topics))
        .withColumn("is_kraft_topic", topic_matches(settings.kraft_topics))
    )


def audited_broker(batches: DataFrame) -> DataFrame:
    """Rows without a broker id (dumps, exports) as those of broker -1, so that they form one replica."""
    return batches.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))


def _glob_to_like(pattern: str) -> str:
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def replica_facts(df: DataFrame, settings: AuditSettings, checkpoints: DataFrame | None = None) -> DataFrame:
    """One row per partition: the replica to audit (config `audit.replica_choice`) and facts about its log.

    `leader_epoch`: highest leader epoch, then longest log, then lowest broker id, i.e. the replica that saw
    the newest leader. `broker_id`: the lowest broker id. Replicas of one partition can differ (followers copy
    what the leader wrote, but truncation and unclean elections happen); auditing two copies at once would
    report every batch twice. An aggregate, not a window over the batches, so choosing costs no sort.

    A replica is compacted when the settings name its topic, when its log dir's `cleaner-offset-checkpoint` lists
    it (the cleaner only checkpoints the logs it compacts) or when a batch carries the delete-horizon bit, which
    only the cleaner sets (`COMPACTION`): what the log dir shows needs no configuration.
    """
    per_broker = df.groupBy(*REPLICA).agg(
        F.max("partition_leader_epoch").alias("_epoch"),
        F.max("last_offset").alias("_end"),
        F.min("segment_base_offset").alias("first_segment_base_offset"),
        F.max("segment_base_offset").alias("last_segment_base_offset"),
        F.max("max_timestamp").alias("partition_max_timestamp"),
        F.max(F.coalesce("has_delete_horizon", F.lit(False))).alias("_delete_horizon"),
    )
    lowest_broker = (-F.col("broker_id")).alias("broker")
    rule = settings.replica_choice
    rank = F.struct(lowest_broker) if rule == "broker_id" else F.struct("_epoch", "_end", lowest_broker)
    chosen = (
        per_broker.withColumn("_rank", rank)
        .withColumn("_best_rank", F.max("_rank").over(Window.partitionBy(*TP)))
        .where(F.col("_rank") == F.col("_best_rank"))
        .drop("_epoch", "_end", "_rank", "_best_rank")
    )
    cleaner = log_start = F.lit(None).cast("long")
    if checkpoints is not None:
        chosen = chosen.join(broadcast_unless_small(replica_checkpoints(checkpoints)), on=REPLICA, how="left")
        cleaner, log_start = F.col("cleaner_offset"), F.col(LOG_START)
    return chosen.withColumns(
        {
            "compacted_by": F.when(topic_matches(settings.compacted_topics), F.lit(COMPACTED_CONFIGURED))
            .when(cleaner.isNotNull(), F.lit(COMPACTED_CLEANER))
            .when(F.col("_delete_horizon"), F.lit(COMPACTED_DELETE_HORIZON)),
            "cleaner_offset": cleaner,
            LOG_START: log_start,
        }
    ).drop("_delete_horizon")


def replica_checkpoints(checkpoints: DataFrame) -> DataFrame:
    """Per replica its log dir's checkpoints list: the offset the cleaner has cleaned up to (`cleaner_offset`, from
    `cleaner-offset-checkpoint`) and its log start offset (from `log-start-offset-checkpoint`)."""
    return (
        audited_broker(
            checkpoints.where(
                F.col("kind").isin(CLEANER_OFFSET, LOG_START_OFFSET)
                & F.col("topic").isNotNull()
                & F.col("offset").isNotNull()
            )
        )
        .withColumn("cluster_id", F.coalesce("cluster_id", F.lit("")))
        .groupBy(*REPLICA)
        .agg(
            F.max(F.when(F.col("kind") == CLEANER_OFFSET, F.col("offset"))).alias("cleaner_offset"),
            F.max(F.when(F.col("kind") == LOG_START_OFFSET, F.col("offset"))).alias(LOG_START),
        )
    )


def replay(
    batches: DataFrame,
    settings: AuditSettings,
    transaction_log: DataFrame | None = None,
    checkpoints: DataFrame | None = None,
) -> DataFrame:
    """Every batch of the audited replicas with its file-order and producer state: the `replay` table.

    Each task of the partitions `prepare_batches` made sorts its rows into file order, then into producer order,
    and walks each order a chunk at a time (pipeline.audit.replay.task). `transaction_log`, when ingested,
    gives the transaction version the coordinator recorded (pipeline.audit.replay.coordinator_version); `checkpoints`,
    the cleaner's (`replica_facts`).
    """
    return replay_pass(batches, settings, transaction_log, checkpoints).frame()


def replay_pass(
    batches: DataFrame,
    settings: AuditSettings,
    transaction_log: DataFrame | None = None,
    checkpoints: DataFrame | None = None,
) -> ArrowPass:
    """`replay` as the clustered rows and the pass over them, so that the pass's tasks can write the table
    themselves (pipeline.audit.core.scratch.Scratch.materialise_pass) instead of handing it back to the JVM."""
    rows = replay_input(batches, settings, transaction_log, checkpoints)
    schema = T.StructType([*rows.schema.fields, *FILE_ORDER_COLUMNS.fields, *PRODUCER_STATE_COLUMNS.fields])
    replay_pass_function = partial(
        replay_rows,
        expiration_ms=settings.producer_id_expiration_ms,
        version_mode=0 if settings.transaction_version == "auto" else int(settings.transaction_version),
        schema=to_arrow_schema(schema),
    )
    return ArrowPass(rows, replay_pass_function, schema)


def replay_input(
    batches: DataFrame,
    settings: AuditSettings,
    transaction_log: DataFrame | None = None,
    checkpoints: DataFrame | None = None,
) -> DataFrame:
    """The audited replicas' rows, clustered by partition, with the per-row facts the replay pass reads."""
    rows = with_coordinator_version(_audited_rows(batches, settings, checkpoints), transaction_log).repartition(*TP)
    return rows.withColumns(
        {
            "is_producer_row": _carries_producer_state(),
            "in_first_segment": F.col("segment_base_offset") == F.col("first_segment_base_offset"),
            "in_last_segment": _truncated_in_last_segment(),
            "is_data": ~F.col("is_control"),
            "is_marker": F.col("is_control") & F.col("control_type").isin(CONTROL_ABORT, CONTROL_COMMIT),
        }
    ).drop(*REPLICA_FACTS)


def _truncated_in_last_segment() -> Column:
    """Whether a truncated tail is in its replica's last segment; null on every other entry.

    Only the truncated-tail check reads it, and a truncated tail ends its segment: kept on every row, appending a
    segment to the replica would leave the earlier last segment's rows stale (pipeline.audit.replay.kept).
    """
    in_last = F.col("segment_base_offset") == F.col("last_segment_base_offset")
    return F.when(F.col("entry_status") == STATUS_TRUNCATED, in_last)


def _carries_producer_state() -> Column:
    """Valid v2 entries with a producer id, KRaft logs excluded.

    Empty control batches are left out: the cleaner leaves them behind and the broker ignores them.
    """
    return F.coalesce(
        (F.col("entry_status") == STATUS_OK)
        & (F.col("magic") == 2)
        & (F.col("producer_id") >= 0)
        & ~F.col("is_kraft_topic")
        & ~(F.col("is_control") & (F.col("record_count") == 0)),
        F.lit(False),
    )
