"""The replay's input read by the replay's own tasks from the `batches` files, when the files hold whole partitions.

On the exchange path (pipeline.audit.replay.plan.replay_input) Spark reads every wide row, hash-exchanges it by
partition and converts it into Arrow for the pass: most of the replay's time at scale (BENCHMARKS.md). When the Delta
log says which partition each file holds (pipeline.tables.files_per_partition), each task is instead handed the files of
some partitions, every replica and every cluster's copy of them, and reads them with pyarrow; no row crosses the JVM.
What `replay_input` adds to a row is added here from the same definitions: the replica's facts (`replica_facts`,
which also chooses the audited replica) and the coordinator's transaction versions (`coordinator_versions`) are
small Spark aggregates the tasks read from the scratch folder, the topic kinds are `topic_matches`' patterns matched
on the driver (`topic_name_matches`), and the per-row flags are `replay_input`'s expressions in Arrow's three-valued
logic. tests/integration/test_replay_files.py checks both paths give the same replay.
"""

from __future__ import annotations

import heapq
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from pipeline.audit.core.scratch import Scratch
from pipeline.audit.replay.coordinator_version import coordinator_versions
from pipeline.audit.replay.input_rows import input_rows, matching_rows, read_file, read_folder
from pipeline.audit.replay.kept import ENDS, MOST_BODY_FILES, WRITTEN, KeptReplay, fingerprint, partition_key
from pipeline.audit.replay.partition import PartitionFiles, replay_partition, write_table
from pipeline.audit.replay.plan import (
    COMPACTION,
    LOG_START,
    audited_broker,
    replay_pass,
    replica_facts,
    topic_name_matches,
)
from pipeline.audit.replay.replica_copies import COPIES_SCHEMA, COPIES_TABLE, file_copies
from pipeline.audit.replay.snapshot_states import ReplayUnit
from pipeline.audit.replay.task_outputs import TableFiles, TaskOutputs
from pipeline.config import AuditSettings
from pipeline.sources.filesystems import resolve, shipped
from pipeline.tables.files_per_partition import FileGroup, cluster_of
from schemas.keys import REPLICA

if TYPE_CHECKING:
    from pipeline.audit.replay.kept import CoordinatorOutcome

log = logging.getLogger(__name__)

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


@dataclass
class Keeping:
    """Where the run keeps its replay (`folder`, under its `run_id`), the kept replay it may go on from, and, once
    the replay is written, what it kept and went on from (`outcome`), and which coordinator partitions' records it
    took over (`coordinator`, pipeline.audit.state.kept_coordinator)."""

    folder: str
    run_id: str
    earlier: KeptReplay | None = None
    outcome: ReplayOutcome | None = None
    coordinator: CoordinatorOutcome | None = None


@dataclass(frozen=True)
class ReplayOutcome:
    """What the replay kept (its manifest, written when the run's tables are), the rows it wrote (`replayed`:
    every row of a partition replayed whole, the added rows and the kept last rows of one that went on), the
    partitions that went on, and the kept replay it went on from (None: every partition was replayed whole)."""

    kept: KeptReplay
    replayed: DataFrame
    went_on: list[tuple[str, int]]
    earlier: KeptReplay | None


def replay_kept(
    batches: DataFrame,
    files: Sequence[FileGroup],
    settings: AuditSettings,
    transaction_log: DataFrame | None,
    checkpoints: DataFrame | None,
    scratch: Scratch,
    keeping: Keeping,
    outputs: TaskOutputs | None = None,
) -> tuple[DataFrame, list[ReplayUnit]]:
    """The replay of `batches` (whose rows `files` hold) as the `replay` scratch table, its tasks reading the files
    themselves and writing it where the run keeps it (pipeline.audit.replay.kept), going on from the kept replay
    for each partition that can (the run's manifest is written once its outputs are:
    pipeline.audit.engine.kept_findings). Also the units of files that hold whole producers, for the snapshot walk. With
    `outputs`, the tasks also write the findings of the row-local frames and the parts of the aggregates of the rows
    they replay, each a scratch table (pipeline.audit.replay.task_outputs)."""
    spark = batches.sparkSession
    exchanged = replay_pass(batches, settings, transaction_log, checkpoints)  # planned only: it gives the schema
    scratch.materialise(replica_facts(audited_broker(batches), settings, checkpoints), "replica_facts")
    run_folder = f"{keeping.folder}/{keeping.run_id}"
    versions_path = None
    if transaction_log is not None:
        versions_path = f"{run_folder}/coordinator_versions"
        coordinator_versions(transaction_log).write.mode("overwrite").parquet(versions_path)
    earlier = keeping.earlier
    if earlier is not None and earlier.fingerprint != fingerprint(settings, transaction_log is not None):
        earlier = None
    replicas = _audited_replicas(scratch.small_rows("replica_facts", [*REPLICA, *COMPACTION, LOG_START]))
    plans = [_partition_files(group, earlier, replicas) for group in files]
    tasks = task_files(plans, int(spark.conf.get(SHUFFLE_PARTITIONS)))
    function = partial(
        replay_files,
        tasks=tasks,
        kinds=_topic_kinds(sorted({group.topic for group in files}), settings),
        facts_path=scratch.path("replica_facts"),
        versions_path=versions_path,
        input_schema=to_arrow_schema(exchanged.rows.schema),
        schema=to_arrow_schema(exchanged.schema),
        replay_function=exchanged.function,
        kept_tails=tuple(earlier.tails) if earlier else (),
        kept_ends=tuple(earlier.ends) if earlier else (),
        changed_producers=_changed_producers(spark, earlier, versions_path),
        version_mode=0 if settings.transaction_version == "auto" else int(settings.transaction_version),
        out_folder=run_folder,
        outputs=outputs,
    )
    pass_rows = spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(
        shipped(spark, function), from_arrow_schema(WRITTEN)
    )
    scratch.stats.measure(pass_rows, "replay")
    started = time.perf_counter()
    written = pass_rows.collect()
    kept = _manifest(keeping.run_id, settings, transaction_log is not None, plans, written, earlier, versions_path)
    whole = sum(1 for row in written if row.kind == "body" and row.whole)
    log.info(
        "replay: %d partition(s) replayed whole, %d going on from the kept replay, in %.1f s",
        whole,
        sum(1 for row in written if row.kind == "body") - whole,
        time.perf_counter() - started,
    )
    paths = [path for part in kept.partitions.values() for path in part["body"]] + kept.tails
    new_paths = [row.path for row in written if row.kind in ("body", "tails") and row.path]
    went_on = [(row.topic, row.partition) for row in written if row.kind == "body" and not row.whole]
    replayed = scratch.register("replayed", exchanged.schema, new_paths)
    tables = {} if outputs is None else {**outputs.schemas(), COPIES_TABLE: COPIES_SCHEMA}
    for table, table_schema in tables.items():
        found = [row.path for row in written if row.kind == "output" and row.table == table]
        scratch.register(table, from_arrow_schema(table_schema), found)
    keeping.outcome = ReplayOutcome(kept, replayed, went_on, earlier)
    # a partition of one batch per replica has no body file: its rows are all in the tails
    units = [ReplayUnit((*part["body"], *kept.tails), tuple(json.loads(key))) for key, part in kept.partitions.items()]
    return scratch.register("replay", exchanged.schema, paths), units


def _audited_replicas(facts: list[dict]) -> dict[str, list]:
    """Per partition key: its audited replicas (cluster, broker, compaction, checkpointed log start), sorted, from
    the rows of `replica_facts`, one per partition. Every replayed row carries its replica's compaction and log start,
    so a change of either replays the partition whole."""
    replicas: dict[str, list] = {}
    for row in facts:
        replica = [row["cluster_id"], row["broker_id"], row["compacted_by"], row["cleaner_offset"], row[LOG_START]]
        replicas.setdefault(partition_key(row["topic"], row["partition"]), []).append(replica)
    return {key: sorted(values, key=_nulls_first) for key, values in replicas.items()}


def _nulls_first(replica: list) -> tuple:
    """Replicas sort as Spark's rows did, a null before any value (a dump's replica has no cluster)."""
    return tuple((value is not None, value) for value in replica)


def _partition_files(group: FileGroup, earlier: KeptReplay | None, replicas: dict[str, list]) -> PartitionFiles:
    """The partition's files to replay: those added since the kept replay when it can go on from it (the files it
    read are all still there, it audited the same replicas, and it has not too many body files), else all."""
    key = partition_key(group.topic, group.partition)
    kept = None if earlier is None else earlier.partitions.get(key)
    read = frozenset(kept["read"]) if kept is not None else frozenset()
    goes_on = (
        kept is not None
        and read <= set(group.paths)
        and kept["replicas"] == replicas.get(key, [])
        and len(kept["body"]) < MOST_BODY_FILES
    )
    paths = tuple(path for path in group.paths if path not in read) if goes_on else group.paths
    size = group.size_bytes * len(paths) // max(1, len(group.paths))  # the files of a partition are alike in size
    return PartitionFiles(
        group.topic, group.partition, paths, group.paths, goes_on, size, replicas.get(key, []), group.copies
    )


def _changed_producers(spark, earlier: KeptReplay | None, versions_path: str | None) -> frozenset[tuple[str, int]]:
    """(cluster, producer id) whose coordinator versions differ from the kept replay's: their partitions are replayed
    whole, since the versions feed every row's replay. One row per changed producer id on the driver."""
    if earlier is None or versions_path is None or earlier.coordinator_versions is None:
        return frozenset()
    before = spark.read.parquet(earlier.coordinator_versions)
    now = spark.read.parquet(versions_path)
    keys = ["cluster_id", "producer_id"]
    same = F.col("b.tv2_from_epoch").eqNullSafe(F.col("n.tv2_from_epoch")) & F.col("b.tv1_through_epoch").eqNullSafe(
        F.col("n.tv1_through_epoch")
    )
    changed = before.alias("b").join(now.alias("n"), on=keys, how="full_outer").where(~same).select(*keys)
    return frozenset((row.cluster_id, row.producer_id) for row in changed.collect())


def _manifest(
    run_id: str,
    settings: AuditSettings,
    with_transaction_log: bool,
    plans: list[PartitionFiles],
    written: list,
    earlier: KeptReplay | None,
    versions_path: str | None,
) -> KeptReplay:
    """What this replay kept: per partition, the files it read, its body files (the kept ones it went on from and
    the new one) and its audited replicas."""
    bodies: dict[str, tuple[list[str], bool]] = {}
    for row in written:
        if row.kind == "body":
            bodies[partition_key(row.topic, row.partition)] = ([row.path] if row.path else [], row.whole)
    partitions = {}
    for plan in plans:
        key = partition_key(plan.topic, plan.partition)
        new, whole = bodies.get(key, ([], not plan.goes_on))  # no row: it went on without added rows
        kept = [] if whole or earlier is None else earlier.partitions[key]["body"]
        partitions[key] = {"read": list(plan.every_path), "body": [*kept, *new], "replicas": plan.replicas}
    return KeptReplay(
        run_id=run_id,
        fingerprint=fingerprint(settings, with_transaction_log),
        partitions=partitions,
        tails=[row.path for row in written if row.kind == "tails"],
        ends=[row.path for row in written if row.kind == "ends"],
        coordinator_versions=versions_path,
    )


def task_files(plans: Sequence[PartitionFiles], most_tasks: int) -> tuple[tuple[PartitionFiles, ...], ...]:
    """The partitions each task replays: the largest first onto the task with the fewest bytes so far, so the tasks
    get about the same bytes."""
    count = max(1, min(len(plans), most_tasks))
    loads = [(0, task) for task in range(count)]
    assigned: list[list[PartitionFiles]] = [[] for _ in range(count)]
    for plan in sorted(plans, key=lambda plan: -plan.size_bytes):
        load, task = heapq.heappop(loads)
        assigned[task].append(plan)
        heapq.heappush(loads, (load + plan.size_bytes, task))
    return tuple(tuple(plans) for plans in assigned)


def _topic_kinds(topics: list[str], settings: AuditSettings) -> dict[str, tuple[bool, bool]]:
    """Per topic name: coordinator, KRaft, as the exchange path's `topic_matches` says (no Spark job)."""
    return {
        topic: (
            topic_name_matches(settings.coordinator_topics, topic),
            topic_name_matches(settings.kraft_topics, topic),
        )
        for topic in topics
    }


def replay_files(
    ids: Iterator[pa.RecordBatch],
    *,
    tasks: tuple[tuple[PartitionFiles, ...], ...],
    kinds: dict[str, tuple[bool, bool]],
    facts_path: str,
    versions_path: str | None,
    input_schema: pa.Schema,
    schema: pa.Schema,
    replay_function: Callable[..., Iterator[pa.RecordBatch]],
    kept_tails: tuple[str, ...],
    kept_ends: tuple[str, ...],
    changed_producers: frozenset[tuple[str, int]],
    version_mode: int,
    out_folder: str,
    outputs: TaskOutputs | None = None,
) -> Iterator[pa.RecordBatch]:
    """Executor side: the replay of the partitions of the tasks named by `ids`, written into `out_folder`; with
    `outputs`, the findings of the row-local frames on every row written and the parts of the aggregates of the
    rows replayed (pipeline.audit.replay.task_outputs). One WRITTEN row per file."""
    mine = [plan for batch in ids for task in batch.column(0).to_pylist() for plan in tasks[task]]
    facts = read_folder(facts_path)
    versions = None if versions_path is None else read_folder(versions_path)
    last_segments = {tuple(row[name] for name in REPLICA): row["last_segment_base_offset"] for row in facts.to_pylist()}
    going_on = {(plan.topic, plan.partition) for plan in mine if plan.goes_on}
    tails = _kept_rows(kept_tails, going_on)
    ends = _kept_rows(kept_ends, going_on)

    def rows_of(plan: PartitionFiles) -> Callable[[Iterable[str]], Iterator[pa.RecordBatch]]:
        kind = kinds[plan.topic]

        def read(paths: Iterable[str]) -> Iterator[pa.RecordBatch]:
            for path in paths:
                cluster = cluster_of(path)
                replicas = matching_rows(facts, cluster_id=cluster, topic=plan.topic)
                producers = None if versions is None else matching_rows(versions, cluster_id=cluster)
                for batch in read_file(path):
                    rows = input_rows(batch, cluster, plan.topic, kind, replicas, producers, input_schema)
                    yield from rows.to_batches()

        return read

    found = None if outputs is None else TableFiles(outputs.folder, {**outputs.schemas(), COPIES_TABLE: COPIES_SCHEMA})
    compacted = {
        (row["cluster_id"], row["topic"], row["partition"]): row["compacted_by"] is not None
        for row in facts.select(["cluster_id", "topic", "partition", "compacted_by"]).to_pylist()
    }
    written, all_tails, all_ends = [], [], []
    for plan in mine:
        if found is not None and plan.copies > 1:  # every file of it, whichever it replays
            found.add(COPIES_TABLE, _copies(plan, kinds[plan.topic][0], compacted))
        replayed = replay_partition(
            plan,
            rows_of(plan),
            replay_function,
            schema,
            _of_partition(tails, plan) if tails is not None else _empty(schema),
            _of_partition(ends, plan) if ends is not None else _empty(ENDS),
            changed_producers,
            last_segments,
            version_mode,
            out_folder,
            outputs,
            found,
        )
        path, rows = replayed.body or (None, 0)  # a row for each partition, whether it went on and wrote no body
        written.append(("body", path, rows, plan, replayed.whole, None))
        for table, rows in replayed.parts:
            found.add(table, rows)
        all_tails.append(replayed.tails)
        all_ends.append(replayed.ends)
    for kind, tables, table_schema in (("tails", all_tails, schema), ("ends", all_ends, ENDS)):
        table = pa.concat_tables(tables) if tables else _empty(table_schema)
        if table.num_rows:
            written.append((kind, write_table(out_folder, kind, table), table.num_rows, None, False, None))
            if kind == "tails" and outputs is not None:
                outputs.check(table, found)
    if found is not None:
        written += [("output", path, rows, None, False, table) for table, path, rows in found.close()]
    yield pa.RecordBatch.from_pylist(
        [
            {
                "kind": kind,
                "path": path,
                "rows": rows,
                "topic": None if plan is None else plan.topic,
                "partition": None if plan is None else plan.partition,
                "whole": whole,
                "table": table,
            }
            for kind, path, rows, plan, whole, table in written
        ],
        schema=WRITTEN,
    )


def _copies(plan: PartitionFiles, coordinator_topic: bool, compacted: dict[tuple, bool]) -> pa.Table:
    """The `replica_divergence.copies` frame's rows of the partition, from every copy's files: compacted as its
    audited replica is, or as a coordinator topic is (each broker's cleaner compacts its own copy)."""
    by_cluster: dict[str, list[str]] = {}
    for path in plan.every_path:
        by_cluster.setdefault(cluster_of(path), []).append(path)
    return file_copies(
        by_cluster,
        plan.topic,
        plan.partition,
        lambda cluster: coordinator_topic or compacted.get((cluster, plan.topic, plan.partition), False),
    )


def _kept_rows(paths: tuple[str, ...], partitions: set[tuple[str, int]]) -> pa.Table | None:
    """The rows of kept `tails` or `ends` files of `partitions`."""
    if not paths or not partitions:
        return None
    tables = []
    for path in paths:
        filesystem, local = resolve(path)
        table = pq.read_table(local, filesystem=filesystem)
        keys = pc.binary_join_element_wise(table["topic"], pc.cast(table["partition"], pa.string()), "\x00")
        wanted = pa.array([f"{topic}\x00{partition}" for topic, partition in partitions])
        tables.append(table.filter(pc.is_in(keys, value_set=wanted)))
    return pa.concat_tables(tables)


def _of_partition(table: pa.Table, plan: PartitionFiles) -> pa.Table:
    return table.filter(pc.and_(pc.equal(table["topic"], plan.topic), pc.equal(table["partition"], plan.partition)))


def _empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()
