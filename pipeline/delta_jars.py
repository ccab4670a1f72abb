"""The Spark settings that put the installed delta-spark bundle (pipeline.jar_bundles) into a session.

The jars go in `spark.jars`, not on the JVM's classpath: Spark adds them to the driver's class loader in local
mode and ships them to every executor on a cluster, and the JVM's own classpath stays the one the class archive
(pipeline.class_archive) was recorded with, so that archive maps with and without them. Nothing is added for
the embedded backend, and nothing when the session is given a Delta of its own (`--packages`, `spark.jars`, or
Databricks, whose session exists before ours): two copies of delta-spark on one classpath would clash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pipeline import jar_bundles
from pipeline.config import ConfigError, load_settings

BUNDLE = "delta-spark"
EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
JARS = "spark.jars"
PACKAGES = "spark.jars.packages"
EXTENSIONS = "spark.sql.extensions"
SPARK_CATALOG = "spark.sql.catalog.spark_catalog"
_OWN_DELTA = ("io.delta", "delta-spark", "delta-core")  # in a package coordinate or a jar's file name
_SUBMIT_KEYS = {"--jars": JARS, "--packages": PACKAGES}
_PROPERTY = re.compile(r"^\s*([^\s=:#!][^\s=:]*)\s*[\s=:]\s*(.*?)\s*$")


def session_conf(conf: Mapping[str, str], backend: str) -> dict[str, str]:
    """`conf` plus the bundle's jars, the Delta session extension and catalog, when the backend may use them:
    `native`, and `auto`, which then finds delta-spark in the session and picks it (pipeline.tables.store)."""
    result = dict(conf)
    jars = jar_bundles.classpath(BUNDLE)
    if backend == "embedded" or not jars or brings_own_delta(result.get(JARS, ""), result.get(PACKAGES, "")):
        return result
    result[JARS] = ",".join(filter(None, [result.get(JARS, ""), *jars]))
    extensions = [name.strip() for name in result.get(EXTENSIONS, "").split(",") if name.strip()]
    result[EXTENSIONS] = ",".join(extensions if EXTENSION in extensions else [*extensions, EXTENSION])
    result.setdefault(SPARK_CATALOG, CATALOG)
    return result


def brings_own_delta(*jar_lists: str) -> bool:
    """Whether comma-separated jars or package coordinates already hold a delta-spark."""
    return any(marker in item for jars in jar_lists for item in jars.split(",") for marker in _OWN_DELTA)


def submit_options(properties_file: str, submit_args: Sequence[str], job_args: Sequence[str]) -> list[str]:
    """Options for spark-submit to append after `submit_args`, so that a job's JVM starts with the bundle.

    spark-submit keeps the last `--jars` and `--conf` of a key, so the values given here merge what the
    properties file and `submit_args` already set. The backend is the one the job's `--conf FILE` chooses; a
    config that does not load adds nothing (the job itself then exits 2 naming it).
    """
    try:
        settings = load_settings(([None] + _option_values(job_args, "--conf"))[-1])
    except ConfigError:
        return []
    conf = {**_properties(Path(properties_file)), **settings.spark.conf}
    for flag, key in _SUBMIT_KEYS.items():
        for value in _option_values(submit_args, flag):
            conf[key] = value
    for setting in _option_values(submit_args, "--conf"):
        key, separator, value = setting.partition("=")
        if separator:
            conf[key] = value
    added = session_conf(conf, settings.delta.backend)
    options = ["--jars", added[JARS]] if added.get(JARS) != conf.get(JARS) else []
    for key in (EXTENSIONS, SPARK_CATALOG):
        if added.get(key) != conf.get(key):
            options += ["--conf", f"{key}={added[key]}"]
    return options


def _option_values(args: Sequence[str], name: str) -> list[str]:
    """The values of every `name VALUE` and `name=VALUE` among `args`, in order."""
    values = []
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            values.append(args[index + 1])
        elif arg.startswith(f"{name}="):
            values.append(arg[len(name) + 1 :])
    return values


def _properties(path: Path) -> dict[str, str]:
    """The `key value` lines of a Spark properties file (comments and blank lines skipped)."""
    matches = (_PROPERTY.match(line) for line in path.read_text().splitlines()) if path.is_file() else ()
    return {match.group(1): match.group(2) for match in matches if match}
