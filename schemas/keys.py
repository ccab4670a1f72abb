"""The keys rows are grouped, joined and sorted by: a Kafka partition of one cluster, one broker's replica of it,
one producer in it. Every module takes them from here, so a key cannot drift between two plans that join on it."""

TP = ["cluster_id", "topic", "partition"]
REPLICA = [*TP, "broker_id"]
TP_PID = [*TP, "producer_id"]
CLUSTER_PRODUCER = ["cluster_id", "producer_id"]  # a producer id as the coordinator of one cluster gave it out
