"""Decoder fuzzing, measured: seeded mutations of the real Kafka files through every decoder of the auditor.

    python benchmarks/fuzz_suite.py [--inputs 100000] [--seed 1] [--seconds 10] [--kinds segment,dumplog]

The inputs are split evenly over the decoder kinds of benchmarks/fuzz_targets.py (segments, batch records,
`__transaction_state` segments and coordinator records, producer snapshots, `.txnindex`, `.index`/`.timeindex`,
checkpoints, `partition.metadata`, kafka-dump-log text), each kind cycling through its seeds from
../shared/realdata. Every case runs under a time limit (SIGALRM; a faulthandler watchdog that dumps the stack and
exits catches a hang in compiled code); peak RSS is read after each kind. A crash, hang or malformed output is
listed with its seed and mutation; each kind draws from its own generator, so `--kinds K --seed N` replays kind
K's cases. Rewrites the fuzz section of RELIABILITY.md (unless `--no-write`); exits 1 when a case failed.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import math
import os
import platform
import random
import resource
import sys
import time
from pathlib import Path

from fuzz_targets import Tally, load_targets, run_cases

REPO = Path(__file__).resolve().parent.parent
REALDATA = REPO.parent / "shared" / "realdata"
RELIABILITY_MD = REPO / "RELIABILITY.md"
START, END = "<!-- fuzz-suite:start -->", "<!-- fuzz-suite:end -->"
# The alarm cannot interrupt compiled code; the watchdog can, but re-arming it costs about 0.5 ms, so it is
# armed for a group of cases: a case stuck in compiled code ends the run within the group's time limits.
CASES_PER_WATCHDOG = 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="mutated inputs in all, split over the kinds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10.0, help="time limit of one case")
    parser.add_argument("--kinds", help="comma-separated decoder kinds (default: all)")
    parser.add_argument("--max-rss-mib", type=int, default=1024, help="peak RSS over this fails the run")
    parser.add_argument("--realdata", type=Path, default=REALDATA)
    parser.add_argument("--no-write", action="store_true", help="do not rewrite RELIABILITY.md")
    args = parser.parse_args()
    if not args.realdata.is_dir():
        print(f"real Kafka data not found at {args.realdata}", file=sys.stderr)
        return 2

    load_before = os.getloadavg()
    started = time.monotonic()
    targets = load_targets(args.realdata)
    if args.kinds:
        wanted = set(args.kinds.split(","))
        targets = [target for target in targets if target.kind in wanted]
    rss_after_loading = _peak_rss_mib()
    per_kind = math.ceil(args.inputs / len(targets))
    results = []
    for target in targets:
        kind_started = time.monotonic()
        tally = Tally()
        rng = random.Random(f"{args.seed}:{target.kind}")  # a kind's cases do not depend on the other kinds
        for first in range(0, per_kind, CASES_PER_WATCHDOG):
            faulthandler.dump_traceback_later(args.seconds * 3 * CASES_PER_WATCHDOG, exit=True)
            run_cases(target, min(CASES_PER_WATCHDOG, per_kind - first), rng, args.seconds, tally)
        faulthandler.cancel_dump_traceback_later()
        results.append(
            {
                "kind": target.kind,
                "decoder": target.decoder,
                "seeds": len(target.seeds),
                "inputs": tally.inputs,
                "errors_by_design": tally.errors_by_design,
                "crashes": sum(failure.outcome == "crash" for failure in tally.failures),
                "hangs": sum(failure.outcome == "hang" for failure in tally.failures),
                "malformed": sum(failure.outcome == "malformed" for failure in tally.failures),
                "seconds": round(time.monotonic() - kind_started, 1),
                "peak_rss_mib": _peak_rss_mib(),
                "failures": [failure.__dict__ for failure in tally.failures],
            }
        )
        print(json.dumps({key: value for key, value in results[-1].items() if key != "failures"}), flush=True)
        for failure in tally.failures[:5]:
            print(f"  {failure.outcome}: {failure.seed} {failure.mutation}: {failure.error}", flush=True)
    summary = {
        "command": " ".join(["python benchmarks/fuzz_suite.py", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "seed": args.seed,
        "inputs": sum(result["inputs"] for result in results),
        "failures": sum(len(result["failures"]) for result in results),
        "seconds": round(time.monotonic() - started, 1),
        "seconds_per_case_limit": args.seconds,
        "rss_after_loading_mib": rss_after_loading,
        "peak_rss_mib": _peak_rss_mib(),
        "max_rss_mib": args.max_rss_mib,
        "nproc": os.cpu_count(),
        "load_before": [round(load, 2) for load in load_before],
        "load_after": [round(load, 2) for load in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    print(json.dumps(summary))
    if not args.no_write:
        _write_section(summary, results)
    return 1 if summary["failures"] or summary["peak_rss_mib"] > args.max_rss_mib else 0


def _peak_rss_mib() -> int:
    """Peak resident set of this process so far (ru_maxrss is in KiB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _write_section(summary: dict, results: list[dict]) -> None:
    lines = [
        START,
        f"`{summary['command']}` on {summary['date']}: "
        f"{summary['inputs']:,} mutated inputs in {summary['seconds']:,} s on {summary['nproc']} cores "
        f"(load average {summary['load_before'][0]} before, {summary['load_after'][0]} after; shared machine), "
        f"Python {summary['python']}, time limit {summary['seconds_per_case_limit']} s a case.",
        "",
        "| kind | decoder | seeds | inputs | errors by design | crashes | hangs | malformed | s | peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        lines.append(
            f"| {result['kind']} | `{result['decoder']}` | {result['seeds']} | {result['inputs']:,} | "
            f"{result['errors_by_design']:,} | {result['crashes']} | {result['hangs']} | {result['malformed']} | "
            f"{result['seconds']} | {result['peak_rss_mib']} |"
        )
    failures = [failure for result in results for failure in result["failures"]]
    lines += [
        "",
        f"Failures: {len(failures)}. Peak RSS {summary['peak_rss_mib']} MiB, bound {summary['max_rss_mib']} MiB "
        f"({summary['rss_after_loading_mib']} MiB after loading the seeds and compiling the decoders: the cases "
        f"added {summary['peak_rss_mib'] - summary['rss_after_loading_mib']} MiB).",
        *[f"- {f['outcome']} in {f['kind']}: `{f['seed']}` {f['mutation']}: {f['error']}" for f in failures[:20]],
        END,
    ]
    text = RELIABILITY_MD.read_text()
    if START in text:
        head, _, rest = text.partition(START)
        tail = rest.partition(END)[2]
    else:
        head, tail = text.rstrip("\n") + "\n\n", "\n"
    RELIABILITY_MD.write_text(head + "\n".join(lines) + tail)


if __name__ == "__main__":
    sys.exit(main())
