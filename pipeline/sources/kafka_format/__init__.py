"""Kafka log segment format: decode segment bytes into `batches` columns, and encode v2 batches.

Decoding walks a segment exactly like the broker's `FileLogInputStream.nextBatch` (spec §1.1.6, §6.0 step 1) and
keeps one row per entry, including the entry the broker would stop at, so integrity rules are plain filters.
Executors run it inside `mapInArrow` and tests run it without Spark, so it needs only numpy, numba and pyarrow.
No Python code runs per entry: the boundary walk and the header gather are numba kernels over the window bytes,
whose output arrays become Arrow columns without a copy, and the CRCs of runs of small batches are checked
with one hardware `crc32c` call per run when they all match.

The encoder writes what a broker writes (valid CRC-32C, varint-framed records, 78-byte transaction markers) so
tests and the bundled samples can build logs byte for byte.

Modules: `layout` (the batch layout), `windows` (decoding a window of a segment), `entry_walk` and `v2_columns` (its
numba kernels), `entry_rows` (legacy entries, stops and markers), `encoding` (the encoder).
"""
