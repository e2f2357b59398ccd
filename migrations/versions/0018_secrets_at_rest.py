"""Platform secrets encrypted at rest (SPEC OPS-3).

Widens ``connection_versions.bearer_token`` and ``.signing_secret`` to 1000 characters
on PostgreSQL
(a sealed value of a 500-character token is about 720) and seals every plain value of
them and of ``config_changes.secrets_json`` (a pending change's new secrets) under the
installation's key: the app's box, ``current_app.extensions["secret_box"]`` (SECRETS_KEY),
so this runs inside ``flask db upgrade``. Each value is bound to its ``table.column``
as `app.models.base.SealedText` expects.

On SQLite the columns are not widened (it does not enforce a VARCHAR's length; see
`_resize`).

No trigger guards these tables (only audit_events and report_evidence refuse UPDATE,
and they hold no secret), so plain UPDATEs do it; connection versions are immutable
by the services only, not by the database.

Downgrade opens every sealed value back to plain text (it needs the key that sealed
it) and narrows the columns again.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# (table, primary key, column): the sealed columns as of this revision, each bound to "table.column"
SEALED = (
    ("connection_versions", "id", "bearer_token"),
    ("connection_versions", "id", "signing_secret"),
    ("config_changes", "id", "secrets_json"),
)
WIDENED = ("bearer_token", "signing_secret")


def _box():
    from flask import current_app

    try:
        return current_app.extensions["secret_box"]
    except RuntimeError as exc:  # no app context: run through `flask db upgrade`
        raise RuntimeError("migration 0018 seals secrets with the app's key: run it with `flask db upgrade`") from exc


def _convert(change) -> None:
    """Apply `change(value, context)` to every non-empty value of the sealed columns."""
    bind = op.get_bind()
    for table_name, key, name in SEALED:
        table = sa.table(table_name, sa.column(key), sa.column(name))
        rows = bind.execute(sa.select(table.c[key], table.c[name]).where(table.c[name].is_not(None))).all()
        for row_key, value in rows:
            changed = change(value, f"{table_name}.{name}") if value else value
            if changed != value:
                bind.execute(sa.update(table).where(table.c[key] == row_key).values({name: changed}))


def _resize(before: int, after: int) -> None:
    """Change the secret columns' length, on PostgreSQL only. SQLite does not enforce a
    VARCHAR's length, and changing it there rebuilds the table (copy, drop, rename),
    which other tables' rows point at: that needs foreign keys off, which SQLite cannot
    switch inside the migration's transaction (nor deferring helps: the drop's deletes
    stay counted as violations)."""
    if op.get_bind().dialect.name == "sqlite":
        return
    with op.batch_alter_table("connection_versions", schema=None) as batch_op:
        for name in WIDENED:
            batch_op.alter_column(name, existing_type=sa.String(length=before), type_=sa.String(length=after))


def upgrade():
    from app.secret_box import is_sealed

    _resize(500, 1000)
    box = _box()
    _convert(lambda value, context: value if is_sealed(value) else box.seal(value, context=context))


def downgrade():
    from app.secret_box import is_sealed

    box = _box()
    _convert(lambda value, context: box.open(value, context=context) if is_sealed(value) else value)
    _resize(1000, 500)
