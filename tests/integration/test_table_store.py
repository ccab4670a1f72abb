"""TableStore: backend selection, and Delta writes and reads through each backend.

Tests taking `store` run once per backend. The native ones need delta-spark in the test session, which only
the pytest that tests/integration/test_native_backend.py starts has; in the main session they are skipped, saying
so.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime
from pathlib import Path
from unittest.mock import MagicMock

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.errors import SparkRuntimeException
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline.arrow_pass import ArrowPass
from pipeline.tables import delta_log
from pipeline.tables.backend import (
    BackendUnavailableError,
    CommitConflictError,
    PartitionOverwriteError,
    TableNotFoundError,
    TableSchemaError,
    check_replaced_partitions,
    replace_where_predicate,
)
from pipeline.tables.parquet_sink import stage_pass
from pipeline.tables.stats import logged_partitions
from pipeline.tables.store import TableStore, delta_spark_available, resolve_backend

SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("base_offset", T.LongType(), True),
        T.StructField("evidence", T.MapType(T.StringType(), T.StringType()), True),
        T.StructField("seen_at", T.TimestampType(), True),
    ]
)
PARTITION_BY = ["topic", "partition"]
# Kafka allows [a-zA-Z0-9._-] in topic names; the last name is not one, it exercises Hive-style escaping.
TOPICS = ["orders.v1", "payments-eu_2", "odd:name%20 x"]
SEEN_AT = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)


def rows(topics: list[str], base_offset: int = 0) -> list[tuple]:
    return [
        (topic, partition, base_offset + partition, {"rule": f"{topic}/{partition}"}, SEEN_AT)
        for topic in topics
        for partition in range(2)
    ]


def frame(spark, topics: list[str], base_offset: int = 0):
    # One Spark partition keeps the file count, and so the test time, small.
    return spark.createDataFrame(rows(topics, base_offset), SCHEMA).coalesce(1)


def as_tuples(df) -> list[tuple]:
    """Sorted rows; PySpark returns timestamps as naive local times, so they are made UTC-aware."""
    return sorted(
        tuple(value.astimezone(UTC) if isinstance(value, datetime) else value for value in row) for row in df.collect()
    )


def data_files(table_path: str) -> set[str]:
    """Every file under the table folder except the Delta log."""
    root = Path(table_path)
    return {
        str(path.relative_to(root)) for path in root.rglob("*") if path.is_file() and "_delta_log" not in path.parts
    }


NATIVE_ELSEWHERE = (
    "the native backend needs delta-spark in the test session: tests/integration/test_native_backend.py runs these "
    "tests in a pytest whose session loads the bundle `produce-audit prepare` installs"
)


def require_native(spark) -> None:
    if not delta_spark_available(spark):
        pytest.skip(NATIVE_ELSEWHERE)


@pytest.fixture(params=["embedded", "native"])
def store(request, spark, tmp_path) -> TableStore:
    if request.param == "native":
        require_native(spark)
    return TableStore(spark, str(tmp_path / "warehouse"), backend=request.param)


@pytest.fixture
def embedded_store(spark, tmp_path) -> TableStore:
    """For what only the embedded backend has: staging, delta-rs commits."""
    return TableStore(spark, str(tmp_path / "warehouse"), backend="embedded")


def test_auto_backend_is_embedded_without_delta_jars(spark, tmp_path, caplog):
    if delta_spark_available(spark):
        pytest.skip("this session has delta-spark")
    with caplog.at_level(logging.DEBUG, logger="pipeline.tables.store"):
        store = TableStore(spark, str(tmp_path))
    assert store.backend_name == "embedded"
    assert "embedded backend" in caplog.text
    assert store.path("batches") == f"{tmp_path}/batches"


def test_auto_backend_is_native_with_delta_jars(spark, tmp_path):
    require_native(spark)
    assert TableStore(spark, str(tmp_path)).backend_name == "native"
    assert TableStore(spark, str(tmp_path), backend="embedded").backend_name == "embedded"


def test_asking_for_native_without_delta_jars_says_how_to_get_them(spark, tmp_path):
    if delta_spark_available(spark):
        pytest.skip("this session has delta-spark")
    with pytest.raises(BackendUnavailableError, match=r"produce-audit prepare.*--packages io\.delta:delta-spark_"):
        TableStore(spark, str(tmp_path), backend="native")


def test_backend_selection_follows_delta_class_loading():
    session_with_delta = MagicMock()
    session_without_delta = MagicMock()
    session_without_delta._jvm.java.lang.Class.forName.side_effect = RuntimeError("ClassNotFoundException")
    assert resolve_backend(session_with_delta, "auto") == "native"
    assert resolve_backend(session_with_delta, "embedded") == "embedded"
    assert resolve_backend(session_without_delta, "auto") == "embedded"
    with pytest.raises(ValueError, match="unknown Delta backend"):
        resolve_backend(session_with_delta, "delta")


def test_replace_where_predicate_quotes_names_and_values():
    predicate = replace_where_predicate({"topic": ["orders.v1", "it's\\"]})
    assert predicate == "`topic` IN ('orders.v1', 'it\\'s\\\\')"
    assert replace_where_predicate({"day": [date(2024, 5, 1)], "ok": [True]}) == (
        "`day` IN (DATE '2024-05-01') AND `ok` IN (true)"
    )
    with pytest.raises(TypeError):
        replace_where_predicate({"topic": [None]})


def test_replace_where_predicate_selects_pairs_not_their_cross_product():
    pairs = {"cluster_id": ["a", "a", "b", ""], "topic": ["x", "y", "x", "x"]}

    assert replace_where_predicate(pairs) == (
        "(`cluster_id` IN ('a') AND `topic` IN ('x', 'y')) OR (`cluster_id` IN ('b') AND `topic` IN ('x')) "
        "OR ((`cluster_id` IN ('') OR `cluster_id` IS NULL) AND `topic` IN ('x'))"
    )
    with pytest.raises(ValueError, match="one value per replaced partition"):
        check_replaced_partitions(["cluster_id", "topic"], {"cluster_id": ["a"], "topic": ["x", "y"]})


def test_append_round_trip_types_partition_columns(spark, store):
    # Several Spark partitions, so partition folders receive more than one file.
    version = store.append(spark.createDataFrame(rows(TOPICS), SCHEMA).repartition(3), "batches", PARTITION_BY)

    assert version == 0
    df = store.read("batches", SCHEMA)
    assert df.columns == SCHEMA.fieldNames()
    assert [field.dataType for field in df.schema] == [field.dataType for field in SCHEMA]
    assert as_tuples(df) == sorted(rows(TOPICS))
    assert store.read("batches").columns == SCHEMA.fieldNames()
    assert {path.split("/")[0] for path in data_files(store.path("batches"))} == {
        "topic=orders.v1",
        "topic=payments-eu_2",
        "topic=odd%3Aname%2520 x",
    }

    arrow = deltalake.DeltaTable(store.path("batches")).to_pyarrow_table()
    assert arrow.schema.field("partition").type == pa.int32()
    read_by_deltalake = sorted(
        (row["topic"], row["partition"], row["base_offset"], dict(row["evidence"]), row["seen_at"])
        for row in arrow.to_pylist()
    )
    assert read_by_deltalake == sorted(rows(TOPICS))


def test_versions_and_history(spark, store):
    store.append(frame(spark, TOPICS[:1]), "batches", PARTITION_BY)
    version = store.append(frame(spark, TOPICS[1:]), "batches")

    assert version == 1
    assert as_tuples(store.read("batches", SCHEMA, version=0)) == sorted(rows(TOPICS[:1]))
    assert store.read("batches", SCHEMA).count() == len(rows(TOPICS))
    history = store.history("batches")
    assert [commit["version"] for commit in history] == [1, 0]
    assert history[0]["operation"] == "WRITE"
    assert history[1]["operation"] in ("CREATE TABLE", "WRITE")  # delta-rs and delta-spark name a first write so
    assert history[0]["parameters"]["mode"] == "Append"
    assert all(isinstance(commit["timestamp"], datetime) for commit in history)


def test_overwrite_partitions_replaces_only_named_partitions_and_is_idempotent(spark, store):
    created = store.overwrite_partitions(frame(spark, TOPICS), "batches", PARTITION_BY, {"topic": TOPICS})
    replacement = frame(spark, TOPICS[:2], base_offset=100)
    expected = sorted(rows(TOPICS[:2], base_offset=100) + rows(TOPICS[2:]))

    first = store.overwrite_partitions(replacement, "batches", PARTITION_BY, {"topic": TOPICS[:2]})
    assert as_tuples(store.read("batches", SCHEMA)) == expected
    second = store.overwrite_partitions(replacement, "batches", PARTITION_BY, {"topic": TOPICS[:2]})

    assert (created, first, second) == (0, 1, 2)
    assert as_tuples(store.read("batches", SCHEMA)) == expected
    predicate = store.history("batches")[0]["parameters"]["predicate"]
    assert all(topic in predicate for topic in TOPICS[:2]) and TOPICS[2] not in predicate


def test_overwrite_partitions_replaces_pairs_of_values_never_their_cross_product(spark, store):
    """(orders.v1, 0) and (payments-eu_2, 1) are replaced; (orders.v1, 1) and (payments-eu_2, 0) stay, on both
    paths: a Spark write, and files staged by the tasks."""
    store.overwrite_partitions(frame(spark, TOPICS[:2]), "batches", PARTITION_BY, {"topic": TOPICS[:2]})
    pairs = {"topic": TOPICS[:2], "partition": [0, 1]}
    replacement = frame(spark, TOPICS[:2], base_offset=100).where(
        ((F.col("topic") == TOPICS[0]) & (F.col("partition") == 0))
        | ((F.col("topic") == TOPICS[1]) & (F.col("partition") == 1))
    )
    kept = [row for row in rows(TOPICS[:2]) if (row[0], row[1]) in ((TOPICS[0], 1), (TOPICS[1], 0))]
    replaced = [row for row in rows(TOPICS[:2], 100) if (row[0], row[1]) in ((TOPICS[0], 0), (TOPICS[1], 1))]

    store.overwrite_partitions(replacement, "batches", PARTITION_BY, pairs)
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(kept + replaced)
    assert store.count("batches", pairs) == 2
    with store.staged_partitions("batches", SCHEMA, PARTITION_BY, pairs) as folder:
        stage_pass(ArrowPass.of(replacement.withColumn("base_offset", F.lit(7).cast("long"))), folder, PARTITION_BY)
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(kept + [(*row[:2], 7, *row[3:]) for row in replaced])
    with pytest.raises(PartitionOverwriteError):
        store.overwrite_partitions(frame(spark, TOPICS[:1]), "batches", PARTITION_BY, pairs)


def test_staged_partitions_replace_like_overwrite_partitions(spark, store):
    """Files the tasks write themselves into the staged folder replace the named partitions, on either backend,
    and read back as the rows written, escaped topic, map and timestamp columns included."""
    store.overwrite_partitions(frame(spark, TOPICS), "batches", PARTITION_BY, {"topic": TOPICS})

    for _ in range(2):  # a rerun leaves the same rows
        with store.staged_partitions("batches", SCHEMA, PARTITION_BY, {"topic": TOPICS[:2]}) as folder:
            written = stage_pass(ArrowPass.of(frame(spark, TOPICS[:2], base_offset=100)), folder, PARTITION_BY)
        assert sum(file.rows for file in written) == 4

    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS[:2], base_offset=100) + rows(TOPICS[2:]))
    assert store.count("batches", {"topic": TOPICS[:2]}) == 4
    assert not any(name.startswith("_staging") for name in data_files(store.path("batches")))


def test_staged_partitions_keep_the_named_files_of_the_replaced_partitions(spark, store):
    """Kept files stay as they are beside the staged ones, every other file of the replaced partitions goes, and
    a kept file gone meanwhile commits nothing."""
    store.overwrite_partitions(frame(spark, TOPICS), "batches", PARTITION_BY, {"topic": TOPICS})
    actions = pa.table(deltalake.DeltaTable(store.path("batches")).get_add_actions(flatten=True))
    first_topic = pc.equal(actions.column("partition.topic"), TOPICS[0])
    kept = frozenset(actions.filter(first_topic).column("path").to_pylist())

    with store.staged_partitions("batches", SCHEMA, PARTITION_BY, {"topic": TOPICS[:2]}, kept) as folder:
        stage_pass(ArrowPass.of(frame(spark, TOPICS[1:2], base_offset=100)), folder, PARTITION_BY)

    expected = sorted(rows(TOPICS[:1]) + rows(TOPICS[1:2], base_offset=100) + rows(TOPICS[2:]))
    assert as_tuples(store.read("batches", SCHEMA)) == expected
    latest = pa.table(deltalake.DeltaTable(store.path("batches")).get_add_actions(flatten=True))
    assert kept <= set(latest.column("path").to_pylist())

    before, files = store.version("batches"), data_files(store.path("batches"))
    gone = frozenset({*kept, f"topic={TOPICS[0]}/part-00000-gone.parquet"})
    replaced = store.staged_partitions("batches", SCHEMA, PARTITION_BY, {"topic": TOPICS[:2]}, gone)
    with pytest.raises(CommitConflictError, match="files to keep are no longer"), replaced as folder:
        stage_pass(ArrowPass.of(frame(spark, TOPICS[1:2], base_offset=200)), folder, PARTITION_BY)
    assert store.version("batches") == before
    assert as_tuples(store.read("batches", SCHEMA)) == expected
    assert data_files(store.path("batches")) == files


def test_staged_partitions_commit_nothing_when_the_block_fails(spark, store):
    store.overwrite_partitions(frame(spark, TOPICS), "batches", PARTITION_BY, {"topic": TOPICS})
    before, files = store.version("batches"), data_files(store.path("batches"))

    replaced = store.staged_partitions("batches", SCHEMA, PARTITION_BY, {"topic": TOPICS[:1]})
    with pytest.raises(RuntimeError, match="decode failed"), replaced as folder:
        stage_pass(ArrowPass.of(frame(spark, TOPICS[:1], base_offset=100)), folder, PARTITION_BY)
        raise RuntimeError("decode failed")

    assert store.version("batches") == before
    assert data_files(store.path("batches")) == files  # the staged files went with their folder
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS))


def test_staged_partitions_refuse_rows_outside_the_named_partitions(spark, store):
    replaced = store.staged_partitions("batches", SCHEMA, PARTITION_BY, {"topic": TOPICS[:1]})
    with pytest.raises(PartitionOverwriteError, match="outside the replaced partitions"), replaced as folder:
        stage_pass(ArrowPass.of(frame(spark, TOPICS[:2])), folder, PARTITION_BY)
    assert not store.exists("batches")


def test_count_reads_the_log_and_agrees_with_spark(spark, store):
    assert store.count("batches") == 0
    store.overwrite_partitions(frame(spark, TOPICS), "batches", PARTITION_BY, {"topic": TOPICS})
    store.overwrite_partitions(frame(spark, TOPICS[:1], 7), "batches", PARTITION_BY, {"topic": TOPICS[:1]})
    store.append(frame(spark, TOPICS[1:2]), "batches", PARTITION_BY)
    table = store.read("batches", SCHEMA)
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup(None)

    counts = {
        "all": store.count("batches"),
        "one": store.count("batches", {"topic": TOPICS[1:2]}),
        "escaped": store.count("batches", {"topic": TOPICS[2:]}),
        "two partitions": store.count("batches", {"topic": TOPICS, "partition": [1, 1, 1]}),
        "none": store.count("batches", {"topic": ["absent"]}),
    }

    assert spark.sparkContext.statusTracker().getJobIdsForGroup(None) == jobs_before  # no Spark job
    assert counts == {
        "all": table.count(),
        "one": table.where(F.col("topic") == TOPICS[1]).count(),
        "escaped": table.where(F.col("topic") == TOPICS[2]).count(),
        "two partitions": table.where(F.col("partition") == 1).count(),
        "none": 0,
    }


def test_count_of_a_table_without_files_is_zero(spark, store):
    store.overwrite_partitions(frame(spark, []), "batches", PARTITION_BY, {"topic": TOPICS})

    assert store.count("batches", {"topic": TOPICS}) == store.count("batches") == 0


def test_count_falls_back_to_spark_without_file_statistics(spark, store, monkeypatch):
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)
    monkeypatch.setattr("pipeline.tables.store.logged_row_count", lambda location, values=None: None)

    assert store.count("batches", {"topic": TOPICS[:2]}) == 4


def test_the_log_names_the_partitions_that_hold_rows(spark, store, tmp_path):
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)
    store.overwrite_partitions(frame(spark, TOPICS[:1]), "batches", PARTITION_BY, {"topic": TOPICS[:2]})

    # TOPICS[1] was replaced by no rows; the escaped name comes back as Kafka spells it
    assert logged_partitions(store.path("batches"), PARTITION_BY) == {
        (topic, partition) for topic in (TOPICS[0], TOPICS[2]) for partition in range(2)
    }
    assert logged_partitions(str(tmp_path / "no-table"), PARTITION_BY) is None


def test_rows_outside_replaced_partitions_commit_nothing(spark, store):
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)
    files_before = data_files(store.path("batches"))
    stray = frame(spark, TOPICS, base_offset=100)

    with pytest.raises(PartitionOverwriteError, match="payments-eu_2"):
        store.overwrite_partitions(stray, "batches", PARTITION_BY, {"topic": ["orders.v1"]})

    assert deltalake.DeltaTable(store.path("batches")).version() == 0
    assert data_files(store.path("batches")) == files_before
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS))


def test_failed_spark_job_leaves_no_files_and_no_version(spark, store):
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)
    files_before = data_files(store.path("batches"))

    # frame() has one Spark partition, so no task of the failed job is still writing during the cleanup.
    failing = frame(spark, TOPICS).withColumn(
        "base_offset",
        F.when(F.col("base_offset") == 1, F.raise_error(F.lit("corrupt batch"))).otherwise(F.col("base_offset")),
    )
    with pytest.raises(SparkRuntimeException, match="corrupt batch"):
        store.append(failing, "batches")

    assert deltalake.DeltaTable(store.path("batches")).version() == 0
    assert data_files(store.path("batches")) == files_before


def test_commit_conflict_is_reported_and_cleaned_up(spark, embedded_store, monkeypatch):
    store = embedded_store
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)
    files_before = data_files(store.path("batches"))
    commit = deltalake.DeltaTable.create_write_transaction

    def commit_after_a_concurrent_delete(table, *args, **kwargs):
        deltalake.DeltaTable(store.path("batches")).delete("topic = 'orders.v1'")
        return commit(table, *args, **kwargs)

    monkeypatch.setattr(deltalake.DeltaTable, "create_write_transaction", commit_after_a_concurrent_delete)
    replacement = frame(spark, TOPICS[:1], base_offset=100)
    with pytest.raises(CommitConflictError, match="concurrent commit"):
        store.overwrite_partitions(replacement, "batches", PARTITION_BY, {"topic": TOPICS[:1]})

    assert deltalake.DeltaTable(store.path("batches")).version() == 1
    assert data_files(store.path("batches")) == files_before


def test_error_after_the_commit_keeps_the_committed_files(spark, embedded_store, monkeypatch):
    store = embedded_store
    store.append(frame(spark, TOPICS[:1]), "batches", PARTITION_BY)

    def log_unreadable(*args):
        raise OSError("log unreadable")

    monkeypatch.setattr(delta_log, "find_commit", log_unreadable)
    with pytest.raises(OSError, match="log unreadable"):
        store.append(frame(spark, TOPICS[1:]), "batches")

    assert deltalake.DeltaTable(store.path("batches")).version() == 1
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS))


def test_an_empty_write_commits_a_version_of_its_own(spark, store):
    """delta-spark records no commit for an empty write by default, and the write's id was then not found."""
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)
    empty = frame(spark, TOPICS).limit(0)

    assert store.append(empty, "batches") == 1
    assert store.overwrite_partitions(empty, "batches", PARTITION_BY, {"topic": ["absent"]}) == 2
    assert store.version("batches") == 2
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS))


def test_append_that_does_not_fit_the_table_is_refused(spark, store):
    store.append(frame(spark, TOPICS[:1]), "batches", PARTITION_BY)
    widened = frame(spark, TOPICS[:1]).withColumn("partition", F.col("partition").cast("long"))

    # The messages are each backend's own: "columns partition bigint do not fit" (embedded), "Failed to merge
    # fields 'partition'" (delta-spark).
    with pytest.raises(TableSchemaError, match="partition"):
        store.append(widened, "batches")
    with pytest.raises(TableSchemaError, match="partitioned by|metadata mismatch"):
        store.append(frame(spark, TOPICS[:1]), "batches", ["topic"])
    assert store.version("batches") == 0


def test_partition_overwrite_adds_new_columns_and_keeps_older_rows(spark, store):
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)
    widened = frame(spark, TOPICS[:1]).withColumn("record_problem", F.lit("bad varint"))

    store.overwrite_partitions(widened, "batches", PARTITION_BY, {"topic": TOPICS[:1]})

    table = store.read("batches")
    assert table.schema["record_problem"].dataType == T.StringType()
    problems = {(row.topic, row.record_problem) for row in table.select("topic", "record_problem").collect()}
    assert problems == {(TOPICS[0], "bad varint"), *((topic, None) for topic in TOPICS[1:])}


def test_overwrite_replaces_rows_and_partitioning(spark, store):
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)

    version = store.overwrite(frame(spark, TOPICS[:1]), "batches", ["topic"])

    assert version == 1
    assert deltalake.DeltaTable(store.path("batches")).metadata().partition_columns == ["topic"]
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS[:1]))
    assert as_tuples(store.read("batches", SCHEMA, version=0)) == sorted(rows(TOPICS))


def test_absent_table_reads_as_empty_with_a_schema(store):
    df = store.read("findings", SCHEMA)

    assert df.schema == SCHEMA
    assert df.count() == 0
    assert not store.exists("findings")
    with pytest.raises(TableNotFoundError):
        store.read("findings")


def other_backend(store: TableStore, warehouse: str | None = None) -> TableStore:
    """The other backend, on the same warehouse or on `warehouse`; the native one needs delta-spark."""
    other = "embedded" if store.backend_name == "native" else "native"
    if other == "native":
        require_native(store.spark)
    return TableStore(store.spark, warehouse or store.warehouse, backend=other)


def test_the_other_backend_and_delta_rs_read_append_and_overwrite_a_table(spark, store):
    other = other_backend(store)
    store.overwrite_partitions(frame(spark, TOPICS), "batches", PARTITION_BY, {"topic": TOPICS})

    assert as_tuples(other.read("batches", SCHEMA)) == sorted(rows(TOPICS))
    assert other.count("batches", {"topic": TOPICS[:1]}) == 2
    other.append(frame(spark, TOPICS[:1], base_offset=10), "batches")
    other.overwrite_partitions(frame(spark, TOPICS[1:2], 20), "batches", PARTITION_BY, {"topic": TOPICS[1:2]})
    arrow = deltalake.DeltaTable(store.path("batches")).to_pyarrow_table()
    first_row = arrow.filter(pc.and_(pc.equal(arrow["topic"], TOPICS[0]), pc.equal(arrow["base_offset"], 0)))
    deltalake.write_deltalake(store.path("batches"), first_row, mode="append")

    expected = sorted(
        rows(TOPICS[:1]) + rows(TOPICS[2:]) + rows(TOPICS[:1], 10) + rows(TOPICS[1:2], 20) + rows(TOPICS[:1])[:1]
    )
    assert as_tuples(store.read("batches", SCHEMA)) == as_tuples(other.read("batches", SCHEMA)) == expected
    assert store.count("batches") == other.count("batches") == len(expected)
    assert store.version("batches") == other.version("batches") == 3
    assert [commit["version"] for commit in store.history("batches", limit=2)] == [3, 2]

    assert store.restore("batches", 0) == 4
    (restore,) = other.history("batches", limit=1)  # what publication looks for after a roll-back
    assert (restore["operation"], restore["parameters"]["version"]) == ("RESTORE", "0")
    other.overwrite(frame(spark, TOPICS[:1]), "batches", ["topic"])
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS[:1]))
    assert as_tuples(store.read("batches", SCHEMA, version=4)) == sorted(rows(TOPICS))
    assert deltalake.DeltaTable(store.path("batches")).metadata().partition_columns == ["topic"]


def test_both_backends_leave_the_same_rows_and_schema_after_the_same_writes(spark, store, tmp_path):
    other = other_backend(store, str(tmp_path / "other"))
    widened = frame(spark, TOPICS[:1], 5).withColumn("record_problem", F.lit("bad varint"))
    for each in (store, other):
        each.overwrite_partitions(frame(spark, TOPICS), "batches", PARTITION_BY, {"topic": TOPICS})
        each.overwrite_partitions(widened, "batches", PARTITION_BY, {"topic": TOPICS[:1]})
        version = each.append(frame(spark, TOPICS[2:], 9), "batches")
        with pytest.raises(PartitionOverwriteError):
            each.overwrite_partitions(frame(spark, TOPICS), "batches", PARTITION_BY, {"topic": TOPICS[:1]})
        with pytest.raises(TableSchemaError):
            each.append(frame(spark, TOPICS[:1]).withColumn("base_offset", F.lit("text")), "batches")
        assert each.version("batches") == version  # the refused writes committed nothing

    tables = [deltalake.DeltaTable(each.path("batches")) for each in (store, other)]
    first, second = (table.to_pyarrow_table() for table in tables)
    assert first.schema == second.schema
    assert sorted(first.to_pylist(), key=repr) == sorted(second.to_pylist(), key=repr)
    assert [table.metadata().partition_columns for table in tables] == [PARTITION_BY, PARTITION_BY]


def test_vacuum_keeps_the_named_versions(spark, store):
    store.append(frame(spark, TOPICS), "batches", PARTITION_BY)
    store.overwrite(frame(spark, TOPICS[:1]), "batches", PARTITION_BY)
    store.overwrite(frame(spark, TOPICS[1:2]), "batches", PARTITION_BY)

    removed = store.vacuum("batches", 0, [0, 2])

    assert removed == len(rows(TOPICS[:1]))  # version 1's files, one per partition
    assert as_tuples(store.read("batches", SCHEMA, version=0)) == sorted(rows(TOPICS))
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS[1:2]))


def test_native_reads_plain_tables_from_the_log_and_leaves_deletion_vectors_to_delta_spark(spark, tmp_path):
    require_native(spark)
    store = TableStore(spark, str(tmp_path / "warehouse"), backend="native")
    store.overwrite(frame(spark, TOPICS[:1]), "batches", ["topic"])  # both rows in one file
    plain = store.read("batches", SCHEMA)
    assert file_index(plain) == "InMemoryFileIndex"  # the listed files, no Delta file index
    assert as_tuples(plain) == sorted(rows(TOPICS[:1]))

    location = store.path("batches")
    spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM delta.`{location}` WHERE partition = 0 AND base_offset = 0")
    assert deltalake.DeltaTable(location).protocol().min_reader_version == 3
    # The deleted row is still in its Parquet file; only a reader of the deletion vector leaves it out.
    through_delta = store.read("batches", SCHEMA)
    assert file_index(through_delta) != "InMemoryFileIndex"
    assert as_tuples(through_delta) == sorted(rows(TOPICS[:1]))[1:]


def file_index(df) -> str:
    """The class of the file index the scan of a one-table DataFrame lists its files with."""
    leaf = df._jdf.queryExecution().optimizedPlan().collectLeaves().head()
    return leaf.relation().location().getClass().getSimpleName()


def test_native_commits_plain_tables_with_delta_rs_and_leaves_tables_with_features_to_delta_spark(spark, tmp_path):
    require_native(spark)
    store = TableStore(spark, str(tmp_path / "warehouse"), backend="native")
    store.overwrite_partitions(frame(spark, TOPICS[:1]), "batches", ["topic"], {"topic": [TOPICS[0]]})
    location = store.path("batches")
    assert deltalake.DeltaTable(location).history(1)[0]["engineInfo"].startswith("delta-rs")

    spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    store.overwrite_partitions(frame(spark, TOPICS[1:2]), "batches", ["topic"], {"topic": [TOPICS[1]]})
    assert "Delta-Lake" in deltalake.DeltaTable(location).history(1)[0]["engineInfo"]
    assert as_tuples(store.read("batches", SCHEMA)) == sorted(rows(TOPICS[:2]))

    # an append-only table of the plain protocol keeps its rows: the staged commit refuses to remove its files
    append_only = store.path("runs")
    store.append(frame(spark, TOPICS[:1]), "runs", ["topic"])
    spark.sql(f"ALTER TABLE delta.`{append_only}` SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
    with pytest.raises(Exception, match="(?i)append"):
        store.overwrite_partitions(frame(spark, TOPICS[:1]), "runs", ["topic"], {"topic": [TOPICS[0]]})
    assert as_tuples(store.read("runs", SCHEMA)) == sorted(rows(TOPICS[:1]))
