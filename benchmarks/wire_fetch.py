"""Per-task read rate of a `kafka://` input against the log-dir path, on the same partition of one broker.

    python benchmarks/wire_fetch.py --bootstrap 127.0.0.1:9092 --log-dir /var/lib/kafka/data --topic bench
                                    [--partition 0] [--repeats 5] [--max-fetch-bytes 4194304]

Both readers run in this one process, one after the other, alternating, over the partition's whole log: the
fetch path (`kafka_wire.fetch.fetch_range`: Fetch requests to the leader over loopback, the `records` bytes decoded
by the segment decoder) and the log-dir path (`segments.decode_file` over the partition's `.log` files). Each is a
task's work; rates are batches per second of wall time, min/median/max over the repeats, with the bytes read. The
decoder's kernels are compiled before the first timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from pipeline.config import KafkaSettings
from pipeline.sources.kafka_wire.address import parse_bootstrap
from pipeline.sources.kafka_wire.fetch import PartitionReader, fetch_range
from pipeline.sources.kafka_wire.fetch_plan import plan_fetches
from pipeline.sources.log_roots import SegmentFile
from pipeline.sources.segments import decode_file


def fetched(reader: PartitionReader, ranges: list) -> tuple[int, int]:
    rows = size = 0
    for fetch in ranges:
        for table in fetch_range(reader, fetch, verify_records=True):
            rows += table.num_rows
            size += sum(table["size_bytes"].to_pylist())
    return rows, size


def decoded(segments: list[SegmentFile]) -> tuple[int, int]:
    rows = size = 0
    for segment in segments:
        for batch in decode_file(segment):
            rows += batch.num_rows
            size += sum(batch["size_bytes"].to_pylist())
    return rows, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-fetch-bytes", type=int, default=KafkaSettings().max_fetch_bytes)
    args = parser.parse_args()
    settings = KafkaSettings(topics=[args.topic], max_fetch_bytes=args.max_fetch_bytes, range_bytes=2**62)
    bootstrap = parse_bootstrap(f"kafka://{args.bootstrap}")
    ranges = [r for r in plan_fetches(bootstrap, settings).ranges if r.partition == args.partition]
    folder = args.log_dir / f"{args.topic}-{args.partition}"
    segments = [
        SegmentFile(str(path), args.topic, args.partition, None, int(path.stem), path.stat().st_size)
        for path in sorted(folder.glob("*.log"))
    ]
    reader = PartitionReader(bootstrap.uri, settings)
    readers = {"fetch (loopback)": lambda: fetched(reader, ranges), "log dir": lambda: decoded(segments)}
    for read in readers.values():  # compile the decoder, warm the page cache
        read()
    times: dict[str, list[float]] = {name: [] for name in readers}
    counts = {}
    for _ in range(args.repeats):
        for name, read in readers.items():
            started = time.perf_counter()
            counts[name] = read()
            times[name].append(time.perf_counter() - started)
    reader.close()
    load = os.getloadavg()[0]
    print(
        f"{platform.node()}: {os.cpu_count()} cores, load {load:.2f}; "
        f"{args.topic}-{args.partition}, {args.repeats} repeats"
    )
    print(
        f"{'reader':18} {'batches':>9} {'MB':>7} {'min s':>7} {'median s':>9} {'max s':>7} {'batches/s (median)':>19}"
    )
    for name, seconds in times.items():
        rows, size = counts[name]
        median = statistics.median(seconds)
        print(
            f"{name:18} {rows:>9,} {size / 1e6:>7.1f} {min(seconds):>7.2f} {median:>9.2f} {max(seconds):>7.2f} "
            f"{rows / median:>19,.0f}"
        )
    fetch_median, dir_median = (statistics.median(times[name]) for name in readers)
    print(f"fetch / log dir wall ratio (medians): {fetch_median / dir_median:.2f}")


if __name__ == "__main__":
    main()
