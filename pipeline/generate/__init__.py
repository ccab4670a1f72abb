"""`produce-audit generate`: deterministic, realistic Kafka log roots for scale benchmarks and end-to-end tests.

A run simulates idempotent, transactional and legacy producers writing to a small cluster and lays the result
out as brokers do (`simulation`, `producers`, `coordinator`). Each partition keeps the producer state the
audit replays, so its snapshots and `.txnindex` agree with the log (`partition_log`); batches are encoded in
bulk from column arrays (`encode`) and written with their indexes (`segment_writer`), the compacted-style
topic's closed segments shaped by the cleaner (`compaction`), the log-dir text files last (`layout`).
`anomalies` injects faults at a chosen rate and records the finding each must raise (`ground_truth`). At a
replication factor above 1, `replicas` writes each finished partition's follower copies as hard links, and the
replica faults of `anomalies.replicas` make some of them depart from their leader's.
"""
