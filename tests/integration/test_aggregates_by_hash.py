"""The plans over every replayed row neither sort nor shuffle them needlessly: one aggregate of a string (a
SortAggregate) makes Spark sort all 10 M producer rows of a 10 M-batch run, and a join with a table it cannot size
shuffles and sorts every row for it (docs/engine.md, "Plans without needless sorts")."""

from __future__ import annotations

import pytest

from pipeline.audit.replay.plan import replay
from pipeline.audit.state.partitions import open_transactions, partition_offsets, partition_producer_parts
from pipeline.audit.state.segments import segment_parts
from pipeline.audit.state.transactions import build_producer_state, build_transactions
from pipeline.config import AuditSettings
from schemas.batches import BATCHES


@pytest.mark.parametrize("build", [build_transactions, build_producer_state], ids=lambda build: build.__name__)
def test_aggregates_of_the_producer_rows_are_hashed(spark, build):
    producer_rows = replay(spark.createDataFrame([], BATCHES), AuditSettings()).where("is_producer_row")
    plan = build(producer_rows)._jdf.queryExecution().executedPlan().toString()

    assert "HashAggregate" in plan
    assert "SortAggregate" not in plan


def test_partitions_join_the_replayed_rows_with_their_lso_by_broadcast(spark, tmp_path):
    spark.createDataFrame([], BATCHES).write.parquet(str(tmp_path / "batches"))
    replayed = replay(spark.read.schema(BATCHES).parquet(str(tmp_path / "batches")), AuditSettings())
    transactions = build_transactions(replayed.where("is_producer_row"))
    open_txns = open_transactions(transactions, segment_parts().of(replayed), AuditSettings(), None)
    # As for a large log, where Spark cannot tell that the per-partition rows are few: nothing broadcast unasked.
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        producers = partition_producer_parts().of(replayed)
        plan = (
            partition_offsets(replayed, producers, segment_parts().of(replayed), transactions, open_txns)
            ._jdf.queryExecution()
            .executedPlan()
            .toString()
        )
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")

    lso_joins = [line.strip(" :+-") for line in plan.splitlines() if "Join" in line and "< lso" in line]
    # The data batches and the aborted transactions, each joined with the LSO of their partition.
    assert len(lso_joins) == 2
    assert all(join.startswith("BroadcastHashJoin") for join in lso_joins)
