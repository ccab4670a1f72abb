"""The files beside a partition's segments: decoders, sanity checks, and their Spark reader.

Covers `.txnindex` (spec §1.3), producer-state `.snapshot` (§1.4), `.index`/`.timeindex`, and the text files
`leader-epoch-checkpoint`, `partition.metadata` and the log-dir offset checkpoints (§1.2). The decoders are
pure Python and never raise on bad content: they turn what the broker would reject into rows and problems,
so the rules of §6.1 and §6.6 are filters. Lengths read from a file are compared with the file's size and
never used to allocate, and the binary files are read and decoded ROWS_PER_BATCH entries at a time.

As for segments, the driver only lists the log roots; every file is read and decoded on the executors
inside `mapInArrow`. A file that cannot be read gives an 'unreadable' row (`.txnindex`, `.snapshot`) or a
problem row naming the I/O error, instead of failing the job.

Modules: `entries` (layouts and statuses they share), `binary_files`, `index_checks`, `text_files` (the
decoders), `discovery` (listing, on the driver), `reader` (the Spark reader), `dump_forms` (the same rows from
`kafka-dump-log` text).
"""
