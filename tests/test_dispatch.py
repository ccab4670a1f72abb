"""Input classification (driver-side listing) and the union of all readers."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.sources.dispatch import InputPlan, classify_inputs, read_inputs, read_partition_inputs
from schemas.batches import BATCHES

DUMP = """\
Dumping /kafka/orders-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 \
partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 \
CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true
"""
COLUMNAR_ROW = {
    "topic": "payments",
    "partition": 2,
    "entry_status": "ok",
    "segment_base_offset": 0,
    "position": 0,
    "source_file": "export",
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_kafka_log_directories_go_to_the_segment_reader(spark, realdata: Path):
    broker = realdata / "broker-segments" / "DucAnh1303+microservice"
    partition = broker / "kafka" / "data" / "order-0"
    internal = realdata / "broker-segments" / "jeyaprakash123+JP_ECommerceApp"
    plan = classify_inputs(spark, [str(broker), str(partition), str(internal)])
    assert plan == InputPlan(segment_roots=[str(broker), str(partition), str(internal)])


def test_dump_and_columnar_files_in_a_directory(spark, tmp_path: Path):
    write(tmp_path / "a.txt", DUMP)
    write(tmp_path / "nested" / "b.dump", DUMP)
    write(tmp_path / "c.jsonl", json.dumps(COLUMNAR_ROW) + "\n")
    write(tmp_path / "_sources.json", "{}")  # hidden like _SUCCESS: metadata, not data
    write(tmp_path / ".a.txt.crc", "")
    write(tmp_path / "README.md", "notes")
    write(tmp_path / "__consumer_offsets-12.txt", DUMP)  # named after an internal topic's partition: data
    write(tmp_path / "__transaction_state" / "30.out", DUMP)
    plan = classify_inputs(spark, [str(tmp_path), str(tmp_path / "a.txt")])
    assert sorted(plan.dump_files) == [
        str(tmp_path / "__consumer_offsets-12.txt"),
        str(tmp_path / "__transaction_state" / "30.out"),
        str(tmp_path / "a.txt"),
        str(tmp_path / "nested" / "b.dump"),
    ]
    assert plan.columnar_paths == [str(tmp_path / "c.jsonl")]
    assert plan.segment_roots == []


def test_a_directory_of_one_columnar_format_is_one_data_set(spark, tmp_path: Path):
    write(tmp_path / "export" / "topic=a" / "part-0.parquet", "")
    write(tmp_path / "export" / "_SUCCESS", "")
    plan = classify_inputs(spark, [str(tmp_path / "export")])
    assert plan == InputPlan(columnar_paths=[str(tmp_path / "export")])


def test_missing_and_unrecognised_inputs(spark, tmp_path: Path):
    with pytest.raises(InputError, match=r"nowhere: does not exist"):
        classify_inputs(spark, [str(tmp_path / "nowhere")])
    with pytest.raises(InputError, match=r"segment\.bin: unrecognised file type; accepted inputs: a Kafka log"):
        classify_inputs(spark, [str(write(tmp_path / "segment.bin", ""))])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty: holds no Kafka segments, dump text or columnar files"):
        classify_inputs(spark, [str(tmp_path / "empty")])


def test_read_inputs_unions_every_reader(spark, tmp_path: Path, monkeypatch):
    log_root = tmp_path / "broker-1"
    write(log_root / "orders-0" / "00000000000000000000.log", "")
    dump = write(tmp_path / "dumps" / "orders.txt", DUMP)
    export = write(tmp_path / "exports" / "payments.json", json.dumps(COLUMNAR_ROW) + "\n")
    settings = Settings()

    calls = []

    def read_segments(session, roots, given_settings, segments=None):
        calls.append((session, roots, given_settings, segments))
        return session.createDataFrame([], BATCHES)

    segments = types.ModuleType("pipeline.sources.segments")
    segments.read_segments = read_segments
    monkeypatch.setitem(sys.modules, "pipeline.sources.segments", segments)

    frame = read_inputs(spark, [str(log_root), str(dump), str(export)], settings)
    assert calls == [(spark, [str(log_root)], settings, None)]
    assert frame.schema == BATCHES
    rows = sorted((row.source_format, row.topic, row.partition) for row in frame.collect())
    assert rows == [("columnar", "payments", 2), ("dumplog", "orders", 0)]


def test_snapshot_and_txn_index_dumps_reach_their_tables(spark, tmp_path: Path):
    """Dumped `.txnindex` and `.snapshot` files give the txn_index and producer_snapshots rows of the binary
    readers; a snapshot dumped without producer lines is a snapshot without entries, still seen."""
    dump = write(
        tmp_path / "side.txt",
        DUMP
        + "Dumping /kafka/orders-0/00000000000000000000.txnindex\n"
        + "version: 0 producerId: 4 firstOffset: 10 lastOffset: 15 lastStableOffset: 10\n"
        + "Dumping /kafka/orders-0/00000000000000000016.snapshot\n"
        + "producerId: 4 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: OptionalLong.empty "
        + "lastTimestamp: 9 firstSequence: 0 lastSequence: 4 lastOffset: 14 offsetDelta: 4 timestamp: 9\n"
        + "Dumping /kafka/orders-0/00000000000000000020.snapshot\n",
    )
    files = read_partition_inputs(spark, [str(dump)], Settings())
    [entry] = files.txn_index.collect()
    assert (entry.topic, entry.partition, entry.producer_id, entry.last_offset, entry.entry_status) == (
        "orders",
        0,
        4,
        15,
        "ok",
    )
    snapshots = sorted(files.producer_snapshots.collect(), key=lambda row: row.snapshot_offset)
    assert [(row.snapshot_offset, row.producer_id, row.last_sequence, row.file_status) for row in snapshots] == [
        (16, 4, 4, "ok"),
        (20, None, None, "ok"),
    ]
    assert files.leader_epochs.count() == files.checkpoints.count() == files.file_problems.count() == 0
    columnar = write(tmp_path / "c.jsonl", json.dumps(COLUMNAR_ROW))
    assert read_partition_inputs(spark, [str(columnar)], Settings()) is None
