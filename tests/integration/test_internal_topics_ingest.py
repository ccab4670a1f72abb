"""An ingest of a log root with both coordinator topics through Spark: the `transaction_log` and `offset_commits`
tables, and their tables left alone without those topics. The key and value bytes are written by
tests/coordinator_records.py, not by the code under test."""

from __future__ import annotations

import struct
from pathlib import Path

from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pipeline.config import Settings
from pipeline.ingest import ingest_internal_topics
from pipeline.ingest_manifest import plan_segment_reads
from pipeline.runner import ingest
from pipeline.sources.input_plan import plan_inputs
from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker
from pipeline.sources.kafka_format.layout import COMPRESSION_GZIP
from pipeline.tables.store import TableStore
from schemas.offset_commits import OFFSET_COMMITS
from schemas.transaction_log import TRANSACTION_LOG
from tests.coordinator_records import TAGS, offset_key, offset_value, string, txn_key, txn_value_v0, txn_value_v1


def write_segment(root: Path, partition_dir: str, *batches: bytes) -> None:
    directory = root / partition_dir
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(b"".join(batches))


def test_ingest_writes_transaction_log_and_offset_commits(spark, tmp_path: Path):
    root = tmp_path / "logs"
    write_segment(
        root,
        "__transaction_state-0",
        encode_batch(0, [txn_value_v0(5, 0, 60000, 0, None, 100, -1)], keys=[txn_key("app")]),
        encode_batch(
            1,
            [txn_value_v1(5, 1, 60000, 1, [("orders", [0])], 200, 150, TAGS), None],
            keys=[txn_key("app"), txn_key("old")],
            compression=COMPRESSION_GZIP,
            partition_leader_epoch=2,
        ),
    )
    commit = offset_value(3, 17, "", 300, leader_epoch=1)
    write_segment(
        root,
        "__consumer_offsets-0",
        encode_batch(0, [commit], keys=[offset_key("plain", "orders", 0)]),  # not transactional: left out
        encode_batch(
            1,
            [commit, b"\x00\x03"],
            producer_id=5,
            producer_epoch=1,
            base_sequence=0,
            is_transactional=True,
            keys=[offset_key("eos", "orders", 0), struct.pack(">h", 2) + string("eos")],
        ),
        encode_marker(3, 5, 1, commit=True, coordinator_epoch=2, timestamp=400),
    )
    store = TableStore(spark, str(tmp_path / "warehouse"))
    result = ingest(spark, store, Settings(), "run-1", [str(root)])
    assert result.counts["transaction_log"] == 3
    assert result.counts["transaction_log.partitions"] == 1
    assert result.counts["offset_commits"] == 1
    assert result.counts["offset_commits.skipped_group_metadata"] == 1

    written = store.read("transaction_log", schema=TRANSACTION_LOG)
    assertDataFrameEqual(
        written.select("record_offset", "transactional_id", "state_name", "is_tombstone", "value_version"),
        [
            Row(record_offset=0, transactional_id="app", state_name="Empty", is_tombstone=False, value_version=0),
            Row(record_offset=1, transactional_id="app", state_name="Ongoing", is_tombstone=False, value_version=1),
            Row(record_offset=2, transactional_id="old", state_name=None, is_tombstone=True, value_version=None),
        ],
    )
    transaction_log = written.orderBy("record_offset").collect()
    ongoing = transaction_log[1]
    assert [(entry.topic, list(entry.partitions)) for entry in ongoing.partitions] == [("orders", [0])]
    assert (ongoing.previous_producer_id, ongoing.client_transaction_version, ongoing.batch_compression) == (41, 2, 1)
    assert {
        (row.topic, row.partition, row.source_format, row.partition_leader_epoch) for row in transaction_log[1:]
    } == {("__transaction_state", 0, "segment", 2)}
    assert transaction_log[0].partitions is None

    [offset] = store.read("offset_commits", schema=OFFSET_COMMITS).collect()
    assert (offset.group, offset.committed_topic, offset.committed_offset, offset.leader_epoch) == (
        "eos",
        "orders",
        17,
        1,
    )
    assert (offset.producer_id, offset.producer_epoch, offset.record_offset, offset.batch_base_offset) == (5, 1, 1, 1)
    assert offset.position == len(encode_batch(0, [commit], keys=[offset_key("plain", "orders", 0)]))


def test_an_ingest_without_coordinator_topics_leaves_their_tables_alone(spark, tmp_path: Path):
    root = tmp_path / "logs"
    write_segment(root, "__transaction_state-0", encode_batch(0, [None], keys=[txn_key("app")]))
    plan = plan_inputs(spark, [str(root)], Settings().ingest)
    store = TableStore(spark, str(tmp_path / "warehouse"))
    segments = plan_segment_reads(spark, store, Settings(), plan.log_roots)
    assert ingest_internal_topics(spark, store, Settings(), plan, segments, [("", "orders")]) == {}
    assert not store.exists("transaction_log") and not store.exists("offset_commits")
