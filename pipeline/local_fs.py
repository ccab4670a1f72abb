"""Hadoop's local file system without a process per call, for a driver on this machine.

Without Hadoop's native library (Spark's wheel has none), Hadoop's local file system spawns `chmod` after it
creates each file or directory and `readlink` for each link status Delta's log store asks for when it renames:
about 640 processes forked by the driver JVM in one audit of the bundled sample. The classes in
`pipeline/java/org/produceaudit/localfs` do the same with Java's file API. `produce-audit prepare` compiles them
against the Hadoop jar Spark ships (when a JDK's `javac` is there) into the installation, and every session whose
driver starts on this machine puts the jar on the driver's class path and names the classes as the `file:`
scheme's file systems. Without the jar, or when the configuration names a `file:` implementation itself,
nothing changes but the speed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pyspark

from pipeline.class_archive import ARCHIVE_DIR

log = logging.getLogger(__name__)

SOURCES = Path(__file__).with_name("java")
CLASS_PATH = "spark.driver.extraClassPath"
FILE_SYSTEM = "spark.hadoop.fs.file.impl"
FILE_CONTEXT = "spark.hadoop.fs.AbstractFileSystem.file.impl"
CLASSES = {
    FILE_SYSTEM: "org.produceaudit.localfs.NioLocalFileSystem",
    FILE_CONTEXT: "org.produceaudit.localfs.NioLocalFs",
}
JAVAC_SECONDS = 300


def _hadoop_jar() -> Path:
    """The Hadoop client API jar Spark ships: the classes are compiled against it."""
    return next((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))


def jar_path() -> Path:
    """Where the jar of these sources, compiled for this Spark, is kept; a change of either names another jar, so a
    stale one is never used."""
    digest = hashlib.sha256(_hadoop_jar().name.encode())
    for source in sorted(SOURCES.rglob("*.java")):
        digest.update(source.relative_to(SOURCES).as_posix().encode())
        digest.update(source.read_bytes())
    return ARCHIVE_DIR / "local-fs" / f"local-fs-{digest.hexdigest()[:12]}.jar"


def installed() -> Path | None:
    """The compiled jar, when `produce-audit prepare` built it for this installation."""
    jar = jar_path()
    return jar if jar.is_file() else None


def _javac() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "javac") if java_home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    return shutil.which("javac")


def build() -> Path | None:
    """Compile the sources into `jar_path()`; None, with one warning line, when no JDK compiler is found or it
    fails. The jar is written under a temporary name and moved into place whole.

    A jar already there is kept: its name says it holds these sources compiled against this Hadoop, and a class
    archive recorded with it (pipeline.class_archive) maps only while the jar is that very file.
    """
    target = jar_path()
    if target.is_file():
        return target
    javac = _javac()
    if javac is None:
        log.warning("no javac (a JDK) found: Hadoop's local file system keeps spawning chmod and readlink")
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="produce-audit-local-fs-") as work:
        sources = [str(source) for source in sorted(SOURCES.rglob("*.java"))]
        command = [javac, "--release", "17", "-nowarn", "-d", work, "-cp", str(_hadoop_jar()), *sources]
        compiled = subprocess.run(command, capture_output=True, text=True, timeout=JAVAC_SECONDS, check=False)
        if compiled.returncode != 0:
            detail = compiled.stderr.strip()
            log.warning("javac failed (%s): Hadoop's local file system keeps spawning processes", detail)
            return None
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            for path in sorted(Path(work).rglob("*.class")):
                jar.write(path, path.relative_to(work).as_posix())
        os.replace(partial, target)
    return target


def with_local_fs(conf: Mapping[str, str], master: str) -> dict[str, str]:
    """`conf` plus the jar on the driver's class path and its classes as the `file:` file systems, for a local
    master (the executors share the driver's JVM, so they have the jar too). Unchanged without the jar, for
    other masters, and when `conf` names a `file:` implementation of its own."""
    jar = installed()
    if jar is None or not master.startswith("local") or any(key in conf for key in CLASSES):
        return dict(conf)
    class_path = os.pathsep.join(filter(None, [conf.get(CLASS_PATH, ""), str(jar)]))
    return {**conf, CLASS_PATH: class_path, **CLASSES}
