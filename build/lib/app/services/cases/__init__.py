"""The cases: reports, decisions, appeals and approval tasks."""
