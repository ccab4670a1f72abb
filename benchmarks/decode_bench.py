"""Header decode throughput on a segment of small batches: plain read, this decoder, kafka-python's reader.

    python benchmarks/decode_bench.py [--batches 500000] [--repeats 5] [--values random|text] [--value-bytes 48]
                                      [--profile]

Writes a segment of small v2 batches (1-3 records of 8 to `--value-bytes` bytes, 200 producers, some
transactional, 3% commit or abort markers) to a temporary directory, then times each reader over the same bytes
with the page cache warm. Record values are random bytes (like compressed or binary data, where header
look-alikes are common) or short text. Header decode is `verify_records=False` (header fields and CRC-32C);
one more row shows the default, which also walks every record. Rates are batches per second of CPU time of this
single-threaded process (so per core) and of wall time; the median of the repeats is reported.

The decoder's numba kernels compile on first use in each Python process (each Spark Python worker): that one-off
cost is measured in fresh processes and reported on its own; the rates are steady state, after a warm-up call.
`--profile` adds where `decode_segment` spends its time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from kafka.record.memory_records import MemoryRecords

from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker
from pipeline.sources.kafka_format.windows import decode_segment, iter_decoded

DISTINCT_BATCHES = 4096
PRODUCERS = 200


def build_segment(batches: int, text_values: bool = False, value_bytes: int = 48, seed: int = 1) -> bytes:
    """`batches` batches at consecutive offsets, tiled from a pool of distinct ones.

    Encoding every batch in Python would take longer than the benchmark, so a pool is encoded once and repeated,
    with each copy's base offset rewritten; the CRC does not cover the base offset, so every CRC stays valid.
    """
    rng = random.Random(seed)
    pool: list[bytes] = []
    counts: list[int] = []
    sequences = [0] * PRODUCERS
    for _ in range(DISTINCT_BATCHES):
        producer = rng.randrange(PRODUCERS)
        if rng.random() < 0.03:
            pool.append(encode_marker(0, 1000 + producer, 0, rng.random() < 0.9, 5, 1_767_225_600_000))
            counts.append(1)
            continue
        lengths = [rng.randint(8, value_bytes) for _ in range(rng.randint(1, 3))]
        if text_values:
            values = [f"order-{rng.randrange(10**9):09d}-{'x' * length}"[:length].encode() for length in lengths]
        else:
            values = [rng.randbytes(length) for length in lengths]
        pool.append(
            encode_batch(0, values, 1000 + producer, 0, sequences[producer], is_transactional=rng.random() < 0.2)
        )
        counts.append(len(values))
        sequences[producer] += len(values)
    order = np.resize(np.arange(DISTINCT_BATCHES), batches)
    sizes = np.array([len(batch) for batch in pool])[order]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    base_offsets = np.concatenate([[0], np.cumsum(np.array(counts)[order])[:-1]])
    data = np.frombuffer(b"".join(pool[index] for index in order.tolist()), dtype=np.uint8).copy()
    offset_bytes = base_offsets.astype(">i8").view(np.uint8).reshape(-1, 8)
    np.lib.stride_tricks.sliding_window_view(data, 8, writeable=True)[starts] = offset_bytes
    return data.tobytes()


def measure(function: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median CPU seconds and median wall seconds of `repeats` calls."""
    cpu, wall = [], []
    for _ in range(repeats):
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        function()
        cpu.append(time.process_time() - cpu_start)
        wall.append(time.perf_counter() - wall_start)
    return statistics.median(cpu), statistics.median(wall)


_FIRST_USE = """
import struct, sys, time
started = time.process_time()
from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker
from pipeline.sources.kafka_format.windows import decode_segment
imported = time.process_time()
legacy = struct.pack(">qiIbbii", 0, 14, 0, 0, 0, -1, -1)  # magic 0, null key and value: the legacy path
segment = legacy + encode_batch(1, 2, 7, 0, 0) * 3 + encode_marker(3, 7, 0, True, 1, 0)
decode_segment(segment, verify_records=sys.argv[1] == "records")
first = time.process_time()
decode_segment(segment, verify_records=sys.argv[1] == "records")
print(imported - started, first - imported - (time.process_time() - first))
"""


def first_use_seconds(what: str, repeats: int) -> tuple[float, float]:
    """Median CPU seconds of a fresh process to import the decoder, and to compile the kernels `what` needs.

    The compile time is the first decode of a tiny segment that reaches every kernel (legacy message, batches,
    marker) minus the second one.
    """
    runs = [
        subprocess.run([sys.executable, "-c", _FIRST_USE, what], capture_output=True, text=True, check=True).stdout
        for _ in range(repeats)
    ]
    imported, compiled = zip(*(map(float, run.split()) for run in runs), strict=True)
    return statistics.median(imported), statistics.median(compiled)


def plain_read(path: Path, buffer: bytearray) -> None:
    with open(path, "rb", buffering=0) as file:
        file.readinto(buffer)


def stream_decode(path: Path, size: int) -> int:
    with open(path, "rb", buffering=0) as file:
        return sum(table.num_rows for table in iter_decoded(file.read, size, verify_records=False))


def kafka_python_headers(data: bytes, validate_crc: bool) -> int:
    """Iterate kafka-python's batches and read the header fields the decoder outputs; returns the batch count."""
    records = MemoryRecords(data)
    batches = 0
    while (batch := records.next_batch()) is not None:
        _ = (
            batch.base_offset,
            batch.last_offset,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            batch.last_sequence,
            batch.is_transactional,
            batch.is_control_batch,
            batch.records_count,
            batch.first_timestamp,
            batch.max_timestamp,
            batch.leader_epoch,
            batch.attributes,
            batch.crc,
        )
        if validate_crc and not batch.validate_crc():
            raise ValueError(f"kafka-python finds a bad CRC at offset {batch.base_offset}")
        batches += 1
    return batches


def machine() -> str:
    """CPU count and model, memory, Python version and load average (Linux)."""
    info = dict(
        map(str.strip, line.split(":", 1))
        for path in ("/proc/cpuinfo", "/proc/meminfo")
        for line in Path(path).read_text().splitlines()
        if ":" in line
    )
    memory_gib = int(info["MemTotal"].split()[0]) / 2**20
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"{os.cpu_count()} CPUs ({info['model name']}), {memory_gib:.0f} GiB RAM, "
        f"Python {platform.python_version()}, load average {load}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--values", choices=["random", "text"], default="random", help="record values")
    parser.add_argument("--value-bytes", type=int, default=48, help="largest record value")
    parser.add_argument("--profile", action="store_true", help="print where decode_segment spends its time")
    args = parser.parse_args()

    import_seconds, compile_seconds = first_use_seconds("headers", 3)
    _, records_compile_seconds = first_use_seconds("records", 3)
    data = build_segment(args.batches, text_values=args.values == "text", value_bytes=args.value_bytes)
    assert decode_segment(data).column("crc_valid").to_pylist() == [True] * args.batches
    assert kafka_python_headers(data, validate_crc=True) == args.batches
    print(machine())
    print(
        f"segment: {args.batches} batches, {len(data) / 1e6:.1f} MB, {len(data) / args.batches:.0f} bytes per batch,"
        f" {args.values} values"
    )
    print(
        f"once per Python process (CPU, median of 3 fresh processes): import {import_seconds:.2f} s, kernel"
        f" compilation {compile_seconds:.2f} s for header decode, {records_compile_seconds:.2f} s with records"
    )

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "00000000000000000000.log"
        path.write_bytes(data)
        buffer = bytearray(len(data))
        slow_repeats = max(1, args.repeats // 2)
        results = {
            "plain read (readinto, page cache)": measure(lambda: plain_read(path, buffer), args.repeats),
            "decode_segment (in memory, CRC on)": measure(
                lambda: decode_segment(data, verify_records=False), args.repeats
            ),
            "iter_decoded (read + decode, CRC on)": measure(lambda: stream_decode(path, len(data)), args.repeats),
            "decode_segment, records verified too": measure(lambda: decode_segment(data), args.repeats),
            "kafka-python, header fields": measure(lambda: kafka_python_headers(data, False), slow_repeats),
            "kafka-python, header fields + CRC": measure(lambda: kafka_python_headers(data, True), slow_repeats),
        }

    decode_cpu = results["decode_segment (in memory, CRC on)"][0]
    print(f"\n{'reader':40s} {'batches/s (CPU)':>16s} {'batches/s (wall)':>17s} {'MB/s (CPU)':>11s} {'CPU time':>9s}")
    for name, (cpu, wall) in results.items():
        print(
            f"{name:40s} {args.batches / cpu:16,.0f} {args.batches / wall:17,.0f} {len(data) / cpu / 1e6:11,.0f}"
            f" {cpu / decode_cpu:8.2f}x"
        )
    print("(CPU time: relative to decode_segment)")

    read_cpu = results["plain read (readinto, page cache)"][0]
    kafka_cpu = results["kafka-python, header fields + CRC"][0]
    kafka_headers_cpu = results["kafka-python, header fields"][0]
    print("\ntargets, in CPU time:")
    for target, value, met in (
        (
            "decode >= 2,000,000 batches/s per core, CRC on",
            f"{args.batches / decode_cpu:,.0f}",
            decode_cpu * 2e6 <= args.batches,
        ),
        (
            "decode >= 20x kafka-python (header fields + CRC)",
            f"{kafka_cpu / decode_cpu:.1f}x",
            kafka_cpu >= 20 * decode_cpu,
        ),
        ("  (against kafka-python's header fields alone)", f"{kafka_headers_cpu / decode_cpu:.1f}x", None),
        ("decode within 2x of the plain read", f"{decode_cpu / read_cpu:.1f}x the read", decode_cpu <= 2 * read_cpu),
    ):
        print(f"  {target:52s} {value:>16s}  {'' if met is None else 'met' if met else 'MISSED'}")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(decode_segment, data, verify_records=False)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
