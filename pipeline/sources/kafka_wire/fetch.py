"""The executors' side of a `kafka://` input: each task sends Fetch requests for its offset ranges to the
partitions' leaders and decodes the `records` bytes of the responses with the segment decoder, so every rule reads
the same `batches` rows as for a log dir.

The requests are read-only: Fetch with `isolation_level = READ_UNCOMMITTED` (control batches and aborted data
come as the leader stores them), no consumer group, no offset commit. A range is fetched from its first offset on,
`kafka.max_fetch_bytes` at a time, until its end; the batch that holds an offset below a later range's start
belongs to the range before. Leader changes and throttling are waited out (`kafka.retries`, backoff doubling from
100 ms); an error that retrying cannot fix fails the task with a message naming the broker, the partition and the
offset. A partition's rows read as one segment's, whichever range and run fetched them: `source_file` is the URI
and the partition, `segment_base_offset` the partition's log start when the run was planned, and `position` the
batch's base offset (a Fetch response says nothing of where the leader's files hold it). So the rows a nightly run
fetches after those an earlier run kept (`fetch_plan.continuation`) are the rows one run over the whole log makes.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from dataclasses import astuple, dataclass
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipeline.arrow_pass import ArrowPass
from pipeline.config import KafkaSettings
from pipeline.sources.kafka_format.windows import decode_segment
from pipeline.sources.kafka_wire.address import parse_bootstrap
from pipeline.sources.kafka_wire.connection import client_config
from pipeline.sources.kafka_wire.fetch_plan import FetchRange
from pipeline.sources.segments import with_provenance
from schemas.batches import BATCHES, STATUS_TRUNCATED

log = logging.getLogger(__name__)

SOURCE_FORMAT = "fetch"
_FETCH_ERROR = re.compile(r"FetchError: (kafka://[^\n]*)")
READ_UNCOMMITTED = 0
# Fetch v4 brought the isolation level and v12 is the last to name topics rather than ids.
FETCH_VERSIONS = (4, 12)
RETRIABLE = {
    "NotLeaderForPartitionError",
    "LeaderNotAvailableError",
    "FencedLeaderEpochError",
    "UnknownLeaderEpochError",
    "ReplicaNotAvailableError",
    "KafkaStorageError",
    "NotEnoughReplicasError",
    "RequestTimedOutError",
}
FETCH_DESCRIPTOR = T.StructType(  # the fields of FetchRange
    [
        T.StructField("uri", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("leader_id", T.IntegerType(), False),
        T.StructField("start", T.LongType(), False),
        T.StructField("end", T.LongType(), False),
        T.StructField("first", T.BooleanType(), False),
        T.StructField("log_start", T.LongType(), False),
        T.StructField("cluster_id", T.StringType(), False),
        T.StructField("size", T.LongType(), False),
    ]
)


class FetchError(RuntimeError):
    """A Fetch the leader answered with an error that retrying does not fix, or with nothing to step past."""


def fetch_failure(exc: BaseException) -> str | None:
    """The message of the FetchError that failed a Spark job, from the job's error (which carries the task's
    traceback as text); None when it is not one."""
    found = _FETCH_ERROR.search(str(exc))
    return found.group(1) if found else None


def fetch_pass(
    spark: SparkSession, ranges: list[FetchRange], settings: KafkaSettings, verify_records: bool
) -> ArrowPass:
    """The `BATCHES` rows of `ranges`, fetched by the tasks they are dealt to (`dealt`)."""
    return ArrowPass(dealt(spark, ranges), partial(fetch_descriptors, settings, verify_records), BATCHES)


def dealt(spark: SparkSession, ranges: list[FetchRange]) -> DataFrame:
    """`ranges` as FETCH_DESCRIPTOR rows dealt to tasks: at least one a core, the largest first."""
    tasks = max(1, min(len(ranges), spark.sparkContext.defaultParallelism))
    ordered = sorted(ranges, key=lambda fetch: fetch.size, reverse=True)
    each = [[astuple(fetch) for fetch in ordered[task::tasks]] for task in range(tasks)]
    rows = spark.sparkContext.parallelize(each, tasks).flatMap(lambda task_ranges: task_ranges)
    return spark.createDataFrame(rows, FETCH_DESCRIPTOR)


def with_readers(
    settings: KafkaSettings, descriptor_batches: Iterator[pa.RecordBatch]
) -> Iterator[tuple[PartitionReader, FetchRange]]:
    """Executor side: each range of the task with the client of its cluster (one per bootstrap, per task)."""
    readers: dict[str, PartitionReader] = {}
    try:
        for descriptors in descriptor_batches:
            for descriptor in descriptors.to_pylist():
                fetch = FetchRange(**descriptor)
                if fetch.uri not in readers:
                    readers[fetch.uri] = PartitionReader(fetch.uri, settings)
                yield readers[fetch.uri], fetch
    finally:
        for reader in readers.values():
            reader.close()


def fetch_descriptors(
    settings: KafkaSettings, verify_records: bool, descriptor_batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: fetch ranges in, `BATCHES` record batches out."""
    for reader, fetch in with_readers(settings, descriptor_batches):
        for table in fetch_range(reader, fetch, verify_records):
            yield from table.to_batches()


@dataclass(frozen=True)
class Response:
    """One Fetch response's part of a range: its `records` bytes and the entries of the range among them (positions
    in `records`)."""

    records: bytes
    entries: pa.Table


def responses(reader: PartitionReader, fetch: FetchRange, verify_records: bool) -> Iterator[Response]:
    """The range's entries, one response at a time, from its first offset until its end."""
    offset = fetch.start
    while offset < fetch.end:
        records = reader.fetch(fetch.topic, fetch.partition, offset)
        if not records:
            return  # the log ends below the planned end: truncated since the plan
        entries = complete_entries(decode_segment(records, verify_records=verify_records), fetch, offset)
        last = pc.max(entries["last_offset"]).as_py()
        kept = entries.filter(in_range(entries, fetch))
        if kept.num_rows:
            yield Response(records, kept)
        if last is None or last < offset:
            raise FetchError(
                f"{fetch.uri}: {fetch.topic}-{fetch.partition} at offset {offset}: the leader's response holds no "
                "batch at or after it that the audit can step past"
            )
        offset = last + 1


def provenance(fetch: FetchRange) -> dict[str, Any]:
    """The columns every row of a partition shares: it reads as one segment from the partition's log start."""
    return {
        "topic": fetch.topic,
        "partition": fetch.partition,
        "segment_base_offset": fetch.log_start,
        "source_file": f"{fetch.uri}/{fetch.topic}-{fetch.partition}",
        "source_format": SOURCE_FORMAT,
        "broker_id": fetch.leader_id,
        "cluster_id": fetch.cluster_id,
    }


def fetch_range(reader: PartitionReader, fetch: FetchRange, verify_records: bool) -> Iterator[pa.Table]:
    """The entries of one range as `BATCHES` rows, one table per Fetch response; an entry's position is its base
    offset."""
    for response in responses(reader, fetch, verify_records):
        entries = response.entries
        entries = entries.set_column(entries.schema.get_field_index("position"), "position", entries["base_offset"])
        yield with_provenance(entries, **provenance(fetch))


def complete_entries(entries: pa.Table, fetch: FetchRange, offset: int) -> pa.Table:
    """The response's entries without the partial one a size limit cuts off at its end (normal in Fetch)."""
    if entries.num_rows and entries["entry_status"][entries.num_rows - 1].as_py() == STATUS_TRUNCATED:
        entries = entries.slice(0, entries.num_rows - 1)
        if not entries.num_rows:
            raise FetchError(
                f"{fetch.uri}: {fetch.topic}-{fetch.partition} at offset {offset}: the first batch came cut short"
            )
    return entries


def in_range(entries: pa.Table, fetch: FetchRange) -> pa.Array:
    """Entries whose base offset lies in the range; the first range also keeps the batch holding its start."""
    base = entries["base_offset"]
    below_end = pc.less(base, fetch.end)
    keep = below_end if fetch.first else pc.and_(below_end, pc.greater_equal(base, fetch.start))
    return pc.fill_null(keep, True)  # an entry without offsets is kept: the rules report it


class PartitionReader:
    """One kafka-python network client of a cluster: Fetch to a partition's leader, the leader looked up again
    after a leader change, throttling and the per-task byte rate honoured."""

    def __init__(self, uri: str, settings: KafkaSettings) -> None:
        from kafka.net.compat import KafkaNetClient

        self.uri = uri
        self.settings = settings
        self.client = KafkaNetClient(**client_config(parse_bootstrap(uri), settings))
        # Its metadata requests must never create a topic that went away since the plan: a read-only client. The
        # network client does not hand this setting on to its metadata (kafka-python 3.0), so it is set there.
        self.client.cluster.config["allow_auto_create_topics"] = False
        self.client.check_version(timeout_ms=settings.connect_timeout_ms)
        self.leaders: dict[tuple[str, int], int] = {}
        self.started, self.read = time.monotonic(), 0

    def close(self) -> None:
        self.client.close()

    def leader(self, topic: str, partition: int, refresh: bool = False) -> int:
        from kafka import TopicPartition

        key = (topic, partition)
        if refresh or key not in self.leaders:
            cluster = self.client.cluster
            update = cluster.request_update() if refresh else cluster.add_topic(topic)
            self.client.poll(timeout_ms=self.settings.request_timeout_ms, future=update)
            leader = cluster.leader_for_partition(TopicPartition(topic, partition))
            self.leaders[key] = -1 if leader is None else leader
        return self.leaders[key]

    def fetch(self, topic: str, partition: int, offset: int) -> bytes:
        """The `records` bytes from `offset` on, retrying what a leader change or a busy broker explains."""
        import kafka.errors as kafka_errors

        for attempt in range(self.settings.retries + 1):
            leader = self.leader(topic, partition, refresh=attempt > 0)
            try:
                answer = self.client.send_and_receive(leader, self.request(topic, partition, offset),
                                                      timeout_ms=self.settings.request_timeout_ms)  # fmt: skip
            except (kafka_errors.KafkaConnectionError, kafka_errors.KafkaTimeoutError) as exc:
                error: Any = exc
            else:
                part = answer.responses[0].partitions[0]
                error = kafka_errors.for_code(part.error_code)
                if answer.throttle_time_ms:
                    time.sleep(answer.throttle_time_ms / 1000)
                if error is kafka_errors.NoError:
                    records = part.records or b""
                    self.pace(len(records))
                    return records
                if type(error) is type and error.__name__ not in RETRIABLE:
                    raise FetchError(
                        f"{self.uri}: broker {leader} answered {error.__name__} for {topic}-{partition} at offset "
                        f"{offset}"
                    )
            if attempt < self.settings.retries:
                time.sleep(min(0.1 * 2**attempt, 10.0))
        raise FetchError(
            f"{self.uri}: {topic}-{partition} at offset {offset}: no answer after {self.settings.retries} retries "
            f"(last: {getattr(error, '__name__', error)})"
        )

    def request(self, topic: str, partition: int, offset: int) -> Any:
        from kafka.protocol.consumer import FetchRequest

        part = FetchRequest.FetchTopic.FetchPartition(
            partition=partition,
            current_leader_epoch=-1,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=self.settings.max_fetch_bytes,
        )
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=self.settings.max_fetch_bytes,
            isolation_level=READ_UNCOMMITTED,
            session_id=0,
            session_epoch=-1,  # no fetch session: every request names its partition
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])],
            forgotten_topics_data=[],
            rack_id="",
            min_version=FETCH_VERSIONS[0],
            max_version=FETCH_VERSIONS[1],
        )

    def pace(self, size: int) -> None:
        """Sleep as long as reading `size` more bytes would put the task over `max_fetch_bytes_per_second`."""
        self.read += size
        wait = seconds_ahead(self.read, self.settings.max_fetch_bytes_per_second, time.monotonic() - self.started)
        if wait > 0:
            time.sleep(wait)


def seconds_ahead(read: int, cap: int, elapsed: float) -> float:
    """How far ahead of `cap` bytes a second (0: no cap) a task is that read `read` bytes in `elapsed` seconds."""
    return read / cap - elapsed if cap else 0.0
