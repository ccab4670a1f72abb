"""The driver JVM's compilers chosen by the run's size before the JVM starts (pipeline.compilers)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from pipeline.compilers import (
    BATCH_BYTES,
    PARALLEL_GC,
    QUICK_ONLY,
    expected_batches,
    runs_optimising,
    with_compilers_for,
)

SHIPPED = f"{QUICK_ONLY} -XX:ReservedCodeCacheSize=240m"


@pytest.mark.parametrize(("batches", "threshold"), [(None, 10), (9, 10), (10**9, 0)])
def test_below_the_threshold_or_unknown_the_shipped_options_stay(batches, threshold):
    assert with_compilers_for(SHIPPED, batches, threshold) == SHIPPED
    assert not runs_optimising(SHIPPED)


def test_from_the_threshold_on_the_quick_compiler_flag_goes_and_the_parallel_collector_comes():
    options = with_compilers_for(SHIPPED, 10, 10)

    assert options == f"-XX:ReservedCodeCacheSize=240m {PARALLEL_GC}"
    assert runs_optimising(options)


def test_a_collector_the_options_name_is_kept():
    assert with_compilers_for(f"{SHIPPED} -XX:+UseG1GC", 10, 10) == "-XX:ReservedCodeCacheSize=240m -XX:+UseG1GC"


def test_a_run_counts_the_bytes_of_its_local_segments_and_dumps(tmp_path):
    partition = tmp_path / "broker-0" / "orders-0"
    partition.mkdir(parents=True)
    (partition / "00000000000000000000.log").write_bytes(b"x" * 30 * BATCH_BYTES)
    (partition / "00000000000000000000.index").write_bytes(b"x" * 1000 * BATCH_BYTES)  # not a segment
    (partition / "00000000000000000000.snapshot").write_bytes(b"x" * 1000 * BATCH_BYTES)
    dump = tmp_path / "orders-1.txt"
    dump.write_bytes(b"x" * 12 * BATCH_BYTES)

    assert expected_batches("run", [str(tmp_path / "broker-0"), str(dump)], str(tmp_path / "wh")) == 42
    assert expected_batches("run", ["s3://bucket/logs", str(dump)], str(tmp_path / "wh")) == 12  # not listed twice
    assert expected_batches("ingest", [str(dump)], str(tmp_path / "wh")) is None  # audits nothing


def test_an_audit_counts_the_rows_of_batches_in_the_delta_log(tmp_path):
    write_deltalake(str(tmp_path / "batches"), pa.table({"topic": ["orders"] * 7}))

    assert expected_batches("audit", [], str(tmp_path)) == 7
    assert expected_batches("audit", [], str(tmp_path / "elsewhere")) is None
