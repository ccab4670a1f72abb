"""The layouts and statuses the readers of the files beside segments share: fixed-size entry structs, the file
kinds, and the descriptor a listed file travels to the executors in.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

STATUS_OK = "ok"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
TXN_INDEX_SUFFIX = "txnindex"
SNAPSHOT_SUFFIX = "snapshot"
OFFSET_INDEX_SUFFIX = "index"
TIME_INDEX_SUFFIX = "timeindex"
SEGMENT_SUFFIXES = ("log", OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)
# The binary files are fixed-size entries, read and decoded this many at a time: a foreign file of any size costs
# one chunk and one record batch besides the rows already handed to Spark.
ROWS_PER_BATCH = 16 * 1024
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset
SNAPSHOT_VERSION = 1
SNAPSHOT_ENTRY_FIELDS = (
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "coordinator_epoch",
    "current_txn_first_offset",
)
TXN_INDEX_ENTRY_FIELDS = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")


@dataclass(frozen=True)
class FileDescriptor:
    """One file to decode on an executor; locations are local paths or URIs opened as they are."""

    location: str
    kind: str  # a segment-family suffix, or the name of a text file
    topic: str | None  # None for a log-dir checkpoint, whose entries name their partitions
    partition: int | None
    broker_id: int | None
    base_offset: int | None  # from a `<20 digits>.<suffix>` name
    size: int
    log_location: str | None = None  # `.index`/`.timeindex`: the segment they index, if it exists
    offset_index_location: str | None = None  # `.timeindex`: the segment's `.index`, to start lookups from
    cluster_id: str = ""  # the log dir's cluster (`log_roots.LogDirIdentity`); None for dump text


class FormatProblem(NamedTuple):
    """What the broker would reject in a text file; `line` is 1-based, None for the file as a whole."""

    line: int | None
    message: str


class IndexProblem(NamedTuple):
    """An SEG-004/SEG-005 finding at byte `position` of the index file."""

    position: int
    message: str


ByteReader = Callable[[int, int], bytes]
"""(position, length) -> up to `length` bytes of a file from `position`; fewer at its end."""
LogReader = ByteReader


def problem_row(
    kind: str,
    topic: str,
    partition: int,
    source_file: str,
    position: int | None,
    message: str,
    broker_id: int | None,
    cluster_id: str,
) -> dict[str, Any]:
    """A `file_problems` row: what was seen, in which file and where."""
    return {
        "kind": kind,
        "topic": topic,
        "partition": partition,
        "source_file": source_file,
        "position": position,
        "message": message,
        "broker_id": broker_id,
        "cluster_id": cluster_id,
    }
