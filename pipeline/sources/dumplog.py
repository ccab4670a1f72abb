"""Batch rows from `kafka-dump-log.sh` / `DumpLogSegments` text output (spec §4), for every broker version.

Dump text is what operators can share when segment files cannot leave the cluster, so it is read with the
same contract as segments: one `batches` row per printed batch, with the fields the text does not print
left null (the broker never prints `attributes` or `baseTimestamp`, for instance).

Layouts understood (spec §4.2/§4.3):

* `.log` batch lines of 0.11-2.1 (shallow) and 2.2-4.x (always printed): `count:`, `isControl:` and
  `deleteHorizonMs:` optional, `isvalid` before `size:` or at the end, codec names in either spelling;
  legacy magic 0/1 entries (`offset: L position: ...`).
* Record lines: `| offset: ...` of 2.2-4.x (including the 2.8 long form and legacy records) and the
  0.11-2.1 deep-iteration lines that carry the producer fields. An end-transaction marker
  (`endTxnMarker: COMMIT|ABORT coordinatorEpoch: N`) or another control record sets `control_type` and
  `coordinator_epoch` of the batch row printed just before it.
* 0.11-2.1 deep dumps print no batch line. Their records are grouped into one approximate batch row per
  run of consecutive record lines with the same `position:` (the tool prints the batch position on every
  record); the row's last offset and last sequence are those of the last printed record, and the batch
  size, CRC and partition leader epoch stay null because the text does not hold them (`entry_note` says so).
* `Found N invalid bytes at the end of <file>`: a `truncated_tail` row.
* `.snapshot` lines of every version and `.txnindex` lines, returned as separate entry lists
  (`SNAPSHOT_ENTRIES` and `TXN_INDEX_ENTRIES` give their fields); `.index`/`.timeindex` lines are counted.
* Records of `__transaction_state` printed by `--transaction-log-decoder` (the text of 0.11-2.4 and 2.5-3.x,
  the JSON of 4.x) become `transaction_log` rows, and records of transactional `__consumer_offsets` batches
  printed by `--offsets-decoder` (`offset::` of 0.11-2.4, `offset_commit::` of 2.5-3.x, JSON of 3.5+) become
  offset-commit rows; what the text does not print stays null, and a record the text does not decode (a dump
  without the decoder option, a decoder error) gets a row with `decode_error`.

Text may hold several `Dumping <path>` sections; topic, partition and segment base offset come from the
dumped path (`.../<topic>-<partition>/<20 digits>.log`). Lines a listing numbered (`12 baseOffset: ...`, as
blog posts print code) are read without the number. Lines that fit no layout (shell prompts, prose, `...`)
are counted as `unknown` and reported with their line numbers; they are never dropped silently.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.sources.filesystems import resolve, shipped
from schemas.batches import BATCHES, STATUS_LEGACY, STATUS_OK, STATUS_TRUNCATED
from schemas.offset_commits import CONSUMER_OFFSETS_TOPIC, GROUP_METADATA_KEY_VERSION, OFFSET_COMMITS
from schemas.transaction_log import (
    TRANSACTION_LOG,
    TRANSACTION_STATE_TOPIC,
    TRANSACTION_STATES,
    V1_TAGGED_FIELD_DEFAULTS,
)

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
LINE_KINDS = (
    HEADER,
    BATCH,
    RECORD,
    CONTROL_RECORD,
    SNAPSHOT_ENTRY,
    TXN_INDEX_ENTRY,
    INDEX_ENTRY,
    TRUNCATED_TAIL,
    DIAGNOSTIC,
    BLANK,
    UNKNOWN,
)

MAX_REPORTED_UNKNOWN_LINES = 20
TXN_INDEX_ENTRY_BYTES = 34  # AbortedTxn: version, producerId, firstOffset, lastOffset, lastStableOffset
# The `Dumping` line opens every dump; a file without one in its first bytes is not a dump.
HEADER_PEEK_BYTES = 64 * 1024

# One producer entry of a `.snapshot` dump (spec §1.4, §4.3). Fields a version does not print are null.
SNAPSHOT_ENTRIES = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("snapshot_offset", T.LongType(), True),  # from the file name: the map end offset
        T.StructField("producer_id", T.LongType(), False),
        T.StructField("producer_epoch", T.IntegerType(), False),
        T.StructField("coordinator_epoch", T.IntegerType(), True),
        T.StructField("current_txn_first_offset", T.LongType(), True),  # null for None / OptionalLong.empty
        T.StructField("last_timestamp", T.LongType(), True),  # 0.11 and 3.3+ only
        T.StructField("first_sequence", T.IntegerType(), True),  # the cached batch, when one is printed
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("offset_delta", T.IntegerType(), True),
        T.StructField("timestamp", T.LongType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("line_number", T.IntegerType(), False),
    ]
)

# One aborted transaction of a `.txnindex` dump (spec §1.3).
TXN_INDEX_ENTRIES = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("segment_base_offset", T.LongType(), True),
        T.StructField("version", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), False),
        T.StructField("first_offset", T.LongType(), False),
        T.StructField("last_offset", T.LongType(), False),
        T.StructField("last_stable_offset", T.LongType(), False),
        T.StructField("position", T.LongType(), False),  # entries are 34 bytes, printed in file order
        T.StructField("source_file", T.StringType(), False),
        T.StructField("line_number", T.IntegerType(), False),
    ]
)

# What parse_dump saw in each file: the audit reports unknown lines instead of dropping them.
DUMP_REPORT = T.StructType(
    [
        T.StructField("source_file", T.StringType(), False),
        T.StructField("line_counts", T.MapType(T.StringType(), T.LongType(), False), False),
        T.StructField(
            "unknown_lines",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("line_number", T.IntegerType(), False),
                        T.StructField("text", T.StringType(), False),
                    ]
                ),
                False,
            ),
            False,
        ),
        T.StructField("notes", T.ArrayType(T.StringType(), False), False),
    ]
)

COMPRESSION_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# Magic 0 messages print `NoTimestampType: -1`: they have neither, and both columns stay null as for segments.
TIMESTAMP_TYPE_IDS = {"CreateTime": 0, "LogAppendTime": 1}
MARKER_CONTROL_TYPES = {"ABORT": 0, "COMMIT": 1}
# Control records 3.2+ prints as JSON instead of `controlType: NAME(id)` (ControlRecordType ids).
JSON_CONTROL_TYPES = {"LeaderChange": 2, "SnapshotHeader": 3, "SnapshotFooter": 4, "KRaftVersion": 5, "KRaftVoters": 6}

DEEP_GROUP_NOTE = (
    "rebuilt from {records} record line(s): kafka-dump-log 0.11-2.1 prints no batch line in deep mode, so "
    "last offset and last sequence are those of the last printed record and size, CRC and partition "
    "leader epoch are unknown"
)

_INT = r"-?\d+"
_TIMESTAMP = rf"(?P<ts_type>CreateTime|LogAppendTime|NoTimestampType): (?P<ts>{_INT})"
_BOOL = r"true|false"
# Everything a record line may print after its metadata: a control record or the data of a data record.
_RECORD_TAIL = (
    rf"(?P<tail>|"
    rf" endTxnMarker: (?P<marker>COMMIT|ABORT) coordinatorEpoch: (?P<coordinator_epoch>{_INT})|"
    rf" controlType: \w+\((?P<control_type>{_INT})\)|"
    rf" (?P<json_control>SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters) \{{.*\}}|"
    rf" (?P<leader_change>LeaderChange): \{{.*\}}|"
    rf" key: .*| payload: .*)"
)

_DUMPING = re.compile(r"Dumping (?P<path>.+)")
_STARTING_OFFSET = re.compile(rf"(?:Log starting|Starting) offset: (?P<offset>{_INT})")
_KRAFT_SNAPSHOT_HEADER = re.compile(rf"Snapshot end offset: {_INT}, epoch: {_INT}|KRaft bootstrap snapshot")

# 0.11-4.x batch line of a magic v2 batch (spec §4.2).
_V2_BATCH = re.compile(
    rf"baseOffset: (?P<base_offset>{_INT}) lastOffset: (?P<last_offset>{_INT})"
    rf"(?: count: (?P<count>{_INT}|null))?"
    rf" baseSequence: (?P<base_sequence>{_INT}) lastSequence: (?P<last_sequence>{_INT})"
    rf" producerId: (?P<producer_id>{_INT}) producerEpoch: (?P<producer_epoch>{_INT})"
    rf" partitionLeaderEpoch: (?P<leader_epoch>{_INT}) isTransactional: (?P<transactional>{_BOOL})"
    rf"(?: isControl: (?P<control>{_BOOL}))?"
    rf"(?: deleteHorizonMs: (?P<delete_horizon_field>OptionalLong\.empty|OptionalLong\[(?P<delete_horizon>{_INT})\]))?"
    rf" position: (?P<position>\d+) {_TIMESTAMP}(?: isvalid: (?P<valid_before_size>{_BOOL}))?"
    rf" size: (?P<size>\d+) magic: (?P<magic>\d+) compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+)"
    rf"(?: isvalid: (?P<valid>{_BOOL}))?"
)
# Legacy magic 0/1 entry: the v2 line of the same version without the producer fields.
_LEGACY_BATCH = re.compile(
    rf"offset: (?P<last_offset>{_INT}) position: (?P<position>\d+) {_TIMESTAMP}"
    rf"(?: isvalid: (?P<valid_before_size>{_BOOL}))?"
    rf" size: (?P<size>\d+) magic: (?P<magic>\d+) compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+)"
    rf"(?: isvalid: (?P<valid>{_BOOL}))?"
)
# 0.11-2.1 deep iteration: one line per record, no batch line (0.11.0 does not print producerEpoch).
_DEEP_RECORD = re.compile(
    rf"offset: (?P<offset>{_INT}) position: (?P<position>\d+) {_TIMESTAMP} isvalid: (?P<valid>{_BOOL})"
    rf" keysize: {_INT} valuesize: {_INT} magic: (?P<magic>\d+) compresscodec: (?P<codec>\w+)"
    rf"(?: producerId: (?P<producer_id>{_INT})(?: producerEpoch: (?P<producer_epoch>{_INT}))?"
    rf" sequence: (?P<sequence>{_INT}) isTransactional: (?P<transactional>{_BOOL}) headerKeys: \[.*?\]"
    rf"| crc: (?P<crc>\d+|null))"
    rf"{_RECORD_TAIL}"
)
# 2.2-2.7 and 3.0-4.x record line; legacy records print `crc: C isvalid: V` (2.x) or `isValid: V crc: C}` (3.x).
_PIPE_RECORD = re.compile(
    rf"\| offset: (?P<offset>{_INT}) {_TIMESTAMP} key[sS]ize: {_INT} value[sS]ize: {_INT}"
    rf"(?: sequence: (?P<sequence>{_INT}) headerKeys: \[.*?\]| crc: \S+ isvalid: \w+| isValid: \w+ crc: \S+\}})"
    rf"{_RECORD_TAIL}"
)
# 2.8 record line, which repeats the batch fields.
_PIPE_RECORD_2_8 = re.compile(
    rf"\| offset: (?P<offset>{_INT}) isValid: \w+ crc: \S+ keySize: {_INT} valueSize: {_INT} {_TIMESTAMP}"
    rf"(?: \w+: \S+)*?(?: sequence: (?P<sequence>{_INT}) headerKeys: \[.*?\])?"
    rf"{_RECORD_TAIL}"
)
# --skip-record-metadata: only key and payload remain (` payload: v` without the `|` when there is no key).
_RECORD_WITHOUT_METADATA = re.compile(r"\| key: .*|payload: .*")

_TXN_FIRST_OFFSET = r"(?P<txn_first_offset>None|Some\(-?\d+\)|OptionalLong\.empty|OptionalLong\[-?\d+\])"
_SNAPSHOT_0_11 = re.compile(
    rf"producerId: (?P<producer_id>{_INT}) producerEpoch: (?P<producer_epoch>{_INT})"
    rf" lastSequence: (?P<last_sequence>{_INT}) lastOffset: (?P<last_offset>{_INT})"
    rf" offsetDelta: (?P<offset_delta>{_INT}) lastTimestamp: (?P<last_timestamp>{_INT})"
    rf" coordinatorEpoch: (?P<coordinator_epoch>{_INT}) currentTxnFirstOffset: {_TXN_FIRST_OFFSET}"
)
_SNAPSHOT = re.compile(
    rf"producerId: (?P<producer_id>{_INT}) producerEpoch: (?P<producer_epoch>{_INT})"
    rf" coordinatorEpoch: (?P<coordinator_epoch>{_INT}) currentTxnFirstOffset: {_TXN_FIRST_OFFSET}"
    rf"(?: lastTimestamp: (?P<last_timestamp>{_INT}))?"
    rf"(?: cachedMetadata: Queue\((?P<queue>.*)\)"
    rf"| firstSequence: (?P<first_sequence>{_INT}) lastSequence: (?P<last_sequence>{_INT})"
    rf" lastOffset: (?P<last_offset>{_INT}) offsetDelta: (?P<offset_delta>{_INT}) timestamp: (?P<timestamp>{_INT}))?"
)
_BATCH_METADATA_1_0 = re.compile(
    rf"BatchMetadata\(firstSeq=(?P<first_sequence>{_INT}), lastSeq=(?P<last_sequence>{_INT}),"
    rf" firstOffset=(?P<first_offset>{_INT}), lastOffset=(?P<last_offset>{_INT}), timestamp=(?P<timestamp>{_INT})\)"
)
_TXN_INDEX = re.compile(
    rf"version: (?P<version>\d+) producerId: (?P<producer_id>{_INT}) firstOffset: (?P<first_offset>{_INT})"
    rf" lastOffset: (?P<last_offset>{_INT}) lastStableOffset: (?P<last_stable_offset>{_INT})"
)
_INDEX_ENTRY = re.compile(rf"offset: {_INT} position: \d+|timestamp: {_INT} offset: {_INT}")
_INVALID_BYTES = re.compile(r"Found (?P<count>\d+) invalid bytes at the end of (?P<file>.+)")
_DIAGNOSTIC = re.compile(
    r"\S+ is empty\.|\S+ passed sanity check\.|Ignoring unknown file .+|Non-consecutive offsets in .+"
    rf"|{_INT} is followed by {_INT}|Mismatches in :.+|Index offset: {_INT}, log offset: {_INT}"
    rf"|Found timestamp mismatch in :.+|Found out of order timestamp in :.+"
    rf"|Index timestamp: {_INT}, (?:log|Previously indexed) timestamp: {_INT}"
    rf"|The following indexed offsets are not found in the log\.|Indexed offset: {_INT}, found log offset: {_INT}"
)
_LINE_NUMBER_GUTTER = re.compile(r"\d+(?:\s+|$)")

_INT8, _INT16, _INT32, _INT64 = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) for bits in (8, 16, 32, 64))
_UINT32 = (0, (1 << 32) - 1)
# The Kafka type of every number the line patterns capture, by group name: a printed number outside it cannot
# come from the tool (and would not fit its column), so the line is not read as the layout it resembles.
_GROUP_RANGES = {
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
        _INT32,
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
        _INT64,
    ),
}
_MAX_INT64_DIGITS = len(str(1 << 63))

# `<topic>-<partition>[.<id>-delete|-future|-stray]/<20 digits>[-<epoch>].<suffix>`
_DUMPED_FILE = re.compile(r"(?:^|.*[/\\])(?P<base_offset>\d{20})(?:-\d+)?\.(?P<suffix>\w+)")
_PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)(?:\.\w+-(?:delete|future|stray))?")


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
class _Section:
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


@dataclass
class _DeepGroup:
    """Consecutive 0.11-2.1 deep record lines of one batch."""

    section: _Section
    position: int
    records: list[re.Match[str]] = field(default_factory=list)


def _int(text: str | None) -> int | None:
    return None if text is None or text == "null" else int(text)


def _in_range(text: str, bounds: tuple[int, int]) -> bool:
    """Whether a printed integer lies in `bounds`, without converting runs of digits int() refuses (4300+)."""
    digits = text.lstrip("-").lstrip("0")
    if len(digits) > _MAX_INT64_DIGITS:
        return False
    value = int(digits or "0") * (-1 if text.startswith("-") else 1)
    return bounds[0] <= value <= bounds[1]


def _out_of_range(match: re.Match[str]) -> str | None:
    """The first number a matched line prints outside its Kafka type (cached batches of a snapshot line
    included), described; None when every number fits."""
    groups = [match.groupdict()]
    groups += [cached.groupdict() for cached in _BATCH_METADATA_1_0.finditer(groups[0].get("queue") or "")]
    for fields in groups:
        for name, text in fields.items():
            number = re.search(_INT, text) if name in _GROUP_RANGES and text is not None else None
            if number and not _in_range(number.group(), _GROUP_RANGES[name]):
                low, high = _GROUP_RANGES[name]
                return f"{name} {number.group()[:40]} is outside [{low}, {high}]"
    return None


def _int32_or_none(value: int) -> int | None:
    """An offset delta from two printed offsets; None when it does not fit Kafka's int32 delta."""
    return value if _INT32[0] <= value <= _INT32[1] else None


def _set_last_offset_delta(row: dict[str, Any], last_offset: int, base_offset: int) -> None:
    """`last_offset_delta` of a batch row from its printed offsets, or null and a note when they are too far apart."""
    row["last_offset_delta"] = _int32_or_none(last_offset - base_offset)
    if row["last_offset_delta"] is None:
        _add_note(row, f"offsets {base_offset}..{last_offset} are too far apart for one batch")


def _bool(text: str | None) -> bool | None:
    return None if text is None else text == "true"


def _txn_first_offset(text: str) -> int | None:
    number = re.search(_INT, text)
    return int(number.group()) if number else None


def _empty_batch_row(section: _Section, source_file: str, position: int) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(BATCHES.fieldNames())
    row.update(
        topic=section.topic,
        partition=section.partition,
        segment_base_offset=section.base_offset if section.base_offset is not None else -1,
        position=position,
        source_file=source_file,
        source_format=SOURCE_FORMAT,
    )
    return row


def _control_fields(match: re.Match[str]) -> tuple[int | None, int | None]:
    """(control_type, coordinator_epoch) of a record line's tail; (None, None) for a data record."""
    if match.group("marker"):
        return MARKER_CONTROL_TYPES[match.group("marker")], int(match.group("coordinator_epoch"))
    if match.group("control_type"):
        return int(match.group("control_type")), None
    name = match.group("json_control") or match.group("leader_change")
    if name:
        return JSON_CONTROL_TYPES[name], None
    return None, None


def _is_control_record(match: re.Match[str]) -> bool:
    return "tail" in match.re.groupindex and _control_fields(match)[0] is not None


def _add_note(row: dict[str, Any], note: str) -> None:
    row["entry_note"] = f"{row['entry_note']}; {note}" if row["entry_note"] else note


def _fill_codec_fields(row: dict[str, Any], match: re.Match[str]) -> None:
    row["magic"] = int(match.group("magic"))
    row["compression"] = COMPRESSION_IDS.get(match.group("codec").lower())
    row["timestamp_type"] = TIMESTAMP_TYPE_IDS.get(match.group("ts_type"))
    if row["compression"] is None:
        _add_note(row, f"unknown compression codec {match.group('codec')}")


def _timestamp(match: re.Match[str]) -> int | None:
    return None if match.group("ts_type") == "NoTimestampType" else int(match.group("ts"))


def _holds_offset(row: dict[str, Any], offset: int) -> bool:
    """Whether a record at `offset` belongs to the batch row (a compressed legacy entry's first offset is open)."""
    if row["last_offset"] is None or offset > row["last_offset"]:
        return False
    return row["base_offset"] is None or offset >= row["base_offset"]


def _deep_record_batch(group: _DeepGroup, match: re.Match[str]) -> dict[str, Any]:
    """What a 0.11-2.1 deep record line says about its batch, in `batches` column names."""
    return {
        "base_offset": int(group.records[0].group("offset")),
        "position": group.position,
        "max_timestamp": None,
        "partition_leader_epoch": None,
        "is_transactional": _bool(match.group("transactional")),
        "compression": COMPRESSION_IDS.get(match.group("codec").lower()),
        "producer_id": _int(match.group("producer_id")),
        "producer_epoch": _int(match.group("producer_epoch")),
    }


# --- --transaction-log-decoder and --offsets-decoder output ---------------------------------------------

DELETED_VALUE = "<DELETE>"  # the payload the decoders print for a tombstone
_KEY_PREFIX = " key: "
_PAYLOAD_PREFIX = " payload: "
_JSON = json.JSONDecoder()
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}

# 2.5-3.x text; 0.11-2.4 printed no `transaction_metadata::` prefix and the partitions as `Set(t-0, u-1)`.
_TXN_LOG_TEXT_KEY = re.compile(r"(?:transaction_metadata::)?transactionalId=(?P<transactional_id>.*)")
_TXN_LOG_TEXT_VALUE = re.compile(
    rf"producerId:(?P<producer_id>{_INT}),producerEpoch:(?P<producer_epoch>{_INT}),state=(?P<state>\w+)"
    rf",partitions=(?:\[(?P<list>[^\]]*)\]|Set\((?P<set>[^)]*)\))"
    rf",txnLastUpdateTimestamp=(?P<last_update>{_INT}),txnTimeoutMs=(?P<timeout>{_INT})"
)
# 2.5-3.4 `offset_commit::group=G,partition=T-P` / `offset=N[,metadata=M]`; 0.11-2.4 `offset::G:T:P` / `N[:M]`.
_OFFSET_COMMIT_TEXT_KEY = re.compile(r"offset_commit::group=(?P<group>.*),partition=(?P<topic>.+)-(?P<partition>\d+)")
_OFFSET_COMMIT_TEXT_VALUE = re.compile(rf"offset=(?P<offset>{_INT})(?:,metadata=(?P<metadata>.*))?")
_OLD_OFFSET_TEXT_KEY = re.compile(r"offset::(?P<group>.*):(?P<topic>[^:]+):(?P<partition>\d+)")
_OLD_OFFSET_TEXT_VALUE = re.compile(rf"(?P<offset>{_INT})(?::(?P<metadata>.*))?")
_GROUP_METADATA_TEXT_KEY = re.compile(r"group_metadata::group=.*")
_UNKNOWN_KEY_TEXT = re.compile(
    rf"unknown::version=(?P<version>{_INT})|Unknown record type (?P<type>{_INT}) at offset {_INT}, skipping\."
)
_DECODER_ERROR_TEXT = re.compile(rf"Error at offset {_INT}, skipping\. (?P<reason>.*)")
_TOPIC_PARTITION = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)")


class _TextError(ValueError):
    """A printed key or payload that does not say what the decoder prints; the message becomes decode_error."""


def _key_and_payload(tail: str) -> tuple[str | None, str | None]:
    """The printed key and payload of a record line's tail; None for what is not printed.

    A JSON key ends where its JSON ends, so a ` payload: ` inside it does not split it.
    """
    if tail.startswith(_PAYLOAD_PREFIX):
        return None, tail[len(_PAYLOAD_PREFIX) :]
    if not tail.startswith(_KEY_PREFIX):
        return None, None
    text = tail[len(_KEY_PREFIX) :]
    if text.startswith("{"):
        try:
            end = _JSON.raw_decode(text)[1]
        except ValueError:
            end = None
        if end == len(text):
            return text, None
        if end is not None and text.startswith(_PAYLOAD_PREFIX, end):
            return text[:end], text[end + len(_PAYLOAD_PREFIX) :]
    key, separator, payload = text.partition(_PAYLOAD_PREFIX)
    return key, payload if separator else None


def _decoded_text(
    fields_of: Callable[[str, str | None, dict[str, Any]], None], key: str | None, payload: str | None
) -> dict[str, Any]:
    """The columns `fields_of` reads from a printed key and payload; a fault keeps what came before it."""
    fields: dict[str, Any] = {}
    try:
        if key is None and payload is None:
            raise _TextError("the dump does not print the record (no --print-data-log or decoder option)")
        if key is None:
            raise _TextError("record has no key")
        unknown = _UNKNOWN_KEY_TEXT.fullmatch(key)
        if unknown:
            fields["key_version"] = _checked(unknown.group("version") or unknown.group("type"), "int16", "key")
            raise _TextError(f"kafka-dump-log printed {key!r}")
        error = _DECODER_ERROR_TEXT.fullmatch(key)
        if error:
            raise _TextError(f"kafka-dump-log could not decode the record: {error.group('reason')}")
        fields_of(key, payload, fields)
    except _TextError as exc:
        fields["decode_error"] = str(exc)
    return fields


def _checked(value: Any, kind: str, name: str) -> int:
    """An integer of a Kafka type from text or JSON; anything else is a decode error, not a crash later."""
    bits = _INT_BITS[kind]
    bounds = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if isinstance(value, str) and re.fullmatch(_INT, value):
        if not _in_range(value, bounds):
            raise _TextError(f"{name} {value[:60]} is not an {kind}")
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not bounds[0] <= value <= bounds[1]:
        raise _TextError(f"{name} {value!r} is not an {kind}")
    return value


def _json_object(text: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise _TextError(f"{name} is not JSON: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("data"), dict):
        raise _TextError(f"{name} is not a decoder JSON object with a `data` object")
    return value


def _json_field(data: dict[str, Any], name: str, kind: str) -> Any:
    if name not in data:
        raise _TextError(f"{name} is not printed")
    value = data[name]
    if kind == "string":
        if not isinstance(value, str):
            raise _TextError(f"{name} {value!r} is not a string")
        return value
    return _checked(value, kind, name)


def _printed_version(wrapper: dict[str, Any], name: str) -> int:
    """The version a decoder JSON wrapper prints: `version` for values (`type` before apache/kafka#18505)."""
    return _checked(wrapper.get("version", wrapper.get("type")), "int16", f"{name} version")


def _state(value: Any) -> tuple[int, str | None]:
    """(state id, name) from a printed state: its name, or the id 4.x printed before KAFKA-20712."""
    if isinstance(value, str) and value in TRANSACTION_STATES:
        return TRANSACTION_STATES.index(value), value
    state = _checked(value, "int8", "state")
    return state, TRANSACTION_STATES[state] if 0 <= state < len(TRANSACTION_STATES) else None


def _text_partitions(printed: str) -> list[dict[str, Any]]:
    """`[t-0,u-1]` / `Set(t-0, u-1)` as the `partitions` column: one entry per topic, in printed order."""
    by_topic: dict[str, list[int]] = {}
    for item in filter(None, (part.strip() for part in printed.split(","))):
        topic_partition = _TOPIC_PARTITION.fullmatch(item)
        if topic_partition is None:
            raise _TextError(f"partition {item!r} is not <topic>-<partition>")
        partition = _checked(topic_partition.group("partition"), "int32", "partition")
        by_topic.setdefault(topic_partition.group("topic"), []).append(partition)
    return [{"topic": topic, "partitions": partitions} for topic, partitions in by_topic.items()]


def _transaction_log_fields(key: str, payload: str | None, fields: dict[str, Any]) -> None:
    if key.startswith("{"):
        _json_transaction_log_fields(key, payload, fields)
        return
    printed_key = _TXN_LOG_TEXT_KEY.fullmatch(key)
    if printed_key is None:
        raise _TextError("key is not --transaction-log-decoder output")
    fields.update(key_version=0, transactional_id=printed_key.group("transactional_id"))
    fields["is_tombstone"] = payload == DELETED_VALUE
    if payload == DELETED_VALUE:
        return
    value = _TXN_LOG_TEXT_VALUE.fullmatch(payload or "")
    if value is None:
        raise _TextError("payload is not --transaction-log-decoder output")
    state, state_name = _state(value.group("state"))
    fields.update(
        producer_id=_checked(value.group("producer_id"), "int64", "producerId"),
        producer_epoch=_checked(value.group("producer_epoch"), "int16", "producerEpoch"),
        state=state,
        state_name=state_name,
        partitions=_text_partitions(value.group("list") if value.group("set") is None else value.group("set")),
        last_update_timestamp_ms=_checked(value.group("last_update"), "int64", "txnLastUpdateTimestamp"),
        transaction_timeout_ms=_checked(value.group("timeout"), "int32", "txnTimeoutMs"),
    )


def _json_transaction_log_fields(key: str, payload: str | None, fields: dict[str, Any]) -> None:
    """4.x JSON: `{"type":"0","data":{"transactionalId":...}}` and `{"version":"1","data":{...}}`."""
    printed_key = _json_object(key, "key")
    fields["key_version"] = _checked(printed_key.get("type"), "int16", "key type")
    if fields["key_version"] != 0:
        raise _TextError(f"key type {fields['key_version']} is not a TransactionLogKey (0)")
    fields["transactional_id"] = _json_field(printed_key["data"], "transactionalId", "string")
    fields["is_tombstone"] = payload == DELETED_VALUE
    if payload == DELETED_VALUE:
        return
    value = _json_object(payload or "", "payload")
    data = value["data"]
    version = fields["value_version"] = _printed_version(value, "value")
    if version >= 1:
        fields.update(V1_TAGGED_FIELD_DEFAULTS)
    fields["producer_id"] = _json_field(data, "producerId", "int64")
    fields["producer_epoch"] = _json_field(data, "producerEpoch", "int16")
    fields["transaction_timeout_ms"] = _json_field(data, "transactionTimeoutMs", "int32")
    if "transactionStatus" not in data:
        raise _TextError("transactionStatus is not printed")
    fields["state"], fields["state_name"] = _state(data["transactionStatus"])
    fields["partitions"] = _json_partitions(data.get("transactionPartitions"))
    fields["last_update_timestamp_ms"] = _json_field(data, "transactionLastUpdateTimestampMs", "int64")
    fields["start_timestamp_ms"] = _json_field(data, "transactionStartTimestampMs", "int64")
    for column, name, kind in (
        ("previous_producer_id", "previousProducerId", "int64"),
        ("next_producer_id", "nextProducerId", "int64"),
        ("client_transaction_version", "clientTransactionVersion", "int16"),
        ("next_producer_epoch", "nextProducerEpoch", "int16"),
    ):
        if name in data:
            fields[column] = _json_field(data, name, kind)


def _json_partitions(printed: Any) -> list[dict[str, Any]] | None:
    if printed is None:
        return None
    if not isinstance(printed, list) or not all(isinstance(entry, dict) for entry in printed):
        raise _TextError("transactionPartitions is not a list of objects")
    partitions = []
    for entry in printed:
        ids = entry.get("partitionIds")
        if not isinstance(ids, list):
            raise _TextError("partitionIds is not a list")
        partitions.append(
            {
                "topic": _json_field(entry, "topic", "string"),
                "partitions": [_checked(partition, "int32", "partition id") for partition in ids],
            }
        )
    return partitions


def _offset_commit_fields(key: str, payload: str | None, fields: dict[str, Any]) -> None:
    if key.startswith("{"):
        _json_offset_commit_fields(key, payload, fields)
        return
    if _GROUP_METADATA_TEXT_KEY.fullmatch(key):
        fields["key_version"] = GROUP_METADATA_KEY_VERSION
        return
    printed_key = _OFFSET_COMMIT_TEXT_KEY.fullmatch(key)
    value_pattern = _OFFSET_COMMIT_TEXT_VALUE
    if printed_key is None:
        printed_key, value_pattern = _OLD_OFFSET_TEXT_KEY.fullmatch(key), _OLD_OFFSET_TEXT_VALUE
    if printed_key is None:
        raise _TextError("key is not --offsets-decoder output")
    fields.update(
        group=printed_key.group("group"),
        committed_topic=printed_key.group("topic"),
        committed_partition=_checked(printed_key.group("partition"), "int32", "partition"),
        is_tombstone=payload == DELETED_VALUE,
    )
    if payload == DELETED_VALUE:
        return
    value = value_pattern.fullmatch(payload or "")
    if value is None:
        raise _TextError("payload is not --offsets-decoder output")
    # The decoders print the metadata only when it is not empty.
    fields.update(
        committed_offset=_checked(value.group("offset"), "int64", "offset"), metadata=value.group("metadata") or ""
    )


def _json_offset_commit_fields(key: str, payload: str | None, fields: dict[str, Any]) -> None:
    """3.5+ JSON: `{"type":"1","data":{"group","topic","partition"}}` and `{"version":"3","data":{...}}`;
    0.11-2.4 printed a group metadata key as `{"metadata":"<group>"}`."""
    try:
        legacy_group_key = json.loads(key)
    except ValueError:
        legacy_group_key = None
    if isinstance(legacy_group_key, dict) and set(legacy_group_key) == {"metadata"}:
        fields["key_version"] = GROUP_METADATA_KEY_VERSION
        return
    printed_key = _json_object(key, "key")
    version = fields["key_version"] = _checked(printed_key.get("type"), "int16", "key type")
    if version == GROUP_METADATA_KEY_VERSION:
        return
    if version not in (0, 1):
        raise _TextError(f"key type {version} is not an OffsetCommitKey (0, 1) or GroupMetadataKey (2)")
    data = printed_key["data"]
    fields["group"] = _json_field(data, "group", "string")
    fields["committed_topic"] = _json_field(data, "topic", "string")
    fields["committed_partition"] = _json_field(data, "partition", "int32")
    fields["is_tombstone"] = payload == DELETED_VALUE
    if payload == DELETED_VALUE:
        return
    value = _json_object(payload or "", "payload")
    data = value["data"]
    version = fields["value_version"] = _printed_version(value, "value")
    fields["committed_offset"] = _json_field(data, "offset", "int64")
    if version >= 3:
        fields["leader_epoch"] = _json_field(data, "leaderEpoch", "int32")
    fields["metadata"] = _json_field(data, "metadata", "string")
    fields["commit_timestamp"] = _json_field(data, "commitTimestamp", "int64")
    if version == 1:
        fields["expire_timestamp"] = _json_field(data, "expireTimestamp", "int64")


class _DumpParser:
    """Line-by-line state machine behind parse_dump: the open section and the rows record lines amend."""

    def __init__(self, source_file: str, skip_dir_suffixes: Sequence[str]) -> None:
        self.source_file = source_file
        self.skip_dir_suffixes = tuple(skip_dir_suffixes)
        self.batches: list[dict[str, Any]] = []
        self.snapshot_entries: list[dict[str, Any]] = []
        self.txn_index_entries: list[dict[str, Any]] = []
        self.transaction_log: list[dict[str, Any]] = []
        self.offset_commit_records: list[dict[str, Any]] = []
        self.line_counts: Counter[str] = Counter(dict.fromkeys(LINE_KINDS, 0))
        self.unknown_lines: list[tuple[int, str]] = []
        self.notes: list[str] = []
        self.section = _Section()
        self.last_batch: dict[str, Any] | None = None  # the row the next record lines belong to
        self.record_timestamps: list[int | None] = []  # of the record lines printed under a v2 batch line
        self.deep_group: _DeepGroup | None = None
        self.line_handlers: list[tuple[re.Pattern[str], str, Callable[[int, re.Match[str]], None]]] = [
            (_PIPE_RECORD, RECORD, self._on_pipe_record),
            (_PIPE_RECORD_2_8, RECORD, self._on_pipe_record),
            (_RECORD_WITHOUT_METADATA, RECORD, self._ignore),
            (_V2_BATCH, BATCH, self._on_v2_batch),
            (_DEEP_RECORD, RECORD, self._on_deep_record),
            (_LEGACY_BATCH, BATCH, self._on_legacy_batch),
            (_INDEX_ENTRY, INDEX_ENTRY, self._ignore),
            (_SNAPSHOT, SNAPSHOT_ENTRY, self._on_snapshot_entry),
            (_SNAPSHOT_0_11, SNAPSHOT_ENTRY, self._on_snapshot_entry),
            (_TXN_INDEX, TXN_INDEX_ENTRY, self._on_txn_index_entry),
            (_DUMPING, HEADER, self._on_dumping),
            (_STARTING_OFFSET, HEADER, self._on_starting_offset),
            (_KRAFT_SNAPSHOT_HEADER, HEADER, self._ignore),
            (_INVALID_BYTES, TRUNCATED_TAIL, self._on_invalid_bytes),
            (_DIAGNOSTIC, DIAGNOSTIC, self._ignore),
        ]

    def parse(self, text: str) -> DumpParse:
        for line_number, raw in enumerate(text.splitlines(), start=1):
            self._feed(line_number, raw.strip())
        self._flush_deep_group()
        return DumpParse(
            batches=self.batches,
            snapshot_entries=self.snapshot_entries,
            txn_index_entries=self.txn_index_entries,
            line_counts=dict(self.line_counts),
            unknown_lines=self.unknown_lines,
            notes=self.notes,
            transaction_log=self.transaction_log,
            offset_commit_records=self.offset_commit_records,
        )

    def _feed(self, line_number: int, line: str) -> None:
        if not line:
            self.line_counts[BLANK] += 1
            return
        if self._classify_line(line_number, line):
            return
        gutter = _LINE_NUMBER_GUTTER.match(line)
        if gutter:
            rest = line[gutter.end() :]
            if not rest:
                self.line_counts[BLANK] += 1
                return
            if self._classify_line(line_number, rest):
                return
        self.line_counts[UNKNOWN] += 1
        if len(self.unknown_lines) < MAX_REPORTED_UNKNOWN_LINES:
            self.unknown_lines.append((line_number, line))

    def _classify_line(self, line_number: int, line: str) -> bool:
        for pattern, kind, handler in self.line_handlers:
            match = pattern.fullmatch(line)
            if match is None:
                continue
            out_of_range = _out_of_range(match)
            if out_of_range:
                self.notes.append(f"line {line_number}: {out_of_range}; not read as a {kind} line")
                continue
            self.line_counts[CONTROL_RECORD if _is_control_record(match) else kind] += 1
            handler(line_number, match)
            return True
        return False

    def _ignore(self, line_number: int, match: re.Match[str]) -> None:
        """Lines that are recognised and counted but carry nothing for the tables."""

    # --- sections -------------------------------------------------------------------------------------

    def _open_section(self, line_number: int, path: str | None) -> None:
        self._flush_deep_group()
        self.section = _Section(path=path)
        self.last_batch = None
        if path is None:
            return
        dumped = _DUMPED_FILE.fullmatch(path)
        if dumped is None or not _in_range(dumped.group("base_offset"), _INT64):
            return
        self.section.base_offset = int(dumped.group("base_offset"))
        parts = re.split(r"[/\\]", path)
        directory = parts[-2] if len(parts) > 1 else ""
        partition_dir = _PARTITION_DIR.fullmatch(directory)
        if partition_dir and _in_range(partition_dir.group("partition"), _INT32):
            self.section.topic = partition_dir.group("topic")
            self.section.partition = int(partition_dir.group("partition"))
        if directory and directory.endswith(self.skip_dir_suffixes):
            self.section.skipped = True
            self.notes.append(f"line {line_number}: {path} is in a skipped directory; its entries are not loaded")

    def _claim_section(self, line_number: int) -> _Section:
        """The section an entry belongs to; notes once when the dump does not say which partition it is."""
        section = self.section
        if not section.has_entries:
            section.has_entries = True
            if section.partition == -1:
                where = (
                    f"{section.path} names no <topic>-<partition> directory"
                    if section.path
                    else "no `Dumping` line names the dumped file"
                )
                self.notes.append(f"line {line_number}: {where}; entries get topic '' and partition -1")
        return section

    def _on_dumping(self, line_number: int, match: re.Match[str]) -> None:
        self._open_section(line_number, match.group("path"))

    def _on_starting_offset(self, line_number: int, match: re.Match[str]) -> None:
        # A second header without a `Dumping` line means output of another file was pasted in.
        if self.section.has_header or self.section.has_entries:
            self._open_section(line_number, None)
        self.section.has_header = True
        if self.section.base_offset is None:
            self.section.base_offset = int(match.group("offset"))

    # --- batches --------------------------------------------------------------------------------------

    def _append_batch(self, row: dict[str, Any], section: _Section) -> None:
        if not section.skipped:
            self.batches.append(row)

    def _on_v2_batch(self, line_number: int, match: re.Match[str]) -> None:
        self._flush_deep_group()
        section = self._claim_section(line_number)
        position, size = int(match.group("position")), int(match.group("size"))
        base_offset, last_offset = int(match.group("base_offset")), int(match.group("last_offset"))
        delete_horizon = match.group("delete_horizon")
        row = _empty_batch_row(section, self.source_file, position)
        row.update(
            producer_id=int(match.group("producer_id")),
            base_offset=base_offset,
            last_offset=last_offset,
            producer_epoch=int(match.group("producer_epoch")),
            base_sequence=int(match.group("base_sequence")),
            last_sequence=int(match.group("last_sequence")),
            is_transactional=_bool(match.group("transactional")),
            is_control=_bool(match.group("control")),
            record_count=_int(match.group("count")),
            max_timestamp=_timestamp(match),
            partition_leader_epoch=int(match.group("leader_epoch")),
            has_delete_horizon=None if match.group("delete_horizon_field") is None else delete_horizon is not None,
            base_timestamp=_int(delete_horizon),  # the field holds the delete horizon when the bit is set
            batch_length=size - 12,
            crc=int(match.group("crc")),
            crc_valid=_bool(match.group("valid") or match.group("valid_before_size")),
            entry_status=STATUS_OK,
            size_bytes=size,
        )
        _set_last_offset_delta(row, last_offset, base_offset)
        _fill_codec_fields(row, match)
        self._append_batch(row, section)
        self.last_batch = row
        self.record_timestamps = []
        section.next_position = position + size

    def _on_legacy_batch(self, line_number: int, match: re.Match[str]) -> None:
        self._flush_deep_group()
        section = self._claim_section(line_number)
        position, size = int(match.group("position")), int(match.group("size"))
        last_offset = int(match.group("last_offset"))
        row = _empty_batch_row(section, self.source_file, position)
        _fill_codec_fields(row, match)
        # An uncompressed legacy entry is one message; a compressed wrapper carries its last inner offset.
        uncompressed = row["compression"] == 0
        row.update(
            base_offset=last_offset if uncompressed else None,
            last_offset=last_offset,
            last_offset_delta=0 if uncompressed else None,
            record_count=1 if uncompressed else None,
            is_transactional=False,  # legacy entries never carry producer state (spec §1.1.6)
            is_control=False,
            max_timestamp=_timestamp(match),
            batch_length=size - 12,
            crc=int(match.group("crc")),
            crc_valid=_bool(match.group("valid") or match.group("valid_before_size")),
            entry_status=STATUS_LEGACY,
            size_bytes=size,
        )
        self._append_batch(row, section)
        self.last_batch = row
        section.next_position = position + size

    def _on_pipe_record(self, line_number: int, match: re.Match[str]) -> None:
        row = self.last_batch
        offset = int(match.group("offset"))
        self._on_coordinator_record(match, row if row is not None and _holds_offset(row, offset) else None)
        control_type, coordinator_epoch = _control_fields(match)
        if row is None or not _holds_offset(row, offset):
            if control_type is not None:
                self.notes.append(f"line {line_number}: control record at offset {offset} follows no batch line")
            return
        if row["entry_status"] == STATUS_LEGACY and row["compression"] != 0:
            # Deep iteration of a compressed legacy wrapper: its inner messages give count and first offset.
            row["record_count"] = (row["record_count"] or 0) + 1
            if row["base_offset"] is None:
                row["base_offset"] = offset
                _set_last_offset_delta(row, row["last_offset"], offset)
        if control_type is not None:
            row["control_type"] = control_type
            row["coordinator_epoch"] = coordinator_epoch
        if row["entry_status"] == STATUS_OK:
            self._on_record_timestamp(row, _timestamp(match))

    def _on_record_timestamp(self, row: dict[str, Any], timestamp: int | None) -> None:
        """`max_record_timestamp` of a v2 batch row, once its lines have shown every record's timestamp."""
        self.record_timestamps.append(timestamp)
        shown = len(self.record_timestamps) == row["record_count"] and None not in self.record_timestamps
        row["max_record_timestamp"] = max(self.record_timestamps) if shown else None

    def _on_deep_record(self, line_number: int, match: re.Match[str]) -> None:
        section = self.section
        position = int(match.group("position"))
        group = self.deep_group
        if group is None or group.section is not section or group.position != position:
            self._flush_deep_group()
            self._claim_section(line_number)
            group = self.deep_group = _DeepGroup(section=section, position=position)
        group.records.append(match)
        self._on_coordinator_record(match, _deep_record_batch(group, match))

    # --- coordinator-topic records --------------------------------------------------------------------

    def _on_coordinator_record(self, match: re.Match[str], batch: dict[str, Any] | None) -> None:
        """A data record of `__transaction_state`, or of a transactional `__consumer_offsets` batch, as a row.

        `batch` is the row of the batch holding the record, None when no batch line was printed for it.
        """
        section = self.section
        if section.skipped or section.topic not in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
            return
        if _control_fields(match)[0] is not None:
            return
        if section.topic == CONSUMER_OFFSETS_TOPIC and (batch is None or not batch["is_transactional"]):
            return
        key, payload = _key_and_payload(match.group("tail"))
        row: dict[str, Any] = {
            "topic": section.topic,
            "partition": section.partition,
            "record_offset": int(match.group("offset")),
            "segment_base_offset": section.base_offset,
            "source_file": self.source_file,
            "source_format": SOURCE_FORMAT,
        }
        if batch is not None:
            row.update(batch_base_offset=batch["base_offset"], position=batch["position"])
        if section.topic == TRANSACTION_STATE_TOPIC:
            row["record_timestamp"] = _timestamp(match)
            if batch is not None:
                row.update(
                    batch_timestamp=batch["max_timestamp"],
                    partition_leader_epoch=batch["partition_leader_epoch"],
                    batch_is_transactional=batch["is_transactional"],
                    batch_compression=batch["compression"],
                    batch_producer_id=batch["producer_id"],
                )
            row.update(_decoded_text(_transaction_log_fields, key, payload))
            self.transaction_log.append(row)
        else:
            row.update(producer_id=batch["producer_id"], producer_epoch=batch["producer_epoch"])
            row.update(_decoded_text(_offset_commit_fields, key, payload))
            self.offset_commit_records.append(row)

    def _flush_deep_group(self) -> None:
        group, self.deep_group = self.deep_group, None
        if group is None:
            return
        first, last = group.records[0], group.records[-1]
        row = _empty_batch_row(group.section, self.source_file, group.position)
        _fill_codec_fields(row, first)
        base_offset, last_offset = int(first.group("offset")), int(last.group("offset"))
        magic = row["magic"]
        row.update(
            base_offset=base_offset,
            last_offset=last_offset,
            record_count=len(group.records),
            max_timestamp=_timestamp(max(group.records, key=lambda record: int(record.group("ts")))),
            entry_status=STATUS_OK if magic >= 2 else STATUS_LEGACY,
        )
        _set_last_offset_delta(row, last_offset, base_offset)
        _add_note(row, DEEP_GROUP_NOTE.format(records=len(group.records)))
        if magic >= 2:
            row.update(
                producer_id=_int(first.group("producer_id")),
                producer_epoch=_int(first.group("producer_epoch")),
                base_sequence=_int(first.group("sequence")),
                last_sequence=_int(last.group("sequence")),
                is_transactional=_bool(first.group("transactional")),
                is_control=False,
                max_record_timestamp=row["max_timestamp"],  # the row holds exactly the printed records
            )
        else:
            # v2 records print a constant `isvalid: true`; only legacy messages carry their own CRC.
            row.update(
                is_transactional=False,
                is_control=False,
                crc_valid=all(record.group("valid") == "true" for record in group.records),
            )
            if row["compression"] == 0:  # one message, whose CRC is the entry's
                row["crc"] = _int(first.group("crc"))
        for record in group.records:
            control_type, coordinator_epoch = _control_fields(record)
            if control_type is not None:
                row.update(is_control=True, control_type=control_type, coordinator_epoch=coordinator_epoch)
        self._append_batch(row, group.section)
        self.last_batch = None
        group.section.next_position = None

    def _on_invalid_bytes(self, line_number: int, match: re.Match[str]) -> None:
        self._flush_deep_group()
        section = self._claim_section(line_number)
        count = int(match.group("count"))
        position = section.next_position if section.next_position is not None else -1
        row = _empty_batch_row(section, self.source_file, position)
        note = f"{count} invalid bytes at the end of {match.group('file')}"
        if position == -1:
            note += "; their position is not printed in deep dumps of 0.11-2.1"
        row.update(entry_status=STATUS_TRUNCATED, size_bytes=count, entry_note=note)
        self._append_batch(row, section)
        self.last_batch = None

    # --- snapshot and transaction index entries -------------------------------------------------------

    def _on_snapshot_entry(self, line_number: int, match: re.Match[str]) -> None:
        section = self._claim_section(line_number)
        groups = match.groupdict()
        entry: dict[str, Any] = {
            "topic": section.topic,
            "partition": section.partition,
            "snapshot_offset": section.base_offset,
            "producer_id": int(groups["producer_id"]),
            "producer_epoch": int(groups["producer_epoch"]),
            "coordinator_epoch": _int(groups["coordinator_epoch"]),
            "current_txn_first_offset": _txn_first_offset(groups["txn_first_offset"]),
            "last_timestamp": _int(groups["last_timestamp"]),
            "first_sequence": _int(groups.get("first_sequence")),
            "last_sequence": _int(groups["last_sequence"]),
            "last_offset": _int(groups["last_offset"]),
            "offset_delta": _int(groups["offset_delta"]),
            "timestamp": _int(groups.get("timestamp")),
            "source_file": self.source_file,
            "line_number": line_number,
        }
        if match.re is _SNAPSHOT_0_11:
            entry["timestamp"] = entry["last_timestamp"]  # 0.11 keeps one timestamp: the last batch's
        cached = list(_BATCH_METADATA_1_0.finditer(groups.get("queue") or ""))
        if cached:
            newest = cached[-1]  # the one batch a snapshot file persists
            entry.update(
                first_sequence=int(newest.group("first_sequence")),
                last_sequence=int(newest.group("last_sequence")),
                last_offset=int(newest.group("last_offset")),
                offset_delta=_int32_or_none(int(newest.group("last_offset")) - int(newest.group("first_offset"))),
                timestamp=int(newest.group("timestamp")),
            )
        if not section.skipped:
            self.snapshot_entries.append(entry)

    def _on_txn_index_entry(self, line_number: int, match: re.Match[str]) -> None:
        section = self._claim_section(line_number)
        entry = {
            "topic": section.topic,
            "partition": section.partition,
            "segment_base_offset": section.base_offset,
            **{name: int(value) for name, value in match.groupdict().items()},
            "position": TXN_INDEX_ENTRY_BYTES * section.txn_index_entries,
            "source_file": self.source_file,
            "line_number": line_number,
        }
        section.txn_index_entries += 1
        if not section.skipped:
            self.txn_index_entries.append(entry)


def parse_dump(text: str, source_file: str, *, skip_dir_suffixes: Sequence[str] = ()) -> DumpParse:
    """Parse kafka-dump-log output; `skip_dir_suffixes` leaves out sections dumped from such partition dirs."""
    return _DumpParser(source_file, skip_dir_suffixes).parse(text)


def has_dump_header(text: str) -> bool:
    """Whether a `Dumping <path>` line (possibly indented or numbered) occurs in `text`."""
    for line in text.splitlines():
        line = line.strip()
        gutter = _LINE_NUMBER_GUTTER.match(line)
        if _DUMPING.fullmatch(line) or (gutter and _DUMPING.fullmatch(line[gutter.end() :])):
            return True
    return False


# --- Spark readers ------------------------------------------------------------------------------------

_DUMP_FILE = T.StructType([T.StructField("path", T.StringType(), False)])


def _check_dump_headers(paths: Sequence[str]) -> None:
    """Raise InputError for a path that cannot be read or is no dump; only the first HEADER_PEEK_BYTES are read."""
    for path in paths:
        try:
            filesystem, fs_path = resolve(path)
            with filesystem.open_input_stream(fs_path) as stream:
                head = stream.read(HEADER_PEEK_BYTES)
        except (OSError, pa.ArrowException) as exc:
            raise InputError(path, f"cannot be read: {exc}") from None
        # A partial last line at the cut is harmless: the header is at the top.
        if not has_dump_header(head.decode("utf-8", errors="replace")):
            raise InputError(path, "not kafka-dump-log output: no `Dumping <file>` line at the top")


def _map_dumps(
    spark: SparkSession,
    paths: Sequence[str],
    schema: T.StructType,
    rows_of: Callable[[DumpParse, str], list[dict[str, Any]]],
    skip_dir_suffixes: Sequence[str] = (),
) -> DataFrame:
    """Parse every file in one task of its own (files are read whole) and emit `rows_of` each parse."""
    if not paths:
        return spark.createDataFrame([], schema)
    _check_dump_headers(paths)
    arrow_schema = to_arrow_schema(schema)
    skip = tuple(skip_dir_suffixes)

    def parse_files(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column("path").to_pylist():
                filesystem, fs_path = resolve(path)
                with filesystem.open_input_stream(fs_path) as stream:
                    content = stream.read()
                parsed = parse_dump(content.decode("utf-8", errors="replace"), path, skip_dir_suffixes=skip)
                rows = rows_of(parsed, path)
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    files = spark.sparkContext.parallelize([(path,) for path in paths], len(paths))
    return spark.createDataFrame(files, _DUMP_FILE).mapInArrow(shipped(spark, parse_files), schema)


def read_dumplog(spark: SparkSession, paths: list[str], settings: Settings) -> DataFrame:
    """`batches` rows (schema BATCHES) of dump text files, parsed on the executors.

    Raises InputError for a file that cannot be read or has no `Dumping` line at its top. Sections dumped
    from partition directories named with `settings.ingest.skip_dir_suffixes` are left out, as for segments.
    """
    return _map_dumps(spark, paths, BATCHES, lambda parsed, _: parsed.batches, settings.ingest.skip_dir_suffixes)


def read_dumplog_report(spark: SparkSession, paths: list[str]) -> DataFrame:
    """One DUMP_REPORT row per file: line counts by kind, the first unknown lines and parser notes."""

    def report(parsed: DumpParse, source_file: str) -> list[dict[str, Any]]:
        return [
            {
                "source_file": source_file,
                "line_counts": list(parsed.line_counts.items()),
                "unknown_lines": [{"line_number": number, "text": text} for number, text in parsed.unknown_lines],
                "notes": parsed.notes,
            }
        ]

    return _map_dumps(spark, paths, DUMP_REPORT, report)


def read_dumplog_snapshots(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Producer-snapshot entries (schema SNAPSHOT_ENTRIES) of `.snapshot` dumps."""
    return _map_dumps(spark, paths, SNAPSHOT_ENTRIES, lambda parsed, _: parsed.snapshot_entries)


def read_dumplog_txn_index(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Aborted-transaction entries (schema TXN_INDEX_ENTRIES) of `.txnindex` dumps."""
    return _map_dumps(spark, paths, TXN_INDEX_ENTRIES, lambda parsed, _: parsed.txn_index_entries)


def read_dumplog_transaction_log(spark: SparkSession, paths: list[str], settings: Settings) -> DataFrame:
    """`transaction_log` rows (schema TRANSACTION_LOG) of the `__transaction_state` sections of dump files."""
    return _map_dumps(
        spark, paths, TRANSACTION_LOG, lambda parsed, _: parsed.transaction_log, settings.ingest.skip_dir_suffixes
    )


def read_dumplog_offset_commit_records(spark: SparkSession, paths: list[str], settings: Settings) -> DataFrame:
    """Records (schema OFFSET_COMMITS) of the transactional batches of `__consumer_offsets` sections of dump files,
    group metadata records (key version 2) included, as `internal_topics.read_internal_segments` gives them."""
    return _map_dumps(
        spark,
        paths,
        OFFSET_COMMITS,
        lambda parsed, _: parsed.offset_commit_records,
        settings.ingest.skip_dir_suffixes,
    )
