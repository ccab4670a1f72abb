"""`produce-audit` as the tests call it: the installed command in a process of its own, for what is about the
command (its JVM, its defaults, signals, spark-submit), or its entry point in this process, for what is about the
tables a run leaves. In this process `main()` reuses the test session's SparkSession: no JVM to start or warm up,
which is most of a small run's cost (a warm session audits the sample about three times faster than the command).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline.cli import main

CLI = Path(sys.executable).parent / "produce-audit"


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, timeout: int = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed command, its output captured."""
    return subprocess.run(
        [str(CLI), *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd
    )


def in_process(*args: str) -> Completed:
    """The command's entry point in this process (call it from a test that holds the `spark` fixture), its stdout
    and its log captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return Completed(code, out.getvalue(), err.getvalue())
