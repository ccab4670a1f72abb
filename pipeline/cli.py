"""The `produce-audit` command: arguments, exit codes and error messages; the steps themselves live in runner.

Exit codes are a contract for schedulers and CI: 0 when no finding reaches --fail-on, 1 when one does,
2 for usage, config and input errors (one message on stderr naming the path), 3 for internal errors.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import secrets
import signal
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.audit.registry import SEVERITIES, severity_at_least
from pipeline.config import ConfigError, Settings, load_settings
from pipeline.errors import InputError

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

FAIL_ON_CHOICES = (*SEVERITIES, "never")
TRANSACTION_VERSIONS = ("auto", "1", "2")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // timedelta(milliseconds=1)
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

log = logging.getLogger("pipeline.cli")

_EXIT_CODES_HELP = """\
exit codes:
  0  no finding at or above --fail-on
  1  at least one finding at or above --fail-on (compare: a table differs from its golden output)
  2  usage, config or input error (the message names the path)
  3  internal error (traceback on stderr)
"""


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


def new_run_id(now: datetime | None = None) -> str:
    """A UTC timestamp that sorts in run order, plus a random suffix so that concurrent runs never collide."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def exit_code_for(findings_by_severity: Mapping[str, int], fail_on: str) -> int:
    """EXIT_FINDINGS when any finding has a severity at or above `fail_on`; `never` always passes."""
    if fail_on == "never":
        return EXIT_OK
    failing = sum(findings_by_severity.get(severity, 0) for severity in severity_at_least(fail_on))
    return EXIT_FINDINGS if failing else EXIT_OK


def _non_negative_int(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more")
    return int(text)


def _reference_time_arg(text: str) -> int:
    try:
        return parse_reference_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="produce-audit",
        description=(
            "Audit Kafka produce logs (segment files or kafka-dump-log output) offline with Spark: load the "
            "record batches into Delta tables, replay the broker's producer-state rules and report findings."
        ),
        epilog=_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, details: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=f"{summary}\n\n{textwrap.fill(details, width=79)}",
            epilog=_EXIT_CODES_HELP,
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

    def inputs(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--input",
            dest="inputs",
            action="append",
            required=True,
            metavar="LOGROOT",
            help="Kafka log root (a broker log.dirs directory, topic-partition directories or dump files); "
            "repeat for several roots",
        )
        sub.add_argument(
            "--full",
            action="store_true",
            help="decode every segment again, also those ingested before and unchanged since "
            "(default: ingest.incremental of the config)",
        )

    def audit_options(sub: argparse.ArgumentParser) -> None:
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

    def fail_on(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--fail-on",
            choices=FAIL_ON_CHOICES,
            metavar="{" + ",".join(FAIL_ON_CHOICES) + "}",
            help="exit 1 when a finding has this severity or a higher one (default: fail_on of the config, ERROR)",
        )

    run = command(
        "run",
        "Ingest, audit and report in one go.",
        "Loads the log roots into `batches`, audits them, writes the result tables under WH, prints the "
        "summary and writes WH/reports/RUN_ID/summary.json.",
    )
    inputs(run)
    audit_options(run)
    fail_on(run)

    ingest = command(
        "ingest",
        "Load Kafka log roots into the `batches` Delta table.",
        "The topics found in the input replace their earlier rows, so ingesting the same input again gives "
        "identical tables. Segments ingested before and unchanged since keep their rows without being decoded "
        "again (ingest_manifest), unless --full is given.",
    )
    inputs(ingest)

    audit = command(
        "audit",
        "Audit the `batches` table of a warehouse.",
        "Replays Kafka's producer-state rules over every ingested topic and replaces that topic's rows in "
        "`findings`, `transactions`, `producer_state` and `partition_summary`.",
    )
    audit_options(audit)
    fail_on(audit)

    report = command(
        "report",
        "Summarise an audit run.",
        "Prints counts by severity and rule, the top findings, transactions by outcome and partitions with "
        "open transactions, and writes WH/reports/RUN_ID/summary.json.",
    )
    report.add_argument(
        "--run-id",
        metavar="RUN_ID",
        help="audit run to report on (default: the latest published audit or run in WH/runs)",
    )
    fail_on(report)

    compare = command(
        "compare",
        "Compare an audit run's result tables with golden outputs.",
        "Reads the latest published audit or run (or --run-id) of WH and compares its findings, transactions, "
        "producer_state and partition_summary rows, run ids left out, with the JSON-lines files in the golden "
        "folder: missing, unexpected and changed rows are printed (and written as JUnit XML with --junit); exit "
        "1 when any differ. --update-golden writes the folder from the run instead. The warehouse is only read.",
    )
    compare.add_argument("--actual", dest="warehouse", metavar="WH", help="the warehouse to check (as --warehouse)")
    compare.add_argument("--golden", required=True, type=Path, metavar="DIR", help="folder of the golden outputs")
    compare.add_argument("--update-golden", action="store_true", help="write the golden folder from the run")
    compare.add_argument("--run-id", metavar="RUN_ID", help="audit run to compare (default: the latest published)")
    compare.add_argument("--junit", type=Path, metavar="FILE", help="also write the result as JUnit XML")
    compare.add_argument(
        "--max-examples", type=_non_negative_int, default=10, metavar="N", help="rows shown per kind (default: 10)"
    )

    vacuum = command(
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

    prepare = commands.add_parser(
        "prepare",
        help="Fetch the pinned jars and record the JVM class archive later runs start with (an installation step).",
        description="Fetch the pinned jars and record the JVM class archive later runs start with (an installation "
        "step).\n\n"
        + textwrap.fill(
            "Fetches the pinned jar bundles of pipeline/jars (delta-spark for the native Delta backend) from "
            "Maven Central with mvn, checked against their sha256 locks, into this installation; without Maven "
            "or its network it says so in one line and goes on (the embedded backend needs no jars). Then audits "
            "the bundled sample once in a temporary folder, in a JVM that writes the classes it loaded to "
            "a class-data archive (Java's AppCDS) inside this installation. Every later session that starts its "
            "own JVM maps them from the archive instead of reading them from Spark's jars, which cuts the fixed "
            "cost of a run. Run it again after changing Java or Spark; without an archive runs work as before.",
            width=79,
        ),
        epilog=_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prepare.add_argument("--conf", metavar="FILE", help="YAML config layered over conf/local.yaml (spark, delta)")
    prepare.add_argument(
        "--require-jars", action="store_true", help="exit 2 when a jar bundle cannot be fetched, instead of going on"
    )

    from pipeline.generate.command import add_generate_command

    add_generate_command(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    if getattr(args, "warehouse", None):
        overrides["warehouse"] = args.warehouse
    if getattr(args, "transaction_version", None):
        overrides["audit"] = {"transaction_version": args.transaction_version}
    if getattr(args, "fail_on", None):
        overrides["fail_on"] = args.fail_on
    if getattr(args, "full", False):
        overrides["ingest"] = {"incremental": False}
    return load_settings(args.conf, overrides)


def _check_local_paths(args: argparse.Namespace, settings: Settings) -> None:
    """Fail on missing local paths before paying for a Spark start-up; URIs are checked by the readers."""
    for root in getattr(args, "inputs", None) or []:
        if _URI.match(root):
            continue
        if not Path(root).exists():
            raise InputError(root, "no such file or directory")
        if Path(root).is_dir() and not _holds_a_file(Path(root)):
            raise InputError(root, "no Kafka log entries found: the directory holds no non-empty file")
    warehouse = settings.warehouse
    if _URI.match(warehouse):
        return
    if args.command in ("audit", "report", "vacuum", "compare") and not Path(warehouse).is_dir():
        raise InputError(warehouse, "warehouse not found; run `produce-audit ingest` (or `run`) first")
    if args.command != "compare":  # compare only reads it
        check_writable(Path(warehouse))


def _holds_a_file(directory: Path) -> bool:
    """Whether any non-empty regular file lies under `directory`; stops at the first one."""
    for folder, _, names in os.walk(directory):
        for name in names:
            with suppress(OSError):
                path = Path(folder) / name
                if path.is_file() and path.stat().st_size > 0:
                    return True
    return False


def check_writable(warehouse: Path) -> None:
    """Fail on a warehouse the run could not write, before Spark starts: try it, and leave nothing behind."""
    if warehouse.exists() and not warehouse.is_dir():
        raise InputError(str(warehouse), "the warehouse is not a directory")
    created = [parent for parent in [warehouse, *warehouse.parents] if not parent.exists()]
    try:
        warehouse.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=warehouse, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise InputError(str(warehouse), f"the warehouse is not writable: {exc.strerror or exc}") from None
    finally:
        for directory in created:  # deepest first
            with suppress(OSError):
                directory.rmdir()


def _execute(args: argparse.Namespace) -> int:
    if args.command == "generate":  # no Spark, no warehouse
        from pipeline.generate.command import run_command

        return run_command(args)
    settings = _settings(args)
    if args.command == "prepare":  # jars, then its own recording JVM; no warehouse
        from pipeline.prepare import install_jar_bundles, record_class_archive

        install_jar_bundles(args.require_jars)
        archive = record_class_archive(settings, new_run_id())
        log.info("class archive written to %s (%d MiB)", archive, archive.stat().st_size >> 20)
        return EXIT_OK
    _check_local_paths(args, settings)

    # Spark and the table store are imported here so that --help and argument errors answer at once.
    from pyspark.sql import SparkSession

    from pipeline.reports.summary import render_text
    from pipeline.session import build_session
    from pipeline.tables.lock import WarehouseLock
    from pipeline.tables.publication import WRITER_COMMANDS
    from pipeline.tables.store import TableStore

    if args.command == "compare":
        return _compare(args, settings)
    run_id = new_run_id()
    # Writers take the warehouse lock before Spark starts, so a second run fails at once.
    lock = WarehouseLock(settings.warehouse, run_id, args.command) if args.command in WRITER_COMMANDS else None
    owns_session = SparkSession.getActiveSession() is None
    with _terminated_as_error(owns_session), lock if lock is not None else nullcontext():
        spark = build_session(settings)
        try:
            store = TableStore(spark, settings.warehouse, backend=settings.delta.backend)
            log.info("%s %s started (Delta backend: %s)", args.command, run_id, store.backend_name)
            result = _step(args, spark, store, settings, run_id)
        finally:
            if owns_session:
                spark.stop()

    if result.summary is not None:
        _print_report(render_text(result.summary))
    code = exit_code_for(result.findings_by_severity, settings.fail_on)
    if code == EXIT_FINDINGS:
        log.info("exit %d: findings at or above %s", code, settings.fail_on)
    return code


def _compare(args: argparse.Namespace, settings: Settings) -> int:
    """Read-only: no lock, no run recorded; prints the differences, exit 1 when there are any."""
    from pyspark.sql import SparkSession

    from pipeline import runner
    from pipeline.reports.junit import write_junit
    from pipeline.session import build_session
    from pipeline.tables.store import TableStore

    owns_session = SparkSession.getActiveSession() is None
    spark = build_session(settings)
    try:
        store = TableStore(spark, settings.warehouse, backend=settings.delta.backend)
        diffs = runner.compare(store, args.golden, args.run_id, args.update_golden, args.max_examples)
    finally:
        if owns_session:
            spark.stop()
    if args.update_golden:
        print(f"golden outputs written to {args.golden}")
        return EXIT_OK
    for diff in diffs:
        print("\n".join(diff.lines()))
    if args.junit:
        write_junit(diffs, args.junit)
    differing = [diff.table for diff in diffs if not diff.equal]
    if differing:
        log.info("exit %d: %s differ from the golden outputs", EXIT_FINDINGS, ", ".join(differing))
        return EXIT_FINDINGS
    return EXIT_OK


# How often a SIGTERM that arrived during a call into the JVM is looked at again.
RECHECK_SECONDS = 0.05


class Terminated(BaseException):
    """SIGTERM (a scheduler's timeout, `kill`): unwinds like an error, so the run rolls back and unlocks."""


@contextmanager
def _terminated_as_error(enabled: bool) -> Iterator[None]:
    """Turn SIGTERM into Terminated while this process owns its Spark session (not inside a notebook).

    Terminated is raised outside calls into the JVM only. Raised inside one, it would leave the JVM's answer to
    that call unread on the thread's py4j connection, which then hands each later call the answer of the one
    before: the roll-back's calls would read wrong versions and a write could not find its commit, while the
    interrupted call went on committing behind the roll-back. A signal that arrives during a call is looked at
    again every RECHECK_SECONDS and raised once the call has returned.
    """
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        if _inside_jvm_call(frame):
            signal.signal(signal.SIGALRM, terminate)
            signal.setitimer(signal.ITIMER_REAL, RECHECK_SECONDS)
            return
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the roll-back short
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        raise Terminated(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, terminate)
    previous_alarm = signal.getsignal(signal.SIGALRM)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_alarm)
        signal.signal(signal.SIGTERM, previous)


def _inside_jvm_call(frame: Any) -> bool:
    """Whether py4j, which carries every call into the JVM, is on the stack that `frame` runs in."""
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("py4j."):
            return True
        frame = frame.f_back
    return False


def _print_report(text: str) -> None:
    """On stdout, or in PRODUCE_AUDIT_REPORT_FILE (set by spark-submit.sh, whose stdout mixes in the logs)."""
    target = os.environ.get("PRODUCE_AUDIT_REPORT_FILE")
    if target:
        Path(target).write_text(text + "\n")
    else:
        print(text)


def _step(args: argparse.Namespace, spark, store, settings: Settings, run_id: str):
    from pipeline import runner

    if args.command == "run":
        return runner.run(spark, store, settings, run_id, args.inputs, args.reference_time)
    if args.command == "ingest":
        return runner.ingest(spark, store, settings, run_id, args.inputs)
    if args.command == "audit":
        return runner.audit(spark, store, settings, run_id, args.reference_time)
    if args.command == "vacuum":
        return runner.vacuum(spark, store, settings, run_id, args.retention_hours, args.keep_runs)
    return runner.report(spark, store, settings, run_id, args.run_id)


@contextmanager
def _log_to_stderr() -> Iterator[None]:
    """Progress lines for the `pipeline` loggers, attached per call so that embedding programs keep control.

    PRODUCE_AUDIT_LOG_LEVEL=DEBUG adds the time of every state table and the size of every plan.
    """
    logger = logging.getLogger("pipeline")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(os.environ.get("PRODUCE_AUDIT_LOG_LEVEL", "INFO").upper())
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `produce-audit` console command and of the jobs/*.py spark-submit scripts."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors; the message is already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    with _log_to_stderr():
        try:
            return _execute(args)
        except (InputError, ConfigError) as exc:
            print(f"produce-audit {args.command}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except Terminated:
            log.error("%s terminated by SIGTERM; its commits were rolled back", args.command)
            return EXIT_INTERNAL
        except Exception:
            log.exception("%s failed", args.command)
            return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
