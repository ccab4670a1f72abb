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
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.expr import Expr, Memo, as_array, columns_read, evaluated


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
        """`of` over Arrow rows, in the parts' `schema` (`of`'s, from Spark's analysis). Only the columns it reads
        are filtered: the replay's rows are wide."""
        rows = rows.select(self.columns)
        if self.rows is not None:
            rows = rows.filter(pc.fill_null(as_array(self.rows.evaluate(rows), rows.num_rows), False))
        count = rows.num_rows
        columns = {key: rows.column(key) for key in self.keys}
        hows = {}
        memo: Memo = {}  # the parts share their conditions
        for part in self.parts:
            columns[part.name] = as_array(evaluated(part.value, rows, memo), count)
            hows[part.name] = part.how
            if part.how in ("first", "last"):
                columns[f"{part.name}_at"] = as_array(evaluated(part.order, rows, memo), count)
        return _aggregate(pa.table(columns), self.keys, hows, schema)

    @cached_property
    def columns(self) -> list[str]:
        """The columns `of_rows` reads."""
        exprs = [self.rows, *(part.value for part in self.parts), *(part.order for part in self.parts)]
        return list(dict.fromkeys([*self.keys, *columns_read(exprs)]))

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
    group, first_rows, by_group = _groups(table, keys)
    grouped = {"group": group}
    aggregations = []
    for name, how in hows.items():
        if how in ("first", "last"):
            continue
        grouped[name] = table.column(name)
        options = pc.CountOptions(mode="only_valid") if how == "count" else pc.ScalarAggregateOptions(skip_nulls=True)
        aggregations.append((name, _ARROW_HOW[how], options))
    result = pa.table(grouped).group_by("group", use_threads=False).aggregate(aggregations)
    in_result = np.argsort(result.column("group").to_numpy())
    out = {key: table.column(key).take(first_rows) for key in keys}
    for name, how in hows.items():
        if how in ("first", "last"):
            out[name], out[f"{name}_at"] = _at_extreme(table, group, by_group, len(first_rows), name, how)
        else:
            out[name] = result.column(f"{name}_{_ARROW_HOW[how]}").take(in_result)
    return pa.table([out[field.name].cast(field.type) for field in schema], schema=schema)


def _groups(table: pa.Table, keys: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's group number (groups numbered in sorted key order), the first row of each group, and the rows in
    group order (earlier rows first within a group).

    The keys are combined into one number per row that sorts as the keys do, so that one numpy sort of integers
    replaces Arrow's sort of the rows by several columns, text among them (and none is needed when the rows come in
    key order, as the producer walk hands them out); a key that is the same on every row, as the replica's mostly
    are in a chunk, is left out of it."""
    combined = np.zeros(table.num_rows, dtype=np.int64)
    width = 1
    for key in keys:
        codes, count = _sorted_codes(table.column(key))
        if count == 1:
            continue
        if width > _MOST_CODES // count:
            combined, width = _dense(combined)
            if width > _MOST_CODES // count:
                codes, count = _dense(codes)
        combined = combined * count + codes
        width *= count
    in_order = bool(np.all(combined[1:] >= combined[:-1]))
    by_group = np.arange(len(combined)) if in_order else np.argsort(combined, kind="stable")
    starts = np.empty(len(combined), dtype=bool)
    starts[:1] = True
    sorted_keys = combined[by_group]
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=starts[1:])
    group = np.empty(len(combined), dtype=np.int64)
    group[by_group] = np.cumsum(starts) - 1
    return group, by_group[starts], by_group


_MOST_CODES = 1 << 62  # a combined key stays below it


def _sorted_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, int]:
    """Each value as a number from 0 (null) that sorts as the values do, and how many numbers there can be."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if column.null_count == len(column):
        return np.zeros(len(column), dtype=np.int64), 1
    valid = None if column.null_count == 0 else column.is_valid().to_numpy(zero_copy_only=False)
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_timestamp(kind):
        values = pc.fill_null(column.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        present = values if valid is None else values[valid]
        low, high = int(present.min()), int(present.max())
        if low == high and valid is None:
            return np.zeros(len(column), dtype=np.int64), 1
        if high - low < _MOST_CODES:
            codes, count = values - low + 1, high - low + 2
        else:
            codes, count = _dense(values)
            codes, count = codes + 1, count + 1
    elif pa.types.is_floating(kind):  # numpy's order: -0.0 equals 0.0, NaN after every number
        codes, count = _dense(pc.fill_null(column, 0).to_numpy(zero_copy_only=False))
        codes, count = codes + 1, count + 1
    else:  # text and the rest: the distinct values sorted
        if valid is None and pc.all(pc.equal(column, column[0])).as_py():  # cheaper than encoding one value
            return np.zeros(len(column), dtype=np.int64), 1
        encoded = column.dictionary_encode()
        rank = np.empty(len(encoded.dictionary), dtype=np.int64)
        rank[pc.sort_indices(encoded.dictionary).to_numpy()] = np.arange(1, len(rank) + 1)
        codes, count = rank[pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)], len(rank) + 1
    if valid is not None:
        codes = np.where(valid, codes, 0)
    if np.all(codes == codes[:1]):
        return np.zeros(len(column), dtype=np.int64), 1
    return codes, count


def _dense(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Values numbered 0, 1, ... in sorted order, and how many distinct there are."""
    distinct, codes = np.unique(values, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), len(distinct)


def _at_extreme(
    table: pa.Table, group: np.ndarray, by_group: np.ndarray, groups: int, name: str, how: str
) -> tuple[pa.Array, pa.Array]:
    """Per group: the value of `name` at the row with the lowest (first) / highest (last) `<name>_at`, rows whose
    order is null skipped, and that order; the earliest such row wins a tie, as it comes first.

    The rows in group order (`by_group`, earlier rows first within a group) are walked once for each group's
    extreme: no sort by the order."""
    at = table.column(f"{name}_at").combine_chunks()
    value = table.column(name).combine_chunks()
    if at.null_count:
        by_group = by_group[at.is_valid().to_numpy(zero_copy_only=False)[by_group]]
    slots = np.full(groups, -1, dtype=np.int64)
    if len(by_group):
        kind = at.type
        if pa.types.is_integer(kind) or pa.types.is_timestamp(kind):
            order = pc.fill_null(at.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        else:
            order = _sorted_codes(at)[0]
        in_group, order = group[by_group], order[by_group]
        starts = np.flatnonzero(np.diff(in_group, prepend=-1))
        extreme = (np.minimum if how == "first" else np.maximum).reduceat(order, starts)
        at_extreme = np.flatnonzero(order == np.repeat(extreme, np.diff(starts, append=len(order))))
        first = at_extreme[np.flatnonzero(np.diff(in_group[at_extreme], prepend=-1))]
        slots[in_group[first]] = by_group[first]
    index = pa.array(slots, mask=slots < 0)
    return value.take(index), at.take(index)
