"""Resource bounds of the replay, scaled down from benchmarks/bounds_suite.py: a partition of many producers, or of
a single one, is replayed without the Python worker copying the partition's rows. The replay's input comes from
Spark; the replay task itself runs in a process of its own, whose memory is measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.audit.replay.plan import replay_input
from pipeline.config import AuditSettings, IngestSettings, Settings
from pipeline.sources.dispatch import read_inputs
from pipeline.sources.input_plan import plan_inputs
from tests import benchmark_modules

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20

bounds_inputs = benchmark_modules.load("bounds_inputs")


REPLAY_MEMORY = """
import sys
import threading
import time
import pyarrow as pa
from pipeline.audit.replay import task_rows
from pipeline.audit.replay.task import replay_rows
from pyspark.sql.pandas.types import to_arrow_schema
from schemas.replay import FILE_ORDER_COLUMNS, PRODUCER_STATE_COLUMNS

task_rows.HELD_ROWS = 10_000
STATE = [*to_arrow_schema(FILE_ORDER_COLUMNS), *to_arrow_schema(PRODUCER_STATE_COLUMNS)]

def anonymous_kib():
    return int(next(line for line in open("/proc/self/status") if line.startswith("RssAnon")).split()[1])

def batches(path):
    with pa.OSFile(path) as source:
        yield from pa.ipc.open_stream(source)

def replay(rows):
    schema = pa.schema([*pa.ipc.open_stream(rows).schema, *STATE])
    out = replay_rows(batches(rows), expiration_ms=86_400_000, version_mode=0, schema=schema)
    return sum(batch.num_rows for batch in out)

replay(sys.argv[2])  # the kernels load
before = peak = anonymous_kib()
done = threading.Event()

def sample():
    global peak
    while not done.wait(0.002):
        peak = max(peak, anonymous_kib())

sampler = threading.Thread(target=sample)
sampler.start()
rows = replay(sys.argv[1])
done.set()
sampler.join()
print(rows, (max(peak, anonymous_kib()) - before) * 1024)
"""


def _replay_stream(spark, root: Path, folder: Path) -> tuple[Path, int, int]:
    """The replay's input for `root` in no order (as an exchange leaves it), as an Arrow stream file of record
    batches of 10,000 rows; and the rows' count and their bytes."""
    batches = read_inputs(spark, plan_inputs(spark, [str(root)], IngestSettings()), Settings())
    rows = replay_input(batches, AuditSettings()).toArrow()
    rows = rows.take(np.random.default_rng(1).permutation(rows.num_rows))
    path = folder / "rows.arrows"
    with pa.ipc.new_stream(path, rows.schema) as writer:
        writer.write_table(rows, max_chunksize=10_000)
    return path, rows.num_rows, rows.nbytes


def _grown(stream: Path, warm_up: Path) -> tuple[int, int]:
    """The rows a replay task returned for `stream`, and how much its anonymous memory grew at most."""
    measured = subprocess.run(
        [sys.executable, "-c", REPLAY_MEMORY, str(stream), str(warm_up)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    replayed, grown = map(int, measured.stdout.split())
    return replayed, grown


def test_the_replay_holds_sort_positions_not_rows(spark, tmp_path):
    """A replay task keeps the rows it receives in a local file past HELD_ROWS, mapped, and takes them a chunk at
    a time in each order; the producer walk holds at most HELD_ROWS of one producer. Per row it holds its sort
    positions and file-order columns: from 100,000 to 300,000 rows, of 100,000 producers or of a single one, its
    memory grows by less than a third of what the rows take (the mapped file's pages are the page cache's)."""
    warm_up = _replay_stream(spark, _input(tmp_path / "small", bounds_inputs.many_producers, 2_000), tmp_path)[0]
    cases = {
        "many producers": (bounds_inputs.many_producers, 100_000, 300_000),
        "one producer": (
            lambda root, size: bounds_inputs.large_segment(root, size, producers=1),
            36 * MIB,
            108 * MIB,
        ),
    }
    for name, (write, small, large) in cases.items():
        measured = []
        for size in (small, large):
            folder = tmp_path / f"{name.replace(' ', '-')}-{size}"
            stream, rows, input_bytes = _replay_stream(spark, _input(folder / "root", write, size), folder)
            replayed, grown = _grown(stream, warm_up)
            assert replayed == rows >= 100_000, name
            measured.append((rows, input_bytes, grown))
        (rows_a, bytes_a, grown_a), (rows_b, bytes_b, grown_b) = measured
        print(name, measured)
        assert rows_b > 2 * rows_a, name
        assert grown_b - grown_a < (bytes_b - bytes_a) / 3, (name, measured)


def _input(root: Path, write, size: int) -> Path:
    write(root, size)
    return root
