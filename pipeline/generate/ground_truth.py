"""The ground-truth table of a generated log root: one row per injected anomaly.

`DIR/_ground_truth.parquet` (the leading underscore keeps ingest from reading it: `input_plan` skips hidden
and `_`-prefixed paths, and the segment and side-file listings only take Kafka file names). Each row names the
finding the audit must raise (rule code, severity, where: topic, partition, broker, producer id, and the
offset of the batch, marker or record it points at; null for file-level findings) and, in `consequences`, the
other rule codes the same injection legitimately raises as well.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

FILE_NAME = "_ground_truth.parquet"

SCHEMA = pa.schema(
    [
        pa.field("anomaly", pa.string(), nullable=False),
        pa.field("rule_code", pa.string(), nullable=False),
        pa.field("severity", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("broker_id", pa.int32(), nullable=False),
        pa.field("producer_id", pa.int64()),
        pa.field("base_offset", pa.int64()),
        pa.field("consequences", pa.list_(pa.string()), nullable=False),
        pa.field("detail", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True)
class Truth:
    anomaly: str
    rule_code: str
    severity: str
    topic: str
    partition: int
    broker_id: int
    producer_id: int | None
    base_offset: int | None
    consequences: tuple[str, ...]
    detail: str


def write(out: Path, rows: list[Truth]) -> Path:
    path = Path(out) / FILE_NAME
    records = [{**asdict(row), "consequences": list(row.consequences)} for row in rows]
    pq.write_table(pa.Table.from_pylist(records, schema=SCHEMA), path)
    return path


def read(root: Path) -> pa.Table:
    return pq.read_table(Path(root) / FILE_NAME, schema=SCHEMA)
