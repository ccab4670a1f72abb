"""Spark ingest of one large segment: one task for the whole file versus byte ranges of `segment_split_bytes`.

    python benchmarks/split_bench.py [--batches 4000000] [--split-mib 32] [--repeats 3]

Writes one segment of small batches (the decode benchmark's generator) and reads it with `read_segments`
twice per repeat: with `segment_split_bytes` at the file size, so one task decodes it all, and at
`--split-mib`, so its byte ranges are decoded in parallel. Output goes to the noop sink; times are wall
seconds, medians of the repeats after a warm-up read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from decode_bench import build_segment

from pipeline.config import load_settings
from pipeline.session import build_session
from pipeline.sources.kafka_format.encoding import segment_file_name
from pipeline.sources.segments import read_segments


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=4_000_000)
    parser.add_argument("--split-mib", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    spark = build_session(load_settings())
    with tempfile.TemporaryDirectory() as directory:
        log_file = Path(directory) / "bench-0" / segment_file_name(0)
        log_file.parent.mkdir()
        log_file.write_bytes(build_segment(args.batches))
        size = log_file.stat().st_size
        load = " ".join(f"{value:.2f}" for value in os.getloadavg())
        print(f"{spark.sparkContext.defaultParallelism} cores, load average {load}")
        print(f"segment: {args.batches:,} batches, {size / 2**20:.0f} MiB")

        def read(split_bytes: int) -> float:
            settings = load_settings(overrides={"ingest": {"segment_split_bytes": split_bytes}})
            started = time.perf_counter()
            read_segments(spark, [directory], settings).write.format("noop").mode("overwrite").save()
            return time.perf_counter() - started

        read(size)
        one_task, ranges = [], []
        for _ in range(args.repeats):
            one_task.append(read(size))
            ranges.append(read(args.split_mib * 2**20))
    pieces = -(-size // (args.split_mib * 2**20))
    whole, split = statistics.median(one_task), statistics.median(ranges)
    print(f"one task:                  {whole:6.1f}s  {args.batches / whole:12,.0f} batches/s")
    print(f"{pieces} ranges of {args.split_mib} MiB:      {split:6.1f}s  {args.batches / split:12,.0f} batches/s")
    print(f"speed-up: {whole / split:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
