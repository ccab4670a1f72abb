"""The coordinator's records (`__transaction_state`, spec §5), located and paired with their id's neighbours, one
`__transaction_state` partition at a time.

A partition's records depend on its own audited replica's rows and cleaner offset alone, so a task that holds the
rows of whole partitions derives them with Arrow compute and numpy, without the two window sorts of every record that
a Spark plan needs (`is_first_of_batch` included, which the TSL-015 check reads). When the `transaction_log` files each
hold one partition (every log-dir and dump input), the tasks read the files of their partitions themselves
(`records_pass`); otherwise (an export, DataFrames built in tests) the rows are exchanged by partition first
(`audited_records`). tests/integration/test_coordinator_records.py holds both to the window definitions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from pipeline.arrow_pass import ArrowPass
from pipeline.audit.replay.files import task_files
from pipeline.audit.replay.partition_sets import partition_names
from pipeline.sources.filesystems import resolve, shipped
from pipeline.tables.files_per_partition import FileGroup, cluster_of
from schemas.checkpoints import CLEANER_OFFSET
from schemas.keys import TP
from schemas.transaction_log import TRANSACTION_LOG, TRANSACTION_LOG_PARTITION_BY

# The fields of an id's previous record that the transition rules compare with (pipeline.audit.rules.transaction_log).
PREVIOUS_FIELDS = (
    "is_tombstone",
    "state",
    "state_name",
    "producer_id",
    "producer_epoch",
    "next_producer_id",
    "transaction_timeout_ms",
    "partition_set",
    "last_update_timestamp_ms",
    "record_offset",
)
_LOG = to_arrow_schema(TRANSACTION_LOG)
FILE_SCHEMA = pa.schema([field for field in _LOG if field.name not in TRANSACTION_LOG_PARTITION_BY])
# The audited rows: the table's columns with the replica's cleaner offset.
ROWS = pa.schema([*_LOG, pa.field("cleaner_offset", pa.int64())])
_DERIVED = [
    pa.field("uncleaned_from", pa.int64()),
    pa.field("is_tombstone", pa.bool_()),
    pa.field("is_uncleaned", pa.bool_()),
    pa.field("base_offset", pa.int64()),
    pa.field("last_offset", pa.int64()),
    pa.field("partition_set", pa.list_(pa.string())),
    pa.field("is_tv2", pa.bool_()),
    pa.field("followed", pa.bool_()),
    pa.field("previous_timeout_ms", pa.int32()),
]


def _previous_type() -> pa.StructType:
    types = {field.name: field.type for field in [*_LOG, *_DERIVED]}
    return pa.struct([pa.field(name, types[name]) for name in PREVIOUS_FIELDS])


_PREVIOUS = _previous_type()
RECORDS = pa.schema(
    [
        *(field for field in _LOG if field.name != "is_tombstone"),
        *_DERIVED,
        pa.field("prev", _PREVIOUS),
        pa.field("is_first_of_batch", pa.bool_()),
    ]
)


def partition_records(rows: pa.Table) -> pa.Table:
    """RECORDS of one partition's audited rows (ROWS columns, one replica), in offset order.

    `uncleaned_from`: after the last gap in the record offsets (the topic is written without transactions, so a
    missing offset was cleaned) or the cleaner offset, whichever is higher; `followed`: a later record of the same
    transactional id follows; `previous_timeout_ms`: the timeout of the id's record before it; `prev`: that record
    when both are uncleaned (compaction keeps a partition's records from its last gap on whole);
    `is_first_of_batch`: the record has the lowest offset of its batch in its file.
    """
    rows = rows.take(pc.sort_indices(rows, [("record_offset", "ascending", "at_start")]))
    count = rows.num_rows
    offsets = rows["record_offset"]
    valid = np.asarray(offsets.is_valid(), dtype=bool)
    offset = np.asarray(offsets.fill_null(0), dtype=np.int64)
    gaps = np.zeros(count, dtype=bool)
    gaps[1:] = valid[1:] & valid[:-1] & (offset[1:] > offset[:-1] + 1)
    bounds = [int(offset[gaps].max())] if gaps.any() else []
    cleaner = rows["cleaner_offset"].drop_null()
    bounds += [cleaner[0].as_py()] if len(cleaner) else []
    uncleaned_from = max(bounds) if bounds else None
    uncleaned = pa.array(offset >= (uncleaned_from or 0), mask=~valid)
    tombstone = pc.fill_null(rows["is_tombstone"], False)
    located = {
        "uncleaned_from": pa.nulls(count, pa.int64()) if uncleaned_from is None else pa.repeat(uncleaned_from, count),
        "is_tombstone": tombstone,
        "is_uncleaned": uncleaned,
        "base_offset": offsets,
        "last_offset": offsets,
        "partition_set": partition_names(rows["partitions"]),
        "is_tv2": pc.equal(pc.fill_null(rows["client_transaction_version"], 0), 2),
    }
    before, after = _neighbours(rows["transactional_id"])
    has_before = before >= 0
    follower = np.where(after >= 0, after, 0)
    located["followed"] = pa.array((after >= 0) & valid[follower])
    at_before = pa.array(np.where(has_before, before, 0), mask=~has_before)
    located["previous_timeout_ms"] = rows["transaction_timeout_ms"].take(at_before)
    fields = {name: located[name] if name in located else rows[name] for name in PREVIOUS_FIELDS}
    with_prev = has_before & np.asarray(uncleaned.fill_null(False), dtype=bool)[np.where(has_before, before, 0)]
    at_prev = pa.array(np.where(with_prev, before, 0), mask=~with_prev)
    prev = pa.StructArray.from_arrays(
        [_array(fields[name]).take(at_prev) for name in PREVIOUS_FIELDS],
        fields=list(_PREVIOUS),
        mask=pa.array(~with_prev),
    )
    columns = {**{name: rows[name] for name in RECORDS.names if name in rows.column_names}, **located, "prev": prev}
    columns["is_first_of_batch"] = pa.array(_first_of_batch(rows))
    return _conformed(columns, RECORDS)


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _neighbours(keys: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """For rows in offset order: the row of the same key (null is a key) just before and just after each, -1 for
    none. A stable sort by key keeps the offset order within a key."""
    count = len(keys)
    order = np.asarray(pc.sort_indices(pa.table({"key": keys}), [("key", "ascending", "at_start")]))
    ordered = _array(keys).take(pa.array(order))
    same = np.zeros(count, dtype=bool)
    if count > 1:
        equal = pc.fill_null(pc.equal(ordered[1:], ordered[:-1]), False)
        nulls = np.asarray(ordered.is_null(), dtype=bool)
        same[1:] = np.asarray(equal, dtype=bool) | (nulls[1:] & nulls[:-1])
    before, after = np.full(count, -1, dtype=np.int64), np.full(count, -1, dtype=np.int64)
    before[order[1:][same[1:]]] = order[:-1][same[1:]]
    after[order[:-1][same[1:]]] = order[1:][same[1:]]
    return before, after


def _first_of_batch(rows: pa.Table) -> np.ndarray:
    """Whether each row (in offset order) is the first of its (source file, batch base offset)."""
    keys = rows.select(["source_file", "batch_base_offset"])
    order = np.asarray(
        pc.sort_indices(
            keys, [("source_file", "ascending", "at_start"), ("batch_base_offset", "ascending", "at_start")]
        )
    )
    ordered = keys.take(pa.array(order))
    first = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        same = np.ones(len(order) - 1, dtype=bool)
        for name in keys.column_names:
            column = _array(ordered[name])
            nulls = np.asarray(column.is_null(), dtype=bool)
            equal = np.asarray(pc.fill_null(pc.equal(column[1:], column[:-1]), False), dtype=bool)
            same &= equal | (nulls[1:] & nulls[:-1])
        first[1:] = ~same
    result = np.empty(len(order), dtype=bool)
    result[order] = first
    return result


def audited_rows(transaction_log: DataFrame, audited: DataFrame, checkpoints: DataFrame | None) -> DataFrame:
    """The `transaction_log` rows of the audited replicas (the replicas of `audited`: the replay's rows, or a row per
    replica), with their replica's `cleaner-offset-checkpoint` value (`cleaner_offset`, null when there is none)."""
    # One row per audited partition, broadcast: otherwise Spark sorts the wide records once more for a merge join.
    replicas = F.broadcast(audited.select(*TP, "broker_id").distinct())
    records = transaction_log.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1))).join(
        replicas, on=[*TP, "broker_id"], how="inner"
    )
    if checkpoints is None:
        return records.withColumn("cleaner_offset", F.lit(None).cast("long"))
    cleaner = (
        checkpoints.where((F.col("kind") == CLEANER_OFFSET) & F.col("offset").isNotNull())
        .withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .groupBy(*TP, "broker_id")
        .agg(F.max("offset").cast("long").alias("cleaner_offset"))
    )
    return records.join(F.broadcast(cleaner), on=[*TP, "broker_id"], how="left")


def exchanged_pass(rows: DataFrame) -> ArrowPass:
    """The records of `audited_rows`, exchanged by partition: each task derives those of the partitions it holds."""
    ordered = rows.select(*ROWS.names).repartition(*TP).sortWithinPartitions(*TP)
    return ArrowPass(ordered, _records_of_rows, from_arrow_schema(RECORDS))


def audited_records(transaction_log: DataFrame, audited: DataFrame, checkpoints: DataFrame | None) -> DataFrame:
    """The records of the audited replicas, as a DataFrame (the exchange path's rows)."""
    return exchanged_pass(audited_rows(transaction_log, audited, checkpoints)).frame()


def _records_of_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side of the exchange path: the task's rows, sorted by partition, a partition at a time."""
    batches = [batch for batch in batches if batch.num_rows]
    if not batches:
        return
    rows = _conformed(pa.Table.from_batches(batches), ROWS)
    keys = pc.binary_join_element_wise(
        pc.fill_null(rows["cluster_id"], ""), rows["topic"], pc.cast(rows["partition"], pa.string()), "\x00"
    )
    change = np.flatnonzero(np.asarray(pc.not_equal(keys[1:], keys[:-1]), dtype=bool)) + 1
    for start, end in zip([0, *change], [*change, rows.num_rows], strict=True):
        yield from partition_records(rows.slice(start, end - start)).to_batches()


def records_pass(
    spark: SparkSession, files: Sequence[FileGroup], replicas: dict[tuple[str, str, int], tuple[int, int | None]]
) -> ArrowPass:
    """The records of the partitions `files` hold, the tasks reading the files themselves; `replicas` gives each
    audited partition's (broker, cleaner offset). A partition without an audited replica has no records."""
    groups = [
        group
        for group in files
        if any((cluster_of(path), group.topic, group.partition) in replicas for path in group.paths)
    ]
    tasks = task_files(groups, int(spark.conf.get("spark.sql.shuffle.partitions")))
    function = partial(_records_of_files, tasks=tasks, replicas=replicas)
    return ArrowPass(
        spark.range(0, len(tasks), 1, max(1, len(tasks))), shipped(spark, function), from_arrow_schema(RECORDS)
    )


def _records_of_files(
    ids: Iterator[pa.RecordBatch],
    *,
    tasks: tuple[tuple[FileGroup, ...], ...],
    replicas: dict[tuple[str, str, int], tuple[int, int | None]],
) -> Iterator[pa.RecordBatch]:
    """Executor side: the records of the partitions of the tasks named by `ids`, each cluster's apart."""
    for batch in ids:
        for task in batch.column(0).to_pylist():
            for group in tasks[task]:
                for cluster, paths in sorted(_by_cluster(group.paths).items()):
                    replica = replicas.get((cluster, group.topic, group.partition))
                    if replica is not None:
                        rows = _read_rows(paths, cluster, group.topic, *replica)
                        if rows.num_rows:
                            yield from partition_records(rows).to_batches()


def _read_rows(paths: list[str], cluster: str, topic: str, broker: int, cleaner: int | None) -> pa.Table:
    """The rows of the files of one cluster's partition that its audited replica holds, as ROWS."""
    tables = []
    for path in paths:
        filesystem, local = resolve(path)
        table = ds.dataset(local, schema=FILE_SCHEMA, format="parquet", filesystem=filesystem).to_table()
        brokers = pc.fill_null(table["broker_id"], -1)
        tables.append(table.filter(pc.equal(brokers, broker)))
    rows = pa.concat_tables(tables)
    count = rows.num_rows
    columns = {
        **{name: rows[name] for name in rows.column_names},
        "broker_id": pc.fill_null(rows["broker_id"], -1),
        "cluster_id": pa.repeat(pa.scalar(cluster), count),
        "topic": pa.repeat(pa.scalar(topic), count),
        "cleaner_offset": pa.repeat(pa.scalar(cleaner, pa.int64()), count),
    }
    return _conformed(columns, ROWS)


def _conformed(columns: pa.Table | dict, schema: pa.Schema) -> pa.Table:
    """The columns of `schema`, by name, cast to its types (Spark's and a file's nullability differ)."""
    return pa.Table.from_arrays([_array(columns[field.name]).cast(field.type) for field in schema], schema=schema)


def sources(files: Sequence[FileGroup], replicas: dict[tuple[str, str, int], tuple[int, int | None]]) -> dict[str, str]:
    """Per audited `__transaction_state` partition (a JSON key of cluster, topic, partition), a digest of what its
    records are made from: the files holding its rows (a changed or grown segment is a new file), its audited broker
    and that replica's cleaner offset. Two runs with the same digest derive the same records."""
    digests = {}
    for group in files:
        for cluster, paths in _by_cluster(group.paths).items():
            replica = replicas.get((cluster, group.topic, group.partition))
            if replica is not None:
                made_from = json.dumps([sorted(path.rpartition("/")[2] for path in paths), *replica])
                key = json.dumps([cluster, group.topic, group.partition])
                digests[key] = hashlib.sha256(made_from.encode()).hexdigest()
    return digests


def _by_cluster(paths: Sequence[str]) -> dict[str, list[str]]:
    """A partition's files by the cluster whose rows they hold: each cluster's copy is a partition of its own."""
    by_cluster: dict[str, list[str]] = {}
    for path in paths:
        by_cluster.setdefault(cluster_of(path), []).append(path)
    return by_cluster
