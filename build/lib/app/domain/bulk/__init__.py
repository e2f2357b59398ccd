"""Bulk enforcement: one reviewed decision over many subjects (SPEC BULK)."""
