"""The plan of a `kafka://` input, made on the driver from a few admin requests: which partitions, which leaders,
which offset ranges each task fetches.

Metadata names the cluster, the topics `kafka.topics` chooses and each partition's leader; ListOffsets gives each
partition's log start and high watermark (or the offsets of `kafka.start` / `kafka.end` times); DescribeLogDirs, where
the principal may send it, gives each partition's size, so that a large partition is cut into offset ranges of about
`kafka.range_bytes` each and no task reads far more than another. The plan holds offsets and sizes, never records.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any, Protocol

from pipeline.config import KafkaSettings
from pipeline.errors import InputError
from pipeline.sources.kafka_wire.address import Bootstrap
from pipeline.sources.kafka_wire.connection import admin_client

log = logging.getLogger(__name__)

INTERNAL_PREFIX = "__"
LIVE_FIELDS = (
    "producer_id", "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch", "current_txn_start_offset",
)  # fmt: skip
READ = "READ"


@dataclass(frozen=True)
class FetchRange:
    """Offsets [start, end) of one partition, fetched by one task from the partition's leader."""

    uri: str
    topic: str
    partition: int
    leader_id: int
    start: int
    end: int
    first: bool  # the partition's first range: it keeps the batch that holds `start` even when it begins before
    log_start: int  # the partition's first offset read, which its rows take as their segment base offset
    cluster_id: str
    size: int  # estimated bytes, for dealing ranges to tasks


@dataclass(frozen=True)
class WirePlan:
    uri: str
    cluster_id: str
    ranges: list[FetchRange]
    partitions: int  # the partitions chosen, with or without offsets to read
    bytes: int | None  # what the ranges hold, when DescribeLogDirs told
    live_producers: list[dict[str, Any]]  # LIVE_PRODUCERS rows; none when DescribeProducers was refused
    kept_paths: frozenset[str] = frozenset()  # the `batches` files of an earlier run that stay (`continuation`)
    kept_topics: frozenset[str] = frozenset()  # the topics of those files

    @property
    def pairs(self) -> set[tuple[str, str]]:
        """The (cluster, topic) pairs whose rows the run writes: those it fetches or keeps rows of."""
        return {(self.cluster_id, topic) for topic in {fetch.topic for fetch in self.ranges} | self.kept_topics}


def plan_fetches(
    bootstrap: Bootstrap,
    settings: KafkaSettings,
    cluster_id: str = "",
    kept: Mapping[tuple[str, str, int], Sequence[KeptFile]] | None = None,
) -> WirePlan:
    """The ranges of every chosen partition with offsets to read. `cluster_id`, when given, replaces the cluster id
    the brokers report (`--cluster-input`). `kept`: the files an earlier run fetched from this bootstrap, by
    (cluster, topic, partition), when the run is incremental: a partition goes on after them (`continuation`).
    InputError for an unreachable bootstrap, refused credentials, no chosen topic, or a chosen topic the principal
    may not read."""
    with admin_client(bootstrap, settings) as admin:
        cluster = admin.describe_cluster()
        topics = chosen_topics(bootstrap, admin.describe_topics(None), settings.topics)
        leaders = {
            (topic["name"], part["partition_index"]): part["leader_id"]
            for topic in topics
            for part in topic["partitions"]
        }
        offline = sorted(key for key, leader in leaders.items() if leader < 0)
        if offline:
            log.warning(
                "%s: %d partition(s) without a leader are not read: %s", bootstrap.uri, len(offline), offline[:10]
            )
        readable = [key for key, leader in leaders.items() if leader >= 0]
        earliest, latest, high_watermark = offsets_between(admin, readable, settings)
        described_at = int(time.time() * 1000)
        producers = described_producers(admin, readable)
        settled = {key for key, offset in high_watermarks(admin, readable).items() if offset == high_watermark[key]}
        sizes = log_sizes(admin)
    cluster_id = cluster_id or cluster.get("cluster_id") or ""
    live = [
        {
            **row,
            "topic": key[0],
            "partition": key[1],
            "described_at": described_at,
            "log_end_offset": high_watermark[key],
            "read_end_offset": latest[key],
            "settled": key in settled,
            "source": bootstrap.uri,
            "broker_id": leaders[key],
            "cluster_id": cluster_id,
        }
        for key, rows in (producers or {}).items()
        for row in rows
    ]
    resumable = kept is not None and settings.start is None and settings.end is None
    ranges, kept_paths, kept_topics, resumed = [], [], set(), 0
    for key in sorted(readable):
        topic, partition = key
        # The coordinator topics are read whole: their records' tables are written whole (they are small).
        goes_on = resumable and not topic.startswith(INTERNAL_PREFIX)
        earlier = (kept or {}).get((cluster_id, topic, partition), []) if goes_on else []
        paths, bounds = continuation(earliest[key], latest[key], earlier)
        if paths:
            kept_paths.extend(paths)
            kept_topics.add(topic)
            resumed += 1
        size = (sizes or {}).get((topic, partition, leaders[key]), 0)
        for low_high in bounds:
            ranges.extend(split(bootstrap.uri, key, leaders[key], low_high, earliest[key], size, settings, cluster_id))
    if resumable:
        log.info(
            "%s: %d partition(s) go on from the rows an earlier run fetched, %d are read whole",
            bootstrap.uri,
            resumed,
            len(readable) - resumed,
        )
    known = None if sizes is None else sum(r.size for r in ranges)
    return WirePlan(
        bootstrap.uri, cluster_id, ranges, len(leaders), known, live, frozenset(kept_paths), frozenset(kept_topics)
    )


def chosen_topics(bootstrap: Bootstrap, topics: list[dict[str, Any]], globs: list[str]) -> list[dict[str, Any]]:
    """The topics a glob of `kafka.topics` matches; an internal topic only when its glob starts with `__` too."""

    def chosen(name: str) -> bool:
        internal = name.startswith(INTERNAL_PREFIX)
        return any(fnmatchcase(name, glob) and (not internal or glob.startswith(INTERNAL_PREFIX)) for glob in globs)

    picked = [topic for topic in topics if chosen(topic["name"])]
    if not picked:
        raise InputError(
            bootstrap.uri, f"no topic the principal may describe matches kafka.topics {globs} ({len(topics)} topic(s))"
        )
    for topic in picked:
        operations = topic.get("authorized_operations")
        if operations is not None and READ not in operations:
            raise InputError(bootstrap.uri, f"topic {topic['name']}: the principal may not read it (needs READ)")
    return picked


Offsets = dict[tuple[str, int], int]


def offsets_between(admin: Any, partitions: list[tuple[str, int]], settings: KafkaSettings) -> tuple[Offsets, ...]:
    """(first, end, high watermark) of each partition: the read runs from the log start, or from the offset of the
    `kafka.start` time (the first offset whose timestamp is at or after it), to the high watermark, or to the offset
    of the `kafka.end` time."""
    from kafka import OffsetSpec

    log_start, high_watermark = listed(admin, partitions, OffsetSpec.EARLIEST), high_watermarks(admin, partitions)
    first, end = dict(log_start), dict(high_watermark)
    for bound, values in ((settings.start, first), (settings.end, end)):
        if bound is not None:
            for key, offset in listed(admin, partitions, timestamp_ms(bound)).items():  # -1: none at or after it
                values[key] = high_watermark[key] if offset < 0 else max(log_start[key], offset)
    return first, end, high_watermark


def high_watermarks(admin: Any, partitions: list[tuple[str, int]]) -> Offsets:
    from kafka import OffsetSpec

    return listed(admin, partitions, OffsetSpec.LATEST)


def listed(admin: Any, partitions: list[tuple[str, int]], spec: int) -> Offsets:
    """ListOffsets of every partition for `spec` (a timestamp or an OffsetSpec), one request per leader."""
    from kafka import TopicPartition

    if not partitions:
        return {}
    tps = [TopicPartition(topic, partition) for topic, partition in partitions]
    found = admin.list_partition_offsets({tp: spec for tp in tps})
    return {(tp.topic, tp.partition): found[tp].offset for tp in tps}


def described_producers(admin: Any, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], list[dict]] | None:
    """The producers each partition's leader holds state for (DescribeProducers), as LIVE_PRODUCERS fields; a
    partition with none has one row of nulls. None when the leaders refuse it (it needs READ on the topics and a
    broker of 2.8 or later): the rules that compare it then do not run."""
    from kafka import TopicPartition

    if not partitions:
        return {}
    try:
        described = admin.describe_producers([TopicPartition(topic, partition) for topic, partition in partitions])
    except Exception as exc:  # any refusal or an old broker: the run goes on without the leaders' view
        log.warning("DescribeProducers refused (%s: %s): the LIV rules do not run", type(exc).__name__, exc)
        return None
    nothing = dict.fromkeys(LIVE_FIELDS)
    return {
        (tp.topic, tp.partition): [
            {
                "producer_id": producer.producer_id,
                "producer_epoch": producer.producer_epoch,
                "last_sequence": producer.last_sequence,
                "last_timestamp": producer.last_timestamp,
                "coordinator_epoch": producer.coordinator_epoch,
                "current_txn_start_offset": None
                if producer.current_transaction_start_offset < 0
                else producer.current_transaction_start_offset,
            }
            for producer in state.active_producers
        ]
        or [nothing]
        for tp, state in described.items()
    }


def timestamp_ms(bound: str) -> int:
    """Epoch milliseconds of `kafka.start` / `kafka.end`: digits as milliseconds, else an ISO-8601 time (UTC
    unless it says otherwise)."""
    if bound.isdigit():
        return int(bound)
    try:
        moment = datetime.fromisoformat(bound.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            "kafka.start/kafka.end", f"{bound!r} is neither epoch milliseconds nor an ISO-8601 time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def log_sizes(admin: Any) -> dict[tuple[str, int, int], int] | None:
    """Bytes of each (topic, partition, broker) replica from DescribeLogDirs; None when the principal may not
    send it (it needs DESCRIBE on the cluster, which managed services seldom grant)."""
    try:
        described = admin.describe_log_dirs()
    except Exception as exc:  # any refusal: the ranges are then one per partition
        log.info("DescribeLogDirs refused (%s): one fetch range per partition", type(exc).__name__)
        return None
    return {
        (topic["name"], part["partition_index"], broker["broker"]): part["partition_size"]
        for broker in described
        for log_dir in broker["log_dirs"]
        for topic in log_dir["topics"]
        for part in topic["partitions"]
        if not part.get("is_future_key")
    }


class KeptFile(Protocol):
    """A `batches` file an earlier run fetched: one partition's rows from `first_offset` to `next_offset`, read from
    `log_start` on (the rows' segment base offset)."""

    path: str
    log_start: int
    first_offset: int
    next_offset: int


def continuation(log_start: int, end: int, kept: Sequence[KeptFile]) -> tuple[list[str], list[tuple[int, int, bool]]]:
    """What a run keeps of a partition's earlier rows and which offsets it fetches, as (paths, [(start, end,
    first)]): the earlier files stay when they were read from the same log start and the log still reaches past
    them, and only the offsets after them are fetched. Otherwise the partition is read whole: retention or
    DeleteRecords moved its log start, or the log is shorter than what was read (a truncation), and the kept rows are
    no longer the log's."""
    whole: tuple[list[str], list[tuple[int, int, bool]]] = ([], [(log_start, end, True)])
    if not kept or any(file.log_start != log_start for file in kept):
        return whole
    read_to = max(file.next_offset for file in kept)
    if read_to > end:
        return whole
    return [file.path for file in kept], [(read_to, end, False)]


def split(
    uri: str,
    key: tuple[str, int],
    leader: int,
    bounds: tuple[int, int, bool],
    log_start: int,
    partition_bytes: int,
    settings: KafkaSettings,
    cluster_id: str,
) -> list[FetchRange]:
    """Offsets [start, end) as ranges of about `range_bytes`, the partition's bytes (`partition_bytes` from its log
    start to the high watermark) spread evenly over its offsets; `first`: the range holds the log start."""
    start, end, first = bounds
    if end <= start:
        return []
    topic, partition = key
    size = partition_bytes * (end - start) // max(1, end - log_start)
    count = max(1, min(end - start, math.ceil(size / settings.range_bytes)))
    offsets = [start + (end - start) * i // count for i in range(count + 1)]
    return [
        FetchRange(uri, topic, partition, leader, low, high, first and i == 0, log_start, cluster_id, size // count)
        for i, (low, high) in enumerate(zip(offsets, offsets[1:], strict=False))
    ]
