"""Producer-state replay of spec §6.0 with window functions, one row per batch.

The broker's `ProducerAppendInfo` is a per-(partition, producer id) state machine; here each piece of its
state is a window over the batches of one (topic, partition, producer id) ordered by offset:

* fencing epoch    = running max of earlier epochs (a regression is recorded, never lowers the state, §6.0a.1)
* epoch run        = the rows that share one fencing epoch; the 5-batch duplicate window lives in a run
                     (it is cleared whenever the epoch changes, by data or by a marker)
* sequence position = running max of the (unwrapped) last sequences written earlier in the run, so a
                     forward gap moves it and a duplicate or overlap does not
* transaction group = number of markers before the row; the data of a group up to its marker is one
                     transaction on disk (§6.0a.3)

The file-order state the integrity rules compare neighbouring entries with (previous entry, highest offset
and leader epoch so far, first and last segment) is computed here too, so that every rule afterwards reads
plain columns of one materialised table (`replay`) and no later plan holds a window over the batches.

Shuffles: `prepare_batches` hash-partitions the batches by (topic, partition) once (the replica is chosen by
an aggregate joined back by broadcast). Every window below partitions by (topic, partition, ...), which that
partitioning already satisfies, so the whole replay costs that one exchange plus three sorts, whatever the
data size: file order, producer order (every producer window, transaction groups included, runs in it), and
epoch-run order for the duplicate window. Rows that carry no producer state (`is_producer_row` false) sit in
window partitions of their own and get state columns nobody reads.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.columns import SEQ_SPAN
from pipeline.config import AuditSettings
from schemas.batches import STATUS_LEGACY, STATUS_OK

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
DUPLICATE_WINDOW = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
WRAP_JUMP = 1 << 30  # a backwards step larger than this between batches is a wrap, not a retry
TP = ["topic", "partition"]
TP_PID = [*TP, "producer_id"]
PRODUCER = [*TP_PID, "is_producer_row"]  # window key of the producer-state replay
REPLICA = [*TP, "broker_id"]
ORDER = ["base_offset", "segment_base_offset", "position"]


def topic_matches(patterns: list[str]) -> Column:
    """Whether the topic matches any of the glob patterns (`*`, `?`) of a config list."""
    matched = F.lit(False)
    for pattern in patterns:
        matched = matched | F.col("topic").like(_glob_to_like(pattern))
    return matched


def prepare_batches(batches: DataFrame, settings: AuditSettings) -> DataFrame:
    """The one exchange: the audited replica's batches clustered by (topic, partition), with topic kinds and
    the replica's facts (first and last segment, newest timestamp)."""
    batches = batches.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
    facts = F.broadcast(replica_facts(batches, settings.replica_choice))
    return (
        batches.join(facts, on=REPLICA, how="inner")
        .repartition(*TP)
        .withColumn("is_compacted", topic_matches(settings.compacted_topics))
        .withColumn("is_coordinator_topic", topic_matches(settings.coordinator_topics))
        .withColumn("is_kraft_topic", topic_matches(settings.kraft_topics))
    )


def _glob_to_like(pattern: str) -> str:
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def replica_facts(df: DataFrame, rule: str = "leader_epoch") -> DataFrame:
    """One row per partition: the replica to audit (config `audit.replica_choice`) and facts about its log.

    `leader_epoch`: highest leader epoch, then longest log, then lowest broker id, i.e. the replica that saw
    the newest leader. `broker_id`: the lowest broker id. Replicas of one partition can differ (followers copy
    what the leader wrote, but truncation and unclean elections happen); auditing two copies at once would
    report every batch twice. An aggregate, not a window over the batches, so choosing costs no sort.
    """
    per_broker = df.groupBy(*REPLICA).agg(
        F.max("partition_leader_epoch").alias("_epoch"),
        F.max("last_offset").alias("_end"),
        F.min("segment_base_offset").alias("first_segment_base_offset"),
        F.max("segment_base_offset").alias("last_segment_base_offset"),
        F.max("max_timestamp").alias("partition_max_timestamp"),
    )
    lowest_broker = (-F.col("broker_id")).alias("broker")
    rank = F.struct(lowest_broker) if rule == "broker_id" else F.struct("_epoch", "_end", lowest_broker)
    return (
        per_broker.withColumn("_rank", rank)
        .withColumn("_best_rank", F.max("_rank").over(Window.partitionBy(*TP)))
        .where(F.col("_rank") == F.col("_best_rank"))
        .drop("_epoch", "_end", "_rank", "_best_rank")
    )


def replay(batches: DataFrame, settings: AuditSettings) -> DataFrame:
    """Every batch of the audited replicas with its file-order and producer state: the `replay` table."""
    prepared = prepare_batches(batches, settings).withColumn("is_producer_row", _carries_producer_state())
    return with_producer_state(with_file_order_state(prepared), settings)


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


def with_file_order_state(df: DataFrame) -> DataFrame:
    """What an entry's neighbours in the replica's files were: the state the §6.1 order checks compare."""
    in_file_order = Window.partitionBy(*REPLICA).orderBy("segment_base_offset", "position")
    before = in_file_order.rowsBetween(Window.unboundedPreceding, -1)
    readable = F.col("entry_status").isin(STATUS_OK, STATUS_LEGACY)
    v2 = (F.col("entry_status") == STATUS_OK) & (F.col("magic") == 2)
    previous_segment = F.lag("segment_base_offset").over(in_file_order)
    return df.withColumns(
        {
            "previous_readable_last_offset": F.lag(F.when(readable, F.col("last_offset"))).over(in_file_order),
            "max_last_offset_before": F.max(F.when(readable, F.col("last_offset"))).over(before),
            "max_leader_epoch_before": F.max(F.when(v2, F.col("partition_leader_epoch"))).over(before),
            "is_segment_first": previous_segment.isNull() | (previous_segment != F.col("segment_base_offset")),
            "next_entry_segment_base_offset": F.lead("segment_base_offset").over(in_file_order),
            "in_first_segment": F.col("segment_base_offset") == F.col("first_segment_base_offset"),
            "in_last_segment": F.col("segment_base_offset") == F.col("last_segment_base_offset"),
        }
    )


def with_producer_state(rows: DataFrame, settings: AuditSettings) -> DataFrame:
    """Add, per batch, the state the broker held before appending it (see module docstring).

    Columns are added in a few `withColumns` stages, one projection each, because every stage depends on
    the one before and a long `withColumn` chain makes Spark re-analyse the growing plan at every step.
    """
    by_pid = Window.partitionBy(*PRODUCER).orderBy(*ORDER)
    before = by_pid.rowsBetween(Window.unboundedPreceding, -1)
    upto = by_pid.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_data = ~F.col("is_control")
    is_marker = F.col("is_control") & F.col("control_type").isin(CONTROL_ABORT, CONTROL_COMMIT)
    txn_data = is_data & F.col("is_transactional")
    df = rows.withColumns(
        {
            "is_data": is_data,
            "is_marker": is_marker,
            "pid_row": F.row_number().over(by_pid),
            "state_epoch": F.max("producer_epoch").over(before),
            "epoch_run": F.max("producer_epoch").over(upto),
            "prev_timestamp": F.lag("max_timestamp").over(by_pid),
            "prev_is_marker": F.lag(is_marker).over(by_pid),
            "prev_control_type": F.lag("control_type").over(by_pid),
            "prev_epoch": F.lag("producer_epoch").over(by_pid),
            "state_coordinator_epoch": F.max(F.when(is_marker, F.col("coordinator_epoch"))).over(before),
            "txn_group": F.coalesce(F.sum(is_marker.cast("int")).over(before), F.lit(0)),
            "seen_txn_data": F.max(txn_data).over(before),
            "seen_plain_data": F.max(is_data & ~F.col("is_transactional")).over(before),
        }
    )

    # The open transaction's first batch and highest epoch: the largest (group, ...) among earlier transactional
    # data is in the row's own group when the group has data, because the group number never decreases. A window
    # per group would need a sort of its own; this runs in the producer order already there.
    in_group = F.max(
        F.when(txn_data, F.struct("txn_group", (-F.col("base_offset")).alias("first"), "max_timestamp"))
    ).over(before)
    epoch_in_group = F.max(F.when(txn_data, F.struct("txn_group", "producer_epoch"))).over(before)
    same_group = in_group["txn_group"] == F.col("txn_group")
    new_run = F.coalesce(F.lag("epoch_run").over(by_pid) != F.col("epoch_run"), F.lit(True))
    df = df.withColumns(
        {
            "txn_first_offset": F.when(same_group, -in_group["first"]),
            "txn_max_epoch": F.when(
                epoch_in_group["txn_group"] == F.col("txn_group"), epoch_in_group["producer_epoch"]
            ),
            "txn_start_timestamp": F.when(same_group, in_group["max_timestamp"]),
            "run_first_pid_row": F.max(F.when(new_run, F.col("pid_row"))).over(upto),
            "seq_row": is_data & (F.col("producer_epoch") == F.col("epoch_run")) & ~F.col("is_coordinator_topic"),
        }
    )
    txn_open = F.col("txn_first_offset").isNotNull()
    silence = F.col("max_timestamp") - F.col("prev_timestamp")
    df = df.withColumns(
        {
            "txn_open": txn_open,
            "state_expired": F.col("prev_timestamp").isNotNull()
            & ~txn_open
            & (silence >= F.lit(settings.producer_id_expiration_ms)),
        }
    )
    # The version's windows share the producer order; the sequence windows need an order of their own, last.
    return df.transform(lambda d: _with_transaction_version(d, settings)).transform(_with_sequence_window)


def _with_sequence_window(df: DataFrame) -> DataFrame:
    """Sequence state of the epoch run: the last five ranges and the position, over data rows only.

    Rows that take part (`seq_row`: client-topic data at the run's epoch) get their own window partition,
    so markers and fenced (older-epoch) batches never occupy a slot of the duplicate window. Sequences are
    unwrapped into int64 (a large backwards step between batches, or a batch whose last sequence is below
    its base, is a wrap) so that "highest sequence written" is a running max.
    """
    run = Window.partitionBy(*PRODUCER, "epoch_run", "seq_row").orderBy(*ORDER)
    run_before = run.rowsBetween(Window.unboundedPreceding, -1)
    prev_last = F.lag("last_sequence").over(run)
    df = df.withColumns(
        {
            "run_pos": F.row_number().over(run),
            "prev_last_sequence": prev_last,
            "wrap_between": (prev_last.isNotNull() & (F.col("base_sequence") < prev_last - F.lit(WRAP_JUMP))).cast(
                "long"
            ),
            "wrap_inside": (F.col("last_sequence") < F.col("base_sequence")).cast("long"),
        }
    )
    df = df.withColumn(
        "wraps_before",
        F.coalesce(F.sum("wrap_between").over(run.rowsBetween(Window.unboundedPreceding, 0)), F.lit(0))
        + F.coalesce(F.sum("wrap_inside").over(run_before), F.lit(0)),
    )
    df = df.withColumns(
        {
            "u_base": F.col("base_sequence").cast("long") + F.col("wraps_before") * F.lit(SEQ_SPAN),
            "u_last": F.col("last_sequence").cast("long")
            + (F.col("wraps_before") + F.col("wrap_inside")) * F.lit(SEQ_SPAN),
        }
    )
    window_ranges = [
        F.struct(
            F.lag("base_sequence", k).over(run).alias("base"),
            F.lag("last_sequence", k).over(run).alias("last"),
            F.lag("u_base", k).over(run).alias("u_base"),
            F.lag("u_last", k).over(run).alias("u_last"),
            F.lag("base_offset", k).over(run).alias("offset"),
        )
        for k in range(1, DUPLICATE_WINDOW + 1)
    ]
    return df.withColumns(
        {
            "position_before": F.max("u_last").over(run_before),
            "min_base_before": F.min("u_base").over(run_before),
            "window_ranges": F.filter(F.array(*window_ranges), lambda r: r["base"].isNotNull()),
        }
    )


def _with_transaction_version(df: DataFrame, settings: AuditSettings) -> DataFrame:
    """Resolve the transaction version per producer and per row.

    The log does not store it (spec §6.9). `auto` reads it from COMMIT markers: TV2 bumps the epoch on
    every commit (marker epoch = data epoch + 1), TV0/1 commits at the data epoch. Clients move to TV2 at
    the start of a transaction and never back, so a row is judged as TV2 once a bumping commit of its
    producer precedes it; `transaction_version` records the conclusion for the whole producer.
    """
    by_pid = Window.partitionBy(*PRODUCER).orderBy(*ORDER)
    per_pid = Window.partitionBy(*PRODUCER)
    closing = F.col("is_marker") & F.col("txn_open")
    bump = F.col("producer_epoch") - F.col("txn_max_epoch")
    tv2_commit = closing & (F.col("control_type") == CONTROL_COMMIT) & (bump == 1)
    tv1_marker = closing & (bump == 0)
    writes_transactions = F.max("is_transactional").over(per_pid)
    if settings.transaction_version == "auto":
        version = (
            F.when(F.max(tv2_commit).over(per_pid), F.lit("2/inferred"))
            .when(F.max(tv1_marker).over(per_pid), F.lit("1/inferred"))
            .when(writes_transactions, F.lit("1/assumed"))
        )
        is_tv2 = F.coalesce(F.max(tv2_commit).over(by_pid.rowsBetween(Window.unboundedPreceding, -1)), F.lit(False))
    else:
        version = F.when(writes_transactions, F.lit(f"{settings.transaction_version}/configured"))
        is_tv2 = F.lit(settings.transaction_version == "2")
    return df.withColumns({"transaction_version": version, "is_tv2": is_tv2})
