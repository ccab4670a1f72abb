"""Row expressions written once and evaluated two ways: as Spark columns in a plan, or with Arrow compute inside
the task that holds the rows.

The checks of the row-local frames (every replay row on its own) run in the replay's own tasks, on the record
batches the producer walk hands out (pipeline.audit.core.row_checks): no Spark plan scans the replay again for them.
The same expression also gives its Spark column (`column()`), for the frames Spark evaluates. The evaluation keeps
Spark's semantics: SQL's three-valued logic, a null condition that does not fire, Java's remainder and
`String.format`, a `when` without `otherwise` that is null.

The functions mirror `pyspark.sql.functions` (`col`, `lit`, `when`, `coalesce`, `format_string`) and the operators
and methods those columns have, so a check reads the same either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

Rows = pa.RecordBatch | pa.Table
Value = pa.Array | pa.ChunkedArray | pa.Scalar
Memo = dict[tuple, Value]  # values of expressions on one set of rows, by key

ARROW_TYPES = {
    "string": pa.string(),
    "long": pa.int64(),
    "bigint": pa.int64(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
}


class Expr:
    """A node of an expression tree; `column()` is its Spark column, `evaluate(rows)` its Arrow values."""

    def column(self) -> Column:
        raise NotImplementedError

    def evaluate(self, rows: Rows, memo: Memo | None = None) -> Value:
        """Its Arrow values on `rows`; with a `memo`, what it shares with the other expressions evaluated on the same
        rows with that memo is evaluated once (`evaluated`)."""
        raise NotImplementedError

    @cached_property
    def key(self) -> tuple:
        """What the expression computes: expressions built apart from the same parts have the same key."""
        return (type(self).__name__, *(_key(getattr(self, field.name)) for field in fields(self)))

    # SQL operators, as Column has them
    def __and__(self, other: Any) -> Expr:
        return Call("and", (self, _expr(other)))

    def __rand__(self, other: Any) -> Expr:
        return Call("and", (_expr(other), self))

    def __or__(self, other: Any) -> Expr:
        return Call("or", (self, _expr(other)))

    def __ror__(self, other: Any) -> Expr:
        return Call("or", (_expr(other), self))

    def __invert__(self) -> Expr:
        return Call("not", (self,))

    def __eq__(self, other: Any) -> Expr:  # type: ignore[override]
        return Call("==", (self, _expr(other)))

    def __ne__(self, other: Any) -> Expr:  # type: ignore[override]
        return Call("!=", (self, _expr(other)))

    def __lt__(self, other: Any) -> Expr:
        return Call("<", (self, _expr(other)))

    def __le__(self, other: Any) -> Expr:
        return Call("<=", (self, _expr(other)))

    def __gt__(self, other: Any) -> Expr:
        return Call(">", (self, _expr(other)))

    def __ge__(self, other: Any) -> Expr:
        return Call(">=", (self, _expr(other)))

    def __add__(self, other: Any) -> Expr:
        return Call("+", (self, _expr(other)))

    def __radd__(self, other: Any) -> Expr:
        return Call("+", (_expr(other), self))

    def __sub__(self, other: Any) -> Expr:
        return Call("-", (self, _expr(other)))

    def __rsub__(self, other: Any) -> Expr:
        return Call("-", (_expr(other), self))

    def __mul__(self, other: Any) -> Expr:
        return Call("*", (self, _expr(other)))

    def __mod__(self, other: Any) -> Expr:
        return Call("%", (self, _expr(other)))

    def __neg__(self) -> Expr:
        return Call("-", (Lit(0), self))

    __hash__ = None  # type: ignore[assignment]  # `==` builds an expression, as on a Column

    def __bool__(self) -> bool:
        raise TypeError("an expression has no truth value: combine conditions with &, | and ~")

    def isNull(self) -> Expr:  # noqa: N802  (Column's name)
        return Call("is_null", (self,))

    def isNotNull(self) -> Expr:  # noqa: N802
        return Call("is_not_null", (self,))

    def isin(self, *values: Any) -> Expr:
        flat = values[0] if len(values) == 1 and isinstance(values[0], list | tuple | set | frozenset) else values
        return IsIn(self, tuple(flat))

    def between(self, low: Any, high: Any) -> Expr:
        return (self >= low) & (self <= high)

    def eqNullSafe(self, other: Any) -> Expr:  # noqa: N802
        return Call("<=>", (self, _expr(other)))

    def cast(self, type_name: str) -> Expr:
        return Cast(self, type_name)

    def bitwiseAND(self, other: Any) -> Expr:  # noqa: N802
        return Call("bitwise_and", (self, _expr(other)))

    def startswith(self, prefix: str) -> Expr:
        return Call("starts_with", (self, Lit(prefix)))


@dataclass(frozen=True, eq=False)
class Col(Expr):
    name: str

    def column(self) -> Column:
        return F.col(self.name)

    def evaluate(self, rows: Rows, memo: Memo | None = None) -> Value:
        return rows.column(self.name)


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    value: Any

    def column(self) -> Column:
        return F.lit(self.value)

    def evaluate(self, rows: Rows, memo: Memo | None = None) -> Value:
        return pa.scalar(self.value)


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    of: Expr
    type_name: str

    def column(self) -> Column:
        return self.of.column().cast(self.type_name)

    def evaluate(self, rows: Rows, memo: Memo | None = None) -> Value:
        value = evaluated(self.of, rows, memo)
        target = ARROW_TYPES[self.type_name]
        if isinstance(value, pa.Scalar) and not value.is_valid:
            return pa.scalar(None, target)
        return pc.cast(value, target)


@dataclass(frozen=True, eq=False)
class IsIn(Expr):
    of: Expr
    values: tuple

    def column(self) -> Column:
        return self.of.column().isin(*self.values)

    def evaluate(self, rows: Rows, memo: Memo | None = None) -> Value:
        value = evaluated(self.of, rows, memo)
        found = pc.is_in(value, value_set=pa.array(self.values, value.type))
        return pc.if_else(pc.is_null(value), pa.scalar(None, pa.bool_()), found)  # SQL: null IN (...) is null


def _remainder(a: Value, b: Value) -> Value:
    """Java's `%`: the sign of the dividend (Arrow's modulo takes the divisor's)."""
    return pc.subtract(a, pc.multiply(pc.divide(a, b), b))


def _null_safe_equal(a: Value, b: Value) -> Value:
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return pc.or_(both_null, pc.fill_null(pc.equal(a, b), False))


_ARROW: dict[str, Callable[..., Value]] = {
    "and": pc.and_kleene,
    "or": pc.or_kleene,
    "not": pc.invert,
    "==": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
    "+": pc.add,
    "-": pc.subtract,
    "*": pc.multiply,
    "%": _remainder,
    "<=>": _null_safe_equal,
    "is_null": pc.is_null,
    "is_not_null": pc.is_valid,
    "coalesce": pc.coalesce,
    "bitwise_and": pc.bit_wise_and,
    "starts_with": lambda text, prefix: pc.starts_with(text, pattern=prefix.as_py()),
    "greatest": lambda *values: pc.max_element_wise(*values, skip_nulls=True),
}
_SPARK: dict[str, Callable[..., Column]] = {
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "not": lambda a: ~a,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "%": lambda a, b: a % b,
    "<=>": lambda a, b: a.eqNullSafe(b),
    "is_null": lambda a: a.isNull(),
    "is_not_null": lambda a: a.isNotNull(),
    "coalesce": F.coalesce,
    "bitwise_and": lambda a, b: a.bitwiseAND(b),
    "starts_with": lambda a, b: a.startswith(b),
    "greatest": F.greatest,
}


@dataclass(frozen=True, eq=False)
class Call(Expr):
    op: str
    args: tuple[Expr, ...]

    def column(self) -> Column:
        return _SPARK[self.op](*(arg.column() for arg in self.args))

    def evaluate(self, rows: Rows, memo: Memo | None = None) -> Value:
        return _ARROW[self.op](*(evaluated(arg, rows, memo) for arg in self.args))


@dataclass(frozen=True, eq=False)
class When(Expr):
    """CASE WHEN: the value of the first case whose condition holds, else `default` (null when there is none)."""

    cases: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None

    def when(self, condition: Any, value: Any) -> When:
        return When((*self.cases, (_expr(condition), _expr(value))), self.default)

    def otherwise(self, value: Any) -> When:
        return When(self.cases, _expr(value))

    def column(self) -> Column:
        (condition, value), *rest = self.cases
        built = F.when(condition.column(), value.column())
        for condition, value in rest:
            built = built.when(condition.column(), value.column())
        return built if self.default is None else built.otherwise(self.default.column())

    def evaluate(self, rows: Rows, memo: Memo | None = None) -> Value:
        length = rows.num_rows
        values = [as_array(evaluated(value, rows, memo), length) for _, value in self.cases]
        default = None if self.default is None else as_array(evaluated(self.default, rows, memo), length)
        target = _common_type([*values, *([] if default is None else [default])])
        values = [value.cast(target) for value in values]
        result = pa.nulls(length, target) if default is None else default.cast(target)
        for (condition, _), value in reversed(list(zip(self.cases, values, strict=True))):  # the first case wins
            condition = pc.fill_null(as_array(evaluated(condition, rows, memo), length), False)
            result = pc.if_else(condition, value, result)
        return result


def _common_type(values: list[pa.Array]) -> pa.DataType:
    """The type of a CASE's result: its values' one type, null literals aside; the widest integer when they mix."""
    types = {value.type for value in values if not pa.types.is_null(value.type)}
    if not types:
        return pa.null()
    if len(types) == 1:
        return types.pop()
    if all(pa.types.is_integer(t) for t in types):
        return max(types, key=lambda t: t.bit_width)
    raise TypeError(f"a CASE mixes the types {sorted(map(str, types))}")


@dataclass(frozen=True, eq=False)
class FormatString(Expr):
    """Java's `String.format` of each row, as Spark's `format_string`: a null argument prints as "null"."""

    pattern: str
    args: tuple[Expr, ...]

    def column(self) -> Column:
        return F.format_string(self.pattern, *(arg.column() for arg in self.args))

    def evaluate(self, rows: Rows, memo: Memo | None = None) -> Value:
        length = rows.num_rows
        columns = [as_array(evaluated(arg, rows, memo), length).to_pylist() for arg in self.args]
        pieces = _format_pieces(self.pattern)
        by_row = zip(*columns, strict=True) if columns else [()] * length
        return pa.array([_format_row(pieces, values) for values in by_row], pa.string())


_SPEC = re.compile(r"%(?:%|n|[-#+ 0,(]*\d*(?:\.\d+)?[a-zA-Z])")


def _format_pieces(pattern: str) -> list[str]:
    """The pattern as literal text and conversions, alternately."""
    pieces, at = [], 0
    for match in _SPEC.finditer(pattern):
        pieces += [pattern[at : match.start()], match.group(0)]
        at = match.end()
    return [*pieces, pattern[at:]]


def _format_row(pieces: list[str], values: tuple) -> str:
    out, arguments = [], iter(values)
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            out.append(piece)
        elif piece == "%%":
            out.append("%")
        elif piece == "%n":
            out.append("\n")
        else:
            out.append(_convert(piece, next(arguments)))
    return "".join(out)


def _convert(spec: str, value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        value = "true" if value else "false"
    if spec[-1] in "dxX" and not isinstance(value, int):
        raise TypeError(f"format {spec} of {value!r}")
    return spec % value


def col(name: str) -> Col:
    return Col(name)


def lit(value: Any) -> Expr:
    return value if isinstance(value, Expr) else Lit(value)


def when(condition: Any, value: Any) -> When:
    return When(((_expr(condition), _expr(value)),))


def coalesce(*values: Any) -> Expr:
    return Call("coalesce", tuple(_column_or_name(value) for value in values))


def greatest(*values: Any) -> Expr:
    return Call("greatest", tuple(_column_or_name(value) for value in values))


def format_string(pattern: str, *args: Any) -> Expr:
    return FormatString(pattern, tuple(_column_or_name(arg) for arg in args))


def _column_or_name(value: Any) -> Expr:
    """As Spark's functions take their arguments: a string names a column."""
    return Col(value) if isinstance(value, str) else _expr(value)


def _expr(value: Any) -> Expr:
    if isinstance(value, Column):
        raise TypeError("a Spark column in a row expression: write it with pipeline.audit.core.expr")
    return lit(value)


def evaluated(expr: Expr, rows: Rows, memo: Memo | None = None) -> Value:
    """`expr` evaluated on `rows`; with a `memo` (a dict kept for those rows), once per distinct expression: the
    checks of a frame and the parts of an aggregate are built from the same few conditions."""
    if memo is None or isinstance(expr, Col | Lit):
        return expr.evaluate(rows, memo)
    value = memo.get(expr.key)
    if value is None:
        value = memo[expr.key] = expr.evaluate(rows, memo)
    return value


def _key(value: Any) -> Any:
    if isinstance(value, Expr):
        return value.key
    if isinstance(value, tuple):
        return tuple(_key(item) for item in value)
    return type(value).__name__, repr(value)  # 1, 1.0 and True are different literals


def columns_read(exprs: Iterable[Expr | None]) -> list[str]:
    """The columns the expressions read, each once: what a task selects before it filters wide rows."""
    names: dict[str, None] = {}
    pending: list[Any] = list(exprs)
    while pending:
        item = pending.pop()
        if isinstance(item, Col):
            names[item.name] = None
        elif isinstance(item, Expr):
            pending += [getattr(item, field.name) for field in fields(item)]
        elif isinstance(item, tuple):
            pending += item
    return list(names)


def as_array(value: Value, length: int) -> pa.Array:
    """An evaluated expression as one array of `length` rows (a scalar repeated)."""
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, length) if value.is_valid else pa.nulls(length, value.type)
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    return value
