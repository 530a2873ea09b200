"""initial ledger schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('allocations',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('scheduler_job_id', sa.String(length=64), nullable=True),
    sa.Column('executor', sa.String(length=16), nullable=False),
    sa.Column('cluster', sa.String(length=128), nullable=True),
    sa.Column('hostnames', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('num_nodes', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('gpu_model', sa.String(length=128), nullable=True),
    sa.Column('gpus_per_node', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('num_gpus', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('topology', sa.String(length=128), nullable=True),
    sa.Column('clock_bin', sa.String(length=32), nullable=True),
    sa.Column('max_sm_clock_mhz', sa.Float(), nullable=True),
    sa.Column('power_limit_w', sa.Float(), nullable=True),
    sa.Column('health_verdict', sa.String(length=16), nullable=False),
    sa.Column('driver_version', sa.String(length=64), nullable=True),
    sa.Column('cuda_version', sa.String(length=64), nullable=True),
    sa.Column('nccl_version', sa.String(length=64), nullable=True),
    sa.Column('torch_version', sa.String(length=64), nullable=True),
    sa.Column('criteria', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_allocations'))
    )
    with op.batch_alter_table('allocations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_allocations_scheduler_job_id'), ['scheduler_job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_allocations_topology'), ['topology'], unique=False)

    op.create_table('api_tokens',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('token_sha256', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_sha256', name=op.f('uq_api_tokens_token_sha256'))
    )
    op.create_table('tracked_repositories',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('branch', sa.String(length=255), nullable=False),
    sa.Column('workload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('topology', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('executor', sa.String(length=16), nullable=False),
    sa.Column('schedule', sa.String(length=64), nullable=False),
    sa.Column('tolerance_pct', sa.Float(), nullable=False),
    sa.Column('notify', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('bisect', sa.Boolean(), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('last_measured_sha', sa.String(length=64), nullable=True),
    sa.Column('last_checked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tracked_repositories')),
    sa.UniqueConstraint('url', 'branch', name=op.f('uq_tracked_repositories_url_branch'))
    )
    op.create_table('gates',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('family', sa.String(length=255), nullable=True),
    sa.Column('tags', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('control_spec', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('candidate_spec', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('workload', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('recipe', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('recipe_name', sa.String(length=255), nullable=True),
    sa.Column('topology_request', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('run_pattern', sa.String(length=255), nullable=False),
    sa.Column('num_warmup_steps', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('num_measured_steps', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('policy', sa.String(length=32), nullable=False),
    sa.Column('policy_params', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('executor', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_reason', sa.Text(), nullable=True),
    sa.Column('idempotency_key', sa.String(length=255), nullable=True),
    sa.Column('job_ref', sa.String(length=128), nullable=True),
    sa.Column('job_folder', sa.Text(), nullable=True),
    sa.Column('allocation_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('parent_gate_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('repository_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['allocation_id'], ['allocations.id'], name=op.f('fk_gates_allocation_id_allocations'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['parent_gate_id'], ['gates.id'], name=op.f('fk_gates_parent_gate_id_gates'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['repository_id'], ['tracked_repositories.id'], name=op.f('fk_gates_repository_id_tracked_repositories'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_gates')),
    sa.UniqueConstraint('idempotency_key', name=op.f('uq_gates_idempotency_key'))
    )
    with op.batch_alter_table('gates', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_gates_allocation_id'), ['allocation_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_gates_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_gates_family'), ['family'], unique=False)
        batch_op.create_index(batch_op.f('ix_gates_kind'), ['kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_gates_parent_gate_id'), ['parent_gate_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_gates_recipe_name'), ['recipe_name'], unique=False)
        batch_op.create_index(batch_op.f('ix_gates_repository_id'), ['repository_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_gates_status'), ['status'], unique=False)

    op.create_table('health_checks',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('allocation_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=8), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('measured', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('threshold', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('message', sa.Text(), nullable=True),
    sa.Column('raw', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['allocation_id'], ['allocations.id'], name=op.f('fk_health_checks_allocation_id_allocations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_health_checks'))
    )
    with op.batch_alter_table('health_checks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_health_checks_allocation_id'), ['allocation_id'], unique=False)

    op.create_table('decisions',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('gate_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('decided_by', sa.String(length=255), nullable=False),
    sa.Column('decision', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['gate_id'], ['gates.id'], name=op.f('fk_decisions_gate_id_gates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_decisions'))
    )
    with op.batch_alter_table('decisions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_decisions_gate_id'), ['gate_id'], unique=False)

    op.create_table('runs',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('gate_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('allocation_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('role', sa.String(length=1), nullable=True),
    sa.Column('order', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('source_ref', sa.String(length=255), nullable=True),
    sa.Column('source_sha', sa.String(length=64), nullable=True),
    sa.Column('source_dirty', sa.Boolean(), nullable=False),
    sa.Column('env', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('command', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('exit_code', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('slowest_rank_step_s', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('num_warmup_steps', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('num_measured_steps', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('median_step_s', sa.Float(), nullable=True),
    sa.Column('mfu_pct', sa.Float(), nullable=True),
    sa.Column('mfu_numerator_pct_s', sa.Float(), nullable=True),
    sa.Column('flops_per_sample', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('peak_flops_per_gpu', sa.Float(), nullable=True),
    sa.Column('samples_per_s', sa.Float(), nullable=True),
    sa.Column('peak_allocated_bytes', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('peak_reserved_bytes', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('world_size', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('local_batch_size', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('grad_accum_steps', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('versions', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('clocks', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('provenance', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('result_extra', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['allocation_id'], ['allocations.id'], name=op.f('fk_runs_allocation_id_allocations'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['gate_id'], ['gates.id'], name=op.f('fk_runs_gate_id_gates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runs')),
    sa.UniqueConstraint('gate_id', 'order', name=op.f('uq_runs_gate_id_order'))
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_allocation_id'), ['allocation_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_gate_id'), ['gate_id'], unique=False)
        batch_op.create_index('ix_runs_status', ['status'], unique=False)

    op.create_table('verdicts',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('gate_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('policy', sa.String(length=32), nullable=False),
    sa.Column('policy_version', sa.String(length=16), nullable=False),
    sa.Column('params', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('verdict', sa.String(length=16), nullable=False),
    sa.Column('numbers', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('is_primary', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['gate_id'], ['gates.id'], name=op.f('fk_verdicts_gate_id_gates'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_verdicts'))
    )
    with op.batch_alter_table('verdicts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_verdicts_gate_id'), ['gate_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_verdicts_verdict'), ['verdict'], unique=False)

    op.create_table('artifacts',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('run_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('gate_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('allocation_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('path', sa.Text(), nullable=False),
    sa.Column('size_bytes', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['allocation_id'], ['allocations.id'], name=op.f('fk_artifacts_allocation_id_allocations'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['gate_id'], ['gates.id'], name=op.f('fk_artifacts_gate_id_gates'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_artifacts_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_artifacts'))
    )
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_artifacts_allocation_id'), ['allocation_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_artifacts_gate_id'), ['gate_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_artifacts_run_id'), ['run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_artifacts_sha256'), ['sha256'], unique=False)

    op.create_table('run_steps',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('run_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('step', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('slowest_rank_step_s', sa.Float(), nullable=False),
    sa.Column('rank_step_s', sa.Float(), nullable=True),
    sa.Column('loss', sa.Float(), nullable=True),
    sa.Column('grad_norm', sa.Float(), nullable=True),
    sa.Column('phase', sa.String(length=16), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_run_steps_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_steps')),
    sa.UniqueConstraint('run_id', 'step', name=op.f('uq_run_steps_run_id_step'))
    )


def downgrade() -> None:
    op.drop_table('run_steps')
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_artifacts_sha256'))
        batch_op.drop_index(batch_op.f('ix_artifacts_run_id'))
        batch_op.drop_index(batch_op.f('ix_artifacts_gate_id'))
        batch_op.drop_index(batch_op.f('ix_artifacts_allocation_id'))

    op.drop_table('artifacts')
    with op.batch_alter_table('verdicts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_verdicts_verdict'))
        batch_op.drop_index(batch_op.f('ix_verdicts_gate_id'))

    op.drop_table('verdicts')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_status')
        batch_op.drop_index(batch_op.f('ix_runs_gate_id'))
        batch_op.drop_index(batch_op.f('ix_runs_allocation_id'))

    op.drop_table('runs')
    with op.batch_alter_table('decisions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_decisions_gate_id'))

    op.drop_table('decisions')
    with op.batch_alter_table('health_checks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_health_checks_allocation_id'))

    op.drop_table('health_checks')
    with op.batch_alter_table('gates', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_gates_status'))
        batch_op.drop_index(batch_op.f('ix_gates_repository_id'))
        batch_op.drop_index(batch_op.f('ix_gates_recipe_name'))
        batch_op.drop_index(batch_op.f('ix_gates_parent_gate_id'))
        batch_op.drop_index(batch_op.f('ix_gates_kind'))
        batch_op.drop_index(batch_op.f('ix_gates_family'))
        batch_op.drop_index(batch_op.f('ix_gates_created_at'))
        batch_op.drop_index(batch_op.f('ix_gates_allocation_id'))

    op.drop_table('gates')
    op.drop_table('tracked_repositories')
    op.drop_table('api_tokens')
    with op.batch_alter_table('allocations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_allocations_topology'))
        batch_op.drop_index(batch_op.f('ix_allocations_scheduler_job_id'))

    op.drop_table('allocations')
