"""The input plan of a run: which reader gets which input, from one listing of each input on the driver.

Each input is looked up once and each directory input listed once, through the pyarrow filesystem the readers
open it with (`filesystems.resolve`), so local paths and URIs such as s3:// or s3a:// behave alike. The listing
of a log-dir input is kept in the plan (`log_roots`) and handed to every reader of log dirs, which then list
nothing themselves: on an object store each listing is paid for and takes minutes on a large log root. The plan
holds file names, sizes and modification times; no file content is read here but a log dir's `meta.properties`
(its broker and cluster id, read once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

import pyarrow as pa
from pyarrow import fs as pafs
from pyspark.sql import SparkSession

from pipeline.config import IngestSettings, KafkaSettings
from pipeline.errors import InputError
from pipeline.progress import timed
from pipeline.sources.columnar import FORMATS_BY_SUFFIX, columnar_format, require_spark_filesystem
from pipeline.sources.filesystems import configure, resolve
from pipeline.sources.kafka_wire.address import is_kafka_uri, parse_bootstrap
from pipeline.sources.kafka_wire.fetch_plan import KeptFile, WirePlan, plan_fetches
from pipeline.sources.log_dir_names import PARTITION_DIR, SEGMENT_FILE
from pipeline.sources.log_roots import Discovery, RootListing, SkippedDir, listing_of, segments_of

DUMP_SUFFIXES = (".txt", ".dump", ".out")
ACCEPTED = (
    "accepted inputs: a Kafka log directory (a `<topic>-<partition>` directory of `<20 digits>.log` segments, "
    "a log.dirs directory of them, or a directory of broker directories), kafka-dump-log text files "
    f"({', '.join('*' + suffix for suffix in DUMP_SUFFIXES)}), columnar `batches` exports "
    f"({', '.join('*' + suffix for suffix in FORMATS_BY_SUFFIX)}), directories of such files, or a cluster read "
    "over the Kafka protocol (kafka://HOST:PORT[,HOST:PORT...])"
)

log = logging.getLogger(__name__)

INTERNAL_TOPIC_PREFIX = "__"  # __consumer_offsets, __transaction_state, __cluster_metadata, ...
# The smallest entry a segment holds: a v0 message without key or value (offset and size, CRC, magic, attributes,
# key and value lengths). A dump line describing an entry is longer.
SMALLEST_ENTRY_BYTES = 26


@dataclass(frozen=True)
class InputPlan:
    """Which reader gets which path (paths keep the spelling the caller gave), and the log-dir inputs as listed."""

    log_roots: Discovery = field(default_factory=lambda: Discovery([], [], []))
    dump_files: list[str] = field(default_factory=list)
    columnar_paths: list[str] = field(default_factory=list)
    dump_bytes: int = 0
    # The cluster of each dump file and columnar path: its input's (`IngestSettings.cluster_of`).
    clusters: dict[str, str] = field(default_factory=dict)
    wire: list[WirePlan] = field(default_factory=list)  # the `kafka://` inputs: partitions and offset ranges

    def without_log_dirs(self) -> InputPlan:
        """The dump and columnar inputs only."""
        return replace(self, log_roots=Discovery([], [], []), wire=[])

    @property
    def wire_pairs(self) -> set[tuple[str, str]]:
        """The (cluster, topic) pairs the `kafka://` inputs read, known from their plans."""
        return {pair for wire in self.wire for pair in wire.pairs}

    @property
    def segment_roots(self) -> list[str]:
        return [listing.root for listing in self.log_roots.listings]

    def most_entries(self) -> int | None:
        """At most this many `batches` rows come of the inputs, known from the listing alone: no entry is smaller
        than `SMALLEST_ENTRY_BYTES` and a segment adds at most one row saying why it ends early. None with
        columnar inputs, whose rows the listing does not give."""
        if self.columnar_paths or any(wire.bytes is None for wire in self.wire):
            return None
        segments = self.log_roots.segments
        fetched = sum(wire.bytes or 0 for wire in self.wire)
        return (sum(segment.size for segment in segments) + self.dump_bytes + fetched) // SMALLEST_ENTRY_BYTES + len(
            segments
        )


@dataclass
class _Sorted:
    """The inputs sorted so far."""

    listings: list[RootListing] = field(default_factory=list)
    skipped: list[SkippedDir] = field(default_factory=list)
    dump_files: dict[str, int] = field(default_factory=dict)  # path: bytes
    columnar_paths: list[str] = field(default_factory=list)
    clusters: dict[str, str] = field(default_factory=dict)  # dump file or columnar path: its input's cluster
    wire: list[WirePlan] = field(default_factory=list)


def plan_inputs(
    spark: SparkSession,
    inputs: list[str],
    ingest: IngestSettings,
    kafka: KafkaSettings | None = None,
    fetched: Callable[[str], Mapping[tuple[str, str, int], Sequence[KeptFile]] | None] | None = None,
) -> InputPlan:
    """Sort the inputs by reader from one listing each; raises InputError for a missing or unrecognised input,
    for a log-dir input without segments once `ingest.skip_dir_suffixes` are left out, or for a `kafka://` input
    whose brokers do not answer or refuse the client. `fetched(uri)`: the files an earlier run fetched from a
    `kafka://` input, which an incremental run goes on after."""
    configure(spark)
    found = _Sorted()
    with timed(log, f"listing {len(inputs)} input(s)") as step:
        for path in dict.fromkeys(inputs):  # an input named twice is listed and read once
            if is_kafka_uri(path):
                bootstrap = parse_bootstrap(path)
                kept = fetched(bootstrap.uri) if fetched is not None and ingest.incremental else None
                cluster = ingest.input_clusters.get(path, "")
                found.wire.append(plan_fetches(bootstrap, kafka or KafkaSettings(), cluster, kept))
                continue
            _classify(path, ingest, found)
        for path in found.columnar_paths:
            require_spark_filesystem(spark, path)
        plan = InputPlan(
            log_roots=segments_of(found.listings, found.skipped),
            dump_files=list(found.dump_files),
            columnar_paths=list(dict.fromkeys(found.columnar_paths)),
            dump_bytes=sum(found.dump_files.values()),
            clusters=found.clusters,
            wire=found.wire,
        )
        segments = plan.log_roots.segments
        step.count, step.unit = len(segments), "segments"
        step.detail = (
            f"{sum(segment.size for segment in segments) / 2**20:,.1f} MiB, {len(plan.dump_files)} dump file(s), "
            f"{len(plan.columnar_paths)} columnar export(s)"
        )
        if plan.wire:
            step.detail += ", " + ", ".join(
                f"{wire.uri}: {len(wire.ranges)} offset range(s) of {wire.partitions} partition(s)"
                for wire in plan.wire
            )
    return plan


def _is_dump(name: str) -> bool:
    return PurePosixPath(name).suffix.lower() in DUMP_SUFFIXES


def _is_hidden(relative_path: str) -> bool:
    """Hidden or `_`-prefixed files and directories (_SUCCESS, .crc, _delta_log) are not data, as in Spark; a
    `__` prefix is Kafka's internal topics' (`__consumer_offsets-12.txt`, the dump of a partition), not Spark's."""
    return any(
        part.startswith(".") or (part.startswith("_") and not part.startswith(INTERNAL_TOPIC_PREFIX))
        for part in relative_path.split("/")
    )


def _classify(path: str, ingest: IngestSettings, found: _Sorted) -> None:
    try:
        filesystem, fs_path = resolve(path)
        info = filesystem.get_file_info(fs_path)
        if info.type == pafs.FileType.NotFound:
            raise InputError(path, "does not exist")
        if info.type == pafs.FileType.File:
            _classify_file(path, info.size, found)
            found.clusters.setdefault(path, ingest.cluster_of(path))
        else:
            _classify_directory(path, filesystem, fs_path.rstrip("/"), ingest, found)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(path, f"cannot be listed: {exc}") from None


def _classify_file(path: str, size: int, found: _Sorted) -> None:
    if _is_dump(path):
        found.dump_files.setdefault(path, size)
    elif columnar_format(path):
        found.columnar_paths.append(path)
    else:
        raise InputError(path, f"unrecognised file type; {ACCEPTED}")


def _classify_directory(
    path: str, filesystem: pafs.FileSystem, base: str, ingest: IngestSettings, found: _Sorted
) -> None:
    root_name = base.rpartition("/")[2]
    entries = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    dumps: dict[str, int] = {}
    columnar: list[str] = []
    others = 0
    for entry in entries:
        if entry.type != pafs.FileType.File:
            continue
        relative = entry.path[len(base) + 1 :]
        *dirs, name = relative.split("/")
        if SEGMENT_FILE.fullmatch(name) and PARTITION_DIR.fullmatch(dirs[-1] if dirs else root_name):
            # Kafka data: the log-dir readers take the whole directory, as listed here.
            found.listings.append(
                listing_of(
                    path, filesystem, base, entries, ingest.skip_dir_suffixes, found.skipped, ingest.cluster_of(path)
                )
            )
            return
        if _is_hidden(relative):
            continue
        display = f"{path.rstrip('/')}/{relative}"
        if _is_dump(name):
            dumps[display] = entry.size
        elif columnar_format(name):
            columnar.append(display)
        else:
            others += 1
    if not dumps and not columnar:
        raise InputError(path, f"holds no Kafka segments, dump text or columnar files; {ACCEPTED}")
    for display, size in dumps.items():
        found.dump_files.setdefault(display, size)
        found.clusters.setdefault(display, ingest.cluster_of(path))
    # A directory of one columnar format is read as one data set (partition directories included).
    single_format = len({columnar_format(file) for file in columnar}) == 1
    if columnar and not dumps and not others and single_format:
        found.columnar_paths.append(path)
        found.clusters.setdefault(path, ingest.cluster_of(path))
    else:
        found.columnar_paths.extend(columnar)
        for display in columnar:
            found.clusters.setdefault(display, ingest.cluster_of(path))
