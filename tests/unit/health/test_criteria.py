"""Criteria files: shipped values, selection, extends, validation."""

from __future__ import annotations

import pytest

from health.criteria import load_criteria, select_criteria, shipped_criteria


def test_shipped_reference_numbers():
    """DESIGN.md section 4.5 and section 1 reference values live in the data files."""
    assert load_criteria("gb200-2x4").collectives.baseline_busbw_gbps["all_reduce"] == 463.0
    assert load_criteria("h200-x2").collectives.baseline_busbw_gbps["all_reduce"] == 296.0
    gb = load_criteria("gb200-x4").clocks
    assert (gb.healthy_max_sm_mhz, gb.degraded_max_sm_mhz) == ((2062,), (1965,))
    assert load_criteria("h200-x8").clocks.healthy_max_sm_mhz == (1980,)
    col = load_criteria("h200-x1").collectives
    assert (col.num_elements, col.warmup_iters, col.timed_iters) == (128 * 2**20, 8, 128)
    assert (col.warn_ratio, col.fail_ratio) == (0.95, 0.90)
    assert {c.name for c in shipped_criteria()} == {
        "cpu-gloo", "h200-x1", "h200-x2", "h200-x8", "gb200-x4", "gb200-2x4"}


@pytest.mark.parametrize(
    ("model", "gpus", "nodes", "name"),
    [
        ("NVIDIA H200", 1, 1, "h200-x1"),
        ("NVIDIA H200", 2, 1, "h200-x2"),
        ("NVIDIA H200", 8, 1, "h200-x8"),
        ("NVIDIA GB200", 4, 1, "gb200-x4"),
        ("NVIDIA GB200", 8, 2, "gb200-2x4"),
        (None, 0, 1, "cpu-gloo"),
        ("", 0, 3, "cpu-gloo"),
    ],
)
def test_select(model, gpus, nodes, name):
    assert select_criteria(model, gpus, nodes).name == name


def test_select_unknown_topology():
    with pytest.raises(ValueError, match="no shipped criteria"):
        select_criteria("NVIDIA H200", 3, 1)


def test_extends_and_override_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\nextends = "h200-x2"\n[deadlines]\ncorrectness_s = 5.0\n'
                 '[collectives]\nwarn_ratio = 0.97\n')
    c = load_criteria(f)
    assert c.name == "mine" and c.source == str(f)
    assert c.deadlines.correctness_s == 5.0 and c.deadlines.rendezvous_s == 120.0
    assert c.collectives.warn_ratio == 0.97
    assert c.collectives.baseline_busbw_gbps["all_reduce"] == 296.0
    assert c.gpu_model == "H200" and c.num_gpus == 2
    over = load_criteria("h200-x2", {"collectives": {"baseline_busbw_gbps": {"all_reduce": 1.0}}})
    assert over.collectives.baseline_busbw_gbps["all_reduce"] == 1.0


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ('[collectives]\nwarm_ratio = 0.9\n', "unknown keys"),
        ('[collectives]\nwarn_ratio = 0.8\nfail_ratio = 0.9\n', "fail_ratio <= warn_ratio"),
        ('[deadlines]\ncorrectness_s = 0\n', "must be > 0"),
        ('[collectives]\nops = ["all_to_all"]\n', "unknown collective"),
        ('[gpu]\nidle_policy = "ignore"\n', "idle_policy"),
        ('[match]\ngpu = "H200"\n', "unknown keys"),
    ],
)
def test_invalid(tmp_path, body, match):
    f = tmp_path / "bad.toml"
    f.write_text('name = "bad"\n' + body)
    with pytest.raises(ValueError, match=match):
        load_criteria(f)


def test_missing_and_cycle(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        load_criteria("no-such-criteria")
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(f'name = "a"\nextends = "{b}"\n')
    b.write_text(f'name = "b"\nextends = "{a}"\n')
    with pytest.raises(ValueError, match="cycle"):
        load_criteria(a)


def test_round_trip_through_rank_plan():
    from health.criteria import criteria_from_mapping  # noqa: PLC0415

    c = load_criteria("gb200-2x4")
    assert criteria_from_mapping(c.to_dict(), source=c.source) == c
