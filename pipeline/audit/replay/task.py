"""The replay of one task's rows: the `mapInArrow` function of the replay pass (pipeline.audit.replay.plan).

The rows arrive in no particular order, read from the task's files (pipeline.audit.replay.files) or as the
exchange left them: every replica of the task's partitions is in it. The task keeps them
(pipeline.audit.replay.task_rows), sorts them into file order (replica, segment, position, source file) for the
file-order state (pipeline.audit.replay.file_order), then into producer order (replica, producer id, producer row, base
offset, segment, position, source file) for the compiled producer walk (pipeline.audit.replay.producer_arrow), and hands
back every row once with both kinds of state. Both walks take the rows a chunk at a time with the state the chunk before
left.

Memory: the rows themselves (on local disk past `task_rows.HELD_ROWS`), and per row its two sort positions and
its file-order columns, about 60 bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pipeline.audit.replay.file_order import FileOrderCarry, with_file_order
from pipeline.audit.replay.producer_arrow import ProducerEnds, with_producer_state
from pipeline.audit.replay.task_rows import TaskRows, in_order, sort_order
from schemas.keys import REPLICA
from schemas.replay import FILE_ORDER_COLUMNS

# The source file breaks ties: log dirs without meta.properties can hold copies of one replica (broker -1), and
# their rows must come in one order whichever way they reached the task.
FILE_ORDER = ["segment_base_offset", "position", "source_file"]  # a replica's rows as its files hold them
ORDER = ["base_offset", "segment_base_offset", "position", "source_file"]  # a producer's rows in offset order
PRODUCER_ORDER = ["producer_id", "is_producer_row", *ORDER]  # a replica's rows, one producer after another
# what the file-order walk reads
FILE_ORDER_INPUTS = [
    *REPLICA,
    "entry_status",
    "magic",
    "last_offset",
    "partition_leader_epoch",
    "segment_base_offset",
    "size_bytes",
]


@dataclass
class ReplayEnds:
    """Where a replay left each replica (file order) and each of its producers: what a replay of rows appended to
    the same replicas goes on from."""

    replicas: dict[tuple, FileOrderCarry] = field(default_factory=dict)
    producers: ProducerEnds = field(default_factory=ProducerEnds)


def replay_rows(
    batches: Iterator[pa.RecordBatch],
    *,
    expiration_ms: int,
    version_mode: int,
    schema: pa.Schema,
    earlier: ReplayEnds | None = None,
    ends: ReplayEnds | None = None,
) -> Iterator[pa.RecordBatch]:
    """Every input row once, with FILE_ORDER_COLUMNS and PRODUCER_STATE_COLUMNS added (`schema`).

    Replicas and producers in `earlier` go on from where an earlier replay of their earlier rows left them; where
    this one leaves every replica and producer goes into `ends`.
    """
    earlier = earlier or ReplayEnds()
    with TaskRows() as kept:
        for batch in batches:
            kept.add(batch)
        rows = kept.table()
        if rows is None:
            return
        file_order = sort_order(rows, [*REPLICA, *FILE_ORDER])
        neighbours = file_order_state(rows, file_order, earlier.replicas, None if ends is None else ends.replicas)
        place = np.empty_like(file_order)  # each row's place in file order, where its neighbours are
        place[file_order] = np.arange(len(file_order))
        del file_order
        producer_order = sort_order(rows, [*REPLICA, *PRODUCER_ORDER])
        yield from with_producer_state(
            _with_neighbours(rows, producer_order, neighbours, place[producer_order]),
            expiration_ms=expiration_ms,
            version_mode=version_mode,
            schema=schema,
            earlier=earlier.producers,
            ends=None if ends is None else ends.producers,
        )


def file_order_state(
    rows: pa.Table,
    file_order: np.ndarray,
    earlier: dict[tuple, FileOrderCarry] | None = None,
    ends: dict[tuple, FileOrderCarry] | None = None,
) -> pa.Table:
    """FILE_ORDER_COLUMNS of every row of `rows`, in file order (`file_order`): they are taken once, in the order
    the producer walk wants, not put back into the rows' own order first."""
    walked = with_file_order(in_order(rows.select(FILE_ORDER_INPUTS), file_order), earlier, ends)
    names = FILE_ORDER_COLUMNS.fieldNames()
    return pa.Table.from_batches([batch.select(names) for batch in walked]).combine_chunks()


def _with_neighbours(
    rows: pa.Table, order: np.ndarray, neighbours: pa.Table, neighbours_order: np.ndarray
) -> Iterator[pa.RecordBatch]:
    """`rows` in `order` with their file-order columns, which are `neighbours` in `neighbours_order`."""
    schema = pa.schema([*rows.schema, *neighbours.schema])
    for batch, state in zip(in_order(rows, order), in_order(neighbours, neighbours_order), strict=True):
        yield pa.RecordBatch.from_arrays([*batch.columns, *state.columns], schema=schema)
