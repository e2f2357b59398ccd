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
    sa.Column('report_id', sa.String(length=200), nullable=True),
    sa.Column('decision_id', sa.String(length=200), nullable=True),
    sa.Column('category', sa.String(length=100), nullable=False),
    sa.Column('ground', sa.String(length=60), nullable=False),
    sa.Column('restriction', sa.String(length=20), nullable=False),
    sa.Column('restriction_type', sa.String(length=100), nullable=False),
    sa.Column('automated_decision', sa.String(length=60), nullable=False),
    sa.Column('automated_detection', sa.Boolean(), nullable=False),
    sa.Column('source_type', sa.String(length=60), nullable=False),
    sa.Column('language', sa.String(length=5), nullable=False),
    sa.Column('reported_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('applied_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('complaint_until', sa.DateTime(timezone=True), nullable=False),
    sa.Column('notice_proposal_id', sa.String(length=700), nullable=True),
    sa.Column('reversed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('reversal_appeal_id', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['installation_id'], ['installations.id'], name=op.f('fk_dsa_statements_installation_id_installations')),
    sa.ForeignKeyConstraint(['proposal_id'], ['action_proposals.id'], name=op.f('fk_dsa_statements_proposal_id_action_proposals')),
    sa.ForeignKeyConstraint(['report_id'], ['reports.id'], name=op.f('fk_dsa_statements_report_id_reports')),
    sa.ForeignKeyConstraint(['decision_id'], ['decisions.id'], name=op.f('fk_dsa_statements_decision_id_decisions')),
    sa.ForeignKeyConstraint(['reversal_appeal_id'], ['appeals.id'], name=op.f('fk_dsa_statements_reversal_appeal_id_appeals')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dsa_statements')),
    sa.UniqueConstraint('installation_id', 'puid', name=op.f('uq_dsa_statements_installation_id_puid'))
    )
    with op.batch_alter_table('dsa_statements', schema=None) as batch_op:
        batch_op.create_index('ix_dsa_statements_pending', ['installation_id', 'state', 'created_at'], unique=False)
        batch_op.create_index('ix_dsa_statements_proposal', ['proposal_id'], unique=False)
        batch_op.create_index('ix_dsa_statements_applied', ['installation_id', 'applied_at'], unique=False)
    op.create_table('dsa_settings_versions',
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('installation_id', sa.String(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('settings_json', sa.Text(), nullable=False),
    sa.Column('settings_digest', sa.String(length=100), nullable=False),
    sa.Column('change_id', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['installation_id'], ['installations.id'], name=op.f('fk_dsa_settings_versions_installation_id_installations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dsa_settings_versions')),
    sa.UniqueConstraint('installation_id', 'version', name=op.f('uq_dsa_settings_versions_installation_id_version'))
    )
    with op.batch_alter_table('reports', schema=None) as batch_op:
        batch_op.add_column(sa.Column('source', sa.String(length=30), nullable=True))
    with op.batch_alter_table('report_evidence', schema=None) as batch_op:
        batch_op.add_column(sa.Column('language', sa.String(length=2), nullable=True))


def downgrade():
    with op.batch_alter_table('report_evidence', schema=None) as batch_op:
        batch_op.drop_column('language')
    with op.batch_alter_table('reports', schema=None) as batch_op:
        batch_op.drop_column('source')
    op.drop_table('dsa_settings_versions')
    with op.batch_alter_table('dsa_statements', schema=None) as batch_op:
        batch_op.drop_index('ix_dsa_statements_applied')
        batch_op.drop_index('ix_dsa_statements_proposal')
        batch_op.drop_index('ix_dsa_statements_pending')

    op.drop_table('dsa_statements')
