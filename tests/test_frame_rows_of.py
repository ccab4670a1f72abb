"""A frame that declares its rows all come from one side table (`Frame.rows_of`) builds no row without that
table's rows: the engine does not build it when the run knows the table is empty, so the declaration must hold."""

from __future__ import annotations

from dataclasses import replace

import pytest
from logbuilder import T0, PartitionLog
from pyspark.sql import functions as F
from test_rules import SCENARIOS

from pipeline.audit.context import AuditContext
from pipeline.audit.registry import FRAMES
from pipeline.audit.state import build_state
from pipeline.config import AuditSettings
from schemas.batches import BATCHES
from schemas.file_problems import FILE_PROBLEMS
from schemas.leader_epochs import LEADER_EPOCHS
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.txn_index import TXN_INDEX

SIDE_TABLES = {  # AuditInputs attribute: (PartitionLog attribute, schema)
    "txn_index": ("index_rows", TXN_INDEX),
    "producer_snapshots": ("snapshot_rows", PRODUCER_SNAPSHOTS),
    "file_problems": ("problem_rows", FILE_PROBLEMS),
    "leader_epochs": ("leader_epoch_rows", LEADER_EPOCHS),
}
DECLARING = sorted(name for name, frame in FRAMES.items() if frame.rows_of)
CTX = AuditContext(AuditSettings(), None)


def test_the_frames_of_the_side_tables_declare_them():
    assert {FRAMES[name].rows_of for name in DECLARING} == set(SIDE_TABLES)


@pytest.fixture(scope="module")
def inputs(spark, scratch):
    """The audit state of every rule scenario that breaks its rule, with the side tables the scenarios wrote."""
    rows, side_rows = [], {table: [] for table in SIDE_TABLES}
    for code, (build, _) in SCENARIOS.items():
        log = PartitionLog(topic=code.lower(), clock=T0)
        build(log, False)
        rows.extend(log.rows)
        for table, (attribute, _) in SIDE_TABLES.items():
            side_rows[table].extend(getattr(log, attribute))

    def known_cluster(df):
        return df.withColumn("cluster_id", F.coalesce(F.col("cluster_id"), F.lit("")))

    side = {
        table: known_cluster(spark.createDataFrame(side_rows[table], schema))
        for table, (_, schema) in SIDE_TABLES.items()
    }
    return build_state(known_cluster(spark.createDataFrame(rows, BATCHES)), side, CTX, scratch("rows_of"))


@pytest.mark.parametrize("name", DECLARING)
def test_a_frame_has_no_rows_without_the_rows_of_its_side_table(name, inputs):
    frame = FRAMES[name]
    assert frame.build(inputs, CTX).count() > 0  # with the table's rows it has some, so the check below can fail
    emptied = replace(inputs, **{frame.rows_of: getattr(inputs, frame.rows_of).limit(0)})
    assert frame.build(emptied, CTX).count() == 0
