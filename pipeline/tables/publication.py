"""Published runs: readers see the warehouse as the last successful run left it, never a run halfway.

A run commits many Delta tables, each atomically but one after the other. Its `runs` row, appended last, is
what makes the whole run visible: a successful writer records there the version of every table as it left
them (`table_versions`). Readers (report, the notebook, time travel) read those versions. A run that dies
after some commits is therefore invisible to them, and the next writer, holding the warehouse lock
(pipeline.tables.lock), rolls each table back to its published version with a Delta RESTORE commit, removes
tables no published run knows, and sweeps the staging and scratch folders the dead run left behind. A failing
run does the same for itself before it records its failure.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import schemas
from pipeline.errors import InputError
from pipeline.tables.files import children, filesystem, remove_tree
from pipeline.tables.snapshot_files import plain_snapshot
from pipeline.tables.store import TableStore

log = logging.getLogger(__name__)

RUNS_TABLE = "runs"
PUBLISHED_TABLES = tuple(name for name in schemas.SCHEMAS if name != RUNS_TABLE)
UPGRADE_COMMAND = "upgrade"  # a writer's upgrade of a warehouse an older release wrote (pipeline.tables.upgrade)
WRITER_COMMANDS = ("ingest", "audit", "run", "vacuum", UPGRADE_COMMAND)
AUDIT_COMMANDS = ("audit", "run")  # commands whose run id names rows of the audit tables
STATUS_SUCCEEDED = "succeeded"
STATUS_FAILED = "failed"
LEFTOVER_FOLDERS = ("_scratch",)  # under the warehouse: intermediate tables of runs
STAGING_FOLDER = "_staging"  # under a table: files of the embedded backend's unfinished writes


@dataclass(frozen=True)
class PublishedRun:
    run_id: str
    command: str
    versions: dict[str, int] | None  # None: recorded by a release that did not publish versions


def table_versions(store: TableStore) -> dict[str, int]:
    """The latest version of every table of the warehouse: what a successful run publishes."""
    return {name: store.version(name) for name in PUBLISHED_TABLES if store.exists(name)}


def last_published(store: TableStore, commands: Iterable[str] = WRITER_COMMANDS) -> PublishedRun | None:
    """The latest successful run among `commands`, by the time it finished."""
    if not store.exists(RUNS_TABLE):
        return None
    commands = tuple(commands)
    runs = _runs_on_driver(store)
    if runs is not None:
        succeeded = [run for run in runs if run["command"] in commands and run["status"] == STATUS_SUCCEEDED]
        return _published(SimpleNamespace(**max(succeeded, key=_newest_first))) if succeeded else None
    row = (
        store.read(RUNS_TABLE, schema=schemas.RUNS)
        .where(F.col("command").isin(*commands) & (F.col("status") == STATUS_SUCCEEDED))
        .orderBy(F.col("finished_at").desc(), F.col("run_id").desc())
        .select(*_PUBLISHED_COLUMNS)
        .first()
    )
    return None if row is None else _published(row)


_PUBLISHED_COLUMNS = ("run_id", "command", "table_versions")


def _runs_on_driver(store: TableStore) -> list[dict] | None:
    """Every run's id, command, status, end and table versions, read from the `runs` table's files by delta-rs: a row
    per run, and no Spark job for the handful of rows each command looks up. None when its log needs Spark (a reader
    feature, a column an older release did not write)."""
    columns = [*_PUBLISHED_COLUMNS, "status", "finished_at"]
    try:
        table = plain_snapshot(store.path(RUNS_TABLE), None)
        if table is None or not set(columns) <= set(table.schema().to_arrow().names):
            return None
        rows = table.to_pyarrow_table(columns=columns).to_pylist()
    except Exception:  # a log delta-rs cannot open: Spark reads it
        return None
    for row in rows:
        versions = row["table_versions"]
        row["table_versions"] = None if versions is None else dict(versions)
    return rows


def _newest_first(run: dict) -> tuple:
    """Spark's order of `finished_at` descending, then `run_id` descending, as a key whose maximum comes first: a
    null end sorts last."""
    finished = run["finished_at"]
    return (finished is not None, finished or 0, run["run_id"])


def recent_published(store: TableStore, count: int) -> list[PublishedRun]:
    """The last `count` successful writers, newest first."""
    if count == 0 or not store.exists(RUNS_TABLE):
        return []
    rows = (
        store.read(RUNS_TABLE, schema=schemas.RUNS)
        .where(F.col("command").isin(*WRITER_COMMANDS) & (F.col("status") == STATUS_SUCCEEDED))
        .orderBy(F.col("finished_at").desc(), F.col("run_id").desc())
        .select("run_id", "command", "table_versions")
        .limit(count)
        .collect()
    )
    return [_published(row) for row in rows]


def published_run(store: TableStore, run_id: str, commands: Iterable[str] = AUDIT_COMMANDS) -> PublishedRun:
    """Run `run_id` as it was published; an input error when it is not a successful run among `commands`."""
    runs = store.read(RUNS_TABLE, schema=schemas.RUNS) if store.exists(RUNS_TABLE) else None
    row = (
        None
        if runs is None
        else runs.where(
            (F.col("run_id") == run_id) & F.col("command").isin(*commands) & (F.col("status") == STATUS_SUCCEEDED)
        )
        .select("run_id", "command", "table_versions")
        .first()
    )
    if row is None:
        raise InputError(
            store.path(RUNS_TABLE), f"run {run_id} is not a published {' or '.join(commands)} run of this warehouse"
        )
    return _published(row)


def published_as_of(
    store: TableStore, version: int | None = None, epoch_ms: int | None = None, commands: Iterable[str] = AUDIT_COMMANDS
) -> PublishedRun:
    """The latest published run among `commands` as of a version of `findings`, or as of a time.

    As of a version: the last run that published that version of findings or an earlier one. As of a time: the
    last run that finished by then. Past the latest version, or past the latest recorded run, is an input error:
    a later run could still change that answer, and an answer must not change once given.
    """
    commands = tuple(commands)
    runs = store.read(RUNS_TABLE, schema=schemas.RUNS).where(
        F.col("command").isin(*commands) & (F.col("status") == STATUS_SUCCEEDED)
    )
    if version is not None:
        latest = store.version("findings") if store.exists("findings") else None
        if latest is None or version > latest:
            newest = "it has none" if latest is None else f"the latest is {latest}"
            raise InputError(store.path("findings"), f"version {version} is past the latest version ({newest})")
        reached, point = F.col("table_versions")["findings"] <= version, f"version {version} of findings"
    else:
        latest_commit = store.history(RUNS_TABLE, limit=1)[0]["timestamp"] if store.exists(RUNS_TABLE) else None
        if latest_commit is None or epoch_ms > _epoch_ms(latest_commit):
            raise InputError(
                store.path(RUNS_TABLE),
                f"{_iso(epoch_ms)} is past the latest recorded run "
                f"({'none' if latest_commit is None else _iso(_epoch_ms(latest_commit))})",
            )
        reached, point = F.col("finished_at") <= F.timestamp_millis(F.lit(epoch_ms)), _iso(epoch_ms)
    row = (
        runs.where(reached)
        .orderBy(F.col("finished_at").desc(), F.col("run_id").desc())
        .select("run_id", "command", "table_versions")
        .first()
    )
    if row is None:
        raise InputError(store.path(RUNS_TABLE), f"{point} is before the first published {' or '.join(commands)} run")
    return _published(row)


def _epoch_ms(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp() * 1000)


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_published(store: TableStore, table: str, schema=None, run: PublishedRun | None = None) -> DataFrame:
    """`table` as the last published run (or `run`) left it: what notebooks and reports should read."""
    run = run or last_published(store)
    if run is None:
        raise InputError(store.path(RUNS_TABLE), "no published run in this warehouse")
    return store.read(table, schema=schema, version=(run.versions or {}).get(table))


def roll_back_unpublished(store: TableStore) -> list[str]:
    """Return every table to its last published version and sweep what unfinished runs left; the actions taken.

    Call it only while holding the warehouse lock: every change it undoes belongs to a run that is gone.
    """
    published = last_published(store)
    if published is not None and published.versions is None:
        log.warning("the last run was recorded without table versions; nothing to roll back to")
        return _sweep(store)
    versions = published.versions if published is not None else {}
    actions = []
    for name in PUBLISHED_TABLES:
        if not store.exists(name):
            continue
        if name not in versions:
            store.remove(name)
            actions.append(f"removed {name} (no published run wrote it)")
            continue
        current = store.version(name)
        if current != versions[name] and not _restored_to(store, name, versions[name]):
            store.restore(name, versions[name])
            actions.append(f"restored {name} from version {current} to {versions[name]}")
    actions += _sweep(store)
    for action in actions:
        log.warning("unfinished run: %s", action)
    return actions


def _restored_to(store: TableStore, table: str, version: int) -> bool:
    """Whether the table's latest commit is a restore to `version`: an earlier roll-back already put it back."""
    (latest,) = store.history(table, limit=1)
    return latest["operation"] == "RESTORE" and latest["parameters"].get("version") == str(version)


def _sweep(store: TableStore) -> list[str]:
    files, root = filesystem(store.warehouse)
    swept = [f"{root}/{folder}" for folder in LEFTOVER_FOLDERS]
    swept += [f"{root}/{name}/{STAGING_FOLDER}" for name in PUBLISHED_TABLES + (RUNS_TABLE,)]
    actions = []
    for folder in swept:
        leftovers = children(files, folder)
        if remove_tree(files, folder) and leftovers:
            actions.append(f"swept {len(leftovers)} leftover(s) from {folder}")
    return actions


def _published(row) -> PublishedRun:
    versions = None if row.table_versions is None else {name: int(v) for name, v in row.table_versions.items()}
    return PublishedRun(row.run_id, row.command, versions)
