"""`axbgate verdict`: DESIGN.md section 3 worked examples to 1e-6, and bad input."""

from __future__ import annotations

import json

import pytest

from orchestrator.app.cli import main


def _verdict(capsys, *args):
    # These tests pin the campaign rule; the default policy is tested on its own below.
    policy = [] if "--policy" in args or "--batch" in args else ["--policy", "drift"]
    code = main(["verdict", *policy, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "a, x, b, midpoint, delta_ms, delta_pct, drift_pct, verdict",
    [
        ("0.4284051351", "0.4148231971", "0.4264598510", 0.42743249305, -12.609296, -2.950009,
         0.455109, "accept"),
        ("0.435652742", "0.434923236", "0.440625450", 0.438139096, -3.215860, -0.733982,
         1.134961, "neutral"),
    ],
)
def test_design_worked_examples(capsys, a, x, b, midpoint, delta_ms, delta_pct, drift_pct, verdict):
    code, out, err = _verdict(capsys, "--a", a, "--x", x, "--b", b, "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["midpoint_s"] == pytest.approx(midpoint, abs=1e-6)
    assert got["delta_ms"] == pytest.approx(delta_ms, abs=1e-6)
    assert got["delta_pct"] == pytest.approx(delta_pct, abs=1e-6)
    assert got["drift_pct"] == pytest.approx(drift_pct, abs=1e-6)
    assert got["verdict"] == verdict
    assert got["policy"] == "drift" and got["policy_version"]


def test_mfu_numbers(capsys):
    # numerator 14.155 pct-s/sample (353.88 TFLOP / 2.5 PFLOP/s x 100), batch 1.
    code, out, _ = _verdict(capsys, "--a", "0.4284051351", "--x", "0.4148231971", "--b",
                            "0.4264598510", "--mfu-numerator", "14.15523279568896", "--json")
    got = json.loads(out)
    assert got["mfu_control_pct"] == pytest.approx(14.15523279568896 / 0.42743249305, rel=1e-9)
    assert got["mfu_candidate_pct"] == pytest.approx(14.15523279568896 / 0.4148231971, rel=1e-9)
    assert got["mfu_points"] == pytest.approx(got["mfu_candidate_pct"] - got["mfu_control_pct"])
    assert got["mfu_points"] > 0


def test_regate_and_policy_options(capsys):
    code, out, _ = _verdict(capsys, "--a", "1.0", "--x", "1.004", "--b", "1.0", "--kind", "regate",
                            "--json")
    assert json.loads(out)["verdict"] == "pass"
    code, out, _ = _verdict(capsys, "--a", "1.0", "--x", "1.004", "--b", "1.0", "--kind", "regate",
                            "--tolerance", "0.2", "--json")
    assert json.loads(out)["verdict"] == "regression"
    code, out, _ = _verdict(capsys, "--a", "1.0", "--x", "0.9", "--b", "1.03", "--json")
    assert json.loads(out)["verdict"] == "inconclusive"
    code, out, _ = _verdict(capsys, "--a", "1.0", "--x", "0.9", "--b", "1.03", "--max-drift", "5",
                            "--json")
    assert json.loads(out)["verdict"] == "accept"


def test_long_pattern(capsys):
    code, out, err = _verdict(capsys, "--pattern", "A X B X A", "--medians",
                              "1.0,0.97,1.001,0.972,1.0", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["verdict"] == "accept" and got["num_candidate_copies"] == 2


def test_table_output(capsys):
    code, out, _ = _verdict(capsys, "--a", "0.4284051351", "--x", "0.4148231971", "--b", "0.4264598510")
    assert code == 0 and "ACCEPT" in out and "-2.950009 %" in out


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--a", "-1", "--x", "1", "--b", "1"], "--a must be a positive"),
        (["--a", "0", "--x", "1", "--b", "1"], "--a must be a positive"),
        (["--a", "1", "--x", "nan", "--b", "1"], "--x must be a positive"),
        (["--a", "1", "--x", "1", "--b", "inf"], "--b must be a positive"),
        (["--a", "1", "--x", "abc", "--b", "1"], "--x must be a number"),
        (["--a", "1", "--x", "1"], "--b is required"),
        (["--a", "1", "--x", "1", "--b", "1", "--policy", "vibes"], "vibes"),
        (["--a", "1", "--x", "1", "--b", "1", "--max-drift", "-2"], "max_drift_pct"),
        (["--a", "1", "--x", "1", "--b", "1", "--kind", "bisect"], "--kind"),
        (["--pattern", "A X Q", "--medians", "1,1,1"], "A, X or B"),
        (["--pattern", "A X B", "--medians", "1,1"], "3 runs but --medians has 2"),
    ],
)
def test_bad_input_exits_2(capsys, args, fragment):
    code, out, err = _verdict(capsys, *args)
    assert code == 2
    assert fragment in err
    assert "Traceback" not in err


def test_default_policy_is_sequential_and_history_calibrates_it(capsys, tmp_path):
    history = tmp_path / "history.json"
    history.write_text(json.dumps([[0.1, 0.1003], [0.1002, 0.1], [0.1, 0.1002]]))
    # conditioning A, then A X B X A X B with X 1% faster: decided at look 3 (8 runs); the
    # consistent 3-pair history adds floor(0.25 x 4 own dof) = 1 dof (sequential v2)
    code = main(["verdict", "--pattern", "A A X B X A X B", "--medians",
                 "0.42828,0.43,0.4257,0.43086,0.42527,0.42936,0.42591,0.43043",
                 "--history", str(history), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["policy"] == "sequential" and out["policy_version"] == "3"
    assert out["history_check"] == "consistent" and out["num_history_gates"] == 3
    assert out["num_history_pairs"] == 1 and out["dof"] == 5 and out["verdict"] == "accept"


def test_batch_judges_each_line_and_names_bad_ones(capsys, tmp_path):
    batch = tmp_path / "gates.jsonl"
    batch.write_text(json.dumps({"id": "g1", "pattern": "AXB", "policy": "drift",
                                 "medians_s": [0.4284051351, 0.4148231971, 0.4264598510]})
                     + "\n" + json.dumps({"id": "g2", "pattern": "AXB", "medians_s": [1, -1, 1]}) + "\n")
    code = main(["verdict", "--batch", str(batch)])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert code == 2
    assert lines[0]["id"] == "g1" and lines[0]["verdict"] == "accept"
    assert lines[1]["line"] == 2 and "median" in lines[1]["error"]
