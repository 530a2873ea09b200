"""Gate request validation: every user string that reaches a process is checked."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from orchestrator.domain.gate_spec import GateCreate, parse_pattern
from orchestrator.executors.slurm import parse_squeue


def _gate(**kw):
    base = {"workload": {"command": ["python", "bench.py", "{warmup_steps}"]}}
    base.update(kw)
    return GateCreate.model_validate(base)


@pytest.mark.parametrize("pattern, roles", [
    ("A X B", ["A", "X", "B"]), ("axbxa", ["A", "X", "B", "X", "A"]), ("A,X,A", ["A", "X", "A"]),
])
def test_patterns(pattern, roles):
    assert parse_pattern(pattern) == roles


@pytest.mark.parametrize("pattern, fragment", [
    ("A Q B", "only A, X and B"), ("X A B", "control before and after"), ("A B", "an X"),
    ("B X B", "an A"), ("A X B X", "control before and after"), ("A X " * 11 + "B", "at most 21"),
])
def test_bad_patterns(pattern, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_pattern(pattern)


@pytest.mark.parametrize("ref", ["--upload-pack=touch /tmp/x", "HEAD..main", "a//b", "$(id)",
                                 "main;rm", "x@{1}", "a b"])
def test_bad_refs_rejected(ref):
    with pytest.raises(ValidationError, match="not a valid git ref"):
        _gate(candidate={"source": {"repo": "/tmp/r", "ref": ref}})


@pytest.mark.parametrize("ref", ["main", "v1.2.3", "HEAD~1", "feature/x-y", "0123abcd", "HEAD^2"])
def test_good_refs(ref):
    assert _gate(candidate={"source": {"repo": "/tmp/r", "ref": ref}}).candidate.source.ref == ref


@pytest.mark.parametrize("env, fragment", [
    ({"1BAD": "1"}, "name '1BAD' is invalid"), ({"A-B": "1"}, "invalid"),
    ({"MASTER_PORT": "1"}, "set by the launcher"), ({"NCCL_NVLS_ENABLE": "1"}, "set by the launcher"),
    ({"X": "a\x00b"}, "NUL"),
])
def test_bad_env(env, fragment):
    with pytest.raises(ValidationError, match=fragment):
        _gate(candidate={"env": env})


def test_env_value_with_shell_metacharacters_is_kept_literally():
    gate = _gate(candidate={"env": {"NCCL_ALGO": "Ring; touch /tmp/pwned `id` $(id)"}})
    assert gate.candidate.env["NCCL_ALGO"] == "Ring; touch /tmp/pwned `id` $(id)"


@pytest.mark.parametrize("overrides, fragment", [
    (["model.num_layers"], "section.key=value"), (["num_layers=2"], "section.key=value"),
    (["Model.x=1"], "section.key=value"),
])
def test_bad_recipe_override_shape(overrides, fragment):
    with pytest.raises(ValidationError, match=fragment):
        GateCreate.model_validate({"candidate": {"recipe_overrides": overrides}})


def test_command_placeholders_and_workload_choice():
    with pytest.raises(ValidationError, match="unknown placeholder"):
        _gate(workload={"command": ["x", "{rm_rf}"]})
    with pytest.raises(ValidationError, match="exactly one of recipe or command"):
        _gate(workload={"command": ["x"], "recipe": "tiny"})
    with pytest.raises(ValidationError, match="not to workload.command"):
        _gate(candidate={"recipe_overrides": ["model.packed_qkv=true"]})


def test_extra_fields_and_policy_are_rejected():
    with pytest.raises(ValidationError, match="Extra inputs"):
        _gate(colour="blue")
    with pytest.raises(ValidationError, match="vibes"):
        _gate(policy="vibes")
    with pytest.raises(ValidationError, match="max_drift_pct"):
        _gate(policy_params={"max_drift_pct": -1})
    with pytest.raises(ValidationError, match="time_limit_min"):
        _gate(topology={"time_limit_min": 1})
    with pytest.raises(ValidationError, match="extra_slurm"):
        _gate(topology={"extra_slurm": {"constraint": "rm -rf /; x"}})
    with pytest.raises(ValidationError, match="may not set 'output'"):
        _gate(topology={"extra_slurm": {"output": "/etc/passwd"}})


def test_parse_squeue():
    assert parse_squeue("12 RUNNING\n13 PENDING\n\n") == {"12": "RUNNING", "13": "PENDING"}
