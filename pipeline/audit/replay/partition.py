"""One Kafka partition's replay in a task of the replay pass: whole, or going on from what the kept replay left.

The task (pipeline.audit.replay.files) hands each of its partitions here with the files to replay. A partition that
goes on (pipeline.audit.replay.kept) gets only its added files; it is replayed from the kept ends of its replicas
and producers, its replicas' kept last rows are written again with the next entry they now have, and it falls back
to a whole replay when its added rows do not come after the kept ones (in file order, and in offset order for
every producer), when a replica held a truncated tail before its last row, when the coordinator's versions of one
of its producers changed, when the transaction version concluded over a producer's rows changes, or when the added
rows hold the next data of a producer whose last kept rows end with a TV2 abort (its `next_data_epoch`).

Every partition leaves a body file (every row but each replica's last), its replicas' last rows (`tails`) and ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.audit.replay.file_order import FileOrderCarry
from pipeline.audit.replay.kept import ENDS
from pipeline.audit.replay.producer_arrow import ProducerEnds
from pipeline.audit.replay.task import ReplayEnds
from pipeline.audit.replay.task_outputs import HeldTables, TableFiles, TaskOutputs
from pipeline.audit.replay.task_rows import TaskRows
from pipeline.sources.filesystems import resolve
from pipeline.tables.parquet_sink import COMPRESSION, ROW_GROUP_ROWS, ParquetFile, dictionary_columns
from schemas.batches import STATUS_TRUNCATED
from schemas.keys import REPLICA

NEXT_ENTRY = "next_entry_segment_base_offset"  # null on a replica's last row only


@dataclass(frozen=True)
class PartitionFiles:
    """A partition's files for one task: `paths` to replay; all of them (`every_path`) when it cannot go on.
    `size_bytes` (of `paths`) spreads partitions over tasks; `replicas` are its audited (cluster, broker)."""

    topic: str
    partition: int
    paths: tuple[str, ...]
    every_path: tuple[str, ...]
    goes_on: bool
    size_bytes: int
    replicas: list
    copies: int = 1  # the most log dirs one cluster's files of it come from (FileGroup.copies)


@dataclass
class PartitionReplay:
    """What a partition's replay wrote into its body file (None: nothing, it went on without added rows), the parts
    of the aggregates over the rows it replayed (`parts`: table, rows), and its replicas' last rows and ends."""

    body: tuple[str, int] | None
    tails: pa.Table
    ends: pa.Table
    whole: bool
    parts: list[tuple[str, pa.Table]] = field(default_factory=list)
    findings: HeldTables | None = None  # a partition that went on: the findings of the rows it wrote, held


def replay_partition(
    files: PartitionFiles,
    rows_of: Callable[[Iterable[str]], Iterator[pa.RecordBatch]],
    replay: Callable[..., Iterator[pa.RecordBatch]],
    schema: pa.Schema,
    kept_tails: pa.Table,
    kept_ends: pa.Table,
    changed_producers: frozenset[tuple[str, int]],
    last_segments: dict[tuple, int],
    version_mode: int,
    folder: str,
    outputs: TaskOutputs | None = None,
    found: TableFiles | None = None,
) -> PartitionReplay:
    """The partition's replay, its body written into a new file in `folder` as the walk hands it out, so that memory
    holds a few record batches whatever the partition's size; `kept_tails` and `kept_ends` are the kept replay's
    rows of this partition. With `outputs`, the body's rows are checked as they are written, their findings going
    into the task's files (`found`), and the rows replayed are aggregated (pipeline.audit.replay.task_outputs)."""
    if files.goes_on:
        earlier = ends_of(kept_ends)
        if _may_go_on(earlier, kept_tails, changed_producers):
            with TaskRows() as held:  # on local disk past its bound, as a whole walk's rows are
                for batch in rows_of(files.paths):
                    held.add(batch)
                went_on = _go_on(
                    held.table(), replay, schema, earlier, kept_tails, last_segments, version_mode, folder, outputs
                )
            if went_on is not None:
                if found is not None and went_on.findings is not None:
                    went_on.findings.into(found)
                return went_on
    ends = ReplayEnds()
    body = BodyFile(folder, schema, outputs, found)
    tails = body.write_walk(replay(rows_of(files.every_path), ends=ends))
    return PartitionReplay(body.close(), tails, ends_table(ends), whole=True, parts=body.parts)


class BodyFile:
    """A partition's body file: the rows a walk hands out but each replica's last one, which it keeps apart. With
    `outputs`, the findings of the rows written go into `found` and the rows walked are aggregated (`parts`, once
    closed).

    The rows are checked a row group at a time, as the file holds them before it writes them: the checks cost
    mostly per call, not per row, and a walk hands out small record batches."""

    def __init__(
        self,
        folder: str,
        schema: pa.Schema,
        outputs: TaskOutputs | None = None,
        found: TableFiles | HeldTables | None = None,
    ) -> None:
        files, local = resolve(folder)
        self.name = f"body-{uuid.uuid4().hex}.{COMPRESSION}.parquet"
        self.path = f"{folder.rstrip('/')}/{self.name}"
        self.schema = schema
        self._file = ParquetFile(files, f"{local}/{self.name}", schema)
        self._outputs = outputs
        self._found = found
        self._parts = None if outputs is None else outputs.parts()
        self.parts: list[tuple[str, pa.Table]] = []
        self._unchecked: list[pa.Table] = []
        self._unchecked_rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._file.add(table)
            if self._outputs is not None and self._found is not None:
                self._unchecked.append(table)
                self._unchecked_rows += table.num_rows
                if self._unchecked_rows >= ROW_GROUP_ROWS:
                    self._check()

    def _check(self) -> None:
        if self._unchecked:
            self._outputs.check(pa.concat_tables(self._unchecked), self._found)
            self._unchecked, self._unchecked_rows = [], 0

    def write_walk(self, batches: Iterator[pa.RecordBatch]) -> pa.Table:
        """Write a walk's rows; the replicas' last rows (no next entry) are returned instead."""
        tails = []
        for batch in batches:
            rows = pa.Table.from_batches([batch], schema=self.schema)
            if self._parts is not None:
                self._parts.add(rows)
            if rows[NEXT_ENTRY].null_count == 0:  # no replica ends in it: the rows are written as they are
                self.write(rows)
                continue
            last = pc.is_null(rows[NEXT_ENTRY])
            tails.append(rows.filter(last))
            self.write(rows.filter(pc.invert(last)))
        return pa.concat_tables(tails) if tails else self.schema.empty_table()

    def close(self) -> tuple[str, int] | None:
        """The file's path and rows; None when no row was written (and there is no file)."""
        self._check()
        rows = self._file.close().rows
        if self._parts is not None:
            self.parts = list(self._parts.tables())
        return (self.path, rows) if rows else None


def _may_go_on(earlier: ReplayEnds, tails: pa.Table, changed_producers: frozenset[tuple[str, int]]) -> bool:
    """Every kept replica has its last row and no truncated tail before it, and no producer's coordinator versions
    changed."""
    tail_keys = _keys(tails, REPLICA)
    if set(tail_keys) != set(earlier.replicas):
        return False
    for key, status in zip(tail_keys, tails["entry_status"].to_pylist(), strict=True):
        if earlier.replicas[key].truncated > (status == STATUS_TRUNCATED):
            return False
    return not any((key[0], key[4]) in changed_producers for key in earlier.producers.carries)


def _go_on(
    added: pa.Table | None,
    replay: Callable[..., Iterator[pa.RecordBatch]],
    schema: pa.Schema,
    earlier: ReplayEnds,
    tails: pa.Table,
    last_segments: dict[tuple, int],
    version_mode: int,
    folder: str,
    outputs: TaskOutputs | None,
) -> PartitionReplay | None:
    """The added rows replayed from `earlier`; None when the partition must be replayed whole. The findings of the
    rows it writes are held (`findings`) until it is known to have gone on."""
    if added is None:
        return PartitionReplay(None, tails, ends_table(earlier), whole=False)
    tail_keys = _keys(tails, REPLICA)
    first_added: dict[tuple, int] = {}
    for key, rows in _by_replica(added):
        if key not in earlier.replicas:
            return None
        tail = tails.slice(tail_keys.index(key), 1)
        if not _after(rows, tail, earlier.replicas[key]):
            return None
        first_added[key] = pc.min(rows["segment_base_offset"]).as_py()
    ends = ReplayEnds(dict(earlier.replicas), ProducerEnds(dict(earlier.producers.carries)))
    moved = np.array([key in first_added for key in tail_keys], dtype=bool)
    followed = _followed(tails.filter(moved), [first_added[key] for key in tail_keys if key in first_added])
    held = None if outputs is None else HeldTables()
    body = BodyFile(folder, schema, outputs, held)
    # the kept last rows first: each comes before its producer's added rows, as the snapshot walk reads them
    body.write(_with_last_segment(followed, last_segments))
    last_rows = body.write_walk(replay(iter(added.to_batches()), earlier=earlier, ends=ends))
    written = body.close()
    for key in earlier.producers.carries:
        if earlier.producers.version(key, version_mode) != ends.producers.version(
            key, version_mode
        ) or ends.producers.followed_kept_markers(key):
            _remove(written)
            return None
    kept = tails.filter(pa.array(~moved))
    return PartitionReplay(
        written, pa.concat_tables([last_rows, kept]), ends_table(ends), whole=False, parts=body.parts, findings=held
    )


def _remove(written: tuple[str, int] | None) -> None:
    """Delete a body file a replay that could not go on wrote (a whole replay follows)."""
    if written is not None:
        files, local = resolve(written[0])
        files.delete_file(local)


def _after(rows: pa.Table, tail: pa.Table, carry: FileOrderCarry) -> bool:
    """Whether a replica's added rows all come after its kept last row in file order, and its added producer rows
    after every kept row in offset order (the producer walk takes each producer's rows by offset)."""
    segment, position = tail["segment_base_offset"][0].as_py(), tail["position"][0].as_py()
    later = pc.or_(
        pc.greater(rows["segment_base_offset"], segment),
        pc.and_(pc.equal(rows["segment_base_offset"], segment), pc.greater(rows["position"], position)),
    )
    if not pc.all(pc.fill_null(later, False)).as_py():
        return False
    producer_rows = rows.filter(pc.fill_null(rows["is_producer_row"], False))
    if producer_rows.num_rows == 0:
        return True
    lowest = pc.min(producer_rows["base_offset"]).as_py()
    return lowest is not None and lowest > carry.max_last_offset


def _followed(tails: pa.Table, next_segments: list[int]) -> pa.Table:
    """Kept last rows with the segment of the entry now after each."""
    index = tails.schema.get_field_index(NEXT_ENTRY)
    return tails.set_column(index, tails.schema.field(index), pa.array(next_segments, tails.schema.field(index).type))


def _with_last_segment(rows: pa.Table, last_segments: dict[tuple, int]) -> pa.Table:
    """`in_last_segment` of truncated tails again, against their replica's last segment now."""
    values = [
        None if status != STATUS_TRUNCATED else segment == last_segments.get(key)
        for key, status, segment in zip(
            _keys(rows, REPLICA),
            rows["entry_status"].to_pylist(),
            rows["segment_base_offset"].to_pylist(),
            strict=True,
        )
    ]
    index = rows.schema.get_field_index("in_last_segment")
    return rows.set_column(index, rows.schema.field(index), pa.array(values, pa.bool_()))


def ends_of(table: pa.Table) -> ReplayEnds:
    """The ReplayEnds of an `ends` table's rows."""
    ends = ReplayEnds()
    carries = table["carry"].to_pylist()
    for key, producer_id, producer_row, carry in zip(
        _keys(table, REPLICA), table["producer_id"].to_pylist(), table["is_producer_row"].to_pylist(), carries,
        strict=True,
    ):  # fmt: skip
        if producer_row is None:  # a replica's row; a group of rows without producer state has it false
            ends.replicas[key] = FileOrderCarry.of(key, carry)
        else:
            ends.producers.carries[(*key, producer_id, producer_row)] = np.array(carry, dtype=np.int64)
    return ends


def ends_table(ends: ReplayEnds) -> pa.Table:
    """`ends` as rows of ENDS: one per replica, one per producer group."""
    rows = [(*key, None, None, carry.kept()) for key, carry in ends.replicas.items()]
    rows += [(*key, carry.tolist()) for key, carry in ends.producers.carries.items()]
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in ENDS]
    return pa.table([pa.array(list(values), field.type) for values, field in zip(columns, ENDS, strict=True)], ENDS)


def write_table(folder: str, kind: str, table: pa.Table) -> str:
    """`table` as a new Parquet file in `folder`, named for its kind; its path."""
    files, local = resolve(folder)
    name = f"{kind}-{uuid.uuid4().hex}.{COMPRESSION}.parquet"
    files.create_dir(local, recursive=True)
    with files.open_output_stream(f"{local}/{name}") as stream:
        pq.write_table(table, stream, compression=COMPRESSION, use_dictionary=dictionary_columns(table.schema))
    return f"{folder.rstrip('/')}/{name}"


def _keys(table: pa.Table, names: list[str]) -> list[tuple]:
    return list(zip(*(table[name].to_pylist() for name in names), strict=True)) if table.num_rows else []


def _by_replica(rows: pa.Table) -> Iterator[tuple[tuple, pa.Table]]:
    keys = rows.select(REPLICA).group_by(REPLICA, use_threads=False).aggregate([])
    for values in keys.to_pylist():
        mask = None
        for name in REPLICA:
            matches = pc.equal(rows[name], values[name])
            mask = matches if mask is None else pc.and_(mask, matches)
        yield tuple(values[name] for name in REPLICA), rows.filter(pc.fill_null(mask, False))
