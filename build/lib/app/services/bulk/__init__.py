"""Bulk enforcement: selecting, dry-running, approving and delivering many subjects at once (SPEC BULK)."""
