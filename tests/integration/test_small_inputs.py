"""The small-input settings: set for a small audit only, and the session's own values back after it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.small_inputs import INTERPRETED, SHUFFLE_PARTITIONS, sized_for

SAMPLE = Path(__file__).parents[2] / "samples" / "basic"

UNSET_BY_SUITE = "spark.sql.codegen.factoryMode"  # the suite's session leaves it at Spark's default


def _values(spark, keys):
    return {key: spark.conf.get(key, None) for key in keys}


def test_a_small_input_runs_interpreted_and_the_session_gets_its_settings_back(spark):
    keys = [*INTERPRETED, SHUFFLE_PARTITIONS]
    before = _values(spark, keys)
    assert before[UNSET_BY_SUITE] is None
    with sized_for(spark, batches=61, small_input_batches=100_000) as small:
        assert small
        inside = _values(spark, keys)
        assert spark.range(10).selectExpr("sum(id * 2) AS total").first().total == 90
    assert {key: inside[key] for key in INTERPRETED} == INTERPRETED
    assert inside[SHUFFLE_PARTITIONS] == str(spark.sparkContext.defaultParallelism)
    assert _values(spark, keys) == before


@pytest.mark.parametrize(("batches", "small_input_batches"), [(100_001, 100_000), (10, 0)])
def test_a_larger_input_or_a_threshold_of_zero_keeps_sparks_settings(spark, batches, small_input_batches):
    keys = [*INTERPRETED, SHUFFLE_PARTITIONS]
    before = _values(spark, keys)
    with sized_for(spark, batches, small_input_batches) as small:
        assert not small
        assert _values(spark, keys) == before
    assert _values(spark, keys) == before


def test_the_settings_are_restored_when_the_step_fails(spark):
    before = _values(spark, INTERPRETED)
    with pytest.raises(RuntimeError, match="step failed"), sized_for(spark, 1, 10):
        raise RuntimeError("step failed")
    assert _values(spark, INTERPRETED) == before


def test_the_ingest_is_sized_by_a_bound_the_listing_gives(spark, tmp_path):
    """At least as many as the entries the input decodes to (the sample's 61), and unknown for columnar inputs."""
    from pipeline.config import IngestSettings
    from pipeline.sources.input_plan import plan_inputs

    sample = plan_inputs(spark, [str(SAMPLE)], IngestSettings())
    assert 61 <= sample.most_entries() <= sum(segment.size for segment in sample.log_roots.segments)
    export = tmp_path / "batches.parquet"
    pq.write_table(pa.table({"topic": ["t"]}), export)  # the plan reads no rows, so any Parquet file will do
    assert plan_inputs(spark, [str(export)], IngestSettings()).most_entries() is None
