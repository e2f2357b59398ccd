"""Statements of reasons for the DSA Transparency Database (SPEC §7 DSA-2, DSA-3):
one row per applied restriction, its API body, state and submission.

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('dsa_statements',
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('installation_id', sa.String(length=200), nullable=False),
    sa.Column('proposal_id', sa.String(length=700), nullable=False),
    sa.Column('puid', sa.String(length=500), nullable=False),
    sa.Column('statement_json', sa.Text(), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('claim_token', sa.String(length=100), nullable=True),
    sa.Column('claimed_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('tdb_uuid', sa.String(length=100), nullable=True),
    sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['installation_id'], ['installations.id'], name=op.f('fk_dsa_statements_installation_id_installations')),
    sa.ForeignKeyConstraint(['proposal_id'], ['action_proposals.id'], name=op.f('fk_dsa_statements_proposal_id_action_proposals')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dsa_statements')),
    sa.UniqueConstraint('installation_id', 'puid', name=op.f('uq_dsa_statements_installation_id_puid'))
    )
    with op.batch_alter_table('dsa_statements', schema=None) as batch_op:
        batch_op.create_index('ix_dsa_statements_pending', ['installation_id', 'state', 'created_at'], unique=False)
        batch_op.create_index('ix_dsa_statements_proposal', ['proposal_id'], unique=False)


def downgrade():
    with op.batch_alter_table('dsa_statements', schema=None) as batch_op:
        batch_op.drop_index('ix_dsa_statements_proposal')
        batch_op.drop_index('ix_dsa_statements_pending')

    op.drop_table('dsa_statements')
