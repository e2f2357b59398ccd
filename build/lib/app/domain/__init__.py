"""Pure domain rules of the action console.

Nothing in this package imports Flask, SQLAlchemy or Redis: each module holds one
concept's rules as plain functions and values, so services and tests can use them
without a database.
"""
