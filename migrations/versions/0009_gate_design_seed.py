"""gate design seed

* ``gates.design_seed``: seed of a sequential gate's randomised run order (mirrored
  X C C X / C X X C blocks, ``orchestrator.verdict.design``; issue 23). NULL for gates
  stored before it and for gates whose pattern is run as given.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gates") as batch:
        batch.add_column(sa.Column("design_seed", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gates") as batch:
        batch.drop_column("design_seed")
