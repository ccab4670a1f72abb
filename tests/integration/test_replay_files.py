"""The replay's tasks reading the `batches` files themselves (pipeline.audit.replay.files) give exactly the replay
the exchange path gives, row for row and column for column; and the files are grouped by partition only when the
Delta log says which partition each file holds."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

import schemas
from pipeline.audit.replay.files import Keeping, replay_kept, task_files
from pipeline.audit.replay.partition import PartitionFiles
from pipeline.audit.replay.plan import replay_pass, topic_matches, topic_name_matches
from pipeline.cli import main
from pipeline.config import AuditSettings
from pipeline.tables.files_per_partition import files_per_partition
from pipeline.tables.store import TableStore
from schemas.batches import STATUS_OK


def _known_cluster(df):
    return df.withColumn("cluster_id", F.coalesce("cluster_id", F.lit("")))


def _ingested(spark, warehouse: Path, inputs: list[str]) -> TableStore:
    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            main(["ingest", *[arg for path in inputs for arg in ("--input", path)], "--warehouse", str(warehouse)]) == 0
        )
    return TableStore(spark, str(warehouse))


def _assert_same_replay(spark, store: TableStore, settings: AuditSettings, scratch, versions=None) -> tuple[int, int]:
    batches = _known_cluster(store.read("batches", schema=schemas.BATCHES))
    transaction_log = None
    if store.exists("transaction_log"):
        transaction_log = _known_cluster(store.read("transaction_log", schema=schemas.TRANSACTION_LOG))
        if versions is not None:
            transaction_log = transaction_log.withColumn("client_transaction_version", versions)
    checkpoints = store.read("checkpoints", schema=schemas.CHECKPOINTS) if store.exists("checkpoints") else None
    files = store.files_per_partition("batches")
    assert files, "every file of an ingested log dir holds one partition"
    stage = scratch("replay-files")
    exchanged = stage.materialise_pass(replay_pass(batches, settings, transaction_log, checkpoints), "exchanged")
    keeping = Keeping(stage.path("kept"), "run")
    from_files, _ = replay_kept(batches, files, settings, transaction_log, checkpoints, stage, keeping)
    assert from_files.schema == exchanged.schema
    assertDataFrameEqual(from_files, exchanged)
    versions = from_files.where(F.col("coordinator_version").isNotNull()).count()
    return from_files.count(), versions


def test_same_replay_as_the_exchange_on_generated_logs(spark, generated_warehouse, scratch):
    store = TableStore(spark, str(generated_warehouse))
    settings = AuditSettings(compacted_topics=["*-changelog"])
    # few rows per task and per read, so tasks hold several partitions and files span several reads
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        # the generator's coordinator records carry no client version: TV2 at even epochs, TV1 at odd ones
        versions = F.when(F.col("producer_epoch") % 2 == 0, 2).otherwise(1)
        rows, with_version = _assert_same_replay(spark, store, settings, scratch, versions)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    assert rows > 3000
    assert with_version > 0, "the generated root's __transaction_state gives coordinator versions"


def test_same_replay_as_the_exchange_on_real_broker_dirs(spark, realdata, tmp_path, scratch):
    dirs = sorted(str(path) for path in (realdata / "broker-segments").glob("[!_]*") if path.is_dir())
    store = _ingested(spark, tmp_path / "wh", dirs)
    rows, _ = _assert_same_replay(spark, store, AuditSettings(), scratch)
    assert rows > 0


def _delta_batches(location: Path, partitions_per_file: list[list[int]]) -> None:
    for partitions in partitions_per_file:
        rows = pa.table({"topic": ["t"] * len(partitions), "partition": pa.array(partitions, pa.int32())})
        write_deltalake(str(location), rows, partition_by=["topic"], mode="append")


def test_files_are_grouped_by_the_partition_their_statistics_name(tmp_path):
    _delta_batches(tmp_path / "one_each", [[0, 0], [1], [0]])
    groups = files_per_partition(str(tmp_path / "one_each"))
    assert [(group.topic, group.partition, len(group.paths)) for group in groups] == [("t", 0, 2), ("t", 1, 1)]
    assert all(Path(path).is_file() for group in groups for path in group.paths)


def test_a_partition_counts_the_log_dirs_its_segment_files_came_from_per_cluster(tmp_path):
    def segment_files(location: Path, files: list[tuple[str, int, str]]) -> None:
        for cluster, partition, source in files:
            rows = pa.table(
                {
                    "cluster_id": [cluster],
                    "topic": ["t"],
                    "partition": pa.array([partition], pa.int32()),
                    "source_file": [source],
                }
            )
            write_deltalake(str(location), rows, partition_by=["cluster_id", "topic"], mode="append")

    segment_files(
        tmp_path / "copies",
        [
            ("a", 0, "/logs/broker-0/t-0/00000000000000000000.log"),
            ("a", 0, "/logs/broker-0/t-0/00000000000000000100.log"),
            ("b", 0, "/other/broker-1/t-0/00000000000000000000.log"),  # another cluster: not a copy
            ("a", 1, "/logs/broker-0/t-1/00000000000000000000.log"),
            ("a", 1, "/logs/broker-1/t-1/00000000000000000000.log"),  # a second replica
            ("a", 2, "/dumps/t-2.txt"),  # dump text: its rows may name any broker
        ],
    )
    groups = files_per_partition(str(tmp_path / "copies"))
    assert {group.partition: group.copies for group in groups} == {0: 1, 1: 2, 2: 2}


def test_a_file_of_several_partitions_leaves_the_rows_to_spark(tmp_path):
    _delta_batches(tmp_path / "mixed", [[0], [0, 1]])
    assert files_per_partition(str(tmp_path / "mixed")) is None
    assert files_per_partition(str(tmp_path / "no_table")) is None


def test_tasks_get_whole_partitions_and_about_the_same_bytes():
    plans = [
        PartitionFiles("t", number, (f"f{number}",), (f"f{number}",), False, size, [])
        for number, size in enumerate([9, 5, 4, 3, 3])
    ]
    tasks = task_files(plans, 2)
    assert sorted(plan.partition for task in tasks for plan in task) == [0, 1, 2, 3, 4]
    assert sorted(sum(plan.size_bytes for plan in task) for task in tasks) == [12, 12]
    assert len(task_files(plans, 8)) == len(plans)


def _run_counts(warehouse: Path, inputs: list[str]) -> dict[str, int]:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", *[arg for path in inputs for arg in ("--input", path)], "--warehouse", str(warehouse)]) in (
            0,
            1,
        )
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table()
    return dict(runs.column("counts")[runs.num_rows - 1].as_py())


def test_a_file_of_several_partitions_sends_the_run_through_the_exchange(spark, tmp_path):
    """The runs over log dirs read their files (tests/integration/test_end_to_end.py); an export whose rows of two
    partitions name one source file gives a `batches` file holding both, and the run exchanges its rows instead."""
    rows = [
        {"topic": "t", "partition": partition, "entry_status": STATUS_OK, "segment_base_offset": 0, "position": 0,
         "source_file": "/export/t.log", "source_format": "segments", "magic": 2, "base_offset": 0, "last_offset": 0}
        for partition in (0, 1)
    ]  # fmt: skip
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    counts = _run_counts(tmp_path / "mixed", [str(export)])
    assert counts["plan.replay_read_files"] == 0
    assert counts["batches"] == 2


def test_a_topic_name_matches_the_globs_on_the_driver_as_in_spark(spark):
    patterns = [["__*"], ["*-changelog", "orders?"], ["a_b%c"], ["x\\y*"], ["?"], []]
    names = [
        "__consumer_offsets",
        "_x",
        "inventory-changelog",
        "orders1",
        "orders",
        "orders12",
        "a_b%c",
        "aXb%c",
        "x\\yz",
        "xy",
        "q",
        "",
        "line\nbreak-changelog",
    ]
    rows = spark.createDataFrame([(name,) for name in names], "topic string")
    for globs in patterns:
        in_spark = {
            row.topic: row.matched for row in rows.select("topic", topic_matches(globs).alias("matched")).collect()
        }
        assert in_spark == {name: topic_name_matches(globs, name) for name in names}, globs
