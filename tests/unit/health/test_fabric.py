"""The fabric inputs of issue 4, each through the smi reader and the judge."""

from __future__ import annotations

import dataclasses

from health_test_support import node, results_for

from health.criteria import load_criteria
from health.judge import allocation_verdict, judge
from health.smi import parse_smi_q


def _fabric(checks):
    return [c for c in checks if c.check == "fabric"]


def test_sentinel_clique_same_on_all_gpus_warns_not_fails(gb200_text):
    """State Completed, Status Success, CliqueId 32766, non-zero ClusterUUID, all GPUs."""
    crit = load_criteria("gb200-x4")
    checks = judge(results_for(node("tray1", parse_smi_q(gb200_text))), crit)
    fab = _fabric(checks)
    assert len(fab) == 4
    assert {c.status for c in fab} == {"WARN"}
    assert all("sentinel" in c.message for c in fab)
    assert allocation_verdict(fab) == "degraded"


def test_one_gpu_with_other_clique_fails_naming_it(gb200_text):
    """Same, but GPU 2 reports a different CliqueId."""
    sections = gb200_text.split("GPU 00000000:")
    sections[3] = sections[3].replace(
        "CliqueId                                       : 32766",
        "CliqueId                                       : 4021",
    )
    gpus = parse_smi_q("GPU 00000000:".join(sections))
    assert [g.fabric.clique_id for g in gpus] == [32766, 32766, 4021, 32766]
    checks = judge(results_for(node("tray1", gpus)), load_criteria("gb200-x4"))
    fab = {c.gpu_index: c for c in _fabric(checks)}
    assert fab[2].status == "FAIL"
    assert "GPU 2 on tray1" in fab[2].message and "clique 4021" in fab[2].message
    assert {fab[i].status for i in (0, 1, 3)} == {"WARN"}
    assert allocation_verdict(checks) == "failed"


def test_single_node_h200_zero_cluster_uuid_passes(h200_text):
    """Completed, Success, CliqueId 0, all-zero ClusterUUID on one node -> PASS."""
    checks = judge(results_for(node("h200a", parse_smi_q(h200_text))), load_criteria("h200-x2"))
    fab = _fabric(checks)
    assert [c.status for c in fab] == ["PASS", "PASS"]


def test_zero_cluster_uuid_on_two_trays_fails(h200_text):
    gpus = parse_smi_q(h200_text)
    crit = dataclasses.replace(load_criteria("h200-x2"), num_gpus=4, num_nodes=2)
    checks = judge(results_for(node("a", gpus), node("b", gpus, 1)), crit)
    fab = _fabric(checks)
    assert {c.status for c in fab} == {"FAIL"}
    assert "zero cluster UUID" in fab[0].message


def test_completed_with_failed_status_fails(gb200_text):
    text = gb200_text.replace(
        "Status                                         : Success",
        "Status                                         : Timeout", 1)
    checks = judge(results_for(node("tray1", parse_smi_q(text))), load_criteria("gb200-x4"))
    fab = {c.gpu_index: c for c in _fabric(checks)}
    assert fab[0].status == "FAIL" and "status Timeout" in fab[0].message


def test_route_unhealthy_fails(gb200_text):
    text = gb200_text.replace(
        "Route Unhealthy                            : False",
        "Route Unhealthy                            : True", 1)
    checks = judge(results_for(node("tray1", parse_smi_q(text))), load_criteria("gb200-x4"))
    assert {c.gpu_index: c.status for c in _fabric(checks)}[0] == "FAIL"
