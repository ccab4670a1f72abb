"""The checks of the row-local frames, evaluated inside the replay's tasks on the rows they hand out.

A row-local frame's findings depend on its replay row alone (pipeline.audit.core.registry.Frame.row_local), so the task
that replays a partition holds everything they need: it evaluates their checks (written as row expressions,
pipeline.audit.core.expr) on each record batch of the walk and writes the findings beside the replay. The findings
are those `explode_findings` makes of the same checks in a Spark plan, column for column
(tests/integration/test_task_outputs.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.audit.core.columns import LOCATION
from pipeline.audit.core.expr import Expr, Memo, Rows, as_array, col, columns_read, evaluated, lit
from pipeline.audit.core.registry import CHECKS, FRAMES, Fires, Rule
from schemas.findings import FINDING_FIELDS


@dataclass(frozen=True)
class RowCheck:
    """One check as the task evaluates it: its rule's code, name and severity, and what it returned."""

    code: str
    name: str
    severity: str
    fires: Fires

    @classmethod
    def of(cls, rule: Rule, fires: Fires) -> RowCheck:
        parts = [fires.when, fires.message, *fires.evidence.values(), fires.severity, fires.producer_epoch]
        if not all(part is None or isinstance(part, Expr) for part in parts):
            raise TypeError(f"{rule.code}: a check on a row-local frame is written as row expressions")
        return cls(rule.code, rule.name, rule.severity, fires)


@dataclass(frozen=True)
class FrameChecks:
    """A row-local frame's checks, the rows it holds (`rows`: all of them when None) and its findings' schema."""

    frame: str
    rows: Expr | None
    checks: tuple[RowCheck, ...]
    schema: pa.Schema

    def findings(self, batch: Rows) -> pa.Table:
        """The findings of the checks on the rows of `batch` the frame holds. Only the columns the checks read are
        filtered, and what their conditions share is evaluated once."""
        batch = batch.select(self.columns)
        if self.rows is not None:
            batch = batch.filter(pc.fill_null(as_array(self.rows.evaluate(batch), batch.num_rows), False))
        memo: Memo = {}
        tables = []
        for check in self.checks:
            fired = pc.fill_null(as_array(evaluated(check.fires.when, batch, memo), batch.num_rows), False)
            if pc.any(fired).as_py():
                tables.append(_findings(check, batch.filter(fired), self.schema))
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    @cached_property
    def columns(self) -> list[str]:
        """The columns the frame's rows, its checks and their findings read."""
        exprs: list[Expr | None] = [self.rows, col("producer_epoch"), *(col(source) for source in LOCATION.values())]
        for check in self.checks:
            fires = check.fires
            exprs += [fires.when, fires.message, *fires.evidence.values(), fires.severity, fires.producer_epoch]
        return columns_read(exprs)


# the rows each row-local frame holds (pipeline.audit.core.frames): every replay row, or those with producer state
FRAME_ROWS: Mapping[str, Expr | None] = {"batches": None, "producer_batches": col("is_producer_row")}


def row_local_frames(ctx, replay_schema: T.StructType) -> tuple[FrameChecks, ...]:
    """Every row-local frame with checks, each check's expressions built once on the driver for the tasks."""
    schema = findings_schema(replay_schema)
    frames = []
    for name, checks in CHECKS.items():
        if not (checks and FRAMES[name].row_local):
            continue
        row_checks = tuple(RowCheck.of(check.rule, check.function(ctx)) for check in checks)
        frames.append(FrameChecks(name, FRAME_ROWS[name], row_checks, schema))
    return tuple(frames)


def findings_schema(replay_schema: T.StructType) -> pa.Schema:
    """The schema `explode_findings` gives checks on the replay: each location column as the replay holds it, the
    epoch as the row's, the rest text (the evidence a map of text). Built, not analysed: a Spark plan of every
    check analysed on the driver cost seconds per run."""
    types = {field.name: field.dataType for field in replay_schema.fields}
    own = {
        "rule_code": T.StringType(),
        "rule_name": T.StringType(),
        "severity": T.StringType(),
        "producer_epoch": types["producer_epoch"],
        "message": T.StringType(),
        "evidence": T.MapType(T.StringType(), T.StringType()),
    }
    fields = [T.StructField(name, own[name] if name in own else types[LOCATION[name]]) for name in FINDING_FIELDS]
    return to_arrow_schema(T.StructType(fields))


def _findings(check: RowCheck, rows: Rows, schema: pa.Schema) -> pa.Table:
    """The finding of `check` on each of `rows`, where it fired."""
    count = rows.num_rows
    fires = check.fires

    def values(expr: Expr, field: str) -> pa.Array:
        return as_array(expr.evaluate(rows), count).cast(schema.field(field).type)

    columns = {field: values(col(source), field) for field, source in LOCATION.items()}
    columns["rule_code"] = pa.array([check.code] * count, pa.string())
    columns["rule_name"] = pa.array([check.name] * count, pa.string())
    columns["severity"] = values(fires.severity if fires.severity is not None else lit(check.severity), "severity")
    columns["producer_epoch"] = values(fires.producer_epoch or col("producer_epoch"), "producer_epoch")
    columns["message"] = values(fires.message, "message")
    columns["evidence"] = _evidence(fires.evidence, rows, count, schema.field("evidence").type)
    return pa.table([columns[name] for name in FINDING_FIELDS], schema=schema)


def _evidence(evidence: Mapping[str, Expr], rows: Rows, count: int, map_type: pa.DataType) -> pa.Array:
    """Each row's evidence map: its keys in order, each value as text ("null" for a null, as `as_text` gives)."""
    keys = list(evidence)
    texts = [
        pc.fill_null(as_array(value.evaluate(rows), count).cast(pa.string()), "null") for value in evidence.values()
    ]
    offsets = pa.array([index * len(keys) for index in range(count + 1)], pa.int32())
    if not keys:
        return pa.MapArray.from_arrays(offsets, pa.array([], pa.string()), pa.array([], pa.string()), type=map_type)
    flat_keys = pa.array(keys * count, pa.string())
    flat_values = (
        pc.take(pa.concat_arrays(texts), _interleaved(len(keys), count)) if count else pa.array([], pa.string())
    )
    return pa.MapArray.from_arrays(offsets, flat_keys, flat_values, type=map_type)


def _interleaved(width: int, count: int) -> pa.Array:
    """Indices that turn `width` columns of `count` values, one after another, into rows of `width` values."""
    return pa.array([column * count + row for row in range(count) for column in range(width)], pa.int64())


def findings_of(frames: tuple[FrameChecks, ...], rows: Rows) -> Iterator[tuple[str, pa.Table]]:
    """Each frame's findings on `rows`, for the frames with any."""
    if rows.num_rows == 0:
        return
    for frame in frames:
        found = frame.findings(rows)
        if found.num_rows:
            yield frame.frame, found
