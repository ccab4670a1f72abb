"""Spark ingestion of log directories: discovery rules, the `batches` schema, unreadable files, real data."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.samples import generate
from pipeline.sources.segments import discover_segments, read_segments
from schemas.batches import BATCHES, STATUS_UNREADABLE

SAMPLE_BATCHES = {("orders", 0): 40, ("orders", 1): 7, ("payments", 0): 9, ("payments.audit-log", 2): 5}


@pytest.fixture
def sample_root(tmp_path) -> Path:
    """The sample, plus directories the broker is about to delete or move, which must not be read."""
    root = generate(tmp_path / "logs")
    broker = root / "broker-0"
    for leftover in ("orders-1.1f2e3d4c5b6a-delete", "payments-0.0a1b2c3d4e5f-future", "orders-7-stray"):
        shutil.copytree(broker / "orders-0", broker / leftover)
    return root


def test_discovery_skips_transient_dirs_with_a_reason(sample_root):
    discovery = discover_segments([str(sample_root)], Settings().ingest)
    assert len(discovery.segments) == 5
    assert {(s.topic, s.partition, s.segment_base_offset, s.broker_id) for s in discovery.segments} == {
        ("orders", 0, 0, 0),
        ("orders", 0, 90, 0),
        ("orders", 1, 0, 0),
        ("payments", 0, 0, 0),
        ("payments.audit-log", 2, 0, 0),
    }
    reasons = {Path(s.location).name: s.reason for s in discovery.skipped}
    assert set(reasons) == {"orders-1.1f2e3d4c5b6a-delete", "payments-0.0a1b2c3d4e5f-future", "orders-7-stray"}
    assert "deletion" in reasons["orders-1.1f2e3d4c5b6a-delete"]


def test_renamed_partition_dirs_are_read_as_their_partition_when_not_skipped(sample_root):
    """Kafka renames a partition dir `<topic>-<partition>.<id>-delete|-future|-stray`; read, it is that partition."""
    kept = Settings(ingest={"skip_dir_suffixes": []}).ingest
    read = {(s.topic, s.partition) for s in discover_segments([str(sample_root)], kept).segments}
    assert {("orders", 1), ("payments", 0)} <= read
    assert {topic for topic, _ in read} == {"orders", "payments", "payments.audit-log"}
    assert len(discover_segments([str(sample_root)], kept).segments) == 5 + 2 + 2  # both renamed copies of orders-0


def test_missing_or_empty_root_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        discover_segments([str(tmp_path / "nowhere")], Settings().ingest)
    (tmp_path / "empty" / "topic-0").mkdir(parents=True)
    with pytest.raises(InputError, match="no <20-digit offset>.log"):
        discover_segments([str(tmp_path / "empty")], Settings().ingest)


def test_read_segments_over_several_broker_dirs_by_uri(spark, sample_root):
    second = sample_root / "broker-1"
    shutil.copytree(sample_root / "broker-0", second)
    (second / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=x\n")

    df = read_segments(spark, [sample_root.as_uri()], Settings())
    assert df.schema == BATCHES
    rows = [row.asDict() for row in df.collect()]

    counts = Counter((row["topic"], row["partition"]) for row in rows)
    assert counts == {key: 2 * count for key, count in SAMPLE_BATCHES.items()}
    assert Counter(row["broker_id"] for row in rows) == {0: 61, 1: 61}
    assert {row["source_format"] for row in rows} == {"segment"}
    assert {row["entry_status"] for row in rows} == {"ok"}
    assert all(row["source_file"].startswith("file://") for row in rows)
    rolled = [row for row in rows if row["topic"] == "orders" and row["partition"] == 0 and row["base_offset"] >= 90]
    assert len(rolled) == 20 and {row["segment_base_offset"] for row in rolled} == {90}
    markers = sorted((row["base_offset"], row["control_type"]) for row in rows if row["is_control"])
    assert markers == [(5, 1), (5, 1), (12, 0), (12, 0)]


def test_a_file_that_disappears_becomes_an_unreadable_row(spark, sample_root):
    df = read_segments(spark, [str(sample_root / "broker-0")], Settings())
    gone = sample_root / "broker-0" / "orders-1" / "00000000000000000000.log"
    gone.unlink()
    rows = [row.asDict() for row in df.collect()]
    unreadable = [row for row in rows if row["entry_status"] == STATUS_UNREADABLE]
    assert len(unreadable) == 1
    (row,) = unreadable
    assert row["source_file"] == str(gone) and row["topic"] == "orders" and row["partition"] == 1
    assert row["position"] == 0 and row["size_bytes"] > 0
    assert "cannot read" in row["entry_note"]
    assert len(rows) == 61 - 7 + 1


def test_a_partition_dir_can_be_the_root(sample_root):
    partition_dir = sample_root / "broker-0" / "orders-0"
    discovery = discover_segments([str(partition_dir)], Settings().ingest)
    assert [(s.topic, s.partition, s.segment_base_offset, s.broker_id) for s in discovery.segments] == [
        ("orders", 0, 0, 0),
        ("orders", 0, 90, 0),
    ]
    assert discovery.segments[0].location == str(partition_dir / "00000000000000000000.log")


@pytest.mark.realdata
def test_read_segments_over_real_broker_data(spark, realdata):
    """All committed broker data dirs under one root, at whatever depth each repository keeps them."""
    root = realdata / "broker-segments"
    rows = [row.asDict() for row in read_segments(spark, [str(root)], Settings()).collect()]

    expected = {}
    for path in (root / "_expected").glob("*.log.json"):
        content = json.loads(path.read_text())
        expected[str(root / content["file"])] = len(content["batches"])
    assert Counter(row["source_file"] for row in rows) == expected
    assert all(row["crc_valid"] and row["entry_status"] == "ok" for row in rows)
    broker_ids = {(row["source_file"].startswith(str(root / "LestFeeD")), row["broker_id"]) for row in rows}
    assert broker_ids == {(True, 1), (False, None)}  # only that KRaft log dir kept its meta.properties
    cart = [row for row in rows if row["topic"] == "cart-product-request"]
    assert min(row["base_offset"] for row in cart) == 12
    assert {row["segment_base_offset"] for row in cart} == {12}
    assert {row["topic"] for row in rows} >= {"__cluster_metadata", "cart-product-response", "test-topic"}
