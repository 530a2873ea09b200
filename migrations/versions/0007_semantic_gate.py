"""semantic gate: what each run trained, and the gate's semantic verdict (issue 19)

* ``runs.semantics``: the run's semantics record (batch, loss/grad-norm series, dtype
  coverage, probe digests) in ``orchestrator.domain.record_semantics``'s stored form;
  NULL for runs stored before, and for runs whose command prints none.
* ``semantic_verdicts``: one row per judgement of a gate's semantics (newest wins) with
  the timing verdict it was combined with and the combined decision
  (``reject (semantics)``, ``not comparable``, or the timing verdict).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("semantics", _JSON, nullable=True))
    op.create_table(
        "semantic_verdicts",
        sa.Column("id", _ID, nullable=False),
        sa.Column("gate_id", _ID, nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("timing_verdict", sa.String(length=16), nullable=True),
        sa.Column("decision", sa.String(length=32), nullable=True),
        sa.Column("numbers", _JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["gate_id"], ["gates.id"],
                                name=op.f("fk_semantic_verdicts_gate_id_gates"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_semantic_verdicts")),
    )
    with op.batch_alter_table("semantic_verdicts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_semantic_verdicts_gate_id"), ["gate_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_semantic_verdicts_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("semantic_verdicts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_semantic_verdicts_status"))
        batch_op.drop_index(batch_op.f("ix_semantic_verdicts_gate_id"))
    op.drop_table("semantic_verdicts")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("semantics")
