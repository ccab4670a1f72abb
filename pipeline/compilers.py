"""The driver JVM's compilers, chosen by the size of the run before the JVM starts.

The shipped options keep the JVM to its quick compiler (C1, `-XX:TieredStopAtLevel=1`): on a small or mid-sized
log an audit is many short plans, and the optimising compiler's (C2) background compiling competes with them for
the cores. On a large log the same generated code runs over many more rows and C2's faster code pays for its
compiling: 1 M batches took 94 s with C1 and 124 s with C2, 10 M took 384 s and 320 s (BENCHMARKS.md, "The JVM's
compilers by size"), about 4 M batches where the two meet. From `spark.optimising_compiler_batches` batches on
(0: never), a JVM this process starts runs with both compilers. A JVM that is already running (spark-submit,
a notebook's) keeps the options it was started with.

How many batches a command will audit is known before the JVM starts only roughly: for `audit`, the rows of the
warehouse's `batches` in its Delta log; for `run`, the bytes of the local inputs' segments and dump files at
`BATCH_BYTES` each, the size of a batch of a few small records, so a log of large batches is taken for more
batches than it holds. Inputs elsewhere (s3://...) are not listed twice and count for none.

The same size also chooses the garbage collector: such a run keeps both cores busy for minutes, and the parallel
collector costs far less CPU than the JVM's default (G1), whose concurrent marking and write barriers it spends
beside the work. At 10 M batches: GC threads about 33 to 11 CPU-s, task threads 166 to 150, the run about 6 %
faster (BENCHMARKS.md, "Plain numbers and the parallel collector"). Its longer pauses do not matter to a batch
job. Options that already name a collector keep it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from pipeline.sources.input_plan import DUMP_SUFFIXES
from pipeline.sources.log_dir_names import SEGMENT_FILE
from pipeline.tables.files import is_uri
from pipeline.tables.stats import logged_row_count

log = logging.getLogger(__name__)

QUICK_ONLY = "-XX:TieredStopAtLevel=1"
PARALLEL_GC = "-XX:+UseParallelGC"
BATCH_BYTES = 200


def expected_batches(command: str, inputs: Iterable[str], warehouse: str) -> int | None:
    """About how many batches `command` audits; None when it audits none or the size cannot be known here."""
    if command == "audit":
        return None if is_uri(warehouse) else logged_row_count(f"{warehouse}/batches")
    if command == "run":
        return sum(_log_bytes(Path(path)) for path in inputs if not is_uri(path)) // BATCH_BYTES
    return None


def with_compilers_for(java_options: str, batches: int | None, threshold: int) -> str:
    """`java_options` without the quick-compiler-only flag, and with the parallel collector unless they name one,
    when `batches` reaches `threshold` (0: never)."""
    if batches is None or threshold <= 0 or batches < threshold or QUICK_ONLY not in java_options.split():
        return java_options
    log.debug(
        "about %s batches to audit (from %s on): the JVM runs its optimising compiler too, and the parallel collector",
        f"{batches:,}",
        f"{threshold:,}",
    )
    options = [option for option in java_options.split() if option != QUICK_ONLY]
    if not any(option.startswith("-XX:+Use") and option.endswith("GC") for option in options):
        options.append(PARALLEL_GC)
    return " ".join(options)


def runs_optimising(java_options: str) -> bool:
    """Whether a JVM started with `java_options` uses its optimising compiler."""
    return QUICK_ONLY not in java_options.split()


def _log_bytes(path: Path) -> int:
    """Bytes of the segment and dump files at or under `path`."""
    if path.is_file():
        return path.stat().st_size if _is_log(path.name) else 0
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            if _is_log(name):
                try:
                    total += (Path(folder) / name).stat().st_size
                except OSError:  # removed while listed: the ingest will say so
                    continue
    return total


def _is_log(name: str) -> bool:
    return bool(SEGMENT_FILE.fullmatch(name)) or Path(name).suffix.lower() in DUMP_SUFFIXES
