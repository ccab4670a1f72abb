"""StructType constants, one module per Delta table written under the warehouse."""

from schemas.batches import BATCHES, BATCHES_PARTITION_BY
from schemas.findings import FINDINGS, FINDINGS_PARTITION_BY
from schemas.partition_summary import PARTITION_SUMMARY, PARTITION_SUMMARY_PARTITION_BY
from schemas.producer_state import PRODUCER_STATE, PRODUCER_STATE_PARTITION_BY
from schemas.runs import RUNS
from schemas.transactions import TRANSACTIONS, TRANSACTIONS_PARTITION_BY

__all__ = [
    "BATCHES",
    "BATCHES_PARTITION_BY",
    "FINDINGS",
    "FINDINGS_PARTITION_BY",
    "PARTITION_SUMMARY",
    "PARTITION_SUMMARY_PARTITION_BY",
    "PRODUCER_STATE",
    "PRODUCER_STATE_PARTITION_BY",
    "RUNS",
    "TRANSACTIONS",
    "TRANSACTIONS_PARTITION_BY",
]
