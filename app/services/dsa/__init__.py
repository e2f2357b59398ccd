"""Statements of reasons and transparency under the EU Digital Services Act (SPEC §7 DSA)."""
