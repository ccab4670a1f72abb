"""The ingest step: the run's input plan, then `batches`, the tables of the files beside the segments and those of
the coordinator topics.

The plan is made once, on the driver, before anything is read: `plan_inputs` lists every input once and sorts it
by reader, keeping the listings of the log-dir inputs (files, sizes, modification times, broker ids), and
`plan_segment_reads` says from those listings and the manifest which segments are decoded again. Every reader
below takes that plan instead of listing the inputs itself. Each table is written with overwrite_partitions by
(cluster, topic) pair, so repeating the step on the same input replaces exactly the rows the previous attempt wrote,
and another cluster's rows of the same topics stay.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from functools import partial, reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

import schemas
from pipeline.arrow_pass import ArrowPass
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.ingest_manifest import (
    NO_FILES,
    SEGMENT_FACTS,
    SegmentPlan,
    kept_batches,
    pair_of,
    plan_segment_reads,
    write_manifest,
)
from pipeline.parallel import side_by_side
from pipeline.small_inputs import sized_for
from pipeline.sources.dispatch import (
    dumped_partition_files,
    read_inputs,
    read_internal_topic_inputs,
    split_offset_commit_records,
)
from pipeline.sources.dumplog.reader import dump_line_counts
from pipeline.sources.input_plan import InputPlan, plan_inputs
from pipeline.sources.log_roots import SegmentFile
from pipeline.tables.backend import replace_where_predicate
from pipeline.tables.files_by_source import FetchedFile, fetched_files, files_by_source
from pipeline.tables.parquet_sink import PartitionedParquetSink, StagedTable, WrittenFile, stage_pass, stage_tables
from pipeline.tables.stats import logged_values
from pipeline.tables.store import TableStore, cluster_topics, of_pairs
from schemas.offset_commits import CONSUMER_OFFSETS_TOPIC
from schemas.transaction_log import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

PARTITION_FILE_TABLES = {  # name (also the PartitionFiles attribute): partition columns
    "txn_index": schemas.TXN_INDEX_PARTITION_BY,
    "producer_snapshots": schemas.PRODUCER_SNAPSHOTS_PARTITION_BY,
    "file_problems": schemas.FILE_PROBLEMS_PARTITION_BY,
    "leader_epochs": schemas.LEADER_EPOCHS_PARTITION_BY,
    "checkpoints": schemas.CHECKPOINTS_PARTITION_BY,
    "partition_metadata": schemas.PARTITION_METADATA_PARTITION_BY,
}


def ingest_inputs(
    spark: SparkSession, store: TableStore, settings: Settings, run_id: str, inputs: list[str]
) -> dict[str, int]:
    """Decode what changed since the last ingest (pipeline.ingest_manifest) and replace the ingested (cluster,
    topic) pairs.

    Returns the rows written per table and the segments per outcome.
    """
    started = time.perf_counter()
    plan = plan_inputs(spark, inputs, settings.ingest, settings.kafka, partial(_fetched, store))
    with sized_for(spark, plan.most_entries(), settings.spark.small_input_batches) as small:
        counts = _ingest_planned(spark, store, settings, run_id, inputs, plan)
    _log_ingested(counts, len(plan.log_roots.skipped), time.perf_counter() - started)
    return {**counts, "plan.ingest_interpreted": int(small)}


def _fetched(store: TableStore, uri: str) -> dict[tuple[str, str, int], list[FetchedFile]] | None:
    """The `batches` files an earlier run fetched from `uri`, which this run may go on after."""
    return fetched_files(store.path("batches"), uri) if store.exists("batches") else None


def _log_ingested(counts: dict[str, int], skipped_dirs: int, seconds: float) -> None:
    """The ingest's one INFO line: what a nightly log needs to tell a full ingest from an incremental one."""
    outcomes = ", ".join(
        f"{count} {name.removeprefix('segments.')}" for name, count in counts.items() if name.startswith("segments.")
    )
    notes = [f"segments: {outcomes}"] if outcomes else []
    if skipped_dirs:
        notes.append(f"{skipped_dirs} dir(s) skipped by their name's suffix")
    log.info(
        "ingest: %s batches of %d topic(s) in %.1f s%s",
        f"{counts['batches']:,}",
        counts["topics"],
        seconds,
        f" ({'; '.join(notes)})" if notes else "",
    )


def _ingest_planned(
    spark: SparkSession, store: TableStore, settings: Settings, run_id: str, inputs: list[str], plan: InputPlan
) -> dict[str, int]:
    segments = plan_segment_reads(spark, store, settings, plan.log_roots)
    # Every non-empty segment file decodes to at least one row (an entry, or a row saying why there is none), so
    # the (cluster, topic) pairs of the segments are known from the listing; only dump and columnar inputs are read
    # for theirs. The segments are then decoded once, by the write.
    found = {pair_of(segment) for segment in segments.to_read if segment.size > 0} | segments.kept_pairs
    found |= segments.moved_pairs | plan.wire_pairs
    if plan.dump_files or plan.columnar_paths:
        others = plan.without_log_dirs()
        found |= set(distinct_pairs(read_inputs(spark, others, settings)))
    pairs = sorted(found)
    if not pairs:
        raise InputError(", ".join(inputs), "no Kafka log entries found")
    # Only the manifest waits for `batches`; the other tables read the inputs, not `batches`, so they are written
    # side by side with it, and a small ingest's jobs keep both cores busy.
    parts = side_by_side(
        {
            "batches": partial(_ingest_batches, spark, store, settings, run_id, plan, segments, pairs),
            "payloads": partial(ingest_payloads, spark, store, settings, plan, pairs),
            "partition_files": partial(ingest_partition_files, spark, store, settings, plan, pairs),
            "internal_topics": partial(ingest_internal_topics, spark, store, settings, plan, segments, pairs),
            "live_producers": partial(ingest_live_producers, spark, store, plan, pairs),
        }
    )
    counts = {name: count for part in parts.values() for name, count in part.items()}
    if plan.dump_files:
        counts.update(dump_line_counts(spark, plan.dump_files))
    return counts


def _ingest_batches(
    spark: SparkSession,
    store: TableStore,
    settings: Settings,
    run_id: str,
    plan: InputPlan,
    segments: SegmentPlan,
    pairs: list[tuple[str, str]],
) -> dict[str, int]:
    """Write `batches`, then the manifest that describes the segments it was decoded from."""
    replaced = cluster_topics(pairs)
    kept = (segments.kept_files or frozenset()).union(*(wire.kept_paths for wire in plan.wire))
    with store.staged_partitions("batches", schemas.BATCHES, schemas.BATCHES_PARTITION_BY, replaced, kept) as folder:
        decoded = stage_batches(spark, store, settings, plan, segments, folder)
    outcomes = write_manifest(store, segments, decoded, pairs, run_id)
    written = store.count("batches", replaced)
    topics = len({topic for _, topic in pairs})
    counts = {"batches": written, "topics": topics}
    counts.update({f"segments.{outcome}": count for outcome, count in outcomes.items()})
    return counts


def stage_batches(
    spark: SparkSession, store: TableStore, settings: Settings, plan: InputPlan, segments: SegmentPlan, folder: str
) -> list[WrittenFile]:
    """Write the ingested topics' `batches` rows into the staging `folder`, one file per segment file decoded;
    returns the files of the decoded segments with the facts the manifest needs of them (`SEGMENT_FACTS`).

    The decode tasks write the rows of the segments they decode themselves, never handing them to the JVM
    (pipeline.tables.parquet_sink); those of dump and columnar inputs go through the same writer, and so do the
    rows of skipped segments when the table's log does not say which files hold them (otherwise those files stay).
    """
    partition_by = schemas.BATCHES_PARTITION_BY
    decoded: list[WrittenFile] = []
    if segments.to_read:
        # Imported on use: dump and columnar inputs do not need the binary segment decoder.
        from pipeline.sources.segments import segment_pass

        segment_rows = segment_pass(spark, segments.to_read, settings)
        decoded = stage_pass(segment_rows, folder, partition_by, file_by="source_file", described=SEGMENT_FACTS)
    others = []
    if segments.kept and segments.kept_files is None:
        others.append(kept_batches(spark, store, segments))
    if plan.dump_files or plan.columnar_paths:
        not_segments = plan.without_log_dirs()
        others.append(read_inputs(spark, not_segments, settings))
    for wire in plan.wire:
        # Imported on use: only `kafka://` inputs need the protocol client.
        from pipeline.sources.kafka_wire.fetch import fetch_failure, fetch_pass

        fetched = fetch_pass(spark, wire.ranges, settings.kafka, settings.ingest.verify_records)
        try:
            stage_pass(fetched, folder, partition_by, file_by="source_file")
        except Exception as exc:  # a task's FetchError ends the run with its one line; the staged write rolls back
            if (reason := fetch_failure(exc)) is None:
                raise
            raise InputError(wire.uri, reason.removeprefix(f"{wire.uri}: ")) from None
    if others:
        stage_pass(ArrowPass.of(reduce(DataFrame.unionByName, others)), folder, partition_by, file_by="source_file")
    return decoded


def ingest_payloads(
    spark: SparkSession, store: TableStore, settings: Settings, plan: InputPlan, pairs: list[tuple[str, str]]
) -> dict[str, int]:
    """With `ingest.deep` (`--deep`), hash the records of every listed segment into `payloads`.

    Every segment is hashed again, also those the incremental ingest keeps: the table is small next to the
    segments and is then always exactly the records of `batches`. Without deep mode nothing is read; only when a
    deep ingest left a `payloads` table are the pairs' rows removed from it, so the payload rules of a later
    `audit` never compare records the batches no longer hold. Dump and columnar inputs carry no record bytes.
    """
    replaced = cluster_topics(pairs)
    if not settings.ingest.deep:
        if store.exists("payloads"):
            empty = spark.createDataFrame([], schemas.PAYLOADS)
            store.overwrite_partitions(empty, "payloads", schemas.PAYLOADS_PARTITION_BY, replaced)
        return {}
    # Imported on use: the default ingest never loads the payload pass.
    from pipeline.sources.payloads import read_payloads

    rows = read_payloads(spark, plan.log_roots.segments if plan.segment_roots else [], settings)
    store.overwrite_partitions(rows, "payloads", schemas.PAYLOADS_PARTITION_BY, replaced)
    written = store.count("payloads", replaced)
    log.debug("deep mode: hashed %d record payloads into %s", written, store.path("payloads"))
    return {"payloads": written}


def ingest_live_producers(
    spark: SparkSession, store: TableStore, plan: InputPlan, pairs: list[tuple[str, str]]
) -> dict[str, int]:
    """What the leaders of the `kafka://` inputs reported of their producers, into `live_producers` for the
    ingested pairs. Without such an input nothing is written, but a table an earlier run left loses the pairs'
    rows: the LIV rules must never compare a leader's state of another day with today's batches."""
    rows = [row for wire in plan.wire for row in wire.live_producers]
    if not rows and not store.exists("live_producers"):
        return {}
    replaced = cluster_topics(pairs)
    frame = spark.createDataFrame(rows, schemas.LIVE_PRODUCERS)
    store.overwrite_partitions(frame, "live_producers", schemas.LIVE_PRODUCERS_PARTITION_BY, replaced)
    return {"live_producers": len(rows)}


def ingest_partition_files(
    spark: SparkSession, store: TableStore, settings: Settings, plan: InputPlan, pairs: list[tuple[str, str]]
) -> dict[str, int]:
    """Decode the files beside the segments of the log-dir inputs, and the `.txnindex` and `.snapshot` dumps among
    the dump text, into their tables, for the (cluster, topic) pairs with batches (a partition without segments has
    nothing to audit). Columnar inputs carry no such files.

    The files are small (a few MB for thousands of partitions), so what costs is the Spark jobs and the commits:
    one job decodes every file into the staging folders of all six tables (`stage_tables`; dump text adds one per
    table it feeds), and delta-rs commits them, where a write per table took a job or more each plus a Delta
    writer's own.
    """
    if not plan.segment_roots and not plan.dump_files:
        return {}
    # Imported on use: dump and columnar inputs do not need the binary file readers.
    from pipeline.sources.partition_files.reader import TABLE_SCHEMAS, partition_file_pass

    replaced, wanted = cluster_topics(pairs), frozenset(pairs)
    with ExitStack() as stack:
        staged = {
            table: StagedTable(
                stack.enter_context(store.staged_partitions(table, TABLE_SCHEMAS[table], partition_by, replaced)),
                TABLE_SCHEMAS[table],
                partition_by,
            )
            for table, partition_by in PARTITION_FILE_TABLES.items()
        }
        if plan.segment_roots:
            files = partition_file_pass(spark, plan.log_roots.listings)
            stage_tables(files.descriptors, partial(_of_pairs, wanted, files.decode), staged)
            naming = [row for row in files.naming_problems if (row["cluster_id"] or "", row["topic"]) in wanted]
            if naming:
                problems = staged["file_problems"]
                with PartitionedParquetSink(
                    problems.folder, to_arrow_schema(problems.schema), problems.partition_by
                ) as sink:
                    sink.write(pa.Table.from_pylist(naming, schema=to_arrow_schema(problems.schema)))
        for table, rows in dumped_partition_files(spark, plan, settings).items():
            stage_pass(ArrowPass.of(rows.where(of_pairs(pairs))), staged[table].folder, staged[table].partition_by)
    return {table: store.count(table, replaced) for table in PARTITION_FILE_TABLES}


def _of_pairs(
    pairs: frozenset[tuple[str, str]],
    decode: Callable[[Iterator[pa.RecordBatch]], Iterator[tuple[str, pa.RecordBatch]]],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Executor side: the rows `decode` makes of the files, those of the (cluster, topic) `pairs` only (a null
    topic is none; a null cluster the unknown one, "")."""
    wanted = pa.array(sorted(f"{cluster}\x00{topic}" for cluster, topic in pairs), pa.string())
    for table, rows in decode(batches):
        cluster = pc.fill_null(rows.column("cluster_id"), "")
        keys = pc.binary_join_element_wise(cluster, rows.column("topic"), "\x00")
        yield table, rows.filter(pc.fill_null(pc.is_in(keys, value_set=wanted), False))


def ingest_internal_topics(
    spark: SparkSession,
    store: TableStore,
    settings: Settings,
    plan: InputPlan,
    segments: SegmentPlan,
    pairs: list[tuple[str, str]],
) -> dict[str, int]:
    """Decode the records of the coordinator topics among `pairs` into `transaction_log` and `offset_commits`.

    A table is written only when its topic is among the ingested ones, and for the clusters ingested with it, so an
    ingest without it neither creates nor empties it. Group metadata records of transactional batches are counted,
    not kept. `transaction_log` is incremental like `batches` (`transaction_log_reads`); `offset_commits` holds few
    rows and is decoded whole.
    """
    of_topic = {
        topic: [(cluster, topic) for cluster, of in pairs if of == topic]
        for topic in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC)
    }
    ingested = [topic for topic, topic_pairs in of_topic.items() if topic_pairs]
    if not ingested:
        return {}
    to_decode, kept = transaction_log_reads(store, segments)
    others = [segment for segment in plan.log_roots.segments if segment.topic != TRANSACTION_STATE_TOPIC]
    internal = read_internal_topic_inputs(spark, plan, settings, others + to_decode)
    if internal is None:
        return {}
    counts: dict[str, int] = {}
    if TRANSACTION_STATE_TOPIC in ingested:
        partition_by = schemas.TRANSACTION_LOG_PARTITION_BY
        replaced = cluster_topics(of_topic[TRANSACTION_STATE_TOPIC])
        with store.staged_partitions(
            "transaction_log", schemas.TRANSACTION_LOG, partition_by, replaced, kept
        ) as folder:
            for part in internal.transaction_log:
                stage_pass(part, folder, partition_by, file_by="source_file")
        counts["transaction_log"] = store.count("transaction_log", replaced)
        counts["transaction_log.partitions"] = _coordinator_partitions(store, replaced)
    if CONSUMER_OFFSETS_TOPIC in ingested:
        # Persisted because the rows are written and the group metadata among them counted.
        records = internal.offset_commit_records.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            offset_commits, group_metadata = split_offset_commit_records(records)
            store.overwrite_partitions(
                offset_commits,
                "offset_commits",
                schemas.OFFSET_COMMITS_PARTITION_BY,
                cluster_topics(of_topic[CONSUMER_OFFSETS_TOPIC]),
            )
            counts["offset_commits.skipped_group_metadata"] = group_metadata.count()
        finally:
            records.unpersist()
        counts["offset_commits"] = store.count("offset_commits", cluster_topics(of_topic[CONSUMER_OFFSETS_TOPIC]))
    log.debug("decoded the coordinator-topic records of %s: %s", ", ".join(ingested), counts)
    return counts


def transaction_log_reads(store: TableStore, segments: SegmentPlan) -> tuple[list[SegmentFile], frozenset[str]]:
    """The `__transaction_state` segments to decode, and the `transaction_log` files that stay.

    The table is written one file per segment file, like `batches`, so the files of the segments whose `batches`
    rows stay (skipped, and the part of an appended one decoded before) stay too, and only the segments `batches`
    decodes are decoded. Both tables are committed by the same runs, all or nothing (a failed run restores them),
    so the files of a kept segment are the rows its last decode made. A table whose log does not say which
    segment each file holds (or no table) has every segment decoded whole.
    """
    of_topic = [segment for segment in segments.segments if segment.topic == TRANSACTION_STATE_TOPIC]
    kept = [segment for segment in segments.kept if segment.topic == TRANSACTION_STATE_TOPIC]
    replaced = cluster_topics(pair_of(segment) for segment in kept)
    written = files_by_source(store.path("transaction_log"), replaced) if kept else None
    if written is None:
        return of_topic, frozenset()
    to_decode = [segment for segment in segments.to_read if segment.topic == TRANSACTION_STATE_TOPIC]
    return to_decode, frozenset(path for segment in kept for path in written.get(segment.location, NO_FILES).paths)


def _coordinator_partitions(store: TableStore, replaced: dict[str, list[str]]) -> int:
    """How many `__transaction_state` partitions the input held. A cluster has transaction.state.log.num.partitions
    of them (50 by default), and which one holds a transactional id is its hash modulo that number, which the log
    dirs do not record: with only some partitions read, the cross-checks cannot tell a missing id from an unread
    one, so the run says how many it read. The Delta log's statistics say it when each file holds one partition
    (the table is written one file per segment file); a Spark job counts otherwise."""
    partitions = logged_values(store.path("transaction_log"), "partition", replaced)
    if partitions is not None:
        read = len(partitions)
    else:
        transaction_log = store.read("transaction_log", schema=schemas.TRANSACTION_LOG)
        read = transaction_log.where(F.expr(replace_where_predicate(replaced))).select("partition").distinct().count()
    log.debug(
        "read %d %s partition(s); transactional ids of the partitions not read are unknown to the cross-checks",
        read,
        TRANSACTION_STATE_TOPIC,
    )
    return read


def distinct_pairs(batches: DataFrame) -> list[tuple[str, str]]:
    """The (cluster, topic) pairs of a frame, the unknown cluster as "": a short list, the only thing the steps
    collect besides aggregates."""
    pairs = batches.select(F.coalesce("cluster_id", F.lit("")).alias("cluster_id"), "topic").distinct().collect()
    return sorted((row.cluster_id, row.topic) for row in pairs)
