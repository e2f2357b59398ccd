"""The *minimal correct delivery* baseline (issue 14): an RQ job that claims one row
with a conditional UPDATE and commits, POSTs, then inserts the attempt, writes the
result and commits — two durable commits around the same POST as the plain job,
and nothing else. psycopg directly, one connection per worker process."""

from __future__ import annotations

import json
import os

import psycopg
import requests

SCHEMA = """
CREATE TABLE IF NOT EXISTS minimal_deliveries (
    id text PRIMARY KEY,
    state text NOT NULL DEFAULT 'queued',
    attempt_count integer NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    result text
);
CREATE TABLE IF NOT EXISTS minimal_attempts (
    id bigserial PRIMARY KEY,
    delivery_id text NOT NULL REFERENCES minimal_deliveries (id),
    attempt_number integer NOT NULL,
    status integer,
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now()
);
"""
_connection: psycopg.Connection | None = None


def _db() -> psycopg.Connection:
    global _connection
    if _connection is None or _connection.closed:
        url = os.environ["MINIMAL_DATABASE_URL"].replace("postgresql+psycopg://", "postgresql://")
        _connection = psycopg.connect(url, autocommit=True)
    return _connection


def deliver_minimal(delivery_id: str, url: str, body: bytes) -> str | None:
    db = _db()
    with db.transaction():
        claimed = db.execute(
            "UPDATE minimal_deliveries SET state = 'applying', attempt_count = attempt_count + 1,"
            " lease_expires_at = now() + interval '150 seconds'"
            " WHERE id = %s AND state IN ('queued', 'failed') AND next_attempt_at <= now()"
            " RETURNING attempt_count, now()",
            (delivery_id,),
        ).fetchone()
    if claimed is None:
        return None
    attempt, started = claimed
    response = requests.post(
        url, data=body, headers={"Content-Type": "application/json", "Idempotency-Key": delivery_id}, timeout=30
    )
    state = "applied" if response.ok else "failed"
    with db.transaction():
        db.execute(
            "INSERT INTO minimal_attempts (delivery_id, attempt_number, status, started_at) VALUES (%s, %s, %s, %s)",
            (delivery_id, attempt, response.status_code, started),
        )
        db.execute(
            "UPDATE minimal_deliveries SET state = %s, lease_expires_at = NULL, result = %s"
            " WHERE id = %s AND state = 'applying' AND attempt_count = %s",
            (state, json.dumps({"status": response.status_code}), delivery_id, attempt),
        )
    return state
