"""The rows a replay task reads from its partitions' `batches` files: the audited replica's, with the facts and flags
the replay needs beside the decoded header fields."""

from __future__ import annotations

import functools
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.filesystems import resolve
from schemas.batches import BATCHES, BATCHES_PARTITION_BY, CONTROL_ABORT, CONTROL_COMMIT, STATUS_OK, STATUS_TRUNCATED
from schemas.keys import REPLICA

TOPIC_KINDS = ["is_coordinator_topic", "is_kraft_topic"]
READ_ROWS = 65_536  # rows read from a file at a time
# a file's columns: the partition columns are in its folder names
FILE_SCHEMA = pa.schema([field for field in to_arrow_schema(BATCHES) if field.name not in BATCHES_PARTITION_BY])


def read_file(path: str) -> Iterable[pa.RecordBatch]:
    """A `batches` file's rows, a column an older file lacks as nulls (as Spark reads it with the table's schema)."""
    filesystem, local = resolve(path)
    return ds.dataset(local, schema=FILE_SCHEMA, format="parquet", filesystem=filesystem).to_batches(
        batch_size=READ_ROWS
    )


def read_folder(path: str) -> pa.Table:
    filesystem, local = resolve(path)
    return ds.dataset(local, format="parquet", filesystem=filesystem).to_table()


def input_rows(
    batch: pa.RecordBatch,
    cluster: str,
    topic: str,
    topic_kinds: tuple[bool, bool],
    facts: pa.Table,
    versions: pa.Table | None,
    schema: pa.Schema,
) -> pa.Table:
    """The rows of the audited replica in `batch`, with the columns `replay_input` adds, in its order. `facts` are
    the `replica_facts` rows of the batch's cluster and topic, `versions` the coordinator versions of its cluster."""
    rows = pa.Table.from_batches([batch])
    rows = rows.set_column(
        rows.schema.get_field_index("broker_id"),
        "broker_id",
        pc.coalesce(rows["broker_id"], pa.scalar(-1, pa.int32())),
    )
    rows = _with_facts(rows, facts)
    count = rows.num_rows
    rows = rows.append_column("cluster_id", pa.repeat(pa.scalar(cluster), count))
    rows = rows.append_column("topic", pa.repeat(pa.scalar(topic), count))
    rows = rows.append_column("is_compacted", pc.is_valid(rows["compacted_by"]))
    for kind, value in zip(TOPIC_KINDS, topic_kinds, strict=True):
        rows = rows.append_column(kind, pa.repeat(pa.scalar(value), count))
    rows = rows.append_column("coordinator_version", _coordinator_version(rows, versions))
    for name, values in _flags(rows).items():
        rows = rows.append_column(name, values)
    return pa.Table.from_arrays([rows[field.name].cast(field.type) for field in schema], schema=schema)


def _with_facts(rows: pa.Table, facts: pa.Table) -> pa.Table:
    """`replay_input`'s inner join of the rows with `replica_facts` on (partition, broker), `facts` being the rows of
    one cluster and topic, a row per partition: each row's partition looked up among them, not a hash join of every
    row, and no filter when every row is of an audited replica (a file holds one partition of one broker)."""
    at = pc.index_in(rows["partition"], value_set=facts["partition"], skip_nulls=True)
    audited = pc.fill_null(pc.equal(rows["broker_id"], facts["broker_id"].take(at)), False)
    if not pc.all(audited).as_py():
        rows, at = rows.filter(audited), at.filter(audited)
    for name in facts.column_names:
        if name not in REPLICA:
            rows = rows.append_column(facts.field(name), facts[name].take(at))
    return rows


def matching_rows(table: pa.Table, **values: str) -> pa.Table:
    """The rows of `table` whose columns hold `values` (a null matches nothing, as in a join)."""
    matches = [pc.equal(table[name], value) for name, value in values.items()]
    return table.filter(functools.reduce(pc.and_, matches))


def _flags(rows: pa.Table) -> dict[str, pa.ChunkedArray]:
    """`replay_input`'s per-row flags, in Arrow's three-valued logic as Spark's columns are in Spark's."""
    is_control = rows["is_control"]
    producer_row = pc.and_kleene(
        pc.and_kleene(pc.equal(rows["entry_status"], STATUS_OK), pc.equal(rows["magic"], 2)),
        pc.and_kleene(
            pc.and_kleene(pc.greater_equal(rows["producer_id"], 0), pc.invert(rows["is_kraft_topic"])),
            pc.invert(pc.and_kleene(is_control, pc.equal(rows["record_count"], 0))),
        ),
    )
    control_type = rows["control_type"]
    is_commit_or_abort = pc.if_else(  # Spark's IN is null for a null value
        pc.is_null(control_type),
        pa.scalar(None, pa.bool_()),
        pc.is_in(control_type, value_set=pa.array([CONTROL_ABORT, CONTROL_COMMIT], control_type.type)),
    )
    return {
        "is_producer_row": pc.fill_null(producer_row, False),
        "in_first_segment": pc.equal(rows["segment_base_offset"], rows["first_segment_base_offset"]),
        "in_last_segment": pc.if_else(
            pc.fill_null(pc.equal(rows["entry_status"], STATUS_TRUNCATED), False),
            pc.equal(rows["segment_base_offset"], rows["last_segment_base_offset"]),
            pa.scalar(None, pa.bool_()),
        ),
        "is_data": pc.invert(is_control),
        "is_marker": pc.and_kleene(is_control, is_commit_or_abort),
    }


def _coordinator_version(rows: pa.Table, versions: pa.Table | None) -> pa.ChunkedArray | pa.Array:
    """`with_coordinator_version`: 2 from the producer id's first TV2 epoch on, 1 up to its last TV0/TV1 epoch.
    `versions` are the rows' cluster's, one per producer id."""
    if versions is None:
        return pa.nulls(rows.num_rows, pa.int32())
    at = pc.index_in(rows["producer_id"], value_set=versions["producer_id"], skip_nulls=True)
    epoch = rows["producer_epoch"]
    tv2 = pc.fill_null(pc.greater_equal(epoch, versions["tv2_from_epoch"].take(at)), False)
    tv1 = pc.fill_null(pc.less_equal(epoch, versions["tv1_through_epoch"].take(at)), False)
    none = pa.scalar(None, pa.int32())
    return pc.if_else(tv2, pa.scalar(2, pa.int32()), pc.if_else(tv1, pa.scalar(1, pa.int32()), none))
