"""Audit rules of spec §6, as DataFrame transforms over the `batches` table."""
