"""StructType constants, one module per Delta table written under the warehouse."""

from schemas.batches import BATCHES, BATCHES_PARTITION_BY
from schemas.checkpoints import CHECKPOINTS, CHECKPOINTS_PARTITION_BY
from schemas.file_problems import FILE_PROBLEMS, FILE_PROBLEMS_PARTITION_BY
from schemas.findings import FINDINGS, FINDINGS_PARTITION_BY
from schemas.global_transactions import GLOBAL_TRANSACTIONS, GLOBAL_TRANSACTIONS_PARTITION_BY
from schemas.ingest_manifest import INGEST_MANIFEST, INGEST_MANIFEST_PARTITION_BY
from schemas.leader_epochs import LEADER_EPOCHS, LEADER_EPOCHS_PARTITION_BY
from schemas.live_producers import LIVE_PRODUCERS, LIVE_PRODUCERS_PARTITION_BY
from schemas.offset_commits import OFFSET_COMMITS, OFFSET_COMMITS_PARTITION_BY
from schemas.partition_metadata import PARTITION_METADATA, PARTITION_METADATA_PARTITION_BY
from schemas.partition_summary import PARTITION_SUMMARY, PARTITION_SUMMARY_PARTITION_BY
from schemas.payloads import PAYLOADS, PAYLOADS_PARTITION_BY
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS, PRODUCER_SNAPSHOTS_PARTITION_BY
from schemas.producer_state import PRODUCER_STATE, PRODUCER_STATE_PARTITION_BY
from schemas.read_committed import READ_COMMITTED, READ_COMMITTED_PARTITION_BY
from schemas.runs import RUNS
from schemas.transaction_log import TRANSACTION_LOG, TRANSACTION_LOG_PARTITION_BY
from schemas.transactions import TRANSACTIONS, TRANSACTIONS_PARTITION_BY
from schemas.txn_index import TXN_INDEX, TXN_INDEX_PARTITION_BY

# every table by its name under the warehouse
SCHEMAS = {
    "batches": BATCHES,
    "checkpoints": CHECKPOINTS,
    "file_problems": FILE_PROBLEMS,
    "findings": FINDINGS,
    "global_transactions": GLOBAL_TRANSACTIONS,
    "ingest_manifest": INGEST_MANIFEST,
    "leader_epochs": LEADER_EPOCHS,
    "live_producers": LIVE_PRODUCERS,
    "offset_commits": OFFSET_COMMITS,
    "partition_metadata": PARTITION_METADATA,
    "partition_summary": PARTITION_SUMMARY,
    "payloads": PAYLOADS,
    "producer_snapshots": PRODUCER_SNAPSHOTS,
    "producer_state": PRODUCER_STATE,
    "read_committed": READ_COMMITTED,
    "runs": RUNS,
    "transaction_log": TRANSACTION_LOG,
    "transactions": TRANSACTIONS,
    "txn_index": TXN_INDEX,
}

# every table's partition columns by its name (`runs` is not partitioned)
PARTITION_BY = {
    "batches": BATCHES_PARTITION_BY,
    "checkpoints": CHECKPOINTS_PARTITION_BY,
    "file_problems": FILE_PROBLEMS_PARTITION_BY,
    "findings": FINDINGS_PARTITION_BY,
    "global_transactions": GLOBAL_TRANSACTIONS_PARTITION_BY,
    "ingest_manifest": INGEST_MANIFEST_PARTITION_BY,
    "leader_epochs": LEADER_EPOCHS_PARTITION_BY,
    "live_producers": LIVE_PRODUCERS_PARTITION_BY,
    "offset_commits": OFFSET_COMMITS_PARTITION_BY,
    "partition_metadata": PARTITION_METADATA_PARTITION_BY,
    "partition_summary": PARTITION_SUMMARY_PARTITION_BY,
    "payloads": PAYLOADS_PARTITION_BY,
    "producer_snapshots": PRODUCER_SNAPSHOTS_PARTITION_BY,
    "producer_state": PRODUCER_STATE_PARTITION_BY,
    "read_committed": READ_COMMITTED_PARTITION_BY,
    "runs": [],
    "transaction_log": TRANSACTION_LOG_PARTITION_BY,
    "transactions": TRANSACTIONS_PARTITION_BY,
    "txn_index": TXN_INDEX_PARTITION_BY,
}

__all__ = [
    "SCHEMAS",
    "PARTITION_BY",
    "BATCHES",
    "BATCHES_PARTITION_BY",
    "CHECKPOINTS",
    "CHECKPOINTS_PARTITION_BY",
    "FILE_PROBLEMS",
    "FILE_PROBLEMS_PARTITION_BY",
    "INGEST_MANIFEST",
    "INGEST_MANIFEST_PARTITION_BY",
    "LEADER_EPOCHS",
    "LEADER_EPOCHS_PARTITION_BY",
    "LIVE_PRODUCERS",
    "LIVE_PRODUCERS_PARTITION_BY",
    "OFFSET_COMMITS",
    "OFFSET_COMMITS_PARTITION_BY",
    "PARTITION_METADATA",
    "PARTITION_METADATA_PARTITION_BY",
    "PAYLOADS",
    "PAYLOADS_PARTITION_BY",
    "PRODUCER_SNAPSHOTS",
    "PRODUCER_SNAPSHOTS_PARTITION_BY",
    "TXN_INDEX",
    "TXN_INDEX_PARTITION_BY",
    "FINDINGS",
    "FINDINGS_PARTITION_BY",
    "GLOBAL_TRANSACTIONS",
    "GLOBAL_TRANSACTIONS_PARTITION_BY",
    "PARTITION_SUMMARY",
    "PARTITION_SUMMARY_PARTITION_BY",
    "PRODUCER_STATE",
    "PRODUCER_STATE_PARTITION_BY",
    "READ_COMMITTED",
    "READ_COMMITTED_PARTITION_BY",
    "RUNS",
    "TRANSACTION_LOG",
    "TRANSACTION_LOG_PARTITION_BY",
    "TRANSACTIONS",
    "TRANSACTIONS_PARTITION_BY",
]
