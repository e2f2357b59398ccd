"""Use cases. Each takes ids and values, loads what it needs, applies the domain
rules, writes state, audit and outbox rows in one unit of work, and commits once."""
