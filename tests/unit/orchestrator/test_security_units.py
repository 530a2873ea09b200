"""Pure parts of the least-privilege work: secret names and masking, secret references,
control-character stripping, the run-environment filter, path fields, token scopes."""

from __future__ import annotations

import pytest

from orchestrator.domain.secrets import (
    MASK,
    mask_env,
    mask_override,
    mask_url,
    parse_secret_ref,
    secret_refs_of,
    strip_control,
)
from orchestrator.executors.runenv import RunEnvPolicy, resolve_secret_refs, submission_env


@pytest.mark.parametrize("name", ["HF_TOKEN", "db_password", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID",
                                  "OPENAI_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "AXBGATE_DATABASE__URL",
                                  "SSH_AUTH_SOCK", "PG_DSN", "TORCH_HUB_TOKEN"])
def test_secret_names_are_masked(name):
    assert mask_env({name: "v"}) == {name: MASK}


@pytest.mark.parametrize("name", ["NCCL_ALGO", "NCCL_IB_PKEY", "TORCH_LOGS", "CUDA_VISIBLE_DEVICES", "PATH",
                                  "HARNESS_STEP_MS", "MONKEY"])
def test_ordinary_names_are_not(name):
    assert mask_env({name: "v"}) == {name: "v"}


def test_references_and_overrides():
    assert mask_env({"HF_TOKEN": "secret://HF_TOKEN"}) == {"HF_TOKEN": "secret://HF_TOKEN"}
    assert mask_override("DB_PASSWORD=pw") == f"DB_PASSWORD={MASK}"
    assert mask_override("model.dim=8") == "model.dim=8"
    assert parse_secret_ref("secret://HF_TOKEN") == "HF_TOKEN" and parse_secret_ref("plain") is None
    with pytest.raises(ValueError, match="secret://NAME"):
        parse_secret_ref("secret://bad name")
    assert secret_refs_of({"A": "secret://B", "C": "d"}) == {"A": "B"}


def test_urls_lose_their_password():
    assert mask_url("postgresql+psycopg://axb:pw@db:5432/axb") == f"postgresql+psycopg://axb:{MASK}@db:5432/axb"
    assert mask_url("https://ghp_0123456789abcdefghijkl@github.com/o/r") == f"https://{MASK}@github.com/o/r"
    assert mask_url("git@github.com:o/r.git") == "git@github.com:o/r.git"
    assert mask_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_control_characters_are_stripped():
    raw = "a\x1b[31mred\x1b[0m\x07\rb\x1b]0;evil title\x07c\x9b2Jd\x00e\tf\ng\x7f\x85"
    assert strip_control(raw) == "aredbcde\tf\ng"


def test_run_env_filter():
    policy = RunEnvPolicy(allow=("PATH", "NCCL_*", "TORCH_*"), passthrough=("WANDB_API_KEY",),
                          secret_patterns=("*TOKEN*", "*_KEY"))
    server = {"PATH": "/bin", "NCCL_DEBUG": "WARN", "TORCH_HUB_TOKEN": "t", "WANDB_API_KEY": "w",
              "AXBGATE_API_TOKEN": "a", "AXBGATE_DATA_DIR": "/d", "HOME": "/root", "HF_TOKEN": "h"}
    assert submission_env(server, policy) == {"PATH": "/bin", "NCCL_DEBUG": "WARN", "WANDB_API_KEY": "w"}
    assert submission_env(server, policy, ["HF_TOKEN", "ABSENT"])["HF_TOKEN"] == "h"
    assert resolve_secret_refs({"X": "secret://HF_TOKEN", "Y": "1"}, server) == {"X": "h", "Y": "1"}
    with pytest.raises(KeyError, match="ABSENT is not set"):
        resolve_secret_refs({"X": "secret://ABSENT"}, server)
    assert RunEnvPolicy.from_plan(policy.to_plan()) == policy


def test_settings_refuse_unsafe_values():
    from pydantic import ValidationError

    from orchestrator.settings import Settings

    with pytest.raises(ValidationError, match="AXBGATE_"):
        Settings(security={"run_env_passthrough": ["AXBGATE_API_TOKEN"]})
    with pytest.raises(ValidationError, match="uid 0"):
        Settings(security={"run_as_user": "root"})
    with pytest.raises(ValidationError, match="not an account"):
        Settings(security={"run_as_user": "no-such-account-here"})


def test_gate_env_accepts_references_only_in_their_form():
    from orchestrator.domain.gate_spec import SideSpec

    assert SideSpec(env={"HF_TOKEN": "secret://HF_TOKEN"}).env["HF_TOKEN"] == "secret://HF_TOKEN"
    with pytest.raises(ValueError, match="secret://NAME"):
        SideSpec(env={"HF_TOKEN": "secret://"})


def test_token_scopes(session):
    from orchestrator.domain.errors import ValidationFailed
    from orchestrator.usecases.tokens import create_token, token_allows, verify_token

    token, secret = create_token(session=session, name="ci", scopes=["submit"])
    assert token.scopes == ["submit"] and verify_token(session=session, secret=secret).scopes == ["submit"]
    assert token_allows(token, "submit") and token_allows(token, "read")
    assert not token_allows(token, "decide") and not token_allows(token, "admin")
    admin, _ = create_token(session=session, name="ops", scopes=["admin"])
    assert all(token_allows(admin, s) for s in ("read", "submit", "decide", "admin"))
    with pytest.raises(ValidationFailed, match="unknown scope"):
        create_token(session=session, name="x", scopes=["root"])
    with pytest.raises(ValidationFailed, match="control characters"):
        create_token(session=session, name="a\x1b[2Jb")


def test_trainer_provenance_masks_the_names_the_driver_lists(monkeypatch):
    from trainer.records import _provenance_env

    monkeypatch.setenv("TORCH_HUB_TOKEN", "t0k3n")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.setenv("AXBGATE_MASKED_ENV", "TORCH_HUB_TOKEN,OTHER")
    env = _provenance_env()
    assert env["TORCH_HUB_TOKEN"] == "***" and env["NCCL_DEBUG"] == "WARN"
    assert "AXBGATE_MASKED_ENV" not in env
