"""Record-level decoding of v2 batches: decompression, the record walk, and the `iter_records` API.

Kafka's reader (`DefaultRecordBatch.iterator` / `RecordIterator`, `DefaultRecord.readFrom`, spec §1.1.4) decodes
`recordsCount` records from the records section, decompressed by the codec of the attributes (§1.1.1), and fails
on a malformed varint, a length that overruns the record or the records, a negative header count, or bytes left
over. The walk here checks the same things plus what the log validator expects of offset deltas (strictly
increasing, at most lastOffsetDelta) and keys and values (length -1 or more), and keeps the largest record
timestamp: the FMT-006 and FMT-008 inputs. It is one numba-compiled function: `record_columns` runs it over every
uncompressed batch of a decode window in one compiled loop (and per batch, after decompression, for compressed
ones), and `iter_records` runs it once to validate a batch and once more to fill the key/value/header offsets
the records are cut from; `window_records` does both for all the uncompressed batches of a window in one call.

Codecs are read the way Kafka's own streams read them: gzip members like `GZIPInputStream`, snappy in xerial
framing like `SnappyInputStream` (or raw snappy, which that stream also accepts), lz4 frames like
`Lz4BlockInputStream` (independent blocks, descriptor checksum, block checksums; bytes after the end mark are
never read), and zstd frames. Decompressed output is bounded (`MAX_RECORDS_BYTES`): a batch that would inflate
beyond it is a record problem, not an out-of-memory error. Lengths read from the data only ever bound reads of
bytes that are there; nothing is allocated from them.

Modules: `layout`, `walk` (the record walk), `decompression`, `columns` (a window's record columns), `api`
(`iter_records`, `window_records`).
"""
