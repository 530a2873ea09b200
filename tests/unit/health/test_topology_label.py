"""The topology label names the hardware the probes found, whatever criteria judged it:
one CPU machine is ``1x2 CPU TCP`` under the CPU criteria and under the H200 ones."""

from __future__ import annotations

from health.criteria import load_criteria
from health.gate import _topology


def test_cpu_machine_gets_one_label_under_any_criteria():
    labels = {name: _topology(load_criteria(name), 1, 2, None)
              for name in ("cpu-gloo", "h200-x1", "h200-x2", "h200-x8", "gb200-x4")}
    assert set(labels.values()) == {"1x2 CPU TCP"}, labels


def test_gpu_label_takes_the_interconnect_only_from_criteria_for_that_gpu():
    assert _topology(load_criteria("h200-x2"), 1, 2, "NVIDIA H200") == "1x2 H200 NVLink"
    assert _topology(load_criteria("h200-x8"), 1, 8, "NVIDIA H200") == "1x8 H200 NVLink"
    # An H200 judged by GB200 or CPU criteria: the model is named, no borrowed interconnect.
    assert _topology(load_criteria("gb200-x4"), 1, 2, "NVIDIA H200") == "1x2 H200"
    assert _topology(load_criteria("cpu-gloo"), 1, 2, "NVIDIA H200") == "1x2 H200"
