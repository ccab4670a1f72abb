"""Aggregates of the replay's rows in parts that merge, evaluated by Spark or by the task that holds the rows.

An aggregate whose every column is a sum, count, minimum or maximum, or the value at the first or last row in an
order, can be taken over some of its rows and the results merged: the merge of the parts of some rows with the parts
of the others is the aggregate of all of them. So the replay's tasks aggregate the rows they write a chunk at a time
(pipeline.audit.replay.task_outputs), and a run that went on from a kept replay merges the parts it kept with the parts
of the rows it added (pipeline.audit.state.kept_parts). The values are row expressions (pipeline.audit.core.expr), so
the same definition gives the Spark aggregate (`of`, `merged`) and the Arrow one (`of_rows`, `merged_rows`);
tests/integration/test_task_outputs.py holds them equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.expr import Expr, as_array


@dataclass(frozen=True)
class Part:
    """One column of an aggregate: `how` is sum, count, min, max, any (one value shared by all the rows), or
    first / last, the value at the row with the lowest / highest `order` (rows whose order is null are skipped)."""

    name: str
    how: str
    value: Expr
    order: Expr | None = None


@dataclass(frozen=True)
class Mergeable:
    """An aggregate of the replay's rows where `rows` holds, by `keys`, in parts that merge."""

    name: str
    keys: tuple[str, ...]
    parts: tuple[Part, ...]
    rows: Expr | None = None  # all of them

    def of(self, replay: DataFrame) -> DataFrame:
        """The parts over `replay`'s rows: a first or last value carries its order as `<name>_at`."""
        columns = []
        for part in self.parts:
            value = part.value.column()
            if part.how in ("first", "last"):
                pick, extreme = (F.min_by, F.min) if part.how == "first" else (F.max_by, F.max)
                order = part.order.column()
                columns += [pick(value, order).alias(part.name), extreme(order).alias(f"{part.name}_at")]
            else:
                columns.append(_OVER_ROWS[part.how](value).alias(part.name))
        rows = replay if self.rows is None else replay.where(self.rows.column())
        return rows.groupBy(*self.keys).agg(*columns)

    def merged(self, parts: DataFrame) -> DataFrame:
        """Parts of the same keys merged into one row each."""
        columns = []
        for part in self.parts:
            if part.how in ("first", "last"):
                pick, extreme = (F.min_by, F.min) if part.how == "first" else (F.max_by, F.max)
                at = f"{part.name}_at"
                columns += [pick(part.name, at).alias(part.name), extreme(at).alias(at)]
            else:
                columns.append(_OVER_PARTS[part.how](part.name).alias(part.name))
        return parts.groupBy(*self.keys).agg(*columns)

    def of_rows(self, rows: pa.Table, schema: pa.Schema) -> pa.Table:
        """`of` over Arrow rows, in the parts' `schema` (`of`'s, from Spark's analysis)."""
        if self.rows is not None:
            rows = rows.filter(pc.fill_null(as_array(self.rows.evaluate(rows), rows.num_rows), False))
        count = rows.num_rows
        columns = {key: rows.column(key) for key in self.keys}
        hows = {}
        for part in self.parts:
            columns[part.name] = as_array(part.value.evaluate(rows), count)
            hows[part.name] = part.how
            if part.how in ("first", "last"):
                columns[f"{part.name}_at"] = as_array(part.order.evaluate(rows), count)
        return _aggregate(pa.table(columns), self.keys, hows, schema)

    def merged_rows(self, parts: pa.Table, schema: pa.Schema) -> pa.Table:
        """`merged` over Arrow parts."""
        hows = {part.name: _MERGED_HOW.get(part.how, part.how) for part in self.parts}
        return _aggregate(parts, self.keys, hows, schema)


_OVER_ROWS = {"sum": F.sum, "count": F.count, "min": F.min, "max": F.max, "any": F.first}
_OVER_PARTS = {"sum": F.sum, "count": F.sum, "min": F.min, "max": F.max, "any": F.first}
_MERGED_HOW = {"count": "sum"}
_ARROW_HOW = {"sum": "sum", "count": "count", "min": "min", "max": "max", "any": "first"}


def _aggregate(table: pa.Table, keys: tuple[str, ...], hows: dict[str, str], schema: pa.Schema) -> pa.Table:
    """Group `table` by `keys` (a null key is a value, as in Spark) and aggregate each column of `hows` its way;
    a first / last column takes its order from `<name>_at`."""
    if table.num_rows == 0:
        return schema.empty_table()
    group, first_rows = _groups(table, keys)
    grouped = {"group": group}
    aggregations = []
    for name, how in hows.items():
        if how in ("first", "last"):
            continue
        grouped[name] = table.column(name)
        options = pc.CountOptions(mode="only_valid") if how == "count" else pc.ScalarAggregateOptions(skip_nulls=True)
        aggregations.append((name, _ARROW_HOW[how], options))
    result = pa.table(grouped).group_by("group", use_threads=False).aggregate(aggregations)
    by_group = np.argsort(result.column("group").to_numpy())
    out = {key: table.column(key).take(first_rows) for key in keys}
    for name, how in hows.items():
        if how in ("first", "last"):
            out[name], out[f"{name}_at"] = _at_extreme(table, group, len(first_rows), name, how)
        else:
            out[name] = result.column(f"{name}_{_ARROW_HOW[how]}").take(by_group)
    return pa.table([out[field.name].cast(field.type) for field in schema], schema=schema)


def _groups(table: pa.Table, keys: tuple[str, ...]) -> tuple[pa.Array, pa.Array]:
    """Each row's group number (groups numbered in sorted key order) and the first row of each group."""
    order = pc.sort_indices(table, sort_keys=[(key, "ascending", "at_start") for key in keys])
    sorted_keys = table.select(list(keys)).take(order)
    starts = np.zeros(table.num_rows, dtype=bool)
    starts[0] = True
    for key in keys:
        column = sorted_keys.column(key).combine_chunks()
        before, after = column.slice(0, len(column) - 1), column.slice(1)
        differs = pc.fill_null(pc.not_equal(before, after), False)
        null_changes = pc.not_equal(pc.is_null(before), pc.is_null(after))
        starts[1:] |= pc.or_(differs, null_changes).to_numpy(zero_copy_only=False)
    group_of_sorted = np.cumsum(starts) - 1
    group = np.empty(table.num_rows, dtype=np.int64)
    group[order.to_numpy()] = group_of_sorted
    return pa.array(group), order.take(pa.array(np.flatnonzero(starts)))


def _at_extreme(table: pa.Table, group: pa.Array, groups: int, name: str, how: str) -> tuple[pa.Array, pa.Array]:
    """Per group: the value of `name` at the row with the lowest (first) / highest (last) `<name>_at`, rows whose
    order is null skipped, and that order; the earliest such row wins a tie, as it comes first."""
    at = table.column(f"{name}_at").combine_chunks()
    value = table.column(name).combine_chunks()
    ordered = pa.table({"group": group, "at": at, "value": value, "row": pa.array(np.arange(table.num_rows))})
    ordered = ordered.filter(pc.is_valid(at))
    direction = "ascending" if how == "first" else "descending"
    ordered = ordered.take(
        pc.sort_indices(ordered, sort_keys=[("group", "ascending"), ("at", direction), ("row", "ascending")])
    )
    picked = ordered.group_by("group", use_threads=False).aggregate(
        [("value", "first", pc.ScalarAggregateOptions(skip_nulls=False)), ("at", "first")]
    )
    slots = np.full(groups, -1, dtype=np.int64)
    slots[picked.column("group").to_numpy()] = np.arange(picked.num_rows)
    present = slots >= 0
    index = pa.array(np.where(present, slots, 0), mask=~present)
    return picked.column("value_first").take(index), picked.column("at_first").take(index)
