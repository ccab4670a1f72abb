"""The Kafka jars of the installed `kafka-broker` bundle, and Java programs run against them.

The broker, its storage tool, DumpLogSegments and the Java client all come from one pinned bundle
(pipeline/jars/kafka-broker), so the fixture runs exactly the Kafka release the lock names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pipeline import jar_bundles

BUNDLE = "kafka-broker"


def missing() -> str | None:
    """Why the broker cannot run here, or None when Java and the bundle are installed."""
    if java() is None:
        return "Java not found (set JAVA_HOME or put java on PATH)"
    if jar_bundles.installed(BUNDLE) is None:
        return (
            f"jar bundle {BUNDLE!r} not installed "
            f"(python -c \"from pipeline import jar_bundles; jar_bundles.fetch('{BUNDLE}')\", or produce-audit prepare)"
        )
    return None


def java(tool: str = "java") -> str | None:
    """`java` or `javac` of JAVA_HOME, else of PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / tool).is_file():
        return str(Path(home) / "bin" / tool)
    return shutil.which(tool)


def classpath(*extra: Path) -> str:
    return os.pathsep.join([*(str(p) for p in extra), *jar_bundles.classpath(BUNDLE)])


def command(
    main_class: str,
    *args: str,
    heap: str = "256m",
    extra_classpath: tuple[Path, ...] = (),
    options: tuple[str, ...] = (),
) -> list[str]:
    """The java command line running `main_class` on the bundle's classpath with a small heap."""
    return [
        java() or "java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *options,
        "-cp", classpath(*extra_classpath), main_class, *args,
    ]  # fmt: skip


def run(main_class: str, *args: str, timeout: int = 120, **kwargs) -> str:
    """Run a Kafka tool to completion and return its standard output; a failure raises with its stderr."""
    done = subprocess.run(
        command(main_class, *args, **kwargs), capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{main_class} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout
