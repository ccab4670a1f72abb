"""Byte-range splitting of a large segment over Spark's tasks: one task per split, the rows of one pass."""

from __future__ import annotations

from collections import Counter

from pyspark.sql import functions as F

from pipeline.config import Settings
from pipeline.sources.segments import read_segments
from schemas.batches import STATUS_OK, STATUS_TRUNCATED
from tests.large_segments import build_segment, write_partition


def test_read_segments_splits_a_large_segment_over_tasks(spark, tmp_path):
    data, index = build_segment(8000, seed=11)
    data = data[:-25]
    assert len(data) > 1_500_000
    write_partition(tmp_path, data, index)
    split = Settings.model_validate({"ingest": {"segment_split_bytes": 384 * 1024}})

    unsplit = read_segments(spark, [str(tmp_path)], Settings())
    split_df = read_segments(spark, [str(tmp_path)], split)
    assert unsplit.rdd.getNumPartitions() == 1
    assert split_df.rdd.getNumPartitions() == -(-len(data) // (384 * 1024))
    split_rows = [row.asDict() for row in split_df.withColumn("task", F.spark_partition_id()).collect()]
    assert len({row.pop("task") for row in split_rows}) == split_df.rdd.getNumPartitions()

    def by_position(rows: list[dict]) -> list[dict]:
        return sorted(rows, key=lambda row: row["position"])

    assert by_position(split_rows) == by_position([row.asDict() for row in unsplit.collect()])
    assert Counter(row["entry_status"] for row in split_rows) == {STATUS_OK: 7999, STATUS_TRUNCATED: 1}
