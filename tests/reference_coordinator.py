"""The coordinator records as Spark windows over every record: the definition the per-partition pass
(pipeline.audit.replay.coordinator_records) is held to (tests/integration/test_coordinator_records.py)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.replay.coordinator_records import PREVIOUS_FIELDS, RECORDS
from schemas.keys import TP


def spark_partition_set(partitions: Column) -> Column:
    """The sorted distinct `topic-partition` names of a record, as Spark's interpreted higher-order functions make them
    (the reference of pipeline.audit.replay.partition_sets)."""
    names = F.flatten(
        F.transform(
            partitions,
            lambda entry: F.transform(
                entry["partitions"], lambda p: F.concat_ws("-", entry["topic"], p.cast("string"))
            ),
        )
    )
    return F.array_sort(F.array_distinct(names))


def reference_records(rows: DataFrame) -> DataFrame:
    """RECORDS of `coordinator_records.audited_rows`, each partition's from its own rows alone."""
    in_partition = Window.partitionBy(*TP).orderBy("record_offset")
    gap_end = F.when(F.col("record_offset") > F.lag("record_offset").over(in_partition) + 1, F.col("record_offset"))
    last_gaps = rows.select(*TP, gap_end.alias("gap_end")).groupBy(*TP).agg(F.max("gap_end").alias("uncleaned_from"))
    records = rows.join(F.broadcast(last_gaps), on=TP, how="left").withColumn(
        "uncleaned_from", F.greatest("uncleaned_from", "cleaner_offset")
    )
    located = records.select(
        *[column for column in records.columns if column not in ("is_tombstone", "cleaner_offset")],
        F.coalesce("is_tombstone", F.lit(False)).alias("is_tombstone"),
        (F.col("record_offset") >= F.coalesce("uncleaned_from", F.lit(0))).alias("is_uncleaned"),
        F.col("record_offset").alias("base_offset"),
        F.col("record_offset").alias("last_offset"),
        spark_partition_set(F.col("partitions")).alias("partition_set"),
        (F.coalesce("client_transaction_version", F.lit(0)) == 2).alias("is_tv2"),
    )
    of_id = Window.partitionBy(*TP, "transactional_id").orderBy("record_offset")
    in_batch = Window.partitionBy(*TP, "broker_id", "source_file", "batch_base_offset").orderBy("record_offset")
    return located.select(
        "*",
        F.lead("record_offset").over(of_id).isNotNull().alias("followed"),
        F.lag("transaction_timeout_ms").over(of_id).alias("previous_timeout_ms"),
        F.when(F.lag("is_uncleaned").over(of_id), F.lag(F.struct(*PREVIOUS_FIELDS)).over(of_id)).alias("prev"),
        (F.row_number().over(in_batch) == 1).alias("is_first_of_batch"),
    ).select(*RECORDS.names)


def assert_same_records(spark, store, settings) -> int:
    """The records of an ingested warehouse's `transaction_log`, made by the tasks reading its files and by the
    exchange path, are the reference's; returns their count."""
    from pyspark.testing import assertDataFrameEqual

    import schemas
    from pipeline.audit.replay.coordinator_records import audited_records, audited_rows, records_pass
    from pipeline.audit.replay.plan import audited_broker, replica_facts

    def known_cluster(df: DataFrame) -> DataFrame:
        return df.withColumn("cluster_id", F.coalesce("cluster_id", F.lit("")))

    batches = known_cluster(store.read("batches", schema=schemas.BATCHES))
    transaction_log = known_cluster(store.read("transaction_log", schema=schemas.TRANSACTION_LOG))
    checkpoints = (
        known_cluster(store.read("checkpoints", schema=schemas.CHECKPOINTS)) if store.exists("checkpoints") else None
    )
    facts = replica_facts(audited_broker(batches), settings, checkpoints).collect()
    expected = reference_records(audited_rows(transaction_log, facts_frame(spark, facts), checkpoints))
    replicas = {(row.cluster_id, row.topic, row.partition): (row.broker_id, row.cleaner_offset) for row in facts}
    files = store.files_per_partition("transaction_log")
    assert files, "every file of an ingested log dir holds one partition"
    assertDataFrameEqual(records_pass(spark, files, replicas).frame(), expected)
    assertDataFrameEqual(audited_records(transaction_log, facts_frame(spark, facts), checkpoints), expected)
    return expected.count()


def facts_frame(spark, facts: list) -> DataFrame:
    rows = [(row.cluster_id, row.topic, row.partition, row.broker_id) for row in facts]
    return spark.createDataFrame(rows, "cluster_id string, topic string, partition int, broker_id int")
