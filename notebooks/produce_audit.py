# Databricks notebook source
# MAGIC %md
# MAGIC # produce-audit
# MAGIC Audit Kafka produce logs (idempotence, fencing, transactions) and explore the findings.
# MAGIC
# MAGIC Point `log_roots` at copied broker log directories (one per broker, or a root holding several),
# MAGIC `kafka-dump-log` text or columnar exports; left empty, the bundled sample (`samples/basic`) is audited.
# MAGIC Tables are written under `warehouse`. On Databricks the parameters are the widgets above; elsewhere
# MAGIC (`python notebooks/produce_audit.py`, `%run` in Jupyter) they come from the environment variables
# MAGIC `PRODUCE_AUDIT_LOG_ROOTS`, `PRODUCE_AUDIT_WAREHOUSE` and `PRODUCE_AUDIT_REFERENCE_TIME`.
# MAGIC
# MAGIC The next two cells install produce-audit on Databricks; everywhere else they are comments and the
# MAGIC project is expected to be installed already (`pip install -e .`). The first installs it from this
# MAGIC repository (a Git folder runs a notebook in its own directory, so `..` is the repository); to install
# MAGIC a built wheel instead (`python -m pip wheel --no-deps -w dist .`), put the wheel's path, for example
# MAGIC `/Volumes/main/default/libs/produce_audit-0.1.0-py3-none-any.whl`, in place of `..`. It is installed
# MAGIC without its dependencies because PySpark and delta-spark come with the runtime and must not be replaced
# MAGIC from PyPI; the second cell installs the others, as `pyproject.toml` lists them.

# COMMAND ----------

# MAGIC %pip install --quiet --no-deps ..

# COMMAND ----------

# MAGIC %pip install --quiet "deltalake>=1.6,<2" "pyarrow>=17" "pandas>=2.2,<3" "numpy>=1.26" "crc32c>=2.4" "numba>=0.61" "cramjam>=2.8" "PyYAML>=6" "pydantic>=2.5,<3" "matplotlib>=3.8" "kafka-python>=3.0.12,<3.1"

# COMMAND ----------

# ruff: noqa: E501  (the %pip cell above names every dependency on one line)
import os

if "DATABRICKS_RUNTIME_VERSION" in os.environ:
    dbutils.library.restartPython()  # noqa: F821  the packages just installed replace the runtime's own

# COMMAND ----------

import os  # noqa: E402  (again: restartPython cleared the state)
from pathlib import Path  # noqa: E402

ON_DATABRICKS = "DATABRICKS_RUNTIME_VERSION" in os.environ
# The notebook's folder: Databricks runs a notebook in it; a script or %run knows its own file.
NOTEBOOK_DIR = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
PARAMETERS = {  # name: (default, label); a widget on Databricks, PRODUCE_AUDIT_<NAME> elsewhere
    "log_roots": (str(NOTEBOOK_DIR.parent / "samples" / "basic"), "Log roots (comma separated)"),
    "warehouse": ("/tmp/produce-audit/warehouse", "Warehouse"),
    "reference_time": ("", "Reference time (ISO-8601 or epoch ms; empty: each partition's newest batch)"),
}

if ON_DATABRICKS:
    for name, (default, label) in PARAMETERS.items():
        dbutils.widgets.text(name, default, label)  # noqa: F821


def parameter(name: str) -> str:
    if ON_DATABRICKS:
        return dbutils.widgets.get(name).strip()  # noqa: F821
    return os.environ.get(f"PRODUCE_AUDIT_{name.upper()}", PARAMETERS[name][0]).strip()


log_roots = [root.strip() for root in parameter("log_roots").split(",") if root.strip()]
warehouse = parameter("warehouse")
reference_time = parameter("reference_time")
print(f"log roots: {log_roots}\nwarehouse: {warehouse}\nreference time: {reference_time or 'newest batch'}")

# COMMAND ----------

from pipeline.config import load_settings  # noqa: E402
from pipeline.session import build_session  # noqa: E402

# The notebook's session on Databricks (or any active one); elsewhere one built from conf/local.yaml. The steps
# below run on it, so it outlives each of them.
spark = build_session(load_settings())

# COMMAND ----------

# MAGIC %md
# MAGIC ## Display helpers
# MAGIC Databricks' `display` renders tables and charts; in Jupyter the first rows show as a pandas table, in a
# MAGIC script as text. Charts are matplotlib figures, saved as PNG beside the report when not in a notebook.

# COMMAND ----------

ROWS_SHOWN = 100


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def show(frame) -> None:
    """A Spark DataFrame as a table: only its first rows leave Spark."""
    if ON_DATABRICKS:
        display(frame)  # noqa: F821
    elif _ipython() is not None:
        from IPython.display import display as ipython_display

        ipython_display(frame.limit(ROWS_SHOWN).toPandas())
    else:
        frame.show(ROWS_SHOWN, truncate=False)


def show_chart(figure, name: str, folder: Path | None) -> None:
    """Inline in a notebook; otherwise written to `folder/<name>.png` when the folder is a local path."""
    if ON_DATABRICKS or _ipython() is not None:
        from matplotlib import pyplot

        pyplot.show()
    elif folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        figure.savefig(folder / f"{name}.png", bbox_inches="tight")
        print(f"chart written to {folder / f'{name}.png'}")


# COMMAND ----------

# MAGIC %md
# MAGIC ## Ingest, audit, report
# MAGIC Each step is the `produce-audit` command of the same name, run on this notebook's Spark session: it takes
# MAGIC the warehouse lock, records itself in the `runs` table and publishes its tables only when it succeeds.

# COMMAND ----------

from pipeline.cli import main  # noqa: E402


def step(*args: str) -> None:
    """Exit 0 or raise: findings are the notebook's subject, not a failure (hence --fail-on never)."""
    code = main([*args, "--warehouse", warehouse])
    if code != 0:
        raise RuntimeError(f"produce-audit {args[0]} exited with {code}; its error is printed above")


step("ingest", *[option for root in log_roots for option in ("--input", root)])

# COMMAND ----------

step("audit", "--fail-on", "never", *(["--reference-time", reference_time] if reference_time else []))

# COMMAND ----------

step("report", "--fail-on", "never")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Findings of the latest audit, most severe first

# COMMAND ----------

from pyspark.sql import functions as F  # noqa: E402

from pipeline.tables.publication import last_published, read_published  # noqa: E402
from pipeline.tables.store import TableStore  # noqa: E402

# Tables as the last published run left them: a run still going, or one that died, is never half-visible.
store = TableStore(spark, warehouse)
audited_run = last_published(store, ["audit"])
findings = read_published(store, "findings").where(F.col("run_id") == audited_run.run_id)
severity_rank = F.expr("array_position(array('INFO','WARN','ERROR','CRITICAL'), severity)")
show(findings.orderBy(severity_rank.desc(), "topic", "partition", "base_offset"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Findings by severity and by rule, transactions by outcome

# COMMAND ----------

from schemas.findings import SEVERITIES  # noqa: E402
from schemas.transactions import OUTCOME_ABORTED, OUTCOME_COMMITTED, OUTCOME_EMPTY, OUTCOME_OPEN  # noqa: E402


def counts(frame, column: str, categories=None):
    """Rows per value of `column` as a pandas Series (a few rows reach the driver), zero for absent categories."""
    series = frame.groupBy(column).count().toPandas().set_index(column)["count"].sort_index()
    return series if categories is None else series.reindex(categories, fill_value=0)


transactions = read_published(store, "transactions").where(F.col("run_id") == audited_run.run_id)
severity_counts = counts(findings, "severity", SEVERITIES)
rule_counts = counts(findings, "rule_code")
outcome_counts = counts(transactions, "outcome", [OUTCOME_COMMITTED, OUTCOME_ABORTED, OUTCOME_OPEN, OUTCOME_EMPTY])

from matplotlib import pyplot  # noqa: E402

if not (ON_DATABRICKS or _ipython() is not None):
    pyplot.switch_backend("Agg")  # no screen: the chart goes to a file
figure, (by_severity, by_rule, by_outcome) = pyplot.subplots(1, 3, figsize=(13, 3.5))
severity_counts.plot.bar(ax=by_severity, title="findings by severity", color="firebrick", rot=0)
if rule_counts.empty:
    by_rule.set_title("no findings")
else:
    rule_counts.plot.bar(ax=by_rule, title="findings by rule", rot=0)
outcome_counts.plot.bar(ax=by_outcome, title="transactions by outcome", color="seagreen", rot=0)
figure.tight_layout()
show_chart(figure, "findings", None if "://" in warehouse else Path(warehouse) / "reports" / audited_run.run_id)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Open and hanging transactions: why each has no marker, and the command that aborts it

# COMMAND ----------

show(
    transactions.where(F.col("outcome") == OUTCOME_OPEN)
    .select(
        "topic",
        "partition",
        "producer_id",
        "producer_epoch",
        "first_offset",
        "cause",
        "cause_evidence",
        "abort_command",
    )
    .orderBy("topic", "partition", "first_offset")
)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Partitions and transactions

# COMMAND ----------

partition_summary = read_published(store, "partition_summary").where(F.col("run_id") == audited_run.run_id)
show(partition_summary.orderBy("topic", "partition"))
show(transactions.groupBy("topic", "outcome").count().orderBy("topic", "outcome"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Coordinator history of the transactional ids with `__transaction_state` findings (TSL rules)

# COMMAND ----------

if store.exists("transaction_log"):
    flagged = findings.where(F.col("rule_code").startswith("TSL-")).select(
        F.col("evidence")["transactional_id"].alias("transactional_id")
    )
    show(
        read_published(store, "transaction_log")
        .join(flagged.distinct(), "transactional_id")
        .select("transactional_id", "record_offset", "state_name", "producer_id", "producer_epoch", "partitions")
        .orderBy("transactional_id", "record_offset")
    )

# COMMAND ----------

# MAGIC %md
# MAGIC ## Ingested segments by the run that last decoded them (incremental ingest skips the others)

# COMMAND ----------

if store.exists("ingest_manifest"):
    manifest = read_published(store, "ingest_manifest")
    show(manifest.groupBy("run_id", "topic").agg(F.count("*").alias("segments"), F.sum("size_bytes")))
