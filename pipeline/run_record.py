"""The `runs` row that records each command, appended when it ends: for a writer that row publishes the run.

A writer also rolls back what unfinished runs left before it starts, upgrades a warehouse an older release wrote,
and rolls back its own commits when it fails (pipeline.tables.publication).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

import schemas
from pipeline import __version__
from pipeline.audit.replay.kept import KEPT_FOLDER, sweep
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.tables.publication import (
    AUDIT_COMMANDS,
    PUBLISHED_TABLES,
    STATUS_FAILED,
    STATUS_SUCCEEDED,
    UPGRADE_COMMAND,
    WRITER_COMMANDS,
    last_published,
    roll_back_unpublished,
    table_versions,
)
from pipeline.tables.store import TableStore
from pipeline.tables.upgrade import LAYOUT_VERSION, outdated_tables, upgrade_tables

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    """What a command produced: rows written per table, findings per severity, and the summary if one was built."""

    counts: dict[str, int] = field(default_factory=dict)
    findings_by_severity: dict[str, int] = field(default_factory=dict)
    summary: dict[str, Any] | None = None


@dataclass
class RunRecord:
    """What the command's `runs` row says of it besides its outcome, counts and table versions."""

    run_id: str
    command: str
    started_at: datetime
    inputs: list[str] | None
    reference_time_ms: int | None


@contextmanager
def recorded(
    spark: SparkSession,
    store: TableStore,
    settings: Settings,
    command: str,
    run_id: str,
    inputs: list[str] | None = None,
    reference_time_ms: int | None = None,
) -> Iterator[tuple[RunRecord, StepResult]]:
    """Append the command's `runs` row when it ends, last: for a writer that row publishes the run.

    A writer (which holds the warehouse lock) first rolls back what unfinished runs left, and rolls back its
    own commits when it fails, before recording the failure (without hiding the error).
    """
    record = RunRecord(run_id, command, datetime.now(UTC), inputs, reference_time_ms)
    result = StepResult()
    writes = command in WRITER_COMMANDS
    if writes:
        rolled_back = roll_back_unpublished(store) + _sweep_kept_replay(store)
        if rolled_back:
            result.counts["rolled_back"] = len(rolled_back)
        _upgrade(spark, store, settings, run_id)
    try:
        yield record, result
    except BaseException as error:
        try:
            if writes:
                roll_back_unpublished(store)
                _sweep_kept_replay(store)
            # An input error in a new warehouse changed nothing worth a `runs` table.
            if not (isinstance(error, InputError) and not store.exists("runs")):
                _append_run(spark, store, settings, record, STATUS_FAILED, result.counts)
        except Exception as exc:  # the step's own error is the one worth reporting
            log.warning("could not record failed run %s in %s: %s", run_id, store.path("runs"), exc)
        raise
    counts = dict(result.counts)
    counts.update({f"findings.{severity}": count for severity, count in result.findings_by_severity.items()})
    versions = table_versions(store) if writes else None
    _append_run(spark, store, settings, record, STATUS_SUCCEEDED, counts, versions)
    if writes:
        _sweep_kept_replay(store)


def _upgrade(spark: SparkSession, store: TableStore, settings: Settings, run_id: str) -> None:
    """Upgrade a warehouse an older release wrote (pipeline.tables.upgrade), published as a run of its own."""
    outdated = outdated_tables(store, list(PUBLISHED_TABLES))
    if not outdated:
        return
    record = RunRecord(f"{run_id}-upgrade", UPGRADE_COMMAND, datetime.now(UTC), None, None)
    actions = upgrade_tables(store, outdated)
    counts = {"upgraded_tables": len(actions), "layout_version": LAYOUT_VERSION}
    _append_run(spark, store, settings, record, STATUS_SUCCEEDED, counts, table_versions(store))


def _sweep_kept_replay(store: TableStore) -> list[str]:
    """Remove the kept replays no published audit goes on from (pipeline.audit.replay.kept)."""
    audited = last_published(store, AUDIT_COMMANDS)
    removed = sweep(f"{store.warehouse}/{KEPT_FOLDER}", audited and audited.run_id)
    return [f"swept kept replay {name}" for name in removed]


def _append_run(
    spark: SparkSession,
    store: TableStore,
    settings: Settings,
    record: RunRecord,
    status: str,
    counts: Mapping[str, int],
    versions: Mapping[str, int] | None = None,
) -> None:
    row = (
        record.run_id,
        record.command,
        record.started_at,
        datetime.now(UTC),
        status,
        record.inputs,
        record.reference_time_ms,
        store.backend_name,
        dict(counts),
        json.dumps(settings.model_dump(mode="json"), sort_keys=True),
        __version__,
        None if versions is None else dict(versions),
        None if versions is None else LAYOUT_VERSION,
    )
    store.append(spark.createDataFrame([row], schemas.RUNS), "runs")
