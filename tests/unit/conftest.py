"""The unit tests run without a JVM: a test here that asks for Spark, starts a JVM or runs a command that starts one
fails, naming what it did, so that `pytest tests/unit` stays quick and needs no Java.

- The `spark` fixture of tests/conftest.py is replaced here by one that fails, and with it every fixture built on
  it (`scratch`, `two_audit_runs`, `generated_warehouse`): the session's SparkSession is never created for a unit
  test.
- In this process a SparkSession or SparkContext cannot be built or got, nor a JVM launched; and no session counts
  as active, so code that would reuse one that an integration test left running on the same xdist worker (as
  `pipeline.cli.main` does) tries to build its own and fails as well.
- A subprocess of `java`, `javac`, `spark-submit`, `spark-class` or the installed `produce-audit` command fails to
  start. A test that needs any of these belongs in tests/integration.
"""

from __future__ import annotations

import os
import subprocess

import pytest

# The programs that start a JVM: Java's launchers, Spark's scripts, and the command, which starts Spark for most of
# its subcommands (a unit test calls pipeline.cli.main for what needs no Spark).
JVM_PROGRAMS = frozenset({"java", "javac", "spark-submit", "spark-submit.sh", "spark-class", "produce-audit"})
MOVE = "it needs a JVM, so it belongs in tests/integration"


class JVMRefused(BaseException):
    """Raised where a JVM would start; a BaseException, so that code catching Exception does not swallow it."""


@pytest.fixture(scope="session")
def spark():
    pytest.fail(f"a unit test asked for the `spark` fixture: {MOVE}", pytrace=False)


@pytest.fixture(autouse=True)
def no_jvm(monkeypatch):
    from pyspark.core import context
    from pyspark.sql import SparkSession

    def refuse(what: str):
        def refused(*args, **kwargs):
            raise JVMRefused(f"a unit test {what}: {MOVE}")

        return refused

    monkeypatch.setattr(context, "launch_gateway", refuse("launched a JVM"))
    monkeypatch.setattr(context.SparkContext, "_ensure_initialized", classmethod(refuse("built a SparkContext")))
    monkeypatch.setattr(context.SparkContext, "getOrCreate", classmethod(refuse("got a SparkContext")))
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse("built a SparkSession"))
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))

    popen_init = subprocess.Popen.__init__

    def checked_init(self, args, *rest, **kwargs):
        if not isinstance(args, str | bytes | os.PathLike):
            args = list(args)
        first = args if isinstance(args, str | bytes | os.PathLike) else args[0] if args else ""
        words = os.fsdecode(first).split()  # a shell command line's first word too
        if words and os.path.basename(words[0]) in JVM_PROGRAMS:
            raise JVMRefused(f"a unit test ran {os.path.basename(words[0])}: {MOVE}")
        popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", checked_init)
