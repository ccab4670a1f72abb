"""Batch rows from columnar exports (Parquet, JSON lines, CSV) that already have the `batches` columns.

Such exports come from other decoders or from an earlier run's table, so the reader trusts their values
but not their shape: every path is checked against BATCHES before anything is read, and the error names
the file and every offending column at once.
"""

from __future__ import annotations

from functools import reduce
from pathlib import PurePosixPath

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline.errors import InputError
from pipeline.sources.filesystems import S3_SCHEMES, uri_scheme
from schemas.batches import BATCHES

SOURCE_FORMAT = "columnar"
FORMATS_BY_SUFFIX = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}

_S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
_INTEGRAL_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def columnar_format(path: str) -> str | None:
    """The Spark data source for a file name, by its suffix (case-insensitive); None when not columnar."""
    return FORMATS_BY_SUFFIX.get(PurePosixPath(path).suffix.lower())


def require_spark_filesystem(spark: SparkSession, path: str) -> None:
    """Fail before any Spark work on a URI that Spark's data sources cannot open: they go through Hadoop's
    FileSystem, unlike the other readers, and s3:// or s3a:// need the hadoop-aws jar for that."""
    scheme = uri_scheme(path)
    if scheme is None:
        return
    jvm = spark._jvm
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, spark._jsc.hadoopConfiguration())
    except Py4JJavaError:
        hint = "make the scheme available to Spark, or copy the export to a local or HDFS path"
        if scheme in S3_SCHEMES:
            hadoop_aws = f"org.apache.hadoop:hadoop-aws:{jvm.org.apache.hadoop.util.VersionInfo.getVersion()}"
            impl = "" if scheme == "s3a" else f" and spark.hadoop.fs.{scheme}.impl={_S3A_FILESYSTEM}"
            hint = f"add --packages {hadoop_aws} (with its AWS SDK bundle){impl}, or copy the export to a local path"
        message = f"columnar exports are read by Spark, which has no Hadoop FileSystem for {scheme}:// here; {hint}"
        raise InputError(path, message) from None


def _castable(source: T.DataType, target: T.DataType) -> bool:
    """Casts that keep the value: integral widths, text from CSV, and columns JSON saw only as nulls."""
    if isinstance(source, T.NullType | T.StringType):
        return True
    if isinstance(target, T.IntegerType | T.LongType):
        return isinstance(source, _INTEGRAL_TYPES) or (isinstance(source, T.DecimalType) and source.scale == 0)
    return isinstance(source, type(target))


def _format_of(spark: SparkSession, path: str) -> str:
    file_format = columnar_format(path)
    if file_format is not None:
        return file_format
    try:
        # The file listing Spark itself will use: hidden and `_` files (e.g. _SUCCESS) are left out.
        files = spark.read.format("text").load(path).inputFiles()
    except AnalysisException as exc:
        raise InputError(path, f"cannot be listed: {exc.getMessage()}") from None
    formats = {columnar_format(file) for file in files}
    if len(formats) != 1 or None in formats:
        suffixes = sorted({PurePosixPath(file).suffix or "(none)" for file in files})
        raise InputError(
            path,
            f"a columnar directory must hold files of one format ({', '.join(FORMATS_BY_SUFFIX)}); "
            f"found suffixes {', '.join(suffixes) or '(no files)'}",
        )
    return formats.pop()


def _required(column: Column, data_type: T.DataType, path: str, name: str) -> Column:
    """`column`, failing the query on a null; typed non-nullable like the BATCHES field.

    The trailing literal is never reached (raise_error comes first) but makes Spark derive a
    non-nullable column, which file sources otherwise never produce.
    """
    placeholder = F.lit("") if isinstance(data_type, T.StringType) else F.lit(0)
    return F.coalesce(
        column,
        F.raise_error(F.lit(f"{path}: required column {name} is null")).cast(data_type),
        placeholder.cast(data_type),
    )


def _conform(frame: DataFrame, path: str) -> DataFrame:
    present = {column.name: column.dataType for column in frame.schema.fields}
    missing = [
        column.name
        for column in BATCHES.fields
        if not column.nullable and column.name not in present and column.name != "source_format"
    ]
    incompatible = [
        f"{column.name} ({present[column.name].simpleString()}, expected {column.dataType.simpleString()})"
        for column in BATCHES.fields
        if column.name in present and not _castable(present[column.name], column.dataType)
    ]
    if missing or incompatible:
        problems = []
        if missing:
            problems.append(f"missing required columns: {', '.join(missing)}")
        if incompatible:
            problems.append(f"columns of incompatible type: {', '.join(incompatible)}")
        raise InputError(path, f"not a `batches` export: {'; '.join(problems)}")

    columns = []
    for column in BATCHES.fields:
        if column.name in present:
            value = F.col(column.name).cast(column.dataType)
        elif column.name == "source_format":
            value = F.lit(SOURCE_FORMAT)
        else:
            value = F.lit(None).cast(column.dataType)
        if not column.nullable:
            value = _required(value, column.dataType, path, column.name)
        columns.append(value.alias(column.name))
    return frame.select(*columns)


def _read_one(spark: SparkSession, path: str) -> DataFrame:
    file_format = _format_of(spark, path)
    reader = spark.read.format(file_format)
    if file_format == "csv":
        reader = reader.option("header", True)  # every value a string, cast to BATCHES types below
    try:
        frame = reader.load(path)
    except AnalysisException as exc:
        raise InputError(path, f"cannot be read as {file_format}: {exc.getMessage()}") from None
    return _conform(frame, path)


def read_columnar(spark: SparkSession, paths: list[str]) -> DataFrame:
    """`batches` rows (exactly schema BATCHES) of Parquet, JSON-lines or CSV files or directories of them.

    The format comes from the file suffix (for a directory, from the suffix its files share). Every
    non-nullable BATCHES column except `source_format` must be present with a type that casts without
    loss; missing nullable columns are filled with nulls, a missing `source_format` with 'columnar', and
    columns outside BATCHES are ignored. Raises InputError naming the path and the offending columns;
    a null in a required column fails the query that reads it, naming the path and the column.
    """
    if not paths:
        return spark.createDataFrame([], BATCHES)
    return reduce(DataFrame.unionByName, (_read_one(spark, path) for path in paths))
