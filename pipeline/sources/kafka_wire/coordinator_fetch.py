"""The coordinator topics over the Kafka protocol: the records of the `__transaction_state` and `__consumer_offsets`
batches a `kafka://` input fetches, made into rows as the log-dir reader makes them of segments
(`internal_topics`), so that the TSL and XTX rules run on a cluster read over the wire.

They are fetched only when `kafka.topics` names them (a glob that starts with `__`) and the principal may read
them, which managed services seldom allow. A task fetches its ranges again for their records, as the log-dir
reader reads a segment again for them: the coordinator topics are small beside the data.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from pipeline.arrow_pass import ArrowPass
from pipeline.config import KafkaSettings
from pipeline.sources.coordinator_records.rows import BATCH_FIELDS, CoordinatorRecords
from pipeline.sources.internal_topics import TOPIC_READERS
from pipeline.sources.kafka_wire.fetch import dealt, provenance, responses, with_readers
from pipeline.sources.kafka_wire.fetch_plan import WirePlan
from schemas.batches import STATUS_OK


def coordinator_passes(
    spark: SparkSession, wires: list[WirePlan], settings: KafkaSettings
) -> tuple[ArrowPass | None, ArrowPass | None]:
    """(`transaction_log` rows, offset-commit records) of the coordinator-topic ranges of `wires`, as passes that
    fetch them in the tasks; None for a topic no input reads."""
    passes: list[ArrowPass | None] = []
    for topic, (schema, records, transactional_only) in TOPIC_READERS.items():
        ranges = [fetch for wire in wires for fetch in wire.ranges if fetch.topic == topic]
        rows = partial(_records_of, settings, records, transactional_only)
        passes.append(ArrowPass(dealt(spark, ranges), rows, schema) if ranges else None)
    transaction_log, offset_commit_records = passes
    return transaction_log, offset_commit_records


def _records_of(
    settings: KafkaSettings,
    records: CoordinatorRecords,
    transactional_only: bool,
    descriptor_batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Executor side: fetch ranges in, the rows of their batches' records out, one Arrow batch per response."""
    for reader, fetch in with_readers(settings, descriptor_batches):
        for response in responses(reader, fetch, verify_records=False):
            entries = response.entries
            # Entries the broker cannot iterate, and legacy or control batches, hold no such records.
            kept = pc.and_(pc.equal(entries["entry_status"], STATUS_OK), pc.invert(entries["is_control"]))
            if transactional_only:
                kept = pc.and_(kept, entries["is_transactional"])
            kept = pc.fill_null(kept, False)
            batches = entries.filter(kept).select(list(BATCH_FIELDS)).to_pydict()
            starts = batches["position"]
            if not starts:
                continue
            ends = [start + size for start, size in zip(starts, batches["size_bytes"], strict=True)]
            batches["position"] = batches["base_offset"]  # as the partition's `batches` rows say it
            rows = records.window(memoryview(response.records), starts, ends, batches, provenance(fetch))
            if rows.num_rows:
                yield rows
