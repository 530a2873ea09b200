"""gate options and control history get their own columns; runs remember how far their
step stream was ingested

* ``gates.options``: the non-policy options of a gate (health, run_timeout_s, max_extend,
  max_log_bytes), until now stored as ``_``-prefixed keys inside ``policy_params``; old
  rows are moved over so ``policy_params`` holds policy parameters only.
* ``gates.control_history``: the control-median pairs the gate is judged against, taken
  once when the gate is dispatched, so the allocation's extend decision and the stored
  verdict use the same history.
* ``runs.steps_ingested_bytes``: byte offset of the run's step stream already stored.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
_OPTION_KEYS = {"_health": "health", "_run_timeout_s": "run_timeout_s",
                "_max_extend": "max_extend", "_max_log_bytes": "max_log_bytes"}
_gates = sa.table("gates", sa.column("id", sa.Integer), sa.column("policy_params", _JSON),
                  sa.column("options", _JSON))


def upgrade() -> None:
    with op.batch_alter_table("gates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("options", _JSON, nullable=True))
        batch_op.add_column(sa.Column("control_history", _JSON, nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("steps_ingested_bytes", sa.BigInteger(), nullable=False,
                                      server_default="0"))
    conn = op.get_bind()
    for gate_id, params in conn.execute(sa.select(_gates.c.id, _gates.c.policy_params)).all():
        params = dict(params or {})
        options = {new: params.pop(old) for old, new in _OPTION_KEYS.items() if old in params}
        params = {k: v for k, v in params.items() if not k.startswith("_")}
        conn.execute(_gates.update().where(_gates.c.id == gate_id)
                     .values(policy_params=params, options=options))
    with op.batch_alter_table("gates", schema=None) as batch_op:
        batch_op.alter_column("options", existing_type=_JSON, nullable=False)


def downgrade() -> None:
    conn = op.get_bind()
    for gate_id, params, options in conn.execute(
        sa.select(_gates.c.id, _gates.c.policy_params, _gates.c.options)
    ).all():
        merged = dict(params or {})
        merged.update({old: (options or {})[new] for old, new in _OPTION_KEYS.items()
                       if new in (options or {})})
        conn.execute(_gates.update().where(_gates.c.id == gate_id).values(policy_params=merged))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("steps_ingested_bytes")
    with op.batch_alter_table("gates", schema=None) as batch_op:
        batch_op.drop_column("control_history")
        batch_op.drop_column("options")
