"""The database refuses every way of changing audit rows (SPEC REC-1).

PostgreSQL: a statement-level trigger refuses TRUNCATE (row triggers do not fire
for it), beside the row triggers of 0001 that refuse UPDATE and DELETE (and with
them INSERT ... ON CONFLICT DO UPDATE). What this cannot stop is the table's owner
disabling or dropping the triggers: production runs as a role that owns nothing
(README, "The database roles"; SPEC REC-2).

SQLite: REPLACE INTO / INSERT OR REPLACE delete the conflicting row without firing
DELETE triggers unless `PRAGMA recursive_triggers` is on; a BEFORE INSERT trigger
refuses any insert whose id, idempotency key or (installation, seq) already exists,
which is every REPLACE that would remove a row, whatever that pragma says.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    if op.get_bind().dialect.name == "postgresql":
        # audit_events_append_only() (0001) raises with TG_OP, here 'TRUNCATE'.
        op.execute(
            "CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()"
        )
    else:
        op.execute(
            """
            CREATE TRIGGER audit_events_no_replace BEFORE INSERT ON audit_events
            WHEN EXISTS (
                SELECT 1 FROM audit_events
                WHERE id = NEW.id
                   OR idempotency_key = NEW.idempotency_key
                   OR (installation_id = NEW.installation_id AND seq = NEW.seq)
            )
            BEGIN SELECT RAISE(ABORT, 'audit_events is append-only (REPLACE refused)'); END
            """
        )


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_events_no_truncate ON audit_events")
    else:
        op.execute("DROP TRIGGER IF EXISTS audit_events_no_replace")
