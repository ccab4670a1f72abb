"""Rows and the `mapInArrow` function that makes a table of them on the executors, kept apart.

Whoever runs the pass decides where its output goes: `frame()` hands it back to Spark as a DataFrame, while
`pipeline.tables.parquet_sink.stage_pass` has the same tasks write it as Parquet files without passing it through
the JVM (the segment decode, the `__transaction_state` decode, the replay's last pass).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

ArrowFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class ArrowPass:
    """`rows` and the function (None: the rows as they are) that makes the table of `schema` of them."""

    rows: DataFrame
    function: ArrowFunction | None
    schema: T.StructType

    @classmethod
    def of(cls, df: DataFrame) -> ArrowPass:
        """A DataFrame as a pass that keeps its rows."""
        return cls(df, None, df.schema)

    def frame(self) -> DataFrame:
        return self.rows if self.function is None else self.rows.mapInArrow(self.function, self.schema)
