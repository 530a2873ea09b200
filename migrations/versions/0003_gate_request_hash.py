"""gate request hash (idempotency-key reuse with a different request is a conflict)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("request_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gates", schema=None) as batch_op:
        batch_op.drop_column("request_sha256")
