"""Spark audit throughput: `run_audit` over a generated `batches` table, outputs written to the noop sink.

    python benchmarks/audit_bench.py [--rows 200000] [--partitions 64] [--producers 200] [--repeats 2]

The table is generated in Spark and stored as Parquet first, so the timed runs read it like the pipeline reads
its bronze table. Every partition is written by `--producers` producers taking turns, one record per batch,
with consecutive sequences; every tenth producer is transactional and follows each of its data batches with a
COMMIT marker. The Spark session is built from conf/local.yaml like the CLI builds it (local[*]). The first
run includes JVM warm-up and code generation, so the rate is the median of the later runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.audit.engine import run_audit
from pipeline.config import AuditSettings, load_settings
from pipeline.session import build_session
from schemas.batches import BATCHES, STATUS_OK

T0 = 1_767_225_600_000
TRANSACTIONAL_EVERY = 10  # one producer in this many is transactional


def generate_batches(spark: SparkSession, rows: int, partitions: int, producers: int) -> DataFrame:
    """`rows` batch rows spread evenly over `partitions`, as `BATCHES` columns."""
    offset = F.floor(F.col("id") / partitions)  # position of the row in its partition's log
    producer = offset % producers
    turn = F.floor(offset / producers)  # how many batches this producer wrote to the partition before
    transactional = producer % TRANSACTIONAL_EVERY == 0
    marker = transactional & (turn % 2 == 1)
    sequence = F.when(marker, F.lit(-1)).when(transactional, F.floor(turn / 2)).otherwise(turn)
    columns = {
        "topic": F.lit("bench"),
        "partition": F.col("id") % partitions,
        "producer_id": 1000 + producer,
        "base_offset": offset,
        "last_offset": offset,
        "producer_epoch": F.lit(0),
        "base_sequence": sequence,
        "last_sequence": sequence,
        "is_transactional": transactional,
        "is_control": marker,
        "control_type": F.when(marker, F.lit(1)),
        "coordinator_epoch": F.when(marker, F.lit(0)),
        "record_count": F.lit(1),
        "base_timestamp": T0 + offset * 10,
        "max_timestamp": T0 + offset * 10,
        "partition_leader_epoch": F.lit(0),
        "magic": F.lit(2),
        "attributes": F.when(marker, F.lit(0x30)).when(transactional, F.lit(0x10)).otherwise(F.lit(0)),
        "compression": F.lit(0),
        "timestamp_type": F.lit(0),
        "has_delete_horizon": F.lit(False),
        "last_offset_delta": F.lit(0),
        "batch_length": F.when(marker, F.lit(66)).otherwise(F.lit(88)),
        "crc": F.lit(0),
        "crc_valid": F.lit(True),
        "entry_status": F.lit(STATUS_OK),
        "entry_note": F.lit(None),
        "segment_base_offset": F.lit(0),
        "position": offset * 100,
        "size_bytes": F.when(marker, F.lit(78)).otherwise(F.lit(100)),
        "source_file": F.format_string("bench-%d/00000000000000000000.log", F.col("id") % partitions),
        "source_format": F.lit("segment"),
        "broker_id": F.lit(0),
    }
    return spark.range(rows).select(
        *[columns[field.name].cast(field.dataType).alias(field.name) for field in BATCHES.fields]
    )


def audit_once(batches: DataFrame, settings: AuditSettings) -> dict[str, float]:
    """Seconds to write each output of one audit to the noop sink, in the order the runner writes them."""
    result = run_audit(batches, settings, "bench", reference_time_ms=T0 + 86_400_000)
    seconds = {}
    for name in ("findings", "transactions", "producer_state", "partition_summary"):
        started = time.perf_counter()
        getattr(result, name).write.format("noop").mode("overwrite").save()
        seconds[name] = time.perf_counter() - started
    result.release()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--producers", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    settings = load_settings(overrides={"spark": {"conf": {"spark.driver.memory": "2g"}}})
    spark = build_session(settings)
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"Spark {spark.version}, master {spark.sparkContext.master}, load average {load}")
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        generate_batches(spark, args.rows, args.partitions, args.producers).write.parquet(directory, mode="overwrite")
        print(f"generated {args.rows:,} rows in {time.perf_counter() - started:.1f}s")
        batches = spark.read.parquet(directory)
        totals = []
        for run in range(1, args.repeats + 1):
            seconds = audit_once(batches, settings.audit)
            total = sum(seconds.values())
            totals.append(total)
            parts = ", ".join(f"{name} {value:.1f}s" for name, value in seconds.items())
            print(f"run {run}: {total:.1f}s ({args.rows / total:,.0f} rows/s): {parts}")
    warm = statistics.median(totals[1:]) if len(totals) > 1 else totals[0]
    cores = spark.sparkContext.defaultParallelism
    print(
        f"median of warm runs: {warm:.1f}s, {args.rows / warm:,.0f} rows/s, {args.rows / warm / cores:,.0f} rows/s/core"
    )
    spark.stop()


if __name__ == "__main__":
    main()
