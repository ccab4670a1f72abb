"""The Arrow-built partition sets of coordinator records against Spark's own expression for them
(tests/reference_coordinator.py)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T
from reference_coordinator import spark_partition_set

from pipeline.audit.replay.partition_sets import partition_names
from schemas.transaction_log import TRANSACTION_PARTITIONS

SCHEMA = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("partitions", TRANSACTION_PARTITIONS)])


EDGE_CASES = [
    None,
    [],
    [("orders", [])],
    [("orders", [3, 1, 2])],
    [("orders", [1, 1]), ("orders", [1, 0])],
    [("b", [10, 2]), ("a", [2]), ("a-1", [0]), ("a", [-1])],
    [None],
    [("orders", None)],
    [("orders", [1]), ("payments", None)],
    [(None, [4])],
    [("orders", [None, 5])],
    [(None, [None])],
    [("ördërs", [1]), ("Orders", [1]), ("orders", [1])],
]


def _random_rows(count: int, seed: int) -> list:
    rand = random.Random(seed)
    topics = ["a", "b", "orders", "orders-v2", "Ö", None]

    def entry():
        if rand.random() < 0.02:
            return None
        numbers = [rand.choice([None, *range(12)]) for _ in range(rand.randint(0, 4))]
        return (rand.choice(topics), None if rand.random() < 0.02 else numbers)

    return [None if rand.random() < 0.05 else [entry() for _ in range(rand.randint(0, 4))] for _ in range(count)]


@pytest.mark.parametrize("rows", [EDGE_CASES, _random_rows(3000, 7)], ids=["edge cases", "random"])
def test_same_sets_as_spark(spark, rows):
    df = spark.createDataFrame(list(enumerate(rows)), SCHEMA).orderBy("id")
    got = partition_names(df.toArrow()["partitions"]).to_pylist()
    want = df.select("id", spark_partition_set(F.col("partitions")).alias("names")).collect()
    assert got == [row.names for row in want]
    assert any(row.names is None for row in want) and any(row.names == [] for row in want)


def test_sliced_input_keeps_its_own_rows():
    """Arrow hands a UDF slices of larger arrays; names come from the slice's rows only."""
    whole = pa.array(
        [[{"topic": "a", "partitions": [1]}], [{"topic": "b", "partitions": [2, 2]}], None],
        pa.list_(pa.struct([("topic", pa.string()), ("partitions", pa.list_(pa.int32()))])),
    )
    assert partition_names(whole.slice(1, 2)).to_pylist() == [["b-2"], None]
