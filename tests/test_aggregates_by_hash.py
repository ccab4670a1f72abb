"""The aggregates over every producer row are hashed, not sorted: one aggregate of a string (a SortAggregate) makes
Spark sort all 10 M producer rows of a 10 M-batch run (docs/engine.md, "Plans without needless sorts")."""

from __future__ import annotations

import pytest

from pipeline.audit.replay import replay
from pipeline.audit.transactions import build_producer_state, build_transactions
from pipeline.config import AuditSettings
from schemas.batches import BATCHES


@pytest.mark.parametrize("build", [build_transactions, build_producer_state], ids=lambda build: build.__name__)
def test_aggregates_of_the_producer_rows_are_hashed(spark, build):
    producer_rows = replay(spark.createDataFrame([], BATCHES), AuditSettings()).where("is_producer_row")
    plan = build(producer_rows)._jdf.queryExecution().executedPlan().toString()

    assert "HashAggregate" in plan
    assert "SortAggregate" not in plan
