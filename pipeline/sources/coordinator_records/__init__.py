"""Records of the coordinator topics: `__transaction_state` and the transactional offset commits of
`__consumer_offsets`, decoded into the `transaction_log` and `offset_commits` tables (spec §5.1).

The key and value decoders are pure functions over bytes with a small reader for Kafka's primitive types, so
tests run them without Spark and executors run them inside `mapInArrow`. They never raise on bad bytes: an
unknown version, a short buffer or a length running past the end becomes `decode_error`, naming the byte
position in the key or value, and every length is checked against the bytes that are there before anything
is read or sized from it. A large log holds millions of `__transaction_state` records: those are first read by a
path for well-formed records (`transaction_log_values`), which leaves anything else to that checked decoder.

`primitives` reads Kafka's types, `transaction_state` and `consumer_offsets` decode one topic's keys and values
each, `rows` makes table rows of the records of a window of batches; `internal_topics` walks the segments.
"""
