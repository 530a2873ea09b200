"""The default policy through a real gate (issue 12): the allocation starts with the
policy's own pattern (a conditioning control, then A X B), extends it while undecided
with the same builder and history as the stored verdict, and stores sequential, drift and
ratio-ci side by side."""

from __future__ import annotations

import sys
import time

import pytest
from sqlalchemy.orm import Session

from tests.factories import HARNESS, harness_gate, open_ledger, submit

pytestmark = pytest.mark.slow


def _run(engine, settings, gate_id):
    from orchestrator.runtime.gates import dispatch_pass, poll_pass
    from orchestrator.usecases.gates import get_gate

    dispatch_pass(engine, settings, gate_ids=[gate_id])
    deadline = time.monotonic() + 400
    while True:
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine) as session:
            gate = get_gate(session=session, gate_id=gate_id)
        if gate.status in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            return gate
        time.sleep(0.3)


@pytest.mark.parametrize("candidate_ms, expected", [(110.0, "reject"), (100.0, "neutral")])
def test_default_policy_plans_extends_and_decides(candidate_ms, expected):
    engine, settings = open_ledger()
    command = [sys.executable, str(HARNESS), "{warmup_steps}", "{measured_steps}", "{run_index}"]
    gate_in = harness_gate(control_ms=100.0, candidate_ms=candidate_ms, policy="sequential",
                           workload={"command": command},
                           control={"env": {"HARNESS_STEP_MS": "100", "HARNESS_DRIFT_PCT": "0.05",
                                            "HARNESS_SLEEP_S": "0"}},
                           candidate={"env": {"HARNESS_STEP_MS": str(candidate_ms),
                                              "HARNESS_DRIFT_PCT": "0.05", "HARNESS_SLEEP_S": "0"}})
    # run_pattern not set by the caller: the policy plans it
    gate_in = type(gate_in).model_validate(gate_in.model_dump(exclude={"run_pattern"}))
    assert gate_in.run_pattern == "A A X B"
    gate = _run(engine, settings, submit(engine, gate_in))
    assert gate.status == "succeeded", gate.status_reason
    roles = "".join(r.role for r in gate.runs)
    # sequential v2 decides from its third look (8 runs) on, within its 14-run budget
    assert roles.startswith("AAXBXAXB") and len(roles) <= 14 and len(roles) % 2 == 0
    verdicts = {v.policy: v for v in gate.verdicts}
    assert set(verdicts) == {"sequential", "drift", "ratio-ci"}
    primary = next(v for v in gate.verdicts if v.is_primary)
    assert primary.policy == "sequential"
    assert primary.verdict == expected, primary.numbers.get("reason")
    # the allocation stopped exactly where the stored verdict decided: nothing left to run
    assert primary.numbers["num_runs_used"] == len(roles)
    assert primary.numbers["next_roles"] in ([], ())
