"""The replay a run keeps in the warehouse (`_replay/`), so that the next run replays only what was appended since.

A run's replay (pipeline.audit.replay.plan) is written per Kafka partition: a `body` file of its rows, and, in files
shared by a task, each replica's last row (`tails`) and where the replay left each replica and producer (`ends`,
pipeline.audit.replay.task.ReplayEnds). Its manifest (`_replay/<run id>.json`) names those files and the `batches`
files the replay read. The next run goes on from the manifest of the last published audit: a partition whose
earlier files are all still there gets only its added files replayed, from the ends, and keeps its body files;
every row keeps what a replay of the whole partition gives it, because nothing a row's replay columns say depends
on the rows after it except the next entry of a replica's last row (rewritten with the tail) and the transaction
version concluded over a producer's rows (a partition where it changes is replayed whole, as is one whose
earlier files changed, whose audited replica changed, or whose rows do not come after the kept ones).
tests/integration/test_kept_replay.py holds the replay of a nightly run to the replay of a full one.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import schemas
from pipeline import __version__
from pipeline.config import AuditSettings
from pipeline.tables.files import children, filesystem, remove_tree

log = logging.getLogger(__name__)

KEPT_FOLDER = "_replay"  # under the warehouse
MOST_BODY_FILES = 8  # a partition with more kept body files is replayed whole, into one file again

WRITTEN = pa.schema(
    [
        ("kind", pa.string()),  # body, tails, ends, output
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("topic", pa.string()),  # body files: the partition they hold
        ("partition", pa.int32()),
        ("whole", pa.bool_()),  # body files: the partition was replayed whole
        ("table", pa.string()),  # output files (pipeline.audit.replay.task_outputs): the scratch table they belong to
    ]
)

# `ends` files: one row per replica (is_producer_row null, `carry` a FileOrderCarry) and one per producer group
ENDS = pa.schema(
    [
        ("cluster_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("broker_id", pa.int32()),
        ("producer_id", pa.int64()),
        ("is_producer_row", pa.bool_()),
        ("carry", pa.list_(pa.int64())),
    ]
)


@dataclass
class KeptReplay:
    """A manifest: what one run's replay left, and what it read."""

    run_id: str
    fingerprint: str
    partitions: dict[str, dict] = field(default_factory=dict)  # partition_key -> {"read", "body", "replicas"}
    tails: list[str] = field(default_factory=list)
    ends: list[str] = field(default_factory=list)
    coordinator_versions: str | None = None
    row_findings: dict[str, str] = field(default_factory=dict)  # per row- or coordinator-local frame: its findings
    tables: dict[str, str] = field(default_factory=dict)  # per table made from the replay: its folder (kept_tables)
    # per `__transaction_state` partition: what its coordinator records were made from (kept_coordinator)
    coordinator_sources: dict[str, str] = field(default_factory=dict)


def partition_key(topic: str, partition: int) -> str:
    return json.dumps([topic, partition])


def fingerprint(settings: AuditSettings, with_transaction_log: bool) -> str:
    """What a row's replay and its findings depend on besides the rows: the settings, whether the coordinator's
    records were read, and the audit's code. A kept replay made under another is not gone on from."""
    facts = {
        "settings": settings.model_dump(mode="json"),
        "version": __version__,
        "code": AUDIT_CODE,
        "transaction_log": with_transaction_log,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()


def _audit_code() -> str:
    """A hash of the audit's and the schemas' source: a check changed since the kept replay was made voids it."""
    digest = hashlib.sha256()
    for name, source in audit_sources():
        digest.update(name.encode() + source.read_bytes())
    return digest.hexdigest()


def audit_sources() -> list[tuple[str, Path]]:
    """Every module of the audit, in all its layers, and of the schemas, by its path in the package."""
    packages = (Path(__file__).parents[1], Path(schemas.__file__).parent)
    return [
        (f"{package.name}/{source.relative_to(package).as_posix()}", source)
        for package in packages
        for source in sorted(package.rglob("*.py"))
    ]


# Hashed as the code is loaded, not when a run ends: the source changed under a running process (an upgrade while a
# notebook's session runs) must not be taken for the code that made its replay.
AUDIT_CODE = _audit_code()


def manifest_path(folder: str, run_id: str) -> str:
    return f"{folder}/{run_id}.json"


def read_kept(folder: str, run_id: str | None) -> KeptReplay | None:
    """The manifest run `run_id` kept; None when there is none (the run kept no replay, or there is no run)."""
    if run_id is None:
        return None
    files, path = filesystem(manifest_path(folder, run_id))
    if files.get_file_info(path).type != pafs.FileType.File:
        return None
    with files.open_input_stream(path) as stream:
        kept = _moved(KeptReplay(**json.loads(stream.read())), lambda name: f"{folder}/{name}")
    missing = [name for name in _names(kept) if files.get_file_info(filesystem(name)[1]).type == pafs.FileType.NotFound]
    if missing:
        log.warning("the kept replay of run %s lacks %s; the audit replays every partition whole", run_id, missing[0])
        return None
    return kept


def write_kept(folder: str, kept: KeptReplay) -> None:
    """The manifest names its files from `folder`, so that a warehouse copied elsewhere keeps its replay."""
    files, path = filesystem(manifest_path(folder, kept.run_id))
    files.create_dir(path.rpartition("/")[0], recursive=True)
    relative = _moved(kept, lambda path: path.removeprefix(f"{folder}/"))
    with files.open_output_stream(path) as stream:
        stream.write(json.dumps(asdict(relative), sort_keys=True).encode())


def _moved(kept: KeptReplay, move) -> KeptReplay:
    """The manifest with the names of the replay's own files passed through `move`."""
    return KeptReplay(
        run_id=kept.run_id,
        fingerprint=kept.fingerprint,
        partitions={
            key: {**part, "body": [move(path) for path in part["body"]]} for key, part in kept.partitions.items()
        },
        tails=[move(path) for path in kept.tails],
        ends=[move(path) for path in kept.ends],
        coordinator_versions=None if kept.coordinator_versions is None else move(kept.coordinator_versions),
        row_findings={name: move(path) for name, path in kept.row_findings.items()},
        tables={name: move(path) for name, path in kept.tables.items()},
        coordinator_sources=kept.coordinator_sources,
    )


def sweep(folder: str, kept_run_id: str | None) -> list[str]:
    """Remove from `folder` everything the manifest of `kept_run_id` does not use: other runs' manifests, and the
    folders of runs none of whose files it names (a failed run's, or those a later replay no longer reads)."""
    files, root = filesystem(folder)
    kept = read_kept(folder, kept_run_id)
    used = set() if kept is None else _used(kept)
    removed = []
    for path in children(files, root):
        name = path.rpartition("/")[2]
        if kept is not None and name == f"{kept.run_id}.json":
            continue
        if name not in used:
            _remove(files, path)
            removed.append(name)
            continue
        for inner in children(files, path):  # what failed task attempts left beside the files used
            if inner.rpartition("/")[2] not in used[name]:
                _remove(files, inner)
                removed.append(f"{name}/{inner.rpartition('/')[2]}")
    return removed


def _remove(files: pafs.FileSystem, path: str) -> None:
    if files.get_file_info(path).type == pafs.FileType.Directory:
        remove_tree(files, path)
    else:
        files.delete_file(path)


def _names(kept: KeptReplay) -> list[str]:
    """The paths of the files (and the coordinator versions' folder) the manifest names."""
    paths = [*kept.tails, *kept.ends, *(path for part in kept.partitions.values() for path in part["body"])]
    paths += [*kept.row_findings.values(), *kept.tables.values()]
    return [*paths, kept.coordinator_versions] if kept.coordinator_versions else paths


def _used(kept: KeptReplay) -> dict[str, set[str]]:
    """The names of the files the manifest uses, by the name of the run folder holding them."""
    used: dict[str, set[str]] = {}
    for path in _names(kept):
        run, name = path.rstrip("/").rsplit("/", 2)[-2:]
        used.setdefault(run, set()).add(name)
    return used


_UNCHANGED = "cluster_id string, topic string, partition int"


@dataclass(frozen=True)
class CoordinatorOutcome:
    """The `__transaction_state` partitions whose findings are taken over from the kept replay `earlier`."""

    unchanged: list[tuple[str, str, int]]
    earlier: KeptReplay

    def partitions(self, spark) -> DataFrame:
        return F.broadcast(spark.createDataFrame(self.unchanged, _UNCHANGED))
