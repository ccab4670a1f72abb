"""Incremental ingest: which `.log` segments a run decodes again, and the `ingest_manifest` table that says why.

Nightly runs read the same log dirs, where most segments are closed files unchanged since the night before.
Every decoded segment gets a manifest row (`schemas.ingest_manifest`): size and modification time from the
listing, and hashes of the first `HASHED_BYTES` bytes of its first and last entries (a v2 batch header up to the
record count, so the stored CRC of the rest of the batch is hashed too). A later run sorts each segment of its
log-dir inputs into one outcome:

* `new`: no manifest row. Decoded.
* `appended`: the active segment (the last of its partition directory, which the broker still appends to), or
  one that was active when decoded and has been rolled since, grown past the bytes a decode read whole to its last
  byte, whose end entries still hash as recorded and whose rows `batches` still holds: only the entries past those
  bytes are decoded, and the rows of the earlier ones stay. A broker only ever appends to its active segment, so
  with the default `segment.bytes` of 1 GiB a nightly run decodes the night's new bytes, not the whole segment.
* `reread`: an active segment that cannot be continued so (its last decode stopped in a partial entry, or it
  shrank, or its end entries or broker changed), or any segment when `ingest.incremental` is off (`--full`).
  Decoded again.
* `replaced`: size, modification time or broker id differ from the manifest row; or they match but an end
  entry hashes differently (a file rewritten in place with the same size, as the log cleaner or recovery do),
  or `batches` no longer holds exactly the rows the manifest counts for it. Decoded again.
* `skipped`: none of the above, active or not. Its rows in `batches` are kept as they are.
* `removed`: a manifest row of an ingested topic whose file is no longer in the input (retention deleted it,
  or the input changed). Its rows go, since the audit must see the partition's retained log.

The listing comparison runs on the driver. The hashes of the segments whose listing matches are recomputed on
the executors in one small job (two reads of `HASHED_BYTES` per file, from the positions the manifest
recorded), and compared on the driver with the recorded ones and with their rows in `batches` (from the Delta log,
or one more job when it cannot say); no driver loop opens thousands of object-store files. The rows of the
decoded segments come from the decode tasks themselves: each file they write to `batches` comes back with its
row count, last entry and end hashes (`SegmentFacts`), so the manifest costs no job of its own.
A rewrite that keeps size, modification time and both end entries (an edit in the middle of a file followed by
resetting its modification time) goes unnoticed; `--full` re-reads everything.

`batches` is written as before, by replacing the partitions of the ingested (cluster, topic) pairs, with the
decoded rows plus the table's current rows of the skipped segments, so an incremental run leaves the rows a full
one would. The skipped segments' rows stay in their files: `batches` holds one file per segment
(`files_by_source`), so the commit that adds the decoded files removes every other file of those partitions but
theirs, and their row counts come from the Delta log, not from a Spark job over the table. A table whose log does
not say which segment each file holds has the rows kept read from it and written again; that is safe without
persisting them first, since every file is written into a staging folder and committed after the jobs that read are
done (`TableStore.staged_partitions`), and no commit deletes data files (only VACUUM does). The manifest is written
after `batches`: a run failing in between leaves manifest rows describing older files, which can only make the next
run decode more, and the row count check catches a `batches` table changed behind the manifest's back.

Only `.log` segments are incremental. `transaction_log` follows the outcomes of the `__transaction_state`
segments (`pipeline.ingest.transaction_log_reads`): it is written one file per segment file too, and keeps the
files of the kept ones. Dump text and columnar inputs are always replaced, and the small files beside the segments
(indexes, snapshots, checkpoints) are always read again, in one Spark job.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.config import Settings
from pipeline.sources.filesystems import resolve, shipped
from pipeline.tables.files_by_source import SourceFiles, files_by_source
from pipeline.tables.parquet_sink import Described, PartitionedParquetSink, WrittenFile
from pipeline.tables.store import TableStore, cluster_topics, of_pairs
from schemas.batches import BATCHES, STATUS_LEGACY, STATUS_OK, STATUS_UNREADABLE
from schemas.ingest_manifest import INGEST_MANIFEST, INGEST_MANIFEST_PARTITION_BY

if TYPE_CHECKING:
    from pipeline.sources.log_roots import Discovery, SegmentFile

log = logging.getLogger(__name__)

TABLE = "ingest_manifest"
NEW, REREAD, APPENDED, REPLACED, SKIPPED, REMOVED = "new", "reread", "appended", "replaced", "skipped", "removed"
OUTCOMES = (NEW, REREAD, APPENDED, REPLACED, SKIPPED, REMOVED)
WHOLE_ENTRIES = (STATUS_OK, STATUS_LEGACY)  # entries after which the file's next entry is decoded
HASHED_BYTES = 61  # kafka_format.RECORD_BATCH_OVERHEAD: a v2 batch header, stored CRC included

_HASH_FIELDS = [
    T.StructField("first_batch_hash", T.StringType(), True),
    T.StructField("last_batch_hash", T.StringType(), True),
]
_POSITIONS = T.StructType(
    [
        T.StructField("location", T.StringType(), False),
        T.StructField("last_batch_position", T.LongType(), True),
    ]
)
_LOCATIONS = T.StructType([T.StructField("location", T.StringType(), False)])
NO_FILES = SourceFiles((), 0)


@dataclass(frozen=True)
class SegmentPlan:
    """What a run does with each `.log` segment of its log-dir inputs."""

    segments: list[SegmentFile]  # every segment of the inputs, each file once
    outcomes: dict[str, str]  # location -> NEW, REREAD, APPENDED, REPLACED or SKIPPED
    active: frozenset[str]  # locations of the last segment of each partition directory
    recorded: dict[str, dict[str, Any]]  # manifest rows of the inputs' topics by location (`_recorded_rows`)
    # The `batches` files of the kept segments, kept as they are; None when the log does not say which they are.
    kept_files: frozenset[str] | None = frozenset()

    @property
    def to_read(self) -> list[SegmentFile]:
        """The segments to decode; an appended one from the first byte its earlier decode did not reach."""
        return [
            replace(segment, start=self.recorded[segment.location]["decoded_bytes"])
            if self.outcomes[segment.location] == APPENDED
            else segment
            for segment in self.segments
            if self.outcomes[segment.location] != SKIPPED
        ]

    @property
    def skipped(self) -> list[SegmentFile]:
        return [segment for segment in self.segments if self.outcomes[segment.location] == SKIPPED]

    @property
    def kept(self) -> list[SegmentFile]:
        """The segments whose rows in `batches` stay: the skipped ones, and the appended ones' rows decoded before."""
        return [segment for segment in self.segments if self.outcomes[segment.location] in (SKIPPED, APPENDED)]

    @property
    def kept_pairs(self) -> set[tuple[str, str]]:
        """(cluster, topic) pairs with rows of skipped segments: ingested even when nothing of them is decoded."""
        return {pair_of(segment) for segment in self.skipped if self.recorded[segment.location]["rows_ingested"]}

    @property
    def moved_pairs(self) -> set[tuple[str, str]]:
        """(cluster, topic) pairs the manifest recorded listed segments in under another cluster (an upgraded
        warehouse's rows in the unknown cluster "", a log dir whose meta.properties changed): replaced too, so that
        the segments' earlier rows go with their decode into their cluster of now."""
        return {
            (row["cluster_id"], row["topic"])
            for segment in self.segments
            if (row := self.recorded.get(segment.location)) is not None and row["cluster_id"] != segment.cluster_id
        }


def pair_of(segment: SegmentFile) -> tuple[str, str]:
    """The (cluster_id, topic) partition of `batches` a segment's rows are in."""
    return segment.cluster_id, segment.topic


def plan_segment_reads(spark: SparkSession, store: TableStore, settings: Settings, log_roots: Discovery) -> SegmentPlan:
    """Sort the listed segments by outcome, from the listing, the manifest and `batches`."""
    segments = log_roots.segments
    if not segments:
        return SegmentPlan([], {}, frozenset(), {})
    active = active_segments(segments)
    recorded = _recorded_rows(store, sorted({segment.topic for segment in segments}))
    outcomes, candidates = triage(segments, recorded, active, settings.ingest.incremental)
    if not candidates:
        return SegmentPlan(segments, outcomes, active, recorded)
    sources = files_by_source(store.path("batches"), cluster_topics(pair_of(segment) for segment in candidates))
    unchanged = _unchanged_on_disk(spark, store, candidates, recorded, sources)
    for segment in candidates:
        if segment.location not in unchanged:
            outcomes[segment.location] = REREAD if segment.location in active else REPLACED
        else:
            outcomes[segment.location] = (
                SKIPPED if _listed_as_recorded(segment, recorded[segment.location]) else APPENDED
            )
    kept = None
    if sources is not None:
        kept = frozenset(path for location in unchanged for path in sources.get(location, NO_FILES).paths)
    return SegmentPlan(segments, outcomes, active, recorded, kept)


def active_segments(segments: list[SegmentFile]) -> frozenset[str]:
    """The location of the segment with the highest base offset in each partition directory."""
    last: dict[str, SegmentFile] = {}
    for segment in segments:
        directory = segment.location.rpartition("/")[0]
        if directory not in last or segment.segment_base_offset > last[directory].segment_base_offset:
            last[directory] = segment
    return frozenset(segment.location for segment in last.values())


def triage(
    segments: list[SegmentFile], recorded: dict[str, dict[str, Any]], active: frozenset[str], incremental: bool
) -> tuple[dict[str, str], list[SegmentFile]]:
    """The outcomes the listing decides, and the segments left for the hash and row count check: closed segments
    listed as recorded, and active ones that grew from where a whole decode of them ended."""
    outcomes: dict[str, str] = {}
    candidates: list[SegmentFile] = []
    for segment in segments:
        row = recorded.get(segment.location)
        if row is None:
            outcomes[segment.location] = NEW
        elif not incremental:
            outcomes[segment.location] = REREAD
        elif (row["broker_id"], row["cluster_id"]) != (segment.broker_id, segment.cluster_id) or None in (
            row["first_batch_hash"],
            row["last_batch_hash"],
        ):
            outcomes[segment.location] = REREAD if segment.location in active else REPLACED
        elif _listed_as_recorded(segment, row) or _grown(segment, row, active):
            candidates.append(segment)
        else:
            outcomes[segment.location] = REREAD if segment.location in active else REPLACED
    return outcomes, candidates


def _listed_as_recorded(segment: SegmentFile, row: dict[str, Any]) -> bool:
    return (row["size_bytes"], row["mtime_ns"]) == (segment.size, segment.mtime_ns)


def _grown(segment: SegmentFile, row: dict[str, Any], active: frozenset[str]) -> bool:
    """An active segment, or one active when decoded and rolled since, that is longer now than the bytes a decode
    read whole to its last one: the broker appended to it."""
    was_or_is_active = row["is_active"] or segment.location in active
    return (
        was_or_is_active
        and row["decoded_bytes"] is not None
        and row["decoded_bytes"] == row["size_bytes"] < segment.size
    )


def kept_batches(spark: SparkSession, store: TableStore, plan: SegmentPlan) -> DataFrame:
    """The current `batches` rows of the kept segments, to be written back beside the decoded rows."""
    return _rows_of(spark, store.read("batches", schema=BATCHES), plan.kept)


def write_manifest(
    store: TableStore,
    plan: SegmentPlan,
    decoded: list[WrittenFile],
    pairs: list[tuple[str, str]],
    run_id: str,
) -> dict[str, int]:
    """Replace the manifest rows of the (cluster, topic) `pairs`: skipped segments keep theirs, decoded ones get
    new ones.

    Call it after `batches` is written; `decoded` holds the facts its decode tasks gathered of each file they wrote
    (`SEGMENT_FACTS`). The rows are a segment each, like the listing, so the driver writes them itself: no Spark
    job. Returns the number of segments of `pairs` per outcome.
    """
    ingested_pairs = set(pairs)
    counts = dict.fromkeys(OUTCOMES, 0)
    for segment in plan.segments:
        if pair_of(segment) in ingested_pairs:
            counts[plan.outcomes[segment.location]] += 1
    counts[REMOVED] = _removed(store, plan, ingested_pairs)
    exists = store.exists(TABLE)
    if not plan.segments and not exists:
        return counts
    if exists and not counts[REMOVED] and not any(pair_of(segment) in ingested_pairs for segment in plan.to_read):
        return counts  # every row of the pairs is a skipped segment's, which stays as it is: nothing to write
    kept = [plan.recorded[segment.location] for segment in plan.skipped]
    rows = [row for row in kept + _decoded_rows(plan, decoded, run_id) if pair_of_row(row) in ingested_pairs]
    schema = to_arrow_schema(INGEST_MANIFEST, timezone="UTC")
    replaced = cluster_topics(pairs)
    with (
        store.staged_partitions(TABLE, INGEST_MANIFEST, INGEST_MANIFEST_PARTITION_BY, replaced) as folder,
        PartitionedParquetSink(folder, schema, INGEST_MANIFEST_PARTITION_BY) as sink,
    ):
        sink.write(pa.Table.from_pylist(rows, schema=schema))
    return counts


class SegmentFacts:
    """Executor side: what the manifest says of one written `batches` file's segment, gathered from its rows as
    the decode task writes them (the file's rows are one segment's, in file order), and the hashes of the
    segment's first entry and of the last entry the file holds, read while the task has the file at hand."""

    def __init__(self) -> None:
        self.location: str | None = None
        self.unreadable = False
        self.last: tuple[int, str, int] | None = None  # (position, entry status, end) of the last entry

    def add(self, table: pa.Table) -> None:
        self.location = table.column("source_file")[0].as_py()
        statuses = table.column("entry_status")
        self.unreadable = self.unreadable or pc.any(pc.equal(statuses, STATUS_UNREADABLE)).as_py() is True
        positions = table.column("position")
        last = pc.index(positions, pc.max(positions)).as_py()
        if last < 0:
            return  # no row of these has a position (as the old group-by's max, which skips nulls)
        position = positions[last].as_py()
        if self.last is None or position > self.last[0]:
            self.last = (position, statuses[last].as_py(), position + table.column("size_bytes")[last].as_py())

    def values(self) -> dict[str, Any]:
        position, status, end = self.last or (None, None, None)
        first_hash, last_hash = entry_hashes(self.location, position)
        return {
            "location": self.location,
            "last_position": position,
            "last_status": status,
            "last_end": end,
            "unreadable": self.unreadable,
            "first_hash": first_hash,
            "last_hash": last_hash,
        }


SEGMENT_FACTS = Described(
    T.StructType(
        [
            T.StructField("location", T.StringType(), True),
            T.StructField("last_position", T.LongType(), True),
            T.StructField("last_status", T.StringType(), True),
            T.StructField("last_end", T.LongType(), True),
            T.StructField("unreadable", T.BooleanType(), True),
            T.StructField("first_hash", T.StringType(), True),
            T.StructField("last_hash", T.StringType(), True),
        ]
    ),
    SegmentFacts,
)


def entry_hashes(location: str, last_position: int | None) -> tuple[str | None, str | None]:
    """Hashes of the entries at position 0 and at `last_position` (None: no entry) of the file as it is now.

    (None, None) when the file cannot be read, which never matches a recorded hash.
    """
    try:
        filesystem, path = resolve(location)
        with filesystem.open_input_file(path) as source:
            size = source.size()
            return _hash_at(source, 0, size), _hash_at(source, last_position, size)
    except OSError as exc:
        log.warning("cannot read %s: %s", location, exc)
        return None, None


def _hash_at(source: pa.NativeFile, position: int | None, size: int) -> str:
    """BLAKE2b-128 of up to HASHED_BYTES bytes at `position`; bytes the file does not have are left out."""
    length = 0 if position is None else max(0, min(HASHED_BYTES, size - position))
    data = source.read_at(length, position) if length else b""
    return _hash_of(data)


def _hash_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


_NO_BYTES = _hash_of(b"")  # what `entry_hashes` gives an empty file, for both entries


def _with_entry_hashes(files: DataFrame) -> DataFrame:
    """`files` (`location`, `last_batch_position`, ...) with `first_batch_hash` and `last_batch_hash` added."""
    schema = T.StructType([*files.schema.fields, *_HASH_FIELDS])
    append = shipped(files.sparkSession, partial(_append_entry_hashes, to_arrow_schema(schema)))
    return files.mapInArrow(append, schema)


def _append_entry_hashes(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side of `_with_entry_hashes`."""
    for batch in batches:
        locations = batch.column("location").to_pylist()
        positions = batch.column("last_batch_position").to_pylist()
        hashes = [entry_hashes(location, position) for location, position in zip(locations, positions, strict=True)]
        first = pa.array([pair[0] for pair in hashes], pa.string())
        last = pa.array([pair[1] for pair in hashes], pa.string())
        yield pa.RecordBatch.from_arrays([*batch.columns, first, last], schema=schema)


def _recorded_rows(store: TableStore, topics: list[str]) -> dict[str, dict[str, Any]]:
    """The manifest rows of `topics`, of every cluster, by location: one small row per segment file, like the
    listing (`ingested_at` in microseconds)."""
    if not store.exists(TABLE):
        return {}
    # The instant as microseconds, which the driver writes back unchanged for the skipped segments.
    columns = [F.unix_micros(name).alias(name) if name == "ingested_at" else name for name in INGEST_MANIFEST.names]
    rows = store.read(TABLE, schema=INGEST_MANIFEST).where(F.col("topic").isin(topics)).select(*columns)
    return {row.source_file: row.asDict() for row in rows.collect()}


def _unchanged_on_disk(
    spark: SparkSession,
    store: TableStore,
    candidates: list[SegmentFile],
    recorded: dict[str, dict[str, Any]],
    sources: dict[str, SourceFiles] | None,
) -> set[str]:
    """The candidates whose end entries hash as recorded and whose rows `batches` still holds, all of them (counted
    from the Delta log when it says which segment each file holds, `sources`, and by a Spark job otherwise).

    The executors hash, the driver compares: one job without a join, whose answer is a row per candidate."""
    positions = [(segment.location, recorded[segment.location]["last_batch_position"]) for segment in candidates]
    hashed = _with_entry_hashes(spark.createDataFrame(positions, _POSITIONS)).collect()
    hashes = {row.location: (row.first_batch_hash, row.last_batch_hash) for row in hashed}
    if sources is None:
        held = {
            row.location: row.rows_held
            for row in store.read("batches", schema=BATCHES)
            .where(of_pairs(pair_of(segment) for segment in candidates))
            .groupBy(F.col("source_file").alias("location"))
            .agg(F.count(F.lit(1)).alias("rows_held"))
            .collect()
        }
    else:
        held = {segment.location: sources.get(segment.location, NO_FILES).rows for segment in candidates}
    return {
        segment.location
        for segment in candidates
        if hashes[segment.location]
        == (recorded[segment.location]["first_batch_hash"], recorded[segment.location]["last_batch_hash"])
        and held.get(segment.location, 0) == recorded[segment.location]["rows_ingested"]
    }


def _rows_of(spark: SparkSession, table: DataFrame, segments: list[SegmentFile]) -> DataFrame:
    """The rows of a table (`batches` or the manifest) whose `source_file` is one of `segments`."""
    locations = spark.createDataFrame([(segment.location,) for segment in segments], _LOCATIONS)
    return table.where(of_pairs(pair_of(segment) for segment in segments)).join(
        locations, F.col("source_file") == F.col("location"), "left_semi"
    )


def _decoded_rows(plan: SegmentPlan, decoded: list[WrittenFile], run_id: str) -> list[dict[str, Any]]:
    """Manifest rows of the segments this run decoded, from the listing and the facts of the files their rows were
    written to (several when a segment was decoded as several byte ranges); an appended segment's rows decoded
    before count too."""
    by_location: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for file in decoded:
        by_location.setdefault(file.facts["location"], []).append((file.rows, file.facts))
    ingested_at = int(datetime.now(UTC).timestamp() * 1_000_000)
    described = []
    for segment in plan.to_read:
        files = by_location.get(segment.location, [])
        before = plan.recorded[segment.location] if plan.outcomes[segment.location] == APPENDED else None
        held = [facts for _, facts in files if facts["last_position"] is not None]
        last = max(held, key=lambda facts: facts["last_position"], default=None)
        # A file no task wrote rows of is an empty one (any other decodes to a row at least): its hashes are of
        # no bytes, known without opening it on the driver; if it was not empty after all, no hash makes the next
        # run read it again.
        first_hashes = {facts["first_hash"] for _, facts in files} or {_NO_BYTES if segment.size == 0 else None}
        # A file read only in part, or changed while its ranges were read, is hashed as if unreadable, so that
        # the next run reads it again.
        complete = not any(facts["unreadable"] for _, facts in files) and len(first_hashes) == 1
        if last is None and before is not None:
            last_position, last_hash = before["last_batch_position"], before["last_batch_hash"]
            decoded_bytes = before["decoded_bytes"]
        elif last is None:
            last_position, last_hash, decoded_bytes = None, next(iter(first_hashes)), None
        else:
            last_position, last_hash = last["last_position"], last["last_hash"]
            decoded_bytes = last["last_end"] if last["last_status"] in WHOLE_ENTRIES else None
        described.append(
            {
                "topic": segment.topic,
                "partition": segment.partition,
                "source_file": segment.location,
                "broker_id": segment.broker_id,
                "cluster_id": segment.cluster_id,
                "segment_base_offset": segment.segment_base_offset,
                "size_bytes": segment.size,
                "mtime_ns": segment.mtime_ns,
                "first_batch_hash": next(iter(first_hashes)) if complete else None,
                "last_batch_position": last_position,
                "last_batch_hash": last_hash if complete else None,
                "is_active": segment.location in plan.active,
                "rows_ingested": sum(rows for rows, _ in files) + (before["rows_ingested"] if before else 0),
                "decoded_bytes": decoded_bytes if complete else None,
                "run_id": run_id,
                "ingested_at": ingested_at,
            }
        )
    return described


def pair_of_row(row: dict[str, Any]) -> tuple[str, str]:
    return row["cluster_id"], row["topic"]


def _removed(store: TableStore, plan: SegmentPlan, pairs: set[tuple[str, str]]) -> int:
    """Manifest rows of the (cluster, topic) `pairs` whose file is not among the listed segments (their rows are not
    written back)."""
    removed = sum(
        1 for location, row in plan.recorded.items() if pair_of_row(row) in pairs and location not in plan.outcomes
    )
    # Pairs of topics that only dump or columnar inputs hold now: their manifest rows were not collected with the
    # listing, which holds every cluster's rows of the segments' topics.
    listed = {segment.topic for segment in plan.segments}
    unlisted = {(cluster, topic) for cluster, topic in pairs if topic not in listed}
    if unlisted and store.exists(TABLE):
        removed += store.read(TABLE, schema=INGEST_MANIFEST).where(of_pairs(unlisted)).count()
    return removed
