"""The warehouse layout, and the upgrade in place of a warehouse an older release wrote.

Layout 2 partitions every table by `cluster_id`, then `topic`, so a run replaces exactly the (cluster, topic)
pairs it audited and never another cluster's rows of the same topics. Layout 1, the releases before, partitioned
by `topic` only, and its oldest tables lack `cluster_id`. Every successful writer records the layout it left in
its `runs` row (`layout_version`).

A writer upgrades an older warehouse before its own run, holding the warehouse lock: each table whose partition
columns are not its schema's is rewritten whole, in one Delta commit, with the value the older release implied for
what it lacks (`cluster_id` "", the unknown cluster, as every read fills it: `TableStore.read`). `batches` and
`transaction_log` are rewritten one file per segment file, as the ingest writes them, so the incremental ingest
and the replay's own file reads keep working. The upgrade is published as a run of its own (`upgrade`) before the
run goes on, so a run failing later rolls back to the upgraded tables; an upgrade interrupted between two tables
leaves each old or new, and the next writer upgrades the rest. The rows are the same, so a run after the upgrade
reports no finding as new against the run before it.
"""

from __future__ import annotations

import logging

from pyspark.sql import functions as F

import schemas
from pipeline.arrow_pass import ArrowPass
from pipeline.tables.parquet_sink import stage_pass
from pipeline.tables.staged_write import OVERWRITE, staged_write
from pipeline.tables.store import TableStore

log = logging.getLogger(__name__)

LAYOUT_VERSION = 2
ONE_FILE_PER_SEGMENT = ("batches", "transaction_log")  # written `file_by="source_file"` (pipeline.ingest)


def outdated_tables(store: TableStore, tables: list[str]) -> list[str]:
    """The existing `tables` whose partitioning is not their schema's; from their Delta logs, no Spark job."""
    return [
        table
        for table in tables
        if store.exists(table) and store.partition_columns(table) != schemas.PARTITION_BY[table]
    ]


def upgrade_tables(store: TableStore, tables: list[str]) -> list[str]:
    """Rewrite each of `tables` in the current layout, one commit each; the actions taken."""
    actions = []
    for table in tables:
        before = store.partition_columns(table)
        version = _rewrite(store, table)
        after = schemas.PARTITION_BY[table]
        actions.append(f"upgraded {table} from partitions {before} to {after} (version {version})")
        log.warning("warehouse upgrade: %s", actions[-1])
    return actions


def _rewrite(store: TableStore, table: str) -> int:
    schema, partition_by = schemas.SCHEMAS[table], schemas.PARTITION_BY[table]
    rows = store.read(table, schema=schema)
    file_by = "source_file" if table in ONE_FILE_PER_SEGMENT else None
    if file_by is not None:
        # A file per segment file, its rows in their order in the segment, as the decode wrote them.
        rows = rows.repartition(F.col(file_by)).sortWithinPartitions(file_by, "position")
    with staged_write(store.path(table), schema, OVERWRITE, partition_by) as write:
        stage_pass(ArrowPass.of(rows), write.folder, partition_by, file_by=file_by)
        return write.commit()
