"""Golden comparison: a published audit run's result tables against stored expected outputs, or against the
rows another run of the warehouse published (`compare --baseline-run`), with the same diff.

A golden folder holds one JSON-lines file per compared table (`findings.jsonl`, ...), rows sorted, run ids left
out, so that it diffs well under version control. File paths in findings start with `{input1}`, `{input2}`, ...
in place of the run's input roots (`portable_paths`), so a golden folder holds wherever the logs lie.
`write_golden` makes it from a run (`compare --update-golden`); `compare_tables` reads it back with the table's
schema and compares it with the run's rows as multisets: rows only in the golden output are missing, rows only
in the run are unexpected, and a missing and an unexpected row with the same key (the table's identity columns)
are one changed row, shown column by column. Spark computes the differences; only the first few examples of
each kind and the counts reach the driver.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

import schemas

IGNORED_COLUMNS = ("run_id",)  # differs on every run by design
KEYS = {
    "findings": [
        "rule_code",
        "cluster_id",
        "topic",
        "partition",
        "broker_id",
        "producer_id",
        "base_offset",
        "segment",
        "position",
    ],
    "transactions": ["cluster_id", "topic", "partition", "broker_id", "producer_id", "producer_epoch", "first_offset"],
    "producer_state": ["cluster_id", "topic", "partition", "broker_id", "producer_id"],
    "partition_summary": ["cluster_id", "topic", "partition", "broker_id"],
}
COMPARED_TABLES = tuple(KEYS)


@dataclass
class TableDiff:
    """How one table of a run differs from its golden output; examples are JSON texts, at most `limit` each."""

    table: str
    golden_rows: int
    actual_rows: int
    missing: int = 0
    unexpected: int = 0
    changed: int = 0
    missing_examples: list[str] = field(default_factory=list)
    unexpected_examples: list[str] = field(default_factory=list)
    changed_examples: list[str] = field(default_factory=list)
    reference: str = "golden"  # what the run was compared with: golden outputs or a baseline run

    @property
    def equal(self) -> bool:
        return self.missing == self.unexpected == self.changed == 0

    def summary(self) -> str:
        if self.equal:
            return f"{self.table}: equal ({self.actual_rows} rows)"
        return (
            f"{self.table}: {self.missing} missing, {self.unexpected} unexpected, {self.changed} changed "
            f"({self.reference} {self.golden_rows} rows, actual {self.actual_rows})"
        )

    def lines(self) -> list[str]:
        """The summary and every example, one line each."""
        examples = [
            *(f"  missing    {row}" for row in self.missing_examples),
            *(f"  unexpected {row}" for row in self.unexpected_examples),
            *(f"  changed    {row}" for row in self.changed_examples),
        ]
        return [self.summary(), *examples]


def portable_paths(rows: DataFrame, table: str, roots: list[str]) -> DataFrame:
    """Findings with each input root in their segment, message and evidence replaced by `{inputN}` (N counts the
    run's inputs from 1); the longest root first, so a root inside another is replaced as itself. A root that is a
    file (a dump) is replaced where it stands whole, not where it begins a longer name."""
    if table != "findings" or not roots:
        return rows
    tokens = sorted(((root.rstrip("/"), f"{{input{n}}}") for n, root in enumerate(roots, 1)), reverse=True)

    def portable(column: Column) -> Column:
        for root, token in tokens:
            column = F.regexp_replace(column, F.lit(re.escape(root) + r"(?=/|$|[^\w.-])"), F.lit(token))
        return column

    return rows.withColumns(
        {
            "segment": portable(F.col("segment")),
            "message": portable(F.col("message")),
            "evidence": F.transform_values("evidence", lambda _, value: portable(value)),
        }
    )


def compared_schema(table: str) -> T.StructType:
    """The table's schema without the columns a comparison ignores."""
    return T.StructType([f for f in schemas.SCHEMAS[table].fields if f.name not in IGNORED_COLUMNS])


def golden_file(folder: Path, table: str) -> Path:
    return folder / f"{table}.jsonl"


def write_golden(rows: DataFrame, table: str, folder: Path) -> Path:
    """Write a run's rows of `table` (run ids dropped) as sorted JSON lines; returns the file."""
    schema = compared_schema(table)
    ordered = rows.select(*schema.names).orderBy(*_sort_keys(table, schema))
    folder.mkdir(parents=True, exist_ok=True)
    target = golden_file(folder, table)
    with tempfile.TemporaryDirectory(dir=folder, prefix=f".{table}.") as work:
        ordered.coalesce(1).write.mode("overwrite").json(f"{work}/rows")
        parts = sorted(Path(work, "rows").glob("part-*"))
        partial = Path(work, "golden.jsonl")
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, out)
        partial.replace(target)
    return target


def read_golden(spark: SparkSession, table: str, folder: Path) -> DataFrame:
    """A golden file as a DataFrame with the compared schema (fields left out of a line are null)."""
    path = golden_file(folder, table)
    schema = compared_schema(table)
    if path.stat().st_size == 0:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("mode", "FAILFAST").json(str(path))


def compare_tables(
    actual: DataFrame, golden: DataFrame, table: str, limit: int = 10, reference: str = "golden"
) -> TableDiff:
    """The differences between a run's rows of `table` and its golden rows (see module docstring); `golden` may
    be another run's rows as well, named by `reference` in the output.

    Three small jobs: the row counts, the counts of each kind of difference, and the first `limit` examples of
    each kind, all from one aggregate of both sides cached in between.
    """
    schema = compared_schema(table)
    keys = KEYS[table]
    both = (
        _comparable(actual, schema)
        .withColumn("_actual", F.lit(1))
        .unionByName(_comparable(golden, schema).withColumn("_actual", F.lit(0)))
    )
    counted = both.groupBy(*schema.names).agg(F.sum("_actual").alias("_actual"), F.count("*").alias("_all"))
    counted = counted.withColumn("_excess", 2 * F.col("_actual") - F.col("_all")).cache()  # actual - golden copies
    try:
        totals = counted.agg(F.sum("_actual").alias("actual"), F.sum(F.col("_all") - F.col("_actual")).alias("golden"))
        total = totals.first()
        diff = TableDiff(table, int(total.golden or 0), int(total.actual or 0), reference=reference)
        differing = _kinds(counted.where(F.col("_excess") != 0), keys)
        for row in (
            differing.groupBy("_kind")
            .agg(F.sum(F.abs("_excess")).alias("rows"), F.max("_key_rank").alias("keys"))
            .collect()
        ):
            setattr(diff, row["_kind"], int(row["keys"] if row["_kind"] == "changed" else row["rows"]))
        examples = differing.where(F.col("_key_rank") <= limit).orderBy("_kind", *keys, "_excess").collect()
        by_kind: dict[str, list[dict]] = {"missing": [], "unexpected": [], "changed": []}
        for row in examples:
            by_kind[row["_kind"]].append(row.asDict(recursive=True))
        diff.missing_examples = [_row_json(row, schema) for row in by_kind["missing"]]
        diff.unexpected_examples = [_row_json(row, schema) for row in by_kind["unexpected"]]
        diff.changed_examples = _changed_texts(by_kind["changed"], keys, schema)
        return diff
    finally:
        counted.unpersist()


def _kinds(differing: DataFrame, keys: list[str]) -> DataFrame:
    """Each differing row as `missing`, `unexpected` or part of a `changed` key (both kinds under one key), and
    its key's rank among the keys of its kind. Window partitions treat null keys as equal, as the comparison does.
    """
    same_key = Window.partitionBy(*keys)
    has_missing = F.max((F.col("_excess") < 0).cast("int")).over(same_key) == 1
    has_unexpected = F.max((F.col("_excess") > 0).cast("int")).over(same_key) == 1
    kind = F.when(has_missing & has_unexpected, "changed").when(F.col("_excess") < 0, "missing").otherwise("unexpected")
    return differing.withColumn("_kind", kind).withColumn(
        "_key_rank", F.dense_rank().over(Window.partitionBy("_kind").orderBy(*keys))
    )


def _comparable(df: DataFrame, schema: T.StructType) -> DataFrame:
    """The compared columns, maps as sorted entry arrays: Spark cannot group or compare map columns."""
    return df.select(*(_comparable_column(f) for f in schema.fields))


def _comparable_column(f: T.StructField) -> Column:
    if isinstance(f.dataType, T.MapType):
        return F.array_sort(F.map_entries(F.col(f.name))).alias(f.name)
    return F.col(f.name)


def _sort_keys(table: str, schema: T.StructType) -> list[Column]:
    keys = KEYS[table]
    rest = [f.name for f in schema.fields if f.name not in keys]
    types = {f.name: f.dataType for f in schema.fields}
    return [F.to_json(F.col(name)) if isinstance(types[name], T.MapType) else F.col(name) for name in [*keys, *rest]]


def _changed_texts(rows: list[dict], keys: list[str], schema: T.StructType) -> list[str]:
    """One line per changed key: the key, then each column whose golden and actual values differ."""
    texts = []
    for key_values, group in itertools.groupby(rows, key=lambda row: tuple(row[name] for name in keys)):
        versions = list(group)
        golden = next(row for row in versions if row["_excess"] < 0)
        actual = next(row for row in versions if row["_excess"] > 0)
        key = ", ".join(f"{name}={value}" for name, value in zip(keys, key_values, strict=True))
        changes = [
            f"{f.name}: {_value_json(golden[f.name], f)} -> {_value_json(actual[f.name], f)}"
            for f in schema.fields
            if f.name not in keys and golden[f.name] != actual[f.name]
        ]
        texts.append(f"{{{key}}} " + "; ".join(changes))
    return texts


def _row_json(row: dict, schema: T.StructType) -> str:
    return json.dumps({f.name: _plain(row[f.name], f) for f in schema.fields if row[f.name] is not None})


def _value_json(value, f: T.StructField) -> str:
    return json.dumps(_plain(value, f))


def _plain(value, f: T.StructField):
    """A map column's sorted entries back as a JSON object."""
    if isinstance(f.dataType, T.MapType) and value is not None:
        return {entry["key"]: entry["value"] for entry in value}
    return value
