"""SparkSession construction from settings; the one place that knows about master and Spark conf."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from pyspark.sql import SparkSession

from pipeline.class_archive import JAVA_OPTIONS, with_archive
from pipeline.compilers import with_compilers_for
from pipeline.config import Settings
from pipeline.delta_jars import session_conf
from pipeline.local_fs import with_local_fs

log = logging.getLogger(__name__)

PROGRESS_BAR = "spark.ui.showConsoleProgress"
# Libraries the audit and the report import once Spark is up, and that starting Spark never imports: a thread imports
# them while the driver waits for the JVM it launched, so their second or so of imports is not paid after it.
WARM_IMPORTS = ("numba", "pandas", "matplotlib.figure")
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def build_session(settings: Settings, expected_batches: int | None = None) -> SparkSession:
    """Reuse the active session (spark-submit, Databricks, tests) or build one from settings; a JVM started here
    for about `expected_batches` batches gets the compilers that size pays for (pipeline.compilers)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Local Python workers must use this interpreter (it has pyarrow and the project installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(settings.spark.app_name)
    master = configured_master(settings)
    if master:
        builder = builder.master(master)
    conf = dict(settings.spark.conf)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # else spark-submit started the JVM, with its jars (spark-submit.sh)
        conf = session_conf(conf, settings.delta.backend)
        conf = with_local_fs(conf, settings.spark.master or "")
        conf[JAVA_OPTIONS] = with_log_config(conf.get(JAVA_OPTIONS, ""))
    threshold = settings.spark.optimising_compiler_batches
    java_options = with_compilers_for(conf.get(JAVA_OPTIONS, ""), expected_batches, threshold)
    conf[JAVA_OPTIONS] = with_archive(java_options)  # the JVM starts here: let it map the archive
    conf = with_progress_bar(conf, sys.stderr)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_for_exit(spark: SparkSession) -> None:
    """Stop the session of a process that ends right after. PySpark's `stop` ends by waiting for its accumulator
    server's thread, which polls every half second (0.9 s of a 16 s sample run, BENCHMARKS.md): that thread is a
    daemon, so the session is stopped without it and the thread ends with the process."""
    context = spark.sparkContext
    if getattr(context, "_accumulatorServer", None) is not None:
        context._accumulatorServer = None
    spark.stop()


def with_log_config(java_options: str) -> str:
    """The JVM's options with Spark's log configured by the package's log4j2.properties, unless they name one."""
    if "log4j2.configurationFile" in java_options:
        return java_options
    return f"{java_options} -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}".strip()


def configured_master(settings: Settings) -> str | None:
    """The master this process sets; None when spark-submit set it (spark-submit.sh) or the config leaves it out."""
    if os.environ.get("SPARK_MASTER_FROM_SUBMIT"):
        return None
    return settings.spark.master or None


def import_while_starting(modules: tuple[str, ...] = WARM_IMPORTS) -> None:
    """Import `modules` on a daemon thread. No import deadlock: they import nothing of this project or of
    pyspark, so the thread never waits on a module lock the thread starting Spark holds while waiting on it."""
    threading.Thread(target=lambda: [importlib.import_module(name) for name in modules], daemon=True).start()


def with_progress_bar(conf: Mapping[str, str], stderr: TextIO) -> dict[str, str]:
    """Spark's console progress bar when stderr is an interactive terminal, where a person watches the stages
    advance; off in logs, CI output and schedulers, where its redrawn lines garble the text. A value the config
    sets is kept."""
    if PROGRESS_BAR in conf:
        return dict(conf)
    return {**conf, PROGRESS_BAR: "true" if stderr.isatty() else "false"}
