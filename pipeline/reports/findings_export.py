"""findings.jsonl: every finding of a run as one JSON object a line, for alerting pipelines and `jq`.

Written by Spark into one file beside summary.json, most severe first; the driver never holds the rows, so a
run with millions of findings exports them the same way. Every line has every key of FIELDS, null when the
finding has no value, so consumers can rely on the key set (tests pin it).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.tables.files import children, filesystem, remove_tree
from schemas.findings import FINDINGS, SEVERITIES

FILE_NAME = "findings.jsonl"
FIELDS = tuple(FINDINGS.fieldNames())  # every column of the `findings` table, in its order


def write_findings_jsonl(findings: DataFrame, warehouse: str, run_id: str) -> str:
    """Write the rows of `findings` to WH/reports/<run_id>/findings.jsonl; return where.

    Spark writes one part file into a folder beside the target, which is then moved into place, so a reader
    never sees a half-written findings.jsonl.
    """
    relative = f"reports/{run_id}/{FILE_NAME}"
    files, root = filesystem(warehouse)
    target, work = f"{root}/{relative}", f"{root}/reports/{run_id}/.{FILE_NAME}.parts"
    worst_first = F.array_position(F.array(*[F.lit(s) for s in SEVERITIES]), F.col("severity")).desc()
    (
        findings.select(*FIELDS)
        .repartition(1)  # one file, sorted by its one task: a global sort would sample the rows in a job first
        .sortWithinPartitions(
            worst_first,
            "topic",
            "partition",
            "broker_id",
            "base_offset",
            "position",
            "rule_code",
            "message",
            "cluster_id",
        )
        .write.mode("overwrite")
        .option("ignoreNullFields", "false")
        .json(f"{warehouse.rstrip('/')}/{relative.rsplit('/', 1)[0]}/.{FILE_NAME}.parts")
    )
    parts = [path for path in children(files, work) if path.rsplit("/", 1)[-1].startswith("part-")]
    if parts:
        files.move(parts[0], target)  # one partition: the only part
    else:  # no rows, and Spark wrote no part
        with files.open_output_stream(target):
            pass
    remove_tree(files, work)
    return f"{warehouse.rstrip('/')}/{relative}"
