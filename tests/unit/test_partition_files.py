"""Files beside the segments: real broker snapshots, checkpoints and indexes, and corrupted copies (their discovery
and Spark reader are tests/integration/test_partition_files_reader.py)."""

from __future__ import annotations

import json
import struct

import pytest

from pipeline.sources.kafka_format.encoding import encode_batch, encode_txnindex_entry
from pipeline.sources.kafka_format.windows import decode_segment
from pipeline.sources.partition_files.binary_files import decode_producer_snapshot, decode_txn_index
from pipeline.sources.partition_files.discovery import naming_problem
from pipeline.sources.partition_files.entries import FormatProblem
from pipeline.sources.partition_files.index_checks import (
    check_offset_index,
    check_time_index,
)
from pipeline.sources.partition_files.text_files import (
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
)
from tests.partition_file_bytes import (
    PRODUCER_FIELDS,
    SNAPSHOT_FIELDS,
    TIMESTAMP,
    offset_index,
    snapshot_bytes,
    time_index,
)

# producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset
IDLE_PRODUCER = (7, 2, 41, 120, 4, 1767225600000, -1, -1)
OPEN_TXN_PRODUCER = (9, 0, 3, 130, 1, 1767225601000, 5, 128)


# --- real broker files ------------------------------------------------------------------------------


@pytest.mark.realdata
def test_real_snapshots_decode_to_the_expected_fields(realdata):
    root = realdata / "broker-segments"
    expected_files = sorted((root / "_expected").glob("*.snapshot.json"))
    assert len(expected_files) == 14
    for expected_file in expected_files:
        expected = json.loads(expected_file.read_text())
        rows = decode_producer_snapshot((root / expected["file"]).read_bytes())
        assert {(row["file_status"], row["version"], row["crc_valid"]) for row in rows} == {("ok", 1, True)}
        assert expected["crcValid"] and expected["trailingBytes"] == 0
        if not expected["entries"]:  # an empty snapshot still shows up, as one row without a producer
            assert [row["producer_id"] for row in rows] == [None]
            continue
        decoded = [{name: row[name] for name in PRODUCER_FIELDS} for row in rows]
        assert decoded == [
            {
                column: None if json_name == "currentTxnFirstOffset" and entry[json_name] == -1 else entry[json_name]
                for json_name, column in SNAPSHOT_FIELDS.items()
            }
            for entry in expected["entries"]
        ], expected["file"]


@pytest.mark.realdata
def test_real_checkpoints_and_partition_metadata(realdata):
    root = realdata / "broker-segments"
    epoch_files = sorted(root.rglob("leader-epoch-checkpoint"))
    assert len(epoch_files) == 17
    for path in epoch_files:
        rows, problems = decode_leader_epoch_checkpoint(path.read_text())
        assert problems == [] and rows, path
    cart = root / "LestFeeD+online-shop-user/kafka/data/cart-product-request-0"
    rows, _ = decode_leader_epoch_checkpoint((cart / "leader-epoch-checkpoint").read_text())
    assert rows == [
        {"epoch": 30, "start_offset": 12, "line": 3},
        {"epoch": 32, "start_offset": 15, "line": 4},
        {"epoch": 38, "start_offset": 19, "line": 5},
    ]

    metadata_files = sorted(root.rglob("partition.metadata"))
    assert len(metadata_files) == 17
    for path in metadata_files:  # written without a final line break
        row, problems = decode_partition_metadata(path.read_text())
        assert problems == [] and row["version"] == 0 and len(row["topic_id"]) == 22, path
    assert (
        decode_partition_metadata((cart / "partition.metadata").read_text())[0]["topic_id"] == "1qqJytXMSWeR5tv_Z0us9g"
    )
    # KRaft's metadata topic has the reserved id 1, which is not the zero UUID
    cluster_metadata = root / "jeyaprakash123+JP_ECommerceApp/data/kafka/__cluster_metadata-0/partition.metadata"
    assert decode_partition_metadata(cluster_metadata.read_text()) == (
        {"version": 0, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"},
        [],
    )

    log_dir = root / "LestFeeD+online-shop-user/kafka/data"
    replication, problems = decode_offset_checkpoint((log_dir / "replication-offset-checkpoint").read_text())
    assert problems == [] and len(replication) == 62
    assert {"topic": "user-request", "partition": 0, "offset": 100} in [
        {key: row[key] for key in ("topic", "partition", "offset")} for row in replication
    ]
    cleaner, problems = decode_offset_checkpoint((log_dir / "cleaner-offset-checkpoint").read_text())
    assert problems == [] and [(row["topic"], row["partition"], row["offset"]) for row in cleaner] == [
        ("__consumer_offsets", 25, 63),
        ("__consumer_offsets", 45, 36),
    ]
    assert decode_offset_checkpoint((log_dir / "log-start-offset-checkpoint").read_text()) == ([], [])


@pytest.mark.realdata
def test_real_index_files_match_their_segments(realdata):
    indexes = sorted((realdata / "broker-segments").rglob("*.index"))
    assert len(indexes) == 16
    checked_entries = 0
    for index in indexes:
        log_bytes = index.with_suffix(".log").read_bytes()

        def read_log(position, length, log_bytes=log_bytes):
            return log_bytes[position : position + length]

        base_offset = int(index.stem)
        assert check_offset_index(index.read_bytes(), base_offset, read_log) == [], index
        time_index = index.with_suffix(".timeindex").read_bytes()
        assert check_time_index(time_index, base_offset, index.read_bytes(), read_log) == [], index
        checked_entries += len(index.read_bytes()) // 8 + len(time_index) // 12
    assert checked_entries == 42


# --- .txnindex and .snapshot bytes ------------------------------------------------------------------


def test_txn_index_entries_and_truncated_tail():
    data = encode_txnindex_entry(2000, 8, 12, 13) + encode_txnindex_entry(2001, 14, 20, 14)
    rows = decode_txn_index(data + b"\x00" * 20)
    assert rows == [
        {
            "version": 0,
            "producer_id": 2000,
            "first_offset": 8,
            "last_offset": 12,
            "last_stable_offset": 13,
            "entry_status": "ok",
            "position": 0,
        },
        {
            "version": 0,
            "producer_id": 2001,
            "first_offset": 14,
            "last_offset": 20,
            "last_stable_offset": 14,
            "entry_status": "ok",
            "position": 34,
        },
        {
            "version": None,
            "producer_id": None,
            "first_offset": None,
            "last_offset": None,
            "last_stable_offset": None,
            "entry_status": "truncated",
            "position": 68,
        },
    ]
    assert decode_txn_index(b"") == []
    # the whole int16 is the version, not only its first byte as the broker reads it
    assert decode_txn_index(b"\x00\x01" + data[2:34])[0]["version"] == 1


def test_snapshot_entries_and_the_minus_one_conventions():
    rows = decode_producer_snapshot(snapshot_bytes([IDLE_PRODUCER, OPEN_TXN_PRODUCER]))
    assert [{name: row[name] for name in PRODUCER_FIELDS} for row in rows] == [
        dict(zip(PRODUCER_FIELDS, (*IDLE_PRODUCER[:-1], None), strict=True)),  # -1: no open transaction
        dict(zip(PRODUCER_FIELDS, OPEN_TXN_PRODUCER, strict=True)),
    ]
    assert {(row["version"], row["crc_valid"], row["file_status"], row["file_note"]) for row in rows} == {
        (1, True, "ok", None)
    }
    marker_only = (11, 1, -1, -1, 0, 1767225602000, 3, -1)  # no data batch retained: raw -1 values stay
    [row] = decode_producer_snapshot(snapshot_bytes([marker_only]))
    assert (row["last_sequence"], row["last_offset"], row["offset_delta"], row["coordinator_epoch"]) == (-1, -1, 0, 3)


@pytest.mark.parametrize(
    ("damage", "status", "crc_valid", "note"),
    [
        (lambda data: data[:20] + bytes([data[20] ^ 0x01]) + data[21:], "crc_mismatch", False, "stored CRC-32C"),
        (lambda data: b"\x00\x02" + data[2:], "bad_version", True, "version 2"),
        (lambda data: data[:-10], "truncated", False, "2 entries need 102 bytes, the file has 92"),
        (lambda data: data + b"\x00\x00", "trailing_bytes", False, "2 bytes after the 2 entries"),
        (lambda data: data[:6] + struct.pack(">i", -1) + data[10:], "truncated", False, "negative entry count"),
        (lambda data: data[:8], "truncated", False, "8 bytes, shorter than the 10-byte header"),
        (lambda data: data[:1], "truncated", None, "1 bytes"),
    ],
)
def test_a_damaged_snapshot_gives_one_row_saying_why(damage, status, crc_valid, note):
    [row] = decode_producer_snapshot(damage(snapshot_bytes([IDLE_PRODUCER, OPEN_TXN_PRODUCER])))
    assert (row["file_status"], row["crc_valid"]) == (status, crc_valid)
    assert note in row["file_note"]
    assert all(row[name] is None for name in PRODUCER_FIELDS)


def test_an_empty_snapshot_is_one_ok_row_without_a_producer():
    [row] = decode_producer_snapshot(snapshot_bytes([]))
    assert (row["file_status"], row["version"], row["crc_valid"], row["producer_id"]) == ("ok", 1, True, None)


# --- text files ---------------------------------------------------------------------------------------


def test_leader_epoch_checkpoint_problems():
    rows, problems = decode_leader_epoch_checkpoint("0\r\n2\r\n0 0\r\n3 17\r\n")
    assert [(row["epoch"], row["start_offset"]) for row in rows] == [(0, 0), (3, 17)] and problems == []
    assert decode_leader_epoch_checkpoint("") == ([], [])

    rows, problems = decode_leader_epoch_checkpoint("1\n3\n0 0\n 2 5\n4 x\n5 2147483648000\n\n")
    assert [(row["epoch"], row["start_offset"], row["line"]) for row in rows] == [(0, 0, 3), (5, 2147483648000, 6)]
    assert problems == [
        FormatProblem(1, "line 1: version '1', expected 0"),
        FormatProblem(4, "line 4: ' 2 5' is not '<leader epoch> <start offset>'"),
        FormatProblem(5, "line 5: '4 x' is not '<leader epoch> <start offset>'"),
        FormatProblem(7, "line 7: '' is not '<leader epoch> <start offset>'"),
        FormatProblem(2, "line 2: the count says 3 entries, 5 lines follow"),
    ]
    _, problems = decode_leader_epoch_checkpoint("0\n-1\n")
    assert problems == [FormatProblem(2, "line 2: entry count '-1' is not a non-negative integer")]
    _, problems = decode_leader_epoch_checkpoint("0\n1\n2147483648 0\n")  # epochs are int32
    assert [problem.line for problem in problems] == [3]
    # Java accepts leading zeros; a number too long for int() is out of range, not an error of the reader.
    rows, problems = decode_leader_epoch_checkpoint(f"0\n1\n{'0' * 5000}7 -{'0' * 5000}5\n")
    assert [(row["epoch"], row["start_offset"]) for row in rows] == [(7, -5)] and problems == []
    rows, problems = decode_leader_epoch_checkpoint(f"0\n{'9' * 5000}\n0 {'9' * 5000}\n")
    assert rows == [] and [problem.line for problem in problems] == [2, 3]


def test_offset_checkpoint_problems():
    rows, problems = decode_offset_checkpoint("0\n2\norders 0 90\nmy topic 1 5\n")
    assert [(row["topic"], row["partition"], row["offset"]) for row in rows] == [("orders", 0, 90)]
    assert problems == [FormatProblem(4, "line 4: 'my topic 1 5' is not '<topic> <partition> <offset>'")]
    _, problems = decode_offset_checkpoint(f"0\n1\norders 0 {'9' * 5000}\n")
    assert [problem.line for problem in problems] == [3]


@pytest.mark.parametrize(
    ("text", "row", "problem"),
    [
        ("version: 0\ntopic_id: 5jK1nc-ESTeW8GD2TSa8PA\n", {"version": 0, "topic_id": "5jK1nc-ESTeW8GD2TSa8PA"}, None),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", {"version": 0, "topic_id": "AAAAAAAAAAAAAAAAAAAAAA"}, "zero"),
        ("version: 1\ntopic_id: 5jK1nc-ESTeW8GD2TSa8PA", {"version": 1, "topic_id": None}, "version 1, expected 0"),
        ("version: 0\n", {"version": 0, "topic_id": None}, "line 2: missing"),
        ("version: 0\ntopic: 5jK1nc-ESTeW8GD2TSa8PA", {"version": 0, "topic_id": None}, "is not 'topic_id: <uuid>'"),
        ("version: 0\ntopic_id: 5jK1nc+ESTeW8GD2TSa8PA", {"version": 0, "topic_id": None}, "not a URL-safe base64"),
        ("0\n", {"version": None, "topic_id": None}, "is not 'version: <number>'"),
        (f"version: {'9' * 5000}\n", {"version": None, "topic_id": None}, "is not 'version: <number>'"),
        ("", {"version": None, "topic_id": None}, "the file is empty"),
    ],
)
def test_partition_metadata(text, row, problem):
    decoded, problems = decode_partition_metadata(text)
    assert decoded == row
    assert [problem in found.message for found in problems] == ([] if problem is None else [True])


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("00000000000000000090.log", None),
        ("00000000000000000090.timeindex", None),
        ("00000000000000000090.snapshot", None),
        ("leader-epoch-checkpoint", None),
        ("quorum-state", None),
        ("00000000000000000373-0000000005.checkpoint", None),  # KRaft snapshot, not a log segment
        (".gitkeep", None),
        ("00000000000000000090.log.swap", "leftover .swap file"),
        ("00000000000000000090.index.cleaned", "leftover .cleaned file"),
        ("00000000000000000012.snapshot.deleted", "leftover .deleted file"),
        ("90.log", "not a 20-digit"),
        ("00000000000000000090.log.bak", "not a 20-digit"),
        ("segment.index", "not a 20-digit"),
        ("99999999999999999999.log", "exceeds the int64 range"),
    ],
)
def test_file_naming(name, problem):
    found = naming_problem(name)
    assert found is None if problem is None else problem in found


# --- .index and .timeindex ------------------------------------------------------------------------------

BASE = 100


@pytest.fixture(scope="module")
def segment() -> bytes:
    """Three batches at offsets 100-102, 103-104 and 105-108, max timestamps 1, 2 and 3 s after TIMESTAMP."""
    return b"".join(
        encode_batch(base_offset, count, 5, 0, base_offset - BASE, base_timestamp=TIMESTAMP, max_timestamp=timestamp)
        for base_offset, count, timestamp in (
            (100, 3, TIMESTAMP + 1000),
            (103, 2, TIMESTAMP + 2000),
            (105, 4, TIMESTAMP + 3000),
        )
    )


@pytest.fixture(scope="module")
def positions(segment) -> list[int]:
    return decode_segment(segment)["position"].to_pylist()


def reader(data: bytes):
    return lambda position, length: data[position : position + length]


def test_a_correct_offset_index_with_a_preallocated_tail(segment, positions):
    index = offset_index((2, positions[0]), (4, positions[1]), (8, positions[2])) + bytes(8 * 100)
    assert check_offset_index(index, BASE, reader(segment)) == []
    assert check_offset_index(b"", BASE, None) == []


def test_a_preallocated_index_of_zeros_holds_no_entry(segment, positions):
    """The active segment's index before its first entry, as a copy of a running broker holds it."""
    assert check_offset_index(bytes(8 * 100), BASE, reader(segment)) == []
    assert check_time_index(bytes(12 * 100), BASE, bytes(8 * 100), reader(segment)) == []
    # a first entry for the base offset that points elsewhere than byte 0 is an entry, and is judged
    [problem] = check_offset_index(offset_index((0, positions[1])) + bytes(8 * 10), BASE, reader(segment))
    assert problem.message == f"entry for offset 100 points at byte {positions[1]}, where the batch ends at offset 104"


def test_offset_index_problems(segment, positions):
    [problem] = check_offset_index(offset_index((2, positions[1])), BASE, reader(segment))
    assert problem.position == 0
    assert problem.message == f"entry for offset 102 points at byte {positions[1]}, where the batch ends at offset 104"

    problems = check_offset_index(offset_index((4, positions[1]), (2, positions[0])), BASE, reader(segment))
    assert [(problem.position, problem.message) for problem in problems] == [(8, "relative offset 2 does not follow 4")]

    problems = check_offset_index(offset_index((2, positions[0])) + b"\x01\x02\x03", BASE, reader(segment))
    assert [(problem.position, problem.message) for problem in problems] == [
        (8, "size 11 is not a multiple of 8: 3 bytes after the entries")
    ]

    [problem] = check_offset_index(offset_index((2, len(segment))), BASE, reader(segment))
    assert f"the log has no entry header at byte {len(segment)}" in problem.message
    [problem] = check_offset_index(offset_index((2, -8)), BASE, reader(segment))
    assert "negative position -8" in problem.message
    [problem] = check_offset_index(offset_index((2, 0)), BASE, None)
    assert "no .log segment" in problem.message


def test_a_correct_time_index_with_or_without_an_offset_index(segment, positions):
    index = offset_index((2, positions[0]), (8, positions[2]))
    times = time_index((TIMESTAMP + 1000, 2), (TIMESTAMP + 2000, 4), (TIMESTAMP + 3000, 8)) + bytes(12 * 10)
    assert check_time_index(times, BASE, index, reader(segment)) == []
    assert check_time_index(times, BASE, b"", reader(segment)) == []  # found by walking the batch headers


def test_time_index_problems(segment, positions):
    times = time_index((TIMESTAMP + 1000, 2), (TIMESTAMP + 999, 4), (TIMESTAMP + 3000, 6), (TIMESTAMP + 4000, 20))
    problems = check_time_index(times, BASE, b"", reader(segment))
    assert [(problem.position, problem.message) for problem in problems] == [
        (12, f"timestamp {TIMESTAMP + 999} does not follow {TIMESTAMP + 1000}"),
        (12, f"entry for offset 104: timestamp {TIMESTAMP + 999}, but the batch's max timestamp is {TIMESTAMP + 2000}"),
        (24, f"entry for offset 106: no batch ends there (the batch at byte {positions[2]} ends at offset 108)"),
        (36, f"entry for offset 120: the log has no entry header at byte {len(segment)}"),
    ]
