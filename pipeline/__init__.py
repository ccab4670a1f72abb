"""produce-audit: offline, cluster-scale audit of Kafka idempotent and transactional produce logs."""

__version__ = "0.1.0"
