"""Whole-command benchmarks of the audit engine, as users run it; rewrites the engine section of BENCHMARKS.md.

    python benchmarks/engine_suite.py [--sections fixed,realdata,scale,baseline,recall]
                                      [--sizes 1000000,10000000,20000000] [--repeats 3]
                                      [--baseline-sizes 1000000] [--replication-factors 1,3] [--work DIR]

Every figure is a whole process started the way a user starts it: the installed `produce-audit` command with
the shipped defaults (1 GiB driver, local[*]), timed from outside (wall seconds, and the peak resident memory
of the largest process of the run, the Spark driver JVM, sampled from /proc).
Repeated runs are reported as min / median / max; comparisons run A and B alternately and report the
ratios of each pair, so a machine whose speed drifts still gives a fair ratio.

Sections:
  fixed     `run` on the bundled sample: wall time, planning time, plan sizes, large-task-binary warnings
  realdata  `run` on each real broker log dir of ../shared/realdata/broker-segments, then on all at once
  scale     `generate` then `run` at each --sizes, and the baseline once on the same files; with
            --replication-factors, each size at each factor (`generate --replication-factor`: the same batches,
            each partition held by that many brokers), the baseline on factor 1 only
  baseline  the product against benchmarks/baseline_replay.py on the same files, on local[1] and local[2],
            --repeats pairs at each --baseline-sizes
  recall    the findings of the second --sizes run (the scale section's, when it ran) against the ground truth
  skew      `run` at the first --sizes with one producer writing half of one partition (`generate --hot-producer`),
            against the same size without it, and the recall of both
  nightly   the second --sizes root without its newest 1 % of batches (benchmarks/log_append.py) run in full, the 1 %
            appended in place, then `run` again on the same warehouse against a full run over the final root: wall
            times, segment outcomes, and whether the result tables are identical
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = REPO / "BENCHMARKS.md"
REAL_BROKER_DIRS = REPO.parent / "shared" / "realdata" / "broker-segments"
CLI = Path(sys.executable).parent / "produce-audit"
START, END = "<!-- engine-suite:start -->", "<!-- engine-suite:end -->"
SEGMENTS_LINE = re.compile(r"segments: (\d+ new, .*? removed)")
LOG_TIME = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
RUN_PHASES = ("pipeline.cli: run ", "pipeline.ingest: ingest: ", " audit tables written in ")
NIGHTLY_SHARE = 0.01
PLANS_LINE = re.compile(r"audit plans: (\d+) plans, ([\d.]+) s of planning, largest (\d+) nodes, (\d+) KiB serialized")
LARGE_TASK_BINARY = "Broadcasting large task binary"


@dataclass
class Sample:
    wall: float
    peak_rss_mib: float  # the largest process (for a Spark run, the driver JVM)
    exit_code: int
    stderr: str
    peak_tree_mib: float = 0.0  # the command and every process under it (JVM and Python workers) together

    @property
    def plans(self) -> tuple[int, float, int, int] | None:
        found = PLANS_LINE.search(self.stderr)
        if found is None:
            return None
        return int(found[1]), float(found[2]), int(found[3]), int(found[4])

    @property
    def large_binaries(self) -> int:
        return self.stderr.count(LARGE_TASK_BINARY)


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)

    def section(self, title: str, *text: str) -> None:
        self.lines += ["", f"### {title}", "", *text]

    def table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        self.lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        self.lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def _tree_rss_kib(root: int) -> dict[int, int]:
    """Resident KiB of `root` and every process below it, from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    sizes = {}
    for pid in tree:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        found = re.search(r"VmRSS:\s+(\d+) kB", status)
        if found:
            sizes[pid] = int(found[1])
    return sizes


def timed(argv: Sequence[str], env: dict[str, str] | None = None) -> Sample:
    """Run one command to its end; the peak RSS is that of its largest process (the driver JVM for a Spark run),
    sampled from /proc every 0.2 s, since the JVM is not a child the command waits for."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
        peak_kib = peak_tree_kib = 0
        while process.poll() is None:
            sizes = _tree_rss_kib(process.pid).values()
            peak_kib = max([peak_kib, *sizes])
            peak_tree_kib = max(peak_tree_kib, sum(sizes))
            time.sleep(0.2)
        wall = time.perf_counter() - started
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        return Sample(wall, peak_kib / 1024, process.returncode, stderr, peak_tree_kib / 1024)


def spread(values: Sequence[float], unit: str = "", digits: int = 1) -> str:
    """min / median / max."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{low:.{digits}f} / **{mid:.{digits}f}** / {high:.{digits}f}{unit}"


def run_cli(*args: str, conf: Path | None = None) -> list[str]:
    return [str(CLI), *args, *(["--conf", str(conf)] if conf else [])]


def audit_run(inputs: Sequence[Path], warehouse: Path, conf: Path | None = None) -> list[str]:
    args = ["run", "--warehouse", str(warehouse), "--fail-on", "never"]
    for path in inputs:
        args += ["--input", str(path)]
    return run_cli(*args, conf=conf)


def fresh_run(inputs: Sequence[Path], warehouse: Path, conf: Path | None = None) -> Sample:
    """A full run on an empty warehouse."""
    shutil.rmtree(warehouse, ignore_errors=True)
    return finished_run(inputs, warehouse, conf)


def finished_run(inputs: Sequence[Path], warehouse: Path, conf: Path | None = None) -> Sample:
    """A run on the warehouse as it is, logging at DEBUG for its `audit plans` line; a run that did not get to an
    answer ends the suite."""
    sample = timed(audit_run(inputs, warehouse, conf), {**os.environ, "PRODUCE_AUDIT_LOG_LEVEL": "DEBUG"})
    if sample.exit_code not in (0, 1):
        tail = "\n".join(sample.stderr.strip().splitlines()[-20:])
        raise SystemExit(f"run over {[str(p) for p in inputs]} exited {sample.exit_code}:\n{tail}")
    return sample


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {memory_gib:.0f} GiB, Python {platform.python_version()}"


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def generated_conf(work: Path, master: str | None = None) -> Path:
    """The audit settings a generated root is audited with (its compacted topics), and optionally the master."""
    from pipeline.generate.cluster import COMPACTED_TOPICS_GLOB

    name = "generated" if master is None else master.replace("[", "-").replace("]", "")
    conf = work / f"{name}.yaml"
    text = f'audit:\n  compacted_topics: ["{COMPACTED_TOPICS_GLOB}"]\n'
    if master is not None:
        text += f'spark:\n  master: "{master}"\n'
    conf.write_text(text)
    return conf


def generate(out: Path, batches: int, *extra: str) -> float:
    """Generate a log root unless it exists; returns the seconds it took (0 when reused)."""
    if (out / "_ground_truth.parquet").exists():
        return 0.0
    shutil.rmtree(out, ignore_errors=True)
    sample = timed(run_cli("generate", "--out", str(out), "--batches", str(batches), *extra))
    if sample.exit_code != 0:
        raise SystemExit(f"generate {batches} failed:\n{sample.stderr[-2000:]}")
    return sample.wall


def broker_dirs(root: Path) -> list[Path]:
    return sorted(path for path in root.iterdir() if path.is_dir() and not path.name.startswith("_"))


def section_fixed(report: Report, work: Path, repeats: int) -> None:
    """The shipped defaults, alternating with the same run on Spark's own settings (`spark.small_input_batches: 0`,
    pipeline/small_inputs.py), so the two compare pair by pair."""
    compiled_conf = work / "compiled.yaml"
    compiled_conf.write_text("spark:\n  small_input_batches: 0\n")
    sample_root = [REPO / "samples" / "basic"]
    samples, compiled = [], []
    for _ in range(repeats):
        samples.append(fresh_run(sample_root, work / "wh-sample"))
        compiled.append(fresh_run(sample_root, work / "wh-sample", compiled_conf))
    plans = [s.plans for s in samples if s.plans]
    ratios = [c.wall / s.wall for s, c in zip(samples, compiled, strict=True)]
    report.section(
        "Fixed cost: `run` on the bundled sample (61 batches)",
        f"{repeats} runs, warm virtualenv, empty warehouse each time; load before: {load()}. Each run of the "
        "defaults (interpreted, pipeline/small_inputs.py) is followed by one with `spark.small_input_batches: 0` "
        "(Spark's settings: compiled code, adaptive execution); the ratio is that run's wall over the default's.",
    )
    report.table(
        ["figure", "min / **median** / max"],
        [
            ["wall seconds", spread([s.wall for s in samples], " s")],
            ["wall seconds, Spark's settings", spread([s.wall for s in compiled], " s")],
            ["Spark's settings / default", spread(ratios, "x", 2)],
            ["driver planning (audit)", spread([p[1] for p in plans], " s")],
            ["plans per audit", spread([p[0] for p in plans], "", 0)],
            ["largest plan, nodes", spread([p[2] for p in plans], "", 0)],
            ["largest plan, serialized", spread([p[3] for p in plans], " KiB", 0)],
            ["peak RSS (driver JVM)", spread([s.peak_rss_mib for s in samples], " MiB", 0)],
            ["'large task binary' warnings", sum(s.large_binaries for s in samples)],
        ],
    )


def section_realdata(report: Report, work: Path) -> None:
    if not REAL_BROKER_DIRS.is_dir():
        report.section("Real broker log dirs", f"skipped: {REAL_BROKER_DIRS} not found")
        return
    roots = [path for path in sorted(REAL_BROKER_DIRS.iterdir()) if path.is_dir() and not path.name.startswith("_")]
    rows = []
    for root in roots:
        sample = fresh_run([root], work / "wh-real")
        rows.append([root.name, f"{sample.wall:.1f} s", sample.exit_code, f"{sample.peak_rss_mib:.0f} MiB"])
    together = fresh_run(roots, work / "wh-real")
    rows.append(
        [
            f"all {len(roots)} as `--input`s",
            f"{together.wall:.1f} s",
            together.exit_code,
            f"{together.peak_rss_mib:.0f} MiB",
        ]
    )
    report.section("Real broker log dirs, one run each", f"load before: {load()}.")
    report.table(["log dir", "wall", "exit", "peak RSS"], rows)


def scale_warehouse(work: Path, size: int) -> Path:
    return work / f"wh-scale-{size}"


def scale_root(work: Path, size: int, replication_factor: int = 1) -> Path:
    return work / (f"gen-{size}" if replication_factor == 1 else f"gen-{size}-rf{replication_factor}")


def section_scale(report: Report, work: Path, sizes: Sequence[int], replication_factors: Sequence[int] = (1,)) -> None:
    rows = []
    replicated = list(replication_factors) != [1]
    for size in sizes:
        for factor in replication_factors:
            root = scale_root(work, size, factor)
            seconds = generate(root, size, *(["--replication-factor", str(factor)] if factor != 1 else []))
            warehouse = scale_warehouse(work, size) if factor == 1 else work / f"wh-scale-{size}-rf{factor}"
            sample = fresh_run(broker_dirs(root), warehouse, generated_conf(work))
            baseline = timed(baseline_command(root)) if factor == 1 else None
            generated = f"{size / seconds * 60 / 1e6:.2f} M/min" if seconds else "(reused)"
            rows.append(
                [
                    f"{size:,}",
                    *([str(factor)] if replicated else []),
                    generated,
                    f"{sample.wall:.0f} s",
                    f"{sample.wall / size * 1e6:.1f} µs",
                    f"{sample.peak_rss_mib:.0f} MiB",
                    f"{sample.peak_tree_mib:.0f} MiB",
                    "-" if baseline is None else f"{baseline.wall:.0f} s",
                    "-" if baseline is None else f"{baseline.wall / sample.wall:.2f}x",
                    load(),
                ]
            )
    report.section(
        "Scale: `generate`, then `run` end to end (one run each, 1 GiB driver, local[*])",
        "Peak RSS: the driver JVM; all processes: the JVM and its Python workers together. The baseline "
        "(`benchmarks/baseline_replay.py`) ran once right after the product on the same files; the ratio is "
        "baseline wall / product wall (above 1: the product is faster).",
    )
    report.table(
        [
            "batches",
            *(["replication factor"] if replicated else []),
            "generate",
            "run wall",
            "per batch",
            "peak RSS",
            "all processes",
            "baseline wall",
            "baseline / product",
            "load after",
        ],
        rows,
    )


def baseline_command(root: Path) -> list[str]:
    from pipeline.generate.cluster import COMPACTED_TOPICS_GLOB

    script = str(REPO / "benchmarks" / "baseline_replay.py")
    return [sys.executable, script, *map(str, broker_dirs(root)), "--compacted-topics", COMPACTED_TOPICS_GLOB]


def section_baseline(report: Report, work: Path, sizes: Sequence[int], repeats: int) -> None:
    rows = []
    for size in sizes:
        root = work / f"gen-{size}"
        generate(root, size)
        baseline = baseline_command(root)
        for master in ("local[1]", "local[2]"):
            conf = generated_conf(work, master)
            ratios, product, plain = [], [], []
            for _ in range(repeats):
                a = fresh_run(broker_dirs(root), work / "wh-baseline", conf)
                b = timed(baseline)
                product.append(a.wall)
                plain.append(b.wall)
                ratios.append(b.wall / a.wall)
            rows.append([f"{size:,}", master, spread(product, " s"), spread(plain, " s"), spread(ratios, "x", 2)])
    report.section(
        "Against a single-process Python replay (`benchmarks/baseline_replay.py`)",
        "Runs alternate product / baseline; the ratio is baseline wall / product wall of each pair (above 1: the "
        "product is faster).",
    )
    report.table(["batches", "product master", "product wall", "baseline wall", "baseline / product"], rows)


def section_recall(report: Report, work: Path, size: int) -> None:
    from pipeline.generate.recall import compare_with_findings

    root = work / f"gen-{size}"
    generate(root, size)
    warehouse = scale_warehouse(work, size)
    if not (warehouse / "findings").is_dir():  # the scale section's run of this root, when it ran
        fresh_run(broker_dirs(root), warehouse, generated_conf(work))
    outcome = compare_with_findings(root, warehouse)
    report.section(f"Recall against the generator's ground truth ({size:,} batches)")
    report.table(
        ["figure", "value"],
        [[key, len(value) if isinstance(value, list) else value] for key, value in outcome.items()],
    )


def section_skew(report: Report, work: Path, size: int) -> None:
    from pipeline.generate.recall import compare_with_findings

    rows = []
    for label, root, extra in (
        ("spread", work / f"gen-{size}", ()),
        ("one hot producer", work / f"gen-{size}-hot", ("--hot-producer",)),
    ):
        generate(root, size, *extra)
        warehouse = work / f"wh-skew-{size}"
        sample = fresh_run(broker_dirs(root), warehouse, generated_conf(work))
        outcome = compare_with_findings(root, warehouse)
        rows.append(
            [
                label,
                f"{sample.wall:.0f} s",
                f"{sample.wall / size * 1e6:.1f} µs",
                f"{sample.peak_rss_mib:.0f} MiB",
                f"{sample.peak_tree_mib:.0f} MiB",
                f"{len(outcome['missed'])} missed, {len(outcome['unexplained'])} unexplained",
                load(),
            ]
        )
    report.section(
        f"Skew: one producer holding half of one partition ({size:,} batches, one run each)",
        "`generate --hot-producer` adds an idempotent producer that writes as many of one partition's batches as all "
        "the others together; the same root without it for comparison. Recall: the injected anomalies the run "
        "missed, and its findings at WARN or above that no injection explains.",
    )
    report.table(["producers", "run wall", "per batch", "peak RSS", "all processes", "recall", "load after"], rows)


def section_nightly(report: Report, work: Path, size: int) -> None:
    """The nightly incremental case: how a rerun after 1 % more data compares with a full run, in time and tables."""
    from log_append import append, differing_rows, withhold

    source = work / f"gen-{size}"
    generate(source, size)
    root = work / f"nightly-{size}"
    shutil.rmtree(root, ignore_errors=True)
    withheld = withhold(source, root, NIGHTLY_SHARE)
    conf = generated_conf(work)
    nightly_warehouse, full_warehouse = work / f"wh-nightly-{size}", work / f"wh-nightly-full-{size}"
    first = fresh_run(broker_dirs(root), nightly_warehouse, conf)
    appended = append(root, source)
    rerun = finished_run(broker_dirs(root), nightly_warehouse, conf)
    full = fresh_run(broker_dirs(root), full_warehouse, conf)
    differing = differing_rows(nightly_warehouse, full_warehouse)
    report.section(
        f"Nightly: `run` again after {NIGHTLY_SHARE * 100:g} % more data ({size:,} batches, one run each)",
        f"`benchmarks/log_append.py` wrote the root as it stood before its newest {NIGHTLY_SHARE * 100:g} % of batches "
        "(by maxTimestamp, `__transaction_state` included) were appended; it was run in full, the batches appended in "
        "place, and `run` repeated on the same warehouse (the nightly rerun), then run in full over the final root "
        "into an empty warehouse. Tables: `findings`, `transactions`, `producer_state`, `partition_summary`, "
        f"`global_transactions` and `read_committed` of both, run ids left out. Load after: {load()}.",
    )
    report.table(
        ["figure", "value"],
        [
            [
                "appended",
                f"{withheld.batches:,} of {withheld.total_batches:,} batches; {appended.segments} segment files "
                f"({withheld.segments_truncated} grown, {withheld.segments_left_out} new), "
                f"{appended.files} files in all",
            ],
            ["first run, before the append", f"{first.wall:.1f} s, {first.peak_rss_mib:.0f} MiB"],
            ["nightly rerun", f"{rerun.wall:.1f} s, {rerun.peak_rss_mib:.0f} MiB"],
            ["full run over the final root", f"{full.wall:.1f} s, {full.peak_rss_mib:.0f} MiB"],
            ["nightly / full (target ≤ 0.10)", f"{rerun.wall / full.wall:.2f}"],
            ["nightly rerun, ingest / audit", _phases(rerun)],
            ["full run, ingest / audit", _phases(full)],
            ["segments, nightly rerun", _segment_outcomes(rerun)],
            ["segments, full run", _segment_outcomes(full)],
            ["tables identical", _identical(differing)],
        ],
    )


def _identical(differing: dict[str, tuple[int, int]]) -> str:
    if not differing:
        return "yes, all six"
    return "no: " + ", ".join(
        f"{table} ({only} rows only after the rerun, {other} only after the full run)"
        for table, (only, other) in differing.items()
    )


def _phases(sample: Sample) -> str:
    """Seconds from the run's start to the ingest's end, and from there to the audit's end, as logged."""
    stamps = []
    for marker in RUN_PHASES:
        line = next((line for line in sample.stderr.splitlines() if marker in line), "")
        found = LOG_TIME.match(line)
        if found is None:
            return "(not logged)"
        stamps.append(datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f"))
    return f"{(stamps[1] - stamps[0]).total_seconds():.1f} s / {(stamps[2] - stamps[1]).total_seconds():.1f} s"


def _segment_outcomes(sample: Sample) -> str:
    found = SEGMENTS_LINE.search(sample.stderr)
    return found[1] if found else "(not logged)"


def write_report(report: Report) -> None:
    text = BENCHMARKS_MD.read_text()
    body = "\n".join([START, "## Audit engine (`benchmarks/engine_suite.py`)", *report.lines, "", END])
    if START in text:
        text = text[: text.index(START)] + body + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + body + "\n"
    BENCHMARKS_MD.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="fixed,realdata,scale,baseline,recall")
    parser.add_argument("--sizes", default="1000000,10000000,20000000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--baseline-sizes", default=None, help="sizes of the baseline section (default: --sizes' first two)"
    )
    parser.add_argument(
        "--replication-factors",
        default="1",
        help="replication factors the scale section generates each size at (`generate --replication-factor`)",
    )
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "produce-audit-bench")
    args = parser.parse_args()
    sections = args.sections.split(",")
    sizes = [int(size) for size in args.sizes.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    report = Report()
    report.lines += [
        "",
        f"Machine: {machine()}. Measured {time.strftime('%Y-%m-%d')}; load average at the start {load()} "
        f"(1/5/15 min). Command: `python benchmarks/engine_suite.py {' '.join(sys.argv[1:])}`.",
    ]
    started = time.perf_counter()
    if "fixed" in sections:
        section_fixed(report, args.work, args.repeats)
    if "realdata" in sections:
        section_realdata(report, args.work)
    if "scale" in sections:
        section_scale(report, args.work, sizes, [int(n) for n in args.replication_factors.split(",")])
    if "baseline" in sections:
        baseline_sizes = sizes[:2] if args.baseline_sizes is None else [int(n) for n in args.baseline_sizes.split(",")]
        section_baseline(report, args.work, baseline_sizes, args.repeats)
    if "recall" in sections:
        section_recall(report, args.work, sizes[min(1, len(sizes) - 1)])
    if "skew" in sections:
        section_skew(report, args.work, sizes[0])
    if "nightly" in sections:
        section_nightly(report, args.work, sizes[min(1, len(sizes) - 1)])
    report.lines += [
        "",
        f"The suite took {(time.perf_counter() - started) / 60:.0f} minutes; load at the end {load()}.",
    ]
    write_report(report)
    print(json.dumps({"written": str(BENCHMARKS_MD)}))


if __name__ == "__main__":
    main()
