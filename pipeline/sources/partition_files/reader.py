"""The Spark reader of the files beside segments: every file is read and decoded on the executors inside
`mapInArrow`, the driver only lists. A file that cannot be read gives an 'unreadable' row or a problem row naming the
I/O error instead of failing the job.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import astuple, dataclass
from functools import partial
from itertools import islice
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.filesystems import resolve, shipped
from pipeline.sources.log_roots import RootListing
from pipeline.sources.partition_files.binary_files import byte_range, snapshot_batches, txn_index_batches
from pipeline.sources.partition_files.discovery import discover_partition_files
from pipeline.sources.partition_files.entries import (
    LEADER_EPOCH_CHECKPOINT,
    OFFSET_INDEX_SUFFIX,
    PARTITION_METADATA_FILE,
    ROWS_PER_BATCH,
    SNAPSHOT_ENTRY_FIELDS,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_ENTRY,
    TXN_INDEX_ENTRY_FIELDS,
    TXN_INDEX_SUFFIX,
    FileDescriptor,
    FormatProblem,
    IndexProblem,
    LogReader,
    problem_row,
)
from pipeline.sources.partition_files.index_checks import OffsetLookup, offset_index_problems, time_index_problems
from pipeline.sources.partition_files.text_files import (
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
)
from pipeline.sources.segments import SOURCE_FORMAT as SEGMENT_FORMAT
from schemas.checkpoints import CHECKPOINT_KINDS, CHECKPOINTS
from schemas.file_problems import (
    FILE_PROBLEMS,
    PROBLEM_LEADER_EPOCH_CHECKPOINT,
    PROBLEM_OFFSET_INDEX,
    PROBLEM_PARTITION_METADATA,
    PROBLEM_TIME_INDEX,
)
from schemas.leader_epochs import LEADER_EPOCHS
from schemas.partition_metadata import PARTITION_METADATA
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.txn_index import TXN_INDEX

log = logging.getLogger(__name__)


STATUS_UNREADABLE = "unreadable"
FILES_PER_TASK = 64  # these files are small: a Spark task costs more than reading one
# Checkpoints and partition.metadata hold a line per epoch or partition: a few KiB, a few MiB for a log dir of
# 100,000 partitions. A larger file is no such file, and reading it whole could exhaust a worker's memory.
TEXT_FILE_MAX_BYTES = 64 * 1024 * 1024
FILE_DESCRIPTOR = T.StructType(
    [
        T.StructField("location", T.StringType(), False),
        T.StructField("kind", T.StringType(), False),
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("base_offset", T.LongType(), True),
        T.StructField("size", T.LongType(), False),
        T.StructField("log_location", T.StringType(), True),
        T.StructField("offset_index_location", T.StringType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)


@dataclass(frozen=True)
class PartitionFiles:
    """The tables read from the files beside the segments; each DataFrame is lazy."""

    txn_index: DataFrame
    producer_snapshots: DataFrame
    leader_epochs: DataFrame
    checkpoints: DataFrame
    partition_metadata: DataFrame
    file_problems: DataFrame


TABLE_SCHEMAS = {
    "txn_index": TXN_INDEX,
    "producer_snapshots": PRODUCER_SNAPSHOTS,
    "leader_epochs": LEADER_EPOCHS,
    "checkpoints": CHECKPOINTS,
    "partition_metadata": PARTITION_METADATA,
    "file_problems": FILE_PROBLEMS,
}
# The kinds of file whose rows go to each table (file_problems also gets the naming problems of the listing).
TABLE_KINDS = {
    "txn_index": (TXN_INDEX_SUFFIX,),
    "producer_snapshots": (SNAPSHOT_SUFFIX,),
    "leader_epochs": (LEADER_EPOCH_CHECKPOINT,),
    "checkpoints": CHECKPOINT_KINDS,
    "partition_metadata": (PARTITION_METADATA_FILE,),
    "file_problems": (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE),
}
TableBatch = tuple[str, pa.RecordBatch]  # a table's name and some of its rows


@dataclass(frozen=True)
class PartitionFilePass:
    """The files beside the segments as descriptors, the executor function that decodes them into the rows of
    every table (`decode_files`), and the naming problems the listing gave (FILE_PROBLEMS rows)."""

    descriptors: DataFrame
    decode: Callable[[Iterator[pa.RecordBatch]], Iterator[TableBatch]]
    naming_problems: list[dict[str, Any]]


def empty_partition_files(spark: SparkSession) -> PartitionFiles:
    """The tables of inputs without log directories: no rows in any of them."""
    return PartitionFiles(**{table: spark.createDataFrame([], schema) for table, schema in TABLE_SCHEMAS.items()})


def partition_file_pass(spark: SparkSession, listings: list[RootListing]) -> PartitionFilePass:
    """Every `.txnindex`, `.snapshot`, `.index`/`.timeindex`, leader-epoch checkpoint, `partition.metadata` and
    log-dir offset checkpoint of the listed roots as one pass: a task decodes each of its files once into the rows
    of whichever tables the file feeds.

    `file_problems` gathers what the reader saw, by kind: file names (from the listing), index entries that do
    not fit their segment, and the malformed leader-epoch checkpoints and `partition.metadata` files of the other
    tables. A missing file just contributes no rows.
    """
    discovery = discover_partition_files(listings)
    files = discovery.files
    log.debug("decoding %d files (%d bytes) beside the segments", len(files), sum(file.size for file in files))
    # createDataFrame spreads the descriptors over the default parallelism. The files are small, so a task costs
    # more than reading one: fewer tasks for fewer files, merged without a shuffle.
    descriptors = spark.createDataFrame([astuple(file) for file in files], FILE_DESCRIPTOR)
    descriptors = descriptors.coalesce(max(1, math.ceil(len(files) / FILES_PER_TASK)))
    arrow_schemas = {table: to_arrow_schema(schema) for table, schema in TABLE_SCHEMAS.items()}
    decode = shipped(spark, partial(decode_files, arrow_schemas))
    return PartitionFilePass(descriptors, decode, discovery.naming_problems)


def read_partition_files(spark: SparkSession, listings: list[RootListing]) -> PartitionFiles:
    """The tables of `partition_file_pass` as DataFrames, each decoding only the files of its kinds."""
    files = partition_file_pass(spark, listings)
    frames = {}
    for table, schema in TABLE_SCHEMAS.items():
        of_kinds = files.descriptors.where(F.col("kind").isin(*TABLE_KINDS[table]))
        rows = of_kinds.mapInArrow(partial(_rows_of, table, files.decode), schema)
        if table == "file_problems":
            naming = [tuple(row[name] for name in schema.fieldNames()) for row in files.naming_problems]
            rows = spark.createDataFrame(naming, schema).unionByName(rows)
        frames[table] = rows
    return PartitionFiles(**frames)


def _rows_of(
    table: str, decode: Callable[[Iterator[pa.RecordBatch]], Iterator[TableBatch]], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The batches of one table among those `decode` makes."""
    return (rows for name, rows in decode(batches) if name == table)


def decode_files(arrow_schemas: dict[str, pa.Schema], batches: Iterator[pa.RecordBatch]) -> Iterator[TableBatch]:
    """Executor side: file descriptors in, the record batches of each file's tables out."""
    for batch in batches:
        for descriptor in batch.to_pylist():
            yield from decode_file(FileDescriptor(**descriptor), arrow_schemas)


def decode_file(file: FileDescriptor, arrow_schemas: dict[str, pa.Schema]) -> Iterator[TableBatch]:
    """The rows one file gives, by table; the problems of a leader-epoch checkpoint or `partition.metadata` are
    also `file_problems` rows."""
    if file.kind == TXN_INDEX_SUFFIX:
        yield from (("txn_index", rows) for rows in txn_index_batches_of(file, arrow_schemas["txn_index"]))
    elif file.kind == SNAPSHOT_SUFFIX:
        snapshots = snapshot_batches_of(file, arrow_schemas["producer_snapshots"])
        yield from (("producer_snapshots", rows) for rows in snapshots)
    elif file.kind in (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        yield from (("file_problems", rows) for rows in index_problem_batches(file, arrow_schemas["file_problems"]))
    elif file.kind in CHECKPOINT_KINDS:
        yield from _in_one_batch("checkpoints", checkpoint_rows(file), arrow_schemas)
    elif file.kind in _TEXT_FILE_TABLES:
        table, rows_of, problem_kind = _TEXT_FILE_TABLES[file.kind]
        rows = rows_of(file)
        yield from _in_one_batch(table, rows, arrow_schemas)
        problems = [
            problem_row(
                problem_kind,
                row["topic"],
                row["partition"],
                row["source_file"],
                None,
                f"{file.kind}: {row['problem']}",
                row["broker_id"],
                row["cluster_id"],
            )
            for row in rows
            if row["problem"] is not None
        ]
        yield from _in_one_batch("file_problems", problems, arrow_schemas)


def _in_one_batch(table: str, rows: list[dict[str, Any]], arrow_schemas: dict[str, pa.Schema]) -> Iterator[TableBatch]:
    """The rows of a text file, bounded by TEXT_FILE_MAX_BYTES, in one record batch."""
    if rows:
        yield table, pa.RecordBatch.from_pylist(rows, schema=arrow_schemas[table])


class FileTooLarge(OSError):
    """A file larger than any of its kind: reported as unreadable instead of read."""


def _opened(location: str) -> pa.NativeFile:
    filesystem, path = resolve(location)
    return filesystem.open_input_file(path)


def _read(location: str, max_bytes: int) -> bytes:
    with _opened(location) as source:
        size = source.size()
        if size > max_bytes:
            raise FileTooLarge(f"it holds {size} bytes, more than the {max_bytes} this kind of file can need")
        return source.read()


def _read_text(location: str) -> str:
    """Kafka writes these files in UTF-8; other bytes become replacement characters in malformed lines."""
    return _read(location, TEXT_FILE_MAX_BYTES).decode("utf-8", errors="replace")


def _unreadable(location: str, exc: OSError) -> str:
    log.warning("cannot read %s: %s", location, exc)
    return f"cannot read the file: {exc}"


def _read_at(source: pa.NativeFile, position: int, length: int) -> bytes:
    return source.read_at(length, position)


def _with_provenance(batch: pa.RecordBatch, provenance: dict[str, Any], arrow_schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with the file's provenance as constant columns, in the order of `arrow_schema`."""
    columns = [
        batch[field.name]
        if field.name in batch.schema.names
        else pa.repeat(pa.scalar(provenance[field.name], field.type), batch.num_rows)
        for field in arrow_schema
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


def txn_index_batches_of(file: FileDescriptor, arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """TXN_INDEX record batches of one `.txnindex`, read a chunk at a time; an I/O error ends the file with an
    'unreadable' row at the byte where reading stopped."""
    provenance = {
        "topic": file.topic,
        "partition": file.partition,
        "segment_base_offset": file.base_offset,
        "source_file": file.location,
        "source_format": SEGMENT_FORMAT,
        "broker_id": file.broker_id,
        "cluster_id": file.cluster_id,
    }
    decoded = 0
    try:
        with _opened(file.location) as source:
            for batch in txn_index_batches(partial(_read_at, source), source.size()):
                decoded = batch["position"][-1].as_py() + TXN_INDEX_ENTRY.size
                yield _with_provenance(batch, provenance, arrow_schema)
    except OSError as exc:
        _unreadable(file.location, exc)
        row = {**dict.fromkeys(TXN_INDEX_ENTRY_FIELDS), "entry_status": STATUS_UNREADABLE, "position": decoded}
        yield pa.RecordBatch.from_pylist([{**row, **provenance}], schema=arrow_schema)


def snapshot_batches_of(file: FileDescriptor, arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """PRODUCER_SNAPSHOTS record batches of one snapshot, read a chunk at a time."""
    provenance = {
        "topic": file.topic,
        "partition": file.partition,
        "snapshot_offset": file.base_offset,
        "source_file": file.location,
        "source_format": SEGMENT_FORMAT,
        "broker_id": file.broker_id,
        "cluster_id": file.cluster_id,
    }
    try:
        with _opened(file.location) as source:
            for batch in snapshot_batches(partial(_read_at, source), source.size()):
                yield _with_provenance(batch, provenance, arrow_schema)
    except OSError as exc:
        row = {
            **dict.fromkeys(SNAPSHOT_ENTRY_FIELDS),
            "version": None,
            "crc_valid": None,
            "file_status": STATUS_UNREADABLE,
            "file_note": _unreadable(file.location, exc),
        }
        yield pa.RecordBatch.from_pylist([{**row, **provenance}], schema=arrow_schema)


def leader_epoch_rows(file: FileDescriptor) -> list[dict[str, Any]]:
    try:
        entries, problems = decode_leader_epoch_checkpoint(_read_text(file.location))
    except OSError as exc:
        entries, problems = [], [FormatProblem(None, _unreadable(file.location, exc))]
    rows = [{**entry, "problem": None} for entry in entries]
    rows += [{"epoch": None, "start_offset": None, "line": line, "problem": message} for line, message in problems]
    provenance = {
        "topic": file.topic,
        "partition": file.partition,
        "source_file": file.location,
        "broker_id": file.broker_id,
        "cluster_id": file.cluster_id,
    }
    return [{**row, **provenance} for row in rows]


def partition_metadata_rows(file: FileDescriptor) -> list[dict[str, Any]]:
    try:
        row, problems = decode_partition_metadata(_read_text(file.location))
    except OSError as exc:
        row, problems = {"version": None, "topic_id": None}, [FormatProblem(None, _unreadable(file.location, exc))]
    return [
        {
            **row,
            "topic": file.topic,
            "partition": file.partition,
            "problem": problems[0].message if problems else None,
            "source_file": file.location,
            "broker_id": file.broker_id,
            "cluster_id": file.cluster_id,
        }
    ]


def checkpoint_rows(file: FileDescriptor) -> list[dict[str, Any]]:
    """The rows of one log-dir offset checkpoint, its problems included: what the reader yields for the file, also
    callable on the driver where a few small files make Python workers cost more than the decoding."""
    try:
        entries, problems = decode_offset_checkpoint(_read_text(file.location))
    except OSError as exc:
        entries, problems = [], [FormatProblem(None, _unreadable(file.location, exc))]
    rows = [{**entry, "problem": None} for entry in entries]
    rows += [{"topic": None, "partition": None, "offset": None, "problem": message} for _, message in problems]
    provenance = {"kind": file.kind, "source_file": file.location, "broker_id": file.broker_id}
    return [{**row, **provenance, "cluster_id": file.cluster_id} for row in rows]


def index_problem_batches(file: FileDescriptor, arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """SEG-004/SEG-005 rows of one index file, ROWS_PER_BATCH at a time; the index is read a chunk at a time and
    its `.log` is opened once and read at the indexed positions."""
    kind = PROBLEM_OFFSET_INDEX if file.kind == OFFSET_INDEX_SUFFIX else PROBLEM_TIME_INDEX
    name = file.location.rpartition("/")[2]

    def batches(problems: Iterable[IndexProblem]) -> Iterator[pa.RecordBatch]:
        problems = iter(problems)
        while piece := list(islice(problems, ROWS_PER_BATCH)):
            yield pa.RecordBatch.from_pylist(
                [
                    problem_row(
                        kind,
                        file.topic,
                        file.partition,
                        file.location,
                        at,
                        f"{name}: {message}",
                        file.broker_id,
                        file.cluster_id,
                    )
                    for at, message in piece
                ],
                schema=arrow_schema,
            )

    try:
        with ExitStack() as stack:
            read_log: LogReader | None = None
            if file.log_location is not None:
                read_log = partial(_read_at, stack.enter_context(_opened(file.log_location)))
            index = stack.enter_context(_opened(file.location))
            if file.kind == OFFSET_INDEX_SUFFIX:
                problems = offset_index_problems(partial(_read_at, index), index.size(), file.base_offset, read_log)
            else:
                lookup = OffsetLookup(partial(byte_range, b""), 0)
                if file.offset_index_location is not None:
                    offset_index = stack.enter_context(_opened(file.offset_index_location))
                    lookup = OffsetLookup(partial(_read_at, offset_index), offset_index.size())
                problems = time_index_problems(
                    partial(_read_at, index), index.size(), file.base_offset, lookup, read_log
                )
            yield from batches(problems)
    except OSError as exc:
        log.warning("cannot check %s: %s", file.location, exc)
        yield from batches([IndexProblem(0, f"cannot read the index or its segment: {exc}")])


# The text files of a partition dir: their table, their rows, and the file_problems kind of a malformed one.
_TEXT_FILE_TABLES = {
    LEADER_EPOCH_CHECKPOINT: ("leader_epochs", leader_epoch_rows, PROBLEM_LEADER_EPOCH_CHECKPOINT),
    PARTITION_METADATA_FILE: ("partition_metadata", partition_metadata_rows, PROBLEM_PARTITION_METADATA),
}
