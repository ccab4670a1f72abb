"""The replay of spec §6.0: one pass over each partition's batches in Spark's tasks, with the state the broker keeps."""
