"""The grammar of `kafka-dump-log` text (spec §4): line kinds, the line layouts of every broker version as regular
expressions, and the entry schemas of `.snapshot` and `.txnindex` lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from schemas.batches import CONTROL_TYPES

SOURCE_FORMAT = "dumplog"
# Line kinds counted by parse_dump.
HEADER = "header"  # Dumping, (Log) starting offset, KRaft snapshot headers
BATCH = "batch"
RECORD = "record"
CONTROL_RECORD = "control_record"
SNAPSHOT_ENTRY = "snapshot_entry"
TXN_INDEX_ENTRY = "txn_index_entry"
INDEX_ENTRY = "index_entry"  # .index and .timeindex lines
TRUNCATED_TAIL = "truncated_tail"
DIAGNOSTIC = "diagnostic"  # the tool's own stderr messages (index mismatches, non-consecutive offsets, ...)
BLANK = "blank"
UNKNOWN = "unknown"
COMPRESSION_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# Magic 0 messages print `NoTimestampType: -1`: they have neither, and both columns stay null as for segments.
TIMESTAMP_TYPE_IDS = {"CreateTime": 0, "LogAppendTime": 1}
MARKER_CONTROL_TYPES = {name: CONTROL_TYPES.index(name) for name in ("ABORT", "COMMIT")}
# Control records 3.2+ prints as JSON instead of `controlType: NAME(id)` (ControlRecordType ids).
JSON_CONTROL_TYPES = {name: CONTROL_TYPES.index(name) for name in CONTROL_TYPES if name not in MARKER_CONTROL_TYPES}
DEEP_GROUP_NOTE = (
    "rebuilt from {records} record line(s): kafka-dump-log 0.11-2.1 prints no batch line in deep mode, so "
    "last offset and last sequence are those of the last printed record and size, CRC and partition "
    "leader epoch are unknown"
)
INT = r"-?\d+"
_TIMESTAMP = rf"(?P<ts_type>CreateTime|LogAppendTime|NoTimestampType): (?P<ts>{INT})"
_BOOL = r"true|false"
# Everything a record line may print after its metadata: a control record or the data of a data record.
_RECORD_TAIL = (
    rf"(?P<tail>|"
    rf" endTxnMarker: (?P<marker>COMMIT|ABORT) coordinatorEpoch: (?P<coordinator_epoch>{INT})|"
    rf" controlType: \w+\((?P<control_type>{INT})\)|"
    rf" (?P<json_control>SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters) \{{.*\}}|"
    rf" (?P<leader_change>LeaderChange): \{{.*\}}|"
    rf" key: .*| payload: .*)"
)
DUMPING = re.compile(r"Dumping (?P<path>.+)")
STARTING_OFFSET = re.compile(rf"(?:Log starting|Starting) offset: (?P<offset>{INT})")
KRAFT_SNAPSHOT_HEADER = re.compile(rf"Snapshot end offset: {INT}, epoch: {INT}|KRaft bootstrap snapshot")
# 0.11-4.x batch line of a magic v2 batch (spec §4.2).
V2_BATCH = re.compile(
    rf"baseOffset: (?P<base_offset>{INT}) lastOffset: (?P<last_offset>{INT})"
    rf"(?: count: (?P<count>{INT}|null))?"
    rf" baseSequence: (?P<base_sequence>{INT}) lastSequence: (?P<last_sequence>{INT})"
    rf" producerId: (?P<producer_id>{INT}) producerEpoch: (?P<producer_epoch>{INT})"
    rf" partitionLeaderEpoch: (?P<leader_epoch>{INT}) isTransactional: (?P<transactional>{_BOOL})"
    rf"(?: isControl: (?P<control>{_BOOL}))?"
    rf"(?: deleteHorizonMs: (?P<delete_horizon_field>OptionalLong\.empty|OptionalLong\[(?P<delete_horizon>{INT})\]))?"
    rf" position: (?P<position>\d+) {_TIMESTAMP}(?: isvalid: (?P<valid_before_size>{_BOOL}))?"
    rf" size: (?P<size>\d+) magic: (?P<magic>\d+) compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+)"
    rf"(?: isvalid: (?P<valid>{_BOOL}))?"
)
# Legacy magic 0/1 entry: the v2 line of the same version without the producer fields.
LEGACY_BATCH = re.compile(
    rf"offset: (?P<last_offset>{INT}) position: (?P<position>\d+) {_TIMESTAMP}"
    rf"(?: isvalid: (?P<valid_before_size>{_BOOL}))?"
    rf" size: (?P<size>\d+) magic: (?P<magic>\d+) compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+)"
    rf"(?: isvalid: (?P<valid>{_BOOL}))?"
)
# 0.11-2.1 deep iteration: one line per record, no batch line (0.11.0 does not print producerEpoch).
DEEP_RECORD = re.compile(
    rf"offset: (?P<offset>{INT}) position: (?P<position>\d+) {_TIMESTAMP} isvalid: (?P<valid>{_BOOL})"
    rf" keysize: {INT} valuesize: {INT} magic: (?P<magic>\d+) compresscodec: (?P<codec>\w+)"
    rf"(?: producerId: (?P<producer_id>{INT})(?: producerEpoch: (?P<producer_epoch>{INT}))?"
    rf" sequence: (?P<sequence>{INT}) isTransactional: (?P<transactional>{_BOOL}) headerKeys: \[.*?\]"
    rf"| crc: (?P<crc>\d+|null))"
    rf"{_RECORD_TAIL}"
)
# 2.2-2.7 and 3.0-4.x record line; legacy records print `crc: C isvalid: V` (2.x) or `isValid: V crc: C}` (3.x).
PIPE_RECORD = re.compile(
    rf"\| offset: (?P<offset>{INT}) {_TIMESTAMP} key[sS]ize: {INT} value[sS]ize: {INT}"
    rf"(?: sequence: (?P<sequence>{INT}) headerKeys: \[.*?\]| crc: \S+ isvalid: \w+| isValid: \w+ crc: \S+\}})"
    rf"{_RECORD_TAIL}"
)
# 2.8 record line, which repeats the batch fields.
PIPE_RECORD_2_8 = re.compile(
    rf"\| offset: (?P<offset>{INT}) isValid: \w+ crc: \S+ keySize: {INT} valueSize: {INT} {_TIMESTAMP}"
    rf"(?: \w+: \S+)*?(?: sequence: (?P<sequence>{INT}) headerKeys: \[.*?\])?"
    rf"{_RECORD_TAIL}"
)
# --skip-record-metadata: only key and payload remain (` payload: v` without the `|` when there is no key).
RECORD_WITHOUT_METADATA = re.compile(r"\| key: .*|payload: .*")
_TXN_FIRST_OFFSET = r"(?P<txn_first_offset>None|Some\(-?\d+\)|OptionalLong\.empty|OptionalLong\[-?\d+\])"
SNAPSHOT_0_11 = re.compile(
    rf"producerId: (?P<producer_id>{INT}) producerEpoch: (?P<producer_epoch>{INT})"
    rf" lastSequence: (?P<last_sequence>{INT}) lastOffset: (?P<last_offset>{INT})"
    rf" offsetDelta: (?P<offset_delta>{INT}) lastTimestamp: (?P<last_timestamp>{INT})"
    rf" coordinatorEpoch: (?P<coordinator_epoch>{INT}) currentTxnFirstOffset: {_TXN_FIRST_OFFSET}"
)
SNAPSHOT = re.compile(
    rf"producerId: (?P<producer_id>{INT}) producerEpoch: (?P<producer_epoch>{INT})"
    rf" coordinatorEpoch: (?P<coordinator_epoch>{INT}) currentTxnFirstOffset: {_TXN_FIRST_OFFSET}"
    rf"(?: lastTimestamp: (?P<last_timestamp>{INT}))?"
    rf"(?: cachedMetadata: Queue\((?P<queue>.*)\)"
    rf"| firstSequence: (?P<first_sequence>{INT}) lastSequence: (?P<last_sequence>{INT})"
    rf" lastOffset: (?P<last_offset>{INT}) offsetDelta: (?P<offset_delta>{INT}) timestamp: (?P<timestamp>{INT}))?"
)
BATCH_METADATA_1_0 = re.compile(
    rf"BatchMetadata\(firstSeq=(?P<first_sequence>{INT}), lastSeq=(?P<last_sequence>{INT}),"
    rf" firstOffset=(?P<first_offset>{INT}), lastOffset=(?P<last_offset>{INT}), timestamp=(?P<timestamp>{INT})\)"
)
TXN_INDEX = re.compile(
    rf"version: (?P<version>\d+) producerId: (?P<producer_id>{INT}) firstOffset: (?P<first_offset>{INT})"
    rf" lastOffset: (?P<last_offset>{INT}) lastStableOffset: (?P<last_stable_offset>{INT})"
)
INDEX_ENTRY_LINE = re.compile(rf"offset: {INT} position: \d+|timestamp: {INT} offset: {INT}")
INVALID_BYTES = re.compile(r"Found (?P<count>\d+) invalid bytes at the end of (?P<file>.+)")
DIAGNOSTIC_LINE = re.compile(
    r"\S+ is empty\.|\S+ passed sanity check\.|Ignoring unknown file .+|Non-consecutive offsets in .+"
    rf"|{INT} is followed by {INT}|Mismatches in :.+|Index offset: {INT}, log offset: {INT}"
    rf"|Found timestamp mismatch in :.+|Found out of order timestamp in :.+"
    rf"|Index timestamp: {INT}, (?:log|Previously indexed) timestamp: {INT}"
    rf"|The following indexed offsets are not found in the log\.|Indexed offset: {INT}, found log offset: {INT}"
)
LINE_NUMBER_GUTTER = re.compile(r"\d+(?:\s+|$)")
_INT8, _INT16, INT32, INT64 = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) for bits in (8, 16, 32, 64))
_UINT32 = (0, (1 << 32) - 1)
# The Kafka type of every number the line patterns capture, by group name: a printed number outside it cannot
# come from the tool (and would not fit its column), so the line is not read as the layout it resembles.
GROUP_RANGES = {
    "magic": _INT8,
    **dict.fromkeys(("producer_epoch", "control_type", "version"), _INT16),
    **dict.fromkeys(
        (
            "count",
            "base_sequence",
            "last_sequence",
            "sequence",
            "first_sequence",
            "leader_epoch",
            "coordinator_epoch",
            "position",
            "size",
            "offset_delta",
        ),
        INT32,
    ),
    "crc": _UINT32,
    **dict.fromkeys(
        (
            "base_offset",
            "last_offset",
            "first_offset",
            "last_stable_offset",
            "offset",
            "producer_id",
            "delete_horizon",
            "ts",
            "timestamp",
            "last_timestamp",
            "txn_first_offset",
        ),
        INT64,
    ),
}
MAX_INT64_DIGITS = len(str(1 << 63))
# `<topic>-<partition>[.<id>-delete|-future|-stray]/<20 digits>[-<epoch>].<suffix>`
DUMPED_FILE = re.compile(r"(?:^|.*[/\\])(?P<base_offset>\d{20})(?:-\d+)?\.(?P<suffix>\w+)")


# The fields of a `.snapshot` entry (the reader's SNAPSHOT_ENTRIES).
SNAPSHOT_ENTRY_FIELDS = (
    "topic",
    "partition",
    "snapshot_offset",
    "producer_id",
    "producer_epoch",
    "coordinator_epoch",
    "current_txn_first_offset",
    "last_timestamp",
    "first_sequence",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "source_file",
    "line_number",
)


@dataclass
class DumpParse:
    """Everything parse_dump found in one text: rows, entries, and an account of every line."""

    batches: list[dict[str, Any]]  # BATCHES rows
    snapshot_entries: list[dict[str, Any]]  # SNAPSHOT_ENTRIES rows
    txn_index_entries: list[dict[str, Any]]  # TXN_INDEX_ENTRIES rows
    line_counts: dict[str, int]  # every LINE_KINDS key, blank and unknown lines included
    unknown_lines: list[tuple[int, str]]  # (1-based line number, text), the first MAX_REPORTED_UNKNOWN_LINES
    notes: list[str]
    transaction_log: list[dict[str, Any]] = field(default_factory=list)  # TRANSACTION_LOG rows
    # OFFSET_COMMITS rows of transactional batches, group metadata records (key version 2) included
    offset_commit_records: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Section:
    """The file a `Dumping` line (or a bare `Starting offset` line) opened."""

    path: str | None = None
    topic: str = ""
    partition: int = -1
    base_offset: int | None = None
    skipped: bool = False
    has_header: bool = False
    has_entries: bool = False
    next_position: int | None = 0  # where the bytes after the last printed batch start
    txn_index_entries: int = 0
    line_number: int = 0  # of the line that opened it
    suffix: str | None = None  # of the dumped file: `log`, `snapshot`, ...
    snapshot_entries: int = 0


@dataclass
class DeepGroup:
    """Consecutive 0.11-2.1 deep record lines of one batch."""

    section: Section
    position: int
    records: list[re.Match[str]] = field(default_factory=list)
