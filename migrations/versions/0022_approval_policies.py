"""Approval policies (SPEC POL-1..7): each person's vote bound to a digest and an
expiry, the installation's policies and routes (four-eyes), protected subjects,
emergency actions' retrospective reviews, approvers' notices; on proposals and batches
the policy that applied; on operators a team and attributes; on component versions
whether the action can be undone.

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('approval_settings_versions',
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('installation_id', sa.String(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('settings_json', sa.Text(), nullable=False),
    sa.Column('settings_digest', sa.String(length=100), nullable=False),
    sa.Column('change_id', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['installation_id'], ['installations.id'], name=op.f('fk_approval_settings_versions_installation_id_installations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_approval_settings_versions')),
    sa.UniqueConstraint('installation_id', 'version', name=op.f('uq_approval_settings_versions_installation_id_version'))
    )
    op.create_table('protected_subjects',
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('installation_id', sa.String(length=200), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('subject_reference', sa.String(length=500), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('marked_change_id', sa.String(length=200), nullable=True),
    sa.Column('marked_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('unmarked_change_id', sa.String(length=200), nullable=True),
    sa.Column('unmarked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['installation_id'], ['installations.id'], name=op.f('fk_protected_subjects_installation_id_installations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_protected_subjects'))
    )
    with op.batch_alter_table('protected_subjects', schema=None) as batch_op:
        batch_op.create_index('ix_protected_subjects_lookup', ['installation_id', 'subject_reference'], unique=False)

    op.create_table('approval_notices',
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('installation_id', sa.String(length=200), nullable=False),
    sa.Column('subject_id', sa.String(length=700), nullable=False),
    sa.Column('operator_id', sa.String(length=200), nullable=False),
    sa.Column('channel', sa.String(length=20), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('available_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['installation_id'], ['installations.id'], name=op.f('fk_approval_notices_installation_id_installations')),
    sa.ForeignKeyConstraint(['operator_id'], ['operator_users.id'], name=op.f('fk_approval_notices_operator_id_operator_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_approval_notices')),
    sa.UniqueConstraint('subject_id', 'operator_id', 'channel', name=op.f('uq_approval_notices_subject_id_operator_id_channel'))
    )
    with op.batch_alter_table('approval_notices', schema=None) as batch_op:
        batch_op.create_index('ix_approval_notices_pending', ['state', 'available_at'], unique=False)

    op.create_table('approval_votes',
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('installation_id', sa.String(length=200), nullable=False),
    sa.Column('proposal_id', sa.String(length=700), nullable=True),
    sa.Column('batch_id', sa.String(length=200), nullable=True),
    sa.Column('approver_id', sa.String(length=200), nullable=False),
    sa.Column('decision', sa.String(length=20), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('payload_digest', sa.String(length=100), nullable=False),
    sa.Column('batch_digest', sa.String(length=100), nullable=True),
    sa.Column('policy_key', sa.String(length=100), nullable=True),
    sa.Column('factor_key', sa.String(length=100), nullable=True),
    sa.Column('idempotency_key', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['approver_id'], ['operator_users.id'], name=op.f('fk_approval_votes_approver_id_operator_users')),
    sa.ForeignKeyConstraint(['batch_id'], ['bulk_batches.id'], name=op.f('fk_approval_votes_batch_id_bulk_batches')),
    sa.ForeignKeyConstraint(['installation_id'], ['installations.id'], name=op.f('fk_approval_votes_installation_id_installations')),
    sa.ForeignKeyConstraint(['proposal_id'], ['action_proposals.id'], name=op.f('fk_approval_votes_proposal_id_action_proposals')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_approval_votes')),
    sa.UniqueConstraint('approver_id', 'idempotency_key', name=op.f('uq_approval_votes_approver_id_idempotency_key'))
    )
    with op.batch_alter_table('approval_votes', schema=None) as batch_op:
        batch_op.create_index('ix_approval_votes_batch', ['batch_id', 'created_at'], unique=False)
        batch_op.create_index('ix_approval_votes_proposal', ['proposal_id', 'created_at'], unique=False)

    op.create_table('emergency_reviews',
    sa.Column('id', sa.String(length=200), nullable=False),
    sa.Column('installation_id', sa.String(length=200), nullable=False),
    sa.Column('proposal_id', sa.String(length=700), nullable=False),
    sa.Column('acted_by', sa.String(length=200), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('acted_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('due_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('reviewer_id', sa.String(length=200), nullable=True),
    sa.Column('reviewed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('review_reason', sa.Text(), nullable=True),
    sa.Column('compensation_proposal_id', sa.String(length=700), nullable=True),
    sa.ForeignKeyConstraint(['acted_by'], ['operator_users.id'], name=op.f('fk_emergency_reviews_acted_by_operator_users')),
    sa.ForeignKeyConstraint(['installation_id'], ['installations.id'], name=op.f('fk_emergency_reviews_installation_id_installations')),
    sa.ForeignKeyConstraint(['proposal_id'], ['action_proposals.id'], name=op.f('fk_emergency_reviews_proposal_id_action_proposals')),
    sa.ForeignKeyConstraint(['reviewer_id'], ['operator_users.id'], name=op.f('fk_emergency_reviews_reviewer_id_operator_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_emergency_reviews')),
    sa.UniqueConstraint('proposal_id', name=op.f('uq_emergency_reviews_proposal_id'))
    )
    with op.batch_alter_table('emergency_reviews', schema=None) as batch_op:
        batch_op.create_index('ix_emergency_reviews_due', ['installation_id', 'state', 'due_at'], unique=False)

    with op.batch_alter_table('action_proposals', schema=None) as batch_op:
        batch_op.add_column(sa.Column('approval_route_json', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('emergency', sa.Boolean(), server_default=sa.false(), nullable=False))

    with op.batch_alter_table('bulk_batches', schema=None) as batch_op:
        batch_op.add_column(sa.Column('approval_route_json', sa.Text(), nullable=True))

    with op.batch_alter_table('component_versions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('irreversible', sa.Boolean(), server_default=sa.false(), nullable=False))

    with op.batch_alter_table('operator_users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('team', sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column('attributes_json', sa.Text(), nullable=False, server_default='{}'))



def downgrade():
    with op.batch_alter_table("operator_users") as batch_op:
        batch_op.drop_column("attributes_json")
        batch_op.drop_column("team")
    with op.batch_alter_table("component_versions") as batch_op:
        batch_op.drop_column("irreversible")
    with op.batch_alter_table("bulk_batches") as batch_op:
        batch_op.drop_column("approval_route_json")
    with op.batch_alter_table("action_proposals") as batch_op:
        batch_op.drop_column("emergency")
        batch_op.drop_column("approval_route_json")
    for table in ("approval_notices", "emergency_reviews", "protected_subjects", "approval_settings_versions", "approval_votes"):
        op.drop_table(table)
