"""A run keeps its replay (pipeline.audit.replay.kept) and the next one replays only what was appended: its replay is
the replay of all the rows, row for row; what it cannot go on from is replayed whole; and the kept folder holds
only what the manifest of the last published audit names."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

import schemas
from pipeline.audit.core.context import AuditContext
from pipeline.audit.engine.kept_findings import kept_for
from pipeline.audit.replay.files import Keeping, ReplayOutcome, replay_kept
from pipeline.audit.replay.kept import KeptReplay, read_kept, sweep, write_kept
from pipeline.audit.replay.plan import replay_pass
from pipeline.audit.replay.task_outputs import parts_table, task_outputs
from pipeline.audit.state.kept_parts import keep_tables, kept_parts
from pipeline.audit.state.materialised import replay_aggregates
from pipeline.audit.state.transactions import producer_state_of, transactions_of
from pipeline.config import AuditSettings
from pipeline.tables.files_per_partition import FileGroup, files_per_partition
from pipeline.tables.snapshot_files import read_files
from schemas.checkpoints import CHECKPOINTS, CLEANER_OFFSET

SETTINGS = AuditSettings(compacted_topics=["*-changelog"])


def _batches(spark, warehouse: Path, groups: list[FileGroup]):
    location = str(warehouse / "batches")
    paths = [str(Path(path).relative_to(location)) for group in groups for path in group.paths]
    rows = read_files(spark, location, paths, schemas.BATCHES)
    return rows.withColumn("cluster_id", F.coalesce("cluster_id", F.lit("")))


def _replayed(spark, warehouse, groups, scratch, folder: Path, run_id: str, earlier: KeptReplay | None = None):
    stage = scratch(run_id)
    keeping = Keeping(str(folder), run_id, earlier)
    replay, _ = replay_kept(_batches(spark, warehouse, groups), groups, SETTINGS, None, None, stage, keeping)
    write_kept(str(folder), keeping.outcome.kept)
    return replay, read_kept(str(folder), run_id)


def _aggregated(spark, warehouse, groups, scratch, folder: Path, run_id: str, earlier: KeptReplay | None = None):
    """The transactions, producer state, segments and partition producers of a run's replay, from the parts it
    aggregated (going on from those `earlier` kept where its replay went on), and the manifest that keeps them."""
    stage = scratch(run_id)
    keeping = Keeping(str(folder), run_id, earlier)
    batches = _batches(spark, warehouse, groups)
    aggregates = replay_aggregates()
    schema = replay_pass(batches, SETTINGS).schema
    outputs = task_outputs(AuditContext(SETTINGS), schema, spark, stage.path("task"), aggregates)
    replay_kept(batches, groups, SETTINGS, None, None, stage, keeping, outputs)
    written = stage.materialise_all(
        {parts_table(aggregate): partial(kept_parts, aggregate, stage, keeping) for aggregate in aggregates}
    )
    written = {name: stage.read(name) if table is None else table for name, table in written.items()}
    tables = {
        "transactions": transactions_of(written["parts/transactions"]).collect(),
        "producer_state": producer_state_of(written["parts/producer_state"]).collect(),
        "segments": written["parts/segments"].collect(),
        "partition_producers": written["parts/partition_producers"].collect(),
    }
    keep_tables(keeping, stage, stage.names("parts/"))
    write_kept(str(folder), keeping.outcome.kept)
    return tables, read_kept(str(folder), run_id)


def _withheld(groups: list[FileGroup], every: int) -> list[FileGroup]:
    """Every `every`th partition without the file of its newest segment: as it stood before that segment was
    appended."""
    return [
        replace(group, paths=tuple(sorted(group.paths, key=_segment)[:-1]))
        if number % every == 0 and len(group.paths) > 1
        else group
        for number, group in enumerate(groups)
    ]


def _segment(path: str) -> int:
    """The segment a `batches` file holds, from its statistics (a file holds one segment file's rows)."""
    metadata = pq.read_metadata(path)
    column = metadata.schema.names.index("segment_base_offset")
    return metadata.row_group(0).column(column).statistics.min


def test_a_replay_that_goes_on_from_a_kept_one_is_the_replay_of_all_rows(spark, generated_warehouse, scratch, tmp_path):
    groups = files_per_partition(str(generated_warehouse / "batches"))
    before = _withheld(groups, 2)
    assert before != groups
    folder = tmp_path / "_replay"
    _, first = _replayed(spark, generated_warehouse, before, scratch, folder, "first")
    nightly, kept = _replayed(spark, generated_warehouse, groups, scratch, folder, "nightly", first)
    full, _ = _replayed(spark, generated_warehouse, groups, scratch, tmp_path / "full", "full")
    assertDataFrameEqual(nightly, full)
    went_on = [part for part in kept.partitions.values() if len(part["body"]) == 2]
    appended = sum(len(new.paths) > len(old.paths) for new, old in zip(groups, before, strict=True))
    assert len(went_on) >= appended // 2 > 0, "partitions with an appended segment go on from the kept replay"
    # a rerun with nothing appended keeps every body file and writes none
    again, unchanged = _replayed(spark, generated_warehouse, groups, scratch, folder, "again", kept)
    assertDataFrameEqual(again, full)
    assert {key: part["body"] for key, part in unchanged.partitions.items()} == {
        key: part["body"] for key, part in kept.partitions.items()
    }


def test_a_kept_replay_of_other_settings_or_changed_files_is_not_gone_on_from(
    spark, generated_warehouse, scratch, tmp_path
):
    groups = files_per_partition(str(generated_warehouse / "batches"))
    folder = tmp_path / "_replay"
    _, first = _replayed(spark, generated_warehouse, groups, scratch, folder, "first")
    # a file the kept replay read is gone (retention deleted the oldest segment, say): that partition is replayed
    # whole, the others go on
    shrunk = next(number for number, group in enumerate(groups) if len(group.paths) > 1)
    changed = list(groups)
    group = groups[shrunk]
    changed[shrunk] = replace(group, paths=tuple(sorted(group.paths, key=_segment)[1:]), size_bytes=0)
    rerun, kept = _replayed(spark, generated_warehouse, changed, scratch, folder, "rerun", first)
    full, _ = _replayed(spark, generated_warehouse, changed, scratch, tmp_path / "full", "full")
    assertDataFrameEqual(rerun, full)
    bodies = [part["body"] for part in kept.partitions.values()]
    assert all("/rerun/" in path for path in bodies[shrunk])
    assert all("/first/" in path for number, paths in enumerate(bodies) if number != shrunk for path in paths)
    # other settings: every partition is replayed whole
    stage = scratch("other")
    other = AuditSettings(compacted_topics=[])
    keeping = Keeping(str(folder), "other", kept)
    replay_kept(_batches(spark, generated_warehouse, groups), groups, other, None, None, stage, keeping)
    assert all("/other/" in path for part in keeping.outcome.kept.partitions.values() for path in part["body"])
    # the cleaner checkpoints a partition it had not before: every row of it says it is compacted now, so that
    # partition is replayed whole and the others go on
    group = next(group for group in changed if not group.topic.endswith("-changelog"))
    batches = _batches(spark, generated_warehouse, changed)
    replicas = batches.where((F.col("topic") == group.topic) & (F.col("partition") == group.partition))
    cleaned = spark.createDataFrame(
        [
            (
                CLEANER_OFFSET,
                group.topic,
                group.partition,
                5,
                None,
                "cleaner-offset-checkpoint",
                row.broker_id,
                row.cluster_id,
            )
            for row in replicas.select("broker_id", "cluster_id").distinct().collect()
        ],
        CHECKPOINTS,
    )
    stage = scratch("cleaned")
    keeping = Keeping(str(folder), "cleaned", kept)
    replay_kept(batches, changed, SETTINGS, None, cleaned, stage, keeping)
    replayed = {key for key, part in keeping.outcome.kept.partitions.items() if "/cleaned/" in "".join(part["body"])}
    assert replayed == {json.dumps([group.topic, group.partition])}


def test_the_kept_parts_merged_with_those_of_the_replayed_rows_aggregate_all_rows(
    spark, generated_warehouse, scratch, tmp_path
):
    groups = files_per_partition(str(generated_warehouse / "batches"))
    folder = tmp_path / "_replay"
    _, first = _aggregated(spark, generated_warehouse, _withheld(groups, 2), scratch, folder, "first")
    aggregates = ("transactions", "producer_state", "segments", "partition_producers", "epoch_starts")
    assert set(first.tables) == {f"parts/{name}" for name in aggregates}
    nightly, kept = _aggregated(spark, generated_warehouse, groups, scratch, folder, "nightly", first)
    full, _ = _aggregated(spark, generated_warehouse, groups, scratch, tmp_path / "full", "full")
    assert len(full["transactions"]) > 100 and len(full["producer_state"]) > 10
    for table in full:
        assertDataFrameEqual(nightly[table], full[table])
    assert all("/nightly/" in path for path in kept.tables.values())
    # the oldest file of a partition is gone: it is replayed whole, and its kept parts are not merged in
    shrunk = next(number for number, group in enumerate(groups) if len(group.paths) > 1)
    group = groups[shrunk]
    changed = list(groups)
    changed[shrunk] = replace(group, paths=tuple(sorted(group.paths, key=_segment)[1:]), size_bytes=0)
    rerun, _ = _aggregated(spark, generated_warehouse, changed, scratch, folder, "rerun", kept)
    full, _ = _aggregated(spark, generated_warehouse, changed, scratch, tmp_path / "full-changed", "full-changed")
    for table in full:
        assertDataFrameEqual(rerun[table], full[table])


def test_the_manifest_names_its_files_from_the_folder_and_the_sweep_keeps_only_those(tmp_path):
    folder = tmp_path / "_replay"
    for run, names in {
        "old": ["body-a.parquet", "body-b.parquet"],
        "new": ["tails-c.parquet", "stray.parquet"],
    }.items():
        (folder / run).mkdir(parents=True)
        for name in names:
            (folder / run / name).write_text("x")
    kept = KeptReplay(
        run_id="new",
        fingerprint="f",
        partitions={'["t", 0]': {"read": ["/batches/f"], "body": [f"{folder}/old/body-a.parquet"], "replicas": []}},
        tails=[f"{folder}/new/tails-c.parquet"],
    )
    write_kept(str(folder), kept)
    write_kept(str(folder), KeptReplay(run_id="gone", fingerprint="f"))
    on_disk = json.loads((folder / "new.json").read_text())
    assert on_disk["tails"] == ["new/tails-c.parquet"] and on_disk["partitions"]['["t", 0]']["read"] == ["/batches/f"]
    assert read_kept(str(folder), "new") == kept
    removed = sweep(str(folder), "new")
    assert sorted(removed) == ["gone.json", "new/stray.parquet", "old/body-b.parquet"]
    assert sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()) == [
        "new.json",
        "new/tails-c.parquet",
        "old/body-a.parquet",
    ]
    assert sorted(sweep(str(folder), None)) == ["new", "new.json", "old"]


def test_a_replay_where_no_partition_went_on_merges_no_kept_parts_and_keeps_no_findings():
    """A run over a warehouse with a kept replay whose every partition is replayed whole (another cluster's topics,
    or files that changed): the tasks' parts and findings are the tables', with no plan to merge nothing."""
    earlier = KeptReplay(
        run_id="before",
        fingerprint="f",
        row_findings={"batches": "/kept/findings-batches"},
        tables={"parts/transactions": "/kept/parts-transactions"},
    )
    (transactions,) = (aggregate for aggregate in replay_aggregates() if aggregate.name == "transactions")
    for went_on, merges in (([], False), ([("t", 0)], True)):
        outcome = ReplayOutcome(KeptReplay(run_id="now", fingerprint="f"), None, went_on, earlier)
        assert kept_for(outcome, "batches") is merges
        if not merges:  # returns before it reads anything
            assert kept_parts(transactions, None, Keeping("/kept", "now", earlier, outcome=outcome)) is None
