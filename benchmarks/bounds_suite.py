"""Resource bounds, measured: inputs at the sizes that break naive readers, audited with the shipped defaults.

    python benchmarks/bounds_suite.py [--inputs large-segment,many-producers,huge-claims,many-partitions]
                                      [--segment-bytes 2147483647] [--producers 1000000]
                                      [--partitions 10000] [--timeout 3600] [--work DIR]

Each input is built in a temporary directory (`benchmarks/bounds_inputs.py`, the project's encoder), then
audited by the installed `produce-audit run` on an empty warehouse, with `conf/local.yaml` as shipped
(local[*], 1 GiB driver):

- large-segment: one partition, one segment of `--segment-bytes` (Kafka's largest, 2 GiB - 1, by default) of
  8-record batches from 200 idempotent producers;
- many-producers: one partition with one batch of each of `--producers` distinct producer ids;
- huge-claims: two small partitions in which a batch length field claims about 2 GiB (the last batch of one,
  the first of the other);
- many-partitions: `--partitions` partition dirs of 3 batches each in one log dir.

For each: the exit code (0 or 1 is a pass; 2 or 3 a failure, and so is a run killed at `--timeout`), wall time,
the peak memory of the whole process tree (the CLI, the driver JVM and its Python workers, sampled from /proc
every 0.5 s as proportional set size) and the peak resident memory of the JVM and of the largest Python worker,
any `OutOfMemoryError` or "large task binary"
warning in the output, and the batch and finding counts the run recorded. Rewrites the bounds section of
RELIABILITY.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import bounds_inputs
from deltalake import DeltaTable

REPO = Path(__file__).resolve().parent.parent
RELIABILITY_MD = REPO / "RELIABILITY.md"
CLI = Path(sys.executable).parent / "produce-audit"
START, END = "<!-- bounds-suite:start -->", "<!-- bounds-suite:end -->"
OUT_OF_MEMORY = "OutOfMemoryError"
LARGE_TASK_BINARY = "large task binary"
SEVERITIES = ("INFO", "WARN", "ERROR", "CRITICAL")
SAMPLE_SECONDS = 0.5


class Process(NamedTuple):
    parent: int
    name: str
    rss_kib: int
    pss_kib: int  # resident, with pages shared between processes (the forked Python workers) split among them


@dataclass
class Peaks:
    """Largest KiB seen: all processes together (proportional set size, so shared pages count once), and the
    resident memory of the driver JVM and of the largest Python worker."""

    tree: int = 0
    jvm: int = 0
    worker: int = 0

    def add(self, processes: dict[int, Process]) -> None:
        jvms = {pid for pid, process in processes.items() if process.name == "java"}
        self.tree = max(self.tree, sum(process.pss_kib for process in processes.values()))
        self.jvm = max([self.jvm, *(processes[pid].rss_kib for pid in jvms)])
        parents = {pid: process.parent for pid, process in processes.items()}
        self.worker = max([self.worker, *(processes[pid].rss_kib for pid in _below(parents, jvms))])


def _below(parents: dict[int, int], roots: set[int]) -> set[int]:
    """Every process under `roots` (for the JVM: pyspark's daemon and the Python workers it forks)."""
    found: set[int] = set()
    frontier = set(roots)
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def process_tree(root: int) -> dict[int, Process]:
    """`root` and every process below it, from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
    tree: dict[int, Process] = {}
    for pid in {root} | _below(parents, {root}):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        name = re.search(r"^Name:\s+(.*)$", status, re.MULTILINE)
        rss = re.search(r"^VmRSS:\s+(\d+)", status, re.MULTILINE)
        pss = re.search(r"^Pss:\s+(\d+)", rollup, re.MULTILINE)
        tree[pid] = Process(parents[pid], name[1], int(rss[1]) if rss else 0, int(pss[1]) if pss else 0)
    return tree


@dataclass
class Outcome:
    name: str
    description: str
    input_bytes: int
    build_seconds: float
    exit_code: int | None  # None: killed at the timeout
    wall: float
    peaks: Peaks
    out_of_memory: int
    large_binaries: int
    counts: dict[str, int] = field(default_factory=dict)
    error_tail: str = ""

    @property
    def passed(self) -> bool:
        return self.exit_code in (0, 1) and not self.out_of_memory


def run_measured(argv: list[str], timeout: float) -> tuple[int | None, float, Peaks, str]:
    """Run `argv` in its own process group; exit code (None if killed at `timeout`), wall, peaks, stderr."""
    peaks = Peaks()
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        while process.poll() is None:
            peaks.add(process_tree(process.pid))
            if time.perf_counter() - started > timeout:
                os.killpg(process.pid, 9)
                process.wait()
                break
            time.sleep(SAMPLE_SECONDS)
        wall = time.perf_counter() - started
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    exit_code = None if wall > timeout else process.returncode
    return exit_code, wall, peaks, stderr


def recorded_counts(warehouse: Path) -> dict[str, int]:
    """The counts of the last run recorded in the warehouse's `runs` table (empty when there is none)."""
    if not (warehouse / "runs" / "_delta_log").is_dir():
        return {}
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    return dict(max(runs, key=lambda run: run["finished_at"])["counts"] or {})


def input_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


@dataclass(frozen=True)
class BoundsInput:
    name: str
    description: str
    build: Callable[[Path], object]


def bounds_inputs_of(args: argparse.Namespace) -> list[BoundsInput]:
    return [
        BoundsInput(
            "large-segment",
            f"one segment of {args.segment_bytes:,} bytes, 8-record batches of 200 producers",
            lambda root: bounds_inputs.large_segment(root, args.segment_bytes),
        ),
        BoundsInput(
            "many-producers",
            f"one partition, {args.producers:,} distinct producer ids",
            lambda root: bounds_inputs.many_producers(root, args.producers),
        ),
        BoundsInput(
            "huge-claims",
            "2 partitions of 1,000 batches; the last / first batch length field claims ~2 GiB",
            bounds_inputs.huge_claims,
        ),
        BoundsInput(
            "many-partitions",
            f"{args.partitions:,} partition dirs of 3 batches in one log dir",
            lambda root: bounds_inputs.many_partitions(root, args.partitions),
        ),
    ]


def measure(bounds_input: BoundsInput, work: Path, timeout: float) -> Outcome:
    root, warehouse = work / bounds_input.name, work / f"wh-{bounds_input.name}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(warehouse, ignore_errors=True)
    started = time.perf_counter()
    bounds_input.build(root)
    build_seconds = time.perf_counter() - started
    size = input_bytes(root)
    print(f"{bounds_input.name}: built {size:,} bytes in {build_seconds:.0f} s; load {load()}", flush=True)
    argv = [str(CLI), "run", "--input", str(root), "--warehouse", str(warehouse)]
    exit_code, wall, peaks, stderr = run_measured(argv, timeout)
    outcome = Outcome(
        bounds_input.name,
        bounds_input.description,
        size,
        build_seconds,
        exit_code,
        wall,
        peaks,
        stderr.count(OUT_OF_MEMORY),
        stderr.count(LARGE_TASK_BINARY),
        recorded_counts(warehouse),
    )
    if not outcome.passed:
        outcome.error_tail = "\n".join(stderr.strip().splitlines()[-15:])
    print(
        f"{bounds_input.name}: exit {exit_code}, {wall:.0f} s, tree {peaks.tree / 1024:.0f} MiB, "
        f"JVM {peaks.jvm / 1024:.0f} MiB, worker {peaks.worker / 1024:.0f} MiB; load {load()}",
        flush=True,
    )
    if outcome.error_tail:
        print(outcome.error_tail, flush=True)
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(warehouse, ignore_errors=True)
    return outcome


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def machine() -> str:
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {memory_gib:.0f} GiB"


def _mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def _size(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB" if size >= 2**20 else f"{size / 1024:,.0f} KiB"


def render(outcomes: list[Outcome], command: str, load_before: str, load_after: str, minutes: float) -> str:
    lines = [
        "## Bounds suite (`benchmarks/bounds_suite.py`)",
        "",
        f"Machine: {machine()}, shared with other work. Measured {time.strftime('%Y-%m-%d')}; load average "
        f"(1/5/15 min) {load_before} at the start, {load_after} at the end. Command: `{command}`. Each input is "
        "audited by `produce-audit run` on an empty warehouse with the shipped `conf/local.yaml` (local[*], 1 GiB "
        "driver). Memory is sampled every 0.5 s: the peak of all processes (CLI, driver JVM, Python workers) "
        "together, as proportional set size (pages shared by forked workers counted once), and the peak resident "
        "memory of the JVM and of the largest Python worker.",
        "",
        "| input | what | input size | exit | wall | peak, all processes | peak JVM | peak Python worker "
        "| OOM / large task binary | batches | findings INFO/WARN/ERROR/CRITICAL |",
        "|---|---|---:|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for outcome in outcomes:
        findings = "/".join(str(outcome.counts.get(f"findings.{severity}", "-")) for severity in SEVERITIES)
        exit_code = "killed at timeout" if outcome.exit_code is None else str(outcome.exit_code)
        lines.append(
            f"| {outcome.name} | {outcome.description} | {_size(outcome.input_bytes)} | {exit_code} "
            f"| {outcome.wall:.0f} s | {_mib(outcome.peaks.tree)} | {_mib(outcome.peaks.jvm)} "
            f"| {_mib(outcome.peaks.worker)} | {outcome.out_of_memory} / {outcome.large_binaries} "
            f"| {outcome.counts.get('batches', '-')} | {findings} |"
        )
    failed = [outcome for outcome in outcomes if not outcome.passed]
    lines += [
        "",
        f"{len(outcomes) - len(failed)} of {len(outcomes)} inputs within bounds. The suite took {minutes:.0f} minutes.",
    ]
    for outcome in failed:
        lines += ["", f"`{outcome.name}` failed; the end of its output:", "", "```", outcome.error_tail, "```"]
    return "\n".join(lines)


def write_section(text: str) -> None:
    """Replace the text between the bounds markers of RELIABILITY.md, adding them at the end if missing."""
    current = RELIABILITY_MD.read_text()
    if START not in current:
        current = current.rstrip("\n") + f"\n\n{START}\n{END}\n"
    before, rest = current.split(START, 1)
    after = rest.split(END, 1)[1]
    RELIABILITY_MD.write_text(f"{before}{START}\n{text}\n{END}{after}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", default="large-segment,many-producers,huge-claims,many-partitions")
    parser.add_argument("--segment-bytes", type=int, default=2**31 - 1)
    parser.add_argument("--producers", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds before a run counts as hung")
    parser.add_argument("--work", type=Path, help="where inputs and warehouses go (default: a temp dir)")
    args = parser.parse_args()
    wanted = args.inputs.split(",")
    chosen = [bounds_input for bounds_input in bounds_inputs_of(args) if bounds_input.name in wanted]
    command = "python benchmarks/bounds_suite.py " + " ".join(sys.argv[1:])
    load_before, started = load(), time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        outcomes = [measure(bounds_input, Path(work), args.timeout) for bounds_input in chosen]
    minutes = (time.perf_counter() - started) / 60
    write_section(render(outcomes, command.strip(), load_before, load(), minutes))
    sys.exit(0 if all(outcome.passed for outcome in outcomes) else 1)


if __name__ == "__main__":
    main()
