"""The replay written with Spark window functions: the reference the compiled pass is tested against
(tests/integration/test_producer_kernel.py), for the file-order state and for the producer state.

Each piece of `ProducerAppendInfo` state is a window over the batches of one (topic, partition, producer id)
ordered by offset. It is correct but slow (about forty window functions, evaluated row by row after three
sorts), which is why the product runs `pipeline.audit.replay.producer_kernel` instead; both must give the same
columns for every producer row.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.core.columns import SEQ_SPAN, window_cleared
from pipeline.audit.replay.plan import PRODUCER
from pipeline.audit.replay.producer_kernel import DUPLICATE_WINDOW, WRAP_JUMP
from pipeline.audit.replay.task import FILE_ORDER, ORDER
from pipeline.config import AuditSettings
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT, STATUS_LEGACY, STATUS_OK
from schemas.keys import REPLICA, TP


def with_file_order_state(df: DataFrame) -> DataFrame:
    """What an entry's neighbours in the replica's files were: lags, leads and running maxima in file order."""
    in_file_order = Window.partitionBy(*REPLICA).orderBy(*FILE_ORDER)
    before = in_file_order.rowsBetween(Window.unboundedPreceding, -1)
    readable = F.col("entry_status").isin(STATUS_OK, STATUS_LEGACY)
    v2 = (F.col("entry_status") == STATUS_OK) & (F.col("magic") == 2)
    previous_segment = F.lag("segment_base_offset").over(in_file_order)
    return df.withColumns(
        {
            "previous_readable_last_offset": F.lag(F.when(readable, F.col("last_offset"))).over(in_file_order),
            "max_last_offset_before": F.max(F.when(readable, F.col("last_offset"))).over(before),
            "max_leader_epoch_before": F.max(F.when(v2, F.col("partition_leader_epoch"))).over(before),
            "readable_bytes_before": F.coalesce(
                F.sum(F.when(readable, F.col("size_bytes")).otherwise(0)).over(before), F.lit(0)
            ).cast("long"),
            "is_segment_first": previous_segment.isNull() | (previous_segment != F.col("segment_base_offset")),
            "next_entry_segment_base_offset": F.lead("segment_base_offset").over(in_file_order),
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
    return (
        df.transform(lambda d: _with_transaction_version(d, settings))
        .transform(lambda d: _with_next_data_epoch(d, by_pid))
        .transform(_with_sequence_window)
    )


def _with_next_data_epoch(df: DataFrame, by_pid: Window) -> DataFrame:
    """A TV2 ABORT one above the data it closes: the epoch of the producer's next data batch."""
    tv2_abort = (
        F.col("is_marker")
        & F.col("txn_open")
        & F.col("is_tv2")
        & (F.col("control_type") == CONTROL_ABORT)
        & (F.col("producer_epoch") - F.col("txn_max_epoch") == 1)
    )
    after = by_pid.rowsBetween(1, Window.unboundedFollowing)
    following = F.first(F.when(F.col("is_data"), F.col("producer_epoch")), ignorenulls=True).over(after)
    return df.withColumn("next_data_epoch", F.when(tv2_abort, following))


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
    df = df.withColumns(
        {
            "position_before": F.max("u_last").over(run_before),
            "min_base_before": F.min("u_base").over(run_before),
            "window_ranges": F.filter(F.array(*window_ranges), lambda r: r["base"].isNotNull()),
        }
    )
    same_range = lambda r: (r["base"] == F.col("base_sequence")) & (r["last"] == F.col("last_sequence"))  # noqa: E731
    overlapping = lambda r: (r["u_base"] <= F.col("u_last")) & (F.col("u_base") <= r["u_last"])  # noqa: E731
    return df.withColumns(
        {
            "prev_run_offset": F.try_element_at("window_ranges", F.lit(1))["offset"],
            "exact_in_window": F.exists("window_ranges", same_range),
            "original_offset": F.try_element_at(
                F.filter("window_ranges", lambda r: r["base"] == F.col("base_sequence")), F.lit(1)
            )["offset"],
            "overlaps_window": F.exists("window_ranges", overlapping),
        }
    ).drop("window_ranges")


def _with_transaction_version(df: DataFrame, settings: AuditSettings) -> DataFrame:
    """Resolve the transaction version per producer and per row.

    The log does not store it (spec §6.9). `auto` takes the version the coordinator recorded for the row's
    transaction (`coordinator_version`; a closing marker's is the latest its transaction's data had), and
    otherwise reads it from COMMIT markers: TV2 bumps the epoch on every commit (marker epoch = data epoch + 1),
    TV0/1 commits at the data epoch. Clients move to TV2 at the start of a transaction and never back, so a row
    is judged as TV2 once a bumping commit of its producer, or a transaction recorded as TV2, precedes it;
    `transaction_version` records the conclusion for the whole producer, the coordinator's first.
    """
    by_pid = Window.partitionBy(*PRODUCER).orderBy(*ORDER)
    per_pid = Window.partitionBy(*PRODUCER)
    before = by_pid.rowsBetween(Window.unboundedPreceding, -1)
    closing = F.col("is_marker") & F.col("txn_open")
    bump = F.col("producer_epoch") - F.col("txn_max_epoch")
    tv2_commit = closing & (F.col("control_type") == CONTROL_COMMIT) & (bump == 1)
    tv1_marker = closing & (bump == 0)
    writes_transactions = F.max("is_transactional").over(per_pid)
    if settings.transaction_version != "auto":
        version = F.when(writes_transactions, F.lit(f"{settings.transaction_version}/configured"))
        return df.withColumns({"transaction_version": version, "is_tv2": F.lit(settings.transaction_version == "2")})
    recorded_data = F.col("is_data") & F.col("is_transactional") & F.col("coordinator_version").isNotNull()
    latest = F.max(F.when(recorded_data, F.struct("txn_group", "pid_row", "coordinator_version"))).over(before)
    in_transaction = F.when(closing & (latest["txn_group"] == F.col("txn_group")), latest["coordinator_version"])
    df = df.withColumn("_recorded", F.coalesce(in_transaction, F.col("coordinator_version")))
    recorded = F.col("_recorded")
    version = (
        F.when(F.max(recorded == 2).over(per_pid), F.lit("2/coordinator"))
        .when(F.max(recorded.isNotNull()).over(per_pid), F.lit("1/coordinator"))
        .when(F.max(tv2_commit).over(per_pid), F.lit("2/inferred"))
        .when(F.max(tv1_marker).over(per_pid), F.lit("1/inferred"))
        .when(writes_transactions, F.lit("1/assumed"))
    )
    tv2_before = F.coalesce(F.max(tv2_commit | (recorded == 2)).over(before), F.lit(False))
    is_tv2 = F.coalesce(recorded == 2, tv2_before)
    return df.withColumns({"transaction_version": version, "is_tv2": is_tv2}).drop("_recorded")


# Columns that depend on the entry's open transaction: a (snapshot, producer) with several entries has any of them.
PER_TRANSACTION_START = ("txn_starts_at_f", "marker_between_f_and_x")


def snapshot_states(entries: DataFrame, replayed: DataFrame) -> DataFrame:
    """Per snapshot entry, the replay's state of its producer from the batches below the snapshot offset, as a
    window (pipeline.audit.replay.snapshot_states computes it from the replay's files).

    An as-of lookup: the producer's rows and its snapshot offsets are sorted together by offset, and each offset
    takes the running values of the rows before it. Joining every row with every snapshot of its partition would
    grow with the number of segments times the number of batches.
    """
    keys = entries.select(*TP, "producer_id", "snapshot_offset", "current_txn_first_offset").distinct()
    rows = replayed.join(
        F.broadcast(keys.select(*TP, "producer_id").distinct()), on=[*TP, "producer_id"], how="left_semi"
    )
    txn_starts = (
        rows.where(F.col("is_data") & F.col("is_transactional"))
        .select(*TP, "producer_id", F.col("base_offset").alias("current_txn_first_offset"))
        .distinct()
        .withColumn("txn_starts_at_f", F.lit(True))
    )
    is_row = F.col("snapshot_offset").isNull()
    open_after_row = (
        F.when(F.col("is_marker"), F.lit(None).cast("long"))
        .when(F.col("is_data") & F.col("is_transactional"), F.coalesce(F.col("txn_first_offset"), F.col("base_offset")))
        .otherwise(F.col("txn_first_offset"))
    )
    accepted_data = F.col("is_data") & (F.col("producer_epoch") == F.col("epoch_run"))
    data = F.struct(
        "base_offset", "last_sequence", "last_offset", (F.col("last_offset") - F.col("base_offset")).alias("delta")
    )
    producer = Window.partitionBy(*TP, "producer_id")
    # Snapshot offsets sort before the rows at the same offset: the state at X is that of the rows below X.
    below = producer.orderBy("base_offset", is_row, "segment_base_offset", "position").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )

    def last(value: Column) -> Column:
        return F.last(value, ignorenulls=True).over(below)

    combined = rows.select(
        *TP,
        "producer_id",
        "base_offset",
        "segment_base_offset",
        "position",
        F.lit(None).cast("long").alias("snapshot_offset"),
        F.lit(None).cast("long").alias("current_txn_first_offset"),
        "producer_epoch",
        "epoch_run",
        "state_epoch",
        "is_data",
        "is_marker",
        F.when(accepted_data, data).alias("data"),
        F.when(F.col("is_marker"), F.struct("coordinator_epoch")).alias("marker"),
        F.when(F.col("is_marker"), F.col("base_offset")).alias("marker_offset"),
        F.struct(open_after_row.alias("value")).alias("open_after"),
    ).unionByName(
        keys.select(
            *TP,
            "producer_id",
            F.col("snapshot_offset").alias("base_offset"),
            "snapshot_offset",
            "current_txn_first_offset",
        ),
        allowMissingColumns=True,
    )
    at_x = combined.select(
        *TP,
        "producer_id",
        "snapshot_offset",
        "current_txn_first_offset",
        F.max(is_row).over(producer).alias("has_rows"),
        F.count(F.when(is_row, 1)).over(below).alias("replayed_batches"),
        F.max("producer_epoch").over(below).alias("replay_producer_epoch"),
        last(F.col("data")).alias("last_data"),
        window_cleared(over=below).alias("cleared"),
        last(F.col("marker")).alias("last_marker"),
        F.max("marker_offset").over(below).alias("last_marker_offset"),
        F.max("marker_offset").over(producer).alias("max_marker_offset"),
        last(F.col("open_after")).alias("last_open_after"),
    ).where(~is_row)
    cleared = F.col("cleared")

    def last_batch(field: str, none: int) -> Column:
        """The last accepted data batch's value, or the file's "none" when a marker cleared the window after it."""
        return F.when(cleared, F.lit(none)).otherwise(F.coalesce(F.col(f"last_data.{field}"), F.lit(none)))

    txn_start = F.col("current_txn_first_offset")
    state = {
        "replayed_batches": F.col("replayed_batches"),
        "replay_producer_epoch": F.col("replay_producer_epoch"),
        # the snapshot file's "none" values: no data batch -1 / -1 / 0, no marker -1
        "replay_last_sequence": last_batch("last_sequence", -1),
        "replay_last_offset": last_batch("last_offset", -1),
        "replay_offset_delta": last_batch("delta", 0).cast("int"),
        "replay_coordinator_epoch": F.coalesce(F.col("last_marker.coordinator_epoch"), F.lit(-1)),
        "replay_current_txn_first_offset": F.col("last_open_after.value"),
        "txn_starts_at_f": F.coalesce(F.col("txn_starts_at_f"), F.lit(False)),
        "marker_between_f_and_x": F.coalesce(F.col("last_marker_offset") >= txn_start, F.lit(False)),
        "marker_after_x": F.coalesce(F.col("max_marker_offset") >= F.col("snapshot_offset"), F.lit(False)),
    }
    # A producer without rows in the partition has no replay state at all (nulls), as a left join leaves it.
    per_entry = at_x.join(txn_starts, on=[*TP, "producer_id", "current_txn_first_offset"], how="left").select(
        *TP,
        "producer_id",
        "snapshot_offset",
        *[F.when(F.col("has_rows"), value).alias(name) for name, value in state.items()],
    )
    return per_entry.groupBy(*TP, "producer_id", "snapshot_offset").agg(
        *[F.first(name).alias(name) for name in state if name not in PER_TRANSACTION_START],
        *[F.max(name).alias(name) for name in PER_TRANSACTION_START],
    )
