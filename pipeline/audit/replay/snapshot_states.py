"""The replay's producer state at each snapshot offset, read from the replay's own files by a compiled walk.

A producer-state snapshot `<X>.snapshot` holds each producer's state after the batches below offset X. The
snapshot rules (§6.6) compare it with the replay's state of the same producer at X: the batches it counted, its
highest epoch, its last accepted data batch, the last marker's coordinator epoch, its open transaction. As a Spark
window that is a sort of every producer row of the snapshots' producers with the snapshot offsets, the costliest
plan of a large run. The replay already wrote those rows in that order: each of its tasks handles whole partitions
and writes one file, each replica's rows one producer after another in offset order (pipeline.audit.replay.task).
So one task per replay file reads it with pyarrow, walks each producer's rows once keeping running values (numba), and
takes each snapshot offset's state from the rows below it, each producer's keys in offset order. Memory is about
50 bytes per producer row of the file (seven columns), held in memory, not spilled; no row is sorted or exchanged
again.

tests/integration/test_snapshot_states.py checks the walk against the window definition (kept in
tests/reference_replay.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.arrow_pass import ArrowPass
from pipeline.audit.replay.arrow_columns import NONE, group_starts
from pipeline.sources.filesystems import resolve
from pipeline.sources.jit import CACHE_KERNELS
from schemas.keys import TP
from schemas.snapshot_states import SNAPSHOT_STATES

GROUP = [*TP, "producer_id"]  # one producer of one partition (the replay holds one replica per partition)
KEY_COLUMNS = [*GROUP, "snapshot_offset", "current_txn_first_offset"]
READ_COLUMNS = [
    *GROUP,
    "base_offset",
    "producer_epoch",
    "epoch_run",
    "state_epoch",
    "is_data",
    "is_marker",
    "is_transactional",
    "last_sequence",
    "last_offset",
    "coordinator_epoch",
    "txn_first_offset",
]
READ_ROWS = 65_536

_LONG_STATES = [
    "replayed_batches",
    "replay_producer_epoch",
    "replay_last_sequence",
    "replay_last_offset",
    "replay_offset_delta",
    "replay_coordinator_epoch",
    "replay_current_txn_first_offset",
]
_FLAG_STATES = ["txn_starts_at_f", "marker_between_f_and_x", "marker_after_x"]
# the flags that depend on the entry's open transaction: a (snapshot, producer) with several entries has any of them
_PER_TRANSACTION = _FLAG_STATES[:2]
# row flags
DATA, MARKER, TXN_DATA, ACCEPTED, BUMP = 1, 2, 4, 8, 16


def snapshot_keys(entries: DataFrame) -> DataFrame:
    """The (partition, producer, snapshot offset, open transaction) of each well-formed snapshot entry."""
    return entries.select(*KEY_COLUMNS).distinct()


@dataclass(frozen=True)
class ReplayUnit:
    """Replay files that hold every row of their producers: one file of the replay's tasks, or a kept partition's
    files (pipeline.audit.replay.kept) with `partition` naming the rows of the shared ones to read."""

    paths: tuple[str, ...]
    partition: tuple[str, int] | None = None


def snapshot_states_pass(spark: SparkSession, units: list[ReplayUnit], keys_path: str) -> ArrowPass:
    """The state at every snapshot key of the producers each replay unit holds; a task takes several units when
    there are more than Spark's shuffle partitions (a kept replay has one per Kafka partition)."""
    count = max(1, min(len(units), int(spark.conf.get("spark.sql.shuffle.partitions"))))
    function = partial(states_of_units, units=tuple(units), keys_path=keys_path)
    return ArrowPass(spark.range(0, len(units), 1, count), function, SNAPSHOT_STATES)


def states_of_units(
    ids: Iterator[pa.RecordBatch], *, units: tuple[ReplayUnit, ...], keys_path: str
) -> Iterator[pa.RecordBatch]:
    """Executor side: the states of the keys whose producers the units named by `ids` hold."""
    keys = _read_folder(keys_path)
    for batch in ids:
        for index in batch.column(0).to_pylist():
            yield from states_of_unit(units[index], keys).to_batches()


def states_of_unit(unit: ReplayUnit, keys: pa.Table) -> pa.Table:
    """SNAPSHOT_STATES of the `keys` whose producer's rows are in the replay unit."""
    walked = _walk(unit)
    schema = to_arrow_schema(SNAPSHOT_STATES)
    if walked is None:
        return schema.empty_table()
    groups, bounds, rows = walked
    found = keys.join(groups, keys=GROUP, join_type="inner")
    found = found.sort_by([("group", "ascending"), ("snapshot_offset", "ascending")])  # the walk's order
    # a producer the snapshot names without rows in its partition has no replay state at all (nulls)
    partitions = groups.select(TP).group_by(TP).aggregate([])
    stateless = keys.join(partitions, keys=TP, join_type="left semi").join(groups, keys=GROUP, join_type="left anti")
    nulls = pa.table(
        {
            field.name: stateless[field.name] if field.name in KEY_COLUMNS else pa.nulls(stateless.num_rows, field.type)
            for field in schema
        },
        schema=schema,
    )
    if found.num_rows == 0:
        return nulls
    group = found["group"].to_numpy()
    longs, flags = _states_at(
        bounds[group],
        bounds[group + 1],
        pc.fill_null(found["snapshot_offset"], NONE).to_numpy(),
        pc.fill_null(found["current_txn_first_offset"], NONE).to_numpy(),
        *rows,
    )
    columns = {name: found[name] for name in KEY_COLUMNS}
    for index, name in enumerate(_LONG_STATES):
        columns[name] = pa.array(longs[index], mask=longs[index] == NONE)
    for index, name in enumerate(_FLAG_STATES):
        columns[name] = pa.array(flags[index] == 1)
    states = pa.table({field.name: columns[field.name].cast(field.type) for field in schema}, schema=schema)
    return pa.concat_tables([states, nulls])


def _walk(unit: ReplayUnit) -> tuple[pa.Table, np.ndarray, tuple[np.ndarray, ...]] | None:
    """The unit's producer rows as compact arrays, each producer's rows together in offset order, its groups (GROUP
    columns and `group` index) and the row bounds of each group; None for a unit without producer rows.

    Each file holds its producers' rows one producer after another in offset order, and a kept partition's later
    files hold later rows: taking each producer's rows file after file (a stable sort by producer) orders them.
    """
    wanted = pc.field("is_producer_row")
    if unit.partition is not None:
        topic, partition = unit.partition
        wanted = wanted & (pc.field("topic") == topic) & (pc.field("partition") == partition)
    pieces = []
    for path in unit.paths:
        filesystem, local = resolve(path)
        dataset = ds.dataset(local, format="parquet", filesystem=filesystem)
        pieces += [
            batch
            for batch in dataset.to_batches(columns=READ_COLUMNS, filter=wanted, batch_size=READ_ROWS)
            if batch.num_rows
        ]
    if not pieces:
        return None
    table = pa.Table.from_batches(pieces)
    if len(unit.paths) > 1:
        table = table.take(_by_producer(table))
    begins = group_starts(table, GROUP, None)
    at = np.flatnonzero(begins)
    groups = table.select(GROUP).take(at)
    groups = groups.append_column("group", pa.array(np.arange(groups.num_rows)))
    bounds = np.append(at, table.num_rows)
    rows = _row_arrays(table)
    _require_offset_order(rows[0], bounds, ", ".join(unit.paths))
    return groups, bounds, rows


def _by_producer(table: pa.Table) -> np.ndarray:
    """The rows' order with each producer's rows together, in the order they came."""
    keys = table.select(GROUP).group_by(GROUP, use_threads=False).aggregate([])
    keys = keys.append_column("_producer", pa.array(np.arange(keys.num_rows)))
    numbered = table.select(GROUP).append_column("_row", pa.array(np.arange(table.num_rows)))
    producer = numbered.join(keys, keys=GROUP, join_type="left outer").sort_by("_row")["_producer"].to_numpy()
    return np.argsort(producer, kind="stable")


def _row_arrays(rows: pa.Table) -> tuple[np.ndarray, ...]:
    """(base offset, flags, producer epoch, last sequence, last offset, coordinator epoch, open after) per row."""

    def longs(name: str) -> np.ndarray:
        return pc.fill_null(rows[name].cast(pa.int64()), NONE).to_numpy()

    def true(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
        return pc.fill_null(column, False).to_numpy(zero_copy_only=False)

    is_data, is_marker = true(rows["is_data"]), true(rows["is_marker"])
    txn_data = true(pc.and_kleene(rows["is_data"], rows["is_transactional"]))
    epoch, run, state_epoch = rows["producer_epoch"], rows["epoch_run"], rows["state_epoch"]
    accepted = true(pc.and_kleene(rows["is_data"], pc.equal(epoch, run)))
    bumping = true(
        pc.and_kleene(rows["is_marker"], pc.or_kleene(pc.is_null(state_epoch), pc.greater(epoch, state_epoch)))
    )
    flags = (is_data * DATA + is_marker * MARKER + txn_data * TXN_DATA + accepted * ACCEPTED + bumping * BUMP).astype(
        np.int8
    )
    base = longs("base_offset")
    txn_first = longs("txn_first_offset")
    open_after = np.where(is_marker, NONE, np.where(txn_data & (txn_first == NONE), base, txn_first))
    return (
        base,
        flags,
        longs("producer_epoch"),
        longs("last_sequence"),
        longs("last_offset"),
        longs("coordinator_epoch"),
        open_after,
    )


def _require_offset_order(base: np.ndarray, bounds: np.ndarray, path: str) -> None:
    """The walk needs each producer's rows in offset order, as the replay writes them."""
    steps = np.diff(base) < 0
    steps[bounds[1:-1] - 1] = False  # a new group may start lower
    if steps.any():
        raise ValueError(f"{path}: a producer's rows are not in offset order at row {int(np.argmax(steps)) + 1}")


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _states_at(first, end, offsets, txn_starts, base, flags, epoch, last_seq, last_offset, coordinator_epoch,
               open_after):  # fmt: skip
    """Per key, the keys sorted by group and then offset (its group's rows first..end, its snapshot offset and open
    transaction): the states as int64 (NONE: null; one row per _LONG_STATES name, in order) and int8 flags (one row
    per _FLAG_STATES name), from the group's rows below the offset. One walk of each group's rows, its running
    values carried from one key's offset to the next."""
    keys = offsets.shape[0]
    longs = np.full((7, keys), NONE, dtype=np.int64)
    bools = np.zeros((3, keys), dtype=np.int8)
    g0, g1, i = -1, 0, 0
    count, last_data, last_marker = 0, -1, -1  # the group's running values; rows by index (-1: none)
    max_epoch = max_data = max_bump = max_marker = group_max_marker = NONE
    for k in range(keys):
        if first[k] != g0:
            g0, g1, i = first[k], end[k], first[k]
            count, max_epoch, last_data, max_data, max_bump, last_marker, max_marker = 0, NONE, -1, NONE, NONE, -1, NONE
            group_max_marker = NONE
            for j in range(g0, g1):
                if flags[j] & MARKER and (group_max_marker == NONE or base[j] > group_max_marker):
                    group_max_marker = base[j]
        x, txn_start = offsets[k], txn_starts[k]
        while i < g1 and base[i] < x:
            count += 1
            if epoch[i] != NONE and (max_epoch == NONE or epoch[i] > max_epoch):
                max_epoch = epoch[i]
            if flags[i] & ACCEPTED:
                last_data = i
                if max_data == NONE or base[i] > max_data:
                    max_data = base[i]
            if flags[i] & BUMP and (max_bump == NONE or base[i] > max_bump):
                max_bump = base[i]
            if flags[i] & MARKER:
                last_marker = i
                if max_marker == NONE or base[i] > max_marker:
                    max_marker = base[i]
            i += 1
        longs[0, k] = count
        if count > 0:
            longs[1, k] = max_epoch
            cleared = max_bump != NONE and (max_data == NONE or max_bump > max_data)
            if cleared or last_data < 0:
                longs[2, k], longs[3, k], longs[4, k] = -1, -1, 0
            else:
                longs[2, k] = last_seq[last_data] if last_seq[last_data] != NONE else -1
                longs[3, k] = last_offset[last_data] if last_offset[last_data] != NONE else -1
                delta_known = last_offset[last_data] != NONE and base[last_data] != NONE
                longs[4, k] = last_offset[last_data] - base[last_data] if delta_known else 0
            known = last_marker >= 0 and coordinator_epoch[last_marker] != NONE
            longs[5, k] = coordinator_epoch[last_marker] if known else -1
            longs[6, k] = open_after[i - 1]
            bools[1, k] = txn_start != NONE and max_marker != NONE and max_marker >= txn_start
        else:
            longs[2, k], longs[3, k], longs[4, k], longs[5, k] = -1, -1, 0, -1
        if txn_start != NONE:
            j = g0 + np.searchsorted(base[g0:g1], txn_start)
            while j < g1 and base[j] == txn_start:
                if flags[j] & TXN_DATA:
                    bools[0, k] = 1
                j += 1
        bools[2, k] = group_max_marker != NONE and group_max_marker >= x
    return longs, bools


def _read_folder(path: str) -> pa.Table:
    filesystem, local = resolve(path)
    return ds.dataset(local, format="parquet", filesystem=filesystem).to_table()


def by_snapshot(states: DataFrame) -> DataFrame:
    """One row per (partition, producer, snapshot offset): a producer whose entries name several open transactions
    has the transaction-dependent flags of any of them."""
    per_key = [name for name in SNAPSHOT_STATES.fieldNames() if name not in (*KEY_COLUMNS, *_PER_TRANSACTION)]
    return states.groupBy(*GROUP, "snapshot_offset").agg(
        *[F.first(name).alias(name) for name in per_key],
        *[F.max(name).alias(name) for name in _PER_TRANSACTION],
    )
