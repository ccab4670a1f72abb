"""Arrow side of the replay: whole replicas out of a sorted stream, their file-order state, the producer kernel.

`mapInArrow` hands the executor's rows over in record batches of a fixed size, in the order Spark sorted them:
(topic, partition, broker, segment base offset, position), i.e. each audited replica in file order. A
replica's rows can span batches, and both its file-order state and its producers' transaction version are
conclusions over all of them, so the rows of the last replica of a batch wait for the next batch. The file
order state is computed as received (pipeline.audit.file_order); the compiled kernel then walks the rows in
producer order (producer id, producer row, offset) through a permutation of the few columns it reads, and the
rows go back out in the order received, a record batch at a time with their slice of the kernel's output.
Memory holds one piece at a time (the replica that spans Arrow batches, if any, and the whole replicas of one
batch) and, besides its rows, about 300 bytes per row of kernel input and output: never a second copy of the
rows, which a large replica (a 2 GiB segment is millions of rows) could not afford.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.audit import producer_kernel as K
from pipeline.audit.arrow_columns import NONE, flag_values, int64_values
from pipeline.audit.file_order import file_order_columns

REPLICA_KEY = ["topic", "partition", "broker_id"]
GROUP_KEY = ["topic", "partition", "producer_id", "is_producer_row"]  # one producer's rows in a replica
OUTPUT_ROWS = 10_000  # rows per record batch handed back to Spark

_LONG_COLUMNS = {
    "state_epoch": K.STATE_EPOCH,
    "epoch_run": K.EPOCH_RUN,
    "prev_timestamp": K.PREV_TIMESTAMP,
    "prev_control_type": K.PREV_CONTROL_TYPE,
    "prev_epoch": K.PREV_EPOCH,
    "state_coordinator_epoch": K.STATE_COORDINATOR_EPOCH,
    "txn_group": K.TXN_GROUP,
    "txn_first_offset": K.TXN_FIRST_OFFSET,
    "txn_max_epoch": K.TXN_MAX_EPOCH,
    "txn_start_timestamp": K.TXN_START_TIMESTAMP,
    "run_first_pid_row": K.RUN_FIRST_PID_ROW,
    "run_pos": K.RUN_POS,
    "prev_last_sequence": K.PREV_LAST_SEQUENCE,
    "wrap_inside": K.WRAP_INSIDE,
    "u_base": K.U_BASE,
    "u_last": K.U_LAST,
    "position_before": K.POSITION_BEFORE,
    "min_base_before": K.MIN_BASE_BEFORE,
    "prev_run_offset": K.PREV_RUN_OFFSET,
    "original_offset": K.ORIGINAL_OFFSET,
}
_FLAG_COLUMNS = {
    "prev_is_marker": K.PREV_IS_MARKER,
    "seen_txn_data": K.SEEN_TXN_DATA,
    "seen_plain_data": K.SEEN_PLAIN_DATA,
    "seq_row": K.SEQ_ROW,
    "txn_open": K.TXN_OPEN,
    "state_expired": K.STATE_EXPIRED,
    "is_tv2": K.IS_TV2,
    "exact_in_window": K.EXACT_IN_WINDOW,
    "overlaps_window": K.OVERLAPS_WINDOW,
}


def version_labels(version_mode: int) -> pa.Array:
    """`transaction_version` text by kernel code."""
    configured = f"{version_mode}/configured" if version_mode else None
    return pa.array([None, "1/assumed", "1/inferred", "2/inferred", configured], pa.string())


def replay_replicas(
    batches: Iterator[pa.RecordBatch], *, expiration_ms: int, version_mode: int, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The `mapInArrow` function: every input row once, in the order received, with the file-order and
    producer-state columns added."""
    for rows in whole_groups(batches, REPLICA_KEY):
        starts = _group_starts(rows, REPLICA_KEY)
        for name, column in file_order_columns(rows, starts).items():
            rows = rows.append_column(name, column)
        order = producer_order(rows, np.cumsum(starts))
        longs, flags = producer_state(rows, order, expiration_ms, version_mode)
        row_of = np.empty_like(order)
        row_of[order] = np.arange(len(order))  # where each received row is in producer order
        for start in range(0, rows.num_rows, OUTPUT_ROWS):
            at = row_of[start : start + OUTPUT_ROWS]
            piece = with_state(rows.slice(start, OUTPUT_ROWS), longs[:, at], flags[:, at], version_mode, schema)
            yield from piece.to_batches()


def producer_order(rows: pa.Table, replica: np.ndarray) -> np.ndarray:
    """Row indices that sort each replica's rows by (producer id, producer row, base offset, segment, position).

    `replica` numbers the replicas of `rows` in their order. Nulls first, as Spark sorts, so the kernel sees the
    order the window reference is defined on.
    """
    keys = [int64_values(rows, name) for name in ("position", "segment_base_offset", "base_offset")]
    keys += [flag_values(rows, "is_producer_row"), int64_values(rows, "producer_id"), replica]
    return np.lexsort(keys)


def whole_groups(batches: Iterator[pa.RecordBatch], key: list[str]) -> Iterator[pa.Table]:
    """Re-cut a stream sorted by `key` into tables that each hold only whole groups of rows with equal `key`."""
    pending: list[pa.RecordBatch] = []  # the rows of the newest group, maybe not all of them yet
    pending_key = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        tail = _trailing_group_start(batch, key)
        last_key = _key_at(batch, batch.num_rows - 1, key)
        if tail == 0 and last_key == pending_key:
            pending.append(batch)
            continue
        done = pending if tail == 0 else [*pending, batch.slice(0, tail)]
        pending, pending_key = [batch.slice(tail)], last_key
        if done:
            yield pa.Table.from_batches(done)
    if pending:
        yield pa.Table.from_batches(pending)


def _key_at(batch: pa.RecordBatch, row: int, key: list[str]) -> tuple:
    return tuple(batch.column(name)[row].as_py() for name in key)


def _trailing_group_start(batch: pa.RecordBatch, key: list[str]) -> int:
    """Index of the first row of the batch's last group."""
    same = np.ones(batch.num_rows, dtype=bool)
    for name, value in zip(key, _key_at(batch, batch.num_rows - 1, key), strict=True):
        column = batch.column(name)
        equal = pc.is_null(column) if value is None else pc.fill_null(pc.equal(column, value), False)
        same &= equal.to_numpy(zero_copy_only=False)
    differs = np.flatnonzero(~same)
    return int(differs[-1]) + 1 if differs.size else 0


def producer_state(
    rows: pa.Table, order: np.ndarray, expiration_ms: int, version_mode: int
) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's (int64 outputs, int8 flags) for the rows taken in `order`, which groups whole producers."""
    return K.replay_producers(
        _group_starts(rows.select(GROUP_KEY).take(order), GROUP_KEY),
        _row_flags(rows)[order],
        _marker_codes(rows)[order],
        *(
            int64_values(rows, name)[order]
            for name in (
                "producer_epoch",
                "control_type",
                "coordinator_epoch",
                "base_offset",
                "max_timestamp",
                "base_sequence",
                "last_sequence",
            )
        ),
        expiration_ms,
        version_mode,
    )


def with_state(rows: pa.Table, longs: np.ndarray, flags: np.ndarray, version_mode: int, schema: pa.Schema) -> pa.Table:
    """`rows` with the kernel's outputs for them (one column of `longs` and `flags` per row), typed as `schema`."""
    columns: dict[str, pa.Array] = {}
    for name, index in _LONG_COLUMNS.items():
        values = longs[index]
        columns[name] = pa.array(values, mask=values == NONE).cast(schema.field(name).type)
    for name, index in _FLAG_COLUMNS.items():
        values = flags[index]
        columns[name] = pa.array(values == 1, mask=values < 0)
    codes = longs[K.VERSION]
    columns["transaction_version"] = version_labels(version_mode).take(pa.array(codes, mask=codes == NONE))
    out = rows
    for field in schema:
        if field.name in columns:
            out = out.append_column(field, columns[field.name])
    return out.select(schema.names)


def _group_starts(rows: pa.Table, key: list[str]) -> np.ndarray:
    """Whether each row begins a group of rows with equal `key` (rows sorted by it)."""
    starts = np.zeros(rows.num_rows, dtype=np.bool_)
    if rows.num_rows == 0:
        return starts
    starts[0] = True
    for name in key:
        column = rows.column(name).combine_chunks()
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            values = column.dictionary_encode().indices.to_numpy(zero_copy_only=False)
        else:
            values = int64_values(rows, name) if not pa.types.is_boolean(column.type) else flag_values(rows, name)
        starts[1:] |= values[1:] != values[:-1]
    return starts


def _row_flags(rows: pa.Table) -> np.ndarray:
    return (
        flag_values(rows, "is_control") * K.IS_CONTROL
        + flag_values(rows, "is_transactional") * K.IS_TRANSACTIONAL
        + flag_values(rows, "is_coordinator_topic") * K.IS_COORDINATOR_TOPIC
        + flag_values(rows, "is_producer_row") * K.PRODUCER_ROW
    ).astype(np.int64)


def _marker_codes(rows: pa.Table) -> np.ndarray:
    marker = rows.column("is_marker").combine_chunks()
    codes = pc.if_else(pc.is_null(marker), -1, pc.if_else(marker, 1, 0))
    return codes.to_numpy(zero_copy_only=False).astype(np.int8)
