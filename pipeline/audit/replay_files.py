"""The replay's input read by the replay's own tasks from the `batches` files, when the files hold whole partitions.

On the exchange path (pipeline.audit.replay.replay_input) Spark reads every wide row, hash-exchanges it by
partition and converts it into Arrow for the pass: most of the replay's time at scale (BENCHMARKS.md). When the
Delta log says which partition each file holds (pipeline.tables.files_per_partition), each task is instead handed the
files of some partitions, every replica and every cluster's copy of them, and reads them with pyarrow; no row
crosses the JVM. What `replay_input` adds to a row is added here from the same definitions: the replica's facts
(`replica_facts`, which also chooses the audited replica) and the coordinator's transaction versions
(`coordinator_versions`) are small Spark aggregates the tasks read from the scratch folder, the topic kinds are
Spark's `topic_matches` of each topic name, and the per-row flags are `replay_input`'s expressions in Arrow's
three-valued logic. tests/test_replay_files.py checks both paths give the same replay.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.arrow_pass import ArrowPass
from pipeline.audit.coordinator_version import coordinator_versions
from pipeline.audit.producer_kernel import CONTROL_ABORT, CONTROL_COMMIT
from pipeline.audit.replay import REPLICA, audited_broker, replay_pass, replica_facts, topic_matches
from pipeline.audit.scratch import Scratch
from pipeline.config import AuditSettings
from pipeline.sources.filesystems import resolve
from pipeline.tables.files_per_partition import FileGroup
from schemas.batches import BATCHES, BATCHES_PARTITION_BY, STATUS_OK

TOPIC_KINDS = ["is_compacted", "is_coordinator_topic", "is_kraft_topic"]
READ_ROWS = 65_536  # rows read from a file at a time
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def replay_files_pass(
    batches: DataFrame,
    files: Sequence[FileGroup],
    settings: AuditSettings,
    transaction_log: DataFrame | None,
    scratch: Scratch,
) -> ArrowPass:
    """The replay pass of `batches` (whose rows `files` hold), its tasks reading the files themselves.

    The pass has the exchange path's schema and rows; its input is one row per task, naming the task.
    """
    spark = batches.sparkSession
    exchanged = replay_pass(batches, settings, transaction_log)  # planned only: it gives the schema
    scratch.materialise(replica_facts(audited_broker(batches), settings.replica_choice), "replica_facts")
    if transaction_log is not None:
        scratch.materialise(coordinator_versions(transaction_log), "coordinator_versions")
    tasks = task_files(files, int(spark.conf.get(SHUFFLE_PARTITIONS)))
    function = partial(
        replay_files,
        tasks=tasks,
        kinds=_topic_kinds(spark, sorted({group.topic for group in files}), settings),
        facts_path=scratch.path("replica_facts"),
        versions_path=None if transaction_log is None else scratch.path("coordinator_versions"),
        input_schema=to_arrow_schema(exchanged.rows.schema),
        replay_function=exchanged.function,
    )
    return ArrowPass(spark.range(0, len(tasks), 1, len(tasks)), function, exchanged.schema)


def task_files(files: Sequence[FileGroup], most_tasks: int) -> tuple[tuple[tuple[str, str], ...], ...]:
    """The (topic, path) pairs each task reads: whole partitions, the largest first onto the task with the fewest
    bytes so far, so the tasks get about the same bytes."""
    count = max(1, min(len(files), most_tasks))
    loads = [(0, task) for task in range(count)]
    assigned: list[list[tuple[str, str]]] = [[] for _ in range(count)]
    for group in sorted(files, key=lambda group: -group.size_bytes):
        load, task = heapq.heappop(loads)
        assigned[task].extend((group.topic, path) for path in group.paths)
        heapq.heappush(loads, (load + group.size_bytes, task))
    return tuple(tuple(paths) for paths in assigned)


def _topic_kinds(spark, topics: list[str], settings: AuditSettings) -> dict[str, tuple[bool, bool, bool]]:
    """Per topic name: compacted, coordinator, KRaft, as the exchange path's `topic_matches` says."""
    if not topics:
        return {}
    names = spark.createDataFrame([(topic,) for topic in topics], "topic string")
    kinds = names.select(
        "topic",
        topic_matches(settings.compacted_topics).alias("is_compacted"),
        topic_matches(settings.coordinator_topics).alias("is_coordinator_topic"),
        topic_matches(settings.kraft_topics).alias("is_kraft_topic"),
    )
    return {row.topic: tuple(row[kind] for kind in TOPIC_KINDS) for row in kinds.collect()}


def replay_files(
    ids: Iterator[pa.RecordBatch],
    *,
    tasks: tuple[tuple[tuple[str, str], ...], ...],
    kinds: dict[str, tuple[bool, bool, bool]],
    facts_path: str,
    versions_path: str | None,
    input_schema: pa.Schema,
    replay_function: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
) -> Iterator[pa.RecordBatch]:
    """Executor side: the replay of the files of the tasks named by `ids`."""
    mine = [entry for batch in ids for task in batch.column(0).to_pylist() for entry in tasks[task]]
    facts = _read_folder(facts_path)
    versions = None if versions_path is None else _read_folder(versions_path)
    rows = (
        _input_rows(batch, topic, kinds[topic], facts, versions, input_schema)
        for topic, path in mine
        for batch in _read_file(path)
    )
    yield from replay_function(batch for table in rows for batch in table.to_batches())


# a file's columns: the partition columns are in its folder names
FILE_SCHEMA = pa.schema([field for field in to_arrow_schema(BATCHES) if field.name not in BATCHES_PARTITION_BY])


def _read_file(path: str) -> Iterable[pa.RecordBatch]:
    """A `batches` file's rows, a column an older file lacks as nulls (as Spark reads it with the table's schema)."""
    filesystem, local = resolve(path)
    return ds.dataset(local, schema=FILE_SCHEMA, format="parquet", filesystem=filesystem).to_batches(
        batch_size=READ_ROWS
    )


def _read_folder(path: str) -> pa.Table:
    filesystem, local = resolve(path)
    return ds.dataset(local, format="parquet", filesystem=filesystem).to_table()


def _input_rows(
    batch: pa.RecordBatch,
    topic: str,
    topic_kinds: tuple[bool, bool, bool],
    facts: pa.Table,
    versions: pa.Table | None,
    schema: pa.Schema,
) -> pa.Table:
    """The rows of the audited replica in `batch`, with the columns `replay_input` adds, in its order."""
    rows = pa.Table.from_batches([batch])
    count = rows.num_rows
    rows = rows.append_column("topic", _repeated(pa.scalar(topic), count))
    rows = rows.set_column(
        rows.schema.get_field_index("broker_id"),
        "broker_id",
        pc.coalesce(rows["broker_id"], pa.scalar(-1, pa.int32())),
    )
    rows = rows.set_column(
        rows.schema.get_field_index("cluster_id"), "cluster_id", pc.coalesce(rows["cluster_id"], pa.scalar(""))
    )
    rows = rows.join(facts, keys=REPLICA, join_type="inner")
    count = rows.num_rows
    for kind, value in zip(TOPIC_KINDS, topic_kinds, strict=True):
        rows = rows.append_column(kind, _repeated(pa.scalar(value), count))
    rows = rows.append_column("coordinator_version", _coordinator_version(rows, versions))
    for name, values in _flags(rows).items():
        rows = rows.append_column(name, values)
    return pa.Table.from_arrays([rows[field.name].cast(field.type) for field in schema], schema=schema)


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
        "in_last_segment": pc.equal(rows["segment_base_offset"], rows["last_segment_base_offset"]),
        "is_data": pc.invert(is_control),
        "is_marker": pc.and_kleene(is_control, is_commit_or_abort),
    }


def _coordinator_version(rows: pa.Table, versions: pa.Table | None) -> pa.ChunkedArray | pa.Array:
    """`with_coordinator_version`: 2 from the producer id's first TV2 epoch on, 1 up to its last TV0/TV1 epoch."""
    if versions is None:
        return pa.nulls(rows.num_rows, pa.int32())
    keyed = pa.table(
        {"cluster_id": rows["cluster_id"], "producer_id": rows["producer_id"], "_row": np.arange(rows.num_rows)}
    )
    joined = keyed.join(versions, keys=["cluster_id", "producer_id"], join_type="left outer").sort_by("_row")
    epoch = rows["producer_epoch"]
    tv2 = pc.fill_null(pc.greater_equal(epoch, joined["tv2_from_epoch"]), False)
    tv1 = pc.fill_null(pc.less_equal(epoch, joined["tv1_through_epoch"]), False)
    none = pa.scalar(None, pa.int32())
    return pc.if_else(tv2, pa.scalar(2, pa.int32()), pc.if_else(tv1, pa.scalar(1, pa.int32()), none))


def _repeated(value: pa.Scalar, count: int) -> pa.Array:
    return pa.array([value.as_py()], value.type).take(pa.array(np.zeros(count, dtype=np.int64)))
