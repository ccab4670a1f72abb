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
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

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

    @property
    def pairs(self) -> set[tuple[str, str]]:
        return {(self.cluster_id, fetch.topic) for fetch in self.ranges}


def plan_fetches(bootstrap: Bootstrap, settings: KafkaSettings, cluster_id: str = "") -> WirePlan:
    """The ranges of every chosen partition with offsets to read. `cluster_id`, when given, replaces the cluster id
    the brokers report (`--cluster-input`). InputError for an unreachable bootstrap, refused credentials, no
    chosen topic, or a chosen topic the principal may not read."""
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
    ranges = [
        fetch_range
        for key in sorted(readable)
        for fetch_range in split(
            bootstrap.uri, key, leaders[key], earliest[key], latest[key], sizes, settings, cluster_id
        )
    ]
    known = None if sizes is None else sum(r.size for r in ranges)
    return WirePlan(bootstrap.uri, cluster_id, ranges, len(leaders), known, live)


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


def split(
    uri: str,
    key: tuple[str, int],
    leader: int,
    first: int,
    end: int,
    sizes: dict[tuple[str, int, int], int] | None,
    settings: KafkaSettings,
    cluster_id: str,
) -> list[FetchRange]:
    """[first, end) as ranges of about `range_bytes` (the partition's bytes spread evenly over its offsets)."""
    if end <= first:
        return []
    topic, partition = key
    size = (sizes or {}).get((topic, partition, leader), 0)
    count = max(1, min(end - first, math.ceil(size / settings.range_bytes)))
    bounds = [first + (end - first) * i // count for i in range(count + 1)]
    return [
        FetchRange(uri, topic, partition, leader, start, stop, i == 0, cluster_id, size // count)
        for i, (start, stop) in enumerate(zip(bounds, bounds[1:], strict=False))
    ]
