"""The small queries of a report's sections, answered by a couple of Spark jobs.

Each section needs a few aggregates and top-N lists. Collected one by one, every query is a Spark job of its own
(about twenty for a run's page, a tenth of a second each in scheduling alone). Unioned, they are the stages of a
job. Each query's rows travel as JSON text, so the union has one shape whatever the queries select.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial, reduce
from operator import itemgetter
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.parallel import side_by_side

Rows = list[dict[str, Any]]
# Two unions side by side: on two cores each is planned while the other runs (a page's sections in 1.1 s, against
# 1.5 s as one job and 1.3 s as a job per section).
JOBS = 2


@dataclass(frozen=True)
class Query:
    """The rows of `frame`; a top-N list when `limit` is set, its rows then in `order`."""

    frame: DataFrame
    order: Sequence[Column] = ()
    limit: int | None = None


@dataclass(frozen=True)
class Section:
    """A report section: the queries it needs, and what it makes of their rows (name -> rows)."""

    queries: Mapping[str, Query]
    shape: Callable[[Mapping[str, Rows]], dict[str, Any]]


def top(frame: DataFrame, order: Sequence[Column], limit: int) -> Query:
    return Query(frame, tuple(order), limit)


def gather(sections: Mapping[str, Section], jobs: int = JOBS) -> dict[str, dict[str, Any]]:
    """Every section shaped from the rows of its queries, the sections dealt into `jobs` Spark jobs run side by side."""
    names = list(sections)
    dealt = [{name: sections[name] for name in names[job::jobs]} for job in range(min(jobs, len(names)))]
    rows: dict[str, Rows] = {}
    for gathered in side_by_side({str(job): partial(_collected, group) for job, group in enumerate(dealt)}).values():
        rows.update(gathered)
    return {
        name: section.shape({query: rows[f"{name}.{query}"] for query in section.queries})
        for name, section in sections.items()
    }


def _collected(sections: Mapping[str, Section]) -> dict[str, Rows]:
    """The rows of every query of `sections` (by "section.query"), from one job."""
    columns = {
        f"{name}.{query_name}": query.frame.columns
        for name, section in sections.items()
        for query_name, query in section.queries.items()
    }
    branches = [
        _branch(f"{name}.{query_name}", query)
        for name, section in sections.items()
        for query_name, query in section.queries.items()
    ]
    ranked: dict[str, list[tuple[int, dict[str, Any]]]] = {name: [] for name in columns}
    if branches:
        union = reduce(DataFrame.unionAll, branches)
        # One task reads every branch's rows: each task of a union deserializes the plans of all its branches.
        for row in union.coalesce(1).collect():
            values = json.loads(row.row)
            ranked[row.query].append((row.rank or 0, {column: values.get(column) for column in columns[row.query]}))
    return {name: [values for _, values in sorted(rows, key=itemgetter(0))] for name, rows in ranked.items()}


def _branch(name: str, query: Query) -> DataFrame:
    """The query's rows as (query, rank, row as JSON); the rank orders a top-N list, whose order a union keeps
    no promise of."""
    frame, rank = query.frame, F.lit(None).cast("long")
    if query.limit is not None:
        # A top-N is one sorted partition, so the ids Spark numbers its rows with follow the order; a window over
        # the rows would say the same and warn, once per list, that it has no partition.
        frame = frame.orderBy(*query.order).limit(query.limit)
        rank = F.monotonically_increasing_id()
    return frame.select(
        F.lit(name).alias("query"),
        rank.alias("rank"),
        F.to_json(F.struct(*frame.columns), {"ignoreNullFields": "false"}).alias("row"),
    )
