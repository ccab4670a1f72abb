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
    """Reject partition selections that are empty, name other columns, are ragged or hold values Delta cannot match.

    `values` lists the replaced partitions column by column: the i-th value of every column together name the
    i-th partition, so {"cluster_id": ["a", "b"], "topic": ["x", "y"]} replaces (a, x) and (b, y), never (a, y).
    """
    if not values:
        raise ValueError("values must name at least one partition column; use overwrite() to replace everything")
    for name, column_values in values.items():
        if name not in partition_by:
            raise ValueError(f"{name!r} is not a partition column ({', '.join(partition_by)})")
        if not column_values:
            raise ValueError(f"no values given for partition column {name!r}")
        for value in column_values:
            partition_value(value)
    if len({len(column_values) for column_values in values.values()}) > 1:
        raise ValueError(f"every column must list one value per replaced partition: {dict(values)}")


def partition_value(value: Any) -> str | None:
    """Delta's string form of a partition value (protocol, "Partition Value Serialization").

    The empty string is null: Spark writes an empty partition value into Hive's default folder, as it does a null.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value) or None
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(
        f"cannot select partition value {value!r}: use str, int, bool or date (null partitions cannot be selected)"
    )


def replaced_partitions(values: Mapping[str, Sequence]) -> set[tuple[str | None, ...]]:
    """The partitions in `values`, each a tuple of its columns' values as the Delta log spells them."""
    return set(zip(*([partition_value(value) for value in vs] for vs in values.values()), strict=True))


def replace_where_predicate(values: Mapping[str, Sequence]) -> str:
    """SQL predicate selecting exactly the partitions in `values`, as delta-spark's replaceWhere option expects:
    per value of the leading columns, the last column's values, so that pairs never widen into a cross product."""
    *leading, last = values
    groups: dict[tuple, list] = {}
    for partition in zip(*values.values(), strict=True):
        groups.setdefault(partition[:-1], [])
        if partition[-1] not in groups[partition[:-1]]:
            groups[partition[:-1]].append(partition[-1])
    terms = [
        " AND ".join([*map(_matches, leading, ([value] for value in key)), _matches(last, ends)])
        for key, ends in groups.items()
    ]
    return terms[0] if len(terms) == 1 else " OR ".join(f"({term})" for term in terms)


def _matches(name: str, values: Sequence) -> str:
    """`name IN (...)`; the empty string also matches null, as which it is stored (`partition_value`)."""
    matches = f"{_sql_identifier(name)} IN ({', '.join(_sql_literal(value) for value in values)})"
    return f"({matches} OR {_sql_identifier(name)} IS NULL)" if "" in values else matches


def _sql_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _sql_literal(value: Any) -> str:
    text = partition_value(value) or ""
    if isinstance(value, str):
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, date):
        return f"DATE '{text}'"
    return text
