// Interactive plots of the ledger with the vendored uPlot (static/vendor/uplot, MIT).
// Each plot reads its data from a <script type="application/json"> block next to it, so the
// page works without any request; drag to zoom, double-click to reset, hover for values.
// Every rendered plot is kept in window.axbgatePlots[id] and its container carries
// data-num-series / data-num-points (finite points drawn) for tests and screen readers.
(function () {
  "use strict";
  var ROLE_COLORS = { A: "#1f77b4", B: "#2a9d8f", X: "#d62728" };
  var plots = (window.axbgatePlots = window.axbgatePlots || {});

  function readJSON(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  function width(el) {
    return Math.max(Math.min(el.clientWidth || 900, 1400), 320);
  }

  function finite(v) {
    return typeof v === "number" && isFinite(v);
  }

  function countPoints(data) {
    var n = 0;
    for (var i = 1; i < data.length; i++) {
      for (var j = 0; j < data[i].length; j++) { if (finite(data[i][j])) { n++; } }
    }
    return n;
  }

  function mount(el, key, opts, data, numSeries) {
    if (plots[key]) { plots[key].destroy(); }
    el.innerHTML = "";
    var u = new uPlot(opts, data, el);
    plots[key] = u;
    el.dataset.numSeries = String(numSeries);
    el.dataset.numPoints = String(countPoints(data));
    return u;
  }

  function range(values, pad) {
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (v) { if (finite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    if (!isFinite(lo)) { return [0, 1]; }
    if (hi - lo < 1e-9) { lo = lo * 0.995; hi = hi * 1.005 + 1e-6; }
    var m = (hi - lo) * pad;
    return [lo - m, hi + m];
  }

  // ---- per-step A/X/B plot of one gate -----------------------------------------------
  // data: {runs: [{label, role, steps_s: [...], num_warmup_steps, median_s}],
  //        midpoint_s, threshold_pct}
  function stepSeriesData(d, overlay) {
    var runs = d.runs.filter(function (r) { return r.steps_s.length > 0; });
    var xs = [], offsets = [], total = 0, longest = 0;
    runs.forEach(function (r) { offsets.push(total); total += r.steps_s.length; longest = Math.max(longest, r.steps_s.length); });
    var n = overlay ? longest : total;
    for (var i = 0; i < n; i++) { xs.push(i); }
    var cols = [xs], series = [{ label: overlay ? "step of run" : "step" }], measured = [];
    runs.forEach(function (r, k) {
      var col = new Array(n).fill(null);
      var off = overlay ? 0 : offsets[k];
      r.steps_s.forEach(function (s, j) {
        if (finite(s)) {
          col[off + j] = s * 1000.0;
          if (j >= r.num_warmup_steps) { measured.push(s * 1000.0); }
        }
      });
      cols.push(col);
      series.push({ label: r.label, stroke: ROLE_COLORS[r.role] || "#555", width: 1.5,
                    points: { show: n <= 400, size: 4 }, spanGaps: false,
                    value: function (u, v) { return v == null ? "-" : v.toFixed(3) + " ms"; } });
    });
    runs.forEach(function (r, k) {  // run medians: dashed over the measured steps
      var col = new Array(n).fill(null);
      if (finite(r.median_s)) {
        var off = overlay ? 0 : offsets[k];
        for (var j = Math.min(r.num_warmup_steps, r.steps_s.length - 1); j < r.steps_s.length; j++) {
          col[off + j] = r.median_s * 1000.0;
        }
        measured.push(r.median_s * 1000.0);
      }
      cols.push(col);
      series.push({ label: r.label + " median", stroke: ROLE_COLORS[r.role] || "#555", width: 2,
                    dash: [6, 4], points: { show: false },
                    value: function (u, v) { return v == null ? "-" : v.toFixed(3) + " ms"; } });
    });
    return { runs: runs, offsets: offsets, cols: cols, series: series, measured: measured };
  }

  function renderSteps(el, d, overlay) {
    var s = stepSeriesData(d, overlay);
    var band = null;
    if (finite(d.midpoint_s) && finite(d.threshold_pct)) {
      var mid = d.midpoint_s * 1000.0, t = d.threshold_pct / 100.0;
      band = [mid * (1 - t), mid, mid * (1 + t)];
      s.measured.push(band[0], band[2]);
    }
    var yr = range(s.measured, 0.15);  // warmup steps never set the y-range
    var hooks = {
      drawClear: [function (u) {
        var ctx = u.ctx;
        ctx.save();
        ctx.fillStyle = "rgba(128,128,128,0.16)";
        s.runs.forEach(function (r, k) {
          var warm = Math.min(r.num_warmup_steps, r.steps_s.length);
          if (warm <= 0) { return; }
          var off = overlay ? 0 : s.offsets[k];
          if (overlay && k > 0) { return; }
          var x0 = u.valToPos(off - 0.5, "x", true), x1 = u.valToPos(off + warm - 0.5, "x", true);
          ctx.fillRect(Math.max(x0, u.bbox.left), u.bbox.top, Math.max(x1 - Math.max(x0, u.bbox.left), 0), u.bbox.height);
        });
        if (band) {
          var y0 = u.valToPos(band[2], "y", true), y1 = u.valToPos(band[0], "y", true);
          ctx.fillStyle = "rgba(255,193,7,0.18)";
          ctx.fillRect(u.bbox.left, y0, u.bbox.width, y1 - y0);
          ctx.strokeStyle = "rgba(120,90,0,0.8)";
          ctx.setLineDash([3, 3]);
          var ym = u.valToPos(band[1], "y", true);
          ctx.beginPath(); ctx.moveTo(u.bbox.left, ym); ctx.lineTo(u.bbox.left + u.bbox.width, ym); ctx.stroke();
        }
        ctx.restore();
      }]
    };
    hooks.setCursor = [function (u) { readout(el, u, s); }];
    var opts = {
      width: width(el), height: 340,
      scales: { x: { time: false }, y: { auto: false, range: yr } },
      axes: [{ label: overlay ? "step within run" : "step (runs in order)" }, { label: "step time (ms)", size: 70 }],
      series: s.series,
      legend: { show: false },  // one entry per role below, not one per run and median
      cursor: { drag: { x: true, y: true, uni: 30 } },
      hooks: hooks
    };
    var u = mount(el, el.id, opts, s.cols, s.runs.length);
    stepLegend(el, s.runs, band);
    el.dataset.numWarmupBands = String(s.runs.filter(function (r) { return r.num_warmup_steps > 0 && r.steps_s.length > 0; }).length);
    el.dataset.numMedians = String(s.runs.filter(function (r) { return finite(r.median_s); }).length);
    el.dataset.yMinMs = String(yr[0]);
    el.dataset.yMaxMs = String(yr[1]);
    el.dataset.mode = overlay ? "overlay" : "series";
    return u;
  }

  // The short legend of the per-step plot: one entry per role present, the run medians,
  // the warmup shading and the decision band (never one entry per run or step).
  function stepLegend(el, runs, band) {
    var id = el.id + "-legend";
    var box = document.getElementById(id);
    if (!box) {
      box = document.createElement("div");
      box.id = id;
      box.className = "plot-legend";
      el.parentNode.insertBefore(box, el.nextSibling);
    }
    var names = { A: "control A", B: "control B", X: "candidate X" };
    var roles = [];
    runs.forEach(function (r) { if (roles.indexOf(r.role) < 0) { roles.push(r.role); } });
    var html = roles.map(function (role) {
      return '<span class="legend-entry" data-role="' + role + '"><span class="swatch" style="border-color:' +
        (ROLE_COLORS[role] || "#555") + '"></span>' + (names[role] || role) + "</span>";
    });
    html.push('<span class="legend-entry"><span class="swatch dashed" style="border-color:#555"></span>run median (measured steps)</span>');
    html.push('<span class="legend-entry"><span class="swatch box" style="background:rgba(128,128,128,0.3)"></span>warmup</span>');
    if (band) {
      html.push('<span class="legend-entry"><span class="swatch box" style="background:rgba(255,193,7,0.4)"></span>control midpoint &plusmn; decision band</span>');
    }
    html.push('<span class="readout" id="' + el.id + '-readout"></span>');
    box.innerHTML = html.join("");
    el.dataset.numLegendEntries = String(box.querySelectorAll(".legend-entry").length);
  }

  // Hover readout of the per-step plot: the run and step under the cursor with its time.
  function readout(el, u, s) {
    var out = document.getElementById(el.id + "-readout");
    var i = u.cursor.idx;
    if (!out) { return; }
    if (i == null) { out.textContent = ""; return; }
    var parts = [];
    for (var k = 0; k < s.runs.length; k++) {
      var v = u.data[k + 1][i];
      if (finite(v)) { parts.push(s.runs[k].label + ": " + v.toFixed(3) + " ms"); }
    }
    out.textContent = "step " + i + (parts.length ? " \u2013 " + parts.join(", ") : "");
  }

  // ---- history of gates (family / recipe / topology) -----------------------------------
  // data: {points: [{gate_id, t, group, midpoint_s, candidate_s, control_min_s, control_max_s,
  //        verdict}], groups: [{label, num_gates, change_point_gate_ids}], tolerance_pct,
  //        change_points: [index]}
  // One midpoint line per control identity (group): two workloads never share a line; the
  // control band, the tolerance band and the change points are drawn per group.
  var GROUP_COLORS = ["#1f77b4", "#9467bd", "#2a9d8f", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var DAY_S = 86400;

  // The x range of a time axis: the real time range padded by 5% of it, at least one day
  // either side (a one-gate history is two days wide, not years).
  function timeRange(xs) {
    var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs);
    var pad = Math.max((hi - lo) * 0.05, DAY_S);
    return [lo - pad, hi + pad];
  }

  function paddedTimeScale(xs) {
    var padded = timeRange(xs), dmin = Math.min.apply(null, xs), dmax = Math.max.apply(null, xs);
    return { time: true, range: function (u, min, max) {
      // A range covering all the data (auto-ranging, a reset; uPlot widens a single point
      // by years) is padded; a drag-zoom into part of the data keeps its own range.
      return (min == null || max == null || max - min >= dmax - dmin) ? padded : [min, max];
    } };
  }

  function renderHistory(el, d) {
    var pts = d.points;
    var groups = d.groups && d.groups.length ? d.groups : [{ label: "control midpoint", change_point_gate_ids: [] }];
    var xs = pts.map(function (p) { return p.t; });
    var ms = function (p, k) { return finite(p[k]) ? p[k] * 1000.0 : null; };
    var tol = (d.tolerance_pct || 0) / 100.0;
    var fmt = function (u, v) { return v == null ? "-" : v.toFixed(3) + " ms"; };
    var cols = [xs, pts.map(function (p) { return ms(p, "candidate_s"); })];
    var series = [
      { label: "gate time" },
      { label: "candidate", stroke: "#d62728", width: 0, value: fmt, points: { show: true, size: 6, fill: "#d62728" } }
    ];
    groups.forEach(function (g, k) {
      cols.push(pts.map(function (p) { return (p.group || 0) === k ? ms(p, "midpoint_s") : null; }));
      series.push({ label: g.label, stroke: GROUP_COLORS[k % GROUP_COLORS.length], width: 1.5, spanGaps: true,
                    value: fmt, points: { show: pts.length <= 300, size: 4 } });
    });
    var opts = {
      width: width(el), height: 320,
      scales: { x: xs.length ? paddedTimeScale(xs) : { time: true } },
      axes: [{ label: "gate date (local time)" }, { label: "step time (ms)", size: 70 }],
      series: series,
      hooks: { draw: [function (u) {
        drawGroupBands(u, pts, groups, tol);
        drawGroupChangePoints(u, pts, groups);
        el.dataset.xMin = String(u.scales.x.min);  // the drawn time range, seconds
        el.dataset.xMax = String(u.scales.x.max);
      }] }
    };
    var u = mount(el, el.id, opts, cols, groups.length);
    clickThrough(u, el, pts);
    el.dataset.numGates = String(pts.length);
    el.dataset.numGroups = String(groups.length);
    el.dataset.numChangePoints = String(groups.reduce(function (n, g) { return n + g.change_point_gate_ids.length; }, 0));
    return u;
  }

  // Control band (midpoint x (1 +/- drift/2)) and tolerance lines of each group, over that
  // group's gates only.
  function drawGroupBands(u, pts, groups, tol) {
    var ctx = u.ctx;
    ctx.save();
    groups.forEach(function (g, k) {
      var mine = pts.filter(function (p) { return (p.group || 0) === k && finite(p.midpoint_s); });
      if (!mine.length) { return; }
      var color = GROUP_COLORS[k % GROUP_COLORS.length];
      var x = function (p) { return u.valToPos(p.t, "x", true); };
      var y = function (v) { return u.valToPos(v * 1000.0, "y", true); };
      ctx.globalAlpha = 0.14;
      ctx.fillStyle = color;
      ctx.beginPath();
      mine.forEach(function (p, i) { var v = finite(p.control_max_s) ? p.control_max_s : p.midpoint_s; if (i) { ctx.lineTo(x(p), y(v)); } else { ctx.moveTo(x(p), y(v)); } });
      mine.slice().reverse().forEach(function (p) { ctx.lineTo(x(p), y(finite(p.control_min_s) ? p.control_min_s : p.midpoint_s)); });
      ctx.closePath();
      ctx.fill();
      ctx.globalAlpha = 0.7;
      ctx.strokeStyle = "#999";
      ctx.setLineDash([4, 4]);
      [1 + tol, 1 - tol].forEach(function (f) {
        ctx.beginPath();
        mine.forEach(function (p, i) { if (i) { ctx.lineTo(x(p), y(p.midpoint_s * f)); } else { ctx.moveTo(x(p), y(p.midpoint_s * f)); } });
        ctx.stroke();
      });
    });
    ctx.restore();
  }

  // A change point of a group: a dashed vertical line halfway between the group's gate
  // before it and the first gate of the new segment, in the group's colour.
  function drawGroupChangePoints(u, pts, groups) {
    var ctx = u.ctx;
    ctx.save();
    ctx.setLineDash([5, 4]);
    groups.forEach(function (g, k) {
      var mine = pts.filter(function (p) { return (p.group || 0) === k; });
      (g.change_point_gate_ids || []).forEach(function (gid) {
        var i = mine.findIndex(function (p) { return p.gate_id === gid; });
        if (i <= 0) { return; }
        var x = u.valToPos((mine[i - 1].t + mine[i].t) / 2, "x", true);
        ctx.strokeStyle = "#d62728";
        ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
      });
    });
    ctx.restore();
  }

  function drawChangePoints(u, cps, xs) {
    var ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = "#d62728";
    ctx.setLineDash([5, 4]);
    (cps || []).forEach(function (i) {
      if (i <= 0 || i >= xs.length) { return; }
      var x = u.valToPos((xs[i - 1] + xs[i]) / 2, "x", true);
      ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
    });
    ctx.restore();
  }

  function clickThrough(u, el, pts) {
    u.over.style.cursor = "pointer";
    u.over.addEventListener("click", function (e) {
      var i = u.cursor.idx;
      if (i == null) { i = u.posToIdx(e.offsetX); }
      if (i != null && pts[i] && pts[i].gate_id) { window.location.href = "/ledger/gates/" + pts[i].gate_id; }
    });
    el.title = "click a point to open its gate";
  }

  // ---- drift of a tracked branch (adopted measured heads only) -------------------------
  // data: {points: [{gate_id, t, median_s, adopted, verdict, sha}], segments: [{start, end,
  //        mean_s}], change_points, tolerance_pct}
  function renderDrift(el, d) {
    var pts = d.points;
    var xs = pts.map(function (p) { return p.t; });
    var adopted = pts.map(function (p) { return p.adopted ? p.median_s * 1000.0 : null; });
    var rejected = pts.map(function (p) { return p.adopted ? null : p.median_s * 1000.0; });
    var seg = new Array(pts.length).fill(null), hi = seg.slice(), lo = seg.slice();
    var tol = (d.tolerance_pct || 0) / 100.0;
    (d.segments || []).forEach(function (s) {
      for (var i = s.start; i < s.end && i < pts.length; i++) {
        seg[i] = s.mean_s * 1000.0; hi[i] = seg[i] * (1 + tol); lo[i] = seg[i] * (1 - tol);
      }
    });
    var fmt = function (u, v) { return v == null ? "-" : v.toFixed(3) + " ms"; };
    var opts = {
      width: width(el), height: 300,
      scales: { x: xs.length ? paddedTimeScale(xs) : { time: true } },
      axes: [{ label: "re-gate date (local time)" }, { label: "measured-head median (ms)", size: 70 }],
      series: [
        { label: "re-gate time" },
        { label: "measured head (adopted)", stroke: "#1f77b4", width: 1.5, spanGaps: true, value: fmt, points: { show: true, size: 6 } },
        { label: "not adopted (regression)", stroke: "#d62728", width: 0, value: fmt, points: { show: true, size: 7, fill: "#d62728" } },
        { label: "segment mean", stroke: "#2a9d8f", dash: [6, 3], value: fmt, points: { show: false } },
        { label: "tolerance +", stroke: "#999", dash: [3, 3], value: fmt, points: { show: false } },
        { label: "tolerance -", stroke: "#999", dash: [3, 3], value: fmt, points: { show: false } }
      ],
      bands: [{ series: [4, 5], fill: "rgba(42,157,143,0.10)" }],
      hooks: { draw: [function (u) { drawChangePoints(u, d.change_points, xs); }] }
    };
    var u = mount(el, el.id, opts, [xs, adopted, rejected, seg, hi, lo], 2);
    clickThrough(u, el, pts);
    return u;
  }

  window.axbgateRender = { steps: renderSteps, history: renderHistory, drift: renderDrift, readJSON: readJSON };

  function init() {
    var steps = document.getElementById("step-plot");
    if (steps) {
      var d = readJSON("step-plot-data");
      var overlay = false;
      renderSteps(steps, d, overlay);
      document.querySelectorAll("[data-plot-mode]").forEach(function (btn) {
        btn.addEventListener("click", function () {
          overlay = btn.dataset.plotMode === "overlay";
          renderSteps(steps, window.axbgateStepData || d, overlay);
        });
      });
    }
    var hist = document.getElementById("history-plot");
    if (hist) { renderHistory(hist, readJSON("history-plot-data")); }
    var drift = document.getElementById("drift-plot");
    if (drift) { renderDrift(drift, readJSON("drift-plot-data")); }
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", init); } else { init(); }
})();
