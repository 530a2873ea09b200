"""Pure helpers of the API and pages: SVG plot, storable-value check, error mapping."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from orchestrator.app.api.validation import ensure_storable
from orchestrator.app.web.plot import PlotRun, step_time_svg
from orchestrator.domain.errors import ValidationFailed

NS = "{http://www.w3.org/2000/svg}"


def test_plot_has_one_series_per_run_with_warmup_and_median():
    runs = [
        PlotRun("A0", "A", (0.9, 0.5, 0.4, 0.41, 0.42), 2, 0.41),
        PlotRun("X1", "X", (0.8, 0.39, 0.38, 0.385), 1, 0.385),
        PlotRun("B2", "B", (0.7, 0.45, 0.40, 0.42), 1, 0.42),
    ]
    root = ET.fromstring(step_time_svg(runs, title="gate <1>"))
    assert root.find(f"{NS}title").text == "gate <1>"
    polylines = root.findall(f"{NS}polyline")
    assert [len(p.get("points").split()) for p in polylines] == [5, 4, 4]
    assert len([r for r in root.findall(f"{NS}rect") if r.get("class") == "warmup"]) == 3
    medians = [ln for ln in root.findall(f"{NS}line") if ln.get("class") == "median"]
    assert len(medians) == 3
    # the candidate's median line sits lower (faster) than both controls' (SVG y grows down)
    ys = [float(m.get("y1")) for m in medians]
    assert ys[1] > ys[0] and ys[1] > ys[2]


def test_plot_without_steps_says_so():
    svg = step_time_svg([PlotRun("A0", "A", (), 10, None)])
    assert "no per-step times" in svg
    ET.fromstring(svg)


def test_plot_ignores_non_finite_and_flat_series():
    svg = step_time_svg([PlotRun("A0", "A", (0.5, float("nan"), 0.5), 0, 0.5)])
    root = ET.fromstring(svg)
    points = root.find(f"{NS}polyline").get("points")
    assert "nan" not in points.lower() and len(points.split()) == 2


@pytest.mark.parametrize(
    ("value", "field"),
    [({"a": {"b": ["ok", "x\x00"]}}, "a.b.1"), ({"p": float("nan")}, "p"), ([float("inf")], "0")],
)
def test_ensure_storable_names_the_field(value, field):
    with pytest.raises(ValidationFailed) as info:
        ensure_storable(value)
    assert info.value.field == field


def test_ensure_storable_accepts_plain_json():
    ensure_storable({"title": "t", "n": 1, "x": 1.5, "l": [True, None, "s"]})
