"""The `produce-audit` command: exit codes, error messages and checks that need no Spark; the options live in
pipeline.arguments, the steps in runner.

Exit codes are a contract for schedulers and CI: 0 when no finding reaches --fail-on, 1 when one does,
2 for usage, config and input errors (one message on stderr naming the path), 3 for internal errors.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.arguments import build_parser, require_inputs
from pipeline.config import ConfigError, Settings, load_settings
from pipeline.errors import InputError
from pipeline.sources.kafka_wire.address import is_kafka_uri, parse_bootstrap
from pipeline.termination import Terminated, terminated_as_error
from schemas.findings import severity_at_least

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

LOG_LEVEL_VARIABLE = "PRODUCE_AUDIT_LOG_LEVEL"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
SUBJECT_INPUTS = 3  # inputs named in a command's first log line; a nightly run may have one per broker

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

log = logging.getLogger("pipeline.cli")


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


def settings_for(args: argparse.Namespace) -> Settings:
    """The config file layered over the defaults, with the command-line options over both."""
    overrides: dict[str, Any] = {}
    if getattr(args, "warehouse", None):
        overrides["warehouse"] = args.warehouse
    if getattr(args, "transaction_version", None):
        overrides["audit"] = {"transaction_version": args.transaction_version}
    if getattr(args, "fail_on", None):
        overrides["fail_on"] = args.fail_on
    ingest: dict[str, Any] = {}
    if getattr(args, "full", False):
        ingest["incremental"] = False
    if getattr(args, "deep", False):
        ingest["deep"] = True
    if getattr(args, "cluster_id", None) is not None:
        ingest["cluster_id"] = args.cluster_id
    if getattr(args, "input_clusters", None):
        ingest["input_clusters"] = args.input_clusters
    if ingest:
        overrides["ingest"] = ingest
    return load_settings(args.conf, overrides)


def _check_local_paths(args: argparse.Namespace, settings: Settings) -> None:
    """Fail on missing local paths before paying for a Spark start-up; URIs are checked by the readers."""
    for root in getattr(args, "inputs", None) or []:
        if is_kafka_uri(root):
            parse_bootstrap(root)  # a malformed URI fails here; the brokers are asked when the inputs are planned
            continue
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
    settings = settings_for(args)
    if args.command == "prepare":  # jars, then its own recording JVM; no warehouse
        from pipeline.prepare import build_local_fs, compile_bytecode, install_jar_bundles, record_class_archive

        install_jar_bundles(args.require_jars)
        build_local_fs()
        compile_bytecode()
        archive = record_class_archive(settings, new_run_id())
        log.info("class archive written to %s (%d MiB)", archive, archive.stat().st_size >> 20)
        return EXIT_OK
    _check_local_paths(args, settings)

    # Spark and the table store are imported here so that --help and argument errors answer at once.
    from pyspark.sql import SparkSession

    from pipeline.compilers import expected_batches
    from pipeline.reports.summary import render_text
    from pipeline.session import build_session, configured_master, import_while_starting, stop_for_exit
    from pipeline.tables.lock import WarehouseLock
    from pipeline.tables.publication import WRITER_COMMANDS
    from pipeline.tables.store import TableStore

    if args.command == "compare":
        return _compare(args, settings)
    run_id = new_run_id()
    # Writers take the warehouse lock before Spark starts, so a second run fails at once.
    lock = WarehouseLock(settings.warehouse, run_id, args.command) if args.command in WRITER_COMMANDS else None
    owns_session = SparkSession.getActiveSession() is None
    with terminated_as_error(owns_session), lock if lock is not None else nullcontext():
        started, subject = time.perf_counter(), _subject(args, settings)
        if owns_session:
            master = configured_master(settings) or "from spark-submit"
            log.info("%s %s: %s; starting Spark (master %s)", args.command, run_id, subject, master)
            import_while_starting()
        else:
            log.info("%s %s: %s", args.command, run_id, subject)
        batches = expected_batches(args.command, getattr(args, "inputs", None) or [], settings.warehouse)
        spark = build_session(settings, batches if owns_session else None)
        try:
            store = TableStore(spark, settings.warehouse, backend=settings.delta.backend)
            ready, backend = time.perf_counter() - started, store.backend_name
            log.info("%s %s: Spark ready in %.1f s (Delta backend: %s)", args.command, run_id, ready, backend)
            result = _step(args, spark, store, settings, run_id)
        finally:
            if owns_session:
                stop_for_exit(spark)

    if result.summary is not None:
        _print_report(render_text(result.summary))
    code = exit_code_for(result.findings_by_severity, settings.fail_on)
    if result.findings_by_severity:  # the commands that audit or report: their exit code says what was found
        log.info("exit %d: %s", code, _exit_meaning(code, settings.fail_on))
    return code


def _subject(args: argparse.Namespace, settings: Settings) -> str:
    """What a command works on, for its first log line: its inputs (the first few) and the warehouse."""
    inputs = getattr(args, "inputs", None) or []
    if not inputs:
        return f"warehouse {settings.warehouse}"
    more = f" and {len(inputs) - SUBJECT_INPUTS} more" if len(inputs) > SUBJECT_INPUTS else ""
    return f"{', '.join(inputs[:SUBJECT_INPUTS])}{more} into warehouse {settings.warehouse}"


def _exit_meaning(code: int, fail_on: str) -> str:
    if code == EXIT_FINDINGS:
        return f"findings at or above {fail_on}"
    if fail_on == "never":
        return "fail_on is never: findings never fail the run"
    return f"no finding at or above {fail_on}"


def _compare(args: argparse.Namespace, settings: Settings) -> int:
    """Read-only: no lock, no run recorded; prints the differences, exit 1 when there are any."""
    if args.update_golden and args.golden is None:
        raise InputError("--update-golden", "writes a golden folder: give --golden DIR, not --baseline-run")
    from pyspark.sql import SparkSession

    from pipeline import runner
    from pipeline.reports.junit import write_junit
    from pipeline.session import build_session, stop_for_exit
    from pipeline.tables.store import TableStore

    owns_session = SparkSession.getActiveSession() is None
    spark = build_session(settings)
    try:
        store = TableStore(spark, settings.warehouse, backend=settings.delta.backend)
        diffs = runner.compare(
            store, args.golden, args.run_id, args.update_golden, args.max_examples, args.baseline_run
        )
    finally:
        if owns_session:
            stop_for_exit(spark)
    if args.update_golden:
        print(f"golden outputs written to {args.golden}")
        return EXIT_OK
    for diff in diffs:
        print("\n".join(diff.lines()))
    if args.junit:
        write_junit(diffs, args.junit)
    differing = [diff.table for diff in diffs if not diff.equal]
    if differing:
        log.info("exit %d: %s differ from the %s rows", EXIT_FINDINGS, ", ".join(differing), diffs[0].reference)
        return EXIT_FINDINGS
    return EXIT_OK


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
    as_of = None if args.as_of is None else (args.as_of.version, args.as_of.epoch_ms)
    return runner.report(spark, store, settings, run_id, args.run_id, as_of)


def _log_level() -> str:
    """PRODUCE_AUDIT_LOG_LEVEL, checked before anything runs: a typo must exit 2, not 1 (the code of findings)."""
    given = os.environ.get(LOG_LEVEL_VARIABLE, "INFO")
    if given.strip().upper() not in LOG_LEVELS:
        raise ConfigError(f"{LOG_LEVEL_VARIABLE}={given!r} is not one of {', '.join(LOG_LEVELS)}")
    return given.strip().upper()


@contextmanager
def _log_to_stderr(level: str) -> Iterator[None]:
    """Progress lines for the `pipeline` loggers, attached per call so that embedding programs keep control.

    At INFO a command says what it works on, when each major step ends and what it found; warnings stand out
    among a dozen lines. PRODUCE_AUDIT_LOG_LEVEL=DEBUG adds the detail: each table written with its rows, each
    audit stage, the Spark settings chosen for the input's size, the size of every plan.
    """
    logger = logging.getLogger("pipeline")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
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
        require_inputs(parser, args)
    except SystemExit as exc:  # --help, --version and usage errors; the message is already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        level = _log_level()
    except ConfigError as exc:
        print(f"produce-audit {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with _log_to_stderr(level):
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
