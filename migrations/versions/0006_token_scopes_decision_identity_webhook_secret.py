"""token scopes, the token behind a decision, webhook signing secrets

* ``api_tokens.scopes``: what a token may do (``read``, ``submit``, ``decide``,
  ``admin``). Tokens made before scopes existed could do every write, so they keep all
  four scopes (re-issue narrower ones with ``axbgate token create NAME --scope ...``).
* ``decisions.token_id`` and ``decisions.note``: the token a decision was recorded with
  (its name is ``decided_by``) and the free text the client may add.
* ``tracked_repositories.webhook_secret``: per-repository HMAC-SHA256 signing secret of
  webhook bodies (Standard Webhooks). Repositories tracked before get a fresh secret;
  ``axbgate repo webhook-secret ID`` shows a new one.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import base64
import secrets

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
_tokens = sa.table("api_tokens", sa.column("id", sa.Integer), sa.column("scopes", _JSON))
_repos = sa.table("tracked_repositories", sa.column("id", sa.Integer),
                  sa.column("webhook_secret", sa.String))


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scopes", _JSON, nullable=True))
    conn = op.get_bind()
    conn.execute(_tokens.update().values(scopes=["read", "submit", "decide", "admin"]))
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.alter_column("scopes", existing_type=_JSON, nullable=False)
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("note", sa.Text(), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("token_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                                      nullable=True))
        batch_op.create_foreign_key(batch_op.f("fk_decisions_token_id_api_tokens"), "api_tokens",
                                    ["token_id"], ["id"], ondelete="SET NULL")
    with op.batch_alter_table("tracked_repositories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("webhook_secret", sa.String(length=128), nullable=True))
    for (repo_id,) in conn.execute(sa.select(_repos.c.id)).all():
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        conn.execute(_repos.update().where(_repos.c.id == repo_id).values(webhook_secret=secret))


def downgrade() -> None:
    with op.batch_alter_table("tracked_repositories", schema=None) as batch_op:
        batch_op.drop_column("webhook_secret")
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_decisions_token_id_api_tokens"), type_="foreignkey")
        batch_op.drop_column("token_id")
        batch_op.drop_column("note")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("scopes")
