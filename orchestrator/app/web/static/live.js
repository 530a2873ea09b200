// Live gate page: while the gate is queued, submitted or running, poll
// /ledger/gates/{id}/live and update the progress table, the ETA and the per-step plot;
// reload the page once the gate has finished (verdicts, health report and decisions appear).
(function () {
  "use strict";
  var summary = document.getElementById("live-summary");
  if (!summary || summary.dataset.live !== "1") { return; }
  var gateId = summary.dataset.gateId;
  var polls = 0;

  function setText(id, text) {
    var el = document.getElementById(id);
    if (el) { el.textContent = text; }
  }

  function updateRuns(runs) {
    var body = document.querySelector("#live-progress tbody");
    runs.forEach(function (r) {
      var row = body.querySelector('tr[data-order="' + r.order + '"]');
      if (!row) {
        row = document.createElement("tr");
        row.dataset.order = r.order;
        row.innerHTML = "<td></td><td></td><td class='status'></td><td><progress></progress> <span class='steps'></span> / <span class='expected'></span></td>" +
          "<td class='num median'></td><td class='num mean'></td><td class='num eta'></td>";
        row.cells[0].textContent = r.order;
        row.cells[1].textContent = r.role || "?";
        body.appendChild(row);
      }
      row.querySelector(".status").textContent = r.status;
      var bar = row.querySelector("progress");
      bar.max = r.num_steps_expected;
      bar.value = r.num_steps;
      row.querySelector(".steps").textContent = r.num_steps;
      var expected = row.querySelector(".expected");
      if (expected) { expected.textContent = r.num_steps_expected; }
      row.querySelector(".median").textContent = r.median_step_s == null ? "-" : (r.median_step_s * 1000).toFixed(3) + " ms";
      row.querySelector(".mean").textContent = r.mean_step_s == null ? "-" : (r.mean_step_s * 1000).toFixed(3) + " ms";
      row.querySelector(".eta").textContent = r.eta_text;
    });
  }

  function poll() {
    fetch("/ledger/gates/" + gateId + "/live", { headers: { "Accept": "application/json" } })
      .then(function (resp) { return resp.ok ? resp.json() : null; })
      .then(function (d) {
        if (!d) { setTimeout(poll, 5000); return; }
        polls += 1;
        summary.dataset.polls = String(polls);
        setText("live-status", d.status);
        setText("gate-status", d.status);
        setText("live-steps", d.num_steps_done);
        setText("live-steps-total", d.num_steps_planned);
        setText("live-eta", d.eta_text);
        updateRuns(d.runs);
        var plot = document.getElementById("step-plot");
        if (plot && window.axbgateRender) {
          window.axbgateStepData = d.plot;
          var overlay = plot.dataset.mode === "overlay";
          window.axbgateRender.steps(plot, d.plot, overlay);
        }
        if (!d.active) { window.location.reload(); return; }
        setTimeout(poll, (d.poll_seconds || 2) * 1000);
      })
      .catch(function () { setTimeout(poll, 5000); });
  }
  setTimeout(poll, 1000);
})();
