"""A class-data archive of the classes Spark's JVM loads in a run (Java's AppCDS), made once per installation.

A run on a small input spends about a quarter of its JVM's CPU looking classes up in the ~250 jars Spark ships
and parsing them (BENCHMARKS.md). A JVM started with an archive maps those classes ready-made instead.
`produce-audit prepare` audits the bundled sample once in a JVM that writes the archive as it exits; it is kept
inside the installation, named after the Spark version and the Java runtime, and every later session that
starts its own JVM uses it. A JVM whose classpath or version does not match the archive ignores it
(-Xshare:auto) and starts as it would without one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pyspark

ARCHIVE_DIR = Path(sys.prefix) / "share" / "produce-audit"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # a mismatched archive is not worth a warning on every start


def archive_path() -> Path:
    """Where this installation keeps the archive for the Java runtime that Spark will start."""
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else Path(shutil.which("java") or "java")
    runtime = hashlib.sha256(str(java.resolve()).encode()).hexdigest()[:12]
    return ARCHIVE_DIR / f"spark-{pyspark.__version__}-{runtime}.jsa"


def with_archive(java_options: str) -> str:
    """`java_options` plus the flags that map the archive, when there is one and the options name none."""
    archive = archive_path()
    if not archive.is_file() or "SharedArchiveFile" in java_options or "ArchiveClassesAtExit" in java_options:
        return java_options
    return f"{java_options} -XX:SharedArchiveFile={archive} -Xshare:auto {_QUIET}".strip()


def recording(java_options: str, target: Path) -> str:
    """`java_options` plus the flag that makes the JVM write its loaded classes to `target` when it exits."""
    return f"{java_options} -XX:ArchiveClassesAtExit={target} {_QUIET}".strip()
