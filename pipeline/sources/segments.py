"""Spark ingestion of Kafka log directories into the `batches` table shape.

The driver only lists directories and reads `meta.properties`; segment bytes are read and decoded on the
executors inside `mapInArrow`, so the driver never holds segment bytes or batch rows. Local paths and URIs
(`s3://`, `s3a://`, `gs://`, `hdfs://`, `file://` ...) go through the same code (`filesystems.resolve`).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator
from dataclasses import astuple, dataclass, replace
from functools import partial

import pyarrow as pa
from pyarrow import fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.config import IngestSettings, Settings
from pipeline.errors import InputError
from pipeline.sources.filesystems import resolve, shipped, uri_scheme
from pipeline.sources.kafka_format.layout import DECODED_SCHEMA
from pipeline.sources.kafka_format.windows import iter_decoded, next_entry_start
from pipeline.sources.log_dir_names import META_PROPERTIES, PARTITION_DIR, SEGMENT_FILE
from schemas.batches import BATCHES, STATUS_UNREADABLE

log = logging.getLogger(__name__)

SOURCE_FORMAT = "segment"
_META_PROPERTIES_MAX_BYTES = 64 * 1024
_PROPERTY_LINE = re.compile(r"^[ \t]*([^#!\s=:]+)[ \t]*[=:][ \t]*(.*?)[ \t]*$", re.MULTILINE)
_DIR_SUFFIX_MEANING = {
    "-delete": "partition scheduled for deletion",
    "-future": "future replica of an alter-log-dirs move",
    "-stray": "stray replica the broker will delete",
}

SEGMENT_DESCRIPTOR = T.StructType(
    [
        T.StructField("location", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("segment_base_offset", T.LongType(), False),
        T.StructField("size", T.LongType(), False),
        T.StructField("start", T.LongType(), False),
        T.StructField("end", T.LongType(), True),
        T.StructField("mtime_ns", T.LongType(), True),
    ]
)

_ARROW_BATCHES = to_arrow_schema(BATCHES)


@dataclass(frozen=True)
class SegmentFile:
    """One `.log` segment to decode; `location` is a local path or a URI that executors open as is.

    A task decodes the entries that start in the byte range [start, end) of the file; `end` None means up to
    the end of the file as the task finds it. `size` and `mtime_ns` (nanoseconds since the epoch, None when the
    filesystem gives no modification time) are those of the listing; the incremental ingest compares them.
    """

    location: str
    topic: str
    partition: int
    broker_id: int | None
    segment_base_offset: int
    size: int
    start: int = 0
    end: int | None = None
    mtime_ns: int | None = None


@dataclass(frozen=True)
class SkippedDir:
    location: str
    reason: str


@dataclass(frozen=True)
class Discovery:
    segments: list[SegmentFile]
    skipped: list[SkippedDir]


def discover_segments(roots: list[str], ingest: IngestSettings) -> Discovery:
    """Find the segment files under each root, on the driver, without reading them.

    A root is a partition dir `<topic>-<partition>`, a broker log dir holding them (with `meta.properties`,
    which names the broker), or any directory above those, such as one holding several broker log dirs.
    Dirs whose names end with one of `ingest.skip_dir_suffixes` are skipped and reported. A root that is
    missing or holds no segment file raises InputError.
    """
    segments: list[SegmentFile] = []
    skipped: list[SkippedDir] = []
    for root in roots:
        found = _discover_root(root, ingest.skip_dir_suffixes, skipped)
        if not found:
            raise InputError(root, "no <20-digit offset>.log segment file in any <topic>-<partition> directory")
        segments.extend(found)
    return Discovery(segments, skipped)


def read_segments(
    spark: SparkSession, roots: list[str], settings: Settings, segments: list[SegmentFile] | None = None
) -> DataFrame:
    """All entries of all segments under `roots` as a DataFrame with exactly the `BATCHES` schema.

    `segments`, when given, are the files to decode instead of all of them: some of those `discover_segments`
    found under `roots` (the incremental ingest passes the ones it re-reads; none gives an empty DataFrame).
    A file larger than `segment_split_bytes` is cut into byte ranges of that size (`split_segment`), so one
    large segment does not keep a single core busy. There is at least one task per `segment_split_bytes` of
    input and never more tasks than ranges; ranges are dealt to tasks largest first, so the ranges of a large
    file go to different tasks. Each task streams its ranges in bounded windows. A file that cannot be opened or
    read yields a row with entry_status `unreadable` (one per range) instead of failing the job.
    """
    if segments is None:
        segments = discover_segments(roots, settings.ingest).segments
    if not segments:
        return spark.createDataFrame([], BATCHES)
    split_bytes = settings.ingest.segment_split_bytes
    ranges = [piece for segment in segments for piece in split_segment(segment, split_bytes)]
    total_bytes = sum(segment.size for segment in segments)
    tasks = min(len(ranges), max(spark.sparkContext.defaultParallelism, math.ceil(total_bytes / split_bytes)))
    log.info(
        "decoding %d segment files (%d bytes) as %d byte ranges in %d tasks",
        len(segments),
        total_bytes,
        len(ranges),
        tasks,
    )
    ranges.sort(key=lambda piece: _range_end(piece) - piece.start, reverse=True)
    tasks_ranges = [[astuple(piece) for piece in ranges[task::tasks]] for task in range(tasks)]
    rows = spark.sparkContext.parallelize(tasks_ranges, tasks).flatMap(lambda task_ranges: task_ranges)
    decode = partial(decode_descriptors, verify_records=settings.ingest.verify_records)
    return spark.createDataFrame(rows, SEGMENT_DESCRIPTOR).mapInArrow(shipped(spark, decode), BATCHES)


def split_segment(segment: SegmentFile, split_bytes: int) -> list[SegmentFile]:
    """The segment as byte ranges of `split_bytes`; the last one runs to the end of the file.

    A range does not need to start on an entry: its task walks the entry chain from the start of the file to its
    first entry (`kafka_format.next_entry_start`), so the ranges decode exactly what one pass over the file does.
    The `.index` file is not used for this: its positions are batch starts, but an entry the broker cannot
    iterate past may lie before them, and then a decode starting there would report entries that a pass over
    the file never reaches.
    """
    starts = range(0, segment.size, split_bytes) if segment.size > split_bytes else [0]
    return [
        replace(segment, start=start, end=start + split_bytes if start + split_bytes < segment.size else None)
        for start in starts
    ]


def _range_end(segment: SegmentFile) -> int:
    return segment.size if segment.end is None else segment.end


def decode_descriptors(
    descriptor_batches: Iterator[pa.RecordBatch], verify_records: bool = True
) -> Iterator[pa.RecordBatch]:
    """Executor side of `read_segments`: segment descriptors in, `BATCHES` record batches out."""
    for descriptors in descriptor_batches:
        for descriptor in descriptors.to_pylist():
            yield from decode_file(SegmentFile(**descriptor), verify_records)


def decode_file(segment: SegmentFile, verify_records: bool = True) -> Iterator[pa.RecordBatch]:
    """Stream-decode the entries that start in the segment's byte range (records walked with `verify_records`).

    An I/O error ends it with one `unreadable` row at the failing position.
    """
    resume_position = segment.start
    try:
        filesystem, path = resolve(segment.location)
        with filesystem.open_input_file(path) as source:
            file_size = source.size()
            first = next_entry_start(source.read_at, file_size, segment.start)
            if first is None:
                return
            source.seek(first)
            decoded = iter_decoded(source.read, file_size, start=first, end=segment.end, verify_records=verify_records)
            for table in decoded:
                last = table.num_rows - 1
                resume_position = table["position"][last].as_py() + table["size_bytes"][last].as_py()
                yield from _with_provenance(table, segment).to_batches()
    except OSError as exc:
        log.warning("cannot read %s: %s", segment.location, exc)
        yield from _with_provenance(_unreadable_row(segment, resume_position, exc), segment).to_batches()


def _with_provenance(table: pa.Table, segment: SegmentFile) -> pa.Table:
    rows = table.num_rows
    provenance = {
        "topic": pa.repeat(pa.scalar(segment.topic, pa.string()), rows),
        "partition": pa.repeat(pa.scalar(segment.partition, pa.int32()), rows),
        "segment_base_offset": pa.repeat(pa.scalar(segment.segment_base_offset, pa.int64()), rows),
        "source_file": pa.repeat(pa.scalar(segment.location, pa.string()), rows),
        "source_format": pa.repeat(pa.scalar(SOURCE_FORMAT, pa.string()), rows),
        "broker_id": pa.repeat(pa.scalar(segment.broker_id, pa.int32()), rows),
    }
    arrays = [provenance[name] if name in provenance else table[name] for name in _ARROW_BATCHES.names]
    return pa.Table.from_arrays(arrays, schema=_ARROW_BATCHES)


def _unreadable_row(segment: SegmentFile, position: int, exc: OSError) -> pa.Table:
    """The bytes of the range that were not decoded, from `position` to the end of the range."""
    row = {name: None for name in DECODED_SCHEMA.names}
    row.update(
        entry_status=STATUS_UNREADABLE,
        entry_note=f"cannot read the file: {exc}",
        position=position,
        size_bytes=max(_range_end(segment) - position, 0),
    )
    return pa.Table.from_pylist([row], schema=DECODED_SCHEMA)


@dataclass(frozen=True)
class RootListing:
    """Every file under a log root, listed once on the driver (see `list_root`)."""

    filesystem: pafs.FileSystem
    base: str  # the root's path on `filesystem`
    location: str  # the root as file locations start: a URI root keeps its scheme
    files: dict[str, int]  # path relative to the root -> size, sorted
    mtimes_ns: dict[str, int | None]  # path relative to the root -> modification time, if the filesystem has one

    def location_of(self, relative: str) -> str:
        return _join(self.location, relative)

    def broker_id(self, log_dir: str) -> int | None:
        """The broker id of a log dir given relative to the root, ".." being the root's parent."""
        return _broker_id(self.filesystem, self.base, self.location, log_dir, self.files)


def list_root(root: str, skip_suffixes: list[str], skipped: list[SkippedDir]) -> RootListing:
    """One recursive listing of a log root, leaving out (and reporting in `skipped`) dirs with a skip suffix.

    Raises InputError if the root is missing or not a directory.
    """
    filesystem, path = resolve(root)
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise InputError(root, "log root does not exist")
    if info.type != pafs.FileType.Directory:
        raise InputError(root, "log root is not a directory")
    base = path.rstrip("/")
    location = root if uri_scheme(root) else base
    infos = _list_files(filesystem, base, location, skip_suffixes, skipped)
    return RootListing(
        filesystem,
        base,
        location,
        {relative: info.size for relative, info in infos.items()},
        {relative: info.mtime_ns for relative, info in infos.items()},
    )


def _discover_root(root: str, skip_suffixes: list[str], skipped: list[SkippedDir]) -> list[SegmentFile]:
    """The segments of a root: every `<20 digits>.log` whose parent is `<topic>-<partition>`.

    The root may be a partition dir, a broker log dir, or any directory above them. The log dir of a
    partition is its parent; its `meta.properties`, when there is one, gives the broker id.
    """
    listing = list_root(root, skip_suffixes, skipped)
    broker_ids: dict[str, int | None] = {}
    segments: list[SegmentFile] = []
    for relative, size in listing.files.items():
        *dirs, name = relative.split("/")
        segment = SEGMENT_FILE.fullmatch(name)
        if segment is None:
            continue
        partition_dir = dirs[-1] if dirs else listing.base.rsplit("/", 1)[-1]
        partition = PARTITION_DIR.fullmatch(partition_dir)
        if partition is None:
            log.debug("ignoring %s: its directory is not named <topic>-<partition>", listing.location_of(relative))
            continue
        log_dir = "/".join(dirs[:-1]) if dirs else ".."
        if log_dir not in broker_ids:
            broker_ids[log_dir] = listing.broker_id(log_dir)
        segments.append(
            SegmentFile(
                location=listing.location_of(relative),
                topic=partition["topic"],
                partition=int(partition["partition"]),
                broker_id=broker_ids[log_dir],
                segment_base_offset=int(segment["base_offset"]),
                size=size,
                mtime_ns=listing.mtimes_ns[relative],
            )
        )
    return segments


def _list_files(
    filesystem: pafs.FileSystem, base: str, location: str, skip_suffixes: list[str], skipped: list[SkippedDir]
) -> dict[str, pafs.FileInfo]:
    """Files under `base` (relative path -> listing entry, sorted), leaving out directories with a skip suffix."""
    files: dict[str, pafs.FileInfo] = {}
    skipped_here: set[str] = set()
    for entry in filesystem.get_file_info(pafs.FileSelector(base, recursive=True)):
        if entry.type != pafs.FileType.File:
            continue
        relative = entry.path[len(base) + 1 :]
        *dirs, _ = relative.split("/")
        excluded = next((depth for depth, name in enumerate(dirs) if name.endswith(tuple(skip_suffixes))), None)
        if excluded is None:
            files[relative] = entry
        elif (skipped_dir := "/".join(dirs[: excluded + 1])) not in skipped_here:
            skipped_here.add(skipped_dir)
            suffix = next(suffix for suffix in skip_suffixes if dirs[excluded].endswith(suffix))
            reason = f"name ends with {suffix!r}: {_DIR_SUFFIX_MEANING.get(suffix, 'listed in skip_dir_suffixes')}"
            log.info("skipping %s (%s)", _join(location, skipped_dir), reason)
            skipped.append(SkippedDir(_join(location, skipped_dir), reason))
    return dict(sorted(files.items()))


def _broker_id(
    filesystem: pafs.FileSystem, base: str, location: str, log_dir: str, files: dict[str, int]
) -> int | None:
    """`node.id` (KRaft) or `broker.id` (ZooKeeper mode) from the log dir's meta.properties, if it has one.

    `log_dir` is relative to the root; ".." is the root's parent, for a root that is a partition dir.
    """
    relative = f"{log_dir}/{META_PROPERTIES}" if log_dir else META_PROPERTIES
    if log_dir == "..":
        fs_path = f"{base.rsplit('/', 1)[0]}/{META_PROPERTIES}"
        if filesystem.get_file_info(fs_path).type != pafs.FileType.File:
            return None
    elif relative in files:
        fs_path = f"{base}/{relative}"
    else:
        return None
    with filesystem.open_input_stream(fs_path) as stream:
        text = stream.read(_META_PROPERTIES_MAX_BYTES).decode("utf-8", errors="replace")
    properties = dict(_PROPERTY_LINE.findall(text))
    for key in ("node.id", "broker.id"):
        value = properties.get(key)
        if value is not None:
            if value.lstrip("-").isdigit():
                return int(value)
            log.warning("%s: %s=%r is not an integer", _join(location, relative), key, value)
    return None


def _join(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"
