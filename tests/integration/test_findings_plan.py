"""A frame's conditions are tested inside the scan's compiled code: a filter holding the interpreted findings array
leaves whole-stage code, and every row of the frame is then copied out of the scan and tested row by row (twice the
CPU of the `batches` frame at 10 M batches; docs/engine.md, "Plans without needless sorts")."""

from __future__ import annotations

import re

import pytest

from pipeline.audit.core.columns import explode_findings
from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.engine.run import CHECKS, FRAMES
from pipeline.audit.replay.plan import replay
from pipeline.config import AuditSettings
from schemas.batches import BATCHES


@pytest.mark.parametrize("name", ["batches", "producer_batches"])
def test_the_conditions_are_filtered_in_the_scans_compiled_code(spark, tmp_path, name):
    replayed = replay(spark.createDataFrame([], BATCHES), AuditSettings())
    replayed.write.parquet(str(tmp_path / "replay"))
    scanned = spark.read.parquet(str(tmp_path / "replay"))
    inputs = AuditInputs(
        batches=scanned,
        producer_batches=scanned.where("is_producer_row"),
        transactions=None,
        producer_state=None,
        segments=None,
        partition_producers=None,
        replicas=None,
        open_transactions=None,
        partitions=None,
        all_batches=None,
        transaction_causes=None,
    )
    ctx = AuditContext(AuditSettings())
    checks = [(check.rule, check.function(ctx)) for check in CHECKS[name]]
    plan = explode_findings(FRAMES[name].build(inputs, ctx), checks)._jdf.queryExecution().executedPlan().toString()

    filters = [line for line in plan.splitlines() if re.search(r"\bFilter\b", line)]
    conditions = [line for line in filters if "coalesce(" in line]
    assert len(conditions) == 1
    assert re.match(r"^[\s+\-:]*\*\(\d+\) Filter", conditions[0]), conditions[0]
    assert "size(" not in plan
