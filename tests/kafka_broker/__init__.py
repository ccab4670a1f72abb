"""A real Apache Kafka broker in the loop: start it, run clients against it, hand its log dir to the audit."""
