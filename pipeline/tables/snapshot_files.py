"""A Delta snapshot read as the Parquet files its log lists, so no Delta reader plans it in the JVM.

delta-spark plans every read with Spark jobs of its own (the snapshot's state, "Filtering files for query"):
dozens of jobs and most of the audit's planning time in a small run. A table whose protocol needs no reader
feature (reader version 1: no column mapping, no deletion vectors) holds exactly the rows of its listed files,
so both backends read such tables this way; the native backend leaves any other table to delta-spark.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipeline.tables.backend import column, spark_uri

PLAIN_READER_VERSION = 1


def plain_snapshot(location: str, version: int | None) -> DeltaTable | None:
    """The snapshot when its files alone give its rows; None when reading it needs a Delta reader feature."""
    table = DeltaTable(location, version=version)
    return table if table.protocol().min_reader_version <= PLAIN_READER_VERSION else None


def logged_files(location: str, columns: list[str]) -> pa.Table | None:
    """The latest plain snapshot's add actions, flattened (`path`, `num_records`, `partition.<column>`,
    `min.<column>`, ...), when the log opens, needs no reader feature and names every one of `columns`; None
    otherwise, and the caller reads the table with Spark."""
    try:
        table = plain_snapshot(location, None)
    except Exception:  # a log delta-rs cannot open
        return None
    if table is None:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    return actions if all(name in actions.column_names for name in columns) else None


def spark_schema(table: DeltaTable) -> T.StructType:
    # A Delta schema string is, by the protocol, Spark's StructType JSON.
    return T.StructType.fromJson(json.loads(table.schema().to_json()))


def read_snapshot(spark: SparkSession, location: str, table: DeltaTable, schema: T.StructType | None) -> DataFrame:
    """Only the files of the snapshot are read, so files of unfinished writes never show."""
    paths = pa.table(table.get_add_actions()).column("path").to_pylist()
    return read_files(spark, location, paths, schema if schema is not None else spark_schema(table))


def read_files(spark: SparkSession, location: str, paths: list[str], read_schema: T.StructType) -> DataFrame:
    """The rows of some files of a plain snapshot, named as its add actions name them."""
    root = spark_uri(location)
    # Add action paths are relative URIs: percent-decoding gives the folder names as stored.
    paths = [f"{root}/{unquote(path)}" for path in paths]
    if not paths:
        return spark.createDataFrame([], read_schema)
    # basePath makes Spark type the partition columns from the folder names by read_schema.
    df = spark.read.schema(read_schema).option("basePath", root).parquet(*paths)
    return df.select(*[column(name) for name in read_schema.fieldNames()])
