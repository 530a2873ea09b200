"""regate scheduler, bisection and webhooks

Tables for issue 7: re-gate outcome events (a row per processed gate), bisections,
webhook deliveries and their attempts, the scheduler lease, APScheduler's job store
table, and ``tracked_repositories.options`` (re-gate gate parameters).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('apscheduler_jobs',
    sa.Column('id', sa.Unicode(length=191), nullable=False),
    sa.Column('next_run_time', sa.Float(precision=25), nullable=True),
    sa.Column('job_state', sa.LargeBinary(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_apscheduler_jobs'))
    )
    with op.batch_alter_table('apscheduler_jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_apscheduler_jobs_next_run_time'), ['next_run_time'], unique=False)

    op.create_table('scheduler_leases',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('holder', sa.String(length=128), nullable=False),
    sa.Column('acquired_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_scheduler_leases'))
    )
    op.create_table('bisections',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('repository_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('regression_gate_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('good_sha', sa.String(length=64), nullable=False),
    sa.Column('bad_sha', sa.String(length=64), nullable=False),
    sa.Column('commits', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('good_index', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('bad_index', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('first_bad_sha', sa.String(length=64), nullable=True),
    sa.Column('first_bad_gate_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('delta_pct', sa.Float(), nullable=True),
    sa.Column('drift_pct', sa.Float(), nullable=True),
    sa.Column('num_gates', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['first_bad_gate_id'], ['gates.id'], name=op.f('fk_bisections_first_bad_gate_id_gates'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['regression_gate_id'], ['gates.id'], name=op.f('fk_bisections_regression_gate_id_gates'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['repository_id'], ['tracked_repositories.id'], name=op.f('fk_bisections_repository_id_tracked_repositories'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_bisections')),
    sa.UniqueConstraint('regression_gate_id', name=op.f('uq_bisections_regression_gate_id'))
    )
    with op.batch_alter_table('bisections', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_bisections_repository_id'), ['repository_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_bisections_status'), ['status'], unique=False)

    op.create_table('repo_events',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('repository_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('gate_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('bisection_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('kind', sa.String(length=24), nullable=False),
    sa.Column('control_sha', sa.String(length=64), nullable=True),
    sa.Column('candidate_sha', sa.String(length=64), nullable=True),
    sa.Column('verdict', sa.String(length=16), nullable=True),
    sa.Column('delta_pct', sa.Float(), nullable=True),
    sa.Column('drift_pct', sa.Float(), nullable=True),
    sa.Column('control_median_s', sa.Float(), nullable=True),
    sa.Column('candidate_median_s', sa.Float(), nullable=True),
    sa.Column('carries_over', sa.Boolean(), nullable=False),
    sa.Column('alert', sa.Boolean(), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['bisection_id'], ['bisections.id'], name=op.f('fk_repo_events_bisection_id_bisections'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['gate_id'], ['gates.id'], name=op.f('fk_repo_events_gate_id_gates'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['repository_id'], ['tracked_repositories.id'], name=op.f('fk_repo_events_repository_id_tracked_repositories'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_repo_events')),
    sa.UniqueConstraint('gate_id', name=op.f('uq_repo_events_gate_id'))
    )
    with op.batch_alter_table('repo_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_repo_events_bisection_id'), ['bisection_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_repo_events_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_repo_events_kind'), ['kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_repo_events_repository_id'), ['repository_id'], unique=False)

    op.create_table('webhook_deliveries',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('event_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('num_attempts', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['event_id'], ['repo_events.id'], name=op.f('fk_webhook_deliveries_event_id_repo_events'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries')),
    sa.UniqueConstraint('event_id', 'url', name=op.f('uq_webhook_deliveries_event_id_url'))
    )
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_deliveries_event_id'), ['event_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_webhook_deliveries_status'), ['status'], unique=False)

    op.create_table('webhook_attempts',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('delivery_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('attempt', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('status_code', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('duration_s', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['delivery_id'], ['webhook_deliveries.id'], name=op.f('fk_webhook_attempts_delivery_id_webhook_deliveries'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts'))
    )
    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_attempts_delivery_id'), ['delivery_id'], unique=False)

    with op.batch_alter_table('tracked_repositories', schema=None) as batch_op:
        batch_op.add_column(sa.Column('options', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False, server_default='{}'))


def downgrade() -> None:
    with op.batch_alter_table('tracked_repositories', schema=None) as batch_op:
        batch_op.drop_column('options')

    with op.batch_alter_table('webhook_attempts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_attempts_delivery_id'))

    op.drop_table('webhook_attempts')
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_deliveries_status'))
        batch_op.drop_index(batch_op.f('ix_webhook_deliveries_event_id'))

    op.drop_table('webhook_deliveries')
    with op.batch_alter_table('repo_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_repo_events_repository_id'))
        batch_op.drop_index(batch_op.f('ix_repo_events_kind'))
        batch_op.drop_index(batch_op.f('ix_repo_events_created_at'))
        batch_op.drop_index(batch_op.f('ix_repo_events_bisection_id'))

    op.drop_table('repo_events')
    with op.batch_alter_table('bisections', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_bisections_status'))
        batch_op.drop_index(batch_op.f('ix_bisections_repository_id'))

    op.drop_table('bisections')
    op.drop_table('scheduler_leases')
    with op.batch_alter_table('apscheduler_jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_apscheduler_jobs_next_run_time'))

    op.drop_table('apscheduler_jobs')
