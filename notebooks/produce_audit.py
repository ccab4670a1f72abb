# Databricks notebook source
# MAGIC %md
# MAGIC # produce-audit
# MAGIC Audit Kafka produce logs (idempotence, fencing, transactions) and explore the findings.
# MAGIC Point `log_roots` at copied broker log directories (one per broker, or a root holding several),
# MAGIC `kafka-dump-log` text, or columnar exports; tables are written under `warehouse`.
# MAGIC On Databricks the native Delta backend is used; elsewhere tables are committed with delta-rs.

# COMMAND ----------

# MAGIC %pip install produce-audit

# COMMAND ----------

dbutils.widgets.text("log_roots", "", "Log roots (comma separated)")  # noqa: F821
dbutils.widgets.text("warehouse", "/tmp/produce-audit/warehouse", "Warehouse")  # noqa: F821
dbutils.widgets.text("reference_time", "", "Reference time (ISO-8601 or epoch ms, empty = newest timestamp)")  # noqa: F821

# COMMAND ----------

from pipeline.cli import main  # noqa: E402

log_roots = [p.strip() for p in dbutils.widgets.get("log_roots").split(",") if p.strip()]  # noqa: F821
warehouse = dbutils.widgets.get("warehouse")  # noqa: F821
args = ["run", "--warehouse", warehouse, "--fail-on", "never"]
for root in log_roots:
    args += ["--input", root]
if dbutils.widgets.get("reference_time"):  # noqa: F821
    args += ["--reference-time", dbutils.widgets.get("reference_time")]  # noqa: F821
exit_code = main(args)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Findings of the latest run, most severe first

# COMMAND ----------

from pyspark.sql import functions as F  # noqa: E402

from pipeline.tables.publication import read_published  # noqa: E402
from pipeline.tables.store import TableStore  # noqa: E402

# Tables as the last published run left them: a run still going, or one that died, is never half-visible.
store = TableStore(spark, warehouse)  # noqa: F821
findings = read_published(store, "findings")
severity_rank = F.expr("array_position(array('INFO','WARN','ERROR','CRITICAL'), severity)")
display(findings.orderBy(severity_rank.desc(), "topic", "partition", "base_offset"))  # noqa: F821

# COMMAND ----------

# MAGIC %md
# MAGIC ## Open and hanging transactions, with the command that aborts each

# COMMAND ----------

display(  # noqa: F821
    findings.where(F.col("rule_code") == "LSO-002").select(
        "topic", "partition", "producer_id", "producer_epoch", "base_offset", F.col("evidence")["abort_command"]
    )
)

# COMMAND ----------

display(read_published(store, "partition_summary").orderBy("topic", "partition"))  # noqa: F821
display(read_published(store, "transactions").groupBy("topic", "outcome").count())  # noqa: F821

# COMMAND ----------

# MAGIC %md
# MAGIC ## Coordinator history of the transactional ids with `__transaction_state` findings (TSL rules)

# COMMAND ----------

if store.exists("transaction_log"):
    flagged = findings.where(F.col("rule_code").startswith("TSL-")).select(
        F.col("evidence")["transactional_id"].alias("transactional_id")
    )
    display(  # noqa: F821
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
    display(manifest.groupBy("run_id", "topic").agg(F.count("*").alias("segments"), F.sum("size_bytes")))  # noqa: F821
