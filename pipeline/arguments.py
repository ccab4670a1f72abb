"""The `produce-audit` command line: every command's options, their help, and the parsing of times and versions.

Parsing only: nothing here starts Spark or reads a warehouse, so `--help` and argument errors answer at once.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pipeline import __version__
from schemas.findings import SEVERITIES

FAIL_ON_CHOICES = (*SEVERITIES, "never")
TRANSACTION_VERSIONS = ("auto", "1", "2")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)

EXIT_CODES_HELP = """\
exit codes:
  0  passed: no finding at or above --fail-on (compare: every table equal)
  1  data failed: a finding at or above --fail-on (default: fail_on of the config, ERROR; `never` makes every
     completed run 0; compare: a table differs from the golden or baseline rows); tables and reports are
     written as for 0: alert, do not retry
  2  usage, config or input error, or a warehouse locked by another run; tables left as they were (the
     message names the path): fix the call
  3  internal error or SIGTERM; the run's commits were rolled back (traceback on stderr): retry once, then report
"""


class _ClusterInput(argparse.Action):
    """`--cluster-input ID LOGROOT`: two words, so a path holding `=` or a URI needs no splitting rule."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        cluster, path = values
        namespace.inputs = [*(namespace.inputs or []), path]
        namespace.input_clusters = {**(getattr(namespace, "input_clusters", None) or {}), path: cluster}


def require_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`run` and `ingest` need an input, by --input or --cluster-input (argparse cannot require one of two)."""
    if args.command in ("run", "ingest") and not args.inputs:
        parser.error(f"{args.command}: give at least one --input LOGROOT or --cluster-input ID LOGROOT")


def parse_reference_time(text: str) -> int:
    """Epoch milliseconds from ISO-8601 (a naive value is UTC) or from an integer of epoch milliseconds."""
    text = text.strip()
    if text.isdigit():
        if int(text) > _LATEST_MS:
            raise ValueError(f"{text} is past year 9999 as epoch milliseconds; give ISO-8601 or epoch milliseconds")
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither ISO-8601 (e.g. 2024-05-01T12:00:00Z) nor epoch milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


VERSION_LIMIT = 10**12  # epoch milliseconds of 2001-09-09: smaller whole numbers are Delta versions


@dataclass(frozen=True)
class AsOf:
    """A point in a warehouse's history: a Delta version of the findings table, or a time in epoch milliseconds."""

    version: int | None = None
    epoch_ms: int | None = None

    def __str__(self) -> str:
        return f"version {self.version}" if self.version is not None else f"{self.epoch_ms} ms"


def parse_as_of(text: str) -> AsOf:
    """A whole number below VERSION_LIMIT is a version; anything else a time, as --reference-time reads it."""
    text = text.strip()
    if text.isdigit() and int(text) < VERSION_LIMIT:
        return AsOf(version=int(text))
    try:
        return AsOf(epoch_ms=parse_reference_time(text))
    except ValueError:
        if text.isdigit():  # past year 9999: that message says so
            raise
        raise ValueError(
            f"{text!r} is neither a version of the findings table, ISO-8601 (e.g. 2024-05-01T12:00:00Z) nor "
            "epoch milliseconds"
        ) from None


def _non_negative_int(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more")
    return int(text)


def _reference_time_arg(text: str) -> int:
    try:
        return parse_reference_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _as_of_arg(text: str) -> AsOf:
    try:
        return parse_as_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; each command adds its own subparser, in the order `--help` lists them."""
    parser = argparse.ArgumentParser(
        prog="produce-audit",
        description=(
            "Audit Kafka produce logs (segment files or kafka-dump-log output) offline with Spark: load the "
            "record batches into Delta tables, replay the broker's producer-state rules and report findings."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in (
        _add_run_command,
        _add_ingest_command,
        _add_audit_command,
        _add_report_command,
        _add_compare_command,
        _add_vacuum_command,
        _add_prepare_command,
    ):
        add_command(commands)

    from pipeline.generate.command import add_generate_command

    add_generate_command(commands)
    return parser


def _warehouse_command(commands, name: str, summary: str, details: str) -> argparse.ArgumentParser:
    """A command that works on a warehouse: its help, and the --warehouse and --conf every such command takes."""
    sub = commands.add_parser(
        name,
        help=summary,
        description=f"{summary}\n\n{textwrap.fill(details, width=79)}",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument(
        "--warehouse",
        metavar="WH",
        help="directory or URI holding the Delta tables (default: `warehouse` of the config)",
    )
    sub.add_argument(
        "--conf",
        metavar="FILE",
        help="YAML config layered over conf/local.yaml (spark, delta, ingest, audit, report, fail_on)",
    )
    return sub


def _add_input_options(sub: argparse.ArgumentParser) -> None:
    """What to ingest and how: the log roots, the clusters they belong to, a full or deep decode."""
    sub.add_argument(
        "--input",
        dest="inputs",
        action="append",
        metavar="LOGROOT",
        help="Kafka log root (a broker log.dirs directory, topic-partition directories or dump files); "
        "repeat for several roots",
    )
    sub.add_argument(
        "--cluster-input",
        action=_ClusterInput,
        nargs=2,
        metavar=("ID", "LOGROOT"),
        help="an input whose rows belong to cluster ID where it names none (dump text, columnar exports, log "
        "dirs without cluster.id), as --input LOGROOT otherwise; repeat for inputs of several clusters, e.g. "
        "--cluster-input east dumps/east --cluster-input west s3://bucket/west (overrides --cluster-id)",
    )
    sub.add_argument(
        "--full",
        action="store_true",
        help="decode every segment again, also those ingested before and unchanged since "
        "(default: ingest.incremental of the config)",
    )
    sub.add_argument(
        "--deep",
        action="store_true",
        help="also hash every record's key, value and headers into the payloads table for the payload rules "
        "(PAY-*): a second pass over the segments (default: ingest.deep of the config)",
    )
    sub.add_argument(
        "--cluster-id",
        metavar="ID",
        help="cluster of the inputs that name none (dump text, columnar exports, log dirs whose "
        "meta.properties has no cluster.id); partitions of different clusters are never compared "
        '(default: ingest.cluster_id of the config, "" for unknown)',
    )


def _add_audit_options(sub: argparse.ArgumentParser) -> None:
    """What the audit assumes of the brokers: their clock and the producers' transaction version."""
    sub.add_argument(
        "--reference-time",
        type=_reference_time_arg,
        metavar="TIME",
        help="broker wall clock for expiry and hanging-transaction rules: ISO-8601 (naive means UTC) or "
        "epoch milliseconds (default: the latest batch timestamp of each partition)",
    )
    sub.add_argument(
        "--transaction-version",
        choices=TRANSACTION_VERSIONS,
        help="KIP-890 transaction version of the producers (default: audit.transaction_version of the config)",
    )


def _add_fail_on_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--fail-on",
        choices=FAIL_ON_CHOICES,
        metavar="{" + ",".join(FAIL_ON_CHOICES) + "}",
        help="exit 1 when a finding has this severity or a higher one (default: fail_on of the config, ERROR)",
    )


def _add_run_command(commands) -> None:
    run = _warehouse_command(
        commands,
        "run",
        "Ingest, audit and report in one go.",
        "Loads the log roots into `batches`, audits them, writes the result tables under WH, prints the "
        "summary and writes WH/reports/RUN_ID/summary.json.",
    )
    _add_input_options(run)
    _add_audit_options(run)
    _add_fail_on_option(run)


def _add_ingest_command(commands) -> None:
    ingest = _warehouse_command(
        commands,
        "ingest",
        "Load Kafka log roots into the `batches` Delta table.",
        "The topics found in the input replace their earlier rows, so ingesting the same input again gives "
        "identical tables. Segments ingested before and unchanged since keep their rows without being decoded "
        "again (ingest_manifest), unless --full is given.",
    )
    _add_input_options(ingest)


def _add_audit_command(commands) -> None:
    audit = _warehouse_command(
        commands,
        "audit",
        "Audit the `batches` table of a warehouse.",
        "Replays Kafka's producer-state rules over every ingested topic and replaces that topic's rows in "
        "`findings`, `transactions`, `producer_state` and `partition_summary`.",
    )
    _add_audit_options(audit)
    _add_fail_on_option(audit)


def _add_report_command(commands) -> None:
    report = _warehouse_command(
        commands,
        "report",
        "Summarise an audit run.",
        "Prints counts by severity and rule, the top findings, transactions by outcome and partitions with "
        "open transactions, and writes summary.json, report.html, report.md and findings.jsonl (one JSON object "
        "per finding, for alerting pipelines) to WH/reports/RUN_ID/. The tables are read at the versions the "
        "reported run published, so later runs do not change its report.",
    )
    which = report.add_mutually_exclusive_group()
    which.add_argument(
        "--run-id",
        metavar="RUN_ID",
        help="audit run to report on (default: the latest published audit or run in WH/runs)",
    )
    which.add_argument(
        "--as-of",
        type=_as_of_arg,
        metavar="VERSION|TIME",
        help="report the audit run that was the latest published one as of this Delta version of the findings "
        f"table (a whole number below {VERSION_LIMIT}) or this time (ISO-8601, naive means UTC, or epoch "
        "milliseconds); exit 2 when that is before the first audit run or past the latest version or run",
    )
    _add_fail_on_option(report)


def _add_compare_command(commands) -> None:
    compare = _warehouse_command(
        commands,
        "compare",
        "Compare an audit run's result tables with golden outputs or with another run.",
        "Reads the latest published audit or run (or --run-id) of WH and compares its findings, transactions, "
        "producer_state and partition_summary rows, run ids left out, with the JSON-lines files in the golden "
        "folder, or with the rows another audit run of WH published (--baseline-run; each run read at the "
        "table versions it published, input roots in paths made alike): missing (only in the golden or "
        "baseline rows), unexpected and changed rows are printed (and written as JUnit XML with --junit); exit "
        "1 when any differ. --update-golden writes the golden folder from the run instead. The warehouse is "
        "only read.",
    )
    compare.add_argument("--actual", dest="warehouse", metavar="WH", help="the warehouse to check (as --warehouse)")
    against = compare.add_mutually_exclusive_group(required=True)
    against.add_argument("--golden", type=Path, metavar="DIR", help="folder of the golden outputs")
    against.add_argument(
        "--baseline-run", metavar="RUN_ID", help="published audit run of the same warehouse to compare against"
    )
    compare.add_argument("--update-golden", action="store_true", help="write the golden folder from the run")
    compare.add_argument("--run-id", metavar="RUN_ID", help="audit run to compare (default: the latest published)")
    compare.add_argument("--junit", type=Path, metavar="FILE", help="also write the result as JUnit XML")
    compare.add_argument(
        "--max-examples", type=_non_negative_int, default=10, metavar="N", help="rows shown per kind (default: 10)"
    )


def _add_vacuum_command(commands) -> None:
    vacuum = _warehouse_command(
        commands,
        "vacuum",
        "Delete files no kept version of the tables reads.",
        "Rolls back what unfinished runs left (as every writing command does first), then deletes the data "
        "files that neither the latest version of each table nor the versions published by the last "
        "--keep-runs runs read, once they are older than --retention-hours. Reports of runs older than that "
        "can no longer be rebuilt.",
    )
    vacuum.add_argument(
        "--retention-hours",
        type=_non_negative_int,
        default=168,
        metavar="HOURS",
        help="keep files younger than this (default: 168, Delta's default retention)",
    )
    vacuum.add_argument(
        "--keep-runs",
        type=_non_negative_int,
        default=10,
        metavar="N",
        help="keep the table versions published by the last N writing runs (default: 10)",
    )


def _add_prepare_command(commands) -> None:
    """An installation step rather than a warehouse command: it takes no --warehouse, and a --conf of its own."""
    prepare = commands.add_parser(
        "prepare",
        help="Fetch the pinned jars and record the JVM class archive later runs start with (an installation step).",
        description="Fetch the pinned jars and record the JVM class archive later runs start with (an installation "
        "step).\n\n"
        + textwrap.fill(
            "Fetches the pinned jar bundles of pipeline/jars (delta-spark for the native Delta backend) from "
            "Maven Central with mvn, checked against their sha256 locks, into this installation; without Maven "
            "or its network it says so in one line and goes on (the embedded backend needs no jars). With a JDK, "
            "compiles the local file system classes that spare Hadoop's chmod and readlink processes "
            "(pipeline/local_fs.py). Then audits "
            "the bundled sample once in a temporary folder, in a JVM that writes the classes it loaded to "
            "a class-data archive (Java's AppCDS) inside this installation. Every later session that starts its "
            "own JVM maps them from the archive instead of reading them from Spark's jars, which cuts the fixed "
            "cost of a run. Run it again after changing Java or Spark; without an archive runs work as before.",
            width=79,
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prepare.add_argument("--conf", metavar="FILE", help="YAML config layered over conf/local.yaml (spark, delta)")
    prepare.add_argument(
        "--require-jars", action="store_true", help="exit 2 when a jar bundle cannot be fetched, instead of going on"
    )
