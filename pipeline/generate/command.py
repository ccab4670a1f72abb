"""`produce-audit generate`: arguments, and the run's report on stdout."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pipeline.errors import InputError
from pipeline.generate import options as defaults
from pipeline.generate.options import GenerateOptions

SUMMARY = """\
Writes a Kafka log root as brokers lay out their log dirs (DIR/broker-<id>/): segments rolled by size with
their indexes, aborted-transaction indexes and producer snapshots, leader-epoch checkpoints, the log-dir
checkpoints, and __transaction_state partitions with the coordinator's records, from a simulation of
idempotent and transactional producers. The same arguments give the same bytes. With --anomaly-rate, that
fraction of the batches gets an injected anomaly, listed in DIR/_ground_truth.parquet with the finding the
audit must raise. Its compacted topics are known from their log dirs' cleaner-offset-checkpoint, as a broker's are.

With --replication-factor N, each partition (data and __transaction_state) also has N-1 follower copies on the
next brokers, hard links to the leader's finished files, listed in their log dirs' checkpoints; at the anomaly
rate, some follower copies depart from the leader's (a truncation point, a diverging batch, lagging followers:
rules REP-002, REP-001, REP-003)."""


def add_generate_command(commands) -> argparse.ArgumentParser:
    """The `generate` subcommand on the CLI's subparsers (no Spark, no warehouse)."""
    parser = commands.add_parser(
        "generate",
        help="Write a deterministic, realistic Kafka log root for benchmarks and end-to-end tests.",
        description=SUMMARY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="log root to create (must not hold files)")
    parser.add_argument("--batches", required=True, type=int, metavar="N", help="client batches to produce")
    parser.add_argument(
        "--partitions",
        type=int,
        default=defaults.DEFAULT_PARTITIONS,
        metavar="P",
        help=f"data partitions, dealt to the topics in turn (default {defaults.DEFAULT_PARTITIONS})",
    )
    parser.add_argument(
        "--producers",
        type=int,
        default=defaults.DEFAULT_PRODUCERS,
        metavar="K",
        help=f"clients, 30%% of them transactional (default {defaults.DEFAULT_PRODUCERS})",
    )
    parser.add_argument(
        "--brokers",
        type=int,
        default=defaults.DEFAULT_BROKERS,
        metavar="B",
        help=f"broker log dirs the partitions are spread over (default {defaults.DEFAULT_BROKERS})",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=defaults.DEFAULT_REPLICATION_FACTOR,
        metavar="N",
        help=(
            "copies of each partition: the leader's and N-1 followers' on the next brokers, at most --brokers "
            f"(default {defaults.DEFAULT_REPLICATION_FACTOR})"
        ),
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=defaults.DEFAULT_SEED,
        metavar="S",
        help=f"seed of every random draw (default {defaults.DEFAULT_SEED})",
    )
    parser.add_argument(
        "--anomaly-rate",
        type=float,
        default=defaults.DEFAULT_ANOMALY_RATE,
        metavar="R",
        help=f"fraction of batches with an injected anomaly (default {defaults.DEFAULT_ANOMALY_RATE})",
    )
    parser.add_argument(
        "--segment-bytes",
        type=int,
        default=defaults.DEFAULT_SEGMENT_BYTES,
        metavar="BYTES",
        help=f"roll segments at this size (default {defaults.DEFAULT_SEGMENT_BYTES})",
    )
    parser.add_argument(
        "--hot-producer",
        action="store_true",
        help="skew: one more idempotent producer writes half of the batches of one partition",
    )
    return parser


def run_command(args: argparse.Namespace) -> int:
    options = GenerateOptions(
        out=Path(args.out),
        batches=args.batches,
        partitions=args.partitions,
        producers=args.producers,
        brokers=args.brokers,
        seed=args.seed,
        anomaly_rate=args.anomaly_rate,
        segment_bytes=args.segment_bytes,
        hot_producer=args.hot_producer,
        replication_factor=args.replication_factor,
    )
    problems = options.problems()
    if problems:
        raise InputError(args.out, "; ".join(problems))
    if options.out.exists() and (not options.out.is_dir() or any(options.out.iterdir())):
        raise InputError(args.out, "already exists and is not an empty directory")
    # imported here so that `--help` and argument errors answer at once
    from pipeline.generate.cluster import COMPACTED_TOPICS_GLOB
    from pipeline.generate.ground_truth import FILE_NAME
    from pipeline.generate.simulation import write_log_root

    started = time.perf_counter()
    simulation = write_log_root(options)
    seconds = time.perf_counter() - started
    stats = simulation.stats
    report = {
        "out": str(options.out),
        "data_batches": options.batches,
        "replication_factor": options.replication_factor,
        "markers": stats["markers"],
        "coordinator_records": stats["coordinator_records"],
        "bytes": stats["bytes"],
        "seconds": round(seconds, 3),
        "batches_per_minute": round(options.batches / seconds * 60),
        "retries_absorbed": stats["retries_absorbed"],
        "timeout_aborts": stats["timeout_aborts"],
        "fences": stats["fences"],
        "anomalies": len(simulation.anomalies.truths),
        "anomalies_skipped": dict(sorted(simulation.anomalies.skipped.items())),
        "ground_truth": str(options.out / FILE_NAME),
        "compacted_topics": [COMPACTED_TOPICS_GLOB],
        "hot_producer": None if simulation.hot is None else simulation.hot.pid,
    }
    print(json.dumps(report, indent=2))
    return 0
