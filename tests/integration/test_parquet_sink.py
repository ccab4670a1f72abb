"""Parquet files written by the tasks themselves (pipeline.tables.parquet_sink): laid out as Spark lays them out,
one file per value of `file_by`, row groups of a useful size, and read back as the rows written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.testing import assertDataFrameEqual

from pipeline.arrow_pass import ArrowPass
from pipeline.audit.core.scratch import Scratch
from pipeline.tables import parquet_sink
from pipeline.tables.parquet_sink import HIVE_NULL, PartitionedParquetSink, partition_folder, stage_pass

SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("position", T.LongType(), False),
    ]
)
# Kafka topics are [a-zA-Z0-9._-]; the others exercise the escaping of dump and columnar inputs' names.
TOPICS = ["orders.v1", "payments-eu_2", "odd:name%20 x", "a/b=c?d#e"]


def folders(root: Path) -> set[str]:
    return {str(path.parent.relative_to(root)) for path in root.rglob("*.parquet")}


def test_folders_are_named_as_spark_names_them(spark, tmp_path):
    df = spark.createDataFrame([(topic, "f", 0) for topic in TOPICS], SCHEMA)
    df.write.partitionBy("topic").parquet(str(tmp_path / "spark"))

    stage_pass(ArrowPass.of(df), str(tmp_path / "sink"), ["topic"])

    assert folders(tmp_path / "sink") == folders(tmp_path / "spark")
    assert folders(tmp_path / "sink") == {partition_folder(["topic"], [topic]) for topic in TOPICS}


def test_rows_read_back_as_written_one_file_per_source_file(spark, tmp_path):
    rows = [
        (topic, f"{topic}/{segment}.log", position)
        for topic in TOPICS[:2]
        for segment in range(3)
        for position in range(5)
    ]
    df = spark.createDataFrame(rows, SCHEMA).coalesce(1)

    written = stage_pass(ArrowPass.of(df), str(tmp_path), ["topic"], file_by="source_file")

    held = [pq.read_table(file.path).column("source_file").unique().to_pylist() for file in written]
    assert sorted(file.rows for file in written) == [5] * 6
    assert sorted(held) == sorted([source_file] for source_file in {row[1] for row in rows})
    assertDataFrameEqual(spark.read.schema(SCHEMA).parquet(str(tmp_path)).select(*SCHEMA.fieldNames()), df)


def test_rows_of_runs_on_the_executors_and_its_rows_are_written(spark, tmp_path):
    def _expand(batches):
        for batch in batches:
            for topic, rows in zip(batch.column("topic").to_pylist(), batch.column("rows").to_pylist(), strict=True):
                yield pa.RecordBatch.from_pydict(
                    {"topic": [topic] * rows, "source_file": [f"{topic}.log"] * rows, "position": list(range(rows))},
                    schema=pa.schema(
                        [("topic", pa.string()), ("source_file", pa.string(), False), ("position", pa.int64(), False)]
                    ),
                )

    descriptors = spark.createDataFrame([("orders", 3), ("payments", 2)], "topic string, rows int")
    written = stage_pass(ArrowPass(descriptors, _expand, SCHEMA), str(tmp_path), ["topic"], file_by="source_file")

    assert sorted(file.rows for file in written) == [2, 3]
    read = spark.read.schema(SCHEMA).parquet(str(tmp_path)).select(*SCHEMA.fieldNames())
    assertDataFrameEqual(
        read.groupBy("topic").count(),
        spark.createDataFrame([("orders", 3), ("payments", 2)], "topic string, count long"),
    )


def test_small_batches_are_gathered_into_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet_sink, "ROW_GROUP_ROWS", 250)
    schema = pa.schema([("topic", pa.string()), ("position", pa.int64())])
    with PartitionedParquetSink(str(tmp_path), schema, ["topic"]) as sink:
        for start in range(0, 600, 100):
            sink.write(pa.table({"topic": ["t"] * 100, "position": list(range(start, start + 100))}, schema=schema))
    ((path, rows, _),) = sink.written

    metadata = pq.read_metadata(path)
    assert rows == 600
    assert [metadata.row_group(index).num_rows for index in range(metadata.num_row_groups)] == [300, 300]
    assert pq.read_table(path).column_names == ["position"]  # the folder holds the partition value


def test_only_text_columns_are_written_with_a_dictionary(tmp_path):
    schema = pa.schema([("topic", pa.string()), ("source_file", pa.string()), ("position", pa.int64())])
    with PartitionedParquetSink(str(tmp_path), schema, ["topic"]) as sink:
        sink.write(
            pa.table({"topic": ["t"] * 1000, "source_file": ["f"] * 1000, "position": range(1000)}, schema=schema)
        )
    ((path, _, _),) = sink.written

    columns = pq.read_metadata(path).row_group(0)
    encodings = {columns.column(index).path_in_schema: columns.column(index) for index in range(columns.num_columns)}
    assert encodings["source_file"].has_dictionary_page
    assert not encodings["position"].has_dictionary_page
    assert pq.read_table(path).column("position").to_pylist() == list(range(1000))


def test_a_null_partition_value_goes_to_hives_default_folder(tmp_path):
    schema = pa.schema([("topic", pa.string()), ("position", pa.int64())])
    with PartitionedParquetSink(str(tmp_path), schema, ["topic"]) as sink:
        sink.write(pa.table({"topic": ["a", None, "a"], "position": [1, 2, 3]}, schema=schema))
    assert sorted((Path(path).parent.name, rows) for path, rows, _ in sink.written) == [
        (f"topic={HIVE_NULL}", 1),
        ("topic=a", 2),
    ]


def test_a_pass_written_by_its_tasks_reads_only_the_files_they_reported(spark, tmp_path):
    """A failed task attempt can leave a file behind in the folder; the table is the files of the attempts that
    succeeded, so such a file is never read."""

    def _double(batches):
        for batch in batches:
            doubled = pc.multiply(batch.column("position"), 2)
            yield pa.RecordBatch.from_arrays([*batch.columns, doubled], names=[*batch.schema.names, "doubled"])

    scratch = Scratch(spark, str(tmp_path))
    stray = tmp_path / "doubled" / "part-stray.snappy.parquet"
    stray.parent.mkdir()
    pq.write_table(pa.table({"topic": ["t"], "source_file": ["x"], "position": [99]}), stray)
    rows = spark.createDataFrame([("t", "x", position) for position in range(4)], SCHEMA)
    doubled = T.StructType([*SCHEMA.fields, T.StructField("doubled", T.LongType(), True)])

    table = scratch.materialise_pass(ArrowPass(rows, _double, doubled), "doubled")

    assertDataFrameEqual(table, rows.withColumn("doubled", F.col("position") * 2))
