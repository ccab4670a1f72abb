"""`produce-audit prepare`: the installation step that fetches the jar bundles (pipeline.jar_bundles), compiles
the local file system classes (pipeline.local_fs), compiles the package's Python bytecode and then records the JVM
class archive (pipeline.class_archive).

The jars come first so that the archive is recorded in the session later runs start: with delta-spark unless the
configured backend is `embedded`, and with the local file system's jar when a JDK compiled it. Without Maven or
Maven Central the jars are skipped, one line says so, and runs use the embedded Delta backend; `--require-jars`
makes that an error instead.

The archive: it audits the bundled sample once, in a temporary folder, in a JVM started with
-XX:ArchiveClassesAtExit; that JVM writes the archive as it exits, which it does when its standard input
closes. The archive is written under a temporary name and moved into place whole, so a session never maps a
half-written one.
"""

from __future__ import annotations

import compileall
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pyspark import SparkContext

import pipeline
import schemas
from pipeline import delta_jars, jar_bundles, local_fs, runner
from pipeline.class_archive import JAVA_OPTIONS, archive_path, recording
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.samples import generate
from pipeline.session import build_session
from pipeline.tables.store import TableStore

log = logging.getLogger(__name__)
JVM_EXIT_SECONDS = 600  # writing the archive takes seconds; a JVM still alive after this is stuck


def install_jar_bundles(require: bool) -> None:
    """Fetch every jar bundle; a failure is one warning line, or with `require` an input error (exit 2)."""
    for name, error in jar_bundles.fetch_all().items():
        if error.detail:
            log.debug("Maven's output for %s:\n%s", name, error.detail)
        if require:
            raise InputError(f"pipeline/jars/{name}", str(error))
        fallback = " (Delta tables use the embedded backend)" if name == delta_jars.BUNDLE else ""
        log.warning("%s; going on without it%s", error, fallback)


def build_local_fs() -> None:
    """Compile the local file system classes (pipeline.local_fs) before the archive is recorded, so that the
    archive holds them and the class path it was recorded with is the one later sessions start with."""
    jar = local_fs.build()
    if jar is not None:
        log.info("local file system classes compiled into %s", jar)


def compile_bytecode(folders: Iterable[str] = (*pipeline.__path__, *schemas.__path__)) -> None:
    """Write the bytecode of every module under `folders` (the package's). An editable install (pip install -e)
    compiles none, and with PYTHONDONTWRITEBYTECODE set no process writes it: the driver, and every Python worker
    Spark forks, would then compile each module it imports from source again (about 0.5 s of CPU for a process
    that imports the audit)."""
    for folder in folders:
        if not compileall.compile_dir(folder, quiet=1):
            log.warning("some modules under %s could not be compiled to bytecode", folder)


def record_class_archive(settings: Settings, run_id: str) -> Path:
    """Audit the bundled sample in a recording JVM and keep the archive it writes; returns the archive's path."""
    target = archive_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    conf = {**settings.spark.conf, JAVA_OPTIONS: recording(settings.spark.conf.get(JAVA_OPTIONS, ""), partial)}
    recording_settings = settings.model_copy(update={"spark": settings.spark.model_copy(update={"conf": conf})})
    with tempfile.TemporaryDirectory(prefix="produce-audit-prepare-") as work:
        root = generate(Path(work) / "sample")
        spark = build_session(recording_settings)
        jvm = SparkContext._gateway.proc  # the JVM itself: spark-submit execs it
        try:
            store = TableStore(spark, f"{work}/warehouse", backend=settings.delta.backend)
            runner.run(spark, store, settings, run_id, [str(root)], None)
        finally:
            spark.stop()
        log.info("waiting for the JVM to write its class archive")
        jvm.stdin.close()
        jvm.wait(timeout=JVM_EXIT_SECONDS)
    if not partial.is_file():
        raise RuntimeError(f"the JVM exited with {jvm.returncode} and wrote no class archive at {partial}")
    os.replace(partial, target)
    return target
