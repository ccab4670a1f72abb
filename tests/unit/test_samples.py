"""The bundled sample log root: deterministic bytes and the producer stories it is meant to show."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.samples import START_TIMESTAMP, TIMESTAMP_STEP, generate
from pipeline.sources.kafka_format.windows import decode_segment
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT

PARTITIONS = ["orders-0", "orders-1", "payments-0", "payments.audit-log-2"]


@pytest.fixture(scope="module")
def sample_root(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("sample"))


def rows(root: Path, partition: str) -> list[dict]:
    segments = sorted((root / "broker-0" / partition).glob("*.log"))
    return [row for segment in segments for row in decode_segment(segment.read_bytes()).to_pylist()]


def files_of(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_generation_is_byte_for_byte_deterministic(sample_root, tmp_path):
    assert files_of(generate(tmp_path)) == files_of(sample_root)


def test_layout_is_a_broker_log_dir(sample_root):
    broker = sample_root / "broker-0"
    assert "broker.id=0" in (broker / "meta.properties").read_text().splitlines()
    assert sorted(p.name for p in broker.iterdir() if p.is_dir()) == PARTITIONS
    assert sorted(p.name for p in (broker / "orders-0").glob("*.log")) == [
        "00000000000000000000.log",
        "00000000000000000090.log",
    ]
    assert [p.name for p in broker.rglob("*.txnindex")] == ["00000000000000000000.txnindex"]
    for partition in PARTITIONS:
        assert (broker / partition / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
        version, topic_id = (broker / partition / "partition.metadata").read_text().splitlines()
        assert version == "version: 0" and topic_id.startswith("topic_id: ") and len(topic_id) == 10 + 22
    assert (broker / "replication-offset-checkpoint").read_text().splitlines()[2:] == [
        "orders 0 120",
        "orders 1 21",
        "payments 0 15",
        "payments.audit-log 2 10",
    ]


def test_every_batch_is_valid_with_fixed_timestamps(sample_root):
    for partition in PARTITIONS:
        batches = rows(sample_root, partition)
        assert all(row["crc_valid"] and row["entry_status"] == "ok" for row in batches)
        assert batches[0]["base_timestamp"] == START_TIMESTAMP
        assert all((row["base_timestamp"] - START_TIMESTAMP) % TIMESTAMP_STEP == 0 for row in batches)
        offsets = [(row["base_offset"], row["last_offset"]) for row in batches]
        assert all(previous[1] + 1 == current[0] for previous, current in zip(offsets, offsets[1:], strict=False))


def test_orders_0_is_clean_over_two_segments(sample_root):
    batches = rows(sample_root, "orders-0")
    assert len(batches) == 40
    assert {(row["producer_id"], row["producer_epoch"]) for row in batches} == {(1000, 0)}
    assert [row["base_sequence"] for row in batches] == list(range(0, 120, 3))
    assert batches[30]["base_offset"] == 90 and batches[30]["position"] == 0


def test_orders_1_has_a_duplicate_and_a_gap(sample_root):
    batches = rows(sample_root, "orders-1")
    ranges = [(row["base_sequence"], row["last_sequence"]) for row in batches]
    assert ranges == [(0, 2), (3, 5), (6, 8), (3, 5), (9, 11), (15, 17), (18, 20)]
    original, duplicate = batches[1], batches[3]
    assert duplicate["base_offset"] == 9 and original["base_offset"] == 3
    assert duplicate["crc"] == original["crc"]  # the base offset is outside the CRC


def test_payments_0_commits_then_aborts(sample_root):
    batches = rows(sample_root, "payments-0")
    markers = [row for row in batches if row["is_control"]]
    assert [(m["base_offset"], m["control_type"], m["coordinator_epoch"]) for m in markers] == [
        (5, CONTROL_COMMIT, 1),
        (12, CONTROL_ABORT, 1),
    ]
    assert all(m["producer_id"] == 2000 and m["producer_epoch"] == 3 and m["size_bytes"] == 78 for m in markers)
    transactional = [row for row in batches if row["producer_id"] == 2000 and not row["is_control"]]
    assert [(row["base_sequence"], row["last_sequence"]) for row in transactional] == [(0, 1), (2, 2), (3, 4)]
    assert all(row["is_transactional"] for row in transactional)
    idempotent = [row for row in batches if row["producer_id"] == 2001]
    assert [row["base_sequence"] for row in idempotent] == [0, 2, 4, 6]
    assert not any(row["is_transactional"] for row in idempotent)
    txnindex = (sample_root / "broker-0" / "payments-0" / "00000000000000000000.txnindex").read_bytes()
    assert struct.unpack(">hqqqq", txnindex) == (0, 2000, 8, 12, 13)


def test_audit_log_bumps_the_epoch_and_restarts_sequences(sample_root):
    batches = rows(sample_root, "payments.audit-log-2")
    epochs_and_sequences = [(row["producer_epoch"], row["base_sequence"]) for row in batches]
    assert epochs_and_sequences == [(0, 0), (0, 2), (0, 4), (1, 0), (1, 2)]


def test_generate_refuses_to_overwrite(sample_root):
    with pytest.raises(FileExistsError):
        generate(sample_root)


def test_module_entry_point(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.samples", str(tmp_path / "out")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "out")
    assert (tmp_path / "out" / "broker-0" / "orders-0" / "00000000000000000090.log").is_file()
