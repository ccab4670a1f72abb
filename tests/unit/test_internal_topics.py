"""`__transaction_state` and transactional `__consumer_offsets` records: key/value decoders for every version
and malformed input, the dump-text decoder formats and the published broker data (the ingest through Spark is
tests/integration/test_internal_topics_ingest.py).

The key and value bytes here are written by the small encoders of tests/coordinator_records.py, field by field from
the message schemas (TransactionLogKey/Value.json, OffsetCommitKey/Value.json), not by the code under test.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.sources.coordinator_records.consumer_offsets import decode_offset_commit, offset_commit_rows
from pipeline.sources.coordinator_records.transaction_state import decode_transaction_log, transaction_log_rows
from pipeline.sources.dumplog.grammar import UNKNOWN
from pipeline.sources.dumplog.parser import parse_dump
from pipeline.sources.internal_topics import range_rows
from pipeline.sources.kafka_format.encoding import encode_batch
from pipeline.sources.kafka_format.layout import COMPRESSION_GZIP
from pipeline.sources.kafka_format.windows import decode_segment
from pipeline.sources.segments import SegmentFile, split_segment
from tests.coordinator_records import TAGS, offset_key, offset_value, string, txn_key, txn_value_v0, txn_value_v1

# --- TransactionLogKey / TransactionLogValue ------------------------------------------------------------


def test_value_v0_with_partitions():
    value = txn_value_v0(42, 5, 60000, 1, [("orders", [0, 3]), ("__consumer_offsets", [12])], 1700, 1600)
    row = decode_transaction_log(txn_key("app-1"), value)
    assert row == {
        "key_version": 0,
        "transactional_id": "app-1",
        "is_tombstone": False,
        "value_version": 0,
        "producer_id": 42,
        "producer_epoch": 5,
        "transaction_timeout_ms": 60000,
        "state": 1,
        "state_name": "Ongoing",
        "partitions": [{"topic": "orders", "partitions": [0, 3]}, {"topic": "__consumer_offsets", "partitions": [12]}],
        "last_update_timestamp_ms": 1700,
        "start_timestamp_ms": 1600,
    }


def test_value_v0_empty_state_has_null_partitions_and_no_tagged_fields():
    row = decode_transaction_log(txn_key("app-1"), txn_value_v0(42, 0, 900, 0, None, 10, -1))
    assert (row["state_name"], row["partitions"], row["start_timestamp_ms"]) == ("Empty", None, -1)
    assert "previous_producer_id" not in row and "decode_error" not in row


def test_value_v1_tagged_fields_and_unknown_tag():
    value = txn_value_v1(7, 3, 30000, 3, [("orders", [1])], 500, 400, TAGS)
    row = decode_transaction_log(txn_key("app-2"), value)
    assert (row["value_version"], row["state"], row["state_name"]) == (1, 3, "PrepareAbort")
    assert row["partitions"] == [{"topic": "orders", "partitions": [1]}]
    assert (
        row["previous_producer_id"],
        row["next_producer_id"],
        row["client_transaction_version"],
        row["next_producer_epoch"],
    ) == (41, 43, 2, 6)
    assert "decode_error" not in row


def test_value_v1_without_tagged_fields_holds_their_defaults():
    row = decode_transaction_log(txn_key("app-2"), txn_value_v1(7, 3, 30000, 0, None, 500, -1, {}))
    assert (row["previous_producer_id"], row["next_producer_id"]) == (-1, -1)
    assert (row["client_transaction_version"], row["next_producer_epoch"], row["partitions"]) == (0, -1, None)


def test_tombstone():
    assert decode_transaction_log(txn_key("gone"), None) == {
        "key_version": 0,
        "transactional_id": "gone",
        "is_tombstone": True,
    }


@pytest.mark.parametrize(("status", "name"), [(6, "Dead"), (7, "PrepareEpochFence"), (8, None), (-3, None)])
def test_every_status_byte_is_kept(status, name):
    row = decode_transaction_log(txn_key("a"), txn_value_v0(1, 0, 1, status, [], 1, 1))
    assert (row["state"], row["state_name"], row.get("decode_error")) == (status, name, None)


V0_HEAD = struct.pack(">hqhib", 0, 42, 1, 60000, 1)  # version .. status: 17 bytes
V1_HEAD = struct.pack(">hqhib", 1, 42, 1, 60000, 1)
V1_TIMES = struct.pack(">qq", 1, 1)


@pytest.mark.parametrize(
    ("key", "value", "error", "kept"),
    [
        (None, b"", "record has no key", {}),
        (b"\x00", None, "key byte 0: key version needs 2 bytes, 1 left", {}),
        (txn_key("x", version=1), None, "key byte 0: key version 1 is not a TransactionLogKey", {"key_version": 1}),
        (struct.pack(">hh", 0, 50) + b"abc", None, "key byte 2: transactional id of 50 bytes runs past the end", {}),
        (struct.pack(">hh", 0, -1), None, "key byte 2: transactional id is null but not nullable", {}),
        (struct.pack(">hh", 0, -7), None, "key byte 2: transactional id length -7 is negative", {}),
        (struct.pack(">hh", 0, 2) + b"\xff\xfe", None, "key byte 2: transactional id is not UTF-8", {}),
        (txn_key("a"), struct.pack(">h", 2) + bytes(40), "value byte 0: value version 2 is not", {"value_version": 2}),
        (
            txn_key("a"),
            struct.pack(">hq", 0, 42),
            "value byte 10: producer epoch needs 2 bytes, 0 left",
            {"producer_id": 42},
        ),
        (
            txn_key("a"),
            V0_HEAD + struct.pack(">i", 0x7FFFFFFF),
            "value byte 17: transaction partitions of 2147483647 entries needs at least",
            {"state": 1},
        ),
        (txn_key("a"), V0_HEAD + struct.pack(">i", -5), "value byte 17: transaction partitions length -5", {}),
        (
            txn_key("a"),
            V0_HEAD + struct.pack(">i", 1) + string("t") + struct.pack(">i", 1000) + bytes(8),
            "value byte 24: partition ids of 1000 entries needs at least 4000 bytes",
            {},
        ),
        (txn_key("a"), V0_HEAD + struct.pack(">i", 0) + bytes(12), "value byte 29: start timestamp needs 8 bytes", {}),
        (
            txn_key("a"),
            V1_HEAD + b"\xff\xff\xff\xff\xff\x01",
            "value byte 17: transaction partitions length varint",
            {},
        ),
        (txn_key("a"), V1_HEAD + b"\x80", "value byte 17: transaction partitions length ends inside its varint", {}),
        (
            txn_key("a"),
            V1_HEAD + b"\x00" + V1_TIMES + b"\x01\x00\x04" + bytes(4),
            "value byte 35: tag 0 (previous_producer_id) has 4 bytes, expected 8",
            {"start_timestamp_ms": 1},
        ),
        (
            txn_key("a"),
            V1_HEAD + b"\x00" + V1_TIMES + b"\x01\x01\x08" + bytes(3),
            "value byte 35: tag 1 of 8 bytes",
            {},
        ),
        (
            txn_key("a"),
            V1_HEAD + b"\x00" + V1_TIMES + b"\x02\x01\x08" + bytes(8) + b"\x00\x08" + bytes(8),
            "value byte 45: tag 0 does not follow tag 1",
            {"next_producer_id": 0},
        ),
        (txn_key("a"), V1_HEAD + b"\x00" + V1_TIMES + b"\x7f", "value byte 34: tagged fields of 127 entries", {}),
    ],
)
def test_malformed_transaction_log_records_name_the_byte(key, value, error, kept):
    row = decode_transaction_log(key, value)
    assert row["decode_error"].startswith(error), row["decode_error"]
    assert kept.items() <= row.items()


# --- OffsetCommitKey / OffsetCommitValue ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (0, {"leader_epoch": None, "expire_timestamp": None}),
        (1, {"leader_epoch": None, "expire_timestamp": 9000}),
        (2, {"leader_epoch": None, "expire_timestamp": None}),
        (3, {"leader_epoch": 4, "expire_timestamp": None}),
        (4, {"leader_epoch": 4, "expire_timestamp": None}),
    ],
)
def test_offset_commit_value_versions(version, expected):
    value = offset_value(version, 1234, "meta", 1700, leader_epoch=4, expire=9000)
    for key_version in (0, 1):
        row = decode_offset_commit(offset_key("my-group", "input", 3, key_version), value)
        assert {name: row.get(name) for name in expected} == expected
        assert (row["key_version"], row["group"], row["committed_topic"], row["committed_partition"]) == (
            key_version,
            "my-group",
            "input",
            3,
        )
        assert (row["value_version"], row["committed_offset"], row["metadata"], row["commit_timestamp"]) == (
            version,
            1234,
            "meta",
            1700,
        )
        assert row["is_tombstone"] is False and "decode_error" not in row


def test_offset_commit_tombstone_and_group_metadata():
    assert decode_offset_commit(offset_key("g", "t", 0), None) == {
        "key_version": 1,
        "group": "g",
        "committed_topic": "t",
        "committed_partition": 0,
        "is_tombstone": True,
    }
    # GroupMetadataKey: not an offset commit; only its version is reported, whatever the value holds.
    assert decode_offset_commit(struct.pack(">h", 2) + string("g"), b"\x00\x03anything") == {"key_version": 2}


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        (struct.pack(">h", 5) + string("g"), None, "key byte 0: key version 5 is not an OffsetCommitKey"),
        (struct.pack(">h", -1), None, "key byte 0: key version -1 is not an OffsetCommitKey"),
        (struct.pack(">h", 1) + string("g") + string("t") + b"\x00", None, "key byte 8: partition needs 4 bytes"),
        (offset_key("g", "t", 0), struct.pack(">hq", 5, 1), "value byte 0: value version 5 is not"),
        (offset_key("g", "t", 0), struct.pack(">hqh", 3, 1, 0), "value byte 10: leader epoch needs 4 bytes, 2 left"),
        (offset_key("g", "t", 0), struct.pack(">hqh", 0, 1, 99), "value byte 10: metadata of 99 bytes runs past"),
        (offset_key("g", "t", 0), struct.pack(">hqi", 4, 1, 0) + b"\x05ab", "value byte 14: metadata of 4 bytes"),
        (offset_key("g", "t", 0), offset_value(1, 1, "", 2)[:-3], "value byte 20: expire timestamp needs 8 bytes"),
    ],
)
def test_malformed_offset_commits_name_the_byte(key, value, error):
    assert decode_offset_commit(key, value)["decode_error"].startswith(error)


# --- whole batches ---------------------------------------------------------------------------------------


def header_of(entry: bytes) -> dict:
    [header] = decode_segment(entry).to_pylist()
    return header


def test_batch_rows_carry_record_offsets_timestamps_and_batch_fields():
    keys = [txn_key("a"), txn_key("b")]
    values = [txn_value_v0(1, 0, 100, 0, None, 5, -1), None]
    entry = encode_batch(
        40,
        values,
        partition_leader_epoch=7,
        base_timestamp=1000,
        max_timestamp=1003,
        compression=COMPRESSION_GZIP,
        keys=keys,
    )
    rows = transaction_log_rows(entry, header_of(entry))
    assert [(row["record_offset"], row["record_timestamp"], row["transactional_id"]) for row in rows] == [
        (40, 1000, "a"),
        (41, 1003, "b"),
    ]
    assert {
        (
            row["batch_base_offset"],
            row["batch_timestamp"],
            row["partition_leader_epoch"],
            row["batch_compression"],
            row["batch_producer_id"],
            row["batch_is_transactional"],
        )
        for row in rows
    } == {(40, 1003, 7, COMPRESSION_GZIP, -1, False)}
    assert rows[1]["is_tombstone"] is True


def test_log_append_time_batches_give_records_the_batch_timestamp():
    entry = encode_batch(0, [None], base_timestamp=1000, max_timestamp=2000, timestamp_type=1, keys=[txn_key("a")])
    [row] = transaction_log_rows(entry, header_of(entry))
    assert row["record_timestamp"] == 2000


def test_a_batch_with_unreadable_records_becomes_one_row_naming_the_byte():
    entry = bytearray(encode_batch(0, [None], keys=[txn_key("a")]))
    struct.pack_into(">i", entry, 57, 2)  # two records announced, one present
    header = header_of(bytes(entry))
    [row] = transaction_log_rows(bytes(entry), header)
    assert re.fullmatch(r"records unreadable at byte \d+ of the batch: .+", row["decode_error"]), row
    assert (row["batch_base_offset"], row["position"], row.get("transactional_id")) == (0, 0, None)
    [offsets] = offset_commit_rows(bytes(entry), header)
    assert offsets["decode_error"] == row["decode_error"]


def test_byte_ranges_of_a_segment_decode_what_one_pass_decodes(tmp_path: Path):
    """The executor side of the Spark reader: ranges of a split segment, then a file that cannot be read."""
    batches = [encode_batch(offset, [None], keys=[txn_key(f"id-{offset}")]) for offset in range(6)]
    path = tmp_path / "__transaction_state-3" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(b"".join(batches))
    segment = SegmentFile(str(path), "__transaction_state", 3, 1, 0, path.stat().st_size)

    def rows_of(piece: SegmentFile) -> list[dict]:
        return [row for rows in range_rows(piece, transaction_log_rows, False) for row in rows]

    whole = rows_of(segment)
    assert [(row["transactional_id"], row["position"]) for row in whole] == [
        (f"id-{offset}", sum(map(len, batches[:offset]))) for offset in range(6)
    ]
    assert {(row["topic"], row["partition"], row["broker_id"], row["source_format"]) for row in whole} == {
        ("__transaction_state", 3, 1, "segment")
    }
    pieces = split_segment(segment, 50)
    assert len(pieces) > len(batches)
    assert [row for piece in pieces for row in rows_of(piece)] == whole

    [unreadable] = rows_of(replace(segment, location=str(tmp_path / "gone.log")))
    assert unreadable["decode_error"].startswith("cannot read the file: ")
    assert (unreadable["position"], unreadable["source_file"]) == (0, str(tmp_path / "gone.log"))


# --- published broker data -------------------------------------------------------------------------------

TRANSACTION_LOG_SAMPLES = (
    "klog-testWithTransactionLogDecoder-L204",
    "fvaleri-strimzi-debugging-session010-03",
    "ableasdale-kafka-transactions-README-09",
    "ableasdale-kafka-transactions-README-12",
)
PRINTED_TEXT = re.compile(
    r"key: transaction_metadata::transactionalId=(?P<id>\S+) payload: "
    r"producerId:(?P<pid>\d+),producerEpoch:(?P<epoch>\d+),state=(?P<state>\w+),partitions=\[(?P<partitions>[^\]]*)\],txnLastUpdateTimestamp=(?P<update>\d+)"
    r",txnTimeoutMs=(?P<timeout>\d+)"
)


def printed_transaction_log(printed: str) -> tuple:
    """The fields a `--transaction-log-decoder` line prints, read here independently of dumplog."""
    match = PRINTED_TEXT.fullmatch(printed)
    partitions = sorted(filter(None, match["partitions"].split(",")))
    return (
        match["id"],
        int(match["pid"]),
        int(match["epoch"]),
        match["state"],
        partitions,
        int(match["update"]),
        int(match["timeout"]),
    )


def decoded_transaction_log(row: dict) -> tuple:
    partitions = sorted(f"{entry['topic']}-{p}" for entry in row["partitions"] or [] for p in entry["partitions"])
    return (
        row["transactional_id"],
        row["producer_id"],
        row["producer_epoch"],
        row["state_name"],
        partitions,
        row["last_update_timestamp_ms"],
        row["transaction_timeout_ms"],
    )


@pytest.mark.realdata
def test_rebuilt_transaction_state_batches_decode_to_the_printed_records(realdata: Path):
    vectors = [
        path
        for sample in TRANSACTION_LOG_SAMPLES
        for path in sorted((realdata / "reconstructed-from-dump" / "vectors").glob(f"{sample}__off*.json"))
    ]
    assert len(vectors) == 7 + 5 + 4 + 4
    for path in vectors:
        vector = json.loads(path.read_text())
        entry = bytes.fromhex(vector["hex"])
        rows = transaction_log_rows(entry, header_of(entry))
        printed = vector["expected_records_from_broker_dump"]
        assert len(rows) == len(printed), path.name
        for row, record in zip(rows, printed, strict=True):
            assert decoded_transaction_log(row) == printed_transaction_log(record["printed"]), path.name
            assert (row["record_offset"], row["record_timestamp"]) == (record["offset"], record["timestamp"])
            assert (
                row["key_version"],
                row["value_version"],
                row.get("decode_error"),
            ) == (
                0,
                0,
                None,
            )
            # The state the text names is the one the bytes hold; Empty is stored with a null partition array.
            assert row["start_timestamp_ms"] == -1 if row["state_name"] == "Empty" else row["start_timestamp_ms"] > 0
            assert row["partitions"] is None if row["state_name"] == "Empty" else row["partitions"] is not None


@pytest.mark.realdata
def test_rebuilt_transaction_state_segments_decode_whole(realdata: Path):
    """The rebuilt segments walked entry by entry as the Spark reader does: one row per printed record."""
    for sample in TRANSACTION_LOG_SAMPLES:
        data = (realdata / "reconstructed-from-dump" / "segments" / f"{sample}.log").read_bytes()
        rows = [
            row
            for header in decode_segment(data).to_pylist()
            for row in transaction_log_rows(
                data[header["position"] : header["position"] + header["size_bytes"]], header
            )
        ]
        printed = [
            printed_transaction_log(line.split(" headerKeys: [] ", 1)[1])
            for line in (realdata / "dumplog-text" / f"{sample}.txt").read_text().splitlines()
            if "transaction_metadata::" in line
        ]
        assert [decoded_transaction_log(row) for row in rows] == printed, sample
        assert [row["record_offset"] for row in rows] == list(range(len(printed)))


@pytest.mark.realdata
def test_rebuilt_transactional_offset_commit_decodes_to_the_printed_json(realdata: Path):
    vector = json.loads(
        (
            realdata / "reconstructed-from-dump" / "vectors" / "fvaleri-strimzi-debugging-session010-02__off7.json"
        ).read_text()
    )
    entry = bytes.fromhex(vector["hex"])
    [row] = offset_commit_rows(entry, header_of(entry))
    [record] = vector["expected_records_from_broker_dump"]
    key_text, value_text = record["printed"].removeprefix("key: ").split(" payload: ")
    key, value = json.loads(key_text), json.loads(value_text)
    assert (row["key_version"], row["group"], row["committed_topic"], row["committed_partition"]) == (
        int(key["type"]),
        key["data"]["group"],
        key["data"]["topic"],
        key["data"]["partition"],
    )
    assert (row["value_version"], row["committed_offset"], row["leader_epoch"], row["metadata"]) == (
        int(value["version"]),
        value["data"]["offset"],
        value["data"]["leaderEpoch"],
        value["data"]["metadata"],
    )
    assert row["commit_timestamp"] == value["data"]["commitTimestamp"]
    assert (row["producer_id"], row["producer_epoch"], row["record_offset"]) == (1, 0, 7)


# --- kafka-dump-log text ---------------------------------------------------------------------------------

DUMP_BATCH = (
    "baseOffset: {offset} lastOffset: {offset} count: 1 baseSequence: {sequence} lastSequence: {sequence} "
    "producerId: {pid} producerEpoch: {epoch} partitionLeaderEpoch: 3 isTransactional: {txn} isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: {position} CreateTime: 1781778768196 size: 129 magic: 2 "
    "compresscodec: none crc: 1 isvalid: true"
)
DUMP_RECORD = (
    "| offset: {offset} CreateTime: 1781778768196 keySize: 15 valueSize: 45 sequence: {sequence} headerKeys: [] {tail}"
)


def dump(path: str, *records: tuple[str, dict]) -> str:
    """A dump of `path`: one batch line and one record line per (tail, batch fields) pair."""
    lines = [f"Dumping {path}", "Log starting offset: 0"]
    for offset, (tail, batch) in enumerate(records):
        fields = {"offset": offset, "position": 129 * offset, "pid": -1, "epoch": -1, "sequence": -1, "txn": "false"}
        fields.update(batch)
        lines += [DUMP_BATCH.format(**fields), DUMP_RECORD.format(tail=tail, **fields)]
    return "\n".join(lines)


TXN_STATE_PATH = "/data/__transaction_state-30/00000000000000000000.log"
OFFSETS_PATH = "/data/__consumer_offsets-12/00000000000000000000.log"
TXN = {"pid": 9, "epoch": 2, "sequence": 0, "txn": "true"}


def test_dump_json_transaction_log_of_4x():
    # Spec §4.4(e), then the pre-KAFKA-20712 numeric status with the pre-#18505 `type` wrapper, and a tombstone.
    text = dump(
        TXN_STATE_PATH,
        (
            'key: {"type":"0","data":{"transactionalId":"kafka-txn-0"}} payload: {"version":"1","data":{"producerId":0,'
            '"previousProducerId":0,"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":"Empty",'
            '"transactionPartitions":null,"transactionLastUpdateTimestampMs":1781778768194,'
            '"transactionStartTimestampMs":-1}}',
            {},
        ),
        (
            'key: {"type":"0","data":{"transactionalId":"a payload: b"}} payload: {"type":"1","data":{"producerId":5,'
            '"producerEpoch":1,"transactionTimeoutMs":100,"transactionStatus":4,"transactionPartitions":[{"topic":'
            '"t","partitionIds":[0,2]}],"transactionLastUpdateTimestampMs":7,"transactionStartTimestampMs":6,'
            '"clientTransactionVersion":2}}',
            {},
        ),
        ('key: {"type":"0","data":{"transactionalId":"kafka-txn-0"}} payload: <DELETE>', {}),
    )
    parsed = parse_dump(text, "dump.txt")
    assert parsed.line_counts[UNKNOWN] == 0
    first, second, tombstone = parsed.transaction_log
    assert (first["topic"], first["partition"], first["transactional_id"], first["state"], first["state_name"]) == (
        "__transaction_state",
        30,
        "kafka-txn-0",
        0,
        "Empty",
    )
    assert (first["value_version"], first["partitions"], first["start_timestamp_ms"]) == (1, None, -1)
    assert (first["previous_producer_id"], first["next_producer_id"], first["client_transaction_version"]) == (0, -1, 0)
    assert (first["partition_leader_epoch"], first["batch_producer_id"], first["record_timestamp"]) == (
        3,
        -1,
        1781778768196,
    )
    assert (second["transactional_id"], second["state_name"], second["client_transaction_version"]) == (
        "a payload: b",
        "CompleteCommit",
        2,
    )
    assert second["partitions"] == [{"topic": "t", "partitions": [0, 2]}]
    assert (tombstone["is_tombstone"], tombstone.get("producer_id"), tombstone["record_offset"]) == (True, None, 2)
    assert all("decode_error" not in row for row in parsed.transaction_log)


def test_dump_text_transaction_log_of_0_11_to_2_4_and_deep_lines():
    text = "\n".join(
        [
            "Dumping /data/__transaction_state-4/00000000000000000000.log",
            "Starting offset: 0",
            "offset: 0 position: 0 CreateTime: 1552341204207 isvalid: true keysize: 12 valuesize: 60 magic: 2 "
            "compresscodec: NONE producerId: -1 producerEpoch: -1 sequence: -1 isTransactional: false headerKeys: [] "
            "key: transactionalId=t1 payload: producerId:3,producerEpoch:1,state=Ongoing,"
            "partitions=Set(orders-0, orders-2, pay-1),txnLastUpdateTimestamp=77,txnTimeoutMs=60000",
        ]
    )
    [row] = parse_dump(text, "old.txt").transaction_log
    assert (row["transactional_id"], row["producer_id"], row["producer_epoch"], row["state_name"]) == (
        "t1",
        3,
        1,
        "Ongoing",
    )
    assert row["partitions"] == [{"topic": "orders", "partitions": [0, 2]}, {"topic": "pay", "partitions": [1]}]
    assert (row["batch_base_offset"], row["position"], row["batch_producer_id"], row["partition_leader_epoch"]) == (
        0,
        0,
        -1,
        None,
    )


def test_dump_records_the_decoder_could_not_decode_are_rows_with_errors():
    text = dump(
        TXN_STATE_PATH,
        ("key: unknown::version=1", {}),
        ("key: Unknown record type 9 at offset 1, skipping.", {}),
        ("key: Error at offset 2, skipping. Buffer underflow", {}),
        ("key: raw-bytes payload: \ufffd\ufffd", {}),
        (
            "key: transaction_metadata::transactionalId=t payload: producerId:99999999999999999999,producerEpoch:0,"
            "state=Empty,partitions=[],txnLastUpdateTimestamp=1,txnTimeoutMs=1",
            {},
        ),
        (
            "key: transaction_metadata::transactionalId=t payload: producerId:0,producerEpoch:0,state=Empty,"
            f"partitions=[],txnLastUpdateTimestamp={'9' * 5000},txnTimeoutMs=1",
            {},
        ),
        ('key: {"type":"0","data":{"transactionalId":"t"}} payload: {"version":"1","data":{"producerId":"x"}}', {}),
        ('key: {"type":"0","data":{"transactionalId":"t"}} payload: {not json', {}),
        ("payload: without key", {}),
        ("", {}),
    )
    parsed = parse_dump(text, "bad.txt")
    errors = [(row.get("key_version"), row["decode_error"]) for row in parsed.transaction_log]
    assert errors == [
        (1, "kafka-dump-log printed 'unknown::version=1'"),
        (9, "kafka-dump-log printed 'Unknown record type 9 at offset 1, skipping.'"),
        (None, "kafka-dump-log could not decode the record: Buffer underflow"),
        (None, "key is not --transaction-log-decoder output"),
        (0, "producerId 99999999999999999999 is not an int64"),
        (0, f"txnLastUpdateTimestamp {'9' * 60} is not an int64"),
        (0, "producerId 'x' is not an int64"),
        (0, "payload is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        (None, "record has no key"),
        (None, "the dump does not print the record (no --print-data-log or decoder option)"),
    ]
    assert parsed.line_counts[UNKNOWN] == 0


def test_dump_offset_commits_of_transactional_batches_only():
    text = dump(
        OFFSETS_PATH,
        (
            'key: {"type":"1","data":{"group":"g","topic":"in","partition":0}} payload: {"version":"3","data":'
            '{"offset":1,"leaderEpoch":-1,"metadata":"","commitTimestamp":5}}',
            {},
        ),  # not transactional: left out
        (
            'key: {"type":"1","data":{"group":"g","topic":"in","partition":0}} payload: {"version":"3","data":'
            '{"offset":8,"leaderEpoch":2,"metadata":"m","commitTimestamp":6}}',
            TXN,
        ),
        (
            'key: {"type":"0","data":{"group":"g","topic":"in","partition":1}} payload: {"version":"1","data":'
            '{"offset":9,"metadata":"","commitTimestamp":6,"expireTimestamp":99}}',
            TXN,
        ),
        ('key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{}}', TXN),
        ("key: offset_commit::group=g2,partition=my-topic-3 payload: offset=4,metadata=x", TXN),
        ("key: offset::g3:other:7 payload: 12:meta", TXN),
        ("key: group_metadata::group=g payload: {}", TXN),
        ('key: {"type":"1","data":{"group":"g","topic":"in","partition":0}} payload: <DELETE>', TXN),
    )
    rows = parse_dump(text, "offsets.txt").offset_commit_records
    assert [
        (
            row["record_offset"],
            row.get("key_version"),
            row.get("group"),
            row.get("committed_topic"),
            row.get("committed_partition"),
            row.get("committed_offset"),
            row.get("leader_epoch"),
            row.get("metadata"),
            row.get("expire_timestamp"),
            row.get("is_tombstone"),
        )
        for row in rows
    ] == [
        (1, 1, "g", "in", 0, 8, 2, "m", None, False),
        (2, 0, "g", "in", 1, 9, None, "", 99, False),
        (3, 2, None, None, None, None, None, None, None, None),
        (4, None, "g2", "my-topic", 3, 4, None, "x", None, False),
        (5, None, "g3", "other", 7, 12, None, "meta", None, False),
        (6, 2, None, None, None, None, None, None, None, None),
        (7, 1, "g", "in", 0, None, None, None, None, True),
    ]
    assert {(row["producer_id"], row["producer_epoch"], row["topic"], row["partition"]) for row in rows} == {
        (9, 2, "__consumer_offsets", 12)
    }
    assert all("decode_error" not in row for row in rows)


# Read off the published files: (transactional id, producer id, epoch, state, partitions) per decoded record.
KLOG_CYCLE = [
    ("my-txnal-id", 0, 0, "Empty", []),
    ("my-txnal-id", 0, 0, "Ongoing", ["transactional-foo-0"]),
    ("my-txnal-id", 0, 0, "PrepareCommit", ["transactional-foo-0"]),
    ("my-txnal-id", 0, 0, "CompleteCommit", []),
    ("my-txnal-id", 0, 0, "Ongoing", ["transactional-foo-0"]),
    ("my-txnal-id", 0, 0, "PrepareCommit", ["transactional-foo-0"]),
    ("my-txnal-id", 0, 0, "CompleteCommit", []),
]
PUBLISHED_TRANSACTION_LOGS = {
    "klog-testWithTransactionLogDecoder-L204.txt": ("__transaction_state", 4, KLOG_CYCLE),
    "fvaleri-strimzi-debugging-session010-03.txt": (
        "__transaction_state",
        30,
        [
            ("kafka-txn-0", 1, 0, "Empty", []),
            ("kafka-txn-0", 1, 0, "Ongoing", ["output-topic-0"]),
            ("kafka-txn-0", 1, 0, "Ongoing", ["__consumer_offsets-12", "output-topic-0"]),
            ("kafka-txn-0", 1, 0, "PrepareCommit", ["__consumer_offsets-12", "output-topic-0"]),
            ("kafka-txn-0", 1, 0, "CompleteCommit", []),
        ],
    ),
    "ableasdale-kafka-transactions-README-09.txt": (
        "__transaction_state",
        0,
        [
            ("txn-2", 0, 0, "Empty", []),
            ("txn-2", 0, 0, "Ongoing", ["transaction-topic-0"]),
            ("txn-2", 0, 0, "PrepareAbort", ["transaction-topic-0"]),
            ("txn-2", 0, 0, "CompleteAbort", []),
        ],
    ),
    "strimzi-blog-2023-05-03-kafka-transactions-02.txt": (
        "__transaction_state",
        30,
        [
            ("kafka-txn-0", 0, 0, "Empty", []),
            ("kafka-txn-0", 0, 0, "Ongoing", ["output-topic-0"]),
            ("kafka-txn-0", 0, 0, "Ongoing", ["__consumer_offsets-12", "output-topic-0"]),
            ("kafka-txn-0", 0, 0, "PrepareCommit", ["__consumer_offsets-12", "output-topic-0"]),
            ("kafka-txn-0", 0, 0, "CompleteCommit", []),
        ],
    ),
}


@pytest.mark.realdata
@pytest.mark.parametrize("name", sorted(PUBLISHED_TRANSACTION_LOGS))
def test_published_transaction_log_dumps(realdata: Path, name: str):
    topic, partition, expected = PUBLISHED_TRANSACTION_LOGS[name]
    parsed = parse_dump((realdata / "dumplog-text" / name).read_text(), name)
    rows = parsed.transaction_log
    assert [
        (
            row["transactional_id"],
            row["producer_id"],
            row["producer_epoch"],
            row["state_name"],
            sorted(f"{entry['topic']}-{p}" for entry in row["partitions"] for p in entry["partitions"]),
        )
        for row in rows
    ] == expected
    assert {(row["topic"], row["partition"], row["key_version"], row.get("decode_error")) for row in rows} == {
        (topic, partition, 0, None)
    }
    assert [row["record_offset"] for row in rows] == list(range(len(expected)))


@pytest.mark.realdata
def test_published_offset_commit_dumps(realdata: Path):
    def records(name: str) -> list[tuple]:
        parsed = parse_dump((realdata / "dumplog-text" / name).read_text(errors="replace"), name)
        return [
            (
                row["partition"],
                row["producer_id"],
                row["record_offset"],
                row.get("group"),
                row.get("committed_topic"),
                row.get("committed_partition"),
                row.get("committed_offset"),
                row.get("decode_error"),
            )
            for row in parsed.offset_commit_records
        ]

    # JSON of 3.5+ (OffsetCommitKey v1, value v3), the 3.x text, and a dump without --offsets-decoder.
    assert records("fvaleri-strimzi-debugging-session010-02.txt") == [(12, 1, 7, "my-group", "input-topic", 0, 1, None)]
    assert records("fvaleri-strimzi-debugging-session008-5f15e509-L93.txt") == [
        (12, 0, 1, "my-group", "wc-input", 0, 1, None)
    ]
    assert records("faderskd-blog-2023-11-29-kafka-transactions-02.txt") == [
        (47, 2000, 11, None, None, None, None, "key is not --offsets-decoder output")
    ]
