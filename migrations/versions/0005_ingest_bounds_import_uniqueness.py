"""one import per log; step records may carry only the printing rank's time

* ``artifacts``: a partial unique index on ``sha256`` where ``kind = 'imported_log'``, so
  concurrent imports of the same log create one run (both databases). Duplicates left by
  earlier concurrent imports are kept, re-labelled ``imported_log_duplicate`` (nothing
  stored is deleted).
* ``run_steps.slowest_rank_step_s`` becomes nullable: the LTX-2 harness's ``BF16_STEP``
  carries rank 0's own step time only (stored in ``rank_step_s``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_WHERE = sa.text("kind = 'imported_log'")
_artifacts = sa.table("artifacts", sa.column("id", sa.Integer), sa.column("kind", sa.String),
                      sa.column("sha256", sa.String))


def upgrade() -> None:
    conn = op.get_bind()
    first = (sa.select(sa.func.min(_artifacts.c.id)).where(_artifacts.c.kind == "imported_log")
             .group_by(_artifacts.c.sha256))
    conn.execute(_artifacts.update()
                 .where(_artifacts.c.kind == "imported_log", _artifacts.c.id.not_in(first))
                 .values(kind="imported_log_duplicate"))
    op.create_index("uq_artifacts_imported_log_sha256", "artifacts", ["sha256"], unique=True,
                    postgresql_where=_WHERE, sqlite_where=_WHERE)
    with op.batch_alter_table("run_steps", schema=None) as batch_op:
        batch_op.alter_column("slowest_rank_step_s", existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    conn = op.get_bind()
    steps = sa.table("run_steps", sa.column("slowest_rank_step_s", sa.Float),
                     sa.column("rank_step_s", sa.Float))
    # Rank-only steps keep their one time in both columns (the column is NOT NULL again).
    conn.execute(steps.update().where(steps.c.slowest_rank_step_s.is_(None))
                 .values(slowest_rank_step_s=steps.c.rank_step_s))
    with op.batch_alter_table("run_steps", schema=None) as batch_op:
        batch_op.alter_column("slowest_rank_step_s", existing_type=sa.Float(), nullable=False)
    op.drop_index("uq_artifacts_imported_log_sha256", table_name="artifacts")
