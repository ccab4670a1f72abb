"""The compiled producer-state pass gives, for every producer row, exactly what the window-function reference
gives (tests/reference_replay.py), on generated logs with anomalies of every family and on real broker dirs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.testing import assertDataFrameEqual

from pipeline.audit.producer_arrow import GROUP_KEY, replay_table, whole_producers
from pipeline.audit.replay import ORDER, PRODUCER, prepare_batches, with_file_order_state, with_producer_state
from pipeline.audit.replay import _carries_producer_state as carries_producer_state
from pipeline.config import AuditSettings, Settings
from pipeline.generate.options import GenerateOptions
from pipeline.generate.simulation import write_log_root
from pipeline.sources.dispatch import read_inputs
from schemas.replay import PRODUCER_STATE_COLUMNS
from tests.reference_replay import with_producer_state as reference_producer_state

STATE = [field.name for field in PRODUCER_STATE_COLUMNS.fields]
LOCATION = ["topic", "partition", "broker_id", "segment_base_offset", "position"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kernel") / "root"
    write_log_root(GenerateOptions(out=root, batches=3000, anomaly_rate=0.05, segment_bytes=16 * 1024))
    return root


def _prepared(spark, inputs: list[str], settings: AuditSettings):
    batches = read_inputs(spark, inputs, Settings())
    prepared = prepare_batches(batches, settings).withColumn("is_producer_row", carries_producer_state())
    return with_file_order_state(prepared).localCheckpoint()


def _assert_same_state(prepared, settings: AuditSettings) -> int:
    def producer_rows(df):
        return df.where("is_producer_row").select(*LOCATION, *STATE)

    compiled = producer_rows(with_producer_state(prepared, settings))
    reference = producer_rows(reference_producer_state(prepared, settings))
    assertDataFrameEqual(compiled, reference)
    return compiled.count()


@pytest.mark.parametrize("version", ["auto", "2"])
def test_same_state_as_the_window_reference_on_generated_logs(spark, generated, version):
    settings = AuditSettings(compacted_topics=["*-changelog"], transaction_version=version)
    prepared = _prepared(spark, [str(generated)], settings)
    # small Arrow batches, so producers span many of them
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "97")
    try:
        assert _assert_same_state(prepared, settings) > 2000
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def test_same_state_as_the_window_reference_on_real_broker_dirs(spark, realdata):
    dirs = sorted(
        str(path)
        for path in (realdata / "broker-segments").iterdir()
        if path.is_dir() and not path.name.startswith("_")
    )
    settings = AuditSettings()
    for log_dir in dirs:
        _assert_same_state(_prepared(spark, [log_dir], settings), settings)


def test_a_producer_cut_across_batches_is_replayed_whole(spark, generated):
    """Re-cutting the sorted stream anywhere changes nothing: the kernel always sees whole producers."""
    settings = AuditSettings(compacted_topics=["*-changelog"])
    prepared = _prepared(spark, [str(generated)], settings).withColumns(
        {"is_data": ~F.col("is_control"), "is_marker": F.col("is_control") & F.col("control_type").isin(0, 1)}
    )
    rows = prepared.toArrow().sort_by([(name, "ascending") for name in [*PRODUCER, *ORDER]])
    schema = pa.schema([*rows.schema, *to_arrow_schema(PRODUCER_STATE_COLUMNS)])
    whole = replay_table(rows, settings.producer_id_expiration_ms, 0, schema)
    for size in (1, 7, 500):
        tables = list(whole_producers(iter(rows.to_batches(max_chunksize=size))))
        for before, after in itertools.pairwise(tables):
            assert _key(before, before.num_rows - 1) != _key(after, 0)
        recut = pa.concat_tables(
            [replay_table(table, settings.producer_id_expiration_ms, 0, schema) for table in tables]
        )
        assert recut.equals(whole)


def _key(table: pa.Table, row: int) -> tuple:
    return tuple(table.column(name)[row].as_py() for name in GROUP_KEY)
