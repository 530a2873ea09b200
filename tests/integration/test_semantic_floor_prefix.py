"""The semantic floor prefix goes from the gate request or the control recipe's ``[measure]``
into the stored gate options and from there into the semantic policy of the stored verdict
(issue 24 point 8), on a real ledger with the real A/A logs of a 77-step window."""

from __future__ import annotations

import copy

import pytest
from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate
from orchestrator.domain.errors import ValidationFailed
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.usecases.judge import judge_gate_semantics
from orchestrator.usecases.measure_defaults import apply_recipe_measure_defaults
from tests.factories import open_ledger, submit
from tests.semantic_window60 import window60_semantics
from trainer.config import RECIPES_DIR


@pytest.fixture
def ledger():
    engine, settings = open_ledger()
    yield engine
    engine.dispose()


def _gate_in(recipe: str, **extra) -> GateCreate:
    return GateCreate.model_validate({"title": "floor prefix", "workload": {"recipe": recipe},
                                      "executor": "debug", "health": {"enabled": False},
                                      "policy": "drift", **extra})


def _judge(engine, gate_id: int, semantics) -> dict:
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        runs = sorted(gate.runs, key=lambda r: r.order)
        assert [r.role for r in runs] == [role for role, _, _ in semantics]  # the pattern A X B
        for run, (_, _, sem) in zip(runs, semantics, strict=True):
            run.status, run.median_step_s, run.semantics = "succeeded", 0.86, sem
        session.flush()
        judge_gate_semantics(session=session, gate=gate, timing_verdict="accept")
        session.commit()
        stored = store.semantic_verdicts.latest_semantic_verdict(session=session, gate_id=gate_id)
        return {"status": stored.status, "decision": stored.decision, **stored.numbers}


def test_request_prefix_reaches_the_policy(ledger, tmp_path):
    semantics = window60_semantics(tmp_path / "logs")
    bumped = copy.deepcopy(semantics)
    bumped[1][2]["grad_norm"][0] *= 1.10  # a 10% gradient-norm change at step 0
    default = submit(ledger, _gate_in("tiny"))
    whole_window = submit(ledger, _gate_in("tiny", semantic_floor_prefix_steps=77))
    with Session(ledger) as session:
        assert session.get(Gate, default).options["semantic_floor_prefix_steps"] is None
        assert session.get(Gate, whole_window).options["semantic_floor_prefix_steps"] == 77
    caught = _judge(ledger, default, bumped)
    assert caught["status"] == "changed" and caught["decision"] == "reject (semantics)"
    assert caught["floor"]["floor_prefix_steps"] == 5
    assert caught["findings"][0]["step"] == 0 and caught["findings"][0]["quantity"] == "grad_norm"
    blind = _judge(ledger, whole_window, bumped)  # the gate asked for one floor over 77 steps
    assert blind["floor"]["floor_prefix_steps"] == 77 and blind["status"] == "within tolerance"


def test_recipe_measure_names_the_prefix(ledger, tmp_path):
    recipe = tmp_path / "demo-prefix.toml"
    text = (RECIPES_DIR / "tiny.toml").read_text()
    text = (text.replace("[measure]", "[measure]\nsemantic_floor_prefix_steps = 2", 1) if "[measure]" in text
            else text + "\n[measure]\nsemantic_floor_prefix_steps = 2\n")
    recipe.write_text(text)
    assert apply_recipe_measure_defaults(_gate_in(str(recipe))).semantic_floor_prefix_steps == 2
    # The request's own value wins over the recipe's.
    assert apply_recipe_measure_defaults(
        _gate_in(str(recipe), semantic_floor_prefix_steps=9)).semantic_floor_prefix_steps == 9
    gate_id = submit(ledger, _gate_in(str(recipe)))
    with Session(ledger) as session:
        assert session.get(Gate, gate_id).options["semantic_floor_prefix_steps"] == 2
    numbers = _judge(ledger, gate_id, window60_semantics(tmp_path / "logs"))
    assert numbers["floor"]["floor_prefix_steps"] == 2 and numbers["status"] == "within tolerance"


def test_out_of_range_prefix_names_the_field(tmp_path):
    with pytest.raises(ValueError, match="semantic_floor_prefix_steps"):
        _gate_in("tiny", semantic_floor_prefix_steps=0)
    recipe = tmp_path / "bad-prefix.toml"
    text = (RECIPES_DIR / "tiny.toml").read_text()
    recipe.write_text(text.replace("[measure]", "[measure]\nsemantic_floor_prefix_steps = 500", 1)
                      if "[measure]" in text else text + "\n[measure]\nsemantic_floor_prefix_steps = 500\n")
    with pytest.raises(ValidationFailed, match="semantic_floor_prefix_steps") as info:
        apply_recipe_measure_defaults(_gate_in(str(recipe)))
    assert info.value.field == "workload.recipe"
