"""A frame that declares its rows all come from one input table (`Frame.rows_of`) builds no row without that
table's rows, and one that declares its rows are of partitions with several copies (`Frame.of_copies`) builds none
from one copy of each: the engine does not build either when the run knows, so the declarations must hold."""

from __future__ import annotations

from dataclasses import replace

import pytest
from logbuilder import T0, PartitionLog
from pyspark.sql import functions as F
from test_rules import SCENARIOS

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import FRAMES
from pipeline.audit.state.materialised import build_state
from pipeline.config import AuditSettings
from schemas.batches import BATCHES
from schemas.file_problems import FILE_PROBLEMS
from schemas.leader_epochs import LEADER_EPOCHS
from schemas.live_producers import LIVE_PRODUCERS
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.txn_index import TXN_INDEX

SIDE_TABLES = {  # AuditInputs attribute: (PartitionLog attribute, schema)
    "txn_index": ("index_rows", TXN_INDEX),
    "producer_snapshots": ("snapshot_rows", PRODUCER_SNAPSHOTS),
    "file_problems": ("problem_rows", FILE_PROBLEMS),
    "leader_epochs": ("leader_epoch_rows", LEADER_EPOCHS),
    "live_producers": ("live_rows", LIVE_PRODUCERS),
}
DECLARING = sorted(name for name, frame in FRAMES.items() if frame.rows_of)
OF_COPIES = sorted(name for name, frame in FRAMES.items() if frame.of_copies)
CTX = AuditContext(AuditSettings(), None)


def test_the_frames_of_the_side_tables_declare_them_and_every_declared_table_is_an_input():
    declared = {FRAMES[name].rows_of for name in DECLARING}
    assert set(SIDE_TABLES) <= declared
    assert declared <= set(AuditInputs.__dataclass_fields__)
    assert {"batches.other_copies", "replica_divergence.copies"} <= set(OF_COPIES)


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


@pytest.mark.parametrize("name", OF_COPIES)
def test_a_frame_of_copies_has_no_rows_from_one_copy_of_each_partition(name, inputs):
    frame = FRAMES[name]
    replica = ["cluster_id", "topic", "partition", "broker_id"]
    audited = inputs.segments.select(*replica).distinct()
    rows = inputs.all_batches.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
    # a second broker's copy of every partition, none of its CRCs matching: something for each frame to report
    copied = rows.withColumn("broker_id", F.col("broker_id") + 1000).withColumn("crc_valid", F.lit(False))
    with_copies = replace(inputs, all_batches=rows.unionByName(copied))
    assert frame.build(with_copies, CTX).count() > 0  # so the check below can fail
    one_copy = rows.unionByName(copied).join(audited, on=replica, how="left_semi")
    assert frame.build(replace(inputs, all_batches=one_copy), CTX).count() == 0
