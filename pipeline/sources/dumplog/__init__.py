"""Batch rows from `kafka-dump-log.sh` / `DumpLogSegments` text output (spec §4), for every broker version.

Dump text is what operators can share when segment files cannot leave the cluster, so it is read with the
same contract as segments: one `batches` row per printed batch, with the fields the text does not print
left null (the broker never prints `attributes` or `baseTimestamp`, for instance).

Layouts understood (spec §4.2/§4.3):

* `.log` batch lines of 0.11-2.1 (shallow) and 2.2-4.x (always printed): `count:`, `isControl:` and
  `deleteHorizonMs:` optional, `isvalid` before `size:` or at the end, codec names in either spelling;
  legacy magic 0/1 entries (`offset: L position: ...`).
* Record lines: `| offset: ...` of 2.2-4.x (including the 2.8 long form and legacy records) and the
  0.11-2.1 deep-iteration lines that carry the producer fields. An end-transaction marker
  (`endTxnMarker: COMMIT|ABORT coordinatorEpoch: N`) or another control record sets `control_type` and
  `coordinator_epoch` of the batch row printed just before it.
* 0.11-2.1 deep dumps print no batch line. Their records are grouped into one approximate batch row per
  run of consecutive record lines with the same `position:` (the tool prints the batch position on every
  record); the row's last offset and last sequence are those of the last printed record, and the batch
  size, CRC and partition leader epoch stay null because the text does not hold them (`entry_note` says so).
* `Found N invalid bytes at the end of <file>`: a `truncated_tail` row.
* `.snapshot` lines of every version and `.txnindex` lines, returned as separate entry lists
  (`SNAPSHOT_ENTRIES` and `TXN_INDEX_ENTRIES` give their fields; a `.snapshot` dumped without producer lines is
  one entry without producer, as a snapshot without entries reads); `.index`/`.timeindex` lines are counted.
* Records of `__transaction_state` printed by `--transaction-log-decoder` (the text of 0.11-2.4 and 2.5-3.x,
  the JSON of 4.x) become `transaction_log` rows, and records of transactional `__consumer_offsets` batches
  printed by `--offsets-decoder` (`offset::` of 0.11-2.4, `offset_commit::` of 2.5-3.x, JSON of 3.5+) become
  offset-commit rows; what the text does not print stays null, and a record the text does not decode (a dump
  without the decoder option, a decoder error) gets a row with `decode_error`.

Text may hold several `Dumping <path>` sections; topic, partition and segment base offset come from the
dumped path (`.../<topic>-<partition>/<20 digits>.log`). Lines a listing numbered (`12 baseOffset: ...`, as
blog posts print code) are read without the number. Lines that fit no layout (shell prompts, prose, `...`)
are counted as `unknown` and reported with their line numbers (the ingest logs the first ones and counts them in
`runs.counts`, which the reports show); they are never dropped silently.

Modules: `grammar` (line kinds and layouts), `rows` (batch rows from matched lines), `partition_file_entries`
(`.snapshot` and `.txnindex` entry rows), `decoded_payloads` (the coordinator and offsets decoders' records),
`coordinator_rows` (their record lines as rows), `parser` (the one pass over a text), `reader` (the Spark readers).
"""
