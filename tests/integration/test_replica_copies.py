"""The copies of a partition compared in the replay's task (from its files, a window of offsets at a time) give the
frame's rows Spark's grouping of the same copies gives; the rules on them are tests/integration/test_rules.py's REP
scenarios."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.testing import assertDataFrameEqual

from pipeline.audit.replay import replica_copies
from pipeline.audit.replay.replica_copies import COPIES_SCHEMA, copies_by_exchange, file_copies
from schemas.batches import BATCHES, BATCHES_PARTITION_BY, STATUS_TRUNCATED
from tests.logbuilder import PartitionLog

FILE_SCHEMA = pa.schema([field for field in to_arrow_schema(BATCHES) if field.name not in BATCHES_PARTITION_BY])


def _leader(topic: str, batches: int = 6) -> PartitionLog:
    log = PartitionLog(topic=topic, cluster_id="c")
    for sequence in range(batches):
        log.data(7_001, 0, sequence, 2)
    return log


def _copy(log: PartitionLog, broker: int, rows: list[dict]) -> None:
    log.rows.extend({**row, "broker_id": broker, "source_file": f"b{broker}/{row['source_file']}"} for row in rows)


def _differing(log: PartitionLog) -> None:
    rows = [dict(row) for row in log.rows]
    rows[2]["crc"] = 99
    rows[4]["producer_epoch"] = 3
    _copy(log, 1, rows)


def _overwritten_and_lagging(log: PartitionLog) -> None:
    rows = [dict(row) for row in log.rows]
    _copy(log, 1, rows[:3] + [{**rows[3], "partition_leader_epoch": 1, "producer_id": 9, "crc": 5}])
    _copy(log, 2, rows[:5])


def _missing_and_duplicated(log: PartitionLog) -> None:
    rows = [dict(row) for row in log.rows]
    _copy(log, 1, rows[:1] + rows[2:])  # a batch gone from the middle
    _copy(log, 2, rows + [{**rows[1], "crc": 7}])  # the same base offset twice, once differing
    _copy(log, 3, rows[:3] + [{**rows[3], "entry_status": STATUS_TRUNCATED, "crc": 1}] + rows[4:])


def _ahead_by_one(log: PartitionLog) -> None:
    _copy(log, 1, [dict(row) for row in log.rows[:-1]])
    log.rows.append({**log.rows[-1], "broker_id": None, "source_file": "dump.txt"})  # a dump's copy: broker -1


def _duplicated_everywhere(log: PartitionLog) -> None:
    log.rows.insert(
        2, {**log.rows[1], "last_offset": log.rows[1]["base_offset"], "position": log.rows[1]["position"] + 1}
    )
    _copy(log, 1, [dict(row) for row in log.rows])


DEPARTING = {  # the copies that depart, whether the partition is compacted (CRCs and missing batches not compared)
    "duplicated-everywhere": lambda compacted: set(),
    "differing": lambda compacted: {1},
    "overwritten-and-lagging": lambda compacted: {0, 2},  # broker 1's batch of a later epoch is the reference
    "missing-and-duplicated": lambda compacted: set() if compacted else {1, 2, 3},
    "ahead-by-one": lambda compacted: set(),
}
SCENARIOS = {
    "duplicated-everywhere": _duplicated_everywhere,
    "differing": _differing,
    "overwritten-and-lagging": _overwritten_and_lagging,
    "missing-and-duplicated": _missing_and_duplicated,
    "ahead-by-one": _ahead_by_one,
}


def _files(tmp_path, log: PartitionLog) -> list[str]:
    """The rows as `batches` files are: one per copy, under the cluster's and topic's folders."""
    folder = tmp_path / "cluster_id=c" / f"topic={log.topic}"
    folder.mkdir(parents=True)
    paths = []
    for broker in sorted({row["broker_id"] for row in log.rows}, key=lambda broker: (broker is None, broker)):
        rows = [row for row in log.rows if row["broker_id"] == broker]
        path = folder / f"part-{broker}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=FILE_SCHEMA), path, row_group_size=3)
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("compacted", [False, True])
@pytest.mark.parametrize("window_rows", [2, replica_copies.WINDOW_ROWS])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_task_compares_the_copies_as_spark_groups_them(
    spark, tmp_path, monkeypatch, scenario, window_rows, compacted
):
    monkeypatch.setattr(replica_copies, "WINDOW_ROWS", window_rows)
    log = _leader(scenario)
    SCENARIOS[scenario](log)
    in_task = file_copies({"c": _files(tmp_path, log)}, log.topic, 0, lambda cluster: compacted)
    readable = (
        spark.createDataFrame(log.rows, BATCHES)
        .where(F.col("entry_status") == "ok")
        .withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .withColumn("is_compacted", F.lit(compacted))
    )
    by_exchange = copies_by_exchange(readable)
    assert in_task.num_rows == len({row["broker_id"] for row in log.rows})
    assertDataFrameEqual(spark.createDataFrame(in_task.to_pylist(), by_exchange.schema), by_exchange)
    departed = {row["broker_id"] for row in in_task.to_pylist() if row["departure"] is not None}
    assert departed == DEPARTING[scenario](compacted)


def test_a_partition_one_broker_holds_has_no_rows(tmp_path):
    log = _leader("alone")
    assert file_copies({"c": _files(tmp_path, log)}, log.topic, 0, lambda cluster: False) == COPIES_SCHEMA.empty_table()
