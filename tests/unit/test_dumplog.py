"""kafka-dump-log text: every layout of spec §4 inline, then the published dumps of shared/realdata (read by the
Spark readers in tests/integration/test_dumplog_readers.py)."""

# Dump lines are kept exactly as the tool prints them, one per line.
# ruff: noqa: E501

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.dumplog.grammar import (
    BATCH,
    BLANK,
    CONTROL_RECORD,
    DIAGNOSTIC,
    HEADER,
    INDEX_ENTRY,
    RECORD,
    SNAPSHOT_ENTRY,
    TRUNCATED_TAIL,
    TXN_INDEX_ENTRY,
    UNKNOWN,
)
from pipeline.sources.dumplog.parser import LINE_KINDS, has_dump_header, parse_dump
from pipeline.sources.dumplog.reader import (
    SNAPSHOT_ENTRIES,
    TXN_INDEX_ENTRIES,
)
from schemas.batches import BATCHES, STATUS_LEGACY, STATUS_OK, STATUS_TRUNCATED
from tests.published_dumps import EXPECTED_UNKNOWN_LINES, HEADERLESS_DUMP, dump_text


def parse(text: str, **kwargs):
    return parse_dump(text.strip("\n"), "inline.txt", **kwargs)


def counts(parsed) -> dict[str, int]:
    return {kind: count for kind, count in parsed.line_counts.items() if count}


# --- batch line templates by version (spec §4.2) ------------------------------------------------------

V0_11_SHALLOW = """
Dumping /kafka/orders-3/00000000000000000000.log
Starting offset: 0
baseOffset: 0 lastOffset: 2 baseSequence: 0 lastSequence: 2 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 3 isTransactional: false position: 0 CreateTime: 1500000000003 isvalid: true size: 100 magic: 2 compresscodec: NONE crc: 123456
"""


def test_0_11_shallow_batch_line():
    parsed = parse(V0_11_SHALLOW)
    assert counts(parsed) == {HEADER: 2, BATCH: 1}
    [row] = parsed.batches
    assert set(row) == set(BATCHES.fieldNames())
    assert (row["topic"], row["partition"], row["segment_base_offset"]) == ("orders", 3, 0)
    assert (row["base_offset"], row["last_offset"], row["last_offset_delta"]) == (0, 2, 2)
    assert (row["producer_id"], row["producer_epoch"], row["base_sequence"], row["last_sequence"]) == (7, 0, 0, 2)
    assert (row["partition_leader_epoch"], row["is_transactional"]) == (3, False)
    assert row["is_control"] is None  # not printed before 2.1
    assert row["record_count"] is None  # not printed before 2.0
    assert (row["crc"], row["crc_valid"], row["compression"], row["timestamp_type"]) == (123456, True, 0, 0)
    assert (row["size_bytes"], row["batch_length"], row["position"], row["magic"]) == (100, 88, 0, 2)
    assert (row["max_timestamp"], row["base_timestamp"], row["attributes"]) == (1500000000003, None, None)
    assert row["has_delete_horizon"] is None
    assert (row["entry_status"], row["source_format"], row["source_file"]) == (STATUS_OK, "dumplog", "inline.txt")


def test_2_0_and_2_1_shallow_batch_lines():
    parsed = parse(
        """
Dumping /kafka/orders-3/00000000000000000000.log
Starting offset: 0
baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 3 isTransactional: true position: 0 LogAppendTime: 1500000000003 isvalid: false size: 100 magic: 2 compresscodec: SNAPPY crc: 1
baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 3 isTransactional: true isControl: true position: 100 CreateTime: 1500000000009 isvalid: true size: 78 magic: 2 compresscodec: NONE crc: 2
"""
    )
    first, marker = parsed.batches
    assert (first["record_count"], first["is_control"], first["crc_valid"]) == (3, None, False)
    assert (first["compression"], first["timestamp_type"]) == (2, 1)
    assert (marker["record_count"], marker["is_control"], marker["is_transactional"]) == (1, True, True)
    assert marker["control_type"] is None  # shallow dumps print no control record


# Spec §4.4(a): Kafka 2.5/2.6, indented as published, upper-case codec, `keysize` spelling.
V2_5_DEEP = """
    Dumping /tmp/kafka-logs/target-topic-0/00000000000000000000.log
    Starting offset: 0
    baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 4005 producerEpoch: 16 partitionLeaderEpoch: 0 isTransactional: true isControl: false position: 0 CreateTime: 1596728571524 size: 107 magic: 2 compresscodec: LZ4 crc: 2238940677 isvalid: true
    | offset: 0 CreateTime: 1596728571524 keysize: -1 valuesize: 24 sequence: 0 headerKeys: [] payload: 2020-08-06T15:42:51.182Z
    baseOffset: 7 lastOffset: 7 count: 1 baseSequence: -1 lastSequence: -1 producerId: 4005 producerEpoch: 16 partitionLeaderEpoch: 0 isTransactional: true isControl: true position: 749 CreateTime: 1596728578172 size: 78 magic: 2 compresscodec: NONE crc: 1861517873 isvalid: true
    | offset: 7 CreateTime: 1596728578172 keysize: 4 valuesize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0
    baseOffset: 11 lastOffset: 11 count: 1 baseSequence: -1 lastSequence: -1 producerId: 4009 producerEpoch: 11 partitionLeaderEpoch: 0 isTransactional: true isControl: true position: 1148 CreateTime: 1596728611892 size: 78 magic: 2 compresscodec: NONE crc: 157409123 isvalid: true
    | offset: 11 CreateTime: 1596728611892 keysize: 4 valuesize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 0
    baseOffset: 12 lastOffset: 17 count: 6 baseSequence: 0 lastSequence: 5 producerId: 4005 producerEpoch: 18 partitionLeaderEpoch: 0 isTransactional: true isControl: false position: 1226 CreateTime: 1596728613269 size: 173 magic: 2 compresscodec: LZ4 crc: 2596930468 isvalid: true
    | offset: 12 CreateTime: 1596728613262 keysize: -1 valuesize: 24 sequence: 0 headerKeys: [] payload: 2020-08-06T15:42:57.185Z
"""


def test_2_2_to_2_7_deep_dump_attaches_markers():
    parsed = parse(V2_5_DEEP)
    assert counts(parsed) == {HEADER: 2, BATCH: 4, RECORD: 2, CONTROL_RECORD: 2}
    data, commit, abort, multi = parsed.batches
    assert (data["topic"], data["partition"], data["compression"], data["crc"]) == ("target-topic", 0, 3, 2238940677)
    assert (commit["control_type"], commit["coordinator_epoch"], commit["producer_id"]) == (1, 0, 4005)
    assert (abort["control_type"], abort["coordinator_epoch"], abort["producer_epoch"]) == (0, 0, 11)
    assert (multi["record_count"], multi["last_sequence"], multi["control_type"]) == (6, 5, None)
    assert data["control_type"] is None


def test_2_8_long_record_lines():
    parsed = parse(
        """
Dumping /kafka/payments-1/00000000000000000040.log
Starting offset: 40
baseOffset: 40 lastOffset: 40 count: 1 baseSequence: 3 lastSequence: 3 producerId: 9 producerEpoch: 1 partitionLeaderEpoch: 2 isTransactional: true isControl: false position: 0 CreateTime: 1620000000000 size: 72 magic: 2 compresscodec: NONE crc: 10 isvalid: true
| offset: 40 isValid: true crc: null keySize: -1 valueSize: 3 CreateTime: 1620000000000 baseOffset: 40 lastOffset: 40 baseSequence: 3 lastSequence: 3 producerEpoch: 1 partitionLeaderEpoch: 2 batchSize: 72 magic: 2 compressType: NONE position: 0 sequence: 3 headerKeys: [trace] payload: abc
baseOffset: 41 lastOffset: 41 count: 1 baseSequence: -1 lastSequence: -1 producerId: 9 producerEpoch: 1 partitionLeaderEpoch: 2 isTransactional: true isControl: true position: 72 CreateTime: 1620000000100 size: 78 magic: 2 compresscodec: NONE crc: 11 isvalid: true
| offset: 41 isValid: true crc: null keySize: 4 valueSize: 6 CreateTime: 1620000000100 baseOffset: 41 lastOffset: 41 baseSequence: -1 lastSequence: -1 producerEpoch: 1 partitionLeaderEpoch: 2 batchSize: 78 magic: 2 compressType: NONE position: 72 sequence: -1 headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 7
"""
    )
    assert counts(parsed) == {HEADER: 2, BATCH: 2, RECORD: 1, CONTROL_RECORD: 1}
    data, abort = parsed.batches
    assert (data["segment_base_offset"], data["partition_leader_epoch"]) == (40, 2)
    assert (abort["control_type"], abort["coordinator_epoch"]) == (0, 7)


def test_3_0_lower_case_codec_and_3_2_delete_horizon():
    parsed = parse(
        """
Dumping /kafka/compacted.topic-0/00000000000000000000.log
Starting offset: 0
baseOffset: 0 lastOffset: 4 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 5 isTransactional: false isControl: false position: 0 CreateTime: 1630000000000 size: 120 magic: 2 compresscodec: zstd crc: 20 isvalid: true
| offset: 1 CreateTime: 1630000000000 keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] key: k
baseOffset: 5 lastOffset: 5 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 5 isTransactional: false isControl: false deleteHorizonMs: OptionalLong[1700000000000] position: 120 CreateTime: 1630000000001 size: 70 magic: 2 compresscodec: gzip crc: 21 isvalid: true
baseOffset: 6 lastOffset: 6 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 5 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 190 CreateTime: 1630000000002 size: 70 magic: 2 compresscodec: none crc: 22 isvalid: true
"""
    )
    v3_0, horizon, no_horizon = parsed.batches
    assert (v3_0["topic"], v3_0["compression"], v3_0["record_count"], v3_0["last_offset_delta"]) == (
        "compacted.topic",
        4,
        2,
        4,
    )
    assert v3_0["has_delete_horizon"] is None
    assert (horizon["has_delete_horizon"], horizon["base_timestamp"], horizon["compression"]) == (
        True,
        1700000000000,
        1,
    )
    assert (no_horizon["has_delete_horizon"], no_horizon["base_timestamp"]) == (False, None)


# Spec §4.4(e): Kafka 4.x, `Log starting offset`, JSON transaction-log decoder.
V4_TXN_LOG = """
$ bin/kafka-dump-log.sh --transaction-log-decoder \\
  --files build/test/server3/data/__transaction_state-30/00000000000000000000.log
Dumping build/test/server3/data/__transaction_state-30/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1781778768196 size: 129 magic: 2 compresscodec: none crc: 326836132 isvalid: true
| offset: 0 CreateTime: 1781778768196 keySize: 15 valueSize: 45 sequence: -1 headerKeys: [] key: {"type":"0","data":{"transactionalId":"kafka-txn-0"}} payload: {"version":"1","data":{"producerId":0,"previousProducerId":0,"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":"Empty","transactionPartitions":null,"transactionLastUpdateTimestampMs":1781778768194,"transactionStartTimestampMs":-1}}
"""


def test_4_x_transaction_log_decoder():
    parsed = parse(V4_TXN_LOG)
    assert counts(parsed) == {HEADER: 2, BATCH: 1, RECORD: 1, UNKNOWN: 2}
    assert [number for number, _ in parsed.unknown_lines] == [1, 2]
    [row] = parsed.batches
    assert (row["topic"], row["partition"], row["producer_id"], row["crc"]) == (
        "__transaction_state",
        30,
        -1,
        326836132,
    )
    assert (row["has_delete_horizon"], row["control_type"]) == (False, None)


def test_kraft_control_records_of_3_2_and_4_1():
    parsed = parse(
        """
Dumping /kraft/__cluster_metadata-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 80 magic: 2 compresscodec: none crc: 1 isvalid: true
| offset: 0 CreateTime: 1 keySize: 4 valueSize: 10 sequence: -1 headerKeys: [] LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}
baseOffset: 1 lastOffset: 1 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 80 CreateTime: 2 size: 80 magic: 2 compresscodec: none crc: 2 isvalid: true
| offset: 1 CreateTime: 2 keySize: 4 valueSize: 10 sequence: -1 headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}
baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 160 CreateTime: 3 size: 80 magic: 2 compresscodec: none crc: 3 isvalid: true
| offset: 2 CreateTime: 3 keySize: 4 valueSize: 10 sequence: -1 headerKeys: [] controlType: UNKNOWN(-1)
"""
    )
    assert counts(parsed) == {HEADER: 2, BATCH: 3, CONTROL_RECORD: 3}
    assert [row["control_type"] for row in parsed.batches] == [2, 3, -1]
    assert [row["coordinator_epoch"] for row in parsed.batches] == [None, None, None]


# --- 0.11-2.1 deep iteration: record lines only -------------------------------------------------------


def test_0_11_deep_records_group_by_position():
    parsed = parse(
        """
Dumping /kafka/orders-3/00000000000000000000.log
Starting offset: 0
offset: 0 position: 0 CreateTime: 1500000000001 isvalid: true keysize: 1 valuesize: 3 magic: 2 compresscodec: NONE producerId: 7 sequence: 0 isTransactional: true headerKeys: []
offset: 1 position: 0 CreateTime: 1500000000005 isvalid: true keysize: 1 valuesize: 3 magic: 2 compresscodec: NONE producerId: 7 sequence: 1 isTransactional: true headerKeys: [h1,h2] key: a payload: b
offset: 2 position: 95 CreateTime: 1500000000009 isvalid: true keysize: 4 valuesize: 6 magic: 2 compresscodec: NONE producerId: 7 sequence: -1 isTransactional: true headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 5
"""
    )
    assert counts(parsed) == {HEADER: 2, RECORD: 2, CONTROL_RECORD: 1}
    data, commit = parsed.batches
    assert (data["base_offset"], data["last_offset"], data["record_count"], data["position"]) == (0, 1, 2, 0)
    assert (data["producer_id"], data["producer_epoch"], data["base_sequence"], data["last_sequence"]) == (
        7,
        None,
        0,
        1,
    )
    assert (data["max_timestamp"], data["is_control"], data["crc"], data["crc_valid"]) == (
        1500000000005,
        False,
        None,
        None,
    )
    assert (data["size_bytes"], data["batch_length"], data["partition_leader_epoch"]) == (None, None, None)
    assert "2 record line(s)" in data["entry_note"]
    assert (commit["is_control"], commit["control_type"], commit["coordinator_epoch"], commit["position"]) == (
        True,
        1,
        5,
        95,
    )


# Spec §4.4(b): 2.0/2.1 deep dump (verbatim), zombie fencing: data at epoch 17, ABORT at 18, new instance at 19.
V2_0_DEEP = """
$ ./bin/kafka-dump-log.sh --files /tmp/kafka-logs/topic-test-0/00000000000000000000.log --print-data-log
Dumping /tmp/kafka-logs/topic-test-0/00000000000000000000.log
Starting offset: 0
offset: 0 position: 0 CreateTime: 1552341204207 isvalid: true keysize: 16 valuesize: 19 magic: 2 compresscodec: NONE producerId: 0 producerEpoch: 17 sequence: 0 isTransactional: true headerKeys: [] key: thisIsMessageKey payload: thisIsMessageValue1
offset: 1 position: 103 CreateTime: 1552341204531 isvalid: true keysize: 4 valuesize: 6 magic: 2 compresscodec: NONE producerId: 0 producerEpoch: 18 sequence: -1 isTransactional: true headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 0
offset: 2 position: 181 CreateTime: 1552341204644 isvalid: true keysize: 16 valuesize: 19 magic: 2 compresscodec: NONE producerId: 0 producerEpoch: 19 sequence: 0 isTransactional: true headerKeys: [] key: thisIsMessageKey payload: thisIsMessageValue2
offset: 3 position: 284 CreateTime: 1552341204665 isvalid: true keysize: 4 valuesize: 6 magic: 2 compresscodec: NONE producerId: 0 producerEpoch: 19 sequence: -1 isTransactional: true headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0
"""


def test_1_0_to_2_1_deep_records_are_one_record_batches():
    parsed = parse(V2_0_DEEP)
    assert counts(parsed) == {HEADER: 2, RECORD: 2, CONTROL_RECORD: 2, UNKNOWN: 1}
    rows = parsed.batches
    assert [(row["base_offset"], row["producer_epoch"], row["control_type"]) for row in rows] == [
        (0, 17, None),
        (1, 18, 0),
        (2, 19, None),
        (3, 19, 1),
    ]
    assert [row["position"] for row in rows] == [0, 103, 181, 284]
    assert all(row["topic"] == "topic-test" and row["record_count"] == 1 for row in rows)


# --- legacy message sets, truncated tails -------------------------------------------------------------


def test_legacy_entries_shallow_and_deep():
    parsed = parse(
        """
Dumping /kafka/old-0/00000000000000000000.log
Starting offset: 0
offset: 5 position: 0 CreateTime: 1500000000000 isvalid: true size: 80 magic: 1 compresscodec: NONE crc: 99
offset: 9 position: 80 CreateTime: 1500000000009 size: 120 magic: 1 compresscodec: gzip crc: 77 isvalid: true
| offset: 7 CreateTime: 1500000000007 keySize: 1 valueSize: 1 isValid: true crc: 11}
| offset: 8 CreateTime: 1500000000008 keysize: 1 valuesize: 1 crc: 12 isvalid: true
| offset: 9 CreateTime: 1500000000009 keySize: 1 valueSize: 1 isValid: true crc: 13}
offset: 10 position: 200 NoTimestampType: -1 size: 40 magic: 0 compresscodec: none crc: 5 isvalid: false
offset: 11 position: 240 CreateTime: 1500000000011 isvalid: true keysize: 1 valuesize: 1 magic: 1 compresscodec: NONE crc: 42
"""
    )
    assert counts(parsed) == {HEADER: 2, BATCH: 3, RECORD: 4}
    single, wrapper, v0, deep = parsed.batches
    assert all(row["entry_status"] == STATUS_LEGACY for row in parsed.batches)
    assert all(row["is_transactional"] is False and row["is_control"] is False for row in parsed.batches)
    assert all(row["producer_id"] is None for row in parsed.batches)
    assert (single["base_offset"], single["last_offset"], single["record_count"], single["magic"]) == (5, 5, 1, 1)
    assert (wrapper["base_offset"], wrapper["last_offset"], wrapper["record_count"], wrapper["compression"]) == (
        7,
        9,
        3,
        1,
    )
    assert (v0["magic"], v0["timestamp_type"], v0["max_timestamp"], v0["crc_valid"]) == (0, None, None, False)
    assert (deep["base_offset"], deep["crc"], deep["crc_valid"], deep["position"]) == (11, 42, True, 240)


def test_invalid_trailing_bytes_become_a_truncated_tail_row():
    parsed = parse(
        """
Dumping /kafka/orders-3/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 78 magic: 2 compresscodec: none crc: 1 isvalid: true
Found 17 invalid bytes at the end of 00000000000000000000.log
"""
    )
    assert counts(parsed) == {HEADER: 2, BATCH: 1, TRUNCATED_TAIL: 1}
    tail = parsed.batches[1]
    assert (tail["entry_status"], tail["position"], tail["size_bytes"]) == (STATUS_TRUNCATED, 78, 17)
    assert (tail["topic"], tail["partition"], tail["base_offset"]) == ("orders", 3, None)
    assert "17 invalid bytes" in tail["entry_note"]


def test_numbers_outside_their_kafka_type_make_the_line_unknown():
    """The tool cannot print them, and the rows would not load into their columns (a failed Spark task)."""
    huge = "9" * 5000  # also past Python's int() limit of 4300 digits
    batch = "baseOffset: {base} lastOffset: {last} count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: {epoch} partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: {position} CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true"
    cached = "producerId: 2 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: None cachedMetadata: Queue(BatchMetadata(firstSeq=0, lastSeq={last_seq}, firstOffset=10, lastOffset=14, timestamp=1500))"
    lines = [
        f"Dumping /kafka/orders-{huge}/{'9' * 20}.log",  # partition past int32, base offset past int64
        batch.format(base=0, last=0, epoch=32768, position=0),
        batch.format(base=huge, last=0, epoch=0, position=0),
        batch.format(base=0, last=0, epoch=0, position=2**31),
        cached.format(last_seq=2**31),
        f"version: 0 producerId: 4 firstOffset: -{huge} lastOffset: 15 lastStableOffset: 10",
        f"producerId: 1 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: Some({2**63})",
        batch.format(base=-(2**63), last=2**63 - 1, epoch=0, position=0),  # fits, but no batch spans that
    ]
    parsed = parse_dump("\n".join(lines), "inline.txt")
    assert counts(parsed) == {HEADER: 1, UNKNOWN: 6, BATCH: 1}
    assert [number for number, _ in parsed.unknown_lines] == [2, 3, 4, 5, 6, 7]
    assert [note.partition(";")[0] for note in parsed.notes[:6]] == [
        "line 2: producer_epoch 32768 is outside [-32768, 32767]",
        f"line 3: base_offset {'9' * 40} is outside [{-(2**63)}, {2**63 - 1}]",
        f"line 4: position {2**31} is outside [{-(2**31)}, {2**31 - 1}]",
        f"line 5: last_sequence {2**31} is outside [{-(2**31)}, {2**31 - 1}]",
        f"line 6: first_offset -{'9' * 39} is outside [{-(2**63)}, {2**63 - 1}]",
        f"line 7: txn_first_offset {2**63} is outside [{-(2**63)}, {2**63 - 1}]",
    ]
    [row] = parsed.batches
    assert (row["topic"], row["partition"], row["segment_base_offset"]) == ("", -1, -1)
    assert row["last_offset_delta"] is None and "too far apart for one batch" in row["entry_note"]
    pa.Table.from_pylist(parsed.batches, schema=to_arrow_schema(BATCHES))


# --- sections, paths, unknown and numbered lines ------------------------------------------------------


def test_sections_take_topic_partition_and_segment_from_the_dumped_path():
    parsed = parse(
        """
Dumping /data/my.app-events-v2-12/00000000000000000100.log
Log starting offset: 100
baseOffset: 100 lastOffset: 100 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true
Dumping 00000000000000000200.log
Log starting offset: 200
baseOffset: 200 lastOffset: 200 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true
Log starting offset: 300
baseOffset: 300 lastOffset: 300 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true
"""
    )
    assert [(row["topic"], row["partition"], row["segment_base_offset"]) for row in parsed.batches] == [
        ("my.app-events-v2", 12, 100),
        ("", -1, 200),
        ("", -1, 300),  # a second header without `Dumping`: output of another file pasted in
    ]
    assert len(parsed.notes) == 2 and all("partition -1" in note for note in parsed.notes)


def test_skipped_partition_directories_are_counted_but_not_loaded():
    parsed = parse(
        """
Dumping /data/orders-0.8f1c3b2a9d4e4f6a8b7c6d5e4f3a2b1c-delete/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true
""",
        skip_dir_suffixes=["-delete"],
    )
    assert parsed.batches == [] and parsed.line_counts[BATCH] == 1
    assert "skipped directory" in parsed.notes[0]


def test_unknown_lines_are_counted_and_numbered_listings_read():
    parsed = parse(
        """
 1 # dump output-topic-0
 2 Dumping /tmp/kafka-logs/output-topic-0/00000000000000000000.log
 3 Log starting offset: 0
 4 baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1680383687941 size: 82 magic: 2 compresscodec: none crc: 2785707995 isvalid: true
 5
 6 ...
this is not dump output
"""
    )
    assert counts(parsed) == {HEADER: 2, BATCH: 1, BLANK: 1, UNKNOWN: 3}
    assert parsed.unknown_lines == [(1, "1 # dump output-topic-0"), (6, "6 ..."), (7, "this is not dump output")]
    assert parsed.batches[0]["topic"] == "output-topic"
    assert set(parsed.line_counts) == set(LINE_KINDS)


def test_index_lines_and_tool_diagnostics():
    parsed = parse(
        """
Dumping /kafka/orders-3/00000000000000000000.index
offset: 10 position: 4096
offset: 20 position: 8192
Dumping /kafka/orders-3/00000000000000000000.timeindex
timestamp: 1500000000000 offset: 10
Non-consecutive offsets in /kafka/orders-3/00000000000000000000.log
  5 is followed by 7
Mismatches in :/kafka/orders-3/00000000000000000000.index
  Index offset: 20, log offset: 19
/kafka/orders-3/00000000000000000050.index is empty.
"""
    )
    assert counts(parsed) == {HEADER: 2, INDEX_ENTRY: 3, DIAGNOSTIC: 5}
    assert parsed.batches == []


# --- producer snapshots and the aborted-transaction index (spec §4.3) ---------------------------------

SNAPSHOT_LINES = """
Dumping /kafka/orders-3/00000000000000000120.snapshot
producerId: 1 producerEpoch: 1 lastSequence: 9 lastOffset: 99 offsetDelta: 2 lastTimestamp: 1500 coordinatorEpoch: 3 currentTxnFirstOffset: Some(97)
producerId: 2 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: None cachedMetadata: Queue(BatchMetadata(firstSeq=0, lastSeq=4, firstOffset=10, lastOffset=14, timestamp=1500), BatchMetadata(firstSeq=5, lastSeq=9, firstOffset=95, lastOffset=99, timestamp=1600))
producerId: 3 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: None
producerId: 4 producerEpoch: 0 coordinatorEpoch: 2 currentTxnFirstOffset: None firstSequence: 0 lastSequence: 4 lastOffset: 14 offsetDelta: 4 timestamp: 1500
producerId: 5 producerEpoch: 0 coordinatorEpoch: 2 currentTxnFirstOffset: Some(110) lastTimestamp: 1700 firstSequence: 0 lastSequence: 0 lastOffset: 110 offsetDelta: 0 timestamp: 1700
producerId: 6 producerEpoch: 2 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong[42] lastTimestamp: 1700 firstSequence: 3 lastSequence: 7 lastOffset: 46 offsetDelta: 4 timestamp: 1700
producerId: 7 producerEpoch: 2 coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 1800
"""


def test_snapshot_lines_of_every_version():
    parsed = parse(SNAPSHOT_LINES)
    assert counts(parsed) == {HEADER: 1, SNAPSHOT_ENTRY: 7}
    entries = {entry["producer_id"]: entry for entry in parsed.snapshot_entries}
    assert all(set(entry) == set(SNAPSHOT_ENTRIES.fieldNames()) for entry in entries.values())
    assert all(
        (entry["topic"], entry["partition"], entry["snapshot_offset"]) == ("orders", 3, 120)
        for entry in entries.values()
    )

    def fields(pid):
        entry = entries[pid]
        return tuple(
            entry[name]
            for name in (
                "producer_epoch",
                "coordinator_epoch",
                "current_txn_first_offset",
                "last_timestamp",
                "first_sequence",
                "last_sequence",
                "last_offset",
                "offset_delta",
                "timestamp",
            )
        )

    assert fields(1) == (1, 3, 97, 1500, None, 9, 99, 2, 1500)  # 0.11
    assert fields(2) == (1, 3, None, None, 5, 9, 99, 4, 1600)  # 1.0: the newest cached batch
    assert fields(3) == (0, -1, None, None, None, None, None, None, None)  # 1.1-3.2, no batch cached
    assert fields(4) == (0, 2, None, None, 0, 4, 14, 4, 1500)  # 1.1-3.2
    assert fields(5) == (0, 2, 110, 1700, 0, 0, 110, 0, 1700)  # 3.3-3.4
    assert fields(6) == (2, 0, 42, 1700, 3, 7, 46, 4, 1700)  # 3.5+
    assert fields(7) == (2, 0, None, 1800, None, None, None, None, None)  # 4.x, no batch cached


def test_a_snapshot_dumped_without_producer_lines_is_one_entry_without_producer():
    parsed = parse(SNAPSHOT_LINES + "Dumping /kafka/orders-3/00000000000000000130.snapshot\n")
    entry = parsed.snapshot_entries[-1]
    assert len(parsed.snapshot_entries) == 8 and set(entry) == set(SNAPSHOT_ENTRIES.fieldNames())
    assert (entry["topic"], entry["partition"], entry["snapshot_offset"], entry["line_number"]) == ("orders", 3, 130, 9)
    assert {name for name, value in entry.items() if value is not None} == {
        "topic",
        "partition",
        "snapshot_offset",
        "source_file",
        "line_number",
    }
    assert parse("Dumping /kafka/orders-3/00000000000000000000.txnindex").snapshot_entries == []


def test_txn_index_line():
    parsed = parse(
        """
Dumping /kafka/orders-3/00000000000000000000.txnindex
version: 0 producerId: 4 firstOffset: 10 lastOffset: 15 lastStableOffset: 10
version: 0 producerId: 5 firstOffset: 12 lastOffset: 18 lastStableOffset: 10
"""
    )
    assert counts(parsed) == {HEADER: 1, TXN_INDEX_ENTRY: 2}
    assert [entry["position"] for entry in parsed.txn_index_entries] == [0, 34]
    assert parsed.txn_index_entries[0] == {
        "topic": "orders",
        "partition": 3,
        "segment_base_offset": 0,
        "version": 0,
        "producer_id": 4,
        "first_offset": 10,
        "last_offset": 15,
        "last_stable_offset": 10,
        "position": 0,
        "source_file": "inline.txt",
        "line_number": 2,
    }
    assert set(parsed.txn_index_entries[0]) == set(TXN_INDEX_ENTRIES.fieldNames())


def test_has_dump_header():
    assert has_dump_header("$ kafka-dump-log.sh --files x\nDumping x/00000000000000000000.log\n")
    assert has_dump_header(" 3 Dumping /tmp/kafka-logs/t-0/00000000000000000000.log")
    assert not has_dump_header("Log starting offset: 0\nbaseOffset: 0 lastOffset: 0\n")


# --- conformance with the published dumps of shared/realdata ------------------------------------------

PROSE_PREFIXES = ("$ ", "docker-compose ", "root@", "--files ", "...", "# ...")


@pytest.fixture(scope="module")
def real_parses(realdata: Path):
    names = sorted(path.name for path in (realdata / "dumplog-text").glob("*.txt"))
    return {name: parse_dump(dump_text(realdata, name), name) for name in names}


def test_every_published_dump_parses_with_only_prose_unknown(real_parses):
    assert set(real_parses) == set(EXPECTED_UNKNOWN_LINES)
    for name, parsed in real_parses.items():
        assert parsed.line_counts[UNKNOWN] == EXPECTED_UNKNOWN_LINES[name], (name, parsed.unknown_lines)
        for _, text in parsed.unknown_lines:
            unnumbered = text.split(" ", 1)[1] if name.startswith("strimzi-blog") else text
            assert unnumbered.startswith(PROSE_PREFIXES) or unnumbered.startswith(("# dump", "$KAFKA_HOME")), text
        assert parsed.batches or parsed.snapshot_entries or parsed.txn_index_entries, name


def test_batches_match_the_rebuilt_broker_vectors(real_parses, realdata: Path):
    vectors = sorted((realdata / "reconstructed-from-dump" / "vectors").glob("*.json"))
    assert len(vectors) == 55
    compared = 0
    for vector_file in vectors:
        vector = json.loads(vector_file.read_text())
        expected = vector["expected_from_broker_dump"]
        markers = [record for record in vector["expected_records_from_broker_dump"] if "endTxnMarker" in record]
        samples = [Path(vector["source"]["sample_file"]).name] + [also["sample"] for also in vector["also_printed_in"]]
        for sample in samples:
            [row] = [
                row
                for row in real_parses[sample].batches
                if row["base_offset"] == expected["baseOffset"] and row["crc"] == expected["crc"]
            ]
            assert (
                row["last_offset"],
                row["record_count"],
                row["base_sequence"],
                row["last_sequence"],
                row["producer_id"],
                row["producer_epoch"],
                row["partition_leader_epoch"],
                row["is_transactional"],
                row["is_control"],
                row["position"],
                row["max_timestamp"],
                row["size_bytes"],
                row["magic"],
                row["crc_valid"],
            ) == (
                expected["lastOffset"],
                expected["count"],
                expected["baseSequence"],
                expected["lastSequence"],
                expected["producerId"],
                expected["producerEpoch"],
                expected["partitionLeaderEpoch"],
                expected["isTransactional"],
                expected["isControl"],
                expected["position"],
                expected["maxTimestamp"],
                expected["size"],
                expected["magic"],
                True,
            ), (vector_file.name, sample)
            if markers:
                assert (row["control_type"], row["coordinator_epoch"]) == (
                    {"ABORT": 0, "COMMIT": 1}[markers[0]["endTxnMarker"]],
                    markers[0]["coordinatorEpoch"],
                ), (vector_file.name, sample)
            else:
                assert row["control_type"] is None and row["coordinator_epoch"] is None
            compared += 1
    assert compared == 64


def test_klog_snapshot_dumps_decode_to_the_printed_values(real_parses):
    # Spec §4.4(f): the same snapshot dumped by a 2.x and a 3.3/3.4 tool.
    for name, last_timestamps in (
        ("klog-readSnapshotFromKafka2Dump-L28.txt", (None, None, None)),
        ("klog-readSnapshotFromKafka3Dump-L44.txt", (1655628030307, 1655761267833, 1655704254875)),
    ):
        entries = real_parses[name].snapshot_entries
        assert [
            (
                entry["producer_id"],
                entry["producer_epoch"],
                entry["coordinator_epoch"],
                entry["current_txn_first_offset"],
                entry["first_sequence"],
                entry["last_sequence"],
                entry["last_offset"],
                entry["offset_delta"],
                entry["timestamp"],
            )
            for entry in entries
        ] == [
            (171101, 12, 54, None, 0, 0, 932442537, 0, 1655628030307),
            (199398, 0, 57, 933607621, 0, 0, 933607621, 0, 1655761267833),
            (173102, 16, 59, None, 0, 0, 933203854, 0, 1655704254875),
        ]
        assert tuple(entry["last_timestamp"] for entry in entries) == last_timestamps
        assert {entry["snapshot_offset"] for entry in entries} == {933607637}


def test_faderskd_txn_index_dump(real_parses):
    [entry] = real_parses["faderskd-blog-2023-11-29-kafka-transactions-03.txt"].txn_index_entries
    assert (entry["version"], entry["producer_id"], entry["first_offset"], entry["last_offset"]) == (0, 0, 0, 1)
    assert (entry["last_stable_offset"], entry["segment_base_offset"], entry["line_number"]) == (2, 0, 3)


def test_pasted_dumps_without_dumping_line(real_parses):
    headerless = real_parses[HEADERLESS_DUMP].batches
    assert len(headerless) == 10 and {(row["topic"], row["partition"]) for row in headerless} == {("", -1)}
    # The second dump of this file has `Starting offset` but no `Dumping` line.
    sections = [
        (row["topic"], row["base_offset"])
        for row in real_parses["fvaleri-strimzi-debugging-session008-63aadccc-L104.txt"].batches
    ]
    assert sections == [("wc-output", 0), ("wc-output", 16), ("", 0), ("", 1), ("", 2), ("", 3)]
