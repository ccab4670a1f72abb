"""What the replay's tasks make of the rows they write (pipeline.audit.replay.task_outputs) equals what Spark makes of
the same replay rows, column for column, on generated logs with anomalies of every family: the row-local frames'
findings (`explode_findings` of the same checks) and the aggregates' parts, taken whole or over chunks and merged.
Each row expression evaluates in Arrow as its Spark column does, nulls included."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.testing import assertDataFrameEqual

import schemas
from pipeline.audit.core import expr as E
from pipeline.audit.core.columns import explode_findings
from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.registry import CHECKS
from pipeline.audit.core.row_checks import findings_of, row_local_frames
from pipeline.audit.replay.plan import replay
from pipeline.config import AuditSettings
from pipeline.tables.store import TableStore

CTX = AuditContext(AuditSettings())


@pytest.fixture(scope="module")
def replayed(spark, generated_warehouse):
    batches = TableStore(spark, str(generated_warehouse)).read("batches", schema=schemas.BATCHES)
    return replay(batches.withColumn("cluster_id", F.coalesce("cluster_id", F.lit(""))), CTX.settings).localCheckpoint()


def test_the_tasks_find_what_spark_finds_on_every_row_local_frame(spark, replayed):
    rows = replayed.toArrow()
    frames = row_local_frames(CTX, replayed.schema)
    assert {frame.frame for frame in frames} == {"batches", "producer_batches"}
    fired = set()
    for frame in frames:
        in_tasks = [found for name, found in findings_of(frames, rows) if name == frame.frame]
        tasks = spark.createDataFrame(pa.concat_tables(in_tasks), explode_findings_schema(replayed, frame.frame))
        frame_rows = replayed if frame.rows is None else replayed.where(frame.rows.column())
        expected = explode_findings(frame_rows, [(c.rule, c.function(CTX)) for c in CHECKS[frame.frame]])
        assert from_arrow_schema(frame.schema).simpleString() == expected.schema.simpleString()
        assertDataFrameEqual(tasks, expected)
        fired |= {row.rule_code for row in expected.select("rule_code").distinct().collect()}
    # the anomalies make most of the checks fire, so the comparison is not one of empty tables
    assert len(fired) >= 15, sorted(fired)


def explode_findings_schema(replayed, frame: str):
    return explode_findings(replayed.limit(0), [(c.rule, c.function(CTX)) for c in CHECKS[frame]]).schema


NULLABLE = [(None, None, None, None), (1, 0, "2/x", True), (-7, 3, "1", False), (2147483647, 2, None, None)]
EXPRESSIONS = {
    "and_or": (E.col("a") > 0) & E.col("flag") | (E.col("b") == 3),
    "not_null": ~(E.col("a") > E.col("b")),
    "remainder": E.col("a") % E.lit(4),
    "when": E.when(E.col("a") < 0, E.lit("negative")).when(E.col("flag"), E.lit("flagged")),
    "otherwise": E.when(E.col("a") == 2147483647, E.lit(0)).otherwise(E.col("a") + 1),
    "coalesce": E.coalesce(E.col("text").startswith("2"), E.lit(False)),
    "isin": ~E.col("b").isin(0, 2),
    "null_safe": E.col("b").eqNullSafe(E.lit(None)),
    "format": E.format_string("%d/%s/%s", "a", E.col("text"), E.col("flag")),
    "cast": E.coalesce(E.col("b").cast("string"), E.lit("null")),
    "bits": E.col("a").bitwiseAND(0xFF80) != 0,
}


def test_each_expression_evaluates_in_arrow_as_its_spark_column(spark):
    df = spark.createDataFrame(NULLABLE, "a long, b int, text string, flag boolean")
    table = df.toArrow()
    spark_values = df.select(*[expression.column().alias(name) for name, expression in EXPRESSIONS.items()]).collect()
    for name, expression in EXPRESSIONS.items():
        arrow_values = E.as_array(expression.evaluate(table), table.num_rows).to_pylist()
        assert arrow_values == [row[name] for row in spark_values], name


def test_the_tasks_aggregate_the_replay_as_spark_does_whole_and_in_merged_chunks(spark, replayed):
    from pipeline.audit.state.materialised import replay_aggregates

    rows = replayed.toArrow()
    for aggregate in replay_aggregates():
        expected = aggregate.of(replayed)
        schema = pa.schema([pa.field(f.name, f.type) for f in expected.toArrow().schema])
        whole = aggregate.of_rows(rows, schema)
        chunks = [aggregate.of_rows(rows.slice(start, 500), schema) for start in range(0, rows.num_rows, 500)]
        merged = aggregate.merged_rows(pa.concat_tables(chunks), schema)
        for name, table in (("whole", whole), ("merged", merged)):
            assert table.num_rows == expected.count() > 0, (aggregate.name, name)
            assertDataFrameEqual(spark.createDataFrame(table, expected.schema), expected)
