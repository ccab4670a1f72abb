"""What the table store and its two backends share: the Backend contract, the errors, and the helpers that
turn locations and partition selections into what Spark and Delta expect.

`pipeline.tables.store` chooses and drives a backend; `pipeline.tables.native` and `pipeline.tables.embedded`
implement it. Both backends import this module only, never the store.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType


class TableStoreError(Exception):
    """A Delta table could not be read or written as asked; a failed write commits nothing."""


class BackendUnavailableError(TableStoreError):
    """The requested backend cannot run in this Spark session."""


class TableNotFoundError(TableStoreError):
    """No Delta table at the path, and nothing to read it as."""


class TableSchemaError(TableStoreError):
    """The data does not fit the existing table: unknown columns, other types or other partitioning."""


class PartitionOverwriteError(TableStoreError):
    """A partition overwrite held rows outside the partitions it was asked to replace."""


class CommitConflictError(TableStoreError):
    """A concurrent commit conflicted with this write; nothing was committed and rerunning it is safe."""


class Backend(Protocol):
    """What a backend does for one table location; TableStore resolves names and checks arguments."""

    def exists(self, location: str) -> bool: ...

    def append(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int: ...

    def overwrite(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int: ...

    def overwrite_partitions(
        self, df: DataFrame, location: str, partition_by: list[str], values: dict[str, list]
    ) -> int: ...

    def read(self, location: str, schema: StructType | None, version: int | None) -> DataFrame: ...

    def history(self, location: str, limit: int | None = None) -> list[dict[str, Any]]: ...

    def version(self, location: str) -> int: ...

    def restore(self, location: str, version: int) -> int: ...

    def vacuum(self, location: str, retention_hours: int, keep_versions: list[int]) -> int | None: ...


def normalize_location(location: str) -> str:
    """Absolute local path for local locations (`file:` URIs included), the URI otherwise."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return os.path.abspath(unquote(parsed.path))
    if parsed.scheme:
        return location.rstrip("/")
    return os.path.abspath(os.path.expanduser(location))


def spark_uri(location: str) -> str:
    """The location as Spark should see it: local paths pinned to `file:` whatever the default filesystem.

    The path is not percent-encoded: Hadoop treats the text after `file://` as the literal path, which is
    how Spark's escaped partition folders such as `topic=a%3Ab` stay intact.
    """
    return location if urlparse(location).scheme else f"file://{location}"


def column(name: str) -> Column:
    """A top-level column by its exact name, dots and backticks included."""
    return F.col(_sql_identifier(name))


def check_replaced_partitions(partition_by: Sequence[str], values: Mapping[str, Sequence]) -> None:
    """Reject partition selections that are empty, name other columns or hold values Delta cannot match."""
    if not values:
        raise ValueError("values must name at least one partition column; use overwrite() to replace everything")
    for name, column_values in values.items():
        if name not in partition_by:
            raise ValueError(f"{name!r} is not a partition column ({', '.join(partition_by)})")
        if not column_values:
            raise ValueError(f"no values given for partition column {name!r}")
        for value in column_values:
            partition_value(value)


def partition_value(value: Any) -> str:
    """Delta's string form of a partition value (protocol, "Partition Value Serialization")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(
        f"cannot select partition value {value!r}: use str, int, bool or date (null partitions cannot be selected)"
    )


def replace_where_predicate(values: Mapping[str, Sequence]) -> str:
    """SQL predicate selecting the partitions in `values`, as delta-spark's replaceWhere option expects."""
    return " AND ".join(
        f"{_sql_identifier(name)} IN ({', '.join(_sql_literal(value) for value in column_values)})"
        for name, column_values in values.items()
    )


def _sql_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _sql_literal(value: Any) -> str:
    text = partition_value(value)
    if isinstance(value, str):
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, date):
        return f"DATE '{text}'"
    return text
