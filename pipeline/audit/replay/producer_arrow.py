"""Arrow side of the replay's producer pass: the compiled kernel over a sorted stream, a record batch at a time.

The second walk of a replay task (pipeline.audit.replay.task): the rows arrive sorted by replica and then
in producer order (producer id, producer row, base offset, segment, position), so each producer's rows come
together, in the order the broker appended them. The kernel (pipeline.audit.replay.producer_kernel) walks each record
batch with the state the previous one left (one producer's, never a replica's), and the rows leave with the
PRODUCER_STATE_COLUMNS added. Only the transaction version and a TV2 abort's next data epoch wait: the version is a
conclusion over all of a producer's rows, so the rows of the producer still being walked are held until its last
row has passed (`HeldRows`), in memory up to HELD_ROWS and in a local file beyond, and a held abort gets its next
data epoch when the kernel meets that data in a later record batch. Memory therefore stays at a few record
batches whatever the size of a partition or of one producer's share of it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.audit.replay import producer_kernel as K
from pipeline.audit.replay.arrow_columns import NONE, flag_values, group_starts, int64_values, key_at
from pipeline.audit.replay.task_rows import spill_file
from schemas.keys import REPLICA

# one producer's rows
GROUP_KEY = [*REPLICA, "producer_id", "is_producer_row"]
HELD_ROWS = 20_000  # rows of one producer kept in memory while its version is unknown; more go to a file

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
    "next_data_epoch": K.NEXT_DATA_EPOCH,
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
    """`transaction_version` text by kernel code: the version and where it came from."""
    configured = f"{version_mode}/configured" if version_mode else None
    return pa.array(
        [None, "1/assumed", "1/inferred", "2/inferred", configured, "1/coordinator", "2/coordinator"], pa.string()
    )


class ProducerEnds:
    """Each producer's carry where a walk left it (one CARRY_WIDTH row per GROUP_KEY): what a later walk of the
    same producers' later rows goes on from, as if it had walked the earlier rows too."""

    def __init__(self, carries: dict[tuple, np.ndarray] | None = None) -> None:
        self.carries: dict[tuple, np.ndarray] = {} if carries is None else carries
        self._index: dict[tuple, int] = {}
        self._rows = np.zeros((1, K.CARRY_WIDTH), dtype=np.int64)

    def resume(self, rows: pa.Table, starts: np.ndarray) -> np.ndarray:
        """Per row: the number of the carry its group goes on from when it begins there (in `earlier()`), else -1."""
        resume = np.full(len(starts), -1, dtype=np.int64)
        if self.carries:
            if len(self._index) != len(self.carries):
                self._index = {key: number for number, key in enumerate(self.carries)}
                self._rows = np.stack(list(self.carries.values()))
            for row in np.flatnonzero(starts):
                resume[row] = self._index.get(key_at(rows, int(row), GROUP_KEY), -1)
        return resume

    def earlier(self) -> np.ndarray:
        return self._rows

    def followed_kept_markers(self, key: tuple) -> bool:
        """Whether the group's walk met the next data of markers an earlier walk wrote without it."""
        return bool(self.carries[key][K.S_KEPT_AWAIT] == 2)

    def version(self, key: tuple, version_mode: int) -> int:
        """The transaction version concluded from the group's rows up to its carry."""
        return int(K.transaction_version(self.carries[key][: K.STATE_FIELDS], version_mode))


def with_producer_state(
    batches: Iterator[pa.RecordBatch],
    *,
    expiration_ms: int,
    version_mode: int,
    schema: pa.Schema,
    earlier: ProducerEnds | None = None,
    ends: ProducerEnds | None = None,
) -> Iterator[pa.RecordBatch]:
    """Every input row once, with the producer-state columns added.

    A producer in `earlier` goes on from its carry there; every producer's carry at its last row goes into
    `ends`.
    """
    carry = K.ProducerCarry()
    held = HeldRows(schema)
    labels = version_labels(version_mode)
    earlier = earlier or ProducerEnds()
    previous = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        rows = pa.Table.from_batches([batch])
        starts = group_starts(rows, GROUP_KEY, previous)
        before = previous
        previous = key_at(rows, rows.num_rows - 1, GROUP_KEY)
        longs, flags, ended = producer_state(rows, starts, carry, expiration_ms, version_mode, earlier)
        if ends is not None:
            for row in ended:
                ended_at = int(row[K.ENDED_ROW])
                ends.carries[before if ended_at == 0 else key_at(rows, ended_at - 1, GROUP_KEY)] = row
        if carry.state[K.S_AWAIT_FILLED] != NONE:
            held.fill_waiting(int(carry.state[K.S_AWAIT_FILLED]))
        if carry.state[K.S_CARRIED_ENDED]:
            yield from held.release(_label(labels, int(carry.state[K.S_CARRIED_VERSION])))
        open_from = int(carry.state[K.S_OPEN_FROM])
        if open_from:
            yield from with_state(rows.slice(0, open_from), longs[:, :open_from], flags[:, :open_from], labels, schema)
        before_open = held.count
        held.add(with_state(rows.slice(open_from), longs[:, open_from:], flags[:, open_from:], labels, schema))
        if carry.state[K.S_AWAIT_AT] != NONE:
            held.wait_at(before_open + int(carry.state[K.S_AWAIT_AT]) - open_from)
    if ends is not None and previous is not None:
        ends.carries[previous] = carry.kept()
    yield from held.release(_label(labels, carry.final_version(version_mode)))


class HeldRows:
    """The output rows of the producer being walked, whose transaction version is not known yet.

    `count` rows held; held row `waiting` is a TV2 abort waiting for its next data epoch; `fills`: the (row,
    epoch) that held aborts get when released.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0
        self.count = 0
        self.waiting: int | None = None
        self.fills: list[tuple[int, int]] = []
        self.spill: tuple[str, pa.ipc.RecordBatchStreamWriter] | None = None

    def add(self, batches: Iterator[pa.RecordBatch]) -> None:
        for batch in batches:
            self.batches.append(batch)
            self.rows += batch.num_rows
            self.count += batch.num_rows
        if self.rows > HELD_ROWS:
            if self.spill is None:
                path = spill_file("produce-audit-replay-", ".arrows")
                self.spill = path, pa.ipc.new_stream(path, self.schema)
            for batch in self.batches:
                self.spill[1].write_batch(batch)
            self.batches, self.rows = [], 0

    def wait_at(self, row: int) -> None:
        """Held row `row` is a TV2 abort whose next data epoch comes later."""
        self.waiting = row

    def fill_waiting(self, epoch: int) -> None:
        """The waiting abort's next data epoch has come."""
        if self.waiting is not None:
            self.fills.append((self.waiting, epoch))
            self.waiting = None

    def release(self, version: pa.Scalar) -> Iterator[pa.RecordBatch]:
        """The held rows in the order added, with their version; afterwards nothing is held."""
        fills, at = self.fills, 0
        if self.spill is not None:
            path, writer = self.spill
            self.spill = None
            writer.close()
            try:
                with pa.memory_map(path) as source:
                    for batch in pa.ipc.open_stream(source):
                        yield _with_version(_filled(batch, at, fills), version)
                        at += batch.num_rows
            finally:
                os.unlink(path)
        batches, self.batches, self.rows = self.batches, [], 0
        self.count, self.waiting, self.fills = 0, None, []
        for batch in batches:
            yield _with_version(_filled(batch, at, fills), version)
            at += batch.num_rows


def _with_version(batch: pa.RecordBatch, version: pa.Scalar) -> pa.RecordBatch:
    index = batch.schema.get_field_index("transaction_version")
    return batch.set_column(index, batch.schema.field(index), pa.repeat(version, batch.num_rows))


def _filled(batch: pa.RecordBatch, at: int, fills: list[tuple[int, int]]) -> pa.RecordBatch:
    """`batch` (held rows from `at` on) with the next data epoch of the aborts that `fills` name."""
    inside = [(row - at, epoch) for row, epoch in fills if at <= row < at + batch.num_rows]
    if not inside:
        return batch
    index = batch.schema.get_field_index("next_data_epoch")
    field = batch.schema.field(index)
    values = pc.fill_null(batch.column(index).cast(pa.int64()), NONE).to_numpy(zero_copy_only=False).copy()
    for row, epoch in inside:
        values[row] = epoch
    return batch.set_column(index, field, pa.array(values, mask=values == NONE).cast(field.type))


def _label(labels: pa.Array, code: int) -> pa.Scalar:
    return pa.scalar(None, pa.string()) if code == NONE else labels[code]


def producer_state(
    rows: pa.Table,
    starts: np.ndarray,
    carry: K.ProducerCarry,
    expiration_ms: int,
    version_mode: int,
    earlier: ProducerEnds,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's (int64 outputs, int8 flags) for rows in producer order, continuing from `carry` (and a group
    from its carry in `earlier`), and the carries of the groups that ended among them."""
    ended = np.zeros((int(starts.sum()), K.CARRY_WIDTH), dtype=np.int64)
    longs, flags = K.replay_producers(
        starts,
        _row_flags(rows),
        _marker_codes(rows),
        *(
            int64_values(rows, name)
            for name in (
                "producer_epoch",
                "control_type",
                "coordinator_epoch",
                "base_offset",
                "max_timestamp",
                "base_sequence",
                "last_sequence",
                "coordinator_version",
            )
        ),
        expiration_ms,
        version_mode,
        carry.state,
        carry.seq,
        carry.ring,
        earlier.resume(rows, starts),
        earlier.earlier(),
        ended,
    )
    return longs, flags, ended[: int(carry.state[K.S_ENDED])]


def with_state(
    rows: pa.Table, longs: np.ndarray, flags: np.ndarray, labels: pa.Array, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """`rows` with the kernel's outputs for them (one column of `longs` and `flags` per row), typed as `schema`."""
    columns: dict[str, pa.Array] = {}
    for name, index in _LONG_COLUMNS.items():
        values = longs[index]
        columns[name] = pa.array(values, mask=values == NONE).cast(schema.field(name).type)
    for name, index in _FLAG_COLUMNS.items():
        values = flags[index]
        columns[name] = pa.array(values == 1, mask=values < 0)
    codes = longs[K.VERSION]
    columns["transaction_version"] = labels.take(pa.array(codes, mask=codes == NONE))
    out = rows
    for field in schema:
        if field.name in columns:
            out = out.append_column(field, columns[field.name])
    return iter(out.select(schema.names).to_batches())


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
