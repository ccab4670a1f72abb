"""Discovery of the files beside the segments, and their Spark reader and ingest: the bundled sample with snapshots,
indexes and damaged files a broker can leave behind, and the dump-text forms of real broker files."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from pipeline.config import Settings
from pipeline.ingest import ingest_partition_files
from pipeline.samples import CLUSTER_ID as SAMPLE_CLUSTER_ID
from pipeline.samples import generate
from pipeline.sources.dumplog.reader import read_dumplog_snapshots, read_dumplog_txn_index
from pipeline.sources.input_plan import plan_inputs
from pipeline.sources.kafka_format.encoding import segment_file_name
from pipeline.sources.kafka_format.windows import decode_segment
from pipeline.sources.log_roots import discover_segments
from pipeline.sources.partition_files.discovery import discover_partition_files
from pipeline.sources.partition_files.dump_forms import snapshots_from_dumplog, txn_index_from_dumplog
from pipeline.sources.partition_files.reader import TABLE_SCHEMAS, read_partition_files
from pipeline.tables.store import TableStore
from schemas.checkpoints import CHECKPOINTS, LOG_START_OFFSET, RECOVERY_POINT, REPLICATION_OFFSET
from schemas.file_problems import (
    FILE_PROBLEMS,
    PROBLEM_LEADER_EPOCH_CHECKPOINT,
    PROBLEM_LEFTOVER_FILES,
    PROBLEM_PARTITION_METADATA,
    PROBLEM_TIME_INDEX,
)
from schemas.leader_epochs import LEADER_EPOCHS
from schemas.partition_metadata import PARTITION_METADATA
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.txn_index import TXN_INDEX
from tests.partition_file_bytes import PRODUCER_FIELDS, TIMESTAMP, offset_index, snapshot_bytes, time_index


@pytest.fixture
def sample_root(tmp_path) -> Path:
    """The bundled sample, plus snapshots, indexes and damaged files a broker can leave behind."""
    root = generate(tmp_path / "logs")
    broker = root / "broker-0"
    orders_0 = broker / "orders-0"
    (orders_0 / segment_file_name(90, ".snapshot")).write_bytes(
        snapshot_bytes([(1000, 0, 89, 89, 2, TIMESTAMP, -1, -1)])
    )
    first_segment = decode_segment((orders_0 / segment_file_name(0)).read_bytes())
    positions, last_offsets = first_segment["position"].to_pylist(), first_segment["last_offset"].to_pylist()
    (orders_0 / segment_file_name(0, ".index")).write_bytes(
        offset_index((last_offsets[10], positions[10]), (last_offsets[20], positions[20])) + bytes(16)
    )
    # one millisecond off the first batch's max timestamp
    (orders_0 / segment_file_name(0, ".timeindex")).write_bytes(time_index((TIMESTAMP + 1, last_offsets[0])))
    corrupt = bytearray(snapshot_bytes([(1001, 0, 20, 20, 2, TIMESTAMP, -1, -1)]))
    corrupt[-1] ^= 0xFF
    (broker / "orders-1" / segment_file_name(21, ".snapshot")).write_bytes(bytes(corrupt))
    (broker / "orders-1" / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    (broker / "payments-0" / "00000000000000000000.log.swap").write_bytes(b"")
    (broker / "payments.audit-log-2" / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n")
    (broker / "payments.audit-log-2" / segment_file_name(10, ".snapshot")).write_bytes(snapshot_bytes([]))
    return root


def test_discovery_of_a_partition_dir_reaches_its_log_dir_checkpoints(sample_root):
    listings = discover_segments([str(sample_root / "broker-0" / "payments-0")], Settings().ingest).listings
    discovery = discover_partition_files(listings)
    kinds = sorted((file.kind, file.topic, file.broker_id) for file in discovery.files)
    assert kinds == [
        ("leader-epoch-checkpoint", "payments", 0),
        (LOG_START_OFFSET, None, 0),
        ("partition.metadata", "payments", 0),
        (RECOVERY_POINT, None, 0),
        (REPLICATION_OFFSET, None, 0),
        ("txnindex", "payments", 0),
    ]
    [problem] = discovery.naming_problems
    assert (problem["kind"], problem["topic"], problem["partition"]) == (PROBLEM_LEFTOVER_FILES, "payments", 0)


def test_read_partition_files_over_the_sample(spark, sample_root):
    tables = read_partition_files(spark, discover_segments([str(sample_root)], Settings().ingest).listings)
    (sample_root / "broker-0" / "payments.audit-log-2" / segment_file_name(10, ".snapshot")).unlink()  # listed, gone
    assert tables.txn_index.schema == TXN_INDEX
    assert tables.producer_snapshots.schema == PRODUCER_SNAPSHOTS
    assert tables.leader_epochs.schema == LEADER_EPOCHS
    assert tables.checkpoints.schema == CHECKPOINTS
    assert tables.partition_metadata.schema == PARTITION_METADATA
    assert tables.file_problems.schema == FILE_PROBLEMS

    [entry] = [row.asDict() for row in tables.txn_index.collect()]
    assert entry == {
        "topic": "payments",
        "partition": 0,
        "producer_id": 2000,
        "first_offset": 8,
        "last_offset": 12,
        "last_stable_offset": 13,
        "version": 0,
        "entry_status": "ok",
        "segment_base_offset": 0,
        "position": 0,
        "source_file": str(sample_root / "broker-0" / "payments-0" / segment_file_name(0, ".txnindex")),
        "source_format": "segment",
        "broker_id": 0,
        "cluster_id": "cHJvZHVjZS1hdWRpdC0w",
    }

    snapshots = sorted(
        (row.topic, row.partition, row.snapshot_offset, row.producer_id, row.last_sequence, row.file_status)
        for row in tables.producer_snapshots.collect()
    )
    assert snapshots == [
        ("orders", 0, 90, 1000, 89, "ok"),
        ("orders", 1, 21, None, None, "crc_mismatch"),
        ("payments.audit-log", 2, 10, None, None, "unreadable"),
    ]

    epochs = sorted(
        (row.topic, row.partition, row.line, row.epoch, row.start_offset, row.problem)
        for row in tables.leader_epochs.collect()
    )
    assert epochs == [
        ("orders", 0, 3, 0, 0, None),
        ("orders", 1, 3, 0, 0, None),
        ("payments", 0, 3, 0, 0, None),
        ("payments.audit-log", 2, 2, None, None, "line 2: the count says 2 entries, 1 lines follow"),
        ("payments.audit-log", 2, 3, 0, 0, None),
    ]

    checkpoints = [row.asDict() for row in tables.checkpoints.collect()]
    assert len(checkpoints) == 12 and all(row["problem"] is None and row["broker_id"] == 0 for row in checkpoints)
    assert {(row["kind"], row["topic"], row["partition"], row["offset"]) for row in checkpoints} >= {
        (LOG_START_OFFSET, "orders", 1, 0),
        (REPLICATION_OFFSET, "orders", 0, 120),
        (REPLICATION_OFFSET, "payments", 0, 15),
    }

    metadata = {(row.topic, row.partition): (row.version, row.problem) for row in tables.partition_metadata.collect()}
    assert len(metadata) == 4 and metadata[("orders", 1)] == (0, "line 2: the zero UUID is not a valid topic id")
    assert sum(problem is not None for _, problem in metadata.values()) == 1

    problems = sorted(
        (row.kind, row.topic, row.partition, row.position, row.message) for row in tables.file_problems.collect()
    )
    assert [problem[:4] for problem in problems] == [
        (PROBLEM_LEADER_EPOCH_CHECKPOINT, "payments.audit-log", 2, None),
        (PROBLEM_LEFTOVER_FILES, "payments", 0, None),
        (PROBLEM_PARTITION_METADATA, "orders", 1, None),
        (PROBLEM_TIME_INDEX, "orders", 0, 0),
    ]
    messages = [problem[4] for problem in problems]
    assert (
        messages[1]
        == "1 leftover file(s), normal broker state its next start clears: 1 .swap ("
        + ("a segment replacement (compaction or split) that did not finish; the broker completes it at startup")
        + "): 00000000000000000000.log.swap"
    )
    assert messages[3] == (
        f"00000000000000000000.timeindex: entry for offset 2: timestamp {TIMESTAMP + 1}, "
        f"but the batch's max timestamp is {TIMESTAMP}"
    )
    snapshot_status = {(row.topic, row.partition): row.file_status for row in tables.producer_snapshots.collect()}
    assert snapshot_status[("orders", 1)] == "crc_mismatch"
    assert snapshot_status[("payments.audit-log", 2)] == "unreadable"


def test_ingest_writes_the_six_tables_in_one_spark_job(spark, sample_root, tmp_path):
    """The ingest decodes every file once, in one job, into all six tables, and keeps the rows of its topics: those
    the reader's DataFrames give."""
    plan = plan_inputs(spark, [str(sample_root)], Settings().ingest)
    store = TableStore(spark, str(tmp_path / "warehouse"))
    topics = ["orders", "payments"]  # not `payments.audit-log`, whose snapshots and problems stay out
    pairs = [(SAMPLE_CLUSTER_ID, topic) for topic in topics]
    context = spark.sparkContext
    context.setJobGroup("partition-files", "the files beside the segments")
    try:
        counts = ingest_partition_files(spark, store, Settings(), plan, pairs)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert len(context.statusTracker().getJobIdsForGroup("partition-files")) == 1
    frames = read_partition_files(spark, plan.log_roots.listings)
    for table, schema in TABLE_SCHEMAS.items():
        expected = {tuple(row) for row in getattr(frames, table).where(F.col("topic").isin(topics)).collect()}
        assert {tuple(row) for row in store.read(table, schema=schema).collect()} == expected, table
        assert counts[table] == len(expected) > 0, table


@pytest.mark.realdata
def test_dump_text_forms_map_to_the_same_tables(spark, realdata):
    dumps = realdata / "dumplog-text"
    snapshot_dumps = [
        str(dumps / f"klog-readSnapshotFromKafka{major}Dump-L{line}.txt") for major, line in ((2, 28), (3, 44))
    ]
    snapshots = snapshots_from_dumplog(read_dumplog_snapshots(spark, snapshot_dumps))
    assert snapshots.schema == PRODUCER_SNAPSHOTS
    rows = sorted(
        (row.asDict() for row in snapshots.collect()), key=lambda row: (row["source_file"], row["producer_id"])
    )
    # 2.x prints no lastTimestamp and 3.3 does: the snapshot's timestamp is the same either way
    assert [tuple(row[name] for name in PRODUCER_FIELDS) for row in rows] == 2 * [
        (171101, 12, 0, 932442537, 0, 1655628030307, 54, None),
        (173102, 16, 0, 933203854, 0, 1655704254875, 59, None),
        (199398, 0, 0, 933607621, 0, 1655761267833, 57, 933607621),
    ]
    assert {
        (row["snapshot_offset"], row["version"], row["crc_valid"], row["file_status"], row["source_format"])
        for row in rows
    } == {(933607637, 1, True, "ok", "dumplog")}

    txn_dump = str(dumps / "faderskd-blog-2023-11-29-kafka-transactions-03.txt")
    txn_index = txn_index_from_dumplog(read_dumplog_txn_index(spark, [txn_dump]))
    assert txn_index.schema == TXN_INDEX
    [entry] = txn_index.collect()
    assert (entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset) == (0, 0, 1, 2)
    assert (entry.version, entry.entry_status, entry.segment_base_offset, entry.position) == (0, "ok", 0, 0)
    assert (entry.source_format, entry.broker_id) == ("dumplog", None)
