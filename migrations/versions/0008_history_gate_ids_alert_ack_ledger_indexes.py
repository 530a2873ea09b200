"""history gate ids, alert acknowledgement, ledger indexes

* ``gates.control_history_gate_ids``: the earlier gate of each ``control_history`` entry,
  so a verdict links the history gates it used (issue 12).
* ``repo_events.acknowledged_at`` / ``acknowledged_by``: an alert acknowledged on the
  alerts page (issue 17); NULL means open.
* ``decisions.rerun_gate_id``: the gate a ``rerun`` decision queued.
* ``ix_verdicts_verdict_is_primary`` and ``ix_gates_created_at_id``: the stopping points'
  accepted gates and the ledger's newest-first order at 100,000 gates
  (``benchmarks/ledger_page.py``).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("gates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("control_history_gate_ids", _JSON, nullable=True))
        batch_op.create_index("ix_gates_created_at_id", ["created_at", "id"], unique=False)
    with op.batch_alter_table("repo_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("acknowledged_by", sa.String(length=255), nullable=True))
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rerun_gate_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                                      nullable=True))
        batch_op.create_foreign_key(batch_op.f("fk_decisions_rerun_gate_id_gates"), "gates",
                                    ["rerun_gate_id"], ["id"], ondelete="SET NULL")
    with op.batch_alter_table("verdicts", schema=None) as batch_op:
        batch_op.create_index("ix_verdicts_verdict_is_primary", ["verdict", "is_primary"],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table("verdicts", schema=None) as batch_op:
        batch_op.drop_index("ix_verdicts_verdict_is_primary")
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_decisions_rerun_gate_id_gates"), type_="foreignkey")
        batch_op.drop_column("rerun_gate_id")
    with op.batch_alter_table("repo_events", schema=None) as batch_op:
        batch_op.drop_column("acknowledged_by")
        batch_op.drop_column("acknowledged_at")
    with op.batch_alter_table("gates", schema=None) as batch_op:
        batch_op.drop_index("ix_gates_created_at_id")
        batch_op.drop_column("control_history_gate_ids")
